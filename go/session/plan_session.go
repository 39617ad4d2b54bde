package session

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/plan"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// The compiled run plans' side of InferenceSession: looking up, building and running the plan
// of a signature (the plans themselves are in plan.go), the fast path, and the audits.

// Recycle hands the memory of output tensors of earlier runs back to the session, which
// writes later runs' outputs of the same byte size into it instead of allocating: the
// counterpart of ONNX Runtime's OrtReleaseValue for a caller that runs a model at a high rate
// and is done with each run's outputs before the next (loom bench does, after its clock
// stops, as ONNX Runtime's benchmark releases its outputs). Outputs of 64 KiB or more are
// allocated with room to grow, so their memory also takes later outputs up to an eighth
// larger: a decode loop that recycles each step's past KV inputs (the outputs of the step
// before) gets the next step's KV outputs, one position longer, written there. The caller
// must not use the tensors, or any slice taken from them, afterwards: a later run overwrites
// them. Recycling is optional (outputs not handed back are garbage collected as usual);
// tensors without numeric data (strings, sequences, empty ones) are ignored, and the session
// keeps a few buffers at most. Recycling a tensor the session already holds (the same output
// twice, or one sharing memory with an output handed back before) is a no-op: no two later
// outputs share memory.
func (s *InferenceSession) Recycle(tensors ...tensor.Tensor) {
	for _, t := range tensors {
		if tensor.Box(t) != nil || t.DType() == graph.String {
			continue
		}
		b, ok := ops.RawBytes(t)
		if !ok || len(b) == 0 || !plan.ElementAligned(b, graph.Double) {
			continue
		}
		s.pe.Recycled.Put(s.pe.Recycled.Full(b[:len(b):len(b)]))
	}
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
	key, plannable := s.pe.AppendPlanKey(buf[:0], ins)
	if !plannable {
		return nil, false, nil
	}
	e := s.plans.LookupBytes(key)
	if e == nil {
		return s.runFirstSight(rc, string(key), fed, ins, into)
	}
	// The template is read under the cache's lock: a failed guard may drop it meanwhile.
	t, inst, build := s.plans.Take(e)
	if inst == nil && !build {
		return nil, false, nil
	}
	fresh := false
	if build {
		if inst, err = s.pe.NewInstance(t, rc.Phase); err != nil {
			s.plans.Unreserve(e)
			return nil, false, err
		}
		fresh = true
	}
	rc.RunStart(exec.ExecutorPlan, fed)
	outs, err = execute(t, s.pe, rc, inst, ins, into)
	rc.RunEnd(outs, err)
	return s.endPlanRun(e, inst, fresh, outs, err)
}

// runFirstSight runs the first run of signature key, which has no plan yet, as plan.Tiering
// decides (warmup always plans): planned from shapes (kept, or dropped after the run when
// planned once), interpreted untraced, or interpreted and traced to build the plan. The runs
// that build a plan and the untraced interpreted ones are timed for the tiering.
func (s *InferenceSession) runFirstSight(rc *exec.RunCtx, key string, fed map[string]tensor.Tensor, ins, into []tensor.Tensor) ([]tensor.Tensor, bool, error) {
	mode := plan.TierCache
	if rc.Phase != exec.PhaseWarmup {
		mode = s.tiering.Decide(key)
	}
	start := time.Now()
	if s.shapePlans && mode != plan.TierSecondSight {
		if outs, ok, err := s.runShapePlan(rc, key, fed, ins, into, mode == plan.TierOnce); ok {
			if err == nil {
				s.tiering.RanPlanned(time.Since(start))
			}
			return outs, true, err
		}
	}
	if mode != plan.TierCache {
		// Interpreted (not traced): the signature's next run builds its plan.
		outs, err := s.eng.Interpret(rc, fed)
		if err == nil {
			s.tiering.RanInterpreted(time.Since(start))
		}
		return outs, true, err
	}
	// Interpreted and traced to build the plan, which runs from the next run on.
	outs, ok, err := s.tracePlan(rc, key, fed)
	if ok && err == nil {
		s.tiering.RanPlanned(time.Since(start))
	}
	return outs, ok, err
}

// endPlanRun gives inst back after a run of e's plan; a failed host-step guard unplans the
// signature, and ok false sends the run to the interpreter.
func (s *InferenceSession) endPlanRun(e *plan.Entry, inst *plan.Instance, fresh bool, outs []tensor.Tensor, err error) ([]tensor.Tensor, bool, error) {
	s.plans.Give(e, inst, fresh)
	if errors.Is(err, plan.ErrPlanGuard) {
		s.plans.Drop(e, "a host step's output type or shape changed between runs (data-dependent shape)")
		return nil, false, nil
	}
	return outs, err == nil, err
}

// maxFastInputs is how many inputs runPlannedFast keeps on the stack; a model with more (a
// decode step's KV cache) takes one slice from the heap a run.
const maxFastInputs = 8

// runPlannedFast is Run's path for the steady state of a served model: every graph input fed
// once, in the graph's order, as a tensor of the declared type, with an idle instance of the
// signature's plan ready and tracing off. It skips what the general path builds per run (the
// input map, the value conversions, the run context's bookkeeping). ok is false, with
// nothing done, whenever any of that does not hold: the general path then runs (and reports
// any error).
func (s *InferenceSession) runPlannedFast(ctx context.Context, inputs []tensor.NamedTensor, into []tensor.Tensor) (outs []tensor.Tensor, ok bool, err error) {
	if !s.planning || !s.tensorIO || len(inputs) != len(s.inputs) || ctx == nil || exec.Traced(ctx) {
		return nil, false, nil
	}
	done := ctx.Done()
	if done != nil && plan.IsDone(done) {
		return nil, true, tensor.CanceledError("Run", ctx, nil)
	}
	var stack [maxFastInputs]tensor.Tensor
	var ins []tensor.Tensor
	if len(inputs) > len(stack) {
		ins = make([]tensor.Tensor, len(inputs))
	} else {
		ins = stack[:len(inputs)]
	}
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
	var e *plan.Entry
	var t *plan.Template
	var inst *plan.Instance
	if f := s.fastSig.Load(); f != nil && f.Matches(ins) {
		e, t, inst = s.plans.TakeIdleOf(f.Entry)
	} else {
		for i := range ins {
			if checkFed(s.inputs[i], ins[i]) != nil {
				return nil, false, nil
			}
		}
		var buf [256]byte
		key, plannable := s.pe.AppendPlanKey(buf[:0], ins)
		if !plannable {
			return nil, false, nil
		}
		e, t, inst = s.plans.TakeIdle(key)
		if inst != nil && len(t.Specialized) == 0 {
			s.fastSig.Store(plan.NewFastSignature(ins, e))
		}
	}
	if inst == nil {
		return nil, false, nil
	}
	// The instance's own run context: one on the heap per run (the host steps' functions
	// make it escape) cost a tiny model's run a few percent.
	rc := &inst.RC
	*rc = exec.RunCtx{Eng: s.eng, Opset: s.eng.Opset, Phase: exec.PhaseRun, Ctx: ctx, Done: done}
	outs, err = execute(t, s.pe, rc, inst, ins, into)
	rc.Close()
	*rc = exec.RunCtx{}
	outs, ok, err = s.endPlanRun(e, inst, false, outs, err)
	return outs, ok || err != nil, err
}

// runShapePlan builds key's plan from a trace made without running the nodes that depend on
// the inputs' data (plan.ShapeTrace) and runs fed through it: the signature's first run runs
// planned. ok is false, with nothing run, when that trace, the plan or its first instance
// cannot be made (a data-dependent shape, control flow, a value over the memory budget): the
// interpreter then traces the run as before, and says precisely what is wrong, if anything.
func (s *InferenceSession) runShapePlan(rc *exec.RunCtx, key string, fed map[string]tensor.Tensor, ins, into []tensor.Tensor, once bool) ([]tensor.Tensor, bool, error) {
	trace, why := s.pe.ShapeTrace(rc, fed)
	if why != "" {
		return nil, false, nil
	}
	t, _ := s.pe.BuildTemplate(key, fed, trace)
	if t == nil {
		return nil, false, nil
	}
	t.FromShapes = true
	inst, err := s.pe.NewInstance(t, rc.Phase)
	if err != nil {
		return nil, false, nil
	}
	s.tiering.Built(t)
	e := &plan.Entry{Template: t}
	if !s.plans.Add(key, e) {
		inst.Close()
		return nil, false, nil
	}
	fresh := true
	if _, other, build := s.plans.Take(e); other != nil || !build {
		// A concurrent run of the signature gave an instance back first (use it), or the
		// entry is full or dropped already.
		inst.Close()
		if other == nil {
			return nil, false, nil
		}
		inst, fresh = other, false
	}
	rc.RunStart(exec.ExecutorPlan, fed)
	outs, err := execute(t, s.pe, rc, inst, ins, into)
	rc.RunEnd(outs, err)
	outs, ok, err := s.endPlanRun(e, inst, fresh, outs, err)
	if once {
		// No run will use the plan again (plan.Tiering): its arena goes now.
		s.plans.Remove(key, e, "planned once: the session's signatures do not recur")
	}
	return outs, ok, err
}

// tracePlan is the interpreted run of fed that records each node, from which it builds
// key's plan (or notes why there is none). The run's outputs are the interpreter's. The trace
// keeps the values only of nodes whose outputs do not depend on the inputs' data (the plan
// folds those); of the others, types and shapes, so that a large model's activations are not
// all held at once.
func (s *InferenceSession) tracePlan(rc *exec.RunCtx, key string, fed map[string]tensor.Tensor) ([]tensor.Tensor, bool, error) {
	var trace []plan.TracedNode
	control := s.pe.ControlInputs()
	dyn := map[string]bool{}
	for _, m := range s.inputs {
		if !control[m.Name] || !plan.Specializes(fed[m.Name]) {
			dyn[m.Name] = true
		}
	}
	rc.Observe = func(g *graph.Graph, n *graph.Node, in, out []tensor.Tensor) {
		d := plan.DependsOnData(n, func(name string) bool { return dyn[name] })
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
		trace = append(trace, plan.TracedNode{Graph: g, Node: n, Out: kept})
	}
	// An If whose condition depends on the data runs its other branch too, so that the plan
	// holds both and picks one per run.
	rc.TraceUntaken = func(n *graph.Node) bool { return len(n.Inputs) > 0 && dyn[n.Inputs[0]] }
	defer func() { rc.Observe, rc.TraceUntaken = nil, nil }()
	outs, err := s.eng.Interpret(rc, fed)
	if err != nil {
		return nil, true, err
	}
	t, reason := s.pe.BuildTemplate(key, fed, trace)
	if t != nil {
		t.Runs.Store(1) // the traced run was the signature's first
		s.tiering.Built(t)
	}
	s.plans.Add(key, &plan.Entry{Template: t, Reason: reason})
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
	// FromShapes says the plan was built from shape inference over the signature before its
	// first run, which ran planned (OptionShapePlans); false: from the interpreter's traced
	// first run.
	FromShapes bool
	// Folded counts nodes computed once when the plan was built (their values do not depend
	// on the inputs' data); Aliases the nodes that only view their input in another shape;
	// Inlined the If nodes replaced by the branch their fixed condition takes; Branched the If
	// nodes whose condition is computed at run time and both of whose branches the plan holds
	// as steps, running one per run (their branch tests are listed with the host steps).
	Folded, Aliases, Inlined, Branched int
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
	// DeviceArena says the arena is device memory (CUDA and its stand-in): values stay on the
	// device between kernel steps and cross only at the inputs, the outputs and the host
	// steps' seams (PlanHostStep.Downloads and Uploads).
	DeviceArena bool
	// SharedArena: the runs use ArenaBytes of a slab the session's runs share
	// (OptionSharedArenas), not an arena of the plan's own.
	SharedArena bool
	// Nodes lists every node the plan took, in order (an inlined If after its branch's
	// nodes, a branched If before both of its branches'): where its placement, decided once when the session was built, puts it, and
	// what the plan made of it.
	Nodes []PlanNode
}

// PlanHostStep is a node of a plan that runs on the host, and why. On a device arena
// (PlanReport.DeviceArena) Downloads are the values it reads that kernels wrote, copied from
// the device before it runs, and Uploads the values it writes that kernels read, copied to the
// device after it: the seams the host step costs.
type PlanHostStep struct {
	Node, OpType, Reason string
	Downloads, Uploads   []string
}

// ExecutionPlans audits the compiled run plans built so far (one per input signature seen),
// in the order they were built.
func (s *InferenceSession) ExecutionPlans() []PlanReport {
	s.plans.Mu.Lock()
	defer s.plans.Mu.Unlock()
	out := make([]PlanReport, 0, len(s.plans.Order))
	for _, key := range s.plans.Order {
		e := s.plans.Entries[key]
		r := PlanReport{Signature: s.describeKey(key), Planned: e.Template != nil, Reason: e.Reason}
		if t := e.Template; t != nil {
			r.Folded, r.Aliases, r.Inlined, r.Branched, r.ArenaBytes = t.Folded, t.Aliases, t.Inlined, t.Branched, t.ArenaBytes
			r.FromShapes = t.FromShapes
			r.Specialized = append([]string{}, t.Specialized...)
			r.Nodes = append([]PlanNode{}, t.Nodes...)
			r.DeviceArena, r.SharedArena = t.DeviceArena, t.SharedArena
			for _, st := range t.Steps {
				if st.Kind == plan.KernelStep {
					r.KernelSteps++
				}
			}
			for _, it := range t.Items {
				if it.Segment >= 0 {
					var names []string
					for _, i := range t.Segments[it.Segment] {
						names = append(names, t.Steps[i].Node.Name)
					}
					r.Segments = append(r.Segments, names)
					threads := 1
					if s.eng.Threads != 1 {
						threads = t.Tuners[it.Segment].Chosen()
					}
					r.SegmentThreads = append(r.SegmentThreads, threads)
				}
			}
			for _, h := range t.HostSteps() {
				r.HostSteps = append(r.HostSteps, PlanHostStep{Node: h.Node.Name, OpType: h.Node.OpType, Reason: h.Reason,
					Downloads: h.Seam.Downloads, Uploads: h.Seam.Uploads})
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

// execute runs t's instance inst; a panic outside the plan's nodes (theirs are RunNode's) is
// an *Error of kind ErrInternal, so that the instance goes back to the cache as after any
// failed run.
func execute(t *plan.Template, pe *plan.Env, rc *exec.RunCtx, inst *plan.Instance, ins, into []tensor.Tensor) (outs []tensor.Tensor, err error) {
	defer recoverRun("Run", &err)
	if runHook != nil {
		runHook("execute")
	}
	t.Runs.Add(1)
	return t.Execute(pe, rc, inst, ins, into)
}
