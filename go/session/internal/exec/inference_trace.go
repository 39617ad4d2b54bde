package exec

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ep"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Tracing of InferenceSession runs through OpenTelemetry.
//
// A Run whose context carries a span (trace.SpanContextFromContext(ctx).IsValid(): a span the
// caller started, or a remote parent propagated into ctx) emits one "loom.Run" span under it
// and, under that, one span per executed op named by op type; the ops of If, Loop and Scan
// bodies nest under their control-flow op's span. The spans go to the session's
// TracerProvider (WithTracerProvider, else OpenTelemetry's global one). A Run whose context
// carries no span is not traced: it pays one context lookup, and every op one nil check of
// the run's state.
//
// The hooks an executor calls (the interpreter in inference_run.go does; any other executor
// must too):
//
//	rc.runStart(executor, fed)      once, before the first op (no-op when tracing is off)
//	sp := rc.opStart(n, in)         before each op; a zero OpSpan when tracing is off
//	sp.end(variant, reason, outs, err)  after it; variant "" derives variant and reason
//	rc.runEnd(outs, err)            once, after the last op
//
// The span of an op with subgraphs (If, Loop, Scan) is the parent of the op spans started
// until its end, which must therefore nest like calls; other ops' spans are siblings, so an
// executor may start several before ending them (a recorded segment of kernel steps). The
// hooks stay on the run's goroutine, like the rest of RunCtx. rc.compile records the Loom
// kernels an op requests, which is how end("", "", ...) names the variant that ran.

// tracerName is the instrumentation scope of the session's spans.
const tracerName = "github.com/loomrt/loom/go/session"

// The executors a span's loom.executor names.
const (
	ExecutorInterpreter = "interpreter"
	ExecutorPlan        = "plan"
)

// Span attribute keys.
const (
	attrModel        = attribute.Key("loom.model")
	AttrGraph        = attribute.Key("loom.graph")
	attrProvider     = attribute.Key("loom.provider")
	AttrPhase        = attribute.Key("loom.phase")
	AttrExecutor     = attribute.Key("loom.executor")
	AttrNode         = attribute.Key("loom.node")
	AttrOpType       = attribute.Key("loom.op_type")
	AttrDomain       = attribute.Key("loom.domain")
	AttrVariant      = attribute.Key("loom.variant")
	AttrReason       = attribute.Key("loom.reason")
	AttrInputShapes  = attribute.Key("loom.input_shapes")
	AttrOutputShapes = attribute.Key("loom.output_shapes")
	// AttrJITUnavailable, on a run's span: why kernels cannot be compiled at run time (no C
	// compiler), once the session has needed to know; only shipped kernels then run.
	AttrJITUnavailable = attribute.Key("loom.jit_unavailable")
)

// VariantHost is the variant of an op that ran as a Go host function.
const VariantHost = "host"

// sessionTracing is an InferenceSession's tracing state.
type sessionTracing struct {
	// Provider is WithTracerProvider's TracerProvider; nil means OpenTelemetry's global one.
	Provider trace.TracerProvider
}

// tracer is the tracer of the session's spans.
func (t *sessionTracing) tracer() trace.Tracer {
	tp := t.Provider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// noSpan is what trace.SpanFromContext returns for a context without a span.
var noSpan = trace.SpanFromContext(context.Background())

// Traced reports whether a run in ctx is traced: whether ctx carries a span. It costs a
// comparison for context.Background, and a context lookup for other contexts without a span
// (trace.SpanContextFromContext alone cost several times as much).
func Traced(ctx context.Context) bool {
	if ctx == context.Background() {
		return false
	}
	sp := trace.SpanFromContext(ctx)
	return sp != noSpan && sp.SpanContext().IsValid()
}

// runTrace is one traced Run's span state, owned by the run's goroutine.
type runTrace struct {
	tracer   trace.Tracer
	executor string
	run      trace.Span
	// parent is the context of the innermost open span: the parent of the next op span.
	parent context.Context
	// kernels are the Loom kernel variants requested since the innermost open op started.
	kernels []string
}

// RunStart starts the run's "loom.Run" span when tracing is on; executor names the executor
// (executorInterpreter or executorPlan) for the run's and its ops' spans, fed the run's
// checked inputs by name.
func (rc *RunCtx) RunStart(executor string, fed map[string]tensor.Tensor) {
	if rc.Ctx == nil || !Traced(rc.Ctx) {
		return
	}
	tracer := rc.Eng.Tracing.tracer()
	// The graph's inputs in order, then any fed initializer overrides by name.
	ins := make([]string, 0, len(fed))
	listed := make(map[string]bool, len(rc.Eng.InputNames))
	for _, name := range rc.Eng.InputNames {
		if t, ok := fed[name]; ok {
			ins = append(ins, name+": "+DescribeTensor(t))
			listed[name] = true
		}
	}
	var extra []string
	for name := range fed {
		if !listed[name] {
			extra = append(extra, name)
		}
	}
	slices.Sort(extra)
	for _, name := range extra {
		ins = append(ins, name+": "+DescribeTensor(fed[name]))
	}
	phase := "run"
	if rc.Phase == PhaseWarmup {
		phase = "warmup"
	}
	m := rc.Eng.Model
	ctx, span := tracer.Start(rc.Ctx, "loom.Run", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrModel.String(m.Name), AttrGraph.String(m.Graph.Name),
			attrProvider.String(string(rc.Eng.Provider)), AttrPhase.String(phase),
			AttrExecutor.String(executor), AttrInputShapes.StringSlice(ins)))
	rc.Trace = &runTrace{tracer: tracer, executor: executor, run: span, parent: ctx}
}

// RunEnd ends the run's span with the run's outputs or error.
func (rc *RunCtx) RunEnd(outs []tensor.Tensor, err error) {
	t := rc.Trace
	if t == nil {
		return
	}
	rc.Trace = nil
	if t.run.IsRecording() {
		t.run.SetAttributes(AttrOutputShapes.StringSlice(describeTensors(outs)))
		if why := rc.Eng.Kernels.jitUnavailable(); why != "" {
			t.run.SetAttributes(AttrJITUnavailable.String(why))
		}
		recordError(t.run, err)
	}
	t.run.End()
}

// OpSpan is the span of one executing op; the zero OpSpan (tracing off) does nothing. It is
// one pointer, so that the hooks cost a nil check when tracing is off.
type OpSpan struct{ f *opFrame }

// opFrame is a traced op's state.
type opFrame struct {
	rc   *RunCtx
	span trace.Span
	node *graph.Node
	in   []tensor.Tensor
	// parent says whether the span is the parent of the op spans started until its end;
	// prevParent is the parent it replaced, restored by end.
	parent     bool
	prevParent context.Context
	// The enclosing op's kernel notes, restored by end so that an op inside a subgraph does
	// not leave its kernels to its control-flow op.
	prevKernels             []string
	prevVariant, prevReason string
}

// OpStart starts the span of node n about to run on inputs in. With tracing off it costs one
// nil check and returns the zero OpSpan.
func (rc *RunCtx) OpStart(n *graph.Node, in []tensor.Tensor) OpSpan {
	if rc.Trace == nil {
		return OpSpan{}
	}
	return rc.opStartTraced(n, in)
}

func (rc *RunCtx) opStartTraced(n *graph.Node, in []tensor.Tensor) OpSpan {
	t := rc.Trace
	ctx, span := t.tracer.Start(t.parent, n.OpType, trace.WithSpanKind(trace.SpanKindInternal))
	f := &opFrame{rc: rc, span: span, node: n, in: in, prevKernels: t.kernels,
		prevVariant: rc.KernelVariant, prevReason: rc.KernelReason}
	if n.HasSubgraphs() {
		f.parent, f.prevParent = true, t.parent
		t.parent = ctx
	}
	t.kernels = nil
	rc.KernelVariant, rc.KernelReason = "", ""
	return OpSpan{f}
}

// End ends the op's span. variant names what ran ("host", or the Loom kernels as
// "loom:kernels/FILE:SYMBOL[K=V,...] + ...") and reason why; with variant "" both are
// derived from what the op noted (rc.kernelVariant and rc.kernelReason, the kernels it
// requested through rc.compile) and from its node and inputs. err, when not nil, is recorded
// on the span, which then has status Error.
func (sp OpSpan) End(variant, reason string, outs []tensor.Tensor, err error) {
	if sp.f != nil {
		sp.f.End(variant, reason, outs, err)
	}
}

// End ends the op's span (see OpSpan.End).
func (f *opFrame) End(variant, reason string, outs []tensor.Tensor, err error) {
	rc := f.rc
	t := rc.Trace
	kernels, planVariant, planReason := t.kernels, rc.KernelVariant, rc.KernelReason
	if f.parent {
		t.parent = f.prevParent
	}
	t.kernels = f.prevKernels
	rc.KernelVariant, rc.KernelReason = f.prevVariant, f.prevReason
	if f.span.IsRecording() {
		if variant == "" {
			variant, reason = deriveVariant(rc.Eng.Placements.Of(f.node), f.in, kernels, planVariant, planReason)
		}
		n := f.node
		domain := n.Domain
		if domain == "" {
			domain = "ai.onnx"
		}
		f.span.SetAttributes(AttrNode.String(n.Name), AttrOpType.String(n.OpType), AttrDomain.String(domain),
			AttrVariant.String(variant), AttrReason.String(reason), AttrExecutor.String(t.executor),
			AttrInputShapes.StringSlice(describeTensors(f.in)), AttrOutputShapes.StringSlice(describeTensors(outs)))
		recordError(f.span, err)
	}
	f.span.End()
}

// noteKernel records that the running op requested a Loom kernel, for its span's variant: an
// op that runs several kernel plans (a fused op) names all their kernels.
func (rc *RunCtx) noteKernel(file, symbol string, config map[string]string) {
	t := rc.Trace
	if t == nil {
		return
	}
	v := ops.Describe(ops.KernelCall{File: file, Symbol: symbol, Config: config})
	if !slices.Contains(t.kernels, v) {
		t.kernels = append(t.kernels, v)
	}
}

// deriveVariant says what ran for a node placed at pl on inputs in, and why: kernels are the
// Loom kernels the op requested, planVariant and planReason what its last kernel plan noted.
// A node no kernel may run has its placement's reason (internal/ep); for the others the
// reason refines the placement with what the run found.
func deriveVariant(pl ep.Placement, in []tensor.Tensor, kernels []string, planVariant, planReason string) (variant, reason string) {
	if len(kernels) > 0 {
		variant = "loom:" + strings.Join(kernels, " + ")
	} else if planVariant != "" {
		variant = planVariant
	}
	if variant != "" {
		if planReason == "" {
			planReason = "Loom kernel covers " + describeInputs(in)
		}
		return variant, planReason
	}
	if !pl.Kernel {
		return VariantHost, pl.HostReason()
	}
	var others []string
	for _, t := range in {
		if t.IsValid() && t.DType() != graph.Float && !slices.Contains(others, t.DType().String()) {
			others = append(others, t.DType().String())
		}
	}
	if len(others) > 0 {
		return VariantHost, "host: no Loom kernel for " + strings.Join(others, ", ") + " inputs"
	}
	for _, t := range in {
		if t.IsValid() && tensor.Box(t) == nil && t.Len() == 0 {
			return VariantHost, "host: empty tensors need no kernel"
		}
	}
	return VariantHost, "host: no Loom kernel covers " + describeInputs(in)
}

func describeInputs(in []tensor.Tensor) string {
	if len(in) == 0 {
		return "no inputs"
	}
	return strings.Join(describeTensors(in), ", ")
}

// describeTensors spells each tensor as TYPE[d0,d1,...]; an omitted optional one as "none".
func describeTensors(ts []tensor.Tensor) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = DescribeTensor(t)
	}
	return out
}

// DescribeTensor spells t as TYPE[d0,d1,...]; a sequence or optional by what it holds, an
// omitted optional as "none".
func DescribeTensor(t tensor.Tensor) string {
	if !t.IsValid() {
		return "none"
	}
	if tensor.Box(t) != nil {
		return tensor.Describe(tensor.Box(t), t.DType()) // a sequence or an optional
	}
	var b strings.Builder
	b.WriteString(t.DType().String())
	b.WriteByte('[')
	for i, d := range t.Dims() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(d, 10))
	}
	b.WriteByte(']')
	return b.String()
}

// recordError marks span failed with err; nothing when err is nil.
func recordError(span trace.Span, err error) {
	if err == nil {
		return
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}
