package types

import (
	"go/constant"
	gotoken "go/token"

	"github.com/loomrt/loom/go/loom/ast"
)

func (c *checker) call(s *scope, e *ast.CallExpr) operand {
	f := c.expr(s, e.Fun)
	switch f.mode {
	case ModeInvalid:
		for _, a := range e.Args {
			c.expr(s, a)
		}
		return invalid(e)
	case ModeType:
		return c.conversion(s, e, f.typ)
	case ModeBuiltin:
		c.info.Calls[e] = f.builtin
		return c.builtin(s, e, f.builtin)
	}
	c.errorf(e.Lparen, "cannot call non-function %s", exprString(e.Fun))
	for _, a := range e.Args {
		c.expr(s, a)
	}
	return invalid(e)
}

func (c *checker) conversion(s *scope, e *ast.CallExpr, t Type) operand {
	c.info.Calls[e] = BuiltinConversion
	if len(e.Args) != 1 {
		c.errorf(e.Lparen, "conversion to %s takes one argument, got %d", t, len(e.Args))
		for _, a := range e.Args {
			c.expr(s, a)
		}
		return invalid(e)
	}
	x := c.expr(s, e.Args[0])
	if x.mode == ModeInvalid {
		return invalid(e)
	}
	if x.mode != ModeConstant && x.mode != ModeValue {
		c.errorf(e.Args[0].Pos(), "%s is not a value", exprString(e.Args[0]))
		return invalid(e)
	}
	switch t := t.(type) {
	case *Basic:
		xb, ok := x.typ.(*Basic)
		if !ok {
			c.errorf(e.Args[0].Pos(), "cannot convert %s (type %s) to %s", exprString(e.Args[0]), x.typ, t)
			return invalid(e)
		}
		if xb.IsBool() != t.IsBool() {
			c.errorf(e.Args[0].Pos(), "cannot convert %s (type %s) to %s", exprString(e.Args[0]), x.typ, t)
			return invalid(e)
		}
		if x.mode == ModeConstant {
			v := x.val
			if t.IsInteger() && v.Kind() == constant.Float {
				// Truncation toward zero, as the run-time conversion does.
				f, _ := constant.Float64Val(v)
				if !isIntegral(v) {
					v = constant.MakeFloat64(float64(int64(f)))
				}
			}
			res := operand{mode: ModeConstant, typ: t, val: v, uniform: true, expr: e}
			if nv, ok := c.representable(res, t); ok {
				res.val = nv
				return res
			}
			return invalid(e)
		}
		return operand{mode: ModeValue, typ: t, uniform: x.uniform}
	case *Vector:
		switch xt := x.typ.(type) {
		case *Basic:
			// splat
			if xt.IsUntyped() {
				c.convertUntyped(&x, t.Elem)
				if x.mode == ModeInvalid {
					return invalid(e)
				}
			} else if xt.Kind() != t.Elem.Kind() {
				c.errorf(e.Args[0].Pos(), "cannot splat %s (type %s) into %s; convert the scalar first", exprString(e.Args[0]), x.typ, t)
				return invalid(e)
			}
			return operand{mode: ModeValue, typ: t, uniform: x.uniform}
		case *Vector:
			if xt.Len != t.Len {
				c.errorf(e.Args[0].Pos(), "cannot convert %s (type %s) to %s: lane counts differ", exprString(e.Args[0]), x.typ, t)
				return invalid(e)
			}
			return operand{mode: ModeValue, typ: t, uniform: x.uniform}
		}
	}
	c.errorf(e.Lparen, "cannot convert to %s", t)
	return invalid(e)
}

func (c *checker) nargs(e *ast.CallExpr, b Builtin, n int) bool {
	if len(e.Args) != n {
		c.errorf(e.Lparen, "%s takes %d arguments, got %d", b.Name(), n, len(e.Args))
		return false
	}
	return true
}

func (c *checker) values(s *scope, args []ast.Expr) ([]operand, bool) {
	ok := true
	xs := make([]operand, len(args))
	for i, a := range args {
		xs[i] = c.expr(s, a)
		if xs[i].mode == ModeInvalid {
			ok = false
			continue
		}
		if xs[i].mode != ModeConstant && xs[i].mode != ModeValue {
			c.errorf(a.Pos(), "%s is not a value", exprString(a))
			ok = false
			continue
		}
		if !isArith(xs[i].typ) {
			c.errorf(a.Pos(), "%s (type %s) is not a scalar or vector", exprString(a), xs[i].typ)
			ok = false
		}
	}
	return xs, ok
}

// unify gives operands a common type (untyped constants adopt the typed operands' type; scalars
// broadcast to a vector operand when allowVec).
func (c *checker) unify(e *ast.CallExpr, b Builtin, xs []operand, allowVec bool) (Type, bool) {
	var typed Type
	for _, x := range xs {
		if bt, ok := x.typ.(*Basic); ok && bt.IsUntyped() {
			continue
		}
		if v, ok := x.typ.(*Vector); ok {
			if !allowVec {
				c.errorf(x.expr.Pos(), "%s does not take vectors", b.Name())
				return nil, false
			}
			if tv, ok := typed.(*Vector); ok && !Identical(tv, v) {
				c.errorf(x.expr.Pos(), "%s: mismatched types %s and %s", b.Name(), typed, v)
				return nil, false
			}
			if tb, ok := typed.(*Basic); ok && tb.Kind() != v.Elem.Kind() {
				c.errorf(x.expr.Pos(), "%s: mismatched types %s and %s", b.Name(), typed, v)
				return nil, false
			}
			typed = v
			continue
		}
		if typed == nil {
			typed = x.typ
			continue
		}
		if Identical(typed, x.typ) {
			continue
		}
		if v, ok := typed.(*Vector); ok && Identical(v.Elem, x.typ) {
			continue
		}
		c.errorf(x.expr.Pos(), "%s: mismatched types %s and %s", b.Name(), typed, x.typ)
		return nil, false
	}
	if typed == nil {
		// all untyped: the widest wins
		typed = Typ[UntypedInt]
		for _, x := range xs {
			if x.typ.(*Basic).Kind() == UntypedFloat {
				typed = Typ[UntypedFloat]
			}
		}
	}
	for i := range xs {
		if bt, ok := xs[i].typ.(*Basic); ok && bt.IsUntyped() {
			if tb, ok := typed.(*Basic); ok && tb.IsUntyped() {
				continue
			}
			c.convertUntyped(&xs[i], elemOrSelf(typed))
			if xs[i].mode == ModeInvalid {
				return nil, false
			}
		}
	}
	return typed, true
}

func allConst(xs []operand) bool {
	for _, x := range xs {
		if x.mode != ModeConstant {
			return false
		}
	}
	return true
}

func allUniform(xs []operand) bool {
	for _, x := range xs {
		if !x.uniform {
			return false
		}
	}
	return true
}

func (c *checker) builtin(s *scope, e *ast.CallExpr, b Builtin) operand {
	if c.inLaunch && !launchBuiltins[b] {
		c.errorf(e.Pos(), "%s is not available in launch programs", b.Name())
		return invalid(e)
	}
	switch b {
	case BuiltinCeilDiv, BuiltinMin, BuiltinMax:
		if !c.nargs(e, b, 2) {
			c.values(s, e.Args)
			return invalid(e)
		}
		xs, ok := c.values(s, e.Args)
		if !ok {
			return invalid(e)
		}
		t, ok := c.unify(e, b, xs, b != BuiltinCeilDiv)
		if !ok {
			return invalid(e)
		}
		el := Elem(t)
		if b == BuiltinCeilDiv && !el.IsInteger() {
			c.errorf(e.Pos(), "ceil_div takes integers, not %s", t)
			return invalid(e)
		}
		if !el.IsNumeric() {
			c.errorf(e.Pos(), "%s takes numbers, not %s", b.Name(), t)
			return invalid(e)
		}
		if allConst(xs) {
			x, y := xs[0].val, xs[1].val
			var v = x
			switch b {
			case BuiltinCeilDiv:
				if constant.Sign(y) <= 0 {
					c.errorf(e.Args[1].Pos(), "ceil_div by a non-positive constant")
					return invalid(e)
				}
				x, y = constant.ToInt(x), constant.ToInt(y)
				q := constant.BinaryOp(x, tokenQuoInt, y)
				if constant.Sign(constant.BinaryOp(x, tokenRem, y)) > 0 {
					q = constant.BinaryOp(q, tokenAdd, constant.MakeInt64(1))
				}
				v = q
			case BuiltinMin:
				if constant.Compare(y, tokenLss, x) {
					v = y
				}
			case BuiltinMax:
				if constant.Compare(y, tokenGtr, x) {
					v = y
				}
			}
			return operand{mode: ModeConstant, typ: t, val: v, uniform: true}
		}
		return operand{mode: ModeValue, typ: t, uniform: allUniform(xs)}
	case BuiltinAbs, BuiltinSqrt, BuiltinExp, BuiltinLog, BuiltinTanh, BuiltinSin, BuiltinCos, BuiltinFloor, BuiltinCeil:
		if !c.nargs(e, b, 1) {
			c.values(s, e.Args)
			return invalid(e)
		}
		xs, ok := c.values(s, e.Args)
		if !ok {
			return invalid(e)
		}
		x := xs[0]
		if bt, ok := x.typ.(*Basic); ok && bt.IsUntyped() {
			if b == BuiltinAbs && bt.Kind() == UntypedInt {
				c.convertUntyped(&x, Typ[Index])
			} else {
				c.convertUntyped(&x, Typ[F32])
			}
			if x.mode == ModeInvalid {
				return invalid(e)
			}
		}
		el := Elem(x.typ)
		_, isBuf := x.typ.(*Buffer)
		_, isView := x.typ.(*View)
		if el == nil || isBuf || isView || (b == BuiltinAbs && !el.IsNumeric()) || (b != BuiltinAbs && !el.IsFloat()) {
			c.errorf(e.Args[0].Pos(), "%s not defined on %s", b.Name(), x.typ)
			return invalid(e)
		}
		return operand{mode: ModeValue, typ: x.typ, uniform: x.uniform}
	case BuiltinFma:
		if !c.nargs(e, b, 3) {
			c.values(s, e.Args)
			return invalid(e)
		}
		xs, ok := c.values(s, e.Args)
		if !ok {
			return invalid(e)
		}
		t, ok := c.unify(e, b, xs, true)
		if !ok {
			return invalid(e)
		}
		if bt, ok := t.(*Basic); ok && bt.IsUntyped() {
			t = Typ[F32]
			for i := range xs {
				c.convertUntyped(&xs[i], t)
			}
		}
		if !Elem(t).IsFloat() {
			c.errorf(e.Pos(), "fma takes floats, not %s", t)
			return invalid(e)
		}
		return operand{mode: ModeValue, typ: t, uniform: allUniform(xs)}
	case BuiltinSelect:
		if !c.nargs(e, b, 3) {
			c.values(s, e.Args)
			return invalid(e)
		}
		xs, ok := c.values(s, e.Args)
		if !ok {
			return invalid(e)
		}
		c.condition(&xs[0], "select")
		if xs[0].mode == ModeInvalid {
			return invalid(e)
		}
		t, ok := c.unify(e, b, xs[1:], true)
		if !ok {
			return invalid(e)
		}
		if bt, ok := t.(*Basic); ok && bt.IsUntyped() {
			for i := 1; i < 3; i++ {
				c.defaultType(&xs[i])
			}
			t = xs[1].typ
			if !Identical(xs[1].typ, xs[2].typ) {
				c.errorf(e.Pos(), "select: mismatched types %s and %s", xs[1].typ, xs[2].typ)
				return invalid(e)
			}
		}
		if allConst(xs) {
			if constant.BoolVal(xs[0].val) {
				return operand{mode: ModeConstant, typ: t, val: xs[1].val, uniform: true}
			}
			return operand{mode: ModeConstant, typ: t, val: xs[2].val, uniform: true}
		}
		return operand{mode: ModeValue, typ: t, uniform: allUniform(xs)}
	case BuiltinSizeof:
		if !c.nargs(e, b, 1) {
			return invalid(e)
		}
		t := c.typExpr(s, e.Args[0])
		if IsInvalid(t) {
			return invalid(e)
		}
		size := int64(0)
		switch t := t.(type) {
		case *Basic:
			size = int64(t.Size())
		case *Vector:
			size = int64(t.Elem.Size() * t.Len)
		default:
			c.errorf(e.Args[0].Pos(), "sizeof takes a scalar or vector type, not %s", t)
			return invalid(e)
		}
		c.info.Types[e.Args[0]] = TypeAndValue{Mode: ModeType, Type: t}
		return operand{mode: ModeConstant, typ: Typ[Index], val: constant.MakeInt64(size), uniform: true}
	case BuiltinInf:
		if !c.nargs(e, b, 1) {
			return invalid(e)
		}
		t := c.typExpr(s, e.Args[0])
		if IsInvalid(t) {
			return invalid(e)
		}
		bt, ok := t.(*Basic)
		if !ok || !bt.IsFloat() {
			c.errorf(e.Args[0].Pos(), "inf takes a float type, not %s", t)
			return invalid(e)
		}
		c.info.Types[e.Args[0]] = TypeAndValue{Mode: ModeType, Type: t}
		return operand{mode: ModeValue, typ: t, uniform: true}
	case BuiltinLen:
		if !c.nargs(e, b, 1) {
			c.values(s, e.Args)
			return invalid(e)
		}
		x := c.expr(s, e.Args[0])
		if x.mode == ModeInvalid {
			return invalid(e)
		}
		if _, ok := x.typ.(*Buffer); !ok {
			c.errorf(e.Args[0].Pos(), "len takes a buffer parameter, not %s", x.typ)
			return invalid(e)
		}
		return operand{mode: ModeValue, typ: Typ[Index], uniform: true}
	case BuiltinReduceAdd, BuiltinReduceMax, BuiltinReduceMin:
		if !c.nargs(e, b, 1) {
			c.values(s, e.Args)
			return invalid(e)
		}
		xs, ok := c.values(s, e.Args)
		if !ok {
			return invalid(e)
		}
		v, isVec := xs[0].typ.(*Vector)
		if !isVec {
			c.errorf(e.Args[0].Pos(), "%s takes a vector, not %s", b.Name(), xs[0].typ)
			return invalid(e)
		}
		return operand{mode: ModeValue, typ: v.Elem, uniform: xs[0].uniform}
	case BuiltinView:
		return c.viewCall(s, e)
	case BuiltinShared:
		return c.sharedCall(s, e)
	case BuiltinBarrier:
		c.errorf(e.Pos(), "barrier() is a statement")
		return invalid(e)
	case BuiltinRange, BuiltinUnroll:
		c.errorf(e.Pos(), "%s(...) only appears in for statements", b.Name())
		return invalid(e)
	case BuiltinThreadID, BuiltinBlockID, BuiltinBlockDim, BuiltinGridDim:
		c.errorf(e.Pos(), "%s is not a function; use %s.x, .y or .z", b.Name(), b.Name())
		return invalid(e)
	}
	c.errorf(e.Pos(), "unknown builtin")
	return invalid(e)
}

// shapeList checks a [a, b, ...] list of index values that must be uniform.
func (c *checker) shapeList(s *scope, e ast.Expr, what string) ([]operand, bool) {
	l, ok := ast.Unparen(e).(*ast.ListExpr)
	if !ok {
		c.errorf(e.Pos(), "%s must be a list [a, b, ...]", what)
		c.expr(s, e)
		return nil, false
	}
	c.info.Types[l] = TypeAndValue{Mode: ModeValue, Type: &Tuple{}}
	var xs []operand
	good := true
	for _, el := range l.Elts {
		x := c.expr(s, el)
		c.indexValue(&x)
		if x.mode == ModeInvalid {
			good = false
			continue
		}
		if !x.uniform {
			c.errorf(el.Pos(), "%s must be the same in every thread of a block (no thread_id, loads or variables)", what)
			good = false
		}
		if x.mode == ModeConstant && constant.Sign(x.val) < 0 {
			c.errorf(el.Pos(), "negative %s %s", what, exprString(el))
			good = false
		}
		xs = append(xs, x)
	}
	return xs, good
}

// viewCall checks view(buf, [shape], [strides]?, offset?).
func (c *checker) viewCall(s *scope, e *ast.CallExpr) operand {
	if len(e.Args) < 2 || len(e.Args) > 4 {
		c.errorf(e.Lparen, "view takes a buffer, a shape and optionally strides and an offset; got %d arguments", len(e.Args))
		return invalid(e)
	}
	x := c.expr(s, e.Args[0])
	if x.mode == ModeInvalid {
		return invalid(e)
	}
	bt, ok := x.typ.(*Buffer)
	if !ok {
		c.errorf(e.Args[0].Pos(), "view takes a buffer parameter, not %s", x.typ)
		return invalid(e)
	}
	shape, ok1 := c.shapeList(s, e.Args[1], "view shape")
	rank := len(shape)
	ok2 := true
	if len(e.Args) >= 3 {
		var strides []operand
		strides, ok2 = c.shapeList(s, e.Args[2], "view strides")
		if ok2 && len(strides) != rank {
			c.errorf(e.Args[2].Pos(), "view has %d dimensions but %d strides", rank, len(strides))
			ok2 = false
		}
	}
	ok3 := true
	if len(e.Args) == 4 {
		off := c.expr(s, e.Args[3])
		c.indexValue(&off)
		if off.mode == ModeInvalid {
			ok3 = false
		} else if !off.uniform {
			c.errorf(e.Args[3].Pos(), "view offset must be the same in every thread of a block")
			ok3 = false
		}
	}
	if !ok1 || !ok2 || !ok3 {
		return invalid(e)
	}
	if rank == 0 || rank > 8 {
		c.errorf(e.Args[1].Pos(), "view rank %d is not in 1..8", rank)
		return invalid(e)
	}
	return operand{mode: ModeValue, typ: &View{Elem: bt.Elem, Rank: rank, Access: bt.Access}, uniform: true}
}

// sharedCall checks shared(T, [shape], offset?): a view of the block's shared scratch.
func (c *checker) sharedCall(s *scope, e *ast.CallExpr) operand {
	if len(e.Args) < 2 || len(e.Args) > 3 {
		c.errorf(e.Lparen, "shared takes an element type, a shape and optionally an element offset; got %d arguments", len(e.Args))
		return invalid(e)
	}
	t := c.typExpr(s, e.Args[0])
	if IsInvalid(t) {
		return invalid(e)
	}
	bt, ok := t.(*Basic)
	if !ok {
		c.errorf(e.Args[0].Pos(), "shared memory holds scalars, not %s", t)
		return invalid(e)
	}
	c.info.Types[e.Args[0]] = TypeAndValue{Mode: ModeType, Type: t}
	shape, ok := c.shapeList(s, e.Args[1], "shared shape")
	if !ok {
		return invalid(e)
	}
	if len(e.Args) == 3 {
		off := c.expr(s, e.Args[2])
		c.indexValue(&off)
		if off.mode == ModeInvalid {
			return invalid(e)
		}
		if !off.uniform {
			c.errorf(e.Args[2].Pos(), "shared offset must be the same in every thread of a block")
			return invalid(e)
		}
	}
	if len(shape) == 0 || len(shape) > 8 {
		c.errorf(e.Args[1].Pos(), "shared view rank %d is not in 1..8", len(shape))
		return invalid(e)
	}
	return operand{mode: ModeValue, typ: &View{Elem: bt, Rank: len(shape), Access: ReadWrite, Shared: true}, uniform: true}
}

// go/constant operators used when folding builtins.
const (
	tokenQuoInt = gotoken.QUO_ASSIGN // integer division
	tokenRem    = gotoken.REM
	tokenAdd    = gotoken.ADD
	tokenLss    = gotoken.LSS
	tokenGtr    = gotoken.GTR
)
