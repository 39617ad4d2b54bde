package types

import (
	"bytes"
	"fmt"
	"go/constant"
	gotoken "go/token"
	"math"
	"strconv"

	"github.com/loomrt/loom/go/loom/ast"
	"github.com/loomrt/loom/go/loom/token"
)

type operand struct {
	mode    Mode
	typ     Type
	val     constant.Value
	expr    ast.Expr
	uniform bool
	builtin Builtin
}

// maxConstBits bounds the size of constant integers (as Go's compiler does).
const maxConstBits = 512

// tooBig reports whether a constant exceeds maxConstBits.
func tooBig(v constant.Value) bool {
	if v == nil {
		return false
	}
	switch v.Kind() {
	case constant.Int:
		return constant.BitLen(v) > maxConstBits
	case constant.Float:
		// Float constants are kept as exact rationals; bound numerator and denominator.
		return constant.BitLen(constant.Num(v)) > 4*maxConstBits || constant.BitLen(constant.Denom(v)) > 4*maxConstBits
	}
	return false
}

func (c *checker) record(x *operand) {
	if x.expr == nil || c.info == nil {
		return
	}
	c.info.Types[x.expr] = TypeAndValue{Mode: x.mode, Type: x.typ, Value: x.val, Uniform: x.uniform}
}

func invalid(e ast.Expr) operand { return operand{mode: ModeInvalid, typ: Typ[Invalid], expr: e} }

// expr checks e and records its type.
func (c *checker) expr(s *scope, e ast.Expr) operand {
	x := c.expr0(s, e)
	x.expr = e
	if x.mode == ModeConstant && tooBig(x.val) {
		c.errorf(e.Pos(), "constant %s overflows", exprString(e))
		x.mode = ModeInvalid
	}
	if x.typ == nil {
		x.typ = Typ[Invalid]
	}
	if x.mode == ModeInvalid {
		x.typ = Typ[Invalid]
	}
	c.record(&x)
	return x
}

func (c *checker) expr0(s *scope, e ast.Expr) operand {
	switch e := e.(type) {
	case nil:
		return invalid(e)
	case *ast.BadExpr:
		return invalid(e)
	case *ast.Ident:
		return c.ident(s, e)
	case *ast.BasicLit:
		return c.basicLit(e)
	case *ast.ParenExpr:
		x := c.expr(s, e.X)
		return x
	case *ast.UnaryExpr:
		x := c.expr(s, e.X)
		return c.unary(e, x)
	case *ast.BinaryExpr:
		x := c.expr(s, e.X)
		y := c.expr(s, e.Y)
		return c.binaryOp(e, e.Op, e.OpPos, x, y)
	case *ast.CallExpr:
		return c.call(s, e)
	case *ast.IndexExpr:
		t := c.indexExpr(s, e, accessLoad)
		if IsInvalid(t) {
			return invalid(e)
		}
		return operand{mode: ModeValue, typ: t}
	case *ast.SelectorExpr:
		return c.selector(s, e)
	case *ast.VecType, *ast.ArrayType, *ast.BufferType:
		t := c.typExpr(s, e)
		if IsInvalid(t) {
			return invalid(e)
		}
		return operand{mode: ModeType, typ: t}
	case *ast.TupleExpr:
		c.errorf(e.Pos(), "tuples only appear as grid and block values")
		for _, el := range e.Elts {
			c.expr(s, el)
		}
		return invalid(e)
	case *ast.ListExpr:
		c.errorf(e.Pos(), "lists only appear as view shapes and strides")
		for _, el := range e.Elts {
			c.expr(s, el)
		}
		return invalid(e)
	case *ast.SliceExpr:
		c.errorf(e.Pos(), "a slice lo:hi only appears as the last index of a buffer or view")
		return invalid(e)
	}
	c.errorf(e.Pos(), "unexpected expression")
	return invalid(e)
}

func (c *checker) ident(s *scope, id *ast.Ident) operand {
	if id.Name == "_" {
		c.errorf(id.Pos(), "cannot use _ as a value")
		return invalid(id)
	}
	obj := s.lookup(id.Name)
	if obj == nil {
		if c.inLaunch {
			for _, p := range c.kernel.Params {
				if p.Name == id.Name {
					c.errorf(id.Pos(), "launch programs see only their workload parameters, not device parameter %s", id.Name)
					return invalid(id)
				}
			}
		}
		c.errorf(id.Pos(), "undefined: %s", id.Name)
		return invalid(id)
	}
	c.info.Uses[id] = obj
	switch obj.Kind {
	case ObjConst:
		if IsInvalid(obj.Type) {
			return invalid(id)
		}
		return operand{mode: ModeConstant, typ: obj.Type, val: obj.Val, uniform: true}
	case ObjType:
		if IsInvalid(obj.Type) {
			return invalid(id)
		}
		return operand{mode: ModeType, typ: obj.Type}
	case ObjBuiltin:
		if c.inLaunch && !launchBuiltins[obj.Builtin] {
			c.errorf(id.Pos(), "%s is not available in launch programs", id.Name)
			return invalid(id)
		}
		return operand{mode: ModeBuiltin, builtin: obj.Builtin, typ: Typ[Invalid]}
	case ObjVar:
		if IsInvalid(obj.Type) {
			return invalid(id)
		}
		if c.inLaunch && obj.VarKind == VarParam {
			c.errorf(id.Pos(), "launch programs see only their workload parameters, not device parameter %s", id.Name)
			return invalid(id)
		}
		return operand{mode: ModeValue, typ: obj.Type, uniform: obj.Uniform && !obj.Mutable}
	}
	return invalid(id)
}

func (c *checker) basicLit(e *ast.BasicLit) operand {
	switch e.Kind {
	case token.INT:
		v := constant.MakeFromLiteral(stripUnderscores(e.Value), gotoken.INT, 0)
		if v.Kind() == constant.Unknown {
			c.errorf(e.Pos(), "malformed integer literal %s", e.Value)
			return invalid(e)
		}
		return operand{mode: ModeConstant, typ: Typ[UntypedInt], val: v, uniform: true}
	case token.FLOAT:
		v := constant.MakeFromLiteral(stripUnderscores(e.Value), gotoken.FLOAT, 0)
		if v.Kind() == constant.Unknown {
			c.errorf(e.Pos(), "malformed float literal %s", e.Value)
			return invalid(e)
		}
		return operand{mode: ModeConstant, typ: Typ[UntypedFloat], val: v, uniform: true}
	}
	c.errorf(e.Pos(), "unexpected literal %s", e.Value)
	return invalid(e)
}

func stripUnderscores(s string) string {
	return string(bytes.ReplaceAll([]byte(s), []byte("_"), nil))
}

func isIntegral(v constant.Value) bool {
	if v.Kind() == constant.Int {
		return true
	}
	if v.Kind() == constant.Float {
		return constant.ToInt(v).Kind() == constant.Int
	}
	return false
}

// representable returns v converted to type b, or reports why it does not fit.
func (c *checker) representable(x operand, b *Basic) (constant.Value, bool) {
	v, err := representable(x.val, b)
	if err != nil {
		c.errorf(x.expr.Pos(), "constant %s %v", exprString(x.expr), err)
		return nil, false
	}
	return v, true
}

func representable(v constant.Value, b *Basic) (constant.Value, error) {
	switch {
	case b.IsBool():
		if v.Kind() != constant.Bool {
			return nil, fmt.Errorf("is not a boolean (type %s)", b)
		}
		return v, nil
	case b.IsInteger():
		if v.Kind() == constant.Bool {
			return nil, fmt.Errorf("is a boolean, not %s", b)
		}
		iv := constant.ToInt(v)
		if iv.Kind() != constant.Int {
			return nil, fmt.Errorf("truncated to %s", b)
		}
		if b.IsUntyped() {
			return iv, nil
		}
		lo, hi := intRange(b)
		if constant.Compare(iv, gotoken.LSS, lo) || constant.Compare(iv, gotoken.GTR, hi) {
			return nil, fmt.Errorf("overflows %s", b)
		}
		return iv, nil
	case b.IsFloat():
		if v.Kind() == constant.Bool {
			return nil, fmt.Errorf("is a boolean, not %s", b)
		}
		fv := constant.ToFloat(v)
		if fv.Kind() != constant.Float {
			return nil, fmt.Errorf("is not a number")
		}
		f, _ := constant.Float64Val(fv)
		var max float64
		switch b.Kind() {
		case F16:
			max = 65504
		case BF16:
			max = 3.3895313892515355e38
		case F32:
			max = math.MaxFloat32
		default:
			max = math.MaxFloat64
		}
		if math.IsInf(f, 0) || math.Abs(f) > max {
			return nil, fmt.Errorf("overflows %s", b)
		}
		return fv, nil
	}
	return nil, fmt.Errorf("cannot be %s", b)
}

func intRange(b *Basic) (lo, hi constant.Value) {
	bits := uint(b.Bits())
	one := constant.MakeInt64(1)
	if b.IsUnsigned() {
		return constant.MakeInt64(0), constant.BinaryOp(constant.Shift(one, gotoken.SHL, bits), gotoken.SUB, one)
	}
	hi = constant.BinaryOp(constant.Shift(one, gotoken.SHL, bits-1), gotoken.SUB, one)
	lo = constant.UnaryOp(gotoken.SUB, constant.Shift(one, gotoken.SHL, bits-1), 0)
	return lo, hi
}

// defaultType gives untyped constants their default type: index, f32 or i1.
func (c *checker) defaultType(x *operand) {
	if x.mode == ModeInvalid {
		return
	}
	b, ok := x.typ.(*Basic)
	if !ok || !b.IsUntyped() {
		return
	}
	switch b.Kind() {
	case UntypedInt:
		c.convertUntyped(x, Typ[Index])
	case UntypedFloat:
		c.convertUntyped(x, Typ[F32])
	case UntypedBool:
		c.convertUntyped(x, Typ[I1])
	}
}

// convertUntyped converts an untyped constant to t (a basic type or a vector, which splats).
func (c *checker) convertUntyped(x *operand, t Type) {
	if x.mode == ModeInvalid {
		return
	}
	b, ok := x.typ.(*Basic)
	if !ok || !b.IsUntyped() {
		return
	}
	target := Elem(t)
	if target == nil {
		c.errorf(x.expr.Pos(), "cannot use %s as %s", exprString(x.expr), t)
		x.mode = ModeInvalid
		return
	}
	if x.mode == ModeConstant {
		v, ok := c.representable(*x, target)
		if !ok {
			x.mode = ModeInvalid
			return
		}
		x.val = v
	}
	x.typ = t
	c.record(x)
}

// assignable checks that x can be stored in a location of type t, converting untyped constants.
func (c *checker) assignable(x *operand, t Type, context string) {
	if x.mode == ModeInvalid || IsInvalid(t) {
		return
	}
	if x.mode != ModeConstant && x.mode != ModeValue {
		c.errorf(x.expr.Pos(), "%s is not a value", exprString(x.expr))
		x.mode = ModeInvalid
		return
	}
	if b, ok := x.typ.(*Basic); ok && b.IsUntyped() {
		switch t.(type) {
		case *Basic, *Vector:
			c.convertUntyped(x, t)
			return
		}
	}
	if !Identical(x.typ, t) {
		c.errorf(x.expr.Pos(), "cannot use %s (type %s) as %s in %s", exprString(x.expr), x.typ, t, context)
		x.mode = ModeInvalid
	}
}

// ---------------------------------------------------------------- operators

func isComparison(op token.Token) bool {
	switch op {
	case token.EQL, token.NEQ, token.LSS, token.LEQ, token.GTR, token.GEQ:
		return true
	}
	return false
}

var goOps = map[token.Token]gotoken.Token{
	token.ADD: gotoken.ADD, token.SUB: gotoken.SUB, token.MUL: gotoken.MUL, token.QUO: gotoken.QUO,
	token.REM: gotoken.REM, token.AND: gotoken.AND, token.OR: gotoken.OR, token.XOR: gotoken.XOR,
	token.SHL: gotoken.SHL, token.SHR: gotoken.SHR, token.LAND: gotoken.LAND, token.LOR: gotoken.LOR,
	token.EQL: gotoken.EQL, token.NEQ: gotoken.NEQ, token.LSS: gotoken.LSS, token.LEQ: gotoken.LEQ,
	token.GTR: gotoken.GTR, token.GEQ: gotoken.GEQ, token.NOT: gotoken.NOT,
}

func (c *checker) unary(e *ast.UnaryExpr, x operand) operand {
	if x.mode == ModeInvalid {
		return x
	}
	if x.mode != ModeConstant && x.mode != ModeValue {
		c.errorf(e.X.Pos(), "%s is not a value", exprString(e.X))
		return invalid(e)
	}
	if !isArith(x.typ) {
		c.errorf(e.OpPos, "operator %s not defined on %s (type %s)", e.Op, exprString(e.X), x.typ)
		return invalid(e)
	}
	elem := Elem(x.typ)
	_, isVec := x.typ.(*Vector)
	ok := false
	switch e.Op {
	case token.ADD, token.SUB:
		ok = elem != nil && elem.IsNumeric() && !isVec || isVec
		if e.Op == token.SUB && elem != nil && elem.IsUnsigned() && x.mode != ModeConstant {
			ok = true // wraps, as in Go
		}
	case token.NOT:
		ok = elem != nil && elem.IsBool() && !isVec
	case token.XOR:
		ok = elem != nil && elem.IsInteger()
	}
	if _, isBasic := x.typ.(*Basic); !isBasic && !isVec {
		ok = false
	}
	if !ok {
		c.errorf(e.OpPos, "operator %s not defined on %s (type %s)", e.Op, exprString(e.X), x.typ)
		return invalid(e)
	}
	if x.mode == ModeConstant {
		prec := uint(0)
		if elem.IsUnsigned() {
			prec = uint(elem.Bits())
		}
		v := constant.UnaryOp(goOps[e.Op], x.val, prec)
		if e.Op == token.ADD {
			v = x.val
		}
		res := operand{mode: ModeConstant, typ: x.typ, val: v, uniform: true, expr: e}
		if !elem.IsUntyped() {
			if _, ok := c.representable(res, elem); !ok {
				return invalid(e)
			}
		}
		return res
	}
	return operand{mode: ModeValue, typ: x.typ, uniform: x.uniform}
}

func (c *checker) binaryOp(e ast.Expr, op token.Token, opPos token.Pos, x, y operand) operand {
	if x.mode == ModeInvalid || y.mode == ModeInvalid {
		return invalid(e)
	}
	for _, o := range []operand{x, y} {
		if o.mode != ModeConstant && o.mode != ModeValue {
			c.errorf(o.expr.Pos(), "%s is not a value", exprString(o.expr))
			return invalid(e)
		}
		if !isArith(o.typ) {
			c.errorf(opPos, "operator %s not defined on %s (type %s)", op, exprString(o.expr), o.typ)
			return invalid(e)
		}
	}
	if op == token.SHL || op == token.SHR {
		return c.shift(e, op, opPos, x, y)
	}
	// Untyped operands take the other side's type (its element type for a vector).
	xb, xBasic := x.typ.(*Basic)
	yb, yBasic := y.typ.(*Basic)
	switch {
	case xBasic && xb.IsUntyped() && yBasic && yb.IsUntyped():
		// both untyped: the "larger" kind wins (int < float); bools only with bools
		if xb.Kind() != yb.Kind() {
			if xb.Kind() == UntypedBool || yb.Kind() == UntypedBool {
				c.errorf(opPos, "mismatched types %s and %s", xb, yb)
				return invalid(e)
			}
			x.typ, y.typ = Typ[UntypedFloat], Typ[UntypedFloat]
		}
	case xBasic && xb.IsUntyped():
		c.convertUntyped(&x, elemOrSelf(y.typ))
	case yBasic && yb.IsUntyped():
		c.convertUntyped(&y, elemOrSelf(x.typ))
	}
	if x.mode == ModeInvalid || y.mode == ModeInvalid {
		return invalid(e)
	}
	// Broadcast a scalar against a vector of the same element type.
	rt := x.typ
	xv, xIsVec := x.typ.(*Vector)
	yv, yIsVec := y.typ.(*Vector)
	switch {
	case xIsVec && !yIsVec:
		if b, ok := y.typ.(*Basic); !ok || b.Kind() != xv.Elem.Kind() {
			c.errorf(opPos, "mismatched types %s and %s", x.typ, y.typ)
			return invalid(e)
		}
	case yIsVec && !xIsVec:
		if b, ok := x.typ.(*Basic); !ok || b.Kind() != yv.Elem.Kind() {
			c.errorf(opPos, "mismatched types %s and %s", x.typ, y.typ)
			return invalid(e)
		}
		rt = y.typ
	default:
		if !Identical(x.typ, y.typ) {
			c.errorf(opPos, "mismatched types %s and %s", x.typ, y.typ)
			return invalid(e)
		}
	}
	elem := Elem(rt)
	if elem == nil {
		c.errorf(opPos, "operator %s not defined on %s", op, rt)
		return invalid(e)
	}
	isVec := xIsVec || yIsVec
	switch {
	case isComparison(op):
		if isVec {
			c.errorf(opPos, "comparison of vectors is not supported; compare lanes after reduce_*")
			return invalid(e)
		}
		if elem.IsBool() && op != token.EQL && op != token.NEQ {
			c.errorf(opPos, "operator %s not defined on %s", op, elem)
			return invalid(e)
		}
		rt = Typ[I1]
		if elem.IsUntyped() {
			rt = Typ[UntypedBool]
		}
	case op == token.LAND || op == token.LOR:
		if !elem.IsBool() || isVec {
			c.errorf(opPos, "operator %s not defined on %s", op, rt)
			return invalid(e)
		}
	case op == token.REM || op == token.AND || op == token.OR || op == token.XOR:
		if !elem.IsInteger() && !(elem.IsBool() && op != token.REM && !isVec) {
			c.errorf(opPos, "operator %s not defined on %s", op, rt)
			return invalid(e)
		}
	case op == token.ADD || op == token.SUB || op == token.MUL || op == token.QUO:
		if !elem.IsNumeric() {
			c.errorf(opPos, "operator %s not defined on %s", op, rt)
			return invalid(e)
		}
	default:
		c.errorf(opPos, "unexpected operator %s", op)
		return invalid(e)
	}
	if x.mode == ModeConstant && y.mode == ModeConstant {
		return c.foldBinary(e, op, opPos, x, y, rt)
	}
	return operand{mode: ModeValue, typ: rt, uniform: x.uniform && y.uniform}
}

// isArith reports whether values of type t take part in arithmetic: scalars and vectors.
func isArith(t Type) bool {
	switch t.(type) {
	case *Basic, *Vector:
		return true
	}
	return false
}

func elemOrSelf(t Type) Type {
	if v, ok := t.(*Vector); ok {
		return v.Elem
	}
	return t
}

func (c *checker) foldBinary(e ast.Expr, op token.Token, opPos token.Pos, x, y operand, rt Type) operand {
	res := operand{mode: ModeConstant, typ: rt, uniform: true, expr: e}
	elem := Elem(x.typ)
	if isComparison(op) {
		res.val = constant.MakeBool(constant.Compare(x.val, goOps[op], y.val))
		return res
	}
	if (op == token.QUO || op == token.REM) && constant.Sign(y.val) == 0 && (elem.IsInteger() || op == token.REM) {
		c.errorf(opPos, "division by zero")
		return invalid(e)
	}
	gop := goOps[op]
	if op == token.QUO && elem.IsInteger() {
		gop = gotoken.QUO_ASSIGN // integer division, truncated
	}
	if op == token.QUO && elem.IsFloat() && constant.Sign(y.val) == 0 {
		c.errorf(opPos, "division by zero")
		return invalid(e)
	}
	xv, yv := x.val, y.val
	if elem.IsFloat() {
		xv, yv = constant.ToFloat(xv), constant.ToFloat(yv)
	}
	res.val = constant.BinaryOp(xv, gop, yv)
	if b, ok := rt.(*Basic); ok && !b.IsUntyped() {
		v, err := representable(res.val, b)
		if err != nil {
			c.errorf(opPos, "constant %s %v", exprString(e), err)
			return invalid(e)
		}
		res.val = v
	}
	return res
}

func (c *checker) shift(e ast.Expr, op token.Token, opPos token.Pos, x, y operand) operand {
	ye := Elem(y.typ)
	if _, yVec := y.typ.(*Vector); ye == nil || !ye.IsInteger() || yVec && !Identical(x.typ, y.typ) {
		if !(ye != nil && ye.Kind() == UntypedFloat && y.mode == ModeConstant && isIntegral(y.val)) {
			c.errorf(y.expr.Pos(), "shift count %s must be an integer", exprString(y.expr))
			return invalid(e)
		}
	}
	if y.mode == ModeConstant && constant.Sign(y.val) < 0 {
		c.errorf(y.expr.Pos(), "negative shift count %s", exprString(y.expr))
		return invalid(e)
	}
	xe := Elem(x.typ)
	if xe == nil || !xe.IsInteger() {
		c.errorf(opPos, "shifted operand %s must be an integer", exprString(x.expr))
		return invalid(e)
	}
	if x.mode == ModeConstant && y.mode == ModeConstant {
		s, ok := constant.Uint64Val(constant.ToInt(y.val))
		if !ok || s > 1023 {
			c.errorf(y.expr.Pos(), "shift count %s too large", exprString(y.expr))
			return invalid(e)
		}
		v := constant.Shift(constant.ToInt(x.val), goOps[op], uint(s))
		res := operand{mode: ModeConstant, typ: x.typ, val: v, uniform: true, expr: e}
		if b, ok := x.typ.(*Basic); ok && !b.IsUntyped() {
			if v2, err := representable(v, b); err != nil {
				c.errorf(opPos, "constant %s %v", exprString(e), err)
				return invalid(e)
			} else {
				res.val = v2
			}
		}
		return res
	}
	if xb, ok := x.typ.(*Basic); ok && xb.IsUntyped() {
		c.convertUntyped(&x, Typ[Index])
	}
	if yb, ok := y.typ.(*Basic); ok && yb.IsUntyped() {
		c.convertUntyped(&y, elemOrSelf(x.typ))
	}
	return operand{mode: ModeValue, typ: x.typ, uniform: x.uniform && y.uniform}
}

// ---------------------------------------------------------------- selectors, index

var dims = map[string]int{"x": 0, "y": 1, "z": 2}

func (c *checker) selector(s *scope, e *ast.SelectorExpr) operand {
	id, ok := ast.Unparen(e.X).(*ast.Ident)
	if ok {
		if obj := s.lookup(id.Name); obj != nil && obj.Kind == ObjBuiltin {
			switch obj.Builtin {
			case BuiltinThreadID, BuiltinBlockID, BuiltinBlockDim, BuiltinGridDim:
				c.info.Uses[id] = obj
				if c.inLaunch {
					c.errorf(id.Pos(), "%s is not available in launch programs", id.Name)
					return invalid(e)
				}
				if _, ok := dims[e.Sel.Name]; !ok {
					c.errorf(e.Sel.Pos(), "%s has fields x, y and z, not %s", id.Name, e.Sel.Name)
					return invalid(e)
				}
				return operand{mode: ModeValue, typ: Typ[Index], uniform: obj.Builtin != BuiltinThreadID}
			}
		}
	}
	x := c.expr(s, e.X)
	if x.mode != ModeInvalid {
		c.errorf(e.Sel.Pos(), "%s has no field %s", exprString(e.X), e.Sel.Name)
	}
	return invalid(e)
}

// indexExpr checks a buffer, view or array element access and returns the element (or vector)
// type. how says whether the access loads, stores or both.
func (c *checker) indexExpr(s *scope, e *ast.IndexExpr, how accessKind) Type {
	x := c.expr(s, e.X)
	if x.mode == ModeInvalid {
		for _, ix := range e.Indices {
			if sl, ok := ix.(*ast.SliceExpr); ok {
				c.expr(s, sl.Lo)
				c.expr(s, sl.Hi)
			} else {
				c.expr(s, ix)
			}
		}
		return Typ[Invalid]
	}
	var rank int
	var elem Type
	var access Access
	var what string
	switch t := x.typ.(type) {
	case *Buffer:
		rank, elem, access, what = 1, t.Elem, t.Access, "buffer"
	case *View:
		rank, elem, access, what = t.Rank, t.Elem, t.Access, "view"
	case *Array:
		rank, elem, access, what = 1, t.Elem, ReadWrite, "array"
	case *Vector:
		rank, elem, access, what = 1, t.Elem, Read, "vector"
		if how&accessStore != 0 {
			c.errorf(e.Pos(), "cannot assign to a lane of vector %s", exprString(e.X))
			return Typ[Invalid]
		}
	default:
		c.errorf(e.Lbrack, "cannot index %s (type %s)", exprString(e.X), x.typ)
		return Typ[Invalid]
	}
	if x.mode != ModeValue {
		c.errorf(e.Pos(), "cannot index %s", exprString(e.X))
		return Typ[Invalid]
	}
	name := exprString(e.X)
	if how&accessLoad != 0 && access&Read == 0 {
		c.errorf(e.Pos(), "cannot read %s: it is a write binding", name)
		return Typ[Invalid]
	}
	if how&accessStore != 0 && access&Write == 0 {
		c.errorf(e.Pos(), "cannot write %s: it is a read binding", name)
		return Typ[Invalid]
	}
	if len(e.Indices) != rank {
		c.errorf(e.Lbrack, "%s %s has rank %d but is indexed with %d indices", what, name, rank, len(e.Indices))
		return Typ[Invalid]
	}
	result := elem
	for i, ix := range e.Indices {
		if sl, ok := ix.(*ast.SliceExpr); ok {
			lo := c.expr(s, sl.Lo)
			hi := c.expr(s, sl.Hi)
			c.indexValue(&lo)
			c.indexValue(&hi)
			if i != len(e.Indices)-1 {
				c.errorf(sl.Colon, "only the last index may be a slice lo:hi")
				return Typ[Invalid]
			}
			if what == "array" || what == "vector" {
				c.errorf(sl.Colon, "%ss are indexed element by element", what)
				return Typ[Invalid]
			}
			if lo.mode == ModeInvalid || hi.mode == ModeInvalid {
				return Typ[Invalid]
			}
			w, ok := c.constDiff(sl.Hi, sl.Lo)
			if !ok {
				c.errorf(sl.Colon, "slice width %s - (%s) is not a constant", exprString(sl.Hi), exprString(sl.Lo))
				return Typ[Invalid]
			}
			eb := elem.(*Basic)
			if err := vectorOK(int64(w), eb); err != nil {
				c.errorf(sl.Colon, "slice %s: %v", exprString(ix), err)
				return Typ[Invalid]
			}
			result = &Vector{Elem: eb, Len: int(w)}
			c.info.Types[ix] = TypeAndValue{Mode: ModeValue, Type: result, Value: constant.MakeInt64(w)}
			continue
		}
		y := c.expr(s, ix)
		c.indexValue(&y)
		if y.mode == ModeInvalid {
			return Typ[Invalid]
		}
	}
	return result
}

// vectorOK checks a lane count and element type.
func vectorOK(n int64, elem *Basic) error {
	if n <= 0 || n > MaxVectorLanes || n&(n-1) != 0 {
		return fmt.Errorf("vector length %d is not a power of two in 1..%d", n, MaxVectorLanes)
	}
	switch elem.Kind() {
	case F16, BF16, I1:
		return fmt.Errorf("vectors of %s are not supported", elem)
	}
	return nil
}

// constDiff decides whether hi - lo is a compile-time constant by comparing their linear forms
// over variables.
func (c *checker) constDiff(hi, lo ast.Expr) (int64, bool) {
	h, ok1 := c.linear(hi)
	l, ok2 := c.linear(lo)
	if !ok1 || !ok2 {
		return 0, false
	}
	for k, v := range l.terms {
		h.terms[k] -= v
	}
	for _, v := range h.terms {
		if v != 0 {
			return 0, false
		}
	}
	return h.c - l.c, true
}

type linForm struct {
	terms map[*Object]int64
	c     int64
}

func (c *checker) linear(e ast.Expr) (linForm, bool) {
	if tv, ok := c.info.Types[e]; ok && tv.Mode == ModeConstant {
		v, ok := constant.Int64Val(constant.ToInt(tv.Value))
		return linForm{terms: map[*Object]int64{}, c: v}, ok
	}
	switch e := e.(type) {
	case *ast.ParenExpr:
		return c.linear(e.X)
	case *ast.Ident:
		obj := c.info.Uses[e]
		if obj == nil || obj.Kind != ObjVar || obj.Mutable {
			return linForm{}, false
		}
		return linForm{terms: map[*Object]int64{obj: 1}}, true
	case *ast.UnaryExpr:
		if e.Op == token.SUB {
			x, ok := c.linear(e.X)
			if !ok {
				return x, false
			}
			for k := range x.terms {
				x.terms[k] = -x.terms[k]
			}
			x.c = -x.c
			return x, true
		}
	case *ast.BinaryExpr:
		x, ok1 := c.linear(e.X)
		y, ok2 := c.linear(e.Y)
		if !ok1 || !ok2 {
			return linForm{}, false
		}
		switch e.Op {
		case token.ADD, token.SUB:
			sign := int64(1)
			if e.Op == token.SUB {
				sign = -1
			}
			for k, v := range y.terms {
				x.terms[k] += sign * v
			}
			x.c += sign * y.c
			return x, true
		case token.MUL:
			if len(x.terms) == 0 {
				x, y = y, x
			}
			if len(y.terms) != 0 {
				return linForm{}, false
			}
			for k := range x.terms {
				x.terms[k] *= y.c
			}
			x.c *= y.c
			return x, true
		}
	}
	return linForm{}, false
}

// ---------------------------------------------------------------- types

func (c *checker) typExpr(s *scope, e ast.Expr) Type {
	switch e := e.(type) {
	case *ast.Ident:
		obj := s.lookup(e.Name)
		if obj == nil {
			c.errorf(e.Pos(), "undefined type %s", e.Name)
			return Typ[Invalid]
		}
		c.info.Uses[e] = obj
		if obj.Kind != ObjType {
			c.errorf(e.Pos(), "%s is not a type", e.Name)
			return Typ[Invalid]
		}
		return obj.Type
	case *ast.VecType:
		n, ok := c.constInt(s, e.Len, "vector length")
		elem := c.typExpr(s, e.Elem)
		if !ok || IsInvalid(elem) {
			return Typ[Invalid]
		}
		b, isBasic := elem.(*Basic)
		if !isBasic {
			c.errorf(e.Elem.Pos(), "vector elements are scalars, not %s", elem)
			return Typ[Invalid]
		}
		if err := vectorOK(n, b); err != nil {
			c.errorf(e.Pos(), "%v", err)
			return Typ[Invalid]
		}
		t := &Vector{Elem: b, Len: int(n)}
		c.info.Types[e] = TypeAndValue{Mode: ModeType, Type: t}
		return t
	case *ast.ArrayType:
		n, ok := c.constInt(s, e.Len, "array length")
		elem := c.typExpr(s, e.Elem)
		if !ok || IsInvalid(elem) {
			return Typ[Invalid]
		}
		switch elem.(type) {
		case *Basic, *Vector, *Array:
		default:
			c.errorf(e.Elem.Pos(), "array elements cannot be %s", elem)
			return Typ[Invalid]
		}
		if n <= 0 {
			c.errorf(e.Len.Pos(), "array length %d must be positive", n)
			return Typ[Invalid]
		}
		t := &Array{Elem: elem, Len: int(n)}
		total := int64(1)
		dims, _ := t.Dims()
		for _, d := range dims {
			total *= int64(d)
			if total > MaxArrayElems {
				c.errorf(e.Pos(), "array has more than %d elements", MaxArrayElems)
				return Typ[Invalid]
			}
		}
		c.info.Types[e] = TypeAndValue{Mode: ModeType, Type: t}
		return t
	case *ast.BufferType:
		elem := c.typExpr(s, e.Elem)
		if IsInvalid(elem) {
			return Typ[Invalid]
		}
		b, ok := elem.(*Basic)
		if !ok {
			c.errorf(e.Elem.Pos(), "buffer elements are scalars, not %s", elem)
			return Typ[Invalid]
		}
		return &Buffer{Elem: b}
	case *ast.ParenExpr:
		return c.typExpr(s, e.X)
	case nil, *ast.BadExpr:
		return Typ[Invalid]
	}
	c.errorf(e.Pos(), "%s is not a type", exprString(e))
	return Typ[Invalid]
}

func (c *checker) constInt(s *scope, e ast.Expr, what string) (int64, bool) {
	x := c.expr(s, e)
	if x.mode == ModeInvalid {
		return 0, false
	}
	if x.mode != ModeConstant || !isIntegral(x.val) || Elem(x.typ) == nil || !(Elem(x.typ).IsInteger() || Elem(x.typ).Kind() == UntypedFloat) {
		c.errorf(e.Pos(), "%s %s must be an integer constant", what, exprString(e))
		return 0, false
	}
	v, ok := constant.Int64Val(constant.ToInt(x.val))
	if !ok || v > 1<<30 || v < -(1<<30) {
		c.errorf(e.Pos(), "%s %s is out of range", what, exprString(e))
		return 0, false
	}
	return v, true
}

// ---------------------------------------------------------------- printing

// exprString renders an expression compactly for messages.
func exprString(e ast.Expr) string {
	var b bytes.Buffer
	writeExpr(&b, e, 0)
	return b.String()
}

// ExprString renders an expression compactly.
func ExprString(e ast.Expr) string { return exprString(e) }

func writeExpr(b *bytes.Buffer, e ast.Expr, depth int) {
	if depth > 20 {
		b.WriteString("…")
		return
	}
	d := depth + 1
	switch e := e.(type) {
	case nil:
		b.WriteString("<nil>")
	case *ast.BadExpr:
		b.WriteString("BadExpr")
	case *ast.Ident:
		b.WriteString(e.Name)
	case *ast.BasicLit:
		b.WriteString(e.Value)
	case *ast.ParenExpr:
		b.WriteByte('(')
		writeExpr(b, e.X, d)
		b.WriteByte(')')
	case *ast.UnaryExpr:
		b.WriteString(e.Op.String())
		writeExpr(b, e.X, d)
	case *ast.BinaryExpr:
		writeExpr(b, e.X, d)
		b.WriteString(" " + e.Op.String() + " ")
		writeExpr(b, e.Y, d)
	case *ast.CallExpr:
		writeExpr(b, e.Fun, d)
		b.WriteByte('(')
		for i, a := range e.Args {
			if i > 0 {
				b.WriteString(", ")
			}
			writeExpr(b, a, d)
		}
		b.WriteByte(')')
	case *ast.IndexExpr:
		writeExpr(b, e.X, d)
		b.WriteByte('[')
		for i, a := range e.Indices {
			if i > 0 {
				b.WriteString(", ")
			}
			writeExpr(b, a, d)
		}
		b.WriteByte(']')
	case *ast.SliceExpr:
		writeExpr(b, e.Lo, d)
		b.WriteByte(':')
		writeExpr(b, e.Hi, d)
	case *ast.SelectorExpr:
		writeExpr(b, e.X, d)
		b.WriteByte('.')
		b.WriteString(e.Sel.Name)
	case *ast.TupleExpr:
		b.WriteByte('(')
		for i, a := range e.Elts {
			if i > 0 {
				b.WriteString(", ")
			}
			writeExpr(b, a, d)
		}
		b.WriteByte(')')
	case *ast.ListExpr:
		b.WriteByte('[')
		for i, a := range e.Elts {
			if i > 0 {
				b.WriteString(", ")
			}
			writeExpr(b, a, d)
		}
		b.WriteByte(']')
	case *ast.VecType:
		b.WriteString("vec[")
		writeExpr(b, e.Len, d)
		b.WriteByte(']')
		writeExpr(b, e.Elem, d)
	case *ast.ArrayType:
		b.WriteByte('[')
		writeExpr(b, e.Len, d)
		b.WriteByte(']')
		writeExpr(b, e.Elem, d)
	case *ast.BufferType:
		b.WriteString("buffer[")
		writeExpr(b, e.Elem, d)
		b.WriteByte(']')
	default:
		b.WriteString(strconv.Quote(fmt.Sprintf("%T", e)))
	}
}
