package passes

import (
	"fmt"

	"github.com/loomrt/loom/go/loom/ir"
	"github.com/loomrt/loom/go/loom/types"
)

// MaxOps bounds the ops of a function after unrolling (nested unroll loops multiply).
const MaxOps = 200000

// Unroll fully unrolls scf.for ops marked unroll whose bounds folded to constants; an unroll
// loop whose bounds are not constant is an error, and so is code that grows beyond MaxOps.
func Unroll(f *ir.Func) error {
	var err error
	total := 0
	ir.Walk(f.Body, func(*ir.Op) { total++ })
	var visit func(b *ir.Block)
	visit = func(b *ir.Block) {
		var out []*ir.Op
		for _, op := range b.Ops {
			for _, r := range op.Regions {
				visit(r)
			}
			if op.Code != ir.OpFor || !op.Unroll {
				out = append(out, op)
				continue
			}
			lo, ok1 := ir.ConstInt(op.Args[0])
			hi, ok2 := ir.ConstInt(op.Args[1])
			st, ok3 := ir.ConstInt(op.Args[2])
			if !ok1 || !ok2 || !ok3 || st <= 0 {
				if err == nil {
					err = fmt.Errorf("%s:%d:%d: unroll bounds are not constants", f.Filename, op.Pos.Line, op.Pos.Col)
				}
				out = append(out, op)
				continue
			}
			if hi > lo && (hi-lo+st-1)/st > types.MaxUnroll {
				if err == nil {
					err = fmt.Errorf("%s:%d:%d: unroll trip count %d exceeds %d", f.Filename, op.Pos.Line, op.Pos.Col, (hi-lo+st-1)/st, types.MaxUnroll)
				}
				out = append(out, op)
				continue
			}
			body := op.Regions[0]
			size := 0
			ir.Walk(body, func(*ir.Op) { size++ })
			trips := int64(0)
			if hi > lo {
				trips = (hi - lo + st - 1) / st
			}
			if int64(total)+trips*int64(size+1) > MaxOps {
				if err == nil {
					err = fmt.Errorf("%s:%d:%d: unrolled code would exceed %d operations", f.Filename, op.Pos.Line, op.Pos.Col, MaxOps)
				}
				out = append(out, op)
				continue
			}
			total += int(trips) * (size + 1)
			for i := lo; i < hi; i += st {
				c := &ir.Op{Code: ir.OpConst, Int: i}
				c.Result = f.NewValue(types.Typ[types.Index], "")
				c.Result.Def = c
				out = append(out, c)
				m := map[*ir.Value]*ir.Value{body.Args[0]: c.Result}
				for _, inner := range body.Ops {
					out = append(out, cloneOp(f, inner, m))
				}
			}
		}
		b.Ops = out
	}
	visit(f.Body)
	return err
}

// cloneOp deep-copies op, mapping operands through m and recording new results in m.
func cloneOp(f *ir.Func, op *ir.Op, m map[*ir.Value]*ir.Value) *ir.Op {
	n := *op
	n.Args = make([]*ir.Value, len(op.Args))
	for i, a := range op.Args {
		if r, ok := m[a]; ok {
			n.Args[i] = r
		} else {
			n.Args[i] = a
		}
	}
	if op.Checks != nil {
		n.Checks = append([]uint8(nil), op.Checks...)
	}
	if op.Result != nil {
		n.Result = f.NewValue(op.Result.Type, op.Result.Name)
		n.Result.Def = &n
		m[op.Result] = n.Result
	}
	n.Regions = nil
	for _, r := range op.Regions {
		nr := &ir.Block{}
		for _, a := range r.Args {
			na := f.NewValue(a.Type, a.Name)
			m[a] = na
			nr.Args = append(nr.Args, na)
		}
		for _, inner := range r.Ops {
			nr.Ops = append(nr.Ops, cloneOp(f, inner, m))
		}
		n.Regions = append(n.Regions, nr)
	}
	return &n
}

// Scalarize replaces local arrays whose every access has constant in-range indices by one slot
// per element: after unrolling, a register tile such as `var acc [MR][NV]vec[16]f32` becomes
// MR*NV vector variables that the C compiler keeps in registers.
func Scalarize(f *ir.Func) {
	type info struct {
		alloc *ir.Op
		ok    bool
	}
	arrays := map[*ir.Value]*info{}
	ir.Walk(f.Body, func(op *ir.Op) {
		if op.Code == ir.OpAlloc {
			if s := op.Result.Type.(*ir.Slot); len(s.Dims) > 0 {
				arrays[op.Result] = &info{alloc: op, ok: true}
			}
		}
	})
	if len(arrays) == 0 {
		return
	}
	ir.Walk(f.Body, func(op *ir.Op) {
		for i, a := range op.Args {
			in := arrays[a]
			if in == nil {
				continue
			}
			if (op.Code != ir.OpLoad && op.Code != ir.OpStore) || i != 0 {
				in.ok = false
				continue
			}
			idx := op.Args[1:]
			if op.Code == ir.OpStore {
				idx = op.Args[2:]
			}
			dims := a.Type.(*ir.Slot).Dims
			if len(idx) != len(dims) {
				in.ok = false
				continue
			}
			for d, x := range idx {
				c, ok := ir.ConstInt(x)
				if !ok || c < 0 || c >= int64(dims[d]) {
					in.ok = false
				}
			}
		}
	})
	elems := map[*ir.Value]map[string]*ir.Value{}
	var newAllocs = map[*ir.Op][]*ir.Op{}
	var rewrite func(b *ir.Block)
	rewrite = func(b *ir.Block) {
		for _, op := range b.Ops {
			for _, r := range op.Regions {
				rewrite(r)
			}
			if op.Code != ir.OpLoad && op.Code != ir.OpStore {
				continue
			}
			in := arrays[op.Args[0]]
			if in == nil || !in.ok {
				continue
			}
			n := 1
			if op.Code == ir.OpStore {
				n = 2
			}
			key := ""
			for _, x := range op.Args[n:] {
				c, _ := ir.ConstInt(x)
				key += fmt.Sprintf("_%d", c)
			}
			m := elems[op.Args[0]]
			if m == nil {
				m = map[string]*ir.Value{}
				elems[op.Args[0]] = m
			}
			slot := m[key]
			if slot == nil {
				s := op.Args[0].Type.(*ir.Slot)
				a := &ir.Op{Code: ir.OpAlloc, Type: in.alloc.Type, Pos: in.alloc.Pos}
				a.Result = f.NewValue(&ir.Slot{Elem: s.Elem}, op.Args[0].Name+key)
				a.Result.Def = a
				newAllocs[in.alloc] = append(newAllocs[in.alloc], a)
				slot = a.Result
				m[key] = slot
			}
			op.Args = append([]*ir.Value{slot}, op.Args[1:n]...)
			op.Checks = nil
		}
	}
	rewrite(f.Body)
	// Put the element slots where the array was declared.
	var place func(b *ir.Block)
	place = func(b *ir.Block) {
		var out []*ir.Op
		for _, op := range b.Ops {
			for _, r := range op.Regions {
				place(r)
			}
			if in := arrays[op.Result]; op.Code == ir.OpAlloc && in != nil && in.ok {
				out = append(out, newAllocs[op]...)
				continue
			}
			out = append(out, op)
		}
		b.Ops = out
	}
	place(f.Body)
}
