package exec

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"unsafe"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
	"github.com/loomrt/loom/kernels"
)

// RunFunc is how the interpreter runs a node's operator.
type RunFunc func(rc *RunCtx, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error)

// KernelRuns holds, by planner key, the interpreter's runs of the ops with a kernel planner.
// onnxRuns and loomRuns hold how the interpreter runs each ai.onnx and ai.loom operator, by op
// type; domainRuns those of every other domain (ai.onnx.ml, com.microsoft), by domain and then
// op type: its kernel run when it has a planner, else its host function (an operator of
// another domain is registered in ops.HostOps and ops.KernelPlanners as "<domain>:<op>",
// ops.PlannerKey's spelling, such as "ai.onnx.ml:TreeEnsemble" or
// "com.microsoft:SkipLayerNormalization"). All are built once from the op registry, so a lookup
// is two map reads at most (no closure, no key built per node).
var (
	KernelRuns = map[string]RunFunc{}
	onnxRuns   = map[string]RunFunc{}
	loomRuns   = map[string]RunFunc{}
	domainRuns = map[string]map[string]RunFunc{}
)

// addDomainRun records r as the run of the operator named by key ("<domain>:<op>").
func addDomainRun(key string, r RunFunc) {
	dom, op, _ := strings.Cut(key, ":")
	if domainRuns[dom] == nil {
		domainRuns[dom] = map[string]RunFunc{}
	}
	domainRuns[dom][op] = r
}

func init() {
	host := func(f ops.OpFunc) RunFunc {
		return func(rc *RunCtx, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) { return f(rc, n, in) }
	}
	for op, f := range ops.HostOps {
		if strings.Contains(op, ":") {
			addDomainRun(op, host(f))
		} else {
			onnxRuns[op] = host(f)
		}
	}
	for op, f := range ops.LoomOps {
		loomRuns[op] = host(f)
	}
	for key := range ops.KernelPlanners {
		r := kernelRun(key, ops.KernelFallbacks[key])
		KernelRuns[key] = r
		if op, ok := strings.CutPrefix(key, graph.LoomDomain+":"); ok {
			loomRuns[op] = r
		} else if strings.Contains(key, ":") {
			addDomainRun(key, r)
		} else {
			onnxRuns[key] = r
		}
	}
}

// LookupOp returns how the interpreter runs n's operator: its kernel planner's run when it has
// one, else its host function.
func LookupOp(n *graph.Node) (RunFunc, bool) {
	var f RunFunc
	var ok bool
	switch n.Domain {
	case "", "ai.onnx":
		f, ok = onnxRuns[n.OpType]
	case graph.LoomDomain:
		f, ok = loomRuns[n.OpType]
	default:
		f, ok = domainRuns[n.Domain][n.OpType]
	}
	return f, ok
}

// WrapRun makes the interpreter run the ai.onnx operator op (and the host steps of the
// compiled run plans built afterwards) through wrap(the run it had) until restore is called:
// tests inject failures with it, such as an op that panics. Neither call may overlap a run.
func WrapRun(op string, wrap func(RunFunc) RunFunc) (restore func()) {
	old, had := onnxRuns[op]
	onnxRuns[op] = wrap(old)
	return func() {
		if had {
			onnxRuns[op] = old
		} else {
			delete(onnxRuns, op)
		}
	}
}

// RunNode runs node n on in: through rc.ControlFlow in sc for an If, Loop, Scan or
// SequenceMap, else through f. A panic inside (a bug of an op's function that the model or the
// inputs reached) is recovered as an *Error of kind ErrInternal naming n, whose *PanicError
// cause holds the panic value and stack: the run fails like any other failed op, and the
// session stays usable.
//
// What the op reserved of the memory budget (Reserve) is given back when it returns.
func (rc *RunCtx) RunNode(f RunFunc, n *graph.Node, in []tensor.Tensor, sc *Scope) (outs []tensor.Tensor, err error) {
	mark := rc.mem.transient
	defer func() {
		if r := recover(); r != nil {
			outs, err = nil, tensor.NodePanicError(n, r, debug.Stack())
		}
		rc.releaseTo(mark)
	}()
	if n.Traits().ControlFlow {
		return rc.ControlFlow(n, in, sc)
	}
	return f(rc, n, in)
}

// OpsetVersion is the ai.onnx opset the run's model imports (see ops.OpRun).
func (rc *RunCtx) OpsetVersion() int64 { return rc.Opset }

// MaxElements bounds the elements of a tensor the run's ops make (see ops.OpRun): the
// session's graph.Limits.MaxElements, the default limit without an engine.
func (rc *RunCtx) MaxElements() int64 {
	if rc != nil && rc.Eng != nil && rc.Eng.MaxElements > 0 {
		return rc.Eng.MaxElements
	}
	return graph.DefaultLimits().MaxElements
}

// KernelOp runs op (an ai.onnx op with a kernel planner) on in for node n as the interpreter
// would: the fused operators' functions compose such ops (see ops.OpRun).
func (rc *RunCtx) KernelOp(op string, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	f, ok := KernelRuns[op]
	if !ok {
		return nil, fmt.Errorf("%s has no kernel planner", op)
	}
	return f(rc, n, in)
}

// Scope holds the values of one graph evaluation; subgraphs see their parents' values.
type Scope struct {
	Vals   map[string]tensor.Tensor
	parent *Scope
}

func (sc *Scope) lookup(name string) (tensor.Tensor, bool) {
	for s := sc; s != nil; s = s.parent {
		if t, ok := s.Vals[name]; ok {
			return t, true
		}
	}
	return tensor.Tensor{}, false
}

// RunCtx is one Run's private state: the opset and, taken on first use from the session's pool
// (or opened), a ModelSession in the session's context for the Loom kernels of this run (its
// memory is freed when the run ends).
type RunCtx struct {
	Eng   *Engine
	Opset int64
	// Ctx is the run's context: its span parents the run's spans, and the run stops between
	// ops once it is done. done is ctx.Done(), nil for a context that is never done (then
	// the checks cost a nil test).
	Ctx  context.Context
	Done <-chan struct{}
	ms   *device.ModelSession
	// Dispatches counts the command lists the run issued on ms.
	Dispatches int
	// kernels are the session's loaded kernels registered with ms, so each is added once a run.
	kernels map[*device.LoadedKernel]device.KernelID
	// Phase says whether this run is a Warmup, for the session's statistics.
	Phase RunPhase
	// kernelVariant and kernelReason name the Loom kernels the current op ran and why (empty
	// when it ran as a host function); see RunKernelPlan.
	KernelVariant, KernelReason string
	// Observe, when set, sees every node the run evaluates (subgraphs' too, before the node
	// that ran them), with its inputs and outputs: the trace a compiled run plan is built from.
	Observe func(g *graph.Graph, n *graph.Node, in, out []tensor.Tensor)
	// TraceUntaken, when set, says of an If of the main graph whether the run also evaluates
	// the branch its condition did not take, for Observe (traceUntaken): a plan built from
	// the trace holds both branches when the condition depends on the inputs' data.
	TraceUntaken func(n *graph.Node) bool
	// Trace is the run's tracing state, nil when tracing is off (see inference_trace.go).
	Trace *runTrace
	// mem is what the run holds of the session's memory budget (budget.go).
	mem runMem
}

// NewRunCtx is the state of one run in ctx.
func NewRunCtx(ctx context.Context, e *Engine, phase RunPhase) *RunCtx {
	return &RunCtx{Eng: e, Opset: e.Opset, Phase: phase, Ctx: ctx, Done: ctx.Done()}
}

// NewOpRunCtx is a run context outside a Run, on e (nil: none) with opset: no context, phase
// Run. Tests call op functions with it.
func NewOpRunCtx(e *Engine, opset int64) *RunCtx {
	return &RunCtx{Eng: e, Opset: opset}
}

// Canceled is the run's error once its context is done (naming n, the node the run was about
// to run, when not nil), else nil. With a context that is never done it costs a nil test, else
// a non-blocking receive.
func (rc *RunCtx) Canceled(n *graph.Node) error {
	if rc.Done == nil {
		return nil
	}
	select {
	case <-rc.Done:
		return tensor.CanceledError("Run", rc.Ctx, n)
	default:
		return nil
	}
}

// Close hands the run's ModelSession back to the session's pool, which frees the run's
// device memory and keeps the stream for a later run.
func (rc *RunCtx) Close() {
	rc.releaseMem()
	if rc.ms != nil {
		rc.Eng.RunSessions.put(rc.ms)
		rc.ms = nil
	}
}

// evalGraph evaluates g's nodes in order in sc and returns g's outputs.
func (rc *RunCtx) evalGraph(g *graph.Graph, sc *Scope) ([]tensor.Tensor, error) {
	return rc.evalGraphWith(g, sc, nil)
}

// evalGraphWith is evalGraph using p, when not nil, for g's converted initializers and
// resolved operators (a cached subgraph body, see evalBody).
func (rc *RunCtx) evalGraphWith(g *graph.Graph, sc *Scope, p *preparedBody) ([]tensor.Tensor, error) {
	if p != nil {
		for name, t := range p.inits {
			if _, ok := sc.Vals[name]; !ok {
				sc.Vals[name] = t
			}
		}
	}
	for name, gt := range g.Initializers {
		if p != nil {
			break
		}
		if _, ok := sc.Vals[name]; ok {
			continue
		}
		if g.Parent == nil {
			continue // the session converted the main graph's initializers once
		}
		t, err := tensor.FromGraphTensor(gt)
		if err != nil {
			return nil, err
		}
		sc.Vals[name] = t
	}
	dead := rc.Eng.DeadAfter(g)
	for ni, n := range g.Nodes {
		var f RunFunc
		ok := p != nil
		if ok {
			f = p.ops[ni]
		} else {
			f, ok = LookupOp(n)
		}
		if !ok {
			return nil, tensor.NewNodeError("Run", tensor.ErrInvalidArgument, n, "operator %s is not supported", n.OpType)
		}
		if err := rc.Canceled(n); err != nil {
			return nil, err
		}
		in := make([]tensor.Tensor, len(n.Inputs))
		for i, name := range n.Inputs {
			if name == "" {
				continue
			}
			t, ok := sc.lookup(name)
			if !ok {
				return nil, tensor.NewNodeError("Run", tensor.ErrInvalidArgument, n, "input %q has no value", name)
			}
			in[i] = t
		}
		if err := tensor.CheckValueInputs(n, in); err != nil {
			return nil, err
		}
		sp := rc.OpStart(n, in)
		outs, err := rc.RunNode(f, n, in, sc)
		sp.End("", "", outs, err)
		if err != nil {
			return nil, tensor.NodeError(n, err)
		}
		for i, name := range n.Outputs {
			if name != "" && i >= len(outs) {
				return nil, tensor.NewNodeError("Run", tensor.ErrInvalidArgument, n, "output %d (%q) is not supported: the operator produces %d output(s) here", i, name, len(outs))
			}
		}
		// The outputs are charged to the memory budget as the run's values: a node whose
		// outputs exceed it fails here (ops whose sizes come from the inputs reserved them
		// before allocating; see budget.go).
		if err := rc.holdOutputs(n, in, outs); err != nil {
			return nil, tensor.NodeError(n, err)
		}
		for i, name := range n.Outputs {
			if name == "" || i >= len(outs) {
				continue
			}
			sc.Vals[name] = outs[i]
		}
		if rc.Observe != nil {
			rc.Observe(g, n, in, outs)
		}
		// Values no later node reads are dropped, so that a run holds only live values.
		for _, name := range dead[ni] {
			if t, ok := sc.Vals[name]; ok {
				rc.dropValue(t)
			}
			delete(sc.Vals, name)
		}
	}
	// A subgraph's values go with its scope (its outputs are charged again as its node's).
	if g.Parent != nil {
		defer rc.dropScope(g, sc)
	}
	outs := make([]tensor.Tensor, len(g.Outputs))
	for i, v := range g.Outputs {
		t, ok := sc.lookup(v.Name)
		if !ok {
			return nil, tensor.NewError("Run", tensor.ErrInvalidArgument, "graph output %q was not computed", v.Name)
		}
		outs[i] = t
	}
	return outs, nil
}

// SourceOf returns the op library's source of file (package kernels) specialized for symbol
// with config. The source is read once a process and shared: it must not be changed.
func SourceOf(file, symbol string, config map[string]string) (device.KernelSource, error) {
	src, ok := librarySources.Load(file)
	if !ok {
		text, err := kernels.Source(file) // a copy each call
		if err != nil {
			return device.KernelSource{}, err
		}
		src, _ = librarySources.LoadOrStore(file, text)
	}
	return device.KernelSource{Name: file, Source: src.([]byte), Specialization: loom.Specialization{Symbol: symbol, Config: config}}, nil
}

// librarySources are the op library's files as SourceOf read them, by name: a few dozen, read
// once.
var librarySources sync.Map // string -> []byte

// librarySource reports whether src's text is SourceOf's (the op library's, never changed).
func librarySource(src device.KernelSource) bool {
	v, ok := librarySources.Load(src.Name)
	if !ok || len(src.Source) == 0 {
		return false
	}
	text := v.([]byte)
	return len(text) == len(src.Source) && &text[0] == &src.Source[0]
}

// device returns the run's ModelSession, taking or opening it on first use.
func (rc *RunCtx) device() (*device.ModelSession, error) {
	if rc.ms == nil {
		ms := rc.Eng.RunSessions.Get()
		if ms == nil {
			var err error
			if ms, err = rc.Eng.RunSession(); err != nil {
				return nil, err
			}
		}
		rc.ms = ms
	}
	return rc.ms, nil
}

// Compile returns a kernel of this run: compiled and loaded once per InferenceSession (see
// KernelCache), registered once per run with the run's ModelSession.
func (rc *RunCtx) Compile(file, symbol string, config map[string]string) (*device.ModelSession, device.KernelID, error) {
	rc.noteKernel(file, symbol, config)
	ms, err := rc.device()
	if err != nil {
		return nil, device.KernelID{}, err
	}
	k, err := rc.Eng.Kernels.Get(rc.Eng.Ctx, rc.Phase, file, symbol, config)
	if err != nil {
		return nil, device.KernelID{}, err
	}
	if id, ok := rc.kernels[k]; ok {
		return ms, id, nil
	}
	id, err := device.UseLoadedKernel(ms, "Run", k)
	if err != nil {
		return nil, device.KernelID{}, err
	}
	if rc.kernels == nil {
		rc.kernels = map[*device.LoadedKernel]device.KernelID{}
	}
	rc.kernels[k] = id
	return ms, id, nil
}

// upload copies a float32 tensor's elements into new device memory.
func (rc *RunCtx) uploadF32(v []float32) (device.Region, error) {
	ms, err := rc.device()
	if err != nil {
		return device.Region{}, err
	}
	n := max(len(v), 1) * 4
	r, err := ms.Allocate(uint64(n))
	if err != nil {
		return device.Region{}, err
	}
	if len(v) > 0 {
		if err := ms.Upload(r, f32AsBytes(v)); err != nil {
			return device.Region{}, err
		}
	}
	return r, nil
}

// allocF32 allocates device memory for n float32 elements.
func (rc *RunCtx) allocF32(n int) (device.Region, error) {
	ms, err := rc.device()
	if err != nil {
		return device.Region{}, err
	}
	return ms.Allocate(uint64(max(n, 1) * 4))
}

// run issues the commands on the run's stream (once each, so no graph is built for them).
func (rc *RunCtx) run(cmds []device.Command) error {
	ms, err := rc.device()
	if err != nil {
		return err
	}
	rc.Dispatches++
	return device.IssueOnce(ms, "Run", cmds)
}

// readF32 reads n float32 elements back.
func (rc *RunCtx) readF32(r device.Region, n int) ([]float32, error) {
	out := make([]float32, n)
	if n == 0 {
		return out, nil
	}
	if err := rc.ms.Read(r, f32AsBytes(out)); err != nil {
		return nil, err
	}
	return out, nil
}

func f32AsBytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

// Interpret evaluates the main graph node by node on fed (the interpreter).
func (e *Engine) Interpret(rc *RunCtx, fed map[string]tensor.Tensor) ([]tensor.Tensor, error) {
	rc.RunStart(ExecutorInterpreter, fed)
	scope := &Scope{Vals: make(map[string]tensor.Tensor, len(fed)+len(e.Weights))}
	for k, v := range e.Weights {
		scope.Vals[k] = v
	}
	for k, v := range fed {
		scope.Vals[k] = v
	}
	outs, err := rc.evalGraph(e.Model.Graph, scope)
	if err == nil {
		outs, err = e.detachOutputs(outs, fed)
	}
	rc.RunEnd(outs, err)
	if err != nil {
		return nil, err
	}
	return outs, nil
}
