// Package ast declares the syntax tree of Loom source files.
package ast

import "github.com/loomrt/loom/go/loom/token"

// Node is any syntax tree node; Pos is its first position.
type Node interface {
	Pos() token.Pos
}

// Expr is an expression (types are expressions too, as in go/ast).
type Expr interface {
	Node
	exprNode()
}

// Stmt is a statement.
type Stmt interface {
	Node
	stmtNode()
}

// Decl is an item of a kernel body: a const declaration, the launch program or the device body.
type Decl interface {
	Node
	declNode()
}

// File is one parsed source file.
type File struct {
	Name    string
	Kernels []*KernelDecl
	Consts  []*ConstDecl // file-level constants, visible in every kernel
}

// KernelDecl is `kernel name[spec params] { decls }`.
type KernelDecl struct {
	Kernel token.Pos
	Name   *Ident
	Spec   []*SpecParam
	Decls  []Decl
	Rbrace token.Pos
}

// SpecParam is one specialization constant `NAME type = default` (Type is nil and IsType true
// for a type-valued constant `T type = f32`).
type SpecParam struct {
	Name    *Ident
	IsType  bool
	Type    Expr
	Default Expr
}

// ConstDecl is `const NAME [type] = value`.
type ConstDecl struct {
	Const token.Pos
	Name  *Ident
	Type  Expr // may be nil
	Value Expr
}

// LaunchDecl is `launch(workload params) { body }`.
type LaunchDecl struct {
	Launch token.Pos
	Params []*Field
	Body   *BlockStmt
}

// DeviceDecl is `device(params) { body }`.
type DeviceDecl struct {
	Device token.Pos
	Params []*Field
	Body   *BlockStmt
}

// Field is a parameter `name type [access]`.
type Field struct {
	Name   *Ident
	Type   Expr
	Access *Ident // read, write or read_write; nil for scalars
}

// Pos implementations for declarations.

func (d *KernelDecl) Pos() token.Pos { return d.Kernel }
func (d *ConstDecl) Pos() token.Pos  { return d.Const }
func (d *LaunchDecl) Pos() token.Pos { return d.Launch }
func (d *DeviceDecl) Pos() token.Pos { return d.Device }
func (f *Field) Pos() token.Pos      { return f.Name.Pos() }
func (p *SpecParam) Pos() token.Pos  { return p.Name.Pos() }

func (*ConstDecl) declNode()  {}
func (*LaunchDecl) declNode() {}
func (*DeviceDecl) declNode() {}

// ---------------------------------------------------------------- expressions

type (
	// BadExpr stands for an expression that failed to parse.
	BadExpr struct{ From token.Pos }

	// Ident is a name.
	Ident struct {
		NamePos token.Pos
		Name    string
	}

	// BasicLit is an INT or FLOAT literal.
	BasicLit struct {
		ValuePos token.Pos
		Kind     token.Token
		Value    string
	}

	// ParenExpr is (X).
	ParenExpr struct {
		Lparen token.Pos
		X      Expr
	}

	// TupleExpr is (a, b, c): only as the value of grid and block.
	TupleExpr struct {
		Lparen token.Pos
		Elts   []Expr
	}

	// ListExpr is [a, b]: shapes and strides of views.
	ListExpr struct {
		Lbrack token.Pos
		Elts   []Expr
	}

	// UnaryExpr is Op X for - ! ^ +.
	UnaryExpr struct {
		OpPos token.Pos
		Op    token.Token
		X     Expr
	}

	// BinaryExpr is X Op Y.
	BinaryExpr struct {
		X     Expr
		OpPos token.Pos
		Op    token.Token
		Y     Expr
	}

	// CallExpr is Fun(Args): builtins and conversions.
	CallExpr struct {
		Fun    Expr
		Lparen token.Pos
		Args   []Expr
	}

	// IndexExpr is X[i, j, ...]; an index may be a SliceExpr for a vector access.
	IndexExpr struct {
		X       Expr
		Lbrack  token.Pos
		Indices []Expr
	}

	// SliceExpr is lo:hi inside an index list: the lanes lo..hi-1 of the last dimension.
	SliceExpr struct {
		Lo    Expr
		Colon token.Pos
		Hi    Expr
	}

	// SelectorExpr is X.Sel (thread_id.x).
	SelectorExpr struct {
		X   Expr
		Sel *Ident
	}

	// VecType is vec[Len]Elem.
	VecType struct {
		Vec  token.Pos
		Len  Expr
		Elem Expr
	}

	// ArrayType is [Len]Elem: local register arrays.
	ArrayType struct {
		Lbrack token.Pos
		Len    Expr
		Elem   Expr
	}

	// BufferType is buffer[Elem].
	BufferType struct {
		Buffer token.Pos
		Elem   Expr
	}
)

// Pos implementations for expressions.

func (x *BadExpr) Pos() token.Pos      { return x.From }
func (x *Ident) Pos() token.Pos        { return x.NamePos }
func (x *BasicLit) Pos() token.Pos     { return x.ValuePos }
func (x *ParenExpr) Pos() token.Pos    { return x.Lparen }
func (x *TupleExpr) Pos() token.Pos    { return x.Lparen }
func (x *ListExpr) Pos() token.Pos     { return x.Lbrack }
func (x *UnaryExpr) Pos() token.Pos    { return x.OpPos }
func (x *BinaryExpr) Pos() token.Pos   { return x.X.Pos() }
func (x *CallExpr) Pos() token.Pos     { return x.Fun.Pos() }
func (x *IndexExpr) Pos() token.Pos    { return x.X.Pos() }
func (x *SliceExpr) Pos() token.Pos    { return x.Lo.Pos() }
func (x *SelectorExpr) Pos() token.Pos { return x.X.Pos() }
func (x *VecType) Pos() token.Pos      { return x.Vec }
func (x *ArrayType) Pos() token.Pos    { return x.Lbrack }
func (x *BufferType) Pos() token.Pos   { return x.Buffer }

func (*BadExpr) exprNode()      {}
func (*Ident) exprNode()        {}
func (*BasicLit) exprNode()     {}
func (*ParenExpr) exprNode()    {}
func (*TupleExpr) exprNode()    {}
func (*ListExpr) exprNode()     {}
func (*UnaryExpr) exprNode()    {}
func (*BinaryExpr) exprNode()   {}
func (*CallExpr) exprNode()     {}
func (*IndexExpr) exprNode()    {}
func (*SliceExpr) exprNode()    {}
func (*SelectorExpr) exprNode() {}
func (*VecType) exprNode()      {}
func (*ArrayType) exprNode()    {}
func (*BufferType) exprNode()   {}

// ---------------------------------------------------------------- statements

type (
	// BadStmt stands for a statement that failed to parse.
	BadStmt struct{ From token.Pos }

	// BlockStmt is { List }.
	BlockStmt struct {
		Lbrace token.Pos
		List   []Stmt
		Rbrace token.Pos
	}

	// ConstStmt is a const declaration inside a body.
	ConstStmt struct{ Decl *ConstDecl }

	// VarStmt is `var name type [= value]` or `var name = value`.
	VarStmt struct {
		Var   token.Pos
		Name  *Ident
		Type  Expr
		Value Expr
	}

	// AssignStmt is Lhs Tok Rhs with Tok one of := = += -= ... .
	AssignStmt struct {
		Lhs    Expr
		TokPos token.Pos
		Tok    token.Token
		Rhs    Expr
	}

	// IfStmt is if Cond Body [else Else]; Else is a *BlockStmt or *IfStmt.
	IfStmt struct {
		If   token.Pos
		Cond Expr
		Body *BlockStmt
		Else Stmt
	}

	// ForStmt is for Key := Iter Body, Iter being range(...) or unroll(...).
	ForStmt struct {
		For  token.Pos
		Key  *Ident
		Iter Expr
		Body *BlockStmt
	}

	// AssumeStmt is assume Cond: a fact checked once at block entry.
	AssumeStmt struct {
		Assume token.Pos
		Cond   Expr
	}

	// ExprStmt is a call used as a statement (barrier()).
	ExprStmt struct{ X Expr }
)

// Pos implementations for statements.

func (s *BadStmt) Pos() token.Pos    { return s.From }
func (s *BlockStmt) Pos() token.Pos  { return s.Lbrace }
func (s *ConstStmt) Pos() token.Pos  { return s.Decl.Const }
func (s *VarStmt) Pos() token.Pos    { return s.Var }
func (s *AssignStmt) Pos() token.Pos { return s.Lhs.Pos() }
func (s *IfStmt) Pos() token.Pos     { return s.If }
func (s *ForStmt) Pos() token.Pos    { return s.For }
func (s *AssumeStmt) Pos() token.Pos { return s.Assume }
func (s *ExprStmt) Pos() token.Pos   { return s.X.Pos() }

func (*BadStmt) stmtNode()    {}
func (*BlockStmt) stmtNode()  {}
func (*ConstStmt) stmtNode()  {}
func (*VarStmt) stmtNode()    {}
func (*AssignStmt) stmtNode() {}
func (*IfStmt) stmtNode()     {}
func (*ForStmt) stmtNode()    {}
func (*AssumeStmt) stmtNode() {}
func (*ExprStmt) stmtNode()   {}

// Unparen strips parentheses.
func Unparen(e Expr) Expr {
	for {
		p, ok := e.(*ParenExpr)
		if !ok {
			return e
		}
		e = p.X
	}
}
