package session

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/infer"
	"github.com/loomrt/loom/go/graph/opt"
	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/ep"
	"github.com/loomrt/loom/go/session/internal/epcontext"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/plan"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// ExecutionProvider names where an InferenceSession runs its kernels.
type ExecutionProvider = ep.Name

// The execution providers.
const (
	// ProviderHost runs everything on the host backend.
	ProviderHost = ep.Host
	// ProviderCUDA runs Loom kernels on CUDA device 0; without a driver or device the session
	// falls back to the host and ExecutionProviderFallbackReport says why.
	ProviderCUDA = ep.CUDA
	// ProviderAuto is CUDA when a driver and a device exist, else the host.
	ProviderAuto = ep.Auto
)

// The session options that WithOption accepts: ONNX Runtime's string session-option keys
// (and Loom's own, prefixed loom.).
const (
	OptionEPContextEnable    = "ep.context_enable"     // "0" or "1"
	OptionEPContextFilePath  = "ep.context_file_path"  // a non-empty path
	OptionEPContextEmbedMode = "ep.context_embed_mode" // "0" or "1"
	// OptionRunPlan "1" (the default) runs each input signature through a compiled run plan
	// (plan.go: folded constants, one arena, recorded kernel segments; ExecutionPlans audits
	// them); "0" interprets the graph node by node on every run.
	OptionRunPlan = "loom.run_plan"
	// OptionCUDAStandIn "1" makes a session with ProviderCUDA place and run as the cuda
	// provider does, on a host device whose memory behaves as a GPU's (uploads and downloads
	// only, device copies of the weights, an asynchronous stream, fresh memory not zeroed):
	// for testing the CUDA path on a machine without a GPU. "0" (the default): the real cuda
	// provider. Ignored by the other providers.
	OptionCUDAStandIn = "loom.cuda_stand_in"
	// OptionPackWeights "1" (the default) lets the compiled run plans keep large constant
	// matrix operands (MatMul's, Gemm's and MatMulAdd's weights) in the layout their kernels
	// read fastest, packed once for every plan of the session; a weight that only such
	// products read is then held packed alone, not beside the weight as stored (see Graph);
	// "0" reads them as the model stores them (for comparison: the results are the same).
	OptionPackWeights = "loom.pack_weights"
	// OptionShapePlans "1" (the default) builds a new input signature's plan before its first
	// run, from shape inference over the signature (no interpreted run: the first run already
	// runs planned; plan.ShapeTrace says when it cannot and the interpreter traces the run);
	// "0" always builds it from an interpreted, traced first run.
	OptionShapePlans = "loom.shape_plans"
	// OptionJIT says when a kernel that is neither shipped in the binary nor loaded yet is
	// compiled: "background" (the default) runs the op's shape-generic shipped kernels
	// meanwhile and compiles the exact ones on a background worker, the signature's plan
	// being planned again once they are loaded (an op with no such kernels compiles on the
	// run path); "sync" compiles on the run path, before the kernel's first launch; "off"
	// never compiles at run time (only shipped kernels run, as without a C compiler). Warmup
	// compiles on its own path under every policy but off.
	OptionJIT = "loom.jit"
	// OptionJITMaxKernels bounds the kernel modules the JIT compiles and loads for the
	// session: a positive integer, default 1024 (about 38 kB each on the host). A kernel's
	// specialization can depend on the input shape (a convolution's row width), so a stream
	// of new shapes would otherwise load modules without end; past the bound, kernels not
	// loaded yet are served as under OptionJIT "off", and CacheStats.JITUnavailable says why.
	OptionJITMaxKernels = "loom.jit_max_kernels"
	// OptionSharedArenas "1" (the default) runs host plans with arenas of 128 KiB or more on
	// slabs every signature's plans share, one per concurrent run; "0": an arena per instance.
	OptionSharedArenas = "loom.shared_arenas"
)

// LoadOption configures the InferenceSession that Load, LoadBytes or FromGraph makes: the
// execution provider, the graph optimization level, the intra-op threads, ONNX Runtime's
// string session options, the TracerProvider, the limits, the memory budget and the loop
// limit. (ModelSession, the lower-level session that Open makes, takes an Option instead.)
// The first invalid option is the error of the call it was given to.
type LoadOption func(*loadOptions)

// loadOptions collects an InferenceSession's LoadOptions.
type loadOptions struct {
	provider ExecutionProvider
	level    opt.Level
	threads  int
	options  map[string]string
	// tracerProvider receives the session's traces; nil: OpenTelemetry's global provider.
	tracerProvider trace.TracerProvider
	// limits bound what loading accepts and, by MaxElements, what a run allocates.
	limits graph.Limits
	// memBudget is the runs' memory budget in bytes (0: DefaultMemoryBudget); maxLoop the
	// iteration limit of a control-flow node (0: the default).
	memBudget uint64
	maxLoop   int64
	err       error
}

// collectLoadOptions applies opts over the defaults: provider auto, optimization level all
// (as ONNX Runtime's default, ORT_ENABLE_ALL), the host's default thread count, no options.
func collectLoadOptions(opts []LoadOption) *loadOptions {
	o := &loadOptions{provider: ProviderAuto, level: opt.LevelAll, options: map[string]string{}}
	for _, f := range opts {
		if f != nil {
			f(o)
		}
	}
	return o
}

func (o *loadOptions) fail(format string, args ...any) {
	if o.err == nil {
		o.err = tensor.NewError("LoadOption", tensor.ErrInvalidArgument, format, args...)
	}
}

// WithExecutionProvider selects host, cuda or auto (the default).
func WithExecutionProvider(p ExecutionProvider) LoadOption {
	return func(o *loadOptions) {
		switch p {
		case ProviderHost, ProviderCUDA, ProviderAuto:
			o.provider = p
			return
		}
		o.fail("unknown execution provider %q (want host, cuda or auto)", p)
	}
}

// WithOptimizationLevel selects the graph optimization level (default opt.LevelAll).
func WithOptimizationLevel(l opt.Level) LoadOption {
	return func(o *loadOptions) {
		if l < opt.LevelDisabled || l > opt.LevelAll {
			o.fail("unknown graph optimization level %d", int(l))
			return
		}
		o.level = l
	}
}

// WithIntraOpThreads sets the host backend's worker threads (0, the default: the hardware
// concurrency).
func WithIntraOpThreads(n int) LoadOption {
	return func(o *loadOptions) {
		if n < 0 {
			o.fail("intra-op threads must be >= 0, got %d", n)
			return
		}
		o.threads = n
	}
}

// WithLimits sets the limits a model is checked against while it loads (graph.Limits; a zero
// field keeps its default, see graph.DefaultLimits): Load and LoadBytes refuse a model over
// them (FromGraph's model is already built: only MaxElements applies to it). MaxElements
// (default 2^34) also bounds every tensor a run's ops make: an op that
// would make a larger one (ConstantOfShape, Range, OneHot, Expand or Tile fed a huge size,
// say) fails the run, before allocating, with an *Error matching ErrOverBudget that names
// the node and the size asked for. A service that runs models or inputs it does not trust
// sets MaxElements to what its memory can hold.
func WithLimits(l graph.Limits) LoadOption {
	return func(o *loadOptions) {
		if l.MaxModelBytes < 0 || l.MaxRank < 0 || l.MaxDim < 0 || l.MaxElements < 0 || l.MaxNesting < 0 || l.MaxNodes < 0 || l.MaxFoldElements < 0 {
			o.fail("limits must not be negative, got %+v", l)
			return
		}
		o.limits = l
	}
}

// WithOption sets a string session option, ONNX Runtime style (the Option* constants). An
// unknown key or a malformed value is an error naming it.
func WithOption(key, value string) LoadOption {
	return func(o *loadOptions) {
		switch key {
		case OptionEPContextEnable, OptionEPContextEmbedMode, OptionRunPlan, OptionCUDAStandIn, OptionPackWeights, OptionShapePlans, OptionSharedArenas:
			if value != "0" && value != "1" {
				o.fail("session option %s must be 0 or 1, got %q", key, value)
				return
			}
		case OptionJIT:
			if _, ok := exec.ParseJITPolicy(value); !ok {
				o.fail("session option %s must be background, sync or off, got %q", key, value)
				return
			}
		case OptionJITMaxKernels:
			if n, err := strconv.Atoi(value); err != nil || n < 1 {
				o.fail("session option %s must be a positive integer, got %q", key, value)
				return
			}
		case OptionEPContextFilePath:
			if strings.TrimSpace(value) == "" || strings.ContainsRune(value, 0) {
				o.fail("session option %s must be a file path, got %q", key, value)
				return
			}
		default:
			o.fail("unknown session option %q", key)
			return
		}
		o.options[key] = value
	}
}

// Load makes a session for the model file at path.
func Load(path string, opts ...LoadOption) (*InferenceSession, error) {
	o := collectLoadOptions(opts)
	if o.err != nil {
		return nil, o.err
	}
	m, err := graph.LoadWithOptions(path, graph.LoadOptions{Limits: o.limits})
	if err != nil {
		return nil, tensor.WrapError("Load", tensor.ErrInvalidArgument, err, "cannot load %s", path)
	}
	s, err := o.build(m, true, path)
	if err != nil {
		m.Close()
	}
	return s, err
}

// LoadBytes makes a session for a serialized model.
func LoadBytes(data []byte, opts ...LoadOption) (*InferenceSession, error) {
	o := collectLoadOptions(opts)
	if o.err != nil {
		return nil, o.err
	}
	m, err := graph.LoadBytesWithOptions(data, graph.LoadOptions{Limits: o.limits})
	if err != nil {
		return nil, tensor.WrapError("LoadBytes", tensor.ErrInvalidArgument, err, "cannot decode the model")
	}
	s, err := o.build(m, true, "")
	if err != nil {
		m.Close()
	}
	return s, err
}

// FromGraph makes a session for a model built in memory (graph.FromGraph); the session
// optimizes it in place, so the caller must not change it afterwards.
func FromGraph(m *graph.Model, opts ...LoadOption) (*InferenceSession, error) {
	o := collectLoadOptions(opts)
	if o.err != nil {
		return nil, o.err
	}
	if m == nil || m.Graph == nil {
		return nil, tensor.NewError("FromGraph", tensor.ErrInvalidArgument, "nil model")
	}
	return o.build(m, false, "")
}

// IOMeta describes one graph input or output: its name, kind, element type and shape, where a
// dimension is a number, a symbol (Dim.Param) or unknown. For a sequence or an optional, DType,
// Shape and Ranked describe the tensors it holds.
type IOMeta struct {
	Name  string
	DType tensor.DType
	Shape graph.Shape
	// Ranked is false when even the rank is unknown.
	Ranked bool
	// Kind is ValueTensor (also when the model does not say), ValueSequence or ValueOptional;
	// Run feeds and returns tensors only, RunValues every kind.
	Kind tensor.ValueKind
	// Holds is, for an optional, the kind it holds: ValueTensor or ValueSequence.
	Holds tensor.ValueKind
}

// Dims is the shape as ONNX Runtime's GetShape gives it: each known dimension's size, and -1
// for a symbolic or unknown one (Shape has the symbols' names). Nil when the rank is unknown.
func (m IOMeta) Dims() []int64 {
	if !m.Ranked {
		return nil
	}
	dims := make([]int64, len(m.Shape))
	for i, d := range m.Shape {
		dims[i] = -1
		if d.Known() {
			dims[i] = d.Value
		}
	}
	return dims
}

// ModelMetadata is what the model file says about itself.
type ModelMetadata struct {
	ProducerName, ProducerVersion, Domain, Description, GraphName string
	Version                                                       int64
	Custom                                                        map[string]string
}

// FallbackEntry is one node that does not run on the requested provider, and why.
type FallbackEntry struct {
	Node, Op string
	Provider ExecutionProvider // where it runs
	Reason   string
}

// InferenceSession runs an ONNX model. Run is safe for concurrent use: the weights are
// shared and read-only, every run has private intermediate values and device memory.
type InferenceSession struct {
	// eng is the model, its weights and placements, the device context and the caches the
	// interpreter uses (internal/exec).
	eng *exec.Engine
	// pe is what the compiled run plans share: the device copies of the weights, the recycled
	// output memory, the inputs that decide shapes or control flow (internal/plan).
	pe *plan.Env

	ownModel bool
	// relaid are the initializers of the (owned) model whose bytes relayWeights dropped, the
	// session holding them packed; restoreOnce gives them back (restoreWeights).
	relaid      []string
	restoreOnce sync.Once
	options     map[string]string
	inputs      []IOMeta
	outputs     []IOMeta

	dev *native.Device

	plans plan.Cache // compiled run plans by input signature (internal/plan)
	// fastSig is the signature the fast path ran last (see FastSignature).
	fastSig  atomic.Pointer[plan.FastSignature]
	planning bool // whether runs use compiled plans (OptionRunPlan)
	// shapePlans: a new signature's plan is built from shape inference before its first run
	// (OptionShapePlans), not from an interpreted trace of it.
	shapePlans bool
	tiering    plan.Tiering // plans on first or second sight, or once (internal/plan/tiering.go)
	tensorIO   bool         // whether every graph input and output is a tensor (not a sequence or optional)

	epContextPath string // the EP context model this session wrote, if any
	// epKernels are the kernels recorded for the session's EP context partitions
	// (epcontext_partitions.go); nil unless built with ep.context_enable=1.
	epKernels *[]epcontext.Kernel

	// bind is the persistent device bindings and the captured device graph
	// (device_bindings.go, device_capture.go), made on first use.
	bind     *bindingState
	bindOnce sync.Once

	mu     sync.RWMutex
	closed bool
}

// build makes the session for m; modelPath is the file m was loaded from ("" for a model from
// memory), which names the EP context model's default path and anchors an EP context blob file.
func (b *loadOptions) build(m *graph.Model, ownModel bool, modelPath string) (_ *InferenceSession, err error) {
	const op = "InferenceSession"
	epc, err := b.readEPContext(m, modelPath)
	if err != nil {
		return nil, err
	}
	if epc != nil {
		// An EP context model: the session runs the optimized graph in its blob, which it owns.
		source, ownSource := m, ownModel
		defer func() {
			if err != nil {
				epc.model.Close()
			} else if ownSource {
				source.Close()
			}
		}()
		m, ownModel = epc.model, true
	} else {
		if err := infer.Check(m); err != nil { // also with the types inference gives untyped values
			return nil, tensor.WrapError(op, tensor.ErrInvalidArgument, err, "the model does not check")
		}
		if err := opt.Optimize(m, b.level); err != nil {
			return nil, tensor.WrapError(op, tensor.ErrInvalidArgument, err, "graph optimization (level %s) failed", b.level)
		}
	}
	s := &InferenceSession{eng: &exec.Engine{Model: m, Opset: m.Opset("")}, ownModel: ownModel, options: map[string]string{}}
	s.pe = &plan.Env{Eng: s.eng}
	s.eng.Tracing.Provider = b.tracerProvider
	s.eng.MaxElements = b.limits.MaxElements // 0: the default
	s.eng.Mem = b.memoryBudget()
	s.eng.MaxLoopIterations = b.maxLoop // 0: the default
	for k, v := range b.options {
		s.options[k] = v
	}
	if err := s.fillEPContextOptions(modelPath); err != nil {
		return nil, err
	}
	if err := checkOps(m); err != nil {
		return nil, err
	}
	g := m.Graph
	s.eng.Weights = make(map[string]tensor.Tensor, len(g.Initializers))
	for name, gt := range g.Initializers {
		// A model the session owns shares its initializers' bytes with the session's weights
		// (weightTensor); a caller's model may change after the session is made, so it is copied.
		decode := tensor.FromGraphTensor
		if ownModel {
			decode = tensor.WeightTensor
		}
		t, err := decode(gt)
		if err != nil {
			return nil, tensor.WrapError(op, tensor.ErrInvalidArgument, err, "initializer %q", name)
		}
		s.eng.Weights[name] = t
	}
	s.eng.Held = exec.NewHeldRanges(s.eng.Weights)
	for _, v := range g.Inputs {
		if v.Initializer != nil || g.Initializers[v.Name] != nil {
			continue
		}
		s.inputs = append(s.inputs, ioMeta(v))
		s.eng.InputNames = append(s.eng.InputNames, v.Name)
	}
	for _, v := range g.Outputs {
		s.outputs = append(s.outputs, ioMeta(v))
		s.pe.OutputNames = append(s.pe.OutputNames, v.Name)
	}
	s.pe.Recycled.SetOutputs(len(g.Outputs))
	s.tensorIO = true
	for _, ms := range [][]IOMeta{s.inputs, s.outputs} {
		for _, m := range ms {
			s.tensorIO = s.tensorIO && m.Kind == tensor.ValueTensor
		}
	}
	requested := b.provider
	if epc != nil {
		requested = epc.requestedProvider(requested)
	}
	// The provider places every node (its subgraphs' too) once; the placements say, for the
	// nodes that do not run on the requested provider, why (internal/ep).
	placer, runsOn := ep.Select(requested, s.options[OptionCUDAStandIn] == "1")
	s.eng.Provider = runsOn.Name()
	s.eng.Placements = ep.PlaceGraph(s.eng.Model.Graph, placer)
	// The calling thread runs blocks too, so n intra-op threads need n-1 pool workers.
	workers := b.threads
	if workers > 1 {
		workers--
	}
	dev, err := runsOn.Open(workers)
	if err != nil {
		return nil, tensor.WrapError(op, tensor.ErrDevice, err, "cannot open the %s device", s.eng.Provider)
	}
	// On the host the kernels' buffers and the plans' arenas are host memory, charged to the
	// session's memory budget; a GPU's memory is bounded by the device.
	var ctx *device.ModelContext
	if runsOn.Memory() == ep.DeviceMemory {
		ctx, err = device.NewContext(dev, device.Unlimited)
	} else {
		ctx, err = device.NewContextSharing(dev, s.eng.Mem)
	}
	if err != nil {
		dev.Close()
		return nil, err
	}
	s.dev, s.eng.Ctx = dev, ctx
	// Compiled plans keep their arenas in the device's memory: host-visible on the host, device
	// memory with copies at the seams on CUDA and its stand-in.
	s.planning = s.options[OptionRunPlan] != "0" && runsOn.Plans()
	s.pe.KeepDerived = s.options[OptionPackWeights] != "0"
	s.shapePlans = s.options[OptionShapePlans] != "0"
	s.pe.DeviceArenas = runsOn.Memory() == ep.DeviceMemory
	if !s.pe.DeviceArenas && s.options[OptionSharedArenas] != "0" {
		s.pe.Arenas = &plan.ArenaPool{}
	}
	s.eng.Threads = b.threads
	s.setupJIT()
	s.relayWeights()
	switch {
	case epc != nil:
		err = s.installEPContext(epc)
	case s.options[OptionEPContextEnable] == "1":
		err = s.writeEPContext(modelPath)
	}
	if err != nil {
		// The caller closes a model it handed over; the session must not close it too.
		s.ownModel = false
		s.Close()
		return nil, err
	}
	return s, nil
}

func ioMeta(v *graph.Value) IOMeta {
	t := v.Type
	if t.Kind == graph.KindUnknown {
		t = v.Declared
	}
	m := IOMeta{Name: v.Name}
	ioKinds(&m, t)
	return m
}

// checkOps refuses a model with an operator the library lacks, naming the node.
func checkOps(m *graph.Model) error {
	var errs []string
	m.Graph.Walk(func(g *graph.Graph) {
		for _, n := range g.Nodes {
			if _, ok := exec.LookupOp(n); !ok {
				dom := n.Domain
				if dom == "" {
					dom = "ai.onnx"
				}
				errs = append(errs, fmt.Sprintf("node %q: operator %s (domain %s) is not supported", n.Name, n.OpType, dom))
			}
		}
	})
	if len(errs) > 0 {
		sort.Strings(errs)
		return tensor.NewError("InferenceSession", tensor.ErrInvalidArgument, "%s", strings.Join(errs, "; "))
	}
	return nil
}

// Provider is the execution provider the session runs on.
func (s *InferenceSession) Provider() ExecutionProvider { return s.eng.Provider }

// ExecutionProviderFallbackReport lists the nodes that do not run on the requested provider,
// with the reason; empty when everything runs where asked.
func (s *InferenceSession) ExecutionProviderFallbackReport() []FallbackEntry {
	return s.fallbackReport()
}

// SessionOptions returns the string options in effect (after defaults were filled in).
func (s *InferenceSession) SessionOptions() map[string]string {
	out := make(map[string]string, len(s.options))
	for k, v := range s.options {
		out[k] = v
	}
	return out
}

// Inputs describes the inputs a Run must feed, in graph order (initializers excluded).
func (s *InferenceSession) Inputs() []IOMeta { return append([]IOMeta{}, s.inputs...) }

// Outputs describes the outputs Run returns, in order.
func (s *InferenceSession) Outputs() []IOMeta { return append([]IOMeta{}, s.outputs...) }

// Graph is the optimized model the session runs; it must not be changed. The weights the
// session holds packed for its matrix products (see OptionPackWeights) are dropped from a
// model the session loaded itself; the first call to Graph before Close gives them back,
// unpacked, and the session then holds them twice.
func (s *InferenceSession) Graph() *graph.Model {
	s.restoreWeights()
	return s.eng.Model
}

// ModelMetadata returns the model's self-description.
func (s *InferenceSession) ModelMetadata() ModelMetadata {
	m := s.eng.Model
	custom := make(map[string]string, len(m.MetadataProps))
	for k, v := range m.MetadataProps {
		custom[k] = v
	}
	return ModelMetadata{ProducerName: m.ProducerName, ProducerVersion: m.ProducerVersion, Domain: m.Domain,
		Description: m.Doc, GraphName: m.Graph.Name, Version: m.ModelVersion, Custom: custom}
}

// Close releases the device and, for models the session loaded, the model. It waits for
// running Runs. Idempotent.
func (s *InferenceSession) Close() error {
	s.destroyBindings()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	// The runs' ModelSessions are closed (Close waited for the runs), so the modules can go,
	// then the context and the device they live on.
	errs = append(errs, s.eng.RunSessions.Close()...)
	errs = append(errs, s.plans.Close()...)
	if s.pe.Arenas != nil {
		s.pe.Arenas.Close()
	}
	// Every plan instance is closed by now (Close waited for the runs): nothing reads the
	// shared weights any more.
	errs = append(errs, device.CloseWeights(&s.pe.PlanWeights, s.eng.Ctx)...)
	s.pe.Derived.Clear()
	// The weights go too: a closed session keeps nothing (Graph's model then lacks the
	// initializers the session held packed, see relayWeights).
	s.eng.Weights, s.eng.Held = nil, nil
	errs = append(errs, s.eng.Kernels.Close()...)
	s.eng.Bodies.Close()
	s.eng.ForgetGraphs()
	s.pe.ForgetFolds()
	errs = append(errs, s.eng.Ctx.Close(), s.dev.Close())
	if s.ownModel {
		errs = append(errs, s.eng.Model.Close())
	}
	return errors.Join(errs...)
}

// checkInputs matches the fed values to the graph inputs, naming the input at fault. An
// optional input that is not fed is none.
func (s *InferenceSession) checkInputs(inputs []tensor.NamedValue) (map[string]tensor.Tensor, error) {
	const op = "Run"
	fed := make(map[string]tensor.Tensor, len(inputs))
	for _, in := range inputs {
		if _, dup := fed[in.Name]; dup {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "input %q fed twice", in.Name)
		}
		if !in.Value.IsValid() {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "input %q: empty value (the zero Tensor or Value)", in.Name)
		}
		fed[in.Name] = tensor.Contents(in.Value)
	}
	matched := 0 // fed names that are graph inputs
	for _, meta := range s.inputs {
		t, ok := fed[meta.Name]
		if !ok && meta.Kind == tensor.ValueOptional {
			fed[meta.Name] = tensor.OptOf(meta.DType, nil)
			continue
		}
		if !ok {
			// A misspelt name is the likely cause: name what was fed instead.
			msg := fmt.Sprintf("missing input %q (%s)", meta.Name, describeMeta(meta))
			if unknown := s.unknownInputs(fed); len(unknown) > 0 {
				msg += fmt.Sprintf("; fed %s, which %s no input of the model (inputs: %s)", quoteNames(unknown), isAre(len(unknown)), s.inputNames())
			}
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "%s", msg)
		}
		matched++
		if err := checkFed(meta, t); err != nil {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "input %q: %v", meta.Name, err)
		}
	}
	if matched == len(inputs) {
		return fed, nil // every fed name is a graph input (names are unique)
	}
	if unknown := s.unknownInputs(fed); len(unknown) > 0 {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "no input named %q (inputs: %s)", unknown[0], s.inputNames())
	}
	return fed, nil
}

// unknownInputs are the fed names, sorted, that are neither graph inputs nor initializers a
// caller may override.
func (s *InferenceSession) unknownInputs(fed map[string]tensor.Tensor) []string {
	known := make(map[string]bool, len(s.inputs))
	for _, meta := range s.inputs {
		known[meta.Name] = true
	}
	var unknown []string
	for name := range fed {
		if known[name] {
			continue
		}
		if _, ok := s.eng.Weights[name]; ok && s.isOverridable(name) {
			continue
		}
		unknown = append(unknown, name)
	}
	sort.Strings(unknown)
	return unknown
}

// inputNames lists the graph inputs a run feeds, for messages.
func (s *InferenceSession) inputNames() string {
	names := make([]string, len(s.inputs))
	for i, m := range s.inputs {
		names[i] = m.Name
	}
	return strings.Join(names, ", ")
}

func quoteNames(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// isOverridable reports whether an initializer is also declared a graph input, which a caller
// may feed to replace its default.
func (s *InferenceSession) isOverridable(name string) bool {
	for _, v := range s.eng.Model.Graph.Inputs {
		if v.Name == name {
			return true
		}
	}
	return false
}

// Run feeds the named inputs and returns the graph outputs in order; the outputs belong to
// the caller. Errors name the input, output or node at fault (see Error). Models with
// sequence or optional inputs or outputs run through RunValues.
//
// ctx bounds the run: once it is done, the run stops before its next op (or, for a compiled
// run plan, before its next segment of kernels or host step) and returns an *Error matching
// context.Canceled or context.DeadlineExceeded; an op already running finishes first. The
// session stays usable. When ctx carries an OpenTelemetry span, the run's spans hang under it
// (see WithTracerProvider).
func (s *InferenceSession) Run(ctx context.Context, inputs []tensor.NamedTensor) ([]tensor.Tensor, error) {
	return s.runTensors(ctx, "Run", inputs, nil)
}

// RunInto is Run writing outputs into tensors the caller allocated, as ONNX Runtime's bound
// outputs: outputs names graph outputs (any subset, in any order), each with a tensor of
// exactly the element type and shape the run produces, which RunInto fills. It returns every
// graph output in order, each bound one being the caller's tensor (the same memory), the
// others new as from Run. Compiled run plans write bound outputs in place where a kernel
// produces them; otherwise the result is copied in. A bound output whose type or shape
// disagrees with the model or the run, that is not a tensor, or whose memory overlaps an
// input, a weight or another bound output is an *Error naming it; after a failed run the
// bound tensors' contents are unspecified. A bound tensor must not be read or written by
// anything else (another run among them) until RunInto returns.
func (s *InferenceSession) RunInto(ctx context.Context, inputs []tensor.NamedTensor, outputs []tensor.NamedTensor) ([]tensor.Tensor, error) {
	into, err := s.bindOutputs(inputs, outputs)
	if err != nil {
		return nil, err
	}
	return s.runTensors(ctx, "RunInto", inputs, into)
}

// runTensors is Run and RunInto: into, when not nil, holds the bound output tensors by
// output index (the zero Tensor where not bound).
func (s *InferenceSession) runTensors(ctx context.Context, op string, inputs []tensor.NamedTensor, into []tensor.Tensor) (_ []tensor.Tensor, err error) {
	defer recoverRun(op, &err)
	if runHook != nil {
		runHook("run")
	}
	if outs, ok, err := s.runPlannedFast(ctx, inputs, into); ok {
		return outs, err
	}
	for _, m := range s.outputs {
		if m.Kind != tensor.ValueTensor {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "output %q is %s, which %s cannot return; use RunValues", m.Name, describeMeta(m), op)
		}
	}
	outs, err := s.run(ctx, namedTensorValues(inputs), exec.PhaseRun, into)
	if err != nil {
		return nil, err
	}
	for i, t := range outs {
		if tensor.Box(t) != nil {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "output %q is %s (%s), which %s cannot return; use RunValues", s.outputs[i].Name, tensor.Article(t), t, op)
		}
	}
	return outs, nil
}

// run evaluates the model on the fed values in ctx, counting its kernel cache outcomes under
// phase, and fills the bound outputs into (nil: none); the outputs may be sequences or
// optionals.
func (s *InferenceSession) run(ctx context.Context, inputs []tensor.NamedValue, phase exec.RunPhase, into []tensor.Tensor) (_ []tensor.Tensor, err error) {
	defer recoverRun("Run", &err)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, tensor.NewError("Run", tensor.ErrClosed, "the session is closed")
	}
	if ctx == nil {
		return nil, tensor.NewError("Run", tensor.ErrInvalidArgument, "nil context")
	}
	fed, err := s.checkInputs(inputs)
	if err != nil {
		return nil, err
	}
	rc := exec.NewRunCtx(ctx, s.eng, phase)
	defer rc.Close()
	if runHook != nil {
		runHook("run")
	}
	if err := rc.Canceled(nil); err != nil {
		return nil, err
	}
	outs, ok, err := s.runPlanned(rc, fed, into)
	if !ok && err == nil {
		outs, err = s.eng.Interpret(rc, fed)
	}
	if err != nil {
		return nil, err
	}
	if into != nil {
		if err := s.fillBound(outs, into); err != nil {
			return nil, err
		}
	}
	return outs, nil
}

// SupportedOps lists the operators the library implements, and for each whether a Loom kernel
// backs it: ai.onnx operators by name, those of other domains as "domain:Op" (such as
// "ai.onnx.ml:TreeEnsemble").
func SupportedOps() map[string]bool {
	out := map[string]bool{}
	for k := range ops.HostOps {
		out[k] = false
	}
	for k := range ops.KernelPlanners {
		if _, host := out[k]; host || !strings.Contains(k, ":") {
			out[k] = true
		}
	}
	return out
}

// WithTracerProvider makes the session's traces (the spans of the runs whose context carries
// a span) go to tp instead of OpenTelemetry's global TracerProvider (otel.GetTracerProvider).
// nil (the default) is the global one.
func WithTracerProvider(tp trace.TracerProvider) LoadOption {
	return func(o *loadOptions) { o.tracerProvider = tp }
}

// recoverRun turns a panic of the run path outside any node (a node's own is RunNode's) into
// an *Error of kind ErrInternal in *err, with the value and stack: deferred by every run entry,
// so that no input takes the process down. The deferred cleanups below it have run (the run's
// memory is given back, a plan instance returned).
func recoverRun(op string, err *error) {
	if r := recover(); r != nil {
		*err = tensor.RunPanicError(op, r, debug.Stack())
	}
}

// runHook, when set (by tests), is called at named points of the run path: "run" as a run
// starts and after its inputs are checked, "execute" before a compiled plan executes.
var runHook func(stage string)
