// Package passes holds the IR transformations: specialization, constant folding (with common
// subexpression and dead code elimination), full unrolling, scalar replacement of local arrays
// (register blocking) and bounds-check elimination.
package passes

import (
	"math"
	"strconv"

	"github.com/loomrt/loom/go/loom/ir"
	"github.com/loomrt/loom/go/loom/types"
)

// Specialize replaces kernel.spec ops by constants. The specialization's values were bound when
// the kernel was checked (types and shapes depend on them); here the symbolic references are
// resolved so that folding can see through them.
func Specialize(b *ir.Block) {
	ir.Walk(b, func(op *ir.Op) {
		if op.Code == ir.OpSpec {
			op.Code = ir.OpConst
		}
	})
}

// Fold runs constant folding, algebraic simplification, common subexpression elimination and
// dead code elimination to a fixed point (bounded).
func Fold(b *ir.Block) {
	for i := 0; i < 8; i++ {
		f := &folder{repl: map[*ir.Value]*ir.Value{}}
		f.block(b, nil)
		removed := dce(b)
		if !f.changed && !removed {
			return
		}
	}
}

type folder struct {
	repl    map[*ir.Value]*ir.Value
	changed bool
	key     []byte // the op's common-subexpression key (appendCSEKey), reused
}

type cseScope struct {
	parent *cseScope
	m      map[string]*ir.Value
}

func (s *cseScope) lookup(k []byte) *ir.Value {
	for ; s != nil; s = s.parent {
		if v := s.m[string(k)]; v != nil {
			return v
		}
	}
	return nil
}

func (f *folder) resolve(v *ir.Value) *ir.Value {
	for {
		r, ok := f.repl[v]
		if !ok {
			return v
		}
		v = r
	}
}

func (f *folder) replace(old, new *ir.Value) {
	f.repl[old] = new
	f.changed = true
}

// appendCSEKey appends op's common-subexpression key to b (nothing for an op that is not a
// candidate): its code, sub-code, immediates, result type, cast type and arguments.
func appendCSEKey(b []byte, op *ir.Op) []byte {
	if !op.Pure() || op.Result == nil || op.Code == ir.OpThreadID {
		// Thread ids stay where they are: on the host each barrier segment has its own loop.
		return b
	}
	b = strconv.AppendUint(b, uint64(op.Code), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(op.Sub), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, op.Int, 10)
	b = append(b, '/')
	b = strconv.AppendFloat(b, op.Float, 'g', -1, 64)
	b = append(b, '/')
	b = append(b, op.Str...)
	b = append(b, '/')
	switch t := op.Result.Type.(type) {
	case *types.Basic:
		b = append(b, t.String()...)
	default:
		b = append(b, ir.TypeString(t)...)
	}
	if op.Type != nil {
		b = append(b, '/')
		b = append(b, op.Type.String()...)
	}
	for _, a := range op.Args {
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(a.ID), 10)
	}
	return b
}

func (f *folder) block(b *ir.Block, parent *cseScope) {
	scope := &cseScope{parent: parent, m: map[string]*ir.Value{}}
	var out []*ir.Op
	for _, op := range b.Ops {
		for i, a := range op.Args {
			op.Args[i] = f.resolve(a)
		}
		// Structured control flow with constant conditions or trip counts.
		switch op.Code {
		case ir.OpIf:
			if c, ok := ir.ConstInt(op.Args[0]); ok {
				r := op.Regions[1]
				if c != 0 {
					r = op.Regions[0]
				}
				f.changed = true
				f.block(r, scope)
				out = append(out, r.Ops...)
				continue
			}
			for _, r := range op.Regions {
				f.block(r, scope)
			}
			if len(op.Regions[0].Ops) == 0 && len(op.Regions[1].Ops) == 0 {
				f.changed = true
				continue
			}
			out = append(out, op)
			continue
		case ir.OpFor:
			lo, okLo := ir.ConstInt(op.Args[0])
			hi, okHi := ir.ConstInt(op.Args[1])
			st, okSt := ir.ConstInt(op.Args[2])
			if okLo && okHi && lo >= hi {
				f.changed = true
				continue
			}
			if okLo && okHi && okSt && st > 0 && hi-lo <= st {
				// One iteration: splice the body with the induction variable = lo.
				f.replace(op.Regions[0].Args[0], op.Args[0])
				f.block(op.Regions[0], scope)
				out = append(out, op.Regions[0].Ops...)
				continue
			}
			f.block(op.Regions[0], scope)
			out = append(out, op)
			continue
		}
		if v := f.fold(op); v != nil {
			if v == op.Result {
				out = append(out, op) // rewritten in place into a constant
				continue
			}
			f.replace(op.Result, v)
			continue
		}
		if f.key = appendCSEKey(f.key[:0], op); len(f.key) > 0 {
			if prev := scope.lookup(f.key); prev != nil {
				f.replace(op.Result, prev)
				continue
			}
			scope.m[string(f.key)] = op.Result
		}
		out = append(out, op)
	}
	b.Ops = out
}

// fold returns a replacement for op's result, or nil. A returned value whose Def is op means op
// was rewritten in place into a constant.
func (f *folder) fold(op *ir.Op) *ir.Value {
	if op.Result == nil {
		return nil
	}
	rt, _ := op.Result.Type.(*types.Basic)
	switch op.Code {
	case ir.OpBinary:
		x, y := op.Args[0], op.Args[1]
		if rt == nil {
			return nil
		}
		if ir.IsConst(x) && ir.IsConst(y) {
			if rt.IsFloat() {
				if v, ok := foldFloat(op.Sub, x.Def.Float, y.Def.Float); ok {
					return f.makeConst(op, rt, 0, ir.RoundFloat(v, rt))
				}
				return nil
			}
			return f.makeConst(op, rt, ir.EvalInt(op.Sub, x.Def.Int, y.Def.Int, rt), 0)
		}
		if rt.IsInteger() || rt.IsBool() {
			xc, xok := ir.ConstInt(x)
			yc, yok := ir.ConstInt(y)
			switch op.Sub {
			case ir.BinAdd, ir.BinOr, ir.BinXor:
				if yok && yc == 0 {
					return x
				}
				if xok && xc == 0 {
					return y
				}
			case ir.BinSub, ir.BinShl, ir.BinShr:
				if yok && yc == 0 {
					return x
				}
			case ir.BinMul:
				if yok && yc == 1 {
					return x
				}
				if xok && xc == 1 {
					return y
				}
				if (yok && yc == 0) || (xok && xc == 0) {
					return f.makeConst(op, rt, 0, 0)
				}
			case ir.BinDiv:
				if yok && yc == 1 {
					return x
				}
			case ir.BinAnd:
				if rt.IsBool() {
					if yok {
						if yc != 0 {
							return x
						}
						return f.makeConst(op, rt, 0, 0)
					}
					if xok {
						if xc != 0 {
							return y
						}
						return f.makeConst(op, rt, 0, 0)
					}
				}
			case ir.BinMin, ir.BinMax:
				if x == y {
					return x
				}
			}
		}
		if rt.IsFloat() && op.Sub == ir.BinMul {
			if ir.IsConst(y) && y.Def.Float == 1 {
				return x
			}
			if ir.IsConst(x) && x.Def.Float == 1 {
				return y
			}
		}
	case ir.OpCmp:
		x, y := op.Args[0], op.Args[1]
		xb := x.Basic()
		if xb == nil {
			return nil
		}
		if ir.IsConst(x) && ir.IsConst(y) {
			var r bool
			if xb.IsFloat() {
				r = cmpFloat(op.Sub, x.Def.Float, y.Def.Float)
			} else {
				r = ir.CmpInt(op.Sub, x.Def.Int, y.Def.Int, xb.IsUnsigned())
			}
			v := int64(0)
			if r {
				v = 1
			}
			return f.makeConst(op, rt, v, 0)
		}
		if x == y && !xb.IsFloat() {
			switch op.Sub {
			case ir.CmpEq, ir.CmpLe, ir.CmpGe:
				return f.makeConst(op, rt, 1, 0)
			default:
				return f.makeConst(op, rt, 0, 0)
			}
		}
	case ir.OpCast:
		x := op.Args[0]
		xt, _ := x.Type.(types.Type)
		if xt != nil && types.Identical(xt, op.Result.Type.(types.Type)) {
			return x
		}
		if ir.IsConst(x) && rt != nil {
			i, fl := ir.ConvertConst(x.Def.Int, x.Def.Float, x.Basic(), rt)
			return f.makeConst(op, rt, i, fl)
		}
	case ir.OpUnary:
		x := op.Args[0]
		if !ir.IsConst(x) || rt == nil {
			return nil
		}
		if rt.IsFloat() {
			v := x.Def.Float
			switch op.Sub {
			case ir.UnNeg:
				v = -v
			case ir.UnAbs:
				v = math.Abs(v)
			case ir.UnSqrt:
				v = math.Sqrt(v)
			case ir.UnFloor:
				v = math.Floor(v)
			case ir.UnCeil:
				v = math.Ceil(v)
			default:
				return nil // transcendental functions are left to the target's math library
			}
			return f.makeConst(op, rt, 0, ir.RoundFloat(v, rt))
		}
		v := x.Def.Int
		switch op.Sub {
		case ir.UnNeg:
			v = -v
		case ir.UnNot:
			if rt.IsBool() {
				v ^= 1
			} else {
				v = ^v
			}
		case ir.UnAbs:
			if v < 0 && !rt.IsUnsigned() {
				v = -v
			}
		default:
			return nil
		}
		return f.makeConst(op, rt, ir.WrapInt(v, rt), 0)
	case ir.OpSelect:
		if c, ok := ir.ConstInt(op.Args[0]); ok {
			if c != 0 {
				return op.Args[1]
			}
			return op.Args[2]
		}
		if op.Args[1] == op.Args[2] {
			return op.Args[1]
		}
	}
	return nil
}

// makeConst rewrites op in place into a constant and returns its result.
func (f *folder) makeConst(op *ir.Op, t *types.Basic, i int64, fl float64) *ir.Value {
	op.Code = ir.OpConst
	op.Sub = 0
	op.Args = nil
	op.Int = i
	op.Float = fl
	op.Str = ""
	op.Type = nil
	f.changed = true
	_ = t
	return op.Result
}

func foldFloat(sub int, x, y float64) (float64, bool) {
	switch sub {
	case ir.BinAdd:
		return x + y, true
	case ir.BinSub:
		return x - y, true
	case ir.BinMul:
		return x * y, true
	case ir.BinDiv:
		return x / y, true
	case ir.BinMin:
		if y < x {
			return y, true
		}
		return x, true
	case ir.BinMax:
		if y > x {
			return y, true
		}
		return x, true
	}
	return 0, false
}

func cmpFloat(sub int, x, y float64) bool {
	switch sub {
	case ir.CmpEq:
		return x == y
	case ir.CmpNe:
		return x != y
	case ir.CmpLt:
		return x < y
	case ir.CmpLe:
		return x <= y
	case ir.CmpGt:
		return x > y
	case ir.CmpGe:
		return x >= y
	}
	return false
}

// dce removes pure ops whose results are unused (and empty control flow). It reports whether
// anything was removed.
func dce(b *ir.Block) bool {
	uses := map[*ir.Value]int{}
	ir.Walk(b, func(op *ir.Op) {
		for _, a := range op.Args {
			uses[a]++
		}
	})
	removed := false
	for {
		changed := false
		var sweep func(b *ir.Block)
		sweep = func(b *ir.Block) {
			out := b.Ops[:0]
			for _, op := range b.Ops {
				for _, r := range op.Regions {
					sweep(r)
				}
				dead := false
				switch {
				case op.Result != nil && uses[op.Result] == 0 && (op.Pure() || op.Code == ir.OpLoad && loadIsLocal(op)):
					dead = true
				case op.Code == ir.OpFor && len(op.Regions[0].Ops) == 0:
					dead = true
				case op.Code == ir.OpAlloc && uses[op.Result] == 0:
					dead = true
				}
				if dead {
					for _, a := range op.Args {
						uses[a]--
					}
					changed = true
					continue
				}
				out = append(out, op)
			}
			b.Ops = out
		}
		sweep(b)
		if !changed {
			break
		}
		removed = true
	}
	// Slots that are only stored to are dead too.
	loads := map[*ir.Value]bool{}
	ir.Walk(b, func(op *ir.Op) {
		if op.Code == ir.OpLoad {
			loads[op.Args[0]] = true
		}
	})
	var sweepStores func(b *ir.Block)
	sweepStores = func(b *ir.Block) {
		out := b.Ops[:0]
		for _, op := range b.Ops {
			for _, r := range op.Regions {
				sweepStores(r)
			}
			if op.Code == ir.OpStore {
				if _, isSlot := op.Args[0].Type.(*ir.Slot); isSlot && !loads[op.Args[0]] {
					removed = true
					continue
				}
			}
			out = append(out, op)
		}
		b.Ops = out
	}
	sweepStores(b)
	return removed
}

// loadIsLocal reports whether a load reads a local slot with no bounds check left (so removing
// it changes nothing, not even the violation word).
func loadIsLocal(op *ir.Op) bool {
	switch op.Args[0].Type.(type) {
	case *ir.Slot, *types.Vector:
	default:
		return false
	}
	for _, c := range op.Checks {
		if c != 0 {
			return false
		}
	}
	return true
}
