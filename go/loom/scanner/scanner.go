// Package scanner turns Loom source text into tokens, inserting semicolons at line ends the way
// Go's scanner does, and defines the ErrorList every compiler stage reports into.
package scanner

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/loomrt/loom/go/loom/token"
)

// Scanner tokenizes one source file. The zero value is not usable; call Init.
type Scanner struct {
	filename string
	src      []byte
	errs     *ErrorList

	ch       rune // current character, -1 at end
	offset   int  // offset of ch
	rdOffset int  // offset after ch
	line     int
	lineOff  int // offset of the current line's start

	insertSemi bool
}

// Init prepares s to scan src; errors are appended to errs.
func (s *Scanner) Init(filename string, src []byte, errs *ErrorList) {
	s.filename = filename
	s.src = src
	s.errs = errs
	s.line = 1
	s.lineOff = 0
	s.offset = 0
	s.rdOffset = 0
	s.insertSemi = false
	s.ch = ' '
	s.next()
}

func (s *Scanner) next() {
	if s.rdOffset >= len(s.src) {
		s.offset = len(s.src)
		if s.ch == '\n' {
			s.line++
			s.lineOff = s.offset
		}
		s.ch = -1
		return
	}
	s.offset = s.rdOffset
	if s.ch == '\n' {
		s.line++
		s.lineOff = s.offset
	}
	r, w := rune(s.src[s.rdOffset]), 1
	if r >= utf8.RuneSelf {
		r, w = utf8.DecodeRune(s.src[s.rdOffset:])
		if r == utf8.RuneError && w == 1 {
			s.error(s.pos(), "invalid UTF-8 encoding")
		}
	} else if r == 0 {
		s.error(s.pos(), "invalid NUL character")
	}
	s.rdOffset += w
	s.ch = r
}

func (s *Scanner) peek() byte {
	if s.rdOffset < len(s.src) {
		return s.src[s.rdOffset]
	}
	return 0
}

func (s *Scanner) pos() token.Pos {
	return token.Pos{Line: s.line, Col: s.offset - s.lineOff + 1}
}

func (s *Scanner) error(p token.Pos, msg string) {
	if s.errs != nil {
		s.errs.Add(token.Position{Filename: s.filename, Pos: p}, msg)
	}
}

func isLetter(ch rune) bool {
	return 'a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || ch == '_' ||
		ch >= utf8.RuneSelf && unicode.IsLetter(ch)
}

func isDigit(ch rune) bool {
	return '0' <= ch && ch <= '9' || ch >= utf8.RuneSelf && unicode.IsDigit(ch)
}

// Scan returns the next token, its position and its literal text (identifiers, literals,
// comments; "\n" for an inserted semicolon). Comments are returned as COMMENT tokens.
func (s *Scanner) Scan() (pos token.Pos, tok token.Token, lit string) {
scanAgain:
	for s.ch == ' ' || s.ch == '\t' || s.ch == '\r' || (s.ch == '\n' && !s.insertSemi) {
		s.next()
	}
	pos = s.pos()
	insertSemi := false
	switch ch := s.ch; {
	case isLetter(ch):
		lit = s.scanIdent()
		tok = token.Lookup(lit)
		if tok == token.IDENT {
			insertSemi = true
		}
	case '0' <= ch && ch <= '9' || ch == '.' && '0' <= s.peek() && s.peek() <= '9':
		insertSemi = true
		tok, lit = s.scanNumber()
	default:
		s.next()
		switch ch {
		case -1:
			if s.insertSemi {
				s.insertSemi = false
				return pos, token.SEMICOLON, "\n"
			}
			tok = token.EOF
		case '\n':
			s.insertSemi = false
			return pos, token.SEMICOLON, "\n"
		case '"':
			insertSemi = true
			tok, lit = token.STRING, s.scanString(pos)
		case '/':
			if s.ch == '/' || s.ch == '*' {
				if s.insertSemi && s.commentEndsLine() {
					// The comment acts like a newline: emit the semicolon first and rescan.
					s.rewindTo(pos)
					s.insertSemi = false
					return pos, token.SEMICOLON, "\n"
				}
				lit = s.scanComment(pos)
				goto scanAgain
			}
			tok = s.switch2(token.QUO, token.QUO_ASSIGN)
		case '(':
			tok = token.LPAREN
		case ')':
			tok, insertSemi = token.RPAREN, true
		case '[':
			tok = token.LBRACK
		case ']':
			tok, insertSemi = token.RBRACK, true
		case '{':
			tok = token.LBRACE
		case '}':
			tok, insertSemi = token.RBRACE, true
		case ',':
			tok = token.COMMA
		case ';':
			tok, lit = token.SEMICOLON, ";"
		case '.':
			tok = token.PERIOD
		case ':':
			tok = s.switch2(token.COLON, token.DEFINE)
		case '+':
			tok = s.switch2(token.ADD, token.ADD_ASSIGN)
		case '-':
			tok = s.switch2(token.SUB, token.SUB_ASSIGN)
		case '*':
			tok = s.switch2(token.MUL, token.MUL_ASSIGN)
		case '%':
			tok = s.switch2(token.REM, token.REM_ASSIGN)
		case '^':
			tok = s.switch2(token.XOR, token.XOR_ASSIGN)
		case '<':
			if s.ch == '<' {
				s.next()
				tok = s.switch2(token.SHL, token.SHL_ASSIGN)
			} else {
				tok = s.switch2(token.LSS, token.LEQ)
			}
		case '>':
			if s.ch == '>' {
				s.next()
				tok = s.switch2(token.SHR, token.SHR_ASSIGN)
			} else {
				tok = s.switch2(token.GTR, token.GEQ)
			}
		case '=':
			tok = s.switch2(token.ASSIGN, token.EQL)
		case '!':
			tok = s.switch2(token.NOT, token.NEQ)
		case '&':
			if s.ch == '&' {
				s.next()
				tok = token.LAND
			} else {
				tok = s.switch2(token.AND, token.AND_ASSIGN)
			}
		case '|':
			if s.ch == '|' {
				s.next()
				tok = token.LOR
			} else {
				tok = s.switch2(token.OR, token.OR_ASSIGN)
			}
		default:
			s.error(pos, fmt.Sprintf("invalid character %#U", ch))
			tok = token.ILLEGAL
			lit = string(ch)
			insertSemi = s.insertSemi
		}
	}
	s.insertSemi = insertSemi
	return
}

// rewindTo resets the scanner so that the next Scan starts at the comment at p again.
func (s *Scanner) rewindTo(p token.Pos) {
	// p is on the current line: recompute the offset from the line start.
	off := s.lineOff + p.Col - 1
	s.rdOffset = off
	s.ch = ' '
	s.next()
}

// commentEndsLine reports whether the comment starting at the current '/' (already consumed)
// reaches the end of the line: a // comment always does, a /* */ comment if a newline is inside
// it or right after it.
func (s *Scanner) commentEndsLine() bool {
	if s.ch == '/' {
		return true
	}
	// /* ... */
	i := s.rdOffset
	for i+1 < len(s.src) {
		if s.src[i] == '\n' {
			return true
		}
		if s.src[i] == '*' && s.src[i+1] == '/' {
			i += 2
			for i < len(s.src) && (s.src[i] == ' ' || s.src[i] == '\t' || s.src[i] == '\r') {
				i++
			}
			return i >= len(s.src) || s.src[i] == '\n'
		}
		i++
	}
	return true
}

func (s *Scanner) scanComment(pos token.Pos) string {
	start := s.offset - 1
	if s.ch == '/' {
		for s.ch != '\n' && s.ch >= 0 {
			s.next()
		}
		return string(s.src[start:s.offset])
	}
	s.next() // skip '*'
	for {
		if s.ch < 0 {
			s.error(pos, "comment not terminated")
			return string(s.src[start:s.offset])
		}
		ch := s.ch
		s.next()
		if ch == '*' && s.ch == '/' {
			s.next()
			return string(s.src[start:s.offset])
		}
	}
}

func (s *Scanner) scanIdent() string {
	start := s.offset
	for isLetter(s.ch) || isDigit(s.ch) {
		s.next()
	}
	return string(s.src[start:s.offset])
}

func digitVal(ch rune) int {
	switch {
	case '0' <= ch && ch <= '9':
		return int(ch - '0')
	case 'a' <= ch && ch <= 'f':
		return int(ch - 'a' + 10)
	case 'A' <= ch && ch <= 'F':
		return int(ch - 'A' + 10)
	}
	return 16
}

func (s *Scanner) digits(base int) (sawDigit bool) {
	for {
		if s.ch == '_' {
			s.next()
			continue
		}
		if digitVal(s.ch) >= base {
			return
		}
		sawDigit = true
		s.next()
	}
}

func (s *Scanner) scanNumber() (token.Token, string) {
	start := s.offset
	pos := s.pos()
	tok := token.INT
	if s.ch == '0' && (s.peek() == 'x' || s.peek() == 'X' || s.peek() == 'b' || s.peek() == 'B' || s.peek() == 'o' || s.peek() == 'O') {
		s.next()
		base := 16
		switch s.ch {
		case 'b', 'B':
			base = 2
		case 'o', 'O':
			base = 8
		}
		s.next()
		if !s.digits(base) {
			s.error(pos, "number has no digits")
		}
	} else {
		s.digits(10)
		if s.ch == '.' {
			tok = token.FLOAT
			s.next()
			s.digits(10)
		}
		if s.ch == 'e' || s.ch == 'E' {
			tok = token.FLOAT
			s.next()
			if s.ch == '+' || s.ch == '-' {
				s.next()
			}
			if !s.digits(10) {
				s.error(pos, "exponent has no digits")
			}
		}
	}
	if isLetter(s.ch) || isDigit(s.ch) {
		// A malformed literal such as 12abc or 0x1g: report it as one token.
		for isLetter(s.ch) || isDigit(s.ch) {
			s.next()
		}
		s.error(pos, fmt.Sprintf("malformed number %q", string(s.src[start:s.offset])))
	}
	return tok, string(s.src[start:s.offset])
}

func (s *Scanner) scanString(pos token.Pos) string {
	start := s.offset - 1
	for {
		ch := s.ch
		if ch == '\n' || ch < 0 {
			s.error(pos, "string literal not terminated")
			break
		}
		s.next()
		if ch == '"' {
			break
		}
		if ch == '\\' && s.ch >= 0 && s.ch != '\n' {
			s.next()
		}
	}
	return string(s.src[start:s.offset])
}

func (s *Scanner) switch2(tok0, tok1 token.Token) token.Token {
	if s.ch == '=' {
		s.next()
		return tok1
	}
	return tok0
}
