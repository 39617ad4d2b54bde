package codegen

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/loomrt/loom/go/loom/ir"
	"github.com/loomrt/loom/go/loom/types"
)

// The host runs a block as one call that loops over its threads (see threadLoops). A barrier
// ends one such loop and starts the next, so the device body after the prologue becomes a
// sequence of thread segments, and a loop that holds barriers (its bounds are the same in every
// thread: the checker allows barrier() nowhere else) becomes a C loop at block level whose body
// is again a sequence of segments:
//
//	for (kt = lo; kt < hi; kt++) {        // block level
//	  for (tx...) { segment 1 }           // every thread up to the barrier
//	  for (tx...) { segment 2 }           // every thread after it
//	}
//
// A value that one segment computes and a later one uses is either recomputed there (pure
// arithmetic on parameters, ids and other such values, as CUDA would keep it in a register) or
// kept per thread: loads and other values are stored by their segment in an array with an
// element per thread of the block (loom_ptN[loom_lin]), and variables (slots, arrays) used in
// more than one segment live in such arrays altogether. CUDA keeps all of these in its threads'
// registers; the host reproduces exactly that.

// maxThreadState bounds the per-thread storage of one host block (it lives on the stack of
// the thread that runs the block).
const maxThreadState = 1 << 20

// syncPlan is the host's plan of a device body around its barriers.
type syncPlan struct {
	nodes []*syncNode
	segs  []*hostSegment
	// promoted maps each variable used in more than one segment to the C name of its
	// per-thread array; spilled does the same for the SSA values kept per thread.
	promoted map[*ir.Value]string
	spilled  map[*ir.Value]string
	order    []*ir.Value // promoted and spilled values in declaration order
}

// syncNode is a thread segment or a loop at block level.
type syncNode struct {
	seg  *hostSegment
	loop *ir.Op
	pre  []*ir.Op // loop: the block-level ops that compute its bounds
	body []*syncNode
}

// hostSegment is the code between two barriers, run by every thread of the block in turn.
type hostSegment struct {
	id  int
	ops []*ir.Op
	// pre are the pure ops of earlier segments recomputed here.
	pre []*ir.Op
	// state says the segment reads or writes per-thread storage.
	state bool
}

// hasBarrier reports whether b holds a barrier (in nested loops too).
func hasBarrier(b *ir.Block) bool {
	found := false
	ir.Walk(b, func(op *ir.Op) {
		if op.Code == ir.OpBarrier {
			found = true
		}
	})
	return found
}

// hostBody emits the device body after the prologue (whose values are in hoisted) for the host.
func (e *emitter) hostBody(rest []*ir.Op, hoisted map[*ir.Value]bool) {
	p := &syncPlan{promoted: map[*ir.Value]string{}, spilled: map[*ir.Value]string{}}
	e.sync = p
	defSeg := map[*ir.Value]int{}
	p.nodes = p.build(rest, defSeg)
	avail := map[*ir.Value]bool{}
	for v := range hoisted {
		avail[v] = true
	}
	e.analyze(p.nodes, avail, defSeg)
	if e.err != nil {
		return
	}
	// Segments that define per-thread values need the thread's index too.
	for _, v := range p.order {
		if _, ok := p.spilled[v]; ok {
			p.segs[defSeg[v]].state = true
		}
		if _, ok := p.promoted[v]; ok {
			p.segs[defSeg[v]].state = true
		}
	}
	if len(p.order) > 0 {
		e.declareThreadState()
	}
	e.emitNodes(p.nodes)
}

// build splits ops into segments and block-level loops, numbering the segments in order and
// recording the segment of every value defined in each.
func (p *syncPlan) build(ops []*ir.Op, defSeg map[*ir.Value]int) []*syncNode {
	var nodes []*syncNode
	var cur []*ir.Op
	flush := func() {
		effect := false
		for _, op := range cur {
			effect = effect || !op.Pure()
		}
		if !effect {
			// Arithmetic alone (a bound of the next loop, say): later segments that use
			// its values recompute them, so the threads have nothing to do here.
			for _, op := range cur {
				if op.Result != nil {
					defSeg[op.Result] = -1 - len(p.segs)
				}
			}
			cur = nil
			return
		}
		s := &hostSegment{id: len(p.segs), ops: cur}
		p.segs = append(p.segs, s)
		ir.Walk(&ir.Block{Ops: cur}, func(op *ir.Op) {
			if op.Result != nil {
				defSeg[op.Result] = s.id
			}
		})
		nodes = append(nodes, &syncNode{seg: s})
		cur = nil
	}
	for _, op := range ops {
		switch {
		case op.Code == ir.OpBarrier:
			flush()
		case op.Code == ir.OpFor && hasBarrier(op.Regions[0]):
			flush()
			nodes = append(nodes, &syncNode{loop: op, body: p.build(op.Regions[0].Ops, defSeg)})
		default:
			cur = append(cur, op)
		}
	}
	flush()
	return nodes
}

// analyze decides, for each segment, which values of earlier segments it recomputes and which
// it reads from per-thread storage, and computes each block-level loop's bounds at block level.
// avail holds the values computed at block level in scope (the prologue's, loop variables,
// bounds).
func (e *emitter) analyze(nodes []*syncNode, avail map[*ir.Value]bool, defSeg map[*ir.Value]int) {
	p := e.sync
	for _, n := range nodes {
		if n.loop != nil {
			for _, a := range n.loop.Args {
				e.blockLevel(a, avail, &n.pre)
			}
			inner := make(map[*ir.Value]bool, len(avail)+1)
			for v := range avail {
				inner[v] = true
			}
			inner[n.loop.Regions[0].Args[0]] = true
			e.analyze(n.body, inner, defSeg)
			continue
		}
		s := n.seg
		need := map[*ir.Op]bool{}
		var visit func(v *ir.Value)
		visit = func(v *ir.Value) {
			j, ok := defSeg[v]
			if !ok || j == s.id || avail[v] || need[v.Def] {
				return
			}
			switch {
			case v.Def.Code == ir.OpAlloc:
				if _, done := p.promoted[v]; !done {
					p.promoted[v] = "loom_pt" + strconv.Itoa(v.ID)
					p.order = append(p.order, v)
				}
				s.state = true
			case v.Def.Pure():
				need[v.Def] = true
				for _, a := range v.Def.Args {
					visit(a)
				}
			default:
				if _, done := p.spilled[v]; !done {
					p.spilled[v] = "loom_pt" + strconv.Itoa(v.ID)
					p.order = append(p.order, v)
				}
				s.state = true
			}
		}
		ir.Walk(&ir.Block{Ops: s.ops}, func(op *ir.Op) {
			for _, a := range op.Args {
				visit(a)
			}
		})
		for op := range need {
			s.pre = append(s.pre, op)
		}
		sort.SliceStable(s.pre, func(a, b int) bool { return s.pre[a].Result.ID < s.pre[b].Result.ID })
	}
}

// blockLevel makes v available at block level, appending the pure ops that compute it to pre.
func (e *emitter) blockLevel(v *ir.Value, avail map[*ir.Value]bool, pre *[]*ir.Op) {
	if avail[v] || ir.IsConst(v) {
		return
	}
	d := v.Def
	if d == nil || !d.Pure() || d.Code == ir.OpThreadID {
		e.err = fmt.Errorf("codegen: the bounds of a loop that holds barrier() depend on the thread (value %%%d)", v.ID)
		return
	}
	for _, a := range d.Args {
		e.blockLevel(a, avail, pre)
	}
	*pre = append(*pre, d)
	avail[v] = true
}

// declareThreadState declares the per-thread arrays before the first segment.
func (e *emitter) declareThreadState() {
	p := e.sync
	threads := int64(1)
	for _, d := range e.check.Args[3:6] {
		c, ok := ir.ConstInt(d)
		if !ok {
			e.err = fmt.Errorf("codegen: kernel %s keeps values across barriers, which on the host needs a block size that is a constant", e.k.Symbol)
			return
		}
		threads *= c
	}
	total := int64(0)
	for _, v := range p.order {
		var elem any
		dims := ""
		size := int64(1)
		name := p.spilled[v]
		if n, ok := p.promoted[v]; ok {
			s := v.Type.(*ir.Slot)
			elem, name = s.Elem, n
			for _, d := range s.Dims {
				dims += "[" + strconv.Itoa(d) + "]"
				size *= int64(d)
			}
			e.names[v] = n + "[loom_lin]"
		} else {
			elem = v.Type
		}
		switch t := elem.(type) {
		case *types.Basic:
			size *= int64(t.Size())
		case *types.Vector:
			size *= int64(t.Len * t.Elem.Size())
		}
		total += size * threads
		e.line("%s %s[%d]%s;", e.typeName(elem), name, threads, dims)
	}
	if total > maxThreadState {
		e.err = fmt.Errorf("codegen: kernel %s keeps %d bytes per block across barriers on the host (limit %d)", e.k.Symbol, total, maxThreadState)
	}
}

// emitNodes emits segments as thread loops and block-level loops as C loops.
func (e *emitter) emitNodes(nodes []*syncNode) {
	for _, n := range nodes {
		if n.loop == nil {
			e.threadLoops(n.seg)
			// Later segments read this one's kept values from per-thread storage.
			for _, op := range n.seg.ops {
				if op.Result != nil {
					if st := e.sync.spilled[op.Result]; st != "" {
						e.names[op.Result] = st + "[loom_lin]"
					}
				}
			}
			continue
		}
		for _, op := range n.pre {
			e.op(op)
		}
		op := n.loop
		iv := op.Regions[0].Args[0]
		name := e.name(iv, "i")
		e.line("for (loom_i64 %s = %s; %s < %s; %s += %s) {", name, e.val(op.Args[0]), name, e.val(op.Args[1]), name, e.val(op.Args[2]))
		e.indent++
		e.emitNodes(n.body)
		e.indent--
		e.line("}")
	}
}

// linearThread is the index of the current thread in its block.
func (e *emitter) linearThread() string {
	dims := e.check.Args[3:6]
	x := e.tid[0]
	if c, ok := ir.ConstInt(dims[0]); !ok || c != 1 || e.tid[1] != "0LL" || e.tid[2] != "0LL" {
		x = fmt.Sprintf("(%s + %s * (%s + %s * %s))", e.tid[0], e.val(dims[0]), e.tid[1], e.val(dims[1]), e.tid[2])
	}
	return x
}
