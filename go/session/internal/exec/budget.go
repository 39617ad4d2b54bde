package exec

import (
	"fmt"
	"unsafe"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// A run's share of its session's memory budget (Engine.Mem, session.WithMemoryBudget).
//
// Three kinds of memory are charged to the budget:
//   - device memory the run's ModelSessions and the compiled plans' instances allocate (the
//     session's ModelContext charges the same budget on the host provider, before allocating);
//   - reservations: an op reserves the bytes of a tensor before it allocates it (ReserveShape,
//     called where the size comes from the inputs' values or shapes: ConstantOfShape, Expand,
//     Tile, Range, OneHot, every kernel-planned op's outputs, a plan's host step's traced
//     outputs, Loop's and Scan's accumulated outputs). They last until the node returns (or,
//     outside a node, until the run ends);
//   - values: the interpreter charges each node's outputs as it stores them (once per storage:
//     an output viewing an input's memory is not new memory) and credits them when no later
//     node reads them; a node whose outputs exceed the budget fails there.
//
// Everything a run still holds is credited back when it ends (RunCtx.Close), outputs
// included: those belong to the caller from then on.

// liveBuf is one storage of the values a run holds, and how many values share it.
type liveBuf struct {
	bytes uint64
	refs  int
}

// runMem is what a run holds of the budget.
type runMem struct {
	live      map[uintptr]*liveBuf // the values' storages, by address
	held      uint64               // every byte the run holds
	transient uint64               // of held, the reservations (released per node)
}

// budget is the session's memory budget, nil without one (a run outside a session).
func (rc *RunCtx) budget() *device.Budget {
	if rc == nil || rc.Eng == nil {
		return nil
	}
	return rc.Eng.Mem
}

// Reserve charges bytes for what (a tensor the running op is about to allocate) to the
// session's memory budget until the op returns (until the run ends, outside an op): see
// ops.OpRun. Over the budget, it fails with an *Error of kind ErrOverBudget naming what, the
// size and the budget.
func (rc *RunCtx) Reserve(what string, bytes uint64) error {
	b := rc.budget()
	if b == nil || bytes == 0 {
		return nil
	}
	if err := b.Charge("Run", what, bytes); err != nil {
		return err
	}
	rc.mem.held += bytes
	rc.mem.transient += bytes
	return nil
}

// Unreserve gives back bytes that Reserve took, before the op returns (Loop's carried
// values of the previous iteration, say).
func (rc *RunCtx) Unreserve(bytes uint64) {
	b := rc.budget()
	if b == nil {
		return
	}
	bytes = min(bytes, rc.mem.transient)
	rc.mem.transient -= bytes
	rc.mem.held -= bytes
	b.Credit(bytes)
}

// releaseTo gives back the reservations made since transient was mark (RunNode's end).
func (rc *RunCtx) releaseTo(mark uint64) {
	if rc.mem.transient > mark {
		rc.Unreserve(rc.mem.transient - mark)
	}
}

// storages calls f with the address and byte size of each storage of t: its elements' slice,
// or each tensor's of a sequence or optional. Empty storages are skipped.
func storages(t tensor.Tensor, f func(addr uintptr, bytes uint64)) {
	if box := tensor.Box(t); box != nil {
		if tensor.IsSeq(t) || tensor.IsOpt(t) {
			elems := tensor.SeqElems(t)
			// The sequence itself: a tensor header and shape an element, whatever their size
			// (a Loop that inserts empty tensors grows too).
			if len(elems) > 0 {
				f(uintptr(unsafe.Pointer(box)), uint64(len(elems))*seqElemOverhead)
			}
			for _, e := range elems {
				storages(e, f)
			}
		}
		return
	}
	if r := tensor.RelaidOf(t); r != nil { // its packed elements (RawBytes would unpack a copy)
		if len(r.Packed) > 0 {
			f(uintptr(unsafe.Pointer(unsafe.SliceData(r.Packed))), uint64(4*len(r.Packed)))
		}
		return
	}
	if raw, ok := ops.RawBytes(t); ok {
		if len(raw) > 0 {
			f(uintptr(unsafe.Pointer(unsafe.SliceData(raw))), uint64(len(raw)))
		}
		return
	}
	if s, ok := t.Data().([]string); ok && len(s) > 0 {
		bytes := uint64(len(s)) * uint64(unsafe.Sizeof(""))
		for _, v := range s {
			bytes += uint64(len(v))
		}
		f(uintptr(unsafe.Pointer(unsafe.SliceData(s))), bytes)
	}
}

// seqElemOverhead is what an element of a sequence costs beside its data: the tensor's
// header and shape.
const seqElemOverhead = 96

// valueBytes is the bytes of t's storages, each counted once.
func valueBytes(t tensor.Tensor) uint64 {
	var n uint64
	if tensor.Box(t) == nil {
		storages(t, func(_ uintptr, b uint64) { n += b })
		return n
	}
	seen := map[uintptr]bool{} // a sequence's elements may share memory
	storages(t, func(a uintptr, b uint64) {
		if !seen[a] {
			seen[a] = true
			n += b
		}
	})
	return n
}

// holdOutputs charges n's outputs to the budget as values of the run: a storage the run holds
// already gains a reference, one inside an input's memory (a view the op returned) is not
// new memory, any other is charged. Over the budget it fails naming the output and its size
// (the op has allocated it by then: it is dropped with the failed run).
func (rc *RunCtx) holdOutputs(n *graph.Node, in, outs []tensor.Tensor) error {
	b := rc.budget()
	if b == nil {
		return nil
	}
	if rc.mem.live == nil {
		rc.mem.live = map[uintptr]*liveBuf{}
	}
	var spans *inputSpans // built on first need
	var err error
	for i, o := range outs {
		if i >= len(n.Outputs) || n.Outputs[i] == "" {
			continue // not stored: it goes with the node
		}
		storages(o, func(addr uintptr, bytes uint64) {
			if err != nil {
				return
			}
			if lb := rc.mem.live[addr]; lb != nil {
				lb.refs++
				return
			}
			if spans == nil {
				spans = newInputSpans(in)
			}
			if spans.contain(addr, bytes) {
				return
			}
			if err = b.Charge("Run", fmt.Sprintf("output %q", n.Outputs[i]), bytes); err == nil {
				rc.mem.live[addr] = &liveBuf{bytes: bytes, refs: 1}
				rc.mem.held += bytes
			}
		})
	}
	return err
}

// inputSpans is the memory of a node's inputs: the start of each storage, and the ranges of
// the first few (an output viewing part of an input lies inside one).
type inputSpans struct {
	starts map[uintptr]bool
	ranges [][2]uintptr
}

// maxSpanRanges bounds the ranges inputSpans checks containment in (a sequence input may
// have thousands of storages; an output at an exact start is still found).
const maxSpanRanges = 16

func newInputSpans(in []tensor.Tensor) *inputSpans {
	s := &inputSpans{starts: map[uintptr]bool{}}
	for _, t := range in {
		storages(t, func(a uintptr, b uint64) {
			s.starts[a] = true
			if len(s.ranges) < maxSpanRanges {
				s.ranges = append(s.ranges, [2]uintptr{a, a + uintptr(b)})
			}
		})
	}
	return s
}

// contain says whether [addr, addr+bytes) lies inside an input's storage.
func (s *inputSpans) contain(addr uintptr, bytes uint64) bool {
	if s.starts[addr] {
		return true
	}
	for _, r := range s.ranges {
		if addr >= r[0] && addr+uintptr(bytes) <= r[1] {
			return true
		}
	}
	return false
}

// dropValue credits t's storages when no other value of the run holds them.
func (rc *RunCtx) dropValue(t tensor.Tensor) {
	b := rc.budget()
	if b == nil || rc.mem.live == nil {
		return
	}
	storages(t, func(addr uintptr, _ uint64) {
		lb := rc.mem.live[addr]
		if lb == nil {
			return
		}
		if lb.refs--; lb.refs == 0 {
			delete(rc.mem.live, addr)
			rc.mem.held -= lb.bytes
			b.Credit(lb.bytes)
		}
	})
}

// dropScope drops the values g's nodes stored in sc that are still there (a subgraph's scope
// at its end).
func (rc *RunCtx) dropScope(g *graph.Graph, sc *Scope) {
	if rc.budget() == nil || len(rc.mem.live) == 0 {
		return
	}
	for _, n := range g.Nodes {
		for _, name := range n.Outputs {
			if t, ok := sc.Vals[name]; ok && name != "" {
				rc.dropValue(t)
			}
		}
	}
}

// releaseMem credits everything the run holds (Close).
func (rc *RunCtx) releaseMem() {
	if b := rc.budget(); b != nil {
		b.Credit(rc.mem.held)
	}
	rc.mem = runMem{}
}
