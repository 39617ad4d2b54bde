// Package plan is the compiled run plans of InferenceSession (go/session): a plan per input
// signature, built from one traced interpreter run (Env.BuildTemplate), with folded
// constants, one arena placed by liveness, recorded segments of kernel steps replayed per
// run, and guarded host steps run through the interpreter's exec.RunCtx; its instances
// (Env.NewInstance) and the cache of plans by signature (Cache). The session looks plans up,
// traces and builds them, picks the fast path and reports them (ExecutionPlans).
package plan

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
	"weak"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/ep"
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

// PlanStepKind is what a compiled run plan made of a node.
type PlanStepKind string

// The plan step kinds of PlanNode.Step.
const (
	// PlanKernel: the node runs as Loom kernels, in a segment.
	PlanKernel PlanStepKind = "kernel"
	// PlanHost: the node runs as its Go host function (a host step).
	PlanHost PlanStepKind = "host"
	// PlanFolded: the node was computed once, when the plan was built.
	PlanFolded PlanStepKind = "folded"
	// PlanAlias: the node only views its input in another shape; it does not run.
	PlanAlias PlanStepKind = "alias"
	// PlanInlined: an If replaced by the nodes of the branch its fixed condition takes.
	PlanInlined PlanStepKind = "inlined"
	// PlanBranched: an If whose condition is computed at run time, both of whose branches the
	// plan holds as steps: each run reads the condition and runs one branch's steps
	// (branches.go).
	PlanBranched PlanStepKind = "branched"
)

// PlanNode is one node of a compiled run plan: its placement, decided once when the session
// was built, and what the plan made of it.
type PlanNode struct {
	Node, OpType string
	// Provider is where the node's placement puts it; Kernel whether a kernel planner may run
	// it; Placement why it runs as its Go host function when no kernel may ("" when one may).
	Provider  ep.Name
	Kernel    bool
	Placement string
	// Step is what the plan made of the node; Reason, for a kernel or host step, why (as
	// HostSteps says it for a host step).
	Step   PlanStepKind
	Reason string
}

// planNodeOf reports node n of a plan, which made step of it for reason.
func (pe *Env) planNodeOf(n *graph.Node, step PlanStepKind, reason string) PlanNode {
	p := pe.Eng.Placements.Of(n)
	return PlanNode{Node: n.Name, OpType: n.OpType, Provider: p.Provider, Kernel: p.Kernel, Placement: p.Reason,
		Step: step, Reason: reason}
}

// planRef is where a value of the plan lives: a static tensor, or a slot of the arena viewed
// with a type and shape (aliases view one slot with different shapes), from byte Off of the
// slot (views of part of a value: a Slice or Split part that is a contiguous range).
type planRef struct {
	fixed  bool
	static tensor.Tensor
	Slot   int
	Off    int64
	dtype  tensor.DType
	shape  []int64
}

// bytes is the size of r's value.
func (r planRef) bytes() int64 { return ops.Bytes(ops.ValueType{Dtype: r.dtype, Shape: r.shape}) }

// whole reports whether r is the whole of its slot (not a view of part of it).
func (t *Template) whole(r planRef) bool {
	return r.Off == 0 && r.bytes() == t.Slots[r.Slot].Bytes
}

// span is the byte range of the arena that r's value takes.
func (t *Template) span(r planRef) (offset, bytes int64) {
	return t.Slots[r.Slot].Offset + r.Off, r.bytes()
}

// PlanSlot is a byte range of the arena. Steps are numbered from 0; inputs are written at
// step -1 and graph outputs read after the last step.
type PlanSlot struct {
	Bytes       int64
	First, Last int
	Offset      int64
}

type stepKind uint8

const (
	KernelStep stepKind = iota
	hostStep
	// branchStep reads an If's condition (in[0]): true goes on to the then-branch's steps,
	// false to target; jumpStep, the then-branch's end, goes to target; copyStep copies in[0]
	// into out[0] (a branch's output into the If's). See branches.go.
	branchStep
	jumpStep
	copyStep
)

// planStep is one node of the plan.
type planStep struct {
	Kind stepKind
	Node *graph.Node
	in   []planRef // by node input; an omitted optional input is the zero planRef with fixed set
	out  []planRef // by node output; "" outputs have slot -1
	// Kernel steps.
	kernel  *ops.KernelPlan
	scratch []int // slots
	// Host steps.
	fn       exec.RunFunc
	implicit map[string]planRef // outer values the node's subgraphs read (If, Loop, Scan)
	Reason   string             // why this node runs where it runs
	// On a device arena, a host step's crossings, and its span's reason naming them.
	Seam       Seam
	seamReason string
	// Branch and jump steps: the step they go to (branchStep when the condition is false).
	target int
}

// planItem is a segment (a recorded graph of kernel steps) or a host step.
type planItem struct {
	Segment int // >= 0: segments[segment]
	Step    int // host step index when segment < 0
	Jump    int // a branch or jump step's target, as an item index
}

// planInput is a fed input's slot.
type planInput struct {
	name string
	pos  int // index in the session's inputs
	Ref  planRef
}

// Template is what one signature's plan instances share.
type Template struct {
	key string
	// FromShapes says the template was built from a shape-only trace (ShapeTrace) before the
	// signature's first run, which it ran; false: from the interpreter's traced first run.
	FromShapes bool
	// Runs counts the runs of the template's plan (the session's planTiering reads it).
	Runs     atomic.Int64
	Inputs   []planInput
	Steps    []planStep
	Segments [][]int
	// Tuners choose each segment's thread count (built with the template, one a segment).
	Tuners     []*ThreadTuner
	Items      []planItem
	Slots      []PlanSlot
	ArenaBytes int64
	Outputs    []planRef
	// OutputBytes is what a run allocates for its outputs, at most (reserved from the
	// session's memory budget per run).
	OutputBytes uint64
	Folded      int // nodes folded into static values
	Inlined     int // If nodes replaced by the branch their fixed condition takes
	// Branched are the If nodes whose branches both run as plan steps, one per run.
	Branched int
	// Specialized are the inputs whose values the plan takes as fixed (part of its key).
	Specialized []string
	Aliases     int // nodes that only view their input
	// Nodes are the nodes the plan took, in order, with their placements (PlanReport.Nodes).
	Nodes []PlanNode
	// bindIn[i] is the run memory (native.RunBinding.Arg) that input i's kernels read in
	// place, or -1 when the input is copied into the arena; bindOut[j] the memory that output
	// j's kernels write in place, or -1 when the output is copied out (see planBindings).
	BindIn, BindOut []int
	memories        int // how many run memories BindIn and BindOut use
	// DeviceArena: the instances' arenas are device memory (Env.DeviceArenas; see seams.go).
	DeviceArena bool
	// SharedArena: the runs take their arena from the session's ArenaPool (arenas.go), run
	// memory arenaArg, rather than using the instance's own.
	SharedArena bool
	arenaArg    int
}

// Instance is the memory and recordings one run at a time uses.
type Instance struct {
	outputs outputBlocks // small outputs' memory
	RC      exec.RunCtx  // the fast path's run context (runs of an instance do not overlap)
	MS      *device.ModelSession
	// Mem is the arena, host-visible (nil for a device arena: see dev); on a shared arena,
	// the run's slab while a run is under way, else nil.
	Mem     []byte
	dev     *deviceState
	segKeys []string // recording keys by segment
	// words are the launches' violation words (host-visible, 4 bytes each, in launch order);
	// wordOwners[i] is the step whose kernel owns word i, segWords[s] segment s's first word.
	words      []byte
	wordOwners []int
	wordCalls  []int // the call of its step's kernel plan that owns word i
	segWords   []int
	// segBindings[s] are segment s's kernel bindings of bound inputs and outputs (by node,
	// then binding), rebound to the run's memory each run; on a shared arena also those of
	// every other arena slot, rebound to the run's slab.
	segBindings [][]native.RunBinding
	mem         [][]byte // the run's memories, when more than Execute keeps on its stack
	recorded    []byte   // on a shared arena: the arena the segments were recorded over
	latched     uint32   // violation bits seen since TakeLatched (bindings.go)
	// weightKeys are the shared weights the instance took a reference to (given back by
	// Close), in weightStore of weightCtx.
	weightKeys  []device.SharedWeightKey
	weightStore *device.SharedWeights
	weightCtx   *device.ModelContext
}

// Close closes the instance's ModelSession and gives back its references to the shared
// weights, freeing the plan's own constants when no other instance binds them.
func (inst *Instance) Close() error {
	err := inst.MS.Close()
	if inst.weightStore != nil {
		err = errors.Join(err, device.ReleaseWeights(inst.weightStore, inst.weightCtx, inst.weightKeys))
		inst.weightKeys = nil
	}
	return err
}

// ErrPlanGuard says a host step produced another type or shape than the plan traced.
var ErrPlanGuard = errors.New("a host step's output differs from the traced one")

// onnxDomain reports whether n is an ai.onnx operator.
func onnxDomain(n *graph.Node) bool { return n.Domain == "" || n.Domain == "ai.onnx" }

// readsShapesOnly reports whether n reads only its input's shape (Shape, Size), which a plan's
// signature fixes.
func readsShapesOnly(n *graph.Node) bool {
	return onnxDomain(n) && (n.OpType == "Shape" || n.OpType == "Size")
}

// DependsOnData reports whether n's outputs depend on the inputs' data, given which values do
// (dynamic): the plan builder and the trace classify nodes by this one rule, so that the trace
// keeps the values of exactly the nodes the plan folds.
func DependsOnData(n *graph.Node, dynamic func(name string) bool) bool {
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

// TracedNode is one top-level node of the traced interpreter run.
type TracedNode struct {
	Graph *graph.Graph // the graph the node belongs to (subgraph nodes come before their If)
	Node  *graph.Node
	Out   []tensor.Tensor // values only where they do not depend on the inputs' data (tracePlan)
}

// AppendPlanKey appends the signature of the fed inputs to b: type and shape of each, in
// input order, and the values of the inputs the plan Specializes on (see Specializes). ok is
// false when an input is a sequence or optional (never planned).
func (p *Env) AppendPlanKey(b []byte, ins []tensor.Tensor) ([]byte, bool) {
	control := p.ControlInputs()
	for i, name := range p.Eng.InputNames {
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
		if control[name] && Specializes(t) {
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

// Specializes says whether a plan takes an input's value as fixed when the value decides
// shapes or control flow: small integer or boolean tensors (a sample rate, a flag, a
// length), whose few values each get their own plan.
func Specializes(t tensor.Tensor) bool {
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
	"CenterCropPad": {1}, "Col2Im": {1, 2}, "AffineGrid": {1},
}

// ControlInputs are the graph inputs whose values reach a control position of the main
// graph, through any chain of ops (Shape and Size read only their input's shape; of the other
// domains' ops, only those of msControlPositions are followed).
func (p *Env) ControlInputs() map[string]bool {
	p.controlOnce.Do(func() {
		g := p.Eng.Model.Graph
		needed := map[string]bool{}
		for i := len(g.Nodes) - 1; i >= 0; i-- {
			n := g.Nodes[i]
			positions, followed := controlPositionsOf(n)
			if !followed || readsShapesOnly(n) {
				continue
			}
			all := false
			for _, out := range n.Outputs {
				all = all || (out != "" && needed[out])
			}
			for j, in := range n.Inputs {
				if all || slices.Contains(positions, j) {
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
		for _, name := range p.Eng.InputNames {
			if needed[name] {
				p.control[name] = true
			}
		}
	})
	return p.control
}

// BuildTemplate turns a traced run into a plan, or says why the signature cannot be
// planned.
func (pe *Env) BuildTemplate(key string, fed map[string]tensor.Tensor, trace []TracedNode) (*Template, string) {
	g := pe.Eng.Model.Graph
	t := &Template{key: key}
	refs := make(map[string]planRef, len(g.Nodes)*2)
	newSlot := func(v tensor.Tensor, first int) (planRef, string) {
		if tensor.Box(v) != nil {
			return planRef{}, "a sequence or optional value"
		}
		if v.DType() == graph.String {
			return planRef{}, "a string tensor"
		}
		t.Slots = append(t.Slots, PlanSlot{Bytes: ops.Bytes(ops.ValueType{Dtype: v.DType(), Shape: v.Dims()}), First: first, Last: first})
		return planRef{Slot: len(t.Slots) - 1, dtype: v.DType(), shape: append([]int64{}, v.Dims()...)}, ""
	}
	for name, w := range pe.Eng.Weights {
		refs[name] = planRef{fixed: true, static: w, dtype: w.DType(), shape: w.Dims()}
	}
	control := pe.ControlInputs()
	for pos, name := range pe.Eng.InputNames {
		v := fed[name]
		if control[name] && Specializes(v) {
			c, err := tensor.CopyOut(v)
			if err != nil {
				return nil, err.Error()
			}
			refs[name] = planRef{fixed: true, static: c, dtype: c.DType(), shape: c.Dims()}
			t.Specialized = append(t.Specialized, name)
			continue
		}
		r, why := newSlot(v, -1)
		if why != "" {
			return nil, fmt.Sprintf("input %q is %s", name, why)
		}
		refs[name] = r
		t.Inputs = append(t.Inputs, planInput{name: name, pos: pos, Ref: r})
	}
	use := func(r planRef, step int) {
		if !r.fixed && r.Slot >= 0 {
			t.Slots[r.Slot].Last = max(t.Slots[r.Slot].Last, step)
		}
	}
	// Subgraph nodes come in the trace before the node that ran them; an If whose condition
	// is fixed inlines the traced nodes of its branch.
	pending := map[*graph.Graph][]TracedNode{}
	var addNode func(tn TracedNode) string
	var inlineIf func(n *graph.Node, cond tensor.Tensor, tn TracedNode) string
	var planBranches func(n *graph.Node, cond planRef, tn TracedNode) string
	planFailure := "" // set when an inlined branch cannot be planned
	addNode = func(tn TracedNode) string {
		n := tn.Node
		step := planStep{Node: n, in: make([]planRef, len(n.Inputs))}
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
		dynamic := DependsOnData(n, func(name string) bool {
			r, ok := refs[name]
			return ok && !r.fixed
		})
		if !dynamic && tracedValues(tn.Out) {
			for j, name := range n.Outputs {
				if name != "" && j < len(tn.Out) {
					o := tn.Out[j]
					refs[name] = planRef{fixed: true, static: o, dtype: o.DType(), shape: o.Dims()}
				}
			}
			t.Folded++
			t.Nodes = append(t.Nodes, pe.planNodeOf(n, PlanFolded, ""))
			return ""
		}
		if n.OpType == "If" && onnxDomain(n) && step.in[0].fixed && step.in[0].static.IsValid() {
			if why := inlineIf(n, step.in[0].static, tn); why == "" {
				t.Nodes = append(t.Nodes, pe.planNodeOf(n, PlanInlined, ""))
				return ""
			}
		}
		branchesWhy := ""
		if n.OpType == "If" && onnxDomain(n) && len(step.in) == 1 && !step.in[0].fixed {
			if branchesWhy = planBranches(n, step.in[0], tn); branchesWhy == "" {
				return ""
			}
		}
		index := len(t.Steps)
		for _, r := range step.in {
			use(r, index)
		}
		for _, r := range step.implicit {
			use(r, index)
		}
		if n.Traits().View && len(tn.Out) == 1 && tensor.Box(tn.Out[0]) == nil &&
			!step.in[0].fixed && allFixedAfter(step.in, 1) {
			o := tn.Out[0]
			refs[n.Outputs[0]] = planRef{Slot: step.in[0].Slot, Off: step.in[0].Off, dtype: o.DType(), shape: append([]int64{}, o.Dims()...)}
			t.Aliases++
			t.Nodes = append(t.Nodes, pe.planNodeOf(n, PlanAlias, ""))
			return ""
		}
		slotsBefore := len(t.Slots)
		step.out = make([]planRef, len(n.Outputs))
		for j, name := range n.Outputs {
			step.out[j] = planRef{Slot: -1}
			if name == "" {
				continue
			}
			if j >= len(tn.Out) {
				return fmt.Sprintf("node %q (%s) produced %d outputs, output %d is used", n.Name, n.OpType, len(tn.Out), j)
			}
			r, why := newSlot(tn.Out[j], index)
			if why != "" {
				return fmt.Sprintf("node %q (%s) produces %s at run time", n.Name, n.OpType, why)
			}
			step.out[j] = r
			refs[name] = r
		}
		// The node's placement (internal/ep) says whether a kernel planner may run it.
		pl := pe.Eng.Placements.Of(n)
		step.Kind, step.Reason = hostStep, pl.HostReason()
		if branchesWhy != "" {
			step.Reason += " (its branches are not plan steps: " + branchesWhy + ")"
		}
		if planner, ok := ops.PlannerFor(pe.Eng.PlanTarget(), ops.PlannerKey(n)); ok && pl.Kernel {
			infos := make([]ops.ValueInfo, len(step.in))
			for j, r := range step.in {
				if n.Inputs[j] == "" {
					continue
				}
				infos[j] = ops.ValueInfo{ValueType: ops.ValueType{Dtype: r.dtype, Shape: r.shape}, Present: true}
				if r.fixed {
					infos[j].Static = r.static
					if pe.KeepDerived {
						infos[j].Derived = &pe.Derived
					}
				}
			}
			p, reason, err := planner(n, pe.Eng.Opset, infos)
			switch {
			case err != nil:
				return fmt.Sprintf("node %q (%s): the kernel planner failed: %v", n.Name, n.OpType, err)
			case p == nil:
				step.Reason = reason
			default:
				p, why := pe.Eng.Kernels.ServablePlan(pe.Eng.Ctx, n, pe.Eng.Opset, infos, p)
				if why != "" {
					step.Reason = why // the op runs as its host function
					break
				}
				if why := ops.AgreesWith(p, tn.Out); why != "" {
					return fmt.Sprintf("node %q (%s): %s", n.Name, n.OpType, why)
				}
				if pe.viewable(p, step.in, tn.Out) {
					// Its outputs are ranges of its input: views of the input's slot, no step.
					t.Slots = t.Slots[:slotsBefore]
					in := step.in[0]
					for j, name := range n.Outputs {
						if name != "" {
							o := tn.Out[j]
							refs[name] = planRef{Slot: in.Slot, Off: in.Off + ops.Bytes(ops.ValueType{Dtype: in.dtype, Shape: []int64{p.Views[j]}}),
								dtype: o.DType(), shape: append([]int64{}, o.Dims()...)}
						}
					}
					t.Aliases++
					t.Nodes = append(t.Nodes, pe.planNodeOf(n, PlanAlias, ""))
					return ""
				}
				step.Kind, step.kernel, step.Reason = KernelStep, p, p.Reason
				// Outputs the node leaves unnamed still get memory for the kernels to write
				// (live for this step only).
				for j, o := range p.Outputs {
					if j < len(step.out) && step.out[j].Slot < 0 {
						t.Slots = append(t.Slots, PlanSlot{Bytes: ops.Bytes(o), First: index, Last: index})
						step.out[j] = planRef{Slot: len(t.Slots) - 1, dtype: o.Dtype, shape: o.Shape}
					}
				}
				for _, bytes := range p.Scratch {
					t.Slots = append(t.Slots, PlanSlot{Bytes: bytes, First: index, Last: index})
					step.scratch = append(step.scratch, len(t.Slots)-1)
				}
			}
		}
		if step.Kind == hostStep {
			fn, ok := exec.LookupOp(n)
			if !ok && !n.Traits().ControlFlow {
				return fmt.Sprintf("node %q: operator %s is not supported", n.Name, n.OpType)
			}
			step.fn = fn
		}
		t.Steps = append(t.Steps, step)
		kind := PlanHost
		if step.Kind == KernelStep {
			kind = PlanKernel
		}
		t.Nodes = append(t.Nodes, pe.planNodeOf(n, kind, step.Reason))
		return ""
	}
	// inlineIf adds the traced nodes of the branch an If with a fixed condition took, and
	// makes the If's outputs the branch's; "" when it did, else why not (the If then runs as
	// a host step).
	inlineIf = func(n *graph.Node, cond tensor.Tensor, tn TracedNode) string {
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
			for _, out := range e.Node.Outputs {
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
		t.Inlined++
		return ""
	}
	// planBranches adds both traced branches of an If whose condition is computed at run
	// time as steps (branches.go); "" when it did, else why not, with nothing added (the If
	// then runs as a host step).
	planBranches = func(n *graph.Node, cond planRef, tn TracedNode) string {
		if c := ops.Numel(cond.shape); c != 1 || cond.dtype == graph.String {
			return "the condition is not a single value"
		}
		var bgs [2]*graph.Graph
		for b, name := range branchNames {
			a := n.Attr(name)
			if a == nil || a.Graph == nil {
				return "the If has no " + name
			}
			bgs[b] = a.Graph
		}
		var entries [2][]TracedNode
		for b, bg := range bgs {
			entries[b] = pending[bg]
			delete(pending, bg)
			if len(entries[b]) != len(bg.Nodes) {
				return fmt.Sprintf("the trace of its %s has %d of its %d nodes (it failed on the traced run's data)", branchNames[b], len(entries[b]), len(bg.Nodes))
			}
			if len(bg.Outputs) != len(n.Outputs) || len(tn.Out) < len(n.Outputs) {
				return fmt.Sprintf("its %s has %d outputs for the If's %d", branchNames[b], len(bg.Outputs), len(n.Outputs))
			}
		}
		mark := t.mark()
		var added []string // names the branch being added defines, dropped from refs once it is done
		fail := func(why string) string {
			t.rollback(mark)
			for _, name := range added {
				delete(refs, name)
			}
			planFailure = ""
			return why
		}
		bi := len(t.Steps)
		use(cond, bi)
		t.Steps = append(t.Steps, planStep{Kind: branchStep, Node: n, in: []planRef{cond}, Reason: "reads the If's condition to pick the branch"})
		t.Nodes = append(t.Nodes, pe.planNodeOf(n, PlanBranched, ""))
		outs := make([]planRef, len(n.Outputs))
		jump := -1
		for b, bg := range bgs {
			if b == 1 {
				jump = len(t.Steps)
				t.Steps = append(t.Steps, planStep{Kind: jumpStep, Node: n, Reason: "the then_branch's end"})
				t.Steps[bi].target = len(t.Steps)
			}
			firstSlot, firstStep := len(t.Slots), len(t.Steps)
			names := branchValueNames(bg)
			for _, name := range names {
				if _, clash := refs[name]; clash {
					return fail(fmt.Sprintf("the %s's value %q shadows another", branchNames[b], name))
				}
			}
			added = names
			for name, gt := range bg.Initializers {
				v, err := tensor.FromGraphTensor(gt)
				if err != nil {
					return fail(err.Error())
				}
				refs[name] = planRef{fixed: true, static: v, dtype: v.DType(), shape: v.Dims()}
			}
			for _, e := range entries[b] {
				if why := addNode(e); why != "" || planFailure != "" {
					if why == "" {
						why = planFailure
					}
					return fail(why)
				}
			}
			// The If's outputs: the slot a step of the then-branch writes for it alone, else a
			// slot of their own; the else-branch's step writes the same slot where it can.
			// Other values (constants, outer values, one value for two outputs) are copied.
			direct := make([]bool, len(n.Outputs))
			taken := map[int]bool{} // this branch's slots that are the If's outputs already
			for i, out := range n.Outputs {
				r, ok := refs[bg.Outputs[i].Name]
				if !ok {
					return fail(fmt.Sprintf("the %s's output %q was not computed", branchNames[b], bg.Outputs[i].Name))
				}
				want := tn.Out[i]
				if r.fixed && (tensor.Box(r.static) != nil || r.dtype == graph.String) || r.dtype != want.DType() || !slices.Equal(r.shape, want.Dims()) {
					return fail(fmt.Sprintf("the %s's output %d is %s where the traced run's is %s", branchNames[b], i,
						describeType(r.dtype, r.shape), describeType(want.DType(), want.Dims())))
				}
				if out == "" {
					continue
				}
				own := !r.fixed && r.Slot >= firstSlot && !taken[r.Slot] && t.whole(r)
				if b == 0 {
					if own {
						taken[r.Slot] = true
						outs[i], direct[i] = planRef{Slot: r.Slot, dtype: want.DType(), shape: slices.Clone(want.Dims())}, true
						continue
					}
					o, why := newSlot(want, len(t.Steps))
					if why != "" {
						return fail(fmt.Sprintf("the If's output %q is %s", out, why))
					}
					outs[i] = o
					continue
				}
				if own && t.Slots[r.Slot].Bytes <= t.Slots[outs[i].Slot].Bytes {
					// The else-branch's values in r's slot move to the output's.
					from, to := r.Slot, outs[i].Slot
					t.moveSlot(from, to, firstStep)
					for _, name := range names {
						if v, ok := refs[name]; ok && !v.fixed && v.Slot == from {
							v.Slot = to
							refs[name] = v
						}
					}
					taken[to], direct[i] = true, true
				}
			}
			for i, out := range n.Outputs {
				if out == "" || direct[i] {
					continue
				}
				r := refs[bg.Outputs[i].Name]
				at := len(t.Steps)
				use(r, at)
				o := &t.Slots[outs[i].Slot]
				o.First, o.Last = min(o.First, at), max(o.Last, at)
				t.Steps = append(t.Steps, planStep{Kind: copyStep, Node: copyNode(n, branchNames[b], bg.Outputs[i].Name, i), in: []planRef{r}, out: []planRef{outs[i]},
					Reason: fmt.Sprintf("copies the %s's output %q into the If's output %q", branchNames[b], bg.Outputs[i].Name, out)})
			}
			// The branch's values are its own: the other branch may use the same names.
			for _, name := range names {
				delete(refs, name)
			}
			added = nil
		}
		t.Steps[jump].target = len(t.Steps)
		for i, out := range n.Outputs {
			if out != "" {
				refs[out] = outs[i]
			}
		}
		t.Branched++
		return ""
	}
	mainNodes := 0
	for _, tn := range trace {
		if tn.Graph != g {
			pending[tn.Graph] = append(pending[tn.Graph], tn)
			continue
		}
		if mainNodes >= len(g.Nodes) || tn.Node != g.Nodes[mainNodes] {
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
	end := len(t.Steps)
	for _, v := range g.Outputs {
		r, ok := refs[v.Name]
		if !ok {
			return nil, fmt.Sprintf("graph output %q was not computed", v.Name)
		}
		if r.fixed && tensor.Box(r.static) != nil {
			return nil, fmt.Sprintf("graph output %q is a sequence or optional", v.Name)
		}
		use(r, end)
		t.Outputs = append(t.Outputs, r)
	}
	// Segments: maximal runs of kernel steps with at least one launch.
	seg := -1
	for i, st := range t.Steps {
		if st.Kind != KernelStep {
			t.Items = append(t.Items, planItem{Segment: -1, Step: i})
			seg = -1
			continue
		}
		if len(st.kernel.Calls) == 0 {
			continue
		}
		if seg < 0 {
			t.Segments = append(t.Segments, nil)
			t.Tuners = append(t.Tuners, &ThreadTuner{})
			seg = len(t.Segments) - 1
			t.Items = append(t.Items, planItem{Segment: seg})
		}
		t.Segments[seg] = append(t.Segments[seg], i)
	}
	t.linkJumps()
	t.PlaceSlots()
	for seg, steps := range t.Segments {
		t.Tuners[seg].preset(t.segmentWork(steps))
	}
	t.planBindings()
	if pe.Arenas != nil && !pe.DeviceArenas && t.ArenaBytes >= sharedArenaMin.Load() {
		t.SharedArena, t.arenaArg = true, t.memories
	}
	if pe.DeviceArenas {
		t.DeviceArena = true
		for i, seam := range t.seams() {
			t.Steps[i].Seam = seam
			t.Steps[i].seamReason = t.Steps[i].Reason + " (" + seam.String() + ")"
		}
	}
	return t, ""
}

// planBindings chooses the inputs that kernels read, and the outputs that kernels write, in
// the caller's memory rather than through the arena: copying a 4 KiB input in and the output
// out cost a tiny model's run about a fifth of its time. An input qualifies when only kernels
// read it (a host step reads the arena), and no graph output is it; an output when one kernel
// step writes it, only kernels touch it, and no other graph output or input shares its slot.
// Values under 4 bytes are left in the arena (their regions are rounded up to 4 bytes).
func (t *Template) planBindings() {
	t.BindIn = make([]int, len(t.Inputs))
	t.BindOut = make([]int, len(t.Outputs))
	host := map[int]bool{}     // slots a host step touches
	produced := map[int]bool{} // slots a kernel step writes
	outputs := map[int]int{}   // graph outputs by slot
	for i := range t.Steps {
		st := &t.Steps[i]
		refs := slices.Concat(st.in, st.out)
		for _, r := range st.implicit {
			refs = append(refs, r)
		}
		for _, r := range refs {
			if r.fixed || r.Slot < 0 {
				continue
			}
			if st.Kind != KernelStep {
				host[r.Slot] = true // host steps, branch conditions and copies
			}
		}
		if st.Kind == KernelStep {
			for _, r := range st.out {
				if r.Slot >= 0 {
					produced[r.Slot] = true
				}
			}
			// Planners never write their inputs; a kernel that did must not write the caller's.
			for _, c := range st.kernel.Calls {
				for _, b := range c.Bind {
					if b.Operand.Kind == ops.OperandInput && device.AccessWrites(b.Access) && b.Operand.Index < len(st.in) && !st.in[b.Operand.Index].fixed {
						host[st.in[b.Operand.Index].Slot] = true
					}
				}
			}
		}
	}
	for _, r := range t.Outputs {
		if !r.fixed {
			outputs[r.Slot]++
		}
	}
	inputSlots := map[int]bool{}
	arg := 0
	for i, in := range t.Inputs {
		s := in.Ref.Slot
		inputSlots[s] = true
		t.BindIn[i] = -1
		if t.Slots[s].Bytes >= 4 && !host[s] && outputs[s] == 0 {
			t.BindIn[i] = arg
			arg++
		}
	}
	for j, r := range t.Outputs {
		t.BindOut[j] = -1
		if r.fixed {
			continue
		}
		s := r.Slot
		if t.Slots[s].Bytes >= 4 && produced[s] && !host[s] && !inputSlots[s] && outputs[s] == 1 && t.whole(r) {
			t.BindOut[j] = arg
			arg++
		}
	}
	t.memories = arg
}

// boundSlots maps the slots of bound inputs and outputs to their run memory.
func (t *Template) boundSlots() map[int]int {
	m := map[int]int{}
	for i, a := range t.BindIn {
		if a >= 0 {
			m[t.Inputs[i].Ref.Slot] = a
		}
	}
	for j, a := range t.BindOut {
		if a >= 0 {
			m[t.Outputs[j].Slot] = a
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

// Align is the alignment of every slot (a cache line; wide vector loads).
const Align = 64

// PlaceSlots gives each slot an offset: first fit among the slots live at the same time
// (live from the step that writes it through the last step that reads it, inclusive).
func (t *Template) PlaceSlots() {
	order := make([]int, len(t.Slots))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		sa, sb := t.Slots[order[a]], t.Slots[order[b]]
		if sa.First != sb.First {
			return sa.First < sb.First
		}
		return sa.Bytes > sb.Bytes
	})
	var live []int // slot indices, by offset
	for _, i := range order {
		s := &t.Slots[i]
		kept := live[:0]
		for _, j := range live {
			if t.Slots[j].Last >= s.First {
				kept = append(kept, j)
			}
		}
		live = kept
		size := (max(s.Bytes, 4) + Align - 1) / Align * Align
		offset := int64(0)
		at := len(live)
		for k, j := range live {
			if t.Slots[j].Offset-offset >= size {
				at = k
				break
			}
			offset = max(offset, t.Slots[j].Offset+(max(t.Slots[j].Bytes, 4)+Align-1)/Align*Align)
		}
		s.Offset = offset
		t.ArenaBytes = max(t.ArenaBytes, offset+size)
		live = append(live, 0)
		copy(live[at+1:], live[at:])
		live[at] = i
	}
	t.ArenaBytes = max(t.ArenaBytes, Align)
	t.OutputBytes = 0
	for _, r := range t.Outputs {
		if r.dtype == graph.String {
			t.OutputBytes += uint64(r.static.Len()) * 16
			continue
		}
		t.OutputBytes += uint64(tensor.StorageBytes(r.dtype, int64(ops.Numel(r.shape))))
	}
}

// region is slot i of the instance's arena as a Region.
func (t *Template) region(arena device.Region, i int) (device.Region, error) {
	s := t.Slots[i]
	return arena.Slice(uint64(s.Offset), uint64(max(s.Bytes, 4)))
}

// refRegion is r's value in the instance's arena as a Region: its slot, or the part of it a
// view takes.
func (t *Template) refRegion(arena device.Region, r planRef) (device.Region, error) {
	if t.whole(r) {
		return t.region(arena, r.Slot)
	}
	off, bytes := t.span(r)
	return arena.Slice(uint64(off), uint64(max(bytes, 4)))
}

// NewInstance allocates an instance's arena and records its segments.
func (p *Env) NewInstance(t *Template, phase exec.RunPhase) (_ *Instance, err error) {
	ms, err := p.Eng.RunSession()
	if err != nil {
		return nil, err
	}
	inst := &Instance{MS: ms, weightStore: &p.PlanWeights, weightCtx: p.Eng.Ctx}
	defer func() {
		if err != nil {
			inst.Close()
		}
	}()
	var arena device.Region
	if p.DeviceArenas {
		if arena, err = ms.Allocate(uint64(max(t.ArenaBytes, 4))); err != nil {
			return nil, err
		}
		inst.newDeviceState(t, arena)
	} else {
		if arena, err = ms.AllocateShared(uint64(t.ArenaBytes)); err != nil {
			return nil, err
		}
		if inst.Mem, err = device.HostBytes(ms, arena); err != nil {
			return nil, err
		}
		if inst.Mem == nil {
			return nil, tensor.NewError("Run", tensor.ErrDevice, "the device's shared memory is not host-visible")
		}
		if t.SharedArena {
			// The runs' slabs serve; the recorded arena is never touched.
			inst.recorded, inst.Mem = inst.Mem, nil
		}
	}
	// Weights and constant operands: one device copy for all of the session's plan
	// instances (sharedWeights), bound once per instance.
	weights := map[device.SharedWeightKey]device.Region{}
	bind := func(key device.SharedWeightKey, raw func() []byte, keep bool) (device.Region, error) {
		if r, ok := weights[key]; ok {
			return r, nil
		}
		r, err := device.SharedWeight(ms, &p.PlanWeights, key, raw, keep)
		if err != nil {
			return device.Region{}, err
		}
		weights[key] = r
		inst.weightKeys = append(inst.weightKeys, key)
		return r, nil
	}
	weight := func(v tensor.Tensor) (device.Region, error) {
		// A constant held packed (tensor.Relaid: a weight the session packed, or a packed
		// weight a shape-generic stand-in reads unpacked) is bound unpacked: one unpacked
		// copy for the instances of every plan that bind it, freed with the last of them.
		if r := tensor.RelaidOf(v); r != nil && len(r.Packed) > 0 && v.Len() > 0 {
			packed, _ := tensor.RawBytes(r.Packed)
			key := device.UnpackedKey(packed, 4*v.Len(), r.Layout)
			return bind(key, func() []byte { raw, _ := ops.RawBytes(v); return raw }, false)
		}
		raw, ok := ops.RawBytes(v)
		if !ok {
			return device.Region{}, ops.OpErr("a %s tensor cannot be bound to a kernel", v.DType())
		}
		if len(raw) == 0 {
			raw = device.EmptyWeight
		}
		return bind(device.WeightKey(raw), func() []byte { return raw }, p.sessionHeld(raw))
	}
	kernelIDs := map[*device.LoadedKernel]device.KernelID{}
	calls := 0
	for _, steps := range t.Segments {
		for _, i := range steps {
			calls += len(t.Steps[i].kernel.Calls)
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
	for si, steps := range t.Segments {
		inst.segWords = append(inst.segWords, len(inst.wordOwners))
		var cmds []device.Command
		var sites []native.RunBinding
		for _, i := range steps {
			st := &t.Steps[i]
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
					if o.Index >= len(st.out) || st.out[o.Index].Slot < 0 {
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
				return t.refRegion(arena, r)
			}
			for ci, c := range st.kernel.Calls {
				k, err := p.Eng.Kernels.Get(p.Eng.Ctx, phase, c.File, c.Symbol, c.Config)
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
				inst.wordCalls = append(inst.wordCalls, ci)
				d := device.Dispatch{Kernel: kid, Args: c.Args, Workload: c.Workload, Violation: word}
				for bi, b := range c.Bind {
					r, err := resolve(b.Operand)
					if err != nil {
						return nil, tensor.NodeError(st.Node, err)
					}
					d.Bindings = append(d.Bindings, device.Binding{Region: r, Access: b.Access})
					slot := st.operandSlot(b.Operand)
					if slot < 0 {
						continue
					}
					// The binding's range of the arena, as recorded, moves for the run: onto
					// the run's memory of a bound slot (a view onto its part of it), or onto
					// the slab at the same offset.
					at := r.Offset() - arena.Offset()
					if a, ok := bound[slot]; ok {
						sites = append(sites, native.RunBinding{Node: uint32(len(cmds)), Index: uint32(bi), Arg: uint32(a), Offset: at - uint64(t.Slots[slot].Offset), Bytes: r.Bytes()})
					} else if t.SharedArena {
						sites = append(sites, native.RunBinding{Node: uint32(len(cmds)), Index: uint32(bi), Arg: uint32(t.arenaArg), Offset: at, Bytes: r.Bytes()})
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

// operandSlot is the arena slot a kernel operand of st binds (a value's, or scratch), or -1
// (weights, constants).
func (st *planStep) operandSlot(o ops.Operand) int {
	var r planRef
	switch {
	case o.Kind == ops.OperandInput && o.Index < len(st.in):
		r = st.in[o.Index]
	case o.Kind == ops.OperandOutput && o.Index < len(st.out):
		r = st.out[o.Index]
	case o.Kind == ops.OperandScratch && o.Index < len(st.scratch):
		return st.scratch[o.Index]
	default:
		return -1
	}
	if r.fixed {
		return -1
	}
	return r.Slot
}

// view is r as a tensor over the instance's arena (static values as they are).
func (t *Template) view(inst *Instance, r planRef) tensor.Tensor {
	if r.fixed {
		return r.static
	}
	if inst.dev != nil {
		return tensor.ViewBytes(r.dtype, r.shape, devicePart(inst.dev.host[r.Slot], r))
	}
	off, bytes := t.span(r)
	return tensor.ViewBytes(r.dtype, r.shape, inst.Mem[off:off+bytes])
}

// devicePart is r's part of its slot's host copy on a device arena (a view's range; the
// copy itself while there is none, nil).
func devicePart(host []byte, r planRef) []byte {
	if host == nil || (r.Off == 0 && int64(len(host)) == r.bytes()) {
		return host
	}
	return host[r.Off : r.Off+r.bytes()]
}

// ThreadTuner chooses how many threads run a segment when the session has several: a small
// graph can run slower on two threads than on one (handing its small grids to another thread
// costs more than it saves), a large one runs faster on all of them. Where the segment's
// work, the bytes its launches bind (segmentWork), decides it, the choice is made when the
// plan is built, the same in every process (preset): all threads for a segment that moves
// at least parallelBytes in launches of parallelLaunchBytes on average, one for one that
// moves less than serialBytes. Between the two only timing says where the line lies on a
// given machine: the first runs alternate between one thread and all of them; after
// TuneSamples of each, the faster wins (all of them only when clearly faster, since one
// thread leaves the others to the caller's work).
type ThreadTuner struct {
	decided atomic.Bool
	choice  int // the thread count, once decided (written before decided is set); 0 all
	mu      sync.Mutex
	best    [2]time.Duration // best time with one thread, with all of them
	runs    [2]int
}

// The thresholds of preset, in bytes bound by a segment's launches per run: at 4 MiB (about
// 100 us of streaming on one core) in launches of 64 KiB or more (a few us each, against the
// ~0.5 us a launch's barrier costs a team), a second thread pays whatever the machine; under
// 256 KiB (a few us in all) it cannot, unless its products compute for longer: 256 Ki
// floating-point operations (stepFLOPs) are a few us of one core's FMA units too, and a
// segment over either threshold is timed. Products of 1 Mi floating-point operations or more,
// 128 Ki a launch on average (3 us or more of work a launch against its barrier's 0.5-1.5),
// run on all the threads however few bytes they bind: small convolutions (MNIST's, a small
// image classifier's) were preset to one thread by their bytes, or timed, which on a shared
// host kept one thread in some processes.
const (
	parallelBytes       = 4 << 20
	parallelLaunchBytes = 64 << 10
	serialBytes         = 256 << 10
	serialFLOPs         = 256 << 10
	parallelFLOPs       = 1 << 20
	parallelLaunchFLOPs = 128 << 10
)

// preset decides the thread count from a segment's work when it is clear: the bytes its
// launches bind per run, the floating-point operations of its products and the number of
// launches (see ThreadTuner).
func (tt *ThreadTuner) preset(bytes, flops int64, launches int) {
	switch {
	case launches > 0 && bytes >= parallelBytes && bytes/int64(launches) >= parallelLaunchBytes:
		tt.choice = 0
	case launches > 0 && flops >= parallelFLOPs && flops/int64(launches) >= parallelLaunchFLOPs:
		tt.choice = 0
	case bytes < serialBytes && flops < serialFLOPs:
		tt.choice = 1
	default:
		return
	}
	tt.decided.Store(true)
}

// segmentWork is what a segment's launches bind per run: the bytes of every region each
// launch reads or writes, summed over launches, the floating-point operations of its
// products (stepFLOPs, saturated) and the number of launches.
func (t *Template) segmentWork(steps []int) (bytes, flops int64, launches int) {
	for _, i := range steps {
		st := &t.Steps[i]
		for _, c := range st.kernel.Calls {
			launches++
			for _, b := range c.Bind {
				bytes += t.operandBytes(st, b.Operand)
			}
		}
		flops = min(flops+stepFLOPs(st), math.MaxInt64/2) // both at most MaxInt64/2: no overflow
	}
	return bytes, flops, launches
}

// stepFLOPs is the floating-point operations of st's products, counted from its shapes: two
// a multiply-add of a MatMul, Gemm or convolution (the fused forms included); 0 for every other
// op (their work is the bytes they move, which segmentWork counts). Convolutions read a few
// kilobytes of input and weights for millions of operations: MNIST's second convolution, 50
// KiB bound, is 1.25 MFLOP.
func stepFLOPs(st *planStep) int64 {
	if len(st.out) == 0 || len(st.in) < 2 || st.Node == nil {
		return 0
	}
	out := int64(ops.Numel(st.out[0].shape))
	a, w := st.in[0].shape, st.in[1].shape
	var macs int64 // multiply-adds an output element
	switch st.Node.OpType {
	case "MatMul", "MatMulAdd", "FusedMatMul":
		if len(a) == 0 {
			return 0
		}
		k := a[len(a)-1]
		if st.Node.AttrInt("transA", 0) != 0 && len(a) >= 2 {
			k = a[len(a)-2]
		}
		macs = k
	case "Gemm", "FusedGemm":
		if len(a) != 2 {
			return 0
		}
		macs = a[1]
		if st.Node.AttrInt("transA", 0) != 0 {
			macs = a[0]
		}
	case "Conv", "FusedConv":
		if len(w) < 2 {
			return 0
		}
		macs = int64(ops.Numel(w[1:])) // input channels a group times the kernel's taps
	case "ConvTranspose":
		// Each input element meets W[1] * taps weights.
		if len(w) < 2 {
			return 0
		}
		out, macs = int64(ops.Numel(a)), int64(ops.Numel(w[1:]))
	default:
		return 0
	}
	if out <= 0 || macs <= 0 {
		return 0
	}
	// Saturated: the count only compares with thresholds.
	if f := 2 * float64(out) * float64(macs); f < math.MaxInt64/2 {
		return int64(f)
	}
	return math.MaxInt64 / 2
}

// operandBytes is the size of a kernel step's operand (0 when unknown).
func (t *Template) operandBytes(st *planStep, o ops.Operand) int64 {
	var r planRef
	switch o.Kind {
	case ops.OperandInput:
		if o.Index >= len(st.in) {
			return 0
		}
		r = st.in[o.Index]
	case ops.OperandOutput:
		if o.Index >= len(st.out) {
			return 0
		}
		r = st.out[o.Index]
	case ops.OperandScratch:
		if o.Index >= len(st.scratch) || st.scratch[o.Index] >= len(t.Slots) {
			return 0
		}
		return t.Slots[st.scratch[o.Index]].Bytes
	case ops.OperandConst:
		if o.Index >= len(st.kernel.Consts) {
			return 0
		}
		c := st.kernel.Consts[o.Index]
		return ops.Bytes(ops.ValueType{Dtype: c.DType(), Shape: c.Dims()})
	default:
		return 0
	}
	return ops.Bytes(ops.ValueType{Dtype: r.dtype, Shape: r.shape})
}

// TuneSamples are the runs a ThreadTuner times per thread count before it chooses.
const TuneSamples = 5

// Threads returns the thread count for the next run of the segment, given the session's n
// (0: every hardware thread), and the sample slot to report its time to (-1: none).
func (tt *ThreadTuner) Threads(n int) (int, int) {
	if n == 1 {
		return 1, -1
	}
	if tt.decided.Load() {
		if tt.choice == 0 {
			return n, -1
		}
		return tt.choice, -1
	}
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.runs[0] <= tt.runs[1] {
		return 1, 0
	}
	return n, 1
}

// Record notes a measured run and decides once both counts have TuneSamples samples.
func (tt *ThreadTuner) Record(slot, n int, d time.Duration) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.decided.Load() {
		return
	}
	if tt.runs[slot] == 0 || d < tt.best[slot] {
		tt.best[slot] = d
	}
	tt.runs[slot]++
	if tt.runs[0] >= TuneSamples && tt.runs[1] >= TuneSamples {
		tt.choice = 1
		if float64(tt.best[1]) < 0.9*float64(tt.best[0]) {
			tt.choice = n
		}
		tt.decided.Store(true)
	}
}

// Chosen is the decided thread count (0: all of the session's, as preset), or -1 while
// timing.
func (tt *ThreadTuner) Chosen() int {
	if !tt.decided.Load() {
		return -1
	}
	return tt.choice
}

// Execute runs the plan on inst for the fed inputs (of the plan's signature), writing the bound
// outputs into (nil: none; see RunInto) in place where a kernel writes them, else copying
// them in. It stops between items once the run's context is done.
func (t *Template) Execute(p *Env, rc *exec.RunCtx, inst *Instance, ins, into []tensor.Tensor) ([]tensor.Tensor, error) {
	if into != nil {
		if err := t.checkBound(p, into); err != nil {
			return nil, err
		}
	}
	// Bound inputs are read, and bound outputs written, in place (planBindings); not while
	// tracing, whose spans view every step's operands in the arena.
	bind := rc.Trace == nil && inst.dev == nil
	// The run's memories: on the stack for the usual few, else the instance's list (runs of an
	// instance do not overlap), cleared after the run so that it keeps no caller's memory.
	memories := t.memories
	if t.SharedArena {
		memories++ // the slab
	}
	var local [8][]byte
	mem := local[:min(memories, len(local))]
	if memories > len(local) {
		if len(inst.mem) != memories {
			inst.mem = make([][]byte, memories)
		}
		mem = inst.mem
		defer clear(mem)
	}
	if t.SharedArena {
		slab, err := p.Arenas.Take(t.ArenaBytes)
		if err != nil {
			return nil, err
		}
		inst.Mem = slab[:t.ArenaBytes]
		mem[t.arenaArg] = inst.Mem
		defer func() {
			inst.Mem = nil
			p.Arenas.Give(slab)
		}()
	}
	if inst.dev != nil {
		if err := t.feedDevice(inst, ins); err != nil {
			return nil, err
		}
	}
	for i, in := range t.Inputs {
		if inst.dev != nil {
			break // fed by feedDevice
		}
		src, _ := ops.RawBytes(ins[in.pos])
		s := t.Slots[in.Ref.Slot]
		if a := t.BindIn[i]; bind && a >= 0 && int64(len(src)) == s.Bytes && ElementAligned(src, in.Ref.dtype) {
			mem[a] = src
			continue
		}
		copy(inst.Mem[s.Offset:s.Offset+s.Bytes], src)
		if a := t.BindIn[i]; t.SharedArena && a >= 0 {
			mem[a] = inst.Mem[s.Offset : s.Offset+s.Bytes] // its slot in the slab
		}
	}
	if t.SharedArena && !bind {
		// Traced: the bound outputs are written in the slab, as any other slot.
		for j, a := range t.BindOut {
			if a >= 0 {
				s := t.Slots[t.Outputs[j].Slot]
				mem[a] = inst.Mem[s.Offset : s.Offset+s.Bytes]
			}
		}
	}
	if bind {
		for j, a := range t.BindOut {
			if a < 0 {
				continue
			}
			n := t.Slots[t.Outputs[j].Slot].Bytes
			if into != nil && into[j].IsValid() {
				// The caller's memory, when a kernel can write it as it is.
				if b, _ := ops.RawBytes(into[j]); int64(len(b)) == n && ElementAligned(b, t.Outputs[j].dtype) {
					mem[a] = b
					continue
				}
			}
			mem[a] = inst.outputs.alloc(&p.Recycled, int(n))
		}
	}
	// The outputs' memory is reserved from the session's memory budget for the run (the
	// arena was when the instance was made).
	if err := rc.Reserve("the outputs", t.OutputBytes); err != nil {
		return nil, err
	}
	threads := rc.Eng.Threads
	for ix := 0; ix < len(t.Items); ix++ {
		it := t.Items[ix]
		// Between items, the run stops once its context is done: a nil test for a context
		// that is never done, else a non-blocking receive.
		if rc.Done != nil && IsDone(rc.Done) {
			return nil, tensor.CanceledError("Run", rc.Ctx, t.ItemNode(it))
		}
		if it.Segment >= 0 {
			if rc.Trace != nil {
				if err := t.runSegmentTraced(rc, inst, ins, it.Segment, threads, mem); err != nil {
					return nil, err
				}
				continue
			}
			tt := t.Tuners[it.Segment]
			n, slot := tt.Threads(threads)
			var start time.Time
			if slot >= 0 {
				start = time.Now()
			}
			var sites []native.RunBinding
			if bind || t.SharedArena {
				sites = inst.segBindings[it.Segment]
			}
			if err := device.RunRecorded(inst.MS, inst.segKeys[it.Segment], n, sites, mem); err != nil {
				return nil, err
			}
			if slot >= 0 {
				tt.Record(slot, threads, time.Since(start))
			}
			if err, step := t.checkViolations(inst, it.Segment); err != nil {
				return nil, t.diagnose(rc, ins, step, err)
			}
			continue
		}
		switch st := &t.Steps[it.Step]; st.Kind {
		case branchStep:
			then, err := t.runBranch(rc, inst, st)
			if err != nil {
				return nil, err
			}
			if !then {
				ix = it.Jump - 1
			}
		case jumpStep:
			ix = it.Jump - 1
		case copyStep:
			if err := t.runCopy(inst, st); err != nil {
				return nil, err
			}
		default:
			if err := t.runHostStep(rc, inst, st); err != nil {
				return nil, err
			}
		}
	}
	if inst.dev != nil {
		if err := t.fetchOutputs(inst); err != nil {
			return nil, err
		}
	}
	outs := make([]tensor.Tensor, len(t.Outputs))
	for i, r := range t.Outputs {
		// The shape is shared by every run's outputs: Tensor hands out copies of its shape and
		// never writes it (capped, so that no append can write behind it).
		shape := r.shape[:len(r.shape):len(r.shape)]
		if into != nil && into[i].IsValid() {
			dst := into[i]
			if a := t.BindOut[i]; bind && a >= 0 && !r.fixed {
				if !SameElements(dst, mem[a]) {
					CopyElements(dst, tensor.ViewBytes(r.dtype, shape, mem[a]))
				}
			} else {
				CopyElements(dst, t.view(inst, r))
			}
			outs[i] = dst
			continue
		}
		if !r.fixed {
			if a := t.BindOut[i]; bind && a >= 0 {
				outs[i] = tensor.ViewBytes(r.dtype, shape, mem[a])
				continue
			}
		}
		o, err := t.outputCopy(p, inst, r, shape)
		if err != nil {
			return nil, err
		}
		outs[i] = o
	}
	return outs, nil
}

// outputCopy is graph output r as a tensor of its own: a slot's bytes copied into output
// memory (recycled, or carved from a block), else a copy of the value (fixed values, empty
// tensors).
func (t *Template) outputCopy(p *Env, inst *Instance, r planRef, shape []int64) (tensor.Tensor, error) {
	if !r.fixed && r.dtype != graph.String {
		if src := t.hostBytes(inst, r); len(src) > 0 {
			b := inst.outputs.alloc(&p.Recycled, len(src))
			copy(b, src)
			return tensor.ViewBytes(r.dtype, shape, b), nil
		}
	}
	return tensor.CopyOut(t.view(inst, r))
}

// hostBytes is r's value as the host sees it: the arena's bytes, or on a device arena its
// part of the run's host copy of its slot (nil until produced there or downloaded).
func (t *Template) hostBytes(inst *Instance, r planRef) []byte {
	if inst.dev != nil {
		return devicePart(inst.dev.host[r.Slot], r)
	}
	off, bytes := t.span(r)
	return inst.Mem[off : off+bytes]
}

// checkBound refuses a bound output whose type or shape is not the plan's, naming it.
func (t *Template) checkBound(p *Env, into []tensor.Tensor) error {
	for i, o := range into {
		if !o.IsValid() {
			continue
		}
		r := t.Outputs[i]
		if o.DType() != r.dtype || !slices.Equal(o.Dims(), r.shape) {
			return tensor.NewError("RunInto", tensor.ErrInvalidArgument, "output %q: the bound tensor is %s, the run produces %s",
				p.OutputNames[i], exec.DescribeTensor(o), exec.DescribeTensor(tensor.Raw(r.dtype, r.shape, nil)))
		}
	}
	return nil
}

// ItemNode is the first node item it runs (for the error of a run stopped before it).
func (t *Template) ItemNode(it planItem) *graph.Node {
	if it.Segment >= 0 {
		if seg := t.Segments[it.Segment]; len(seg) > 0 {
			return t.Steps[seg[0]].Node
		}
		return nil
	}
	return t.Steps[it.Step].Node
}

// IsDone reports whether done is closed, without blocking.
func IsDone(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// ElementAligned reports whether b starts at a multiple of dtype's element size (kernels
// access their buffers by element).
func ElementAligned(b []byte, dtype tensor.DType) bool {
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
// for sizes that share blocks, or allocated alone; one of slackMin bytes or more is allocated
// with room to grow (recycledOutputs.allocSlack).
func (o *outputBlocks) alloc(r *recycledOutputs, n int) []byte {
	if b := r.Take(n); b != nil {
		return b
	}
	if n >= smallOutputMin && n <= smallOutputMax {
		return o.carve(n)
	}
	if n >= slackMin {
		return r.allocSlack(n)
	}
	return make([]byte, n)
}

// Outputs of slackMin bytes or more are allocated an eighth larger than they are (at most
// slackMax more), the excess out of the caller's reach (the slice's capacity ends at its
// length), so that once handed back with Recycle the memory can hold a later output a little
// larger than it: a decode loop's KV outputs, one position longer every step, then reuse the
// memory of the step before instead of allocating (and the garbage collector zeroing)
// megabytes each step.
const (
	slackMin      = 64 << 10
	slackFraction = 8
	slackMax      = 32 << 20 // the most room an output gets
)

// slackBuf is the memory of an output allocated with room to grow: weak, so that the registry
// neither keeps it alive nor mistakes another allocation at its address for it.
type slackBuf struct {
	first weak.Pointer[byte]
	cap   int
}

// minRecycled is the fewest output buffers a session keeps for reuse; a model with more
// outputs keeps two runs' worth of them (see SetOutputs): a decode step's 25 KV outputs
// handed back each run are all reused, none left to the garbage collector. More are left to
// the garbage collector.
const minRecycled = 16

// recycledOutputs is the memory of outputs handed back with Recycle, newest last, and the
// registry of outputs allocated with room to grow (allocSlack), by address.
type recycledOutputs struct {
	mu    sync.Mutex
	bufs  [][]byte
	limit int // the most kept (minRecycled when 0)
	slack map[uintptr]slackBuf
	swept int // the registry's size after its last sweep of dead entries
}

// allocSlack allocates n bytes with an eighth more behind them and registers the memory, so
// that Recycle of the output hands all of it back.
func (r *recycledOutputs) allocSlack(n int) []byte {
	c := (n + min(n/slackFraction, slackMax) + 63) &^ 63
	b := make([]byte, c)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.slack == nil {
		r.slack = map[uintptr]slackBuf{}
	}
	// Entries of memory the garbage collector has freed are swept when the registry has
	// doubled since the last sweep, so it stays proportional to the live outputs.
	if len(r.slack) >= 2*max(r.swept, 64) {
		for k, e := range r.slack {
			if e.first.Value() == nil {
				delete(r.slack, k)
			}
		}
		r.swept = len(r.slack)
	}
	r.slack[uintptr(unsafe.Pointer(&b[0]))] = slackBuf{first: weak.Make(&b[0]), cap: c}
	return b[:n:n]
}

// Full returns the memory of b, an output's bytes handed back: all of its allocation when
// allocSlack made it (the same live allocation, not another one now at its address), else b.
func (r *recycledOutputs) Full(b []byte) []byte {
	if len(b) < slackMin {
		return b
	}
	first := &b[0]
	r.mu.Lock()
	e, ok := r.slack[uintptr(unsafe.Pointer(first))]
	r.mu.Unlock()
	if !ok || e.first.Value() != first || e.cap <= len(b) {
		return b
	}
	return unsafe.Slice(first, e.cap)
}

// SetOutputs sizes the kept buffers for a model of n outputs: two runs' worth, at least
// minRecycled.
func (r *recycledOutputs) SetOutputs(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.limit = max(minRecycled, 2*n)
}

// Put keeps b for an output of exactly its size; memory it already keeps (b or a buffer
// overlapping it, a tensor recycled twice, say) is ignored, so that no two outputs get it.
func (r *recycledOutputs) Put(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, kept := range r.bufs {
		if overlap(kept, b) {
			return
		}
	}
	if limit := max(r.limit, minRecycled); len(r.bufs) >= limit {
		copy(r.bufs, r.bufs[len(r.bufs)-limit+1:]) // the oldest go
		r.bufs = r.bufs[:limit-1]
	}
	r.bufs = append(r.bufs, b)
}

// overlap reports whether the non-empty byte slices a and b share memory.
func overlap(a, b []byte) bool {
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

// Take returns a kept buffer of n bytes (or, for n of slackMin or more, of a little more, cut
// to n), or nil.
func (r *recycledOutputs) Take(n int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.bufs) - 1; i >= 0; i-- {
		if b := r.bufs[i]; len(b) == n {
			r.bufs = slices.Delete(r.bufs, i, i+1)
			return b
		}
	}
	if n < slackMin {
		return nil
	}
	// A larger buffer, at most an eighth larger (the smallest such): an output allocated
	// with room to grow, handed back, for a later one a little larger than the first.
	best := -1
	for i, b := range r.bufs {
		if len(b) > n && len(b) <= (n+min(n/slackFraction, slackMax)+63)&^63 && (best < 0 || len(b) < len(r.bufs[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	b := r.bufs[best]
	r.bufs = slices.Delete(r.bufs, best, best+1)
	return b[:n:n]
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
func (t *Template) runSegmentTraced(rc *exec.RunCtx, inst *Instance, ins []tensor.Tensor, seg, threads int, mem [][]byte) error {
	steps := t.Segments[seg]
	spans := make([]exec.OpSpan, len(steps))
	for i, si := range steps {
		st := &t.Steps[si]
		in := make([]tensor.Tensor, len(st.in))
		for j, r := range st.in {
			in[j] = t.spanView(inst, r)
		}
		spans[i] = rc.OpStart(st.Node, in)
	}
	n, _ := t.Tuners[seg].Threads(threads) // no timing: the spans' work would count too
	var sites []native.RunBinding
	if t.SharedArena {
		sites = inst.segBindings[seg] // every bound slot's memory is in the slab (Execute)
	} else {
		mem = nil
	}
	err := device.RunRecorded(inst.MS, inst.segKeys[seg], n, sites, mem)
	if err == nil {
		var step int
		if err, step = t.checkViolations(inst, seg); err != nil {
			err = t.diagnose(rc, ins, step, err)
		}
	}
	for i, si := range steps {
		st := &t.Steps[si]
		outs := make([]tensor.Tensor, len(st.out))
		for j, r := range st.out {
			if r.Slot >= 0 {
				outs[j] = t.spanView(inst, r)
			}
		}
		spans[i].End(ops.Variant(st.kernel), fmt.Sprintf("%s (plan segment %d of %d kernel steps)", st.Reason, seg, len(steps)), outs, err)
	}
	return err
}

// checkViolations fails the run when a kernel of segment seg stopped a block at a bounds
// check (its output is then incomplete), naming the node and the kernel, and clears the
// words for the next run. step is the failing kernel step's index.
func (t *Template) checkViolations(inst *Instance, seg int) (failure error, step int) {
	first, last := inst.segWords[seg], len(inst.wordOwners)
	if seg+1 < len(inst.segWords) {
		last = inst.segWords[seg+1]
	}
	for w := first; w < last; w++ {
		bits := binary.LittleEndian.Uint32(inst.words[4*w:])
		if bits == 0 {
			continue
		}
		binary.LittleEndian.PutUint32(inst.words[4*w:], 0)
		inst.latched |= bits
		if failure == nil {
			step = inst.wordOwners[w]
			st := &t.Steps[step]
			c := st.kernel.Calls[inst.wordCalls[w]]
			failure = tensor.NewNodeError("Run", tensor.ErrInvalidArgument, st.Node, "kernel %s failed a bounds check: %s",
				ops.Describe(c), ops.ViolationReason(st.Node, c, bits))
		}
	}
	return failure, step
}

// runHostStep calls a host step's Go function on views of the arena and copies its outputs
// into their slots, after checking them against the traced types and shapes.
func (t *Template) runHostStep(rc *exec.RunCtx, inst *Instance, st *planStep) error {
	n := st.Node
	if inst.dev != nil {
		if err := t.fetchForHostStep(inst, st); err != nil {
			return tensor.NodeError(n, err)
		}
	}
	in := make([]tensor.Tensor, len(st.in))
	for j, r := range st.in {
		if n.Inputs[j] != "" {
			in[j] = t.view(inst, r)
		}
	}
	sp := rc.OpStart(n, in)
	rc.KernelVariant, rc.KernelReason = "", ""
	var sc *exec.Scope
	if n.Traits().ControlFlow {
		sc = &exec.Scope{Vals: make(map[string]tensor.Tensor, len(st.implicit))}
		for name, r := range st.implicit {
			sc.Vals[name] = t.view(inst, r)
		}
	}
	// The outputs the trace saw are reserved from the memory budget before the op makes
	// them (a guard below refuses any other shape).
	var outBytes uint64
	for _, r := range st.out {
		if r.Slot >= 0 {
			outBytes += uint64(t.Slots[r.Slot].Bytes)
		}
	}
	if err := rc.Reserve("its outputs", outBytes); err != nil {
		sp.End("host", st.Reason, nil, err)
		return tensor.NodeError(n, err)
	}
	defer rc.Unreserve(outBytes)
	// RunNode recovers a panic of the op as an *Error naming n: the run fails, the instance
	// goes back as after any failed step.
	outs, err := rc.RunNode(st.fn, n, in, sc)
	variant := "host"
	if rc.KernelVariant != "" {
		variant = "host composing " + rc.KernelVariant
	}
	reason := st.Reason
	if st.seamReason != "" {
		reason = st.seamReason
	}
	sp.End(variant, reason, outs, err)
	if err != nil {
		return tensor.NodeError(n, err)
	}
	for j, r := range st.out {
		if r.Slot < 0 {
			continue
		}
		if j >= len(outs) || tensor.Box(outs[j]) != nil || outs[j].DType() != r.dtype || !slices.Equal(outs[j].Dims(), r.shape) {
			return ErrPlanGuard
		}
		src, _ := ops.RawBytes(outs[j])
		if inst.dev != nil {
			if err := t.storeHostOutput(inst, r.Slot, src); err != nil {
				return tensor.NodeError(n, err)
			}
			continue
		}
		s := t.Slots[r.Slot]
		copy(inst.Mem[s.Offset:s.Offset+s.Bytes], src)
	}
	return nil
}

// ---------------------------------------------------------------- the session's plans

// maxPlans bounds the signatures an InferenceSession keeps plans (or the reason there is
// none) for: a new signature beyond it evicts the least recently used entry with no instance
// in use (a run of a signature whose entry cannot be made runs in the interpreter). It is
// well above a sweep of a hundred input shapes. maxPlanInstances bounds the instances
// (arenas) of one signature, which concurrent runs need; a run that finds them all busy runs
// in the interpreter.
const (
	maxPlans         = 256
	maxPlanInstances = 4
)

// Entry is one signature's plan, or why there is none.
type Entry struct {
	Template *Template
	Reason   string
	Idle     []*Instance
	Count    int // instances made or reserved
	All      []*Instance
	out      int // instances handed out or reserved (Take, TakeIdle), not yet given back
	// waits are the kernels the plan's shape-generic stand-ins wait for while they compile in
	// the background (exec.Substitutes), in waitOn: the plan is provisional, and once they are
	// settled with one loaded (stale) the next lookup drops it so the signature is planned
	// again. checked is waitOn's background generation when they were last looked at.
	waits   []string
	waitOn  *exec.KernelCache
	checked uint64
	stale   bool
	// used orders the entries by their last use (least recently used first to go).
	used uint64
}

// Cache holds an InferenceSession's plans by signature. It keeps at most maxPlans entries and,
// when MaxArenaBytes is set, makes a new instance only after evicting idle entries until the
// instances' arenas fit in it; an entry with an instance in use is never evicted.
type Cache struct {
	Mu      sync.Mutex
	Entries map[string]*Entry
	Order   []string // the keys of Entries, in the order they were added
	closed  bool
	// MaxArenaBytes bounds the arenas the cached instances hold together (0: only maxPlans
	// bounds them); set before the first run.
	MaxArenaBytes int64
	// MaxEntries bounds the entries in place of maxPlans when positive (tests); set before
	// the first run.
	MaxEntries int
	tick       uint64
	// Counts: entries evicted for room, plans added provisional, and provisional plans
	// dropped to be planned again with their exact kernels.
	Evicted, Provisional, Replanned int64
}

// acquire returns an idle instance of key's plan (making one when there is room), the entry
// (nil when key has never been traced) and whether the signature is planned.
func (c *Cache) lookup(key string) *Entry {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	return c.Entries[key]
}

// LookupBytes is lookup without converting the key to a string (no allocation per run). A
// provisional plan whose kernels are now loaded is dropped, and nil returned: the caller
// plans the signature again.
func (c *Cache) LookupBytes(key []byte) *Entry {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	e := c.Entries[string(key)]
	if e != nil && c.staleLocked(e) {
		c.removeLocked(string(key), e, "dropped to be planned again with the kernels compiled in the background")
		c.Replanned++
		return nil
	}
	return e
}

// staleLocked reports whether e is provisional and everything it waits for has settled,
// with at least one exact kernel loaded (looked at again only after a background compile
// finished). A plan whose waits all failed is no longer provisional.
func (c *Cache) staleLocked(e *Entry) bool {
	if e.stale || len(e.waits) == 0 {
		return e.stale
	}
	gen := e.waitOn.BackgroundGen()
	if gen == e.checked {
		return false
	}
	e.checked = gen
	settled, loaded := e.waitOn.Settled(e.waits)
	switch {
	case settled && loaded:
		e.stale = true
	case settled:
		e.waits = nil // every compile failed: the stand-ins stay
	}
	return e.stale
}

// touchLocked marks e as just used.
func (c *Cache) touchLocked(e *Entry) {
	c.tick++
	e.used = c.tick
}

// Take takes e's idle instance for a run, or reserves e for a new one (see Give), first
// evicting idle entries until the new arena fits MaxArenaBytes.
func (c *Cache) Take(e *Entry) (*Template, *Instance, bool) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	if e.Template == nil {
		return nil, nil, false // dropped
	}
	c.touchLocked(e)
	if n := len(e.Idle); n > 0 {
		inst := e.Idle[n-1]
		e.Idle = e.Idle[:n-1]
		e.out++
		return e.Template, inst, false
	}
	if c.closed || e.Count >= maxPlanInstances {
		return nil, nil, false
	}
	if c.MaxArenaBytes > 0 {
		need := max(e.Template.ArenaBytes, 4)
		for c.arenaBytesLocked()+need > c.MaxArenaBytes && c.evictLocked(e) {
		}
	}
	e.Count++ // reserved: the caller builds the instance
	e.out++
	return e.Template, nil, true
}

// arenaBytesLocked is what the cached plans' instances hold in arenas.
func (c *Cache) arenaBytesLocked() int64 {
	var n int64
	for _, e := range c.Entries {
		if e.Template != nil {
			n += int64(len(e.All)) * max(e.Template.ArenaBytes, 4)
		}
	}
	return n
}

// evictLocked evicts the least recently used entry other than keep with no instance in use
// or reserved; false when there is none.
func (c *Cache) evictLocked(keep *Entry) bool {
	var victim *Entry
	var key string
	for k, e := range c.Entries {
		if e == keep || e.out > 0 {
			continue
		}
		if victim == nil || e.used < victim.used {
			victim, key = e, k
		}
	}
	if victim == nil {
		return false
	}
	c.removeLocked(key, victim, "evicted from the plan cache")
	c.Evicted++
	return true
}

// removeLocked takes e (key's entry) out of the cache: its idle instances close now (freeing
// their arenas), the others when they are given back (its template is gone).
func (c *Cache) removeLocked(key string, e *Entry, reason string) {
	delete(c.Entries, key)
	if i := slices.Index(c.Order, key); i >= 0 {
		c.Order = slices.Delete(c.Order, i, i+1)
	}
	for _, inst := range e.Idle {
		inst.Close()
	}
	e.Template, e.Reason, e.Idle = nil, reason, nil
}

// Give hands back an instance Take handed out (fresh: one made for the reservation). An
// instance of a plan no longer cached (dropped, evicted, or the cache closed) is closed.
func (c *Cache) Give(e *Entry, inst *Instance, fresh bool) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	if fresh {
		e.All = append(e.All, inst)
	}
	e.out--
	if c.closed || e.Template == nil {
		inst.Close()
		return
	}
	e.Idle = append(e.Idle, inst)
}

// TakeIdle is lookupBytes then take for a signature whose plan has an idle instance; it
// returns nil when there is none (no plan yet, a plan without a template, a provisional plan
// due to be planned again, or every instance busy), without reserving anything.
func (c *Cache) TakeIdle(key []byte) (*Entry, *Template, *Instance) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	return c.takeIdleLocked(c.Entries[string(key)])
}

// TakeIdleOf is takeIdle for an entry the caller holds.
func (c *Cache) TakeIdleOf(e *Entry) (*Entry, *Template, *Instance) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	return c.takeIdleLocked(e)
}

func (c *Cache) takeIdleLocked(e *Entry) (*Entry, *Template, *Instance) {
	if e == nil || e.Template == nil || len(e.Idle) == 0 || len(e.waits) > 0 && c.staleLocked(e) {
		return nil, nil, nil
	}
	c.touchLocked(e)
	inst := e.Idle[len(e.Idle)-1]
	e.Idle = e.Idle[:len(e.Idle)-1]
	e.out++
	return e, e.Template, inst
}

// FastSignature is the input types and shapes of the plan the fast path ran last, when they
// alone decide its key (no input's value is specialized): a run feeding the same types and
// shapes skips building the key, looking it up and checking the inputs against the model
// again (those types and shapes passed the check before).
type FastSignature struct {
	dtypes []tensor.DType
	shapes [][]int64
	Entry  *Entry
}

// NewFastSignature is the signature of ins, which ran through e's plan.
func NewFastSignature(ins []tensor.Tensor, e *Entry) *FastSignature {
	f := &FastSignature{Entry: e, dtypes: make([]tensor.DType, len(ins)), shapes: make([][]int64, len(ins))}
	for i, t := range ins {
		f.dtypes[i], f.shapes[i] = t.DType(), slices.Clone(t.Dims())
	}
	return f
}

// Matches reports whether ins have f's element types and shapes.
func (f *FastSignature) Matches(ins []tensor.Tensor) bool {
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

// Unreserve undoes take's reservation when building an instance failed.
func (c *Cache) Unreserve(e *Entry) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	e.Count--
	e.out--
}

// Drop stops planning e's signature (a guard failed): its instances close as they come back.
func (c *Cache) Drop(e *Entry, reason string) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	e.Template, e.Reason = nil, reason
	for _, inst := range e.Idle {
		inst.Close()
	}
	e.Idle = nil
}

// Remove takes key's entry e out of the cache, if it is still there: its idle instances close
// now, the others when they are given back.
func (c *Cache) Remove(key string, e *Entry, reason string) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	if c.Entries[key] == e {
		c.removeLocked(key, e, reason)
	}
}

// Add records key's plan (or the reason it has none), evicting the least recently used idle
// entry when the cache holds maxPlans; false when the cache is closed, another run added key
// first, or no entry could be evicted. A plan holding shape-generic stand-ins for kernels
// compiling in the background (exec.Substitutes) is recorded as provisional.
func (c *Cache) Add(key string, e *Entry) bool {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	if c.closed || c.Entries[key] != nil {
		return false
	}
	if limit := cmp.Or(c.MaxEntries, maxPlans); len(c.Entries) >= limit && !c.evictLocked(nil) {
		return false
	}
	if c.Entries == nil {
		c.Entries = map[string]*Entry{}
	}
	if t := e.Template; t != nil {
		for i := range t.Steps {
			if kc, keys := exec.Substitutes(t.Steps[i].kernel); kc != nil {
				e.waitOn = kc
				for _, k := range keys {
					if !slices.Contains(e.waits, k) {
						e.waits = append(e.waits, k)
					}
				}
			}
		}
		if len(e.waits) > 0 {
			e.checked = e.waitOn.BackgroundGen() - 1 // looked at on the next lookup
			c.Provisional++
		}
	}
	c.touchLocked(e)
	c.Entries[key] = e
	c.Order = append(c.Order, key)
	return true
}

// Close releases every idle instance; instances in use close when given back. Idempotent.
func (c *Cache) Close() []error {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	c.closed = true
	var errs []error
	for _, e := range c.Entries {
		for _, inst := range e.Idle {
			errs = append(errs, inst.Close())
		}
		e.Idle = nil
	}
	return errs
}

// SameElements reports whether t's elements are the bytes b (the same memory).
func SameElements(t tensor.Tensor, b []byte) bool {
	tb, ok := ops.RawBytes(t)
	return ok && len(tb) == len(b) && (len(b) == 0 || unsafe.SliceData(tb) == unsafe.SliceData(b))
}

// CopyElements copies src's elements into dst, a tensor of the same type and element count.
func CopyElements(dst, src tensor.Tensor) {
	if d, ok := dst.Data().([]string); ok {
		copy(d, src.Data().([]string))
		return
	}
	db, _ := ops.RawBytes(dst)
	sb, _ := ops.RawBytes(src)
	copy(db, sb)
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

// viewable reports whether a kernel plan's outputs may be views of its input 0's value
// (KernelPlan.Views) rather than a step: with the input in the arena, every output of its type
// and at least 4 bytes (a region's least size).
func (pe *Env) viewable(p *ops.KernelPlan, in []planRef, outs []tensor.Tensor) bool {
	if len(p.Views) == 0 || len(p.Views) != len(p.Outputs) || len(in) == 0 || in[0].fixed || in[0].Slot < 0 {
		return false
	}
	for j, o := range p.Outputs {
		if o.Dtype != in[0].dtype || ops.Bytes(o) < 4 || j >= len(outs) || tensor.Box(outs[j]) != nil {
			return false
		}
		if end := ops.Bytes(ops.ValueType{Dtype: o.Dtype, Shape: []int64{p.Views[j] + int64(ops.Numel(o.Shape))}}); p.Views[j] < 0 || end > in[0].bytes() {
			return false // not within the input (a planner's mistake)
		}
	}
	return true
}
