package plan

import (
	"encoding/binary"
	"math"
	"slices"
	"strconv"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Branches as plan steps. An If whose condition is computed at run time (a threshold on a
// score, say) cannot be inlined as one whose condition the signature fixes; run as a host
// step, it would interpret its branch on every run. Instead the plan holds both branches'
// nodes as steps, laid out one after the other:
//
//	branch step (reads the condition)   false: go to the else-branch
//	then-branch's steps [copies]
//	jump step                           go past the else-branch
//	else-branch's steps [copies]
//
// Kernel steps between these form segments as anywhere else, so each branch replays its own
// recorded segments; the If itself costs a read of one element and a jump. The If's outputs
// live in one slot each, written by the step of either branch that makes the value (the
// else-branch's value moves into the slot the then-branch's has); only a branch output that no
// step of the branch makes for the If alone (a constant, an outer value, one value given for
// two outputs) is copied. Liveness is computed over the steps in this order: a value read
// only in the then-branch may share memory with the else-branch's, which is sound since one
// run takes one branch.
//
// The trace a plan is built from holds both branches: the interpreter's traced run evaluates
// the branch the condition did not take as well (exec.RunCtx.TraceUntaken). When that branch
// fails on the traced run's data, when the branches' outputs differ in type or shape, or when
// a branch's node cannot be planned, the If stays a host step, with the reason.

// branchNames are an If's branch attributes, then first.
var branchNames = [2]string{"then_branch", "else_branch"}

// branchValueNames are the values a branch defines: its nodes' outputs and its initializers,
// those of the subgraphs in it included.
func branchValueNames(g *graph.Graph) []string {
	var names []string
	var walk func(g *graph.Graph)
	walk = func(g *graph.Graph) {
		for name := range g.Initializers {
			names = append(names, name)
		}
		for _, n := range g.Nodes {
			for _, out := range n.Outputs {
				if out != "" {
					names = append(names, out)
				}
			}
			for _, sg := range n.Subgraphs() {
				walk(sg)
			}
		}
	}
	walk(g)
	slices.Sort(names)
	return slices.Compact(names)
}

// copyNode names the copy of branch's output i (the value named value) into If n's output.
func copyNode(n *graph.Node, branch, value string, i int) *graph.Node {
	return graph.NewNode(n.Name+"/"+branch+"/output "+strconv.Itoa(i), "Identity", []string{value}, []string{n.Outputs[i]})
}

// buildMark is how far a template's build had come, to go back to (rollback).
type buildMark struct {
	steps, nodes                       int
	folded, aliases, inlined, branched int
	slots                              []PlanSlot
}

func (t *Template) mark() buildMark {
	return buildMark{len(t.Steps), len(t.Nodes), t.Folded, t.Aliases, t.Inlined, t.Branched, slices.Clone(t.Slots)}
}

// rollback undoes what the build added since m.
func (t *Template) rollback(m buildMark) {
	clear(t.Steps[m.steps:])
	t.Steps = t.Steps[:m.steps]
	t.Nodes = t.Nodes[:m.nodes]
	t.Folded, t.Aliases, t.Inlined, t.Branched = m.folded, m.aliases, m.inlined, m.branched
	t.Slots = m.slots
}

// moveSlot makes the steps from step on use slot to where they used slot from, which no
// step uses any more.
func (t *Template) moveSlot(from, to, step int) {
	move := func(refs []planRef) {
		for i := range refs {
			if !refs[i].fixed && refs[i].Slot == from {
				refs[i].Slot = to
			}
		}
	}
	for i := step; i < len(t.Steps); i++ {
		st := &t.Steps[i]
		move(st.in)
		move(st.out)
		for name, r := range st.implicit {
			if !r.fixed && r.Slot == from {
				r.Slot = to
				st.implicit[name] = r
			}
		}
	}
	f, o := &t.Slots[from], &t.Slots[to]
	o.First, o.Last = min(o.First, f.First), max(o.Last, f.Last)
	o.Bytes = max(o.Bytes, f.Bytes)
	f.Bytes, f.Last = 0, f.First
}

// linkJumps sets the branch and jump items' Jump: the item of their target step (the first
// item at or after it; len(Items) past the end).
func (t *Template) linkJumps() {
	itemAt := make([]int, len(t.Steps)+1)
	for i := range itemAt {
		itemAt[i] = -1
	}
	for ix, it := range t.Items {
		first := it.Step
		if it.Segment >= 0 {
			first = t.Segments[it.Segment][0]
		}
		itemAt[first] = ix
	}
	next := len(t.Items)
	for s := len(t.Steps); s >= 0; s-- {
		if itemAt[s] >= 0 {
			next = itemAt[s]
		}
		itemAt[s] = next
	}
	for ix := range t.Items {
		it := &t.Items[ix]
		if it.Segment < 0 {
			if st := &t.Steps[it.Step]; st.Kind == branchStep || st.Kind == jumpStep {
				it.Jump = itemAt[st.target]
			}
		}
	}
}

// runBranch reads branch step st's condition: whether the then-branch runs.
func (t *Template) runBranch(rc *exec.RunCtx, inst *Instance, st *planStep) (bool, error) {
	r := st.in[0]
	if inst.dev != nil && !r.fixed {
		if err := t.fetch(inst, []int{r.Slot}); err != nil {
			return false, tensor.NodeError(st.Node, err)
		}
	}
	cond := t.view(inst, r)
	then, ok := nonzero(cond)
	if !ok {
		return false, tensor.NewNodeError("Run", tensor.ErrInvalidArgument, st.Node, "If condition is %s, not one number", exec.DescribeTensor(cond))
	}
	if rc.Trace != nil {
		sp := rc.OpStart(st.Node, []tensor.Tensor{cond})
		branch := branchNames[1]
		if then {
			branch = branchNames[0]
		}
		sp.End("plan branch", "runs the "+branch+"'s plan steps (the plan holds both branches)", nil, nil)
	}
	return then, nil
}

// runCopy runs copy step st: a branch's output into the If's.
func (t *Template) runCopy(inst *Instance, st *planStep) error {
	src, dst := st.in[0], st.out[0]
	if inst.dev != nil {
		if !src.fixed {
			if err := t.fetch(inst, []int{src.Slot}); err != nil {
				return tensor.NodeError(st.Node, err)
			}
		}
		b, _ := rawBytesOf(t.view(inst, src))
		return t.storeHostOutput(inst, dst.Slot, b)
	}
	b, _ := rawBytesOf(t.view(inst, src))
	s := t.Slots[dst.Slot]
	if int64(len(b)) > s.Bytes {
		return tensor.NewNodeError("Run", tensor.ErrInvalidArgument, st.Node, "a branch output of %d bytes for a slot of %d", len(b), s.Bytes)
	}
	copy(inst.Mem[s.Offset:s.Offset+s.Bytes], b)
	return nil
}

// describeType spells a value's type as the run's errors do: float[1,8].
func describeType(dtype tensor.DType, shape []int64) string {
	b := []byte(dtype.String() + "[")
	for i, d := range shape {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, d, 10)
	}
	return string(append(b, ']'))
}

// rawBytesOf is t's bytes (nil for a value without any).
func rawBytesOf(t tensor.Tensor) ([]byte, bool) {
	if !t.IsValid() || tensor.Box(t) != nil {
		return nil, false
	}
	return ops.RawBytes(t)
}

// nonzero reads an If condition as the interpreter does (its one element is not zero:
// negative zero is zero, NaN is not); ok is false unless it is one number.
func nonzero(cond tensor.Tensor) (value, ok bool) {
	if !cond.IsValid() || tensor.Box(cond) != nil || cond.Len() != 1 {
		return false, false
	}
	b, _ := ops.RawBytes(cond)
	switch cond.DType() {
	case graph.Bool, graph.Uint8, graph.Int8:
		if len(b) == 1 {
			return b[0] != 0, true
		}
	case graph.Float:
		if len(b) == 4 {
			return math.Float32frombits(binary.LittleEndian.Uint32(b)) != 0, true
		}
	case graph.String:
		return false, false
	}
	return tensor.Float64s(cond)[0] != 0, true
}
