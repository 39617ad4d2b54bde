package types

import (
	"go/constant"

	"github.com/loomrt/loom/go/loom/ast"
	"github.com/loomrt/loom/go/loom/token"
)

// ObjKind classifies what a name denotes.
type ObjKind uint8

// Object kinds.
const (
	ObjConst   ObjKind = iota + 1 // constant (specialization constants included)
	ObjVar                        // variable or parameter
	ObjType                       // type name (basic types, type-valued specialization constants)
	ObjBuiltin                    // builtin function or predeclared value
)

// VarKind says where a variable comes from.
type VarKind uint8

// Variable kinds.
const (
	VarLocal    VarKind = iota + 1 // declared in a body with := or var
	VarLoop                        // the key of a for statement
	VarParam                       // a device parameter
	VarWorkload                    // a launch (workload) parameter
)

// Object is a named entity.
type Object struct {
	Kind ObjKind
	Name string
	Pos  token.Pos
	Type Type

	Val  constant.Value // ObjConst
	Spec bool           // ObjConst/ObjType: a specialization constant

	Builtin Builtin // ObjBuiltin

	VarKind  VarKind // ObjVar
	Mutable  bool    // a var declaration, or a := variable assigned again later
	Uniform  bool    // same value in every thread of a block
	Pure     bool    // computed without loads or mutable variables
	Index    int     // parameter index; for buffers also see Binding
	Binding  int     // buffer parameters: binding number (order among buffer parameters)
	TopLevel bool    // declared at the top level of the device body
}

// Mode says what kind of operand an expression is.
type Mode uint8

// Operand modes.
const (
	ModeInvalid  Mode = iota
	ModeNoValue       // a call without result (barrier())
	ModeConstant      // a compile-time constant
	ModeValue         // a run-time value
	ModeType          // a type expression
	ModeBuiltin       // a builtin function name
)

// TypeAndValue records the result of checking one expression.
type TypeAndValue struct {
	Mode    Mode
	Type    Type
	Value   constant.Value // ModeConstant
	Uniform bool
}

// Info holds what the checker learned about the syntax tree, for the IR builder.
type Info struct {
	Types   map[ast.Expr]TypeAndValue
	Uses    map[*ast.Ident]*Object
	Defs    map[*ast.Ident]*Object
	Calls   map[*ast.CallExpr]Builtin // builtin calls; BuiltinConversion for T(x)
	LoopVar map[*ast.ForStmt]*Object
}

func newInfo() *Info {
	return &Info{
		Types:   make(map[ast.Expr]TypeAndValue),
		Uses:    make(map[*ast.Ident]*Object),
		Defs:    make(map[*ast.Ident]*Object),
		Calls:   make(map[*ast.CallExpr]Builtin),
		LoopVar: make(map[*ast.ForStmt]*Object),
	}
}

// Builtin identifies a builtin function or predeclared value.
type Builtin uint8

// Builtins.
const (
	BuiltinNone Builtin = iota
	BuiltinConversion
	BuiltinCeilDiv
	BuiltinMin
	BuiltinMax
	BuiltinAbs
	BuiltinSqrt
	BuiltinExp
	BuiltinLog
	BuiltinTanh
	BuiltinSin
	BuiltinCos
	BuiltinFloor
	BuiltinCeil
	BuiltinFma
	BuiltinSelect
	BuiltinSizeof
	BuiltinLen
	BuiltinInf
	BuiltinReduceAdd
	BuiltinReduceMax
	BuiltinReduceMin
	BuiltinView
	BuiltinShared
	BuiltinBarrier
	BuiltinRange
	BuiltinUnroll
	BuiltinThreadID
	BuiltinBlockID
	BuiltinBlockDim
	BuiltinGridDim
)

var builtinNames = map[string]Builtin{
	"ceil_div": BuiltinCeilDiv, "min": BuiltinMin, "max": BuiltinMax, "abs": BuiltinAbs,
	"sqrt": BuiltinSqrt, "exp": BuiltinExp, "log": BuiltinLog, "tanh": BuiltinTanh,
	"sin": BuiltinSin, "cos": BuiltinCos, "floor": BuiltinFloor, "ceil": BuiltinCeil,
	"fma": BuiltinFma, "select": BuiltinSelect, "sizeof": BuiltinSizeof, "len": BuiltinLen,
	"inf": BuiltinInf, "reduce_add": BuiltinReduceAdd, "reduce_max": BuiltinReduceMax,
	"reduce_min": BuiltinReduceMin, "view": BuiltinView, "shared": BuiltinShared,
	"barrier": BuiltinBarrier, "range": BuiltinRange, "unroll": BuiltinUnroll,
	"thread_id": BuiltinThreadID, "block_id": BuiltinBlockID, "block_dim": BuiltinBlockDim,
	"grid_dim": BuiltinGridDim,
}

// Name returns the builtin's source name.
func (b Builtin) Name() string {
	for n, id := range builtinNames {
		if id == b {
			return n
		}
	}
	if b == BuiltinConversion {
		return "conversion"
	}
	return "?"
}

// launchBuiltins may be used in launch programs (integer arithmetic only).
var launchBuiltins = map[Builtin]bool{
	BuiltinCeilDiv: true, BuiltinMin: true, BuiltinMax: true, BuiltinSizeof: true,
	BuiltinSelect: true, BuiltinAbs: true,
}

// scope is a lexical scope.
type scope struct {
	parent *scope
	names  map[string]*Object
}

func newScope(parent *scope) *scope { return &scope{parent: parent, names: map[string]*Object{}} }

func (s *scope) lookup(name string) *Object {
	for ; s != nil; s = s.parent {
		if o := s.names[name]; o != nil {
			return o
		}
	}
	return nil
}

var universe *scope

func init() {
	universe = newScope(nil)
	for _, b := range Typ[I1 : Index+1] {
		universe.names[b.name] = &Object{Kind: ObjType, Name: b.name, Type: b}
	}
	universe.names["true"] = &Object{Kind: ObjConst, Name: "true", Type: Typ[UntypedBool], Val: constant.MakeBool(true)}
	universe.names["false"] = &Object{Kind: ObjConst, Name: "false", Type: Typ[UntypedBool], Val: constant.MakeBool(false)}
	for n, id := range builtinNames {
		universe.names[n] = &Object{Kind: ObjBuiltin, Name: n, Builtin: id}
	}
}
