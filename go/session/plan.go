package session

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// A compiled run plan runs the main graph for one input signature (the inputs' types and
// shapes) without interpreting it. It is built from one traced interpreter run:
//
//   - values that do not depend on the inputs' data (initializers, Constant, Shape and
//     everything computed from those) are folded: computed once, kept as static tensors;
//   - every other value gets a slot in one arena, placed by liveness so that values that are
//     never live at once share memory; Reshape-like ops alias their input's slot;
//   - each remaining node is a step: a kernel step when its kernel planner (kernel_plan.go)
//     covers it, else a host step that calls the op's Go function on views of the arena;
//   - runs of consecutive kernel steps form a segment, recorded once as a device graph (with
//     edges inferred from the arena regions, as ModelSession.Record does) and replayed per run.
//
// Host steps are guarded: their outputs must have the traced types and shapes, or the run
// falls back to the interpreter and the signature is no longer planned (a data-dependent
// shape, say). The plans' audit (which nodes run where, and why) is ExecutionPlans.

// planRef is where a value of the plan lives: a static tensor, or a slot of the arena viewed
// with a type and shape (aliases view one slot with different shapes).
type planRef struct {
	fixed  bool
	static tensor.Tensor
	slot   int
	dtype  tensor.DType
	shape  []int64
}

// planSlot is a byte range of the arena. Steps are numbered from 0; inputs are written at
// step -1 and graph outputs read after the last step.
type planSlot struct {
	bytes       int64
	first, last int
	offset      int64
}

type stepKind uint8

const (
	kernelStep stepKind = iota
	hostStep
)

// planStep is one node of the plan.
type planStep struct {
	kind stepKind
	node *graph.Node
	in   []planRef // by node input; an omitted optional input is the zero planRef with fixed set
	out  []planRef // by node output; "" outputs have slot -1
	// Kernel steps.
	kernel  *ops.KernelPlan
	scratch []int // slots
	// Host steps.
	fn       exec.RunFunc
	implicit map[string]planRef // outer values the node's subgraphs read (If, Loop, Scan)
	reason   string             // why this node runs where it runs
}

// planItem is a segment (a recorded graph of kernel steps) or a host step.
type planItem struct {
	segment int // >= 0: segments[segment]
	step    int // host step index when segment < 0
}

// planInput is a fed input's slot.
type planInput struct {
	name string
	pos  int // index in the session's inputs
	ref  planRef
}

// planTemplate is what one signature's plan instances share.
type planTemplate struct {
	key      string
	inputs   []planInput
	steps    []planStep
	segments [][]int
	// tuners choose each segment's thread count (built with the template, one a segment).
	tuners     []*threadTuner
	items      []planItem
	slots      []planSlot
	arenaBytes int64
	outputs    []planRef
	folded     int // nodes folded into static values
	inlined    int // If nodes replaced by the branch their fixed condition takes
	// specialized are the inputs whose values the plan takes as fixed (part of its key).
	specialized []string
	aliases     int // nodes that only view their input
	// nodes are the nodes the plan took, in order, with their placements (PlanReport.Nodes).
	nodes []PlanNode
	// bindIn[i] is the run memory (native.RunBinding.Arg) that input i's kernels read in
	// place, or -1 when the input is copied into the arena; bindOut[j] the memory that output
	// j's kernels write in place, or -1 when the output is copied out (see planBindings).
	bindIn, bindOut []int
}

// planInstance is the memory and recordings one run at a time uses.
type planInstance struct {
	outputs outputBlocks // small outputs' memory
	rc      exec.RunCtx  // the fast path's run context (runs of an instance do not overlap)
	ms      *device.ModelSession
	mem     []byte   // the arena, host-visible
	segKeys []string // recording keys by segment
	// words are the launches' violation words (host-visible, 4 bytes each, in launch order);
	// wordOwners[i] is the step whose kernel owns word i, segWords[s] segment s's first word.
	words      []byte
	wordOwners []int
	segWords   []int
	// segBindings[s] are segment s's kernel bindings of bound inputs and outputs (by node,
	// then binding), rebound to the run's memory each run.
	segBindings [][]native.RunBinding
}

// errPlanGuard says a host step produced another type or shape than the plan traced.
var errPlanGuard = errors.New("a host step's output differs from the traced one")

// onnxDomain reports whether n is an ai.onnx operator.
func onnxDomain(n *graph.Node) bool { return n.Domain == "" || n.Domain == "ai.onnx" }

// readsShapesOnly reports whether n reads only its input's shape (Shape, Size), which a plan's
// signature fixes.
func readsShapesOnly(n *graph.Node) bool {
	return onnxDomain(n) && (n.OpType == "Shape" || n.OpType == "Size")
}

// dependsOnData reports whether n's outputs depend on the inputs' data, given which values do
// (dynamic): the plan builder and the trace classify nodes by this one rule, so that the trace
// keeps the values of exactly the nodes the plan folds.
func dependsOnData(n *graph.Node, dynamic func(name string) bool) bool {
	if readsShapesOnly(n) {
		return false
	}
	if n.Traits().Nondeterministic {
		return true
	}
	for _, name := range n.Inputs {
		if name != "" && dynamic(name) {
			return true
		}
	}
	for _, name := range n.ImplicitInputs() {
		if dynamic(name) {
			return true
		}
	}
	return false
}

// tracedNode is one top-level node of the traced interpreter run.
type tracedNode struct {
	graph *graph.Graph // the graph the node belongs to (subgraph nodes come before their If)
	node  *graph.Node
	out   []tensor.Tensor // values only where they do not depend on the inputs' data (tracePlan)
}

// appendPlanKey appends the signature of the fed inputs to b: type and shape of each, in
// input order, and the values of the inputs the plan specializes on (see specializes). ok is
// false when an input is a sequence or optional (never planned).
func (p *planEnv) appendPlanKey(b []byte, ins []tensor.Tensor) ([]byte, bool) {
	control := p.controlInputs()
	for i, name := range p.eng.InputNames {
		t := ins[i]
		if !t.IsValid() || tensor.Box(t) != nil {
			return b, false
		}
		b = strconv.AppendInt(b, int64(t.DType()), 10)
		b = append(b, ':')
		for _, d := range t.Dims() {
			b = strconv.AppendInt(b, d, 10)
			b = append(b, ',')
		}
		if control[name] && specializes(t) {
			b = append(b, '=')
			for _, v := range tensor.Float64s(t) {
				b = strconv.AppendFloat(b, v, 'g', -1, 64)
				b = append(b, ',')
			}
		}
		b = append(b, ';')
	}
	return b, true
}

// specializes says whether a plan takes an input's value as fixed when the value decides
// shapes or control flow: small integer or boolean tensors (a sample rate, a flag, a
// length), whose few values each get their own plan.
func specializes(t tensor.Tensor) bool {
	if t.Len() > 8 || tensor.Box(t) != nil {
		return false
	}
	switch t.DType() {
	case graph.Int64, graph.Int32, graph.Int16, graph.Int8, graph.Uint8, graph.Uint16, graph.Uint32, graph.Uint64, graph.Bool:
		return true
	}
	return false
}

// controlPositions lists, by op type, the inputs whose values decide an op's output shape or
// which subgraph runs.
var controlPositions = map[string][]int{
	"If": {0}, "Loop": {0, 1}, "Reshape": {1}, "Expand": {1}, "Tile": {1}, "Slice": {1, 2, 3, 4},
	"Pad": {1, 3}, "ConstantOfShape": {0}, "Range": {0, 1, 2}, "TopK": {1}, "OneHot": {1},
	"Squeeze": {1}, "Unsqueeze": {1}, "Resize": {1, 2, 3}, "Upsample": {1}, "Split": {1},
	"ReduceSum": {1}, "ReduceMean": {1}, "ReduceMax": {1}, "ReduceMin": {1}, "ReduceProd": {1},
	"ReduceL1": {1}, "ReduceL2": {1}, "ReduceLogSum": {1}, "ReduceLogSumExp": {1}, "ReduceSumSquare": {1},
	"CenterCropPad": {1}, "Col2Im": {1, 2},
}

// controlInputs are the graph inputs whose values reach a control position of the main
// graph, through any chain of ops (Shape and Size read only their input's shape).
func (p *planEnv) controlInputs() map[string]bool {
	p.controlOnce.Do(func() {
		g := p.eng.Model.Graph
		needed := map[string]bool{}
		for i := len(g.Nodes) - 1; i >= 0; i-- {
			n := g.Nodes[i]
			if !onnxDomain(n) || readsShapesOnly(n) {
				continue
			}
			all := false
			for _, out := range n.Outputs {
				all = all || (out != "" && needed[out])
			}
			for j, in := range n.Inputs {
				if all || slices.Contains(controlPositions[n.OpType], j) {
					needed[in] = true
				}
			}
			if all {
				for _, in := range n.ImplicitInputs() {
					needed[in] = true
				}
			}
		}
		p.control = map[string]bool{}
		for _, name := range p.eng.InputNames {
			if needed[name] {
				p.control[name] = true
			}
		}
	})
	return p.control
}

// buildPlanTemplate turns a traced run into a plan, or says why the signature cannot be
// planned.
func (pe *planEnv) buildPlanTemplate(key string, fed map[string]tensor.Tensor, trace []tracedNode) (*planTemplate, string) {
	g := pe.eng.Model.Graph
	t := &planTemplate{key: key}
	refs := make(map[string]planRef, len(g.Nodes)*2)
	newSlot := func(v tensor.Tensor, first int) (planRef, string) {
		if tensor.Box(v) != nil {
			return planRef{}, "a sequence or optional value"
		}
		if v.DType() == graph.String {
			return planRef{}, "a string tensor"
		}
		t.slots = append(t.slots, planSlot{bytes: ops.Bytes(ops.ValueType{Dtype: v.DType(), Shape: v.Dims()}), first: first, last: first})
		return planRef{slot: len(t.slots) - 1, dtype: v.DType(), shape: append([]int64{}, v.Dims()...)}, ""
	}
	for name, w := range pe.eng.Weights {
		refs[name] = planRef{fixed: true, static: w, dtype: w.DType(), shape: w.Dims()}
	}
	control := pe.controlInputs()
	for pos, name := range pe.eng.InputNames {
		v := fed[name]
		if control[name] && specializes(v) {
			c, err := tensor.CopyOut(v)
			if err != nil {
				return nil, err.Error()
			}
			refs[name] = planRef{fixed: true, static: c, dtype: c.DType(), shape: c.Dims()}
			t.specialized = append(t.specialized, name)
			continue
		}
		r, why := newSlot(v, -1)
		if why != "" {
			return nil, fmt.Sprintf("input %q is %s", name, why)
		}
		refs[name] = r
		t.inputs = append(t.inputs, planInput{name: name, pos: pos, ref: r})
	}
	use := func(r planRef, step int) {
		if !r.fixed && r.slot >= 0 {
			t.slots[r.slot].last = max(t.slots[r.slot].last, step)
		}
	}
	// Subgraph nodes come in the trace before the node that ran them; an If whose condition
	// is fixed inlines the traced nodes of its branch.
	pending := map[*graph.Graph][]tracedNode{}
	var addNode func(tn tracedNode) string
	var inlineIf func(n *graph.Node, cond tensor.Tensor, tn tracedNode) string
	planFailure := "" // set when an inlined branch cannot be planned
	addNode = func(tn tracedNode) string {
		n := tn.node
		step := planStep{node: n, in: make([]planRef, len(n.Inputs))}
		for j, name := range n.Inputs {
			if name == "" {
				step.in[j] = planRef{fixed: true}
				continue
			}
			r, ok := refs[name]
			if !ok {
				return fmt.Sprintf("node %q reads %q, which the plan does not know", n.Name, name)
			}
			step.in[j] = r
		}
		if implicit := n.ImplicitInputs(); len(implicit) > 0 {
			step.implicit = make(map[string]planRef, len(implicit))
			for _, name := range implicit {
				if r, ok := refs[name]; ok {
					step.implicit[name] = r
				}
			}
		}
		dynamic := dependsOnData(n, func(name string) bool {
			r, ok := refs[name]
			return ok && !r.fixed
		})
		if !dynamic && tracedValues(tn.out) {
			for j, name := range n.Outputs {
				if name != "" && j < len(tn.out) {
					o := tn.out[j]
					refs[name] = planRef{fixed: true, static: o, dtype: o.DType(), shape: o.Dims()}
				}
			}
			t.folded++
			t.nodes = append(t.nodes, pe.planNodeOf(n, PlanFolded, ""))
			return ""
		}
		if n.OpType == "If" && onnxDomain(n) && step.in[0].fixed && step.in[0].static.IsValid() {
			if why := inlineIf(n, step.in[0].static, tn); why == "" {
				t.nodes = append(t.nodes, pe.planNodeOf(n, PlanInlined, ""))
				return ""
			}
		}
		index := len(t.steps)
		for _, r := range step.in {
			use(r, index)
		}
		for _, r := range step.implicit {
			use(r, index)
		}
		if n.Traits().View && len(tn.out) == 1 && tensor.Box(tn.out[0]) == nil &&
			!step.in[0].fixed && allFixedAfter(step.in, 1) {
			o := tn.out[0]
			refs[n.Outputs[0]] = planRef{slot: step.in[0].slot, dtype: o.DType(), shape: append([]int64{}, o.Dims()...)}
			t.aliases++
			t.nodes = append(t.nodes, pe.planNodeOf(n, PlanAlias, ""))
			return ""
		}
		step.out = make([]planRef, len(n.Outputs))
		for j, name := range n.Outputs {
			step.out[j] = planRef{slot: -1}
			if name == "" {
				continue
			}
			if j >= len(tn.out) {
				return fmt.Sprintf("node %q (%s) produced %d outputs, output %d is used", n.Name, n.OpType, len(tn.out), j)
			}
			r, why := newSlot(tn.out[j], index)
			if why != "" {
				return fmt.Sprintf("node %q (%s) produces %s at run time", n.Name, n.OpType, why)
			}
			step.out[j] = r
			refs[name] = r
		}
		// The node's placement (internal/ep) says whether a kernel planner may run it.
		pl := pe.eng.Placements.Of(n)
		step.kind, step.reason = hostStep, pl.HostReason()
		if planner, ok := ops.KernelPlanners[ops.PlannerKey(n)]; ok && pl.Kernel {
			infos := make([]ops.ValueInfo, len(step.in))
			for j, r := range step.in {
				if n.Inputs[j] == "" {
					continue
				}
				infos[j] = ops.ValueInfo{ValueType: ops.ValueType{Dtype: r.dtype, Shape: r.shape}, Present: true}
				if r.fixed {
					infos[j].Static = r.static
				}
			}
			p, reason, err := planner(n, pe.eng.Opset, infos)
			switch {
			case err != nil:
				return fmt.Sprintf("node %q (%s): the kernel planner failed: %v", n.Name, n.OpType, err)
			case p == nil:
				step.reason = reason
			default:
				p, why := pe.eng.Kernels.ServablePlan(pe.eng.Ctx, n, pe.eng.Opset, infos, p)
				if why != "" {
					step.reason = why // the op runs as its host function
					break
				}
				if why := ops.AgreesWith(p, tn.out); why != "" {
					return fmt.Sprintf("node %q (%s): %s", n.Name, n.OpType, why)
				}
				step.kind, step.kernel, step.reason = kernelStep, p, p.Reason
				// Outputs the node leaves unnamed still get memory for the kernels to write
				// (live for this step only).
				for j, o := range p.Outputs {
					if j < len(step.out) && step.out[j].slot < 0 {
						t.slots = append(t.slots, planSlot{bytes: ops.Bytes(o), first: index, last: index})
						step.out[j] = planRef{slot: len(t.slots) - 1, dtype: o.Dtype, shape: o.Shape}
					}
				}
				for _, bytes := range p.Scratch {
					t.slots = append(t.slots, planSlot{bytes: bytes, first: index, last: index})
					step.scratch = append(step.scratch, len(t.slots)-1)
				}
			}
		}
		if step.kind == hostStep {
			fn, ok := exec.LookupOp(n)
			if !ok && !n.Traits().ControlFlow {
				return fmt.Sprintf("node %q: operator %s is not supported", n.Name, n.OpType)
			}
			step.fn = fn
		}
		t.steps = append(t.steps, step)
		kind := PlanHost
		if step.kind == kernelStep {
			kind = PlanKernel
		}
		t.nodes = append(t.nodes, pe.planNodeOf(n, kind, step.reason))
		return ""
	}
	// inlineIf adds the traced nodes of the branch an If with a fixed condition took, and
	// makes the If's outputs the branch's; "" when it did, else why not (the If then runs as
	// a host step).
	inlineIf = func(n *graph.Node, cond tensor.Tensor, tn tracedNode) string {
		if tensor.Box(cond) != nil || cond.DType() == graph.String || cond.Len() != 1 {
			return "the condition is not a single value"
		}
		c := tensor.Float64s(cond)
		branch := n.Attr("then_branch")
		if c[0] == 0 {
			branch = n.Attr("else_branch")
		}
		if branch == nil || branch.Graph == nil {
			return "the branch is missing"
		}
		bg := branch.Graph
		entries := pending[bg]
		delete(pending, bg)
		if len(entries) != len(bg.Nodes) || len(bg.Outputs) != len(n.Outputs) {
			return "the branch's trace is incomplete"
		}
		for _, e := range entries {
			for _, out := range e.node.Outputs {
				if _, clash := refs[out]; clash && out != "" {
					return fmt.Sprintf("the branch's value %q shadows another", out)
				}
			}
		}
		// The branch's initializers are fixed values of the plan (nested branches may read
		// them as outer-scope values).
		for name, gt := range bg.Initializers {
			if _, clash := refs[name]; clash {
				return fmt.Sprintf("the branch's initializer %q shadows another value", name)
			}
			v, err := tensor.FromGraphTensor(gt)
			if err != nil {
				return err.Error()
			}
			refs[name] = planRef{fixed: true, static: v, dtype: v.DType(), shape: v.Dims()}
		}
		for _, e := range entries {
			if why := addNode(e); why != "" || planFailure != "" {
				if planFailure == "" {
					planFailure = why
				}
				return ""
			}
		}
		for i, out := range n.Outputs {
			if out == "" {
				continue
			}
			r, ok := refs[bg.Outputs[i].Name]
			if !ok {
				planFailure = fmt.Sprintf("If %q: branch output %q was not computed", n.Name, bg.Outputs[i].Name)
				return ""
			}
			refs[out] = r
		}
		t.inlined++
		return ""
	}
	mainNodes := 0
	for _, tn := range trace {
		if tn.graph != g {
			pending[tn.graph] = append(pending[tn.graph], tn)
			continue
		}
		if mainNodes >= len(g.Nodes) || tn.node != g.Nodes[mainNodes] {
			return nil, "the traced run visited the nodes out of order"
		}
		mainNodes++
		why := addNode(tn)
		if planFailure != "" {
			return nil, planFailure
		}
		if why != "" {
			return nil, why
		}
	}
	if mainNodes != len(g.Nodes) {
		return nil, fmt.Sprintf("the traced run covered %d of %d nodes", mainNodes, len(g.Nodes))
	}
	end := len(t.steps)
	for _, v := range g.Outputs {
		r, ok := refs[v.Name]
		if !ok {
			return nil, fmt.Sprintf("graph output %q was not computed", v.Name)
		}
		if r.fixed && tensor.Box(r.static) != nil {
			return nil, fmt.Sprintf("graph output %q is a sequence or optional", v.Name)
		}
		use(r, end)
		t.outputs = append(t.outputs, r)
	}
	// Segments: maximal runs of kernel steps with at least one launch.
	seg := -1
	for i, st := range t.steps {
		if st.kind == hostStep {
			t.items = append(t.items, planItem{segment: -1, step: i})
			seg = -1
			continue
		}
		if len(st.kernel.Calls) == 0 {
			continue
		}
		if seg < 0 {
			t.segments = append(t.segments, nil)
			t.tuners = append(t.tuners, &threadTuner{})
			seg = len(t.segments) - 1
			t.items = append(t.items, planItem{segment: seg})
		}
		t.segments[seg] = append(t.segments[seg], i)
	}
	t.placeSlots()
	t.planBindings()
	return t, ""
}

// planBindings chooses the inputs that kernels read, and the outputs that kernels write, in
// the caller's memory rather than through the arena: copying a 4 KiB input in and the output
// out cost a tiny model's run about a fifth of its time. An input qualifies when only kernels
// read it (a host step reads the arena), and no graph output is it; an output when one kernel
// step writes it, only kernels touch it, and no other graph output or input shares its slot.
// Values under 4 bytes are left in the arena (their regions are rounded up to 4 bytes).
func (t *planTemplate) planBindings() {
	t.bindIn = make([]int, len(t.inputs))
	t.bindOut = make([]int, len(t.outputs))
	host := map[int]bool{}     // slots a host step touches
	produced := map[int]bool{} // slots a kernel step writes
	outputs := map[int]int{}   // graph outputs by slot
	for i := range t.steps {
		st := &t.steps[i]
		refs := slices.Concat(st.in, st.out)
		for _, r := range st.implicit {
			refs = append(refs, r)
		}
		for _, r := range refs {
			if r.fixed || r.slot < 0 {
				continue
			}
			if st.kind == hostStep {
				host[r.slot] = true
			}
		}
		if st.kind == kernelStep {
			for _, r := range st.out {
				if r.slot >= 0 {
					produced[r.slot] = true
				}
			}
			// Planners never write their inputs; a kernel that did must not write the caller's.
			for _, c := range st.kernel.Calls {
				for _, b := range c.Bind {
					if b.Operand.Kind == ops.OperandInput && device.AccessWrites(b.Access) && b.Operand.Index < len(st.in) && !st.in[b.Operand.Index].fixed {
						host[st.in[b.Operand.Index].slot] = true
					}
				}
			}
		}
	}
	for _, r := range t.outputs {
		if !r.fixed {
			outputs[r.slot]++
		}
	}
	inputSlots := map[int]bool{}
	arg := 0
	for i, in := range t.inputs {
		s := in.ref.slot
		inputSlots[s] = true
		t.bindIn[i] = -1
		if arg < native.MaxRunMemories && t.slots[s].bytes >= 4 && !host[s] && outputs[s] == 0 {
			t.bindIn[i] = arg
			arg++
		}
	}
	for j, r := range t.outputs {
		t.bindOut[j] = -1
		if r.fixed {
			continue
		}
		s := r.slot
		if arg < native.MaxRunMemories && t.slots[s].bytes >= 4 && produced[s] && !host[s] && !inputSlots[s] && outputs[s] == 1 {
			t.bindOut[j] = arg
			arg++
		}
	}
}

// boundSlots maps the slots of bound inputs and outputs to their run memory.
func (t *planTemplate) boundSlots() map[int]int {
	m := map[int]int{}
	for i, a := range t.bindIn {
		if a >= 0 {
			m[t.inputs[i].ref.slot] = a
		}
	}
	for j, a := range t.bindOut {
		if a >= 0 {
			m[t.outputs[j].slot] = a
		}
	}
	return m
}

func allFixedAfter(refs []planRef, from int) bool {
	for _, r := range refs[from:] {
		if !r.fixed {
			return false
		}
	}
	return true
}

// planAlign is the alignment of every slot (a cache line; wide vector loads).
const planAlign = 64

// placeSlots gives each slot an offset: first fit among the slots live at the same time
// (live from the step that writes it through the last step that reads it, inclusive).
func (t *planTemplate) placeSlots() {
	order := make([]int, len(t.slots))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		sa, sb := t.slots[order[a]], t.slots[order[b]]
		if sa.first != sb.first {
			return sa.first < sb.first
		}
		return sa.bytes > sb.bytes
	})
	var live []int // slot indices, by offset
	for _, i := range order {
		s := &t.slots[i]
		kept := live[:0]
		for _, j := range live {
			if t.slots[j].last >= s.first {
				kept = append(kept, j)
			}
		}
		live = kept
		size := (max(s.bytes, 4) + planAlign - 1) / planAlign * planAlign
		offset := int64(0)
		at := len(live)
		for k, j := range live {
			if t.slots[j].offset-offset >= size {
				at = k
				break
			}
			offset = max(offset, t.slots[j].offset+(max(t.slots[j].bytes, 4)+planAlign-1)/planAlign*planAlign)
		}
		s.offset = offset
		t.arenaBytes = max(t.arenaBytes, offset+size)
		live = append(live, 0)
		copy(live[at+1:], live[at:])
		live[at] = i
	}
	t.arenaBytes = max(t.arenaBytes, planAlign)
}

// region is slot i of the instance's arena as a Region.
func (t *planTemplate) region(arena device.Region, i int) (device.Region, error) {
	s := t.slots[i]
	return arena.Slice(uint64(s.offset), uint64(max(s.bytes, 4)))
}

// newInstance allocates an instance's arena and records its segments.
func (p *planEnv) newPlanInstance(t *planTemplate, phase exec.RunPhase) (_ *planInstance, err error) {
	ms, err := p.eng.RunSession()
	if err != nil {
		return nil, err
	}
	inst := &planInstance{ms: ms}
	defer func() {
		if err != nil {
			ms.Close()
		}
	}()
	arena, err := ms.AllocateShared(uint64(t.arenaBytes))
	if err != nil {
		return nil, err
	}
	if inst.mem, err = device.HostBytes(ms, arena); err != nil {
		return nil, err
	}
	if inst.mem == nil {
		return nil, tensor.NewError("Run", tensor.ErrDevice, "the device's shared memory is not host-visible")
	}
	// Weights and constant operands: one device copy for all of the session's plan
	// instances (sharedWeights), bound once per instance.
	weights := map[device.SharedWeightKey]device.Region{}
	weight := func(v tensor.Tensor) (device.Region, error) {
		raw, ok := ops.RawBytes(v)
		if !ok {
			return device.Region{}, ops.OpErr("a %s tensor cannot be bound to a kernel", v.DType())
		}
		if len(raw) == 0 {
			raw = device.EmptyWeight
		}
		key := device.WeightKey(raw)
		if r, ok := weights[key]; ok {
			return r, nil
		}
		r, err := device.SharedWeight(ms, &p.planWeights, raw)
		if err != nil {
			return device.Region{}, err
		}
		weights[key] = r
		return r, nil
	}
	kernelIDs := map[*device.LoadedKernel]device.KernelID{}
	calls := 0
	for _, steps := range t.segments {
		for _, i := range steps {
			calls += len(t.steps[i].kernel.Calls)
		}
	}
	viol, err := ms.AllocateShared(uint64(4 * max(calls, 1)))
	if err != nil {
		return nil, err
	}
	if inst.words, err = device.HostBytes(ms, viol); err != nil {
		return nil, err
	}
	clear(inst.words)
	bound := t.boundSlots()
	for si, steps := range t.segments {
		inst.segWords = append(inst.segWords, len(inst.wordOwners))
		var cmds []device.Command
		var sites []native.RunBinding
		for _, i := range steps {
			st := &t.steps[i]
			resolve := func(o ops.Operand) (device.Region, error) {
				var r planRef
				switch o.Kind {
				case ops.OperandInput:
					if o.Index >= len(st.in) {
						return device.Region{}, ops.OpErr("kernel plan binds %s of %d", o, len(st.in))
					}
					r = st.in[o.Index]
					if r.fixed {
						if !r.static.IsValid() {
							return device.Region{}, ops.OpErr("kernel plan binds %s, which is absent", o)
						}
						return weight(r.static)
					}
				case ops.OperandOutput:
					if o.Index >= len(st.out) || st.out[o.Index].slot < 0 {
						return device.Region{}, ops.OpErr("kernel plan binds %s, which is not produced", o)
					}
					r = st.out[o.Index]
				case ops.OperandScratch:
					if o.Index >= len(st.scratch) {
						return device.Region{}, ops.OpErr("kernel plan binds %s of %d", o, len(st.scratch))
					}
					return t.region(arena, st.scratch[o.Index])
				case ops.OperandConst:
					if o.Index >= len(st.kernel.Consts) {
						return device.Region{}, ops.OpErr("kernel plan binds %s of %d", o, len(st.kernel.Consts))
					}
					return weight(st.kernel.Consts[o.Index])
				}
				return t.region(arena, r.slot)
			}
			for _, c := range st.kernel.Calls {
				k, err := p.eng.Kernels.Get(p.eng.Ctx, phase, c.File, c.Symbol, c.Config)
				if err != nil {
					return nil, err
				}
				kid, ok := kernelIDs[k]
				if !ok {
					if kid, err = device.UseLoadedKernel(ms, "Run", k); err != nil {
						return nil, err
					}
					kernelIDs[k] = kid
				}
				word, err := viol.Slice(uint64(4*len(inst.wordOwners)), 4)
				if err != nil {
					return nil, err
				}
				inst.wordOwners = append(inst.wordOwners, i)
				d := device.Dispatch{Kernel: kid, Args: c.Args, Workload: c.Workload, Violation: word}
				for bi, b := range c.Bind {
					r, err := resolve(b.Operand)
					if err != nil {
						return nil, tensor.NodeError(st.node, err)
					}
					d.Bindings = append(d.Bindings, device.Binding{Region: r, Access: b.Access})
					if slot := st.operandSlot(b.Operand); slot >= 0 {
						if a, ok := bound[slot]; ok {
							sites = append(sites, native.RunBinding{Node: uint32(len(cmds)), Index: uint32(bi), Arg: uint32(a), Bytes: uint64(t.slots[slot].bytes)})
						}
					}
				}
				cmds = append(cmds, d)
			}
		}
		key := "segment " + strconv.Itoa(si)
		if err := ms.Record(key, cmds); err != nil {
			return nil, err
		}
		inst.segKeys = append(inst.segKeys, key)
		// A dispatch with an empty grid records an empty node: nothing to rebind there.
		kernels, err := device.DispatchNodes(ms, key)
		if err != nil {
			return nil, err
		}
		sites = slices.DeleteFunc(sites, func(b native.RunBinding) bool { return !kernels[b.Node] })
		inst.segBindings = append(inst.segBindings, sites)
	}
	return inst, nil
}

// operandSlot is the arena slot a kernel operand of st binds, or -1 (weights, constants,
// scratch).
func (st *planStep) operandSlot(o ops.Operand) int {
	var r planRef
	switch {
	case o.Kind == ops.OperandInput && o.Index < len(st.in):
		r = st.in[o.Index]
	case o.Kind == ops.OperandOutput && o.Index < len(st.out):
		r = st.out[o.Index]
	default:
		return -1
	}
	if r.fixed {
		return -1
	}
	return r.slot
}

// view is r as a tensor over the instance's arena (static values as they are).
func (t *planTemplate) view(inst *planInstance, r planRef) tensor.Tensor {
	if r.fixed {
		return r.static
	}
	s := t.slots[r.slot]
	return tensor.ViewBytes(r.dtype, r.shape, inst.mem[s.offset:s.offset+s.bytes])
}

// threadTuner chooses how many threads run a segment when the session has several: a small
// graph can run slower on two threads than on one (handing its small grids to another thread
// costs more than it saves), and only timing says where that line lies on a given machine.
// The first runs alternate between one thread and all of them; after tuneSamples of each,
// the faster wins (all of them only when clearly faster, since one thread leaves the others
// to the caller's work).
type threadTuner struct {
	decided atomic.Bool
	choice  int // the thread count, once decided (written before decided is set)
	mu      sync.Mutex
	best    [2]time.Duration // best time with one thread, with all of them
	runs    [2]int
}

const tuneSamples = 5

// threads returns the thread count for the next run of the segment, given the session's n
// (0: every hardware thread), and the sample slot to report its time to (-1: none).
func (tt *threadTuner) threads(n int) (int, int) {
	if n == 1 {
		return 1, -1
	}
	if tt.decided.Load() {
		return tt.choice, -1
	}
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.runs[0] <= tt.runs[1] {
		return 1, 0
	}
	return n, 1
}

// record notes a measured run and decides once both counts have tuneSamples samples.
func (tt *threadTuner) record(slot, n int, d time.Duration) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.decided.Load() {
		return
	}
	if tt.runs[slot] == 0 || d < tt.best[slot] {
		tt.best[slot] = d
	}
	tt.runs[slot]++
	if tt.runs[0] >= tuneSamples && tt.runs[1] >= tuneSamples {
		tt.choice = 1
		if float64(tt.best[1]) < 0.9*float64(tt.best[0]) {
			tt.choice = n
		}
		tt.decided.Store(true)
	}
}

// chosen is the decided thread count, or -1 while timing.
func (tt *threadTuner) chosen() int {
	if !tt.decided.Load() {
		return -1
	}
	return tt.choice
}

// run runs the plan on inst for the fed inputs (of the plan's signature), writing the bound
// outputs into (nil: none; see RunInto) in place where a kernel writes them, else copying
// them in. It stops between items once the run's context is done.
func (t *planTemplate) run(p *planEnv, rc *exec.RunCtx, inst *planInstance, ins, into []tensor.Tensor) ([]tensor.Tensor, error) {
	if into != nil {
		if err := t.checkBound(p, into); err != nil {
			return nil, err
		}
	}
	// Bound inputs are read, and bound outputs written, in place (planBindings); not while
	// tracing, whose spans view every step's operands in the arena.
	bind := rc.Trace == nil
	var mem [native.MaxRunMemories][]byte
	for i, in := range t.inputs {
		src, _ := ops.RawBytes(ins[in.pos])
		s := t.slots[in.ref.slot]
		if a := t.bindIn[i]; bind && a >= 0 && int64(len(src)) == s.bytes && elementAligned(src, in.ref.dtype) {
			mem[a] = src
			continue
		}
		copy(inst.mem[s.offset:s.offset+s.bytes], src)
	}
	if bind {
		for j, a := range t.bindOut {
			if a < 0 {
				continue
			}
			n := t.slots[t.outputs[j].slot].bytes
			if into != nil && into[j].IsValid() {
				// The caller's memory, when a kernel can write it as it is.
				if b, _ := ops.RawBytes(into[j]); int64(len(b)) == n && elementAligned(b, t.outputs[j].dtype) {
					mem[a] = b
					continue
				}
			}
			mem[a] = inst.outputs.alloc(&p.recycled, int(n))
		}
	}
	threads := rc.Eng.Threads
	for _, it := range t.items {
		// Between items, the run stops once its context is done: a nil test for a context
		// that is never done, else a non-blocking receive.
		if rc.Done != nil && isDone(rc.Done) {
			return nil, tensor.CanceledError("Run", rc.Ctx, t.itemNode(it))
		}
		if it.segment >= 0 {
			if rc.Trace != nil {
				if err := t.runSegmentTraced(rc, inst, it.segment, threads); err != nil {
					return nil, err
				}
				continue
			}
			tt := t.tuners[it.segment]
			n, slot := tt.threads(threads)
			var start time.Time
			if slot >= 0 {
				start = time.Now()
			}
			var sites []native.RunBinding
			if bind {
				sites = inst.segBindings[it.segment]
			}
			if err := device.RunRecorded(inst.ms, inst.segKeys[it.segment], n, sites, &mem); err != nil {
				return nil, err
			}
			if slot >= 0 {
				tt.record(slot, threads, time.Since(start))
			}
			if err := t.checkViolations(inst, it.segment); err != nil {
				return nil, err
			}
			continue
		}
		if err := t.runHostStep(rc, inst, &t.steps[it.step]); err != nil {
			return nil, err
		}
	}
	outs := make([]tensor.Tensor, len(t.outputs))
	for i, r := range t.outputs {
		// The shape is shared by every run's outputs: Tensor hands out copies of its shape and
		// never writes it (capped, so that no append can write behind it).
		shape := r.shape[:len(r.shape):len(r.shape)]
		if into != nil && into[i].IsValid() {
			dst := into[i]
			if a := t.bindOut[i]; bind && a >= 0 && !r.fixed {
				if !sameElements(dst, mem[a]) {
					copyElements(dst, tensor.ViewBytes(r.dtype, shape, mem[a]))
				}
			} else {
				copyElements(dst, t.view(inst, r))
			}
			outs[i] = dst
			continue
		}
		if !r.fixed {
			if a := t.bindOut[i]; bind && a >= 0 {
				outs[i] = tensor.ViewBytes(r.dtype, shape, mem[a])
				continue
			}
			if sl := t.slots[r.slot]; sl.bytes > 0 && r.dtype != graph.String {
				b := inst.outputs.alloc(&p.recycled, int(sl.bytes))
				copy(b, inst.mem[sl.offset:sl.offset+sl.bytes])
				outs[i] = tensor.ViewBytes(r.dtype, shape, b)
				continue
			}
		}
		o, err := tensor.CopyOut(t.view(inst, r))
		if err != nil {
			return nil, err
		}
		outs[i] = o
	}
	return outs, nil
}

// checkBound refuses a bound output whose type or shape is not the plan's, naming it.
func (t *planTemplate) checkBound(p *planEnv, into []tensor.Tensor) error {
	for i, o := range into {
		if !o.IsValid() {
			continue
		}
		r := t.outputs[i]
		if o.DType() != r.dtype || !slices.Equal(o.Dims(), r.shape) {
			return tensor.NewError("RunInto", tensor.ErrInvalidArgument, "output %q: the bound tensor is %s, the run produces %s",
				p.outputNames[i], exec.DescribeTensor(o), exec.DescribeTensor(tensor.Raw(r.dtype, r.shape, nil)))
		}
	}
	return nil
}

// itemNode is the first node item it runs (for the error of a run stopped before it).
func (t *planTemplate) itemNode(it planItem) *graph.Node {
	if it.segment >= 0 {
		if seg := t.segments[it.segment]; len(seg) > 0 {
			return t.steps[seg[0]].node
		}
		return nil
	}
	return t.steps[it.step].node
}

// isDone reports whether done is closed, without blocking.
func isDone(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// elementAligned reports whether b starts at a multiple of dtype's element size (kernels
// access their buffers by element).
func elementAligned(b []byte, dtype tensor.DType) bool {
	size := dtype.ByteSize(1)
	return len(b) > 0 && size > 0 && uintptr(unsafe.Pointer(&b[0]))%uintptr(size) == 0
}

// Outputs of 1-4 KiB are carved from blocks shared by a few runs' outputs rather than
// allocated one by one: an allocation of a few KiB, fresh from the garbage collector, cost a
// tiny model's run about a third of its time (Add of 1024 floats: 1.5 -> 1.0 us). The cost is
// retention, as with Go's own tiny allocator: an output the caller keeps holds its block
// (smallOutputBlock bytes: 4 to 16 times the output) alive. Smaller outputs are cheap to
// allocate alone, and are, so that one cannot hold a block hundreds of times its size.
const (
	smallOutputMin   = 1 << 10
	smallOutputMax   = 4 << 10
	smallOutputBlock = 16 << 10
)

// outputBlocks carves caller-owned output memory (one per plan instance: runs of an instance
// do not overlap).
type outputBlocks struct {
	block []byte
	used  int
}

// alloc returns n bytes of output memory: recycled (see InferenceSession.Recycle), carved
// for sizes that share blocks, or allocated alone.
func (o *outputBlocks) alloc(r *recycledOutputs, n int) []byte {
	if b := r.take(n); b != nil {
		return b
	}
	if n >= smallOutputMin && n <= smallOutputMax {
		return o.carve(n)
	}
	return make([]byte, n)
}

// maxRecycled bounds the output buffers a session keeps for reuse; more are left to the
// garbage collector.
const maxRecycled = 16

// recycledOutputs is the memory of outputs handed back with Recycle, newest last.
type recycledOutputs struct {
	mu   sync.Mutex
	bufs [][]byte
}

// put keeps b for an output of exactly its size.
func (r *recycledOutputs) put(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bufs) == maxRecycled {
		copy(r.bufs, r.bufs[1:]) // the oldest goes
		r.bufs = r.bufs[:maxRecycled-1]
	}
	r.bufs = append(r.bufs, b)
}

// take returns a kept buffer of n bytes, or nil.
func (r *recycledOutputs) take(n int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.bufs) - 1; i >= 0; i-- {
		if b := r.bufs[i]; len(b) == n {
			r.bufs = slices.Delete(r.bufs, i, i+1)
			return b
		}
	}
	return nil
}

// Recycle hands the memory of output tensors of earlier runs back to the session, which
// writes later runs' outputs of the same byte size into it instead of allocating: the
// counterpart of ONNX Runtime's OrtReleaseValue for a caller that runs a model at a high rate
// and is done with each run's outputs before the next (loom bench does, after its clock
// stops, as ONNX Runtime's benchmark releases its outputs). The caller must not use the
// tensors, or any slice taken from them, afterwards: a later run overwrites them. Recycling
// is optional (outputs not handed back are garbage collected as usual); tensors without
// numeric data (strings, sequences, empty ones) are ignored, and the session keeps a few
// buffers at most.
func (s *InferenceSession) Recycle(tensors ...tensor.Tensor) {
	for _, t := range tensors {
		if tensor.Box(t) != nil || t.DType() == graph.String {
			continue
		}
		b, ok := ops.RawBytes(t)
		if !ok || len(b) == 0 || !elementAligned(b, graph.Double) {
			continue
		}
		s.pe.recycled.put(b[:len(b):len(b)])
	}
}

// carve returns n bytes no other output shares, 64-byte aligned.
func (o *outputBlocks) carve(n int) []byte {
	step := (n + 63) &^ 63
	if o.used+step > len(o.block) {
		o.block, o.used = make([]byte, smallOutputBlock), 0
	}
	b := o.block[o.used : o.used+n : o.used+n]
	o.used += step
	return b
}

// runSegmentTraced runs a segment with one span per kernel step: the spans share the
// segment's time, since its steps run as one recorded graph.
func (t *planTemplate) runSegmentTraced(rc *exec.RunCtx, inst *planInstance, seg, threads int) error {
	steps := t.segments[seg]
	spans := make([]exec.OpSpan, len(steps))
	for i, si := range steps {
		st := &t.steps[si]
		in := make([]tensor.Tensor, len(st.in))
		for j, r := range st.in {
			in[j] = t.view(inst, r)
		}
		spans[i] = rc.OpStart(st.node, in)
	}
	n, _ := t.tuners[seg].threads(threads) // no timing: the spans' work would count too
	err := device.RunRecorded(inst.ms, inst.segKeys[seg], n, nil, nil)
	if err == nil {
		err = t.checkViolations(inst, seg)
	}
	for i, si := range steps {
		st := &t.steps[si]
		outs := make([]tensor.Tensor, len(st.out))
		for j, r := range st.out {
			if r.slot >= 0 {
				outs[j] = t.view(inst, r)
			}
		}
		spans[i].End(ops.Variant(st.kernel), fmt.Sprintf("%s (plan segment %d of %d kernel steps)", st.reason, seg, len(steps)), outs, err)
	}
	return err
}

// checkViolations fails the run when a kernel of segment seg stopped a block at a bounds
// check (its output is then incomplete), naming the node and the kernel, and clears the
// words for the next run.
func (t *planTemplate) checkViolations(inst *planInstance, seg int) error {
	first, last := inst.segWords[seg], len(inst.wordOwners)
	if seg+1 < len(inst.segWords) {
		last = inst.segWords[seg+1]
	}
	var failure error
	for w := first; w < last; w++ {
		bits := binary.LittleEndian.Uint32(inst.words[4*w:])
		if bits == 0 {
			continue
		}
		binary.LittleEndian.PutUint32(inst.words[4*w:], 0)
		if failure == nil {
			st := &t.steps[inst.wordOwners[w]]
			failure = tensor.NewNodeError("Run", tensor.ErrInvalidArgument, st.node, "kernel %s failed a bounds check (violation bits 0x%x; an index out of range, or an assumption about the operands that does not hold)",
				ops.Variant(st.kernel), bits)
		}
	}
	return failure
}

// runHostStep calls a host step's Go function on views of the arena and copies its outputs
// into their slots, after checking them against the traced types and shapes.
func (t *planTemplate) runHostStep(rc *exec.RunCtx, inst *planInstance, st *planStep) error {
	n := st.node
	in := make([]tensor.Tensor, len(st.in))
	for j, r := range st.in {
		if n.Inputs[j] != "" {
			in[j] = t.view(inst, r)
		}
	}
	sp := rc.OpStart(n, in)
	rc.KernelVariant, rc.KernelReason = "", ""
	var outs []tensor.Tensor
	var err error
	if n.Traits().ControlFlow {
		sc := &exec.Scope{Vals: make(map[string]tensor.Tensor, len(st.implicit))}
		for name, r := range st.implicit {
			sc.Vals[name] = t.view(inst, r)
		}
		outs, err = rc.ControlFlow(n, in, sc)
	} else {
		outs, err = st.fn(rc, n, in)
	}
	variant := "host"
	if rc.KernelVariant != "" {
		variant = "host composing " + rc.KernelVariant
	}
	sp.End(variant, st.reason, outs, err)
	if err != nil {
		return tensor.NodeError(n, err)
	}
	for j, r := range st.out {
		if r.slot < 0 {
			continue
		}
		if j >= len(outs) || tensor.Box(outs[j]) != nil || outs[j].DType() != r.dtype || !slices.Equal(outs[j].Dims(), r.shape) {
			return errPlanGuard
		}
		src, _ := ops.RawBytes(outs[j])
		s := t.slots[r.slot]
		copy(inst.mem[s.offset:s.offset+s.bytes], src)
	}
	return nil
}

// ---------------------------------------------------------------- the session's plans

// maxPlans bounds the signatures an InferenceSession plans; further signatures run in the
// interpreter. maxPlanInstances bounds the instances (arenas) of one signature, which
// concurrent runs need; a run that finds them all busy runs in the interpreter.
const (
	maxPlans         = 16
	maxPlanInstances = 4
)

// planEntry is one signature's plan, or why there is none.
type planEntry struct {
	template *planTemplate
	reason   string
	idle     []*planInstance
	count    int
	all      []*planInstance
}

// planCache holds an InferenceSession's plans by signature.
type planCache struct {
	mu      sync.Mutex
	entries map[string]*planEntry
	order   []string
	closed  bool
}

// acquire returns an idle instance of key's plan (making one when there is room), the entry
// (nil when key has never been traced) and whether the signature is planned.
func (c *planCache) lookup(key string) *planEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[key]
}

// lookupBytes is lookup without converting the key to a string (no allocation per run).
func (c *planCache) lookupBytes(key []byte) *planEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[string(key)]
}

func (c *planCache) take(e *planEntry) (*planTemplate, *planInstance, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.template == nil {
		return nil, nil, false // dropped
	}
	if n := len(e.idle); n > 0 {
		inst := e.idle[n-1]
		e.idle = e.idle[:n-1]
		return e.template, inst, false
	}
	if c.closed || e.count >= maxPlanInstances {
		return nil, nil, false
	}
	e.count++ // reserved: the caller builds the instance
	return e.template, nil, true
}

func (c *planCache) give(e *planEntry, inst *planInstance, fresh bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fresh {
		e.all = append(e.all, inst)
	}
	if c.closed {
		inst.ms.Close()
		return
	}
	e.idle = append(e.idle, inst)
}

// takeIdle is lookupBytes then take for a signature whose plan has an idle instance; it
// returns nil when there is none (no plan yet, a plan without a template, or every
// instance busy), without reserving anything.
func (c *planCache) takeIdle(key []byte) (*planEntry, *planTemplate, *planInstance) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.takeIdleLocked(c.entries[string(key)])
}

// takeIdleOf is takeIdle for an entry the caller holds.
func (c *planCache) takeIdleOf(e *planEntry) (*planEntry, *planTemplate, *planInstance) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.takeIdleLocked(e)
}

func (c *planCache) takeIdleLocked(e *planEntry) (*planEntry, *planTemplate, *planInstance) {
	if e == nil || e.template == nil || len(e.idle) == 0 {
		return nil, nil, nil
	}
	inst := e.idle[len(e.idle)-1]
	e.idle = e.idle[:len(e.idle)-1]
	return e, e.template, inst
}

// fastSignature is the input types and shapes of the plan the fast path ran last, when they
// alone decide its key (no input's value is specialized): a run feeding the same types and
// shapes skips building the key, looking it up and checking the inputs against the model
// again (those types and shapes passed the check before).
type fastSignature struct {
	dtypes []tensor.DType
	shapes [][]int64
	entry  *planEntry
}

func newFastSignature(ins []tensor.Tensor, e *planEntry) *fastSignature {
	f := &fastSignature{entry: e, dtypes: make([]tensor.DType, len(ins)), shapes: make([][]int64, len(ins))}
	for i, t := range ins {
		f.dtypes[i], f.shapes[i] = t.DType(), slices.Clone(t.Dims())
	}
	return f
}

func (f *fastSignature) matches(ins []tensor.Tensor) bool {
	if len(ins) != len(f.dtypes) {
		return false
	}
	for i := range ins {
		if ins[i].DType() != f.dtypes[i] || !slices.Equal(ins[i].Dims(), f.shapes[i]) {
			return false
		}
	}
	return true
}

// unreserve undoes take's reservation when building an instance failed.
func (c *planCache) unreserve(e *planEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.count--
}

// drop stops planning e's signature (a guard failed): its instances close as they come back.
func (c *planCache) drop(e *planEntry, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.template, e.reason = nil, reason
	for _, inst := range e.idle {
		inst.ms.Close()
	}
	e.idle = nil
}

// add records key's plan (or the reason it has none); false when the cache is full or
// another run added it first.
func (c *planCache) add(key string, e *planEntry) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.entries[key] != nil || len(c.entries) >= maxPlans {
		return false
	}
	if c.entries == nil {
		c.entries = map[string]*planEntry{}
	}
	c.entries[key] = e
	c.order = append(c.order, key)
	return true
}

// close releases every idle instance; instances in use close when given back. Idempotent.
func (c *planCache) Close() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for _, e := range c.entries {
		for _, inst := range e.idle {
			errs = append(errs, inst.ms.Close())
		}
		e.idle = nil
	}
	return errs
}

// runPlanned runs fed through the signature's plan, building it from a traced interpreter
// run the first time. ok is false when the run must go to the interpreter instead.
func (s *InferenceSession) runPlanned(rc *exec.RunCtx, fed map[string]tensor.Tensor, into []tensor.Tensor) (outs []tensor.Tensor, ok bool, err error) {
	if !s.planning {
		return nil, false, nil
	}
	ins := make([]tensor.Tensor, len(s.inputs))
	for i, m := range s.inputs {
		ins[i] = fed[m.Name]
	}
	var buf [256]byte
	key, plannable := s.pe.appendPlanKey(buf[:0], ins)
	if !plannable {
		return nil, false, nil
	}
	e := s.plans.lookupBytes(key)
	if e == nil {
		// The signature's first run is interpreted, and traced to build its plan; the plan
		// runs from the next run on.
		return s.tracePlan(rc, string(key), fed)
	}
	// The template is read under the cache's lock: a failed guard may drop it meanwhile.
	t, inst, build := s.plans.take(e)
	if inst == nil && !build {
		return nil, false, nil
	}
	fresh := false
	if build {
		if inst, err = s.pe.newPlanInstance(t, rc.Phase); err != nil {
			s.plans.unreserve(e)
			return nil, false, err
		}
		fresh = true
	}
	rc.RunStart(exec.ExecutorPlan, fed)
	outs, err = t.run(s.pe, rc, inst, ins, into)
	rc.RunEnd(outs, err)
	return s.endPlanRun(e, inst, fresh, outs, err)
}

// endPlanRun gives inst back after a run of e's plan; a failed host-step guard unplans the
// signature, and ok false sends the run to the interpreter.
func (s *InferenceSession) endPlanRun(e *planEntry, inst *planInstance, fresh bool, outs []tensor.Tensor, err error) ([]tensor.Tensor, bool, error) {
	s.plans.give(e, inst, fresh)
	if errors.Is(err, errPlanGuard) {
		s.plans.drop(e, "a host step's output type or shape changed between runs (data-dependent shape)")
		return nil, false, nil
	}
	return outs, err == nil, err
}

// maxFastInputs bounds the inputs runPlannedFast keeps on the stack.
const maxFastInputs = 8

// runPlannedFast is Run's path for the steady state of a served model: every graph input fed
// once, in the graph's order, as a tensor of the declared type, with an idle instance of the
// signature's plan ready and tracing off. It skips what the general path builds per run (the
// input map, the value conversions, the run context's bookkeeping). ok is false, with
// nothing done, whenever any of that does not hold: the general path then runs (and reports
// any error).
func (s *InferenceSession) runPlannedFast(ctx context.Context, inputs []tensor.NamedTensor, into []tensor.Tensor) (outs []tensor.Tensor, ok bool, err error) {
	if !s.planning || !s.tensorIO || len(inputs) != len(s.inputs) || len(inputs) > maxFastInputs ||
		ctx == nil || exec.Traced(ctx) {
		return nil, false, nil
	}
	done := ctx.Done()
	if done != nil && isDone(done) {
		return nil, true, tensor.CanceledError("Run", ctx, nil)
	}
	var stack [maxFastInputs]tensor.Tensor
	ins := stack[:len(inputs)]
	for i := range inputs {
		in, m := &inputs[i], &s.inputs[i]
		if in.Name != m.Name || in.Tensor.Data() == nil || tensor.Box(in.Tensor) != nil {
			return nil, false, nil
		}
		ins[i] = in.Tensor
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, false, nil
	}
	var e *planEntry
	var t *planTemplate
	var inst *planInstance
	if f := s.fastSig.Load(); f != nil && f.matches(ins) {
		e, t, inst = s.plans.takeIdleOf(f.entry)
	} else {
		for i := range ins {
			if checkFed(s.inputs[i], ins[i]) != nil {
				return nil, false, nil
			}
		}
		var buf [256]byte
		key, plannable := s.pe.appendPlanKey(buf[:0], ins)
		if !plannable {
			return nil, false, nil
		}
		e, t, inst = s.plans.takeIdle(key)
		if inst != nil && len(t.specialized) == 0 {
			s.fastSig.Store(newFastSignature(ins, e))
		}
	}
	if inst == nil {
		return nil, false, nil
	}
	// The instance's own run context: one on the heap per run (the host steps' functions
	// make it escape) cost a tiny model's run a few percent.
	rc := &inst.rc
	*rc = exec.RunCtx{Eng: s.eng, Opset: s.eng.Opset, Phase: exec.PhaseRun, Ctx: ctx, Done: done}
	outs, err = t.run(s.pe, rc, inst, ins, into)
	rc.Close()
	*rc = exec.RunCtx{}
	outs, ok, err = s.endPlanRun(e, inst, false, outs, err)
	return outs, ok || err != nil, err
}

// tracedValues reports whether the trace kept the values of outs (it keeps only the types
// and shapes of values that depend on the inputs' data).
func tracedValues(outs []tensor.Tensor) bool {
	for _, o := range outs {
		if o.Data() == nil && tensor.Box(o) == nil {
			return false
		}
	}
	return true
}

// tracePlan is the interpreted run of fed that records each node, from which it builds
// key's plan (or notes why there is none). The run's outputs are the interpreter's. The trace
// keeps the values only of nodes whose outputs do not depend on the inputs' data (the plan
// folds those); of the others, types and shapes, so that a large model's activations are not
// all held at once.
func (s *InferenceSession) tracePlan(rc *exec.RunCtx, key string, fed map[string]tensor.Tensor) ([]tensor.Tensor, bool, error) {
	var trace []tracedNode
	control := s.pe.controlInputs()
	dyn := map[string]bool{}
	for _, m := range s.inputs {
		if !control[m.Name] || !specializes(fed[m.Name]) {
			dyn[m.Name] = true
		}
	}
	rc.Observe = func(g *graph.Graph, n *graph.Node, in, out []tensor.Tensor) {
		d := dependsOnData(n, func(name string) bool { return dyn[name] })
		kept := out
		if d {
			kept = make([]tensor.Tensor, len(out))
			for j, o := range out {
				kept[j] = tensor.Meta(o)
			}
			for _, name := range n.Outputs {
				if name != "" {
					dyn[name] = true
				}
			}
		}
		trace = append(trace, tracedNode{graph: g, node: n, out: kept})
	}
	defer func() { rc.Observe = nil }()
	outs, err := s.eng.Interpret(rc, fed)
	if err != nil {
		return nil, true, err
	}
	t, reason := s.pe.buildPlanTemplate(key, fed, trace)
	s.plans.add(key, &planEntry{template: t, reason: reason})
	return outs, true, nil
}

// PlanReport audits one compiled run plan: how the model's nodes run for one input
// signature.
type PlanReport struct {
	// Signature is the input types and shapes, as "x: tensor(float)[1,3,224,224]; ...".
	Signature string
	// Planned says whether runs of this signature use the plan; Reason says why not.
	Planned bool
	Reason  string
	// Folded counts nodes computed once when the plan was built (their values do not depend
	// on the inputs' data); Aliases the nodes that only view their input in another shape;
	// Inlined the If nodes replaced by the branch their fixed condition takes.
	Folded, Aliases, Inlined int
	// Specialized names the inputs whose values the plan takes as fixed: small integer
	// inputs that decide shapes or control flow (each value seen gets its own plan).
	Specialized []string
	// Segments lists the recorded device graphs, in run order: the nodes of each, all
	// running as Loom kernels.
	Segments [][]string
	// SegmentThreads is the thread count each segment runs on: with several intra-op
	// threads, a segment's first runs time one thread against all of them and keep the
	// faster (-1 while still timing; 0 is all of the session's threads, its default).
	SegmentThreads []int
	// HostSteps lists the nodes that run as Go host functions, with the reason; each ends
	// a segment.
	HostSteps []PlanHostStep
	// KernelSteps counts nodes run as Loom kernels; ArenaBytes is the memory for the
	// values of one run (several runs at once use one arena each).
	KernelSteps int
	ArenaBytes  int64
	// Nodes lists every node the plan took, in order (an inlined If after its branch's
	// nodes): where its placement, decided once when the session was built, puts it, and
	// what the plan made of it.
	Nodes []PlanNode
}

// PlanHostStep is a node of a plan that runs on the host, and why.
type PlanHostStep struct {
	Node, OpType, Reason string
}

// ExecutionPlans audits the compiled run plans built so far (one per input signature seen),
// in the order they were built.
func (s *InferenceSession) ExecutionPlans() []PlanReport {
	s.plans.mu.Lock()
	defer s.plans.mu.Unlock()
	out := make([]PlanReport, 0, len(s.plans.order))
	for _, key := range s.plans.order {
		e := s.plans.entries[key]
		r := PlanReport{Signature: s.describeKey(key), Planned: e.template != nil, Reason: e.reason}
		if t := e.template; t != nil {
			r.Folded, r.Aliases, r.Inlined, r.ArenaBytes = t.folded, t.aliases, t.inlined, t.arenaBytes
			r.Specialized = append([]string{}, t.specialized...)
			r.Nodes = append([]PlanNode{}, t.nodes...)
			for _, st := range t.steps {
				if st.kind == kernelStep {
					r.KernelSteps++
				}
			}
			for _, it := range t.items {
				if it.segment >= 0 {
					var names []string
					for _, i := range t.segments[it.segment] {
						names = append(names, t.steps[i].node.Name)
					}
					r.Segments = append(r.Segments, names)
					threads := 1
					if s.eng.Threads != 1 {
						threads = t.tuners[it.segment].chosen()
					}
					r.SegmentThreads = append(r.SegmentThreads, threads)
					continue
				}
				st := t.steps[it.step]
				r.HostSteps = append(r.HostSteps, PlanHostStep{Node: st.node.Name, OpType: st.node.OpType, Reason: st.reason})
			}
		}
		out = append(out, r)
	}
	return out
}

// describeKey spells a plan key with the input names.
func (s *InferenceSession) describeKey(key string) string {
	parts := strings.Split(strings.TrimSuffix(key, ";"), ";")
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteString("; ")
		}
		name := "?"
		if i < len(s.inputs) {
			name = s.inputs[i].Name
		}
		dt, dims, _ := strings.Cut(p, ":")
		dims, vals, specialized := strings.Cut(dims, "=")
		code, _ := strconv.Atoi(dt)
		fmt.Fprintf(&b, "%s: tensor(%s)[%s]", name, tensor.DType(code), strings.TrimSuffix(dims, ","))
		if specialized {
			fmt.Fprintf(&b, " = {%s}", strings.TrimSuffix(vals, ","))
		}
	}
	return b.String()
}
