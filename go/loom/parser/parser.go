// Package parser builds the syntax tree of a Loom source file. It never panics: malformed input
// yields a partial tree and a sorted scanner.ErrorList.
package parser

import (
	"fmt"

	"github.com/loomrt/loom/go/loom/ast"
	"github.com/loomrt/loom/go/loom/scanner"
	"github.com/loomrt/loom/go/loom/token"
)

// maxDepth bounds expression and statement nesting so hostile input cannot exhaust the stack.
const maxDepth = 200

// maxErrors stops parsing after this many diagnostics: later ones are mostly noise.
const maxErrors = 50

type parser struct {
	filename string
	scanner  scanner.Scanner
	errs     scanner.ErrorList

	pos token.Pos
	tok token.Token
	lit string

	depth   int
	stopped bool // too many errors or too deep: consume nothing more
}

// ParseFile parses one source file. The returned file is non-nil even when err is non-nil; err
// is a scanner.ErrorList.
func ParseFile(filename string, src []byte) (*ast.File, error) {
	p := &parser{filename: filename}
	p.scanner.Init(filename, src, &p.errs)
	p.next()
	f := p.parseFile()
	return f, p.errs.Err()
}

func (p *parser) next() {
	if p.stopped {
		p.tok = token.EOF
		return
	}
	for {
		p.pos, p.tok, p.lit = p.scanner.Scan()
		if p.tok != token.COMMENT {
			break
		}
	}
	if len(p.errs) >= maxErrors {
		p.stopped = true
		p.tok = token.EOF
	}
}

func (p *parser) errorAt(pos token.Pos, msg string) {
	if len(p.errs) >= maxErrors {
		p.stopped = true
		p.tok = token.EOF
		return
	}
	// One error per line keeps cascades out of the report.
	if n := len(p.errs); n > 0 && p.errs[n-1].Pos.Line == pos.Line {
		return
	}
	p.errs.Add(token.Position{Filename: p.filename, Pos: pos}, msg)
}

func (p *parser) tokDesc() string {
	switch {
	case p.tok == token.SEMICOLON && p.lit == "\n":
		return "newline"
	case p.tok == token.EOF:
		return "end of file"
	case p.tok.IsLiteral():
		return p.tok.String() + " " + p.lit
	case p.tok.IsKeyword():
		return "keyword " + p.tok.String()
	}
	return "'" + p.tok.String() + "'"
}

func (p *parser) errorExpected(what string) {
	p.errorAt(p.pos, fmt.Sprintf("expected %s, found %s", what, p.tokDesc()))
}

func (p *parser) expect(tok token.Token) token.Pos {
	pos := p.pos
	if p.tok != tok {
		p.errorExpected("'" + tok.String() + "'")
	} else {
		p.next()
	}
	return pos
}

func (p *parser) got(tok token.Token) bool {
	if p.tok == tok {
		p.next()
		return true
	}
	return false
}

// expectSemi accepts a statement terminator: ';', a newline, or nothing before ')' or '}'.
func (p *parser) expectSemi() {
	switch p.tok {
	case token.RPAREN, token.RBRACE:
		return
	case token.SEMICOLON:
		p.next()
	default:
		p.errorExpected("';' or newline")
		p.syncStmt()
	}
}

// syncStmt skips to the next likely statement start.
func (p *parser) syncStmt() {
	for {
		switch p.tok {
		case token.EOF, token.RBRACE:
			return
		case token.SEMICOLON:
			p.next()
			return
		case token.IF, token.FOR, token.VAR, token.CONST, token.ASSUME:
			return
		}
		p.next()
	}
}

func (p *parser) enter() bool {
	p.depth++
	if p.depth > maxDepth {
		p.errorAt(p.pos, "nesting too deep")
		p.stopped = true
		p.tok = token.EOF
		return false
	}
	return true
}

func (p *parser) leave() { p.depth-- }

// ---------------------------------------------------------------- declarations

func (p *parser) parseFile() *ast.File {
	f := &ast.File{Name: p.filename}
	for p.tok != token.EOF {
		switch p.tok {
		case token.SEMICOLON:
			p.next()
		case token.KERNEL:
			if k := p.parseKernel(); k != nil {
				f.Kernels = append(f.Kernels, k)
			}
		case token.CONST:
			f.Consts = append(f.Consts, p.parseConstDecl())
			p.expectSemi()
		default:
			p.errorExpected("kernel or const declaration")
			// Skip to the next top-level keyword.
			for p.tok != token.EOF && p.tok != token.KERNEL && p.tok != token.CONST {
				p.next()
			}
		}
	}
	return f
}

func (p *parser) parseIdent() *ast.Ident {
	pos, name := p.pos, "_"
	if p.tok == token.IDENT {
		name = p.lit
		p.next()
	} else {
		p.errorExpected("identifier")
	}
	return &ast.Ident{NamePos: pos, Name: name}
}

func (p *parser) parseKernel() *ast.KernelDecl {
	k := &ast.KernelDecl{Kernel: p.expect(token.KERNEL)}
	k.Name = p.parseIdent()
	if p.tok == token.LBRACK {
		p.next()
		for p.tok != token.RBRACK && p.tok != token.EOF {
			sp := &ast.SpecParam{Name: p.parseIdent()}
			if p.got(token.TYPE) {
				sp.IsType = true
			} else {
				sp.Type = p.parseType()
			}
			p.expect(token.ASSIGN)
			if sp.IsType {
				sp.Default = p.parseType()
			} else {
				sp.Default = p.parseExpr()
			}
			k.Spec = append(k.Spec, sp)
			if !p.got(token.COMMA) {
				break
			}
		}
		p.expect(token.RBRACK)
	}
	p.expect(token.LBRACE)
	for p.tok != token.RBRACE && p.tok != token.EOF {
		switch p.tok {
		case token.SEMICOLON:
			p.next()
		case token.CONST:
			k.Decls = append(k.Decls, p.parseConstDecl())
			p.expectSemi()
		case token.LAUNCH:
			d := &ast.LaunchDecl{Launch: p.pos}
			p.next()
			d.Params = p.parseParams()
			d.Body = p.parseBlock()
			k.Decls = append(k.Decls, d)
			p.expectSemi()
		case token.DEVICE:
			d := &ast.DeviceDecl{Device: p.pos}
			p.next()
			d.Params = p.parseParams()
			d.Body = p.parseBlock()
			k.Decls = append(k.Decls, d)
			p.expectSemi()
		default:
			p.errorExpected("const, launch or device")
			for p.tok != token.EOF && p.tok != token.RBRACE && p.tok != token.CONST &&
				p.tok != token.LAUNCH && p.tok != token.DEVICE && p.tok != token.KERNEL {
				p.next()
			}
			if p.tok == token.KERNEL {
				return k
			}
		}
	}
	k.Rbrace = p.expect(token.RBRACE)
	return k
}

func (p *parser) parseConstDecl() *ast.ConstDecl {
	d := &ast.ConstDecl{Const: p.expect(token.CONST)}
	d.Name = p.parseIdent()
	if p.tok != token.ASSIGN {
		d.Type = p.parseType()
	}
	p.expect(token.ASSIGN)
	d.Value = p.parseExpr()
	return d
}

func (p *parser) parseParams() []*ast.Field {
	var list []*ast.Field
	p.expect(token.LPAREN)
	for p.tok != token.RPAREN && p.tok != token.EOF {
		f := &ast.Field{Name: p.parseIdent()}
		f.Type = p.parseType()
		if p.tok == token.IDENT {
			f.Access = p.parseIdent()
		}
		list = append(list, f)
		if !p.got(token.COMMA) {
			break
		}
	}
	p.expect(token.RPAREN)
	return list
}

// ---------------------------------------------------------------- types

func (p *parser) parseType() ast.Expr {
	if !p.enter() {
		return &ast.BadExpr{From: p.pos}
	}
	defer p.leave()
	switch p.tok {
	case token.IDENT:
		return p.parseIdent()
	case token.VEC:
		return p.parseVecType()
	case token.BUFFER:
		t := &ast.BufferType{Buffer: p.pos}
		p.next()
		p.expect(token.LBRACK)
		t.Elem = p.parseType()
		p.expect(token.RBRACK)
		return t
	case token.LBRACK:
		t := &ast.ArrayType{Lbrack: p.pos}
		p.next()
		t.Len = p.parseExpr()
		p.expect(token.RBRACK)
		t.Elem = p.parseType()
		return t
	}
	pos := p.pos
	p.errorExpected("type")
	return &ast.BadExpr{From: pos}
}

func (p *parser) parseVecType() ast.Expr {
	t := &ast.VecType{Vec: p.expect(token.VEC)}
	p.expect(token.LBRACK)
	t.Len = p.parseExpr()
	p.expect(token.RBRACK)
	t.Elem = p.parseType()
	return t
}

// ---------------------------------------------------------------- statements

func (p *parser) parseBlock() *ast.BlockStmt {
	b := &ast.BlockStmt{Lbrace: p.expect(token.LBRACE)}
	if !p.enter() {
		return b
	}
	defer p.leave()
	for p.tok != token.RBRACE && p.tok != token.EOF {
		if p.tok == token.SEMICOLON {
			p.next()
			continue
		}
		if s := p.parseStmt(); s != nil {
			b.List = append(b.List, s)
		}
	}
	b.Rbrace = p.expect(token.RBRACE)
	return b
}

func (p *parser) parseStmt() ast.Stmt {
	switch p.tok {
	case token.CONST:
		s := &ast.ConstStmt{Decl: p.parseConstDecl()}
		p.expectSemi()
		return s
	case token.VAR:
		s := &ast.VarStmt{Var: p.pos}
		p.next()
		s.Name = p.parseIdent()
		if p.tok != token.ASSIGN {
			s.Type = p.parseType()
		}
		if p.got(token.ASSIGN) {
			s.Value = p.parseExpr()
		}
		p.expectSemi()
		return s
	case token.IF:
		s := p.parseIf()
		p.expectSemi()
		return s
	case token.FOR:
		s := &ast.ForStmt{For: p.pos}
		p.next()
		s.Key = p.parseIdent()
		p.expect(token.DEFINE)
		s.Iter = p.parseExpr()
		s.Body = p.parseBlock()
		p.expectSemi()
		return s
	case token.ASSUME:
		s := &ast.AssumeStmt{Assume: p.pos}
		p.next()
		s.Cond = p.parseExpr()
		p.expectSemi()
		return s
	case token.LBRACE:
		s := p.parseBlock()
		p.expectSemi()
		return s
	}
	pos := p.pos
	x := p.parseExpr()
	if _, bad := x.(*ast.BadExpr); bad {
		p.syncStmt()
		return &ast.BadStmt{From: pos}
	}
	switch p.tok {
	case token.DEFINE, token.ASSIGN, token.ADD_ASSIGN, token.SUB_ASSIGN, token.MUL_ASSIGN,
		token.QUO_ASSIGN, token.REM_ASSIGN, token.AND_ASSIGN, token.OR_ASSIGN, token.XOR_ASSIGN,
		token.SHL_ASSIGN, token.SHR_ASSIGN:
		s := &ast.AssignStmt{Lhs: x, TokPos: p.pos, Tok: p.tok}
		p.next()
		s.Rhs = p.parseExpr()
		p.expectSemi()
		return s
	}
	p.expectSemi()
	return &ast.ExprStmt{X: x}
}

func (p *parser) parseIf() *ast.IfStmt {
	s := &ast.IfStmt{If: p.expect(token.IF)}
	if !p.enter() {
		return s
	}
	defer p.leave()
	s.Cond = p.parseExpr()
	s.Body = p.parseBlock()
	if p.got(token.ELSE) {
		switch p.tok {
		case token.IF:
			s.Else = p.parseIf()
		case token.LBRACE:
			s.Else = p.parseBlock()
		default:
			p.errorExpected("if or block after else")
		}
	}
	return s
}

// ---------------------------------------------------------------- expressions

func (p *parser) parseExpr() ast.Expr {
	return p.parseBinary(token.LowestPrec + 1)
}

func (p *parser) parseBinary(prec int) ast.Expr {
	if !p.enter() {
		return &ast.BadExpr{From: p.pos}
	}
	defer p.leave()
	x := p.parseUnary()
	for {
		op := p.tok
		oprec := op.Precedence()
		if oprec < prec {
			return x
		}
		pos := p.pos
		p.next()
		y := p.parseBinary(oprec + 1)
		x = &ast.BinaryExpr{X: x, OpPos: pos, Op: op, Y: y}
	}
}

func (p *parser) parseUnary() ast.Expr {
	switch p.tok {
	case token.SUB, token.ADD, token.NOT, token.XOR:
		if !p.enter() {
			return &ast.BadExpr{From: p.pos}
		}
		defer p.leave()
		pos, op := p.pos, p.tok
		p.next()
		return &ast.UnaryExpr{OpPos: pos, Op: op, X: p.parseUnary()}
	}
	return p.parsePrimary()
}

func (p *parser) parseOperand() ast.Expr {
	switch p.tok {
	case token.IDENT:
		return p.parseIdent()
	case token.INT, token.FLOAT:
		x := &ast.BasicLit{ValuePos: p.pos, Kind: p.tok, Value: p.lit}
		p.next()
		return x
	case token.LPAREN:
		lparen := p.pos
		p.next()
		x := p.parseExpr()
		if p.tok == token.COMMA {
			t := &ast.TupleExpr{Lparen: lparen, Elts: []ast.Expr{x}}
			for p.got(token.COMMA) && p.tok != token.RPAREN && p.tok != token.EOF {
				t.Elts = append(t.Elts, p.parseExpr())
			}
			p.expect(token.RPAREN)
			return t
		}
		p.expect(token.RPAREN)
		return &ast.ParenExpr{Lparen: lparen, X: x}
	case token.LBRACK:
		l := &ast.ListExpr{Lbrack: p.pos}
		p.next()
		for p.tok != token.RBRACK && p.tok != token.EOF {
			l.Elts = append(l.Elts, p.parseExpr())
			if !p.got(token.COMMA) {
				break
			}
		}
		p.expect(token.RBRACK)
		return l
	case token.VEC:
		return p.parseVecType()
	}
	pos := p.pos
	p.errorExpected("expression")
	if p.tok != token.EOF && p.tok != token.RBRACE && p.tok != token.SEMICOLON {
		p.next() // make progress
	}
	return &ast.BadExpr{From: pos}
}

func (p *parser) parsePrimary() ast.Expr {
	x := p.parseOperand()
	for n := 0; ; n++ {
		if n > maxDepth {
			p.errorAt(p.pos, "expression too long")
			p.stopped = true
			p.tok = token.EOF
			return x
		}
		switch p.tok {
		case token.PERIOD:
			p.next()
			x = &ast.SelectorExpr{X: x, Sel: p.parseIdent()}
		case token.LPAREN:
			call := &ast.CallExpr{Fun: x, Lparen: p.pos}
			p.next()
			for p.tok != token.RPAREN && p.tok != token.EOF {
				if p.tok == token.VEC || p.tok == token.BUFFER {
					call.Args = append(call.Args, p.parseType())
				} else {
					call.Args = append(call.Args, p.parseExpr())
				}
				if !p.got(token.COMMA) {
					break
				}
			}
			p.expect(token.RPAREN)
			x = call
		case token.LBRACK:
			ix := &ast.IndexExpr{X: x, Lbrack: p.pos}
			p.next()
			for p.tok != token.RBRACK && p.tok != token.EOF {
				e := p.parseExpr()
				if p.tok == token.COLON {
					colon := p.pos
					p.next()
					e = &ast.SliceExpr{Lo: e, Colon: colon, Hi: p.parseExpr()}
				}
				ix.Indices = append(ix.Indices, e)
				if !p.got(token.COMMA) {
					break
				}
			}
			p.expect(token.RBRACK)
			if len(ix.Indices) == 0 {
				p.errorAt(ix.Lbrack, "missing index")
			}
			x = ix
		default:
			return x
		}
	}
}
