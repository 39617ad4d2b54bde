package codegen

import (
	"github.com/loomrt/loom/go/loom/ir"
	"github.com/loomrt/loom/go/loom/types"
)

// xGuard is a host thread segment of the shape
//
//	i := base + thread_id.x
//	if i < n && ... { body }
//
// whose only effect is the guarded body. The host emitter runs the x thread loop over just the
// threads the guard admits instead of testing each one, which leaves C compilers a plain counted
// loop to vectorize (a store under a per-iteration condition is not vectorized).
type xGuard struct {
	// hoisted are the pure ops that do not depend on thread_id.x, emitted before the x loop.
	hoisted []*ir.Op
	// inner are the remaining ops, emitted in the x loop; the guarded if is replaced by its body.
	inner []*ir.Op
	guard *ir.Op
	// lower and upper bound thread_id.x: tx >= base - lo and tx < hi - base (+1 for <=).
	lower, upper []xBound
	// rest are the guard's conjuncts that do not depend on thread_id.x: they guard the whole loop.
	rest []*ir.Value
}

// xBound is one linear bound on thread_id.x: tx (< or >=) limit - offset (+ adjust).
type xBound struct {
	limit, offset *ir.Value // offset nil: 0
	adjust        int64
}

// matchXGuard recognizes an xGuard in the ops of one segment (pre then seg), or returns nil.
func matchXGuard(ops []*ir.Op) *xGuard {
	depX := map[*ir.Value]bool{}
	var ifs []*ir.Op
	for _, op := range ops {
		switch {
		case op.Code == ir.OpIf:
			ifs = append(ifs, op)
			continue
		case op.Code == ir.OpAlloc:
			continue
		case !op.Pure():
			return nil // a load or store outside the guard: every thread has an effect
		}
		if op.Code == ir.OpThreadID && op.Int == 0 {
			depX[op.Result] = true
			continue
		}
		for _, a := range op.Args {
			if depX[a] {
				depX[op.Result] = true
				break
			}
		}
	}
	if len(ifs) != 1 || len(ifs[0].Regions) < 2 || len(ifs[0].Regions[1].Ops) > 0 {
		return nil
	}
	g := &xGuard{guard: ifs[0]}
	for _, c := range conjuncts(g.guard.Args[0]) {
		if !depX[c] {
			g.rest = append(g.rest, c)
			continue
		}
		if !g.bound(c, depX) {
			return nil
		}
	}
	if len(g.upper) == 0 && len(g.lower) == 0 {
		return nil
	}
	for _, op := range ops {
		if op.Pure() && !depX[op.Result] {
			g.hoisted = append(g.hoisted, op)
		} else {
			g.inner = append(g.inner, op)
		}
	}
	return g
}

// conjuncts splits a condition at its scalar ands.
func conjuncts(c *ir.Value) []*ir.Value {
	if d := c.Def; d != nil && d.Code == ir.OpBinary && d.Sub == ir.BinAnd {
		if b := c.Basic(); b != nil && b.IsBool() {
			return append(conjuncts(d.Args[0]), conjuncts(d.Args[1])...)
		}
	}
	return []*ir.Value{c}
}

// bound records c as a bound on thread_id.x when it compares base + thread_id.x with a value
// that does not depend on thread_id.x.
func (g *xGuard) bound(c *ir.Value, depX map[*ir.Value]bool) bool {
	d := c.Def
	if d == nil || d.Code != ir.OpCmp || len(d.Args) != 2 {
		return false
	}
	l, r, sub := d.Args[0], d.Args[1], d.Sub
	if depX[r] { // limit OP i → i OP' limit
		l, r = r, l
		switch sub {
		case ir.CmpLt:
			sub = ir.CmpGt
		case ir.CmpLe:
			sub = ir.CmpGe
		case ir.CmpGt:
			sub = ir.CmpLt
		case ir.CmpGe:
			sub = ir.CmpLe
		}
	}
	if depX[r] || !isIndex(l) || !isIndex(r) {
		return false
	}
	offset, ok := xOffset(l, depX)
	if !ok {
		return false
	}
	switch sub {
	case ir.CmpLt: // tx < r - offset
		g.upper = append(g.upper, xBound{limit: r, offset: offset})
	case ir.CmpLe: // tx < r - offset + 1
		g.upper = append(g.upper, xBound{limit: r, offset: offset, adjust: 1})
	case ir.CmpGe: // tx >= r - offset
		g.lower = append(g.lower, xBound{limit: r, offset: offset})
	case ir.CmpGt: // tx >= r - offset + 1
		g.lower = append(g.lower, xBound{limit: r, offset: offset, adjust: 1})
	default:
		return false
	}
	return true
}

// xOffset returns base when v is thread_id.x (base nil) or base + thread_id.x.
func xOffset(v *ir.Value, depX map[*ir.Value]bool) (*ir.Value, bool) {
	d := v.Def
	if d == nil {
		return nil, false
	}
	if d.Code == ir.OpThreadID && d.Int == 0 {
		return nil, true
	}
	if d.Code != ir.OpBinary || d.Sub != ir.BinAdd {
		return nil, false
	}
	a, b := d.Args[0], d.Args[1]
	if depX[a] {
		a, b = b, a
	}
	if depX[a] || b.Def == nil || b.Def.Code != ir.OpThreadID || b.Def.Int != 0 {
		return nil, false
	}
	return a, true
}

func isIndex(v *ir.Value) bool {
	b := v.Basic()
	return b != nil && b.Kind() == types.Index
}
