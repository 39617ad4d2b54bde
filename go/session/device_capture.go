package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/plan"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Captured device graphs. TryCaptureWithDeviceBindings audits a step's compiled run plan (the
// plan of its shape signature: recorded segments of kernel steps, host steps between them),
// and, when the audit passes, pins one instance of the plan (its arena and its recorded
// segments) and runs the step on it: the step is captured. ReplayDeviceGraph runs the pinned
// instance again against the same bindings, with no lookup, trace or recording: the recorded
// segments replay, rebound to the bindings' memory, and the host steps between them (the
// declines of CaptureSegmentation) run eagerly as the plan's guarded seams.

// SeamKind says why part of a step is not in a captured segment.
type SeamKind string

// The seam kinds of CaptureDecline.
const (
	// SeamHostOp: the node runs as its Go host function between captured segments (a
	// host-side op, a kernel the planner does not cover, a placement off the provider); the
	// step is still captured, in segments.
	SeamHostOp SeamKind = "host-op"
	// SeamGrowingShape: the node's output grows every step (a KV length): a plan is per shape
	// signature, so no graph of it survives the next step. Nothing is captured.
	SeamGrowingShape SeamKind = "growing-shape"
	// SeamNotWarmed: the step's kernels have not run at this shape signature (run it eagerly,
	// RunWithDeviceBindings, until DecodeMemoCounts counts its plan, then capture). Nothing is
	// captured.
	SeamNotWarmed SeamKind = "not-warmed"
	// SeamUnresolvedShape: the signature has no plan (a data-dependent shape, a sequence):
	// Reason says why. Nothing is captured.
	SeamUnresolvedShape SeamKind = "unresolved-shape"
	// SeamEager: the session does not plan (OptionRunPlan "0"), or every instance of the plan
	// is busy. Nothing is captured.
	SeamEager SeamKind = "eager"
)

// CaptureDecline is a node, or with an empty Node the whole step, that a capture leaves out,
// and why. Reason is the one the node's trace span carries.
type CaptureDecline struct {
	Node, OpType, Domain, Reason string
	SeamKind                     SeamKind
}

// CaptureResult is what TryCaptureWithDeviceBindings did: Captured, with the step's Outputs
// (as RunWithDeviceBindings returns them), or not, with Reason. Declines lists what the
// capture left out: the host-op seams of a captured step, or why a step was not capturable.
type CaptureResult struct {
	Captured bool
	Outputs  []tensor.Tensor
	Reason   string
	Declines []CaptureDecline
}

// deviceGraph is a captured step: the pinned plan instance and what replays must match.
type deviceGraph struct {
	entry    *plan.Entry
	t        *plan.Template
	inst     *plan.Instance
	key      string
	fed      []tensor.NamedTensor // copies of the inputs fed rather than bound
	bindings []*DeviceBinding
	gens     []uint64
	bases    [][2]uintptr
	logical  [][]int64
	segments int
	declines []CaptureDecline
	retired  bool
	// What a replay reuses: the inputs by index (fed copies; bindings' views are made per
	// replay), the bound outputs' bindings and shapes by index, the outputs' views, the view
	// nodes of the plan, and a run context.
	ins      []tensor.Tensor
	byOutput []*DeviceBinding
	outShape [][]int64
	into     []tensor.Tensor
	views    uint64
	rc       exec.RunCtx
}

// ErrNotCaptured is the kind of the *Error ReplayDeviceGraph returns when no device graph is
// captured (or the captured one was retired).
var ErrNotCaptured = tensor.ErrNotRecorded

// TryCaptureWithDeviceBindings captures a step with bindings (see RunWithDeviceBindings) as a
// device graph for ReplayDeviceGraph. It first audits the step's compiled run plan: the
// signature must have a plan (SeamUnresolvedShape), the plan must have run (SeamNotWarmed),
// no binding's logical shape may have changed since the previous step with bindings
// (SeamGrowingShape, naming the nodes whose outputs grew); when the audit rejects, the result
// is not Captured, nothing ran and nothing was captured: run the step eagerly. Otherwise the
// step runs on a pinned instance of the plan and its result is returned, Captured, with the
// plan's host steps as SeamHostOp declines (CapturedGraphSegmentCount segments). Any error
// while capturing leaves the session eager, with nothing captured; bound outputs are then
// unchanged. A captured graph must be reset (ResetDeviceGraph) before another capture.
func (s *InferenceSession) TryCaptureWithDeviceBindings(ctx context.Context, inputs []tensor.NamedTensor, bindings []*DeviceBinding) (_ CaptureResult, err error) {
	const op = "TryCaptureWithDeviceBindings"
	defer recoverRun(op, &err)
	if ctx == nil {
		return CaptureResult{}, tensor.NewError(op, tensor.ErrInvalidArgument, "nil context")
	}
	st := s.bindings()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.graph != nil {
		return CaptureResult{}, tensor.NewError(op, tensor.ErrInvalidArgument, "a device graph is already captured (ResetDeviceGraph first)")
	}
	step, err := s.prepareStep(op, inputs, bindings)
	if err != nil {
		return CaptureResult{}, err
	}
	res, e, t := s.auditCapture(st, step, bindings)
	st.declines = res.Declines
	if res.Reason != "" {
		return res, nil
	}
	// Capture: pin an instance and run the step on it. Any failure gives it back (the
	// session stays eager).
	t, inst, err := s.pe.Pin(&s.plans, e, exec.PhaseRun)
	if err != nil {
		return CaptureResult{}, err
	}
	if inst == nil {
		res.Reason = "every instance of the plan is busy with other runs"
		res.Declines = []CaptureDecline{{Reason: res.Reason, SeamKind: SeamEager}}
		st.declines = res.Declines
		return res, nil
	}
	g := &deviceGraph{entry: e, t: t, inst: inst, key: step.key, segments: len(t.Segments), declines: res.Declines}
	outs, err := s.runPinned(ctx, op, st, g, step)
	if err != nil {
		s.plans.Give(e, inst, false)
		if errors.Is(err, plan.ErrPlanGuard) {
			s.plans.Drop(e, "a host step's output type or shape changed between runs (data-dependent shape)")
			res.Reason = "a host step's output type or shape changed between runs (data-dependent shape); nothing was captured"
			res.Declines = []CaptureDecline{{Reason: res.Reason, SeamKind: SeamUnresolvedShape}}
			st.declines = res.Declines
			return res, nil
		}
		return CaptureResult{}, err
	}
	for _, in := range step.feeds {
		if b := s.boundInput(bindings, in.Name); b != nil {
			continue
		}
		c, err := tensor.CopyOut(in.Tensor)
		if err != nil {
			s.plans.Give(e, inst, false)
			return CaptureResult{}, err
		}
		g.fed = append(g.fed, tensor.NamedTensor{Name: in.Name, Tensor: c})
	}
	for _, b := range bindings {
		g.bindings = append(g.bindings, b)
		g.gens = append(g.gens, b.gen)
		g.bases = append(g.bases, b.bases())
		g.logical = append(g.logical, slices.Clone(b.logical))
	}
	g.ins = make([]tensor.Tensor, len(s.inputs))
	for _, f := range g.fed {
		g.ins[s.inputIndex(f.Name)] = f.Tensor
	}
	g.byOutput = step.byOutput
	g.outShape = make([][]int64, len(s.outputs))
	g.into = make([]tensor.Tensor, len(s.outputs))
	for j, b := range step.byOutput {
		if b != nil {
			g.outShape[j] = slices.Clone(b.logical) // the capture's output landed there
		}
	}
	g.views = t.Views()
	st.graph = g
	st.captures++
	res.Captured, res.Outputs = true, outs
	return res, nil
}

// boundInput is the binding of input name among bindings, or nil.
func (s *InferenceSession) boundInput(bindings []*DeviceBinding, name string) *DeviceBinding {
	for _, b := range bindings {
		if b.input == name {
			return b
		}
	}
	return nil
}

// bases are the addresses of the binding's buffers.
func (b *DeviceBinding) bases() [2]uintptr {
	var p [2]uintptr
	for i, buf := range b.bufs {
		if buf != nil {
			p[i] = uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
		}
	}
	return p
}

// auditCapture decides whether step can be captured: Reason is set when not. It returns the
// signature's plan entry and template when it can.
func (s *InferenceSession) auditCapture(st *bindingState, step *boundStep, bindings []*DeviceBinding) (CaptureResult, *plan.Entry, *plan.Template) {
	var res CaptureResult
	reject := func(kind SeamKind, format string, args ...any) (CaptureResult, *plan.Entry, *plan.Template) {
		res.Reason = fmt.Sprintf(format, args...)
		if len(res.Declines) == 0 {
			res.Declines = []CaptureDecline{{Reason: res.Reason, SeamKind: kind}}
		}
		return res, nil, nil
	}
	switch {
	case !s.planning:
		return reject(SeamEager, "the session runs no compiled run plans (%s is \"0\", or the provider does not plan)", OptionRunPlan)
	case !step.plannable:
		return reject(SeamUnresolvedShape, "the step's inputs have no shape signature (an input is missing, a sequence or an optional)")
	}
	// A binding whose logical shape changed since the last step grows (or shrinks) every step:
	// the nodes whose outputs changed with it are named.
	var grown, grownInputs []string
	for _, b := range bindings {
		if b.inPos >= 0 && b.lastLogical != nil && !slices.Equal(b.lastLogical, b.logical) {
			grownInputs = append(grownInputs, b.input)
			grown = append(grown, fmt.Sprintf("input %q %v -> %v", b.input, b.lastLogical, b.logical))
		}
	}
	e := s.plans.Lookup(step.key)
	if len(grown) > 0 {
		// The nodes are those whose outputs differ between the plans of the last two steps
		// (this step's has not been built: it would differ the same way).
		var prev, cur *plan.Template
		if st.prevEntry != nil && st.lastEntry != nil {
			prev, _ = s.plans.Warmed(st.prevEntry)
			cur, _ = s.plans.Warmed(st.lastEntry)
		}
		res.Declines = s.growingDeclines(prev, cur, grown, grownInputs)
		return reject(SeamGrowingShape, "a binding's logical shape changed since the last step (%s): a graph captured now would not match the next step", joinList(grown))
	}
	if e == nil {
		return reject(SeamNotWarmed, "the step's kernels have not run at this shape signature: run it with RunWithDeviceBindings first")
	}
	t, warmed := s.plans.Warmed(e)
	if t == nil {
		s.plans.Mu.Lock()
		why := e.Reason
		s.plans.Mu.Unlock()
		return reject(SeamUnresolvedShape, "the shape signature has no compiled run plan: %s", why)
	}
	if !warmed {
		return reject(SeamNotWarmed, "the plan of this shape signature has not run yet (its kernels are not loaded nor its segments recorded): run the step with RunWithDeviceBindings once more")
	}
	// A plan built with shape-generic stand-ins for kernels compiling in the background
	// (loom.jit=background) is replaced by the exact kernels' plan once they are loaded; a
	// graph captured from it would keep the stand-ins until ResetDeviceGraph (slower, and not
	// the eager runs' results bit for bit).
	if nodes, loaded := s.plans.StandIns(e); len(nodes) > 0 {
		names := make([]string, len(nodes))
		for i, n := range nodes {
			names[i] = strconv.Quote(n.Name)
			reason := "runs a shape-generic stand-in while its exact kernel compiles in the background (session option " + OptionJIT + "=background)"
			if loaded {
				reason = "runs a shape-generic stand-in; its exact kernel, compiled in the background, is loaded and the step's next run plans with it"
			}
			res.Declines = append(res.Declines, CaptureDecline{Node: n.Name, OpType: n.OpType, Domain: n.Domain, Reason: reason, SeamKind: SeamNotWarmed})
		}
		if loaded {
			return reject(SeamNotWarmed, "the step's plan runs shape-generic stand-ins for %s, whose exact kernels, compiled in the background, are now loaded: run the step once more (its next run plans it with them), then capture; a graph captured now would keep the stand-ins until ResetDeviceGraph", strings.Join(names, ", "))
		}
		return reject(SeamNotWarmed, "the step's plan runs shape-generic stand-ins for %s while the exact kernels compile in the background (session option %s=background): a graph captured now would keep the stand-ins until ResetDeviceGraph; run the step until they are loaded (CacheStats.Background), or compile them before the first run (Warmup with the step's shapes, or %s=sync)", strings.Join(names, ", "), OptionJIT, OptionJIT)
	}
	for _, h := range t.HostSteps() {
		reason := h.Reason
		if seam := h.Seam.String(); seam != "" {
			reason += " (" + seam + ")"
		}
		res.Declines = append(res.Declines, CaptureDecline{Node: h.Node.Name, OpType: h.Node.OpType, Domain: h.Node.Domain, Reason: reason, SeamKind: SeamHostOp})
	}
	return res, e, t
}

// growingDeclines names the nodes a growing binding reaches, from the plans of the last two
// steps (when both were built), else the step as a whole.
func (s *InferenceSession) growingDeclines(prev, cur *plan.Template, grown []string, inputs []string) []CaptureDecline {
	var out []CaptureDecline
	if prev != nil && cur != nil {
		out = s.growingNodes(prev, cur, inputs)
	}
	if len(out) == 0 {
		return []CaptureDecline{{Reason: "a binding grows every step (" + joinList(grown) + "); the nodes it reaches are named once two steps' plans are built", SeamKind: SeamGrowingShape}}
	}
	return out
}

// growingNodes are the nodes whose output shapes differ between two plans of a step, and the
// nodes that read a value that grows (from the grown inputs on).
func (s *InferenceSession) growingNodes(prev, cur *plan.Template, inputs []string) []CaptureDecline {
	before, after := prev.StepShapes(), cur.StepShapes()
	grownVals := map[string]bool{}
	for _, name := range inputs {
		grownVals[name] = true
	}
	var out []CaptureDecline
	for _, n := range s.eng.Model.Graph.Nodes {
		a, stepped := after[n.Name]
		b := before[n.Name]
		why := ""
		for j := range a {
			if j < len(b) && !slices.Equal(a[j], b[j]) {
				why = fmt.Sprintf("output %q grows every step: %v -> %v", n.Outputs[j], b[j], a[j])
				grownVals[n.Outputs[j]] = true
			}
		}
		if why == "" {
			for _, in := range n.Inputs {
				if grownVals[in] {
					why = fmt.Sprintf("reads %q, which grows every step", in)
					if !stepped { // a view or a folded node: its outputs follow its input
						for _, o := range n.Outputs {
							grownVals[o] = true
						}
					}
					break
				}
			}
		}
		if why != "" {
			out = append(out, CaptureDecline{Node: n.Name, OpType: n.OpType, Domain: n.Domain, Reason: why, SeamKind: SeamGrowingShape})
		}
	}
	return out
}

func joinList(items []string) string {
	out := ""
	for i, s := range items {
		if i > 0 {
			out += "; "
		}
		out += s
	}
	return out
}

// runPinned runs step on the captured graph's pinned instance and lands the bound outputs.
// The bindings' lock is held.
func (s *InferenceSession) runPinned(ctx context.Context, op string, st *bindingState, g *deviceGraph, step *boundStep) ([]tensor.Tensor, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, tensor.NewError(op, tensor.ErrClosed, "the session is closed")
	}
	into := s.bindingOutputs(step)
	rc := exec.NewRunCtx(ctx, s.eng, exec.PhaseRun)
	defer rc.Close()
	fed := make(map[string]tensor.Tensor, len(step.feeds))
	for _, f := range step.feeds {
		fed[f.Name] = f.Tensor
	}
	rc.RunStart(exec.ExecutorPlan, fed)
	outs, err := execute(g.t, s.pe, rc, g.inst, step.ins, into)
	rc.RunEnd(outs, err)
	st.latched |= g.inst.TakeLatched()
	if err != nil {
		return nil, err
	}
	if into != nil {
		if err := s.fillBound(outs, into); err != nil {
			return nil, err
		}
	}
	st.memo.Replayed++
	s.countViews(st, g.entry)
	return s.landOutputs(op, step, outs)
}

// ReplayDeviceGraph runs the captured step again with bindings, which must be the bindings it
// was captured with (in any order), each of the same generation (not reallocated nor
// destroyed), at the same addresses and of the same logical shapes; the inputs fed rather
// than bound at the capture are fed again as they were. Bound outputs land in their bindings
// as in RunWithDeviceBindings; outputs that are not bound are dropped. It returns false when
// the step no longer matches the graph: a control-flow branch flipped (a bound value that
// decides shapes or control flow changed) or a host step's output shape changed; the step's
// result was then produced eagerly, the graph is retired, and the caller re-warms and
// captures again (after ResetDeviceGraph). A kernel's failed bounds check during a replay is
// an error naming the node, latched in CheckDeviceCaptureError; the graph stays captured.
func (s *InferenceSession) ReplayDeviceGraph(bindings []*DeviceBinding) (_ bool, err error) {
	const op = "ReplayDeviceGraph"
	defer recoverRun(op, &err)
	st := s.bindings()
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := s.checkOpen(op); err != nil {
		return false, err
	}
	g := st.graph
	switch {
	case g == nil:
		return false, tensor.NewError(op, ErrNotCaptured, "no device graph is captured (TryCaptureWithDeviceBindings first)")
	case g.retired:
		return false, tensor.NewError(op, ErrNotCaptured, "the device graph was retired (ResetDeviceGraph, then capture again)")
	case len(bindings) != len(g.bindings):
		return false, tensor.NewError(op, tensor.ErrInvalidArgument, "%d bindings, the graph was captured with %d", len(bindings), len(g.bindings))
	}
	for _, b := range bindings {
		if b == nil {
			return false, tensor.NewError(op, tensor.ErrInvalidArgument, "a nil binding")
		}
		i := slices.Index(g.bindings, b)
		if i < 0 {
			return false, tensor.NewError(op, tensor.ErrInvalidArgument, "%s is not one the graph was captured with", b.describe())
		}
		switch {
		case b.destroyed:
			return false, tensor.NewError(op, tensor.ErrClosed, "%s was destroyed after the capture (ResetDeviceGraph before destroying a graph's bindings)", b.describe())
		case b.gen != g.gens[i] || b.bases() != g.bases[i]:
			return false, tensor.NewError(op, tensor.ErrInvalidArgument, "%s was reallocated after the capture: its memory is not the graph's (ResetDeviceGraph and capture again)", b.describe())
		case !slices.Equal(b.logical, g.logical[i]):
			return false, tensor.NewError(op, tensor.ErrInvalidArgument, "%s has logical shape %v, the graph was captured at %v (ResetDeviceGraph on a shape change, and capture again)", b.describe(), b.logical, g.logical[i])
		}
	}
	if len(g.t.Specialized) > 0 {
		// The plan takes some inputs' values as fixed: one that changed flips a branch or a
		// shape, and the step runs eagerly.
		step, err := s.prepareStep(op, g.fed, bindings)
		if err != nil {
			return false, err
		}
		if step.key != g.key {
			return false, s.retire(st, step, bindings, false)
		}
	}
	if err := s.replay(st, g); err != nil {
		if errors.Is(err, plan.ErrPlanGuard) {
			step, perr := s.prepareStep(op, g.fed, bindings)
			if perr != nil {
				return false, perr
			}
			return false, s.retire(st, step, bindings, true)
		}
		return false, err
	}
	return true, nil
}

// replay runs the pinned instance on the bindings' memory (checked against the capture by
// ReplayDeviceGraph) and lands the bound outputs. The bindings' lock is held.
func (s *InferenceSession) replay(st *bindingState, g *deviceGraph) error {
	const op = "ReplayDeviceGraph"
	for i, b := range g.bindings {
		if b.inPos >= 0 {
			n := tensor.StorageBytes(b.dtype, int64(numel(g.logical[i])))
			g.ins[b.inPos] = tensor.ViewBytes(b.dtype, g.logical[i], b.bufs[b.front][:n])
		}
	}
	for j, b := range g.byOutput {
		if b != nil {
			n := tensor.StorageBytes(b.dtype, int64(numel(g.outShape[j])))
			g.into[j] = tensor.ViewBytes(b.dtype, g.outShape[j], b.back()[:n])
		}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return tensor.NewError(op, tensor.ErrClosed, "the session is closed")
	}
	rc := &g.rc
	*rc = exec.RunCtx{Eng: s.eng, Opset: s.eng.Opset, Phase: exec.PhaseRun, Ctx: context.Background()}
	outs, err := execute(g.t, s.pe, rc, g.inst, g.ins, g.into)
	rc.Close()
	*rc = exec.RunCtx{}
	st.latched |= g.inst.TakeLatched()
	if err != nil {
		return err
	}
	for j, b := range g.byOutput {
		if b == nil {
			continue
		}
		if dst, _ := ops.RawBytes(g.into[j]); !plan.SameElements(outs[j], dst) {
			plan.CopyElements(g.into[j], outs[j])
		}
		b.front = 1 - b.front
		b.logical = g.outShape[j]
	}
	clear(g.into)
	st.memo.Replayed++
	st.views.ViewsReused += g.views
	st.views.DispatchElided += g.views
	return nil
}

func numel(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// retire stops replaying the captured graph (giving its instance back; dropping its plan when
// a guard failed) and runs step eagerly.
func (s *InferenceSession) retire(st *bindingState, step *boundStep, bindings []*DeviceBinding, guard bool) error {
	g := st.graph
	g.retired = true
	s.plans.Give(g.entry, g.inst, false)
	if guard {
		s.plans.Drop(g.entry, "a host step's output type or shape changed between runs (data-dependent shape)")
	}
	g.inst = nil
	_, err := s.runStep(context.Background(), "ReplayDeviceGraph", st, step, bindings)
	return err
}

// ResetDeviceGraph releases the captured device graph (a retired one too) and clears the
// violations CheckDeviceCaptureError reports; the session runs eagerly until the next
// capture. Call it before a reset or rewind of the bindings, a shape change, or destroying or
// reallocating a binding the graph uses. Without a captured graph it does nothing.
func (s *InferenceSession) ResetDeviceGraph() error {
	st := s.bindings()
	st.mu.Lock()
	defer st.mu.Unlock()
	s.releaseGraphLocked(st)
	st.latched = 0
	return nil
}

// releaseGraphLocked gives the captured graph's instance back. The bindings' lock is held.
func (s *InferenceSession) releaseGraphLocked(st *bindingState) {
	if g := st.graph; g != nil && g.inst != nil {
		s.plans.Give(g.entry, g.inst, false)
	}
	st.graph = nil
}

// CapturedGraphSegmentCount is the number of recorded segments of the captured device graph:
// 1 when the whole step is one graph, more when host steps split it (CaptureSegmentation), 0
// when no graph is captured.
func (s *InferenceSession) CapturedGraphSegmentCount() int {
	st := s.bindings()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.graph == nil || st.graph.retired {
		return 0
	}
	return st.graph.segments
}

// CaptureSegmentation lists what the last TryCaptureWithDeviceBindings left out: the host-op
// seams between the segments of a captured step, or why a step could not be captured.
func (s *InferenceSession) CaptureSegmentation() []CaptureDecline {
	st := s.bindings()
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Clone(st.declines)
}

// CheckDeviceCaptureError returns the bounds-violation bits that kernels set during captures
// and replays since the last ResetDeviceGraph (0: none), without clearing them: a kernel
// that skipped an access at a bounds check (a KV write past a binding's capacity, an index
// out of range) ORs its check's bit in (docs/loom.md, "Bounds and the violation word"), the
// access is not made, and the replay returned an error naming the node.
func (s *InferenceSession) CheckDeviceCaptureError() uint32 {
	st := s.bindings()
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.latched
}
