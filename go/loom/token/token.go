// Package token defines the lexical tokens of the Loom kernel language and source positions.
package token

import (
	"fmt"
	"strconv"
)

// Token is a lexical token kind.
type Token int

// Token kinds. Operators keep Go's spelling so a Go reader recognises them.
const (
	ILLEGAL Token = iota
	EOF
	COMMENT

	literalBeg
	IDENT  // fill
	INT    // 42, 0x2a, 1_000
	FLOAT  // 1.5, 1e-3
	STRING // "text" (only inside ERROR comments of tests; not a value)
	literalEnd

	operatorBeg
	ADD // +
	SUB // -
	MUL // *
	QUO // /
	REM // %
	AND // &
	OR  // |
	XOR // ^
	SHL // <<
	SHR // >>

	ADD_ASSIGN // +=
	SUB_ASSIGN // -=
	MUL_ASSIGN // *=
	QUO_ASSIGN // /=
	REM_ASSIGN // %=
	AND_ASSIGN // &=
	OR_ASSIGN  // |=
	XOR_ASSIGN // ^=
	SHL_ASSIGN // <<=
	SHR_ASSIGN // >>=

	LAND // &&
	LOR  // ||
	EQL  // ==
	LSS  // <
	GTR  // >
	NOT  // !
	NEQ  // !=
	LEQ  // <=
	GEQ  // >=

	ASSIGN // =
	DEFINE // :=

	LPAREN    // (
	LBRACK    // [
	LBRACE    // {
	COMMA     // ,
	PERIOD    // .
	RPAREN    // )
	RBRACK    // ]
	RBRACE    // }
	SEMICOLON // ; or an automatically inserted newline
	COLON     // :
	operatorEnd

	keywordBeg
	KERNEL
	LAUNCH
	DEVICE
	CONST
	VAR
	TYPE
	IF
	ELSE
	FOR
	ASSUME
	VEC
	BUFFER
	keywordEnd
)

var names = [...]string{
	ILLEGAL: "ILLEGAL",
	EOF:     "EOF",
	COMMENT: "COMMENT",
	IDENT:   "IDENT",
	INT:     "INT",
	FLOAT:   "FLOAT",
	STRING:  "STRING",

	ADD: "+", SUB: "-", MUL: "*", QUO: "/", REM: "%",
	AND: "&", OR: "|", XOR: "^", SHL: "<<", SHR: ">>",
	ADD_ASSIGN: "+=", SUB_ASSIGN: "-=", MUL_ASSIGN: "*=", QUO_ASSIGN: "/=", REM_ASSIGN: "%=",
	AND_ASSIGN: "&=", OR_ASSIGN: "|=", XOR_ASSIGN: "^=", SHL_ASSIGN: "<<=", SHR_ASSIGN: ">>=",
	LAND: "&&", LOR: "||", EQL: "==", LSS: "<", GTR: ">", NOT: "!", NEQ: "!=", LEQ: "<=", GEQ: ">=",
	ASSIGN: "=", DEFINE: ":=",
	LPAREN: "(", LBRACK: "[", LBRACE: "{", COMMA: ",", PERIOD: ".",
	RPAREN: ")", RBRACK: "]", RBRACE: "}", SEMICOLON: ";", COLON: ":",

	KERNEL: "kernel", LAUNCH: "launch", DEVICE: "device", CONST: "const", VAR: "var",
	TYPE: "type", IF: "if", ELSE: "else", FOR: "for", ASSUME: "assume", VEC: "vec",
	BUFFER: "buffer",
}

// String returns the token's spelling (operators, keywords) or its class name.
func (t Token) String() string {
	if t >= 0 && int(t) < len(names) && names[t] != "" {
		return names[t]
	}
	return "token(" + strconv.Itoa(int(t)) + ")"
}

// IsLiteral reports whether t is an identifier or a basic literal.
func (t Token) IsLiteral() bool { return literalBeg < t && t < literalEnd }

// IsOperator reports whether t is an operator or delimiter.
func (t Token) IsOperator() bool { return operatorBeg < t && t < operatorEnd }

// IsKeyword reports whether t is a keyword.
func (t Token) IsKeyword() bool { return keywordBeg < t && t < keywordEnd }

var keywords map[string]Token

func init() {
	keywords = make(map[string]Token)
	for t := keywordBeg + 1; t < keywordEnd; t++ {
		keywords[names[t]] = t
	}
}

// Lookup maps an identifier to its keyword token, or IDENT.
func Lookup(ident string) Token {
	if t, ok := keywords[ident]; ok {
		return t
	}
	return IDENT
}

// Binary operator precedences, as in Go.
const (
	LowestPrec  = 0
	UnaryPrec   = 6
	HighestPrec = 7
)

// Precedence returns the binary precedence of t, or LowestPrec if t is not a binary operator.
func (t Token) Precedence() int {
	switch t {
	case LOR:
		return 1
	case LAND:
		return 2
	case EQL, NEQ, LSS, LEQ, GTR, GEQ:
		return 3
	case ADD, SUB, OR, XOR:
		return 4
	case MUL, QUO, REM, SHL, SHR, AND:
		return 5
	}
	return LowestPrec
}

// Pos is a position in one source file: 1-based line and column (in bytes). The zero Pos is
// "no position".
type Pos struct {
	Line, Col int
}

// IsValid reports whether p is a real position.
func (p Pos) IsValid() bool { return p.Line > 0 }

// Before reports whether p comes before q.
func (p Pos) Before(q Pos) bool {
	return p.Line < q.Line || (p.Line == q.Line && p.Col < q.Col)
}

// Position is a Pos with its file name, printed as file:line:col.
type Position struct {
	Filename string
	Pos
}

// String formats the position as file:line:col (file omitted when empty).
func (p Position) String() string {
	s := p.Filename
	if p.IsValid() {
		if s != "" {
			s += ":"
		}
		s += fmt.Sprintf("%d:%d", p.Line, p.Col)
	}
	if s == "" {
		s = "-"
	}
	return s
}
