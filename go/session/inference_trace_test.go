package session

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/opt"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// recordingProvider is a TracerProvider whose ended spans the returned recorder keeps.
func recordingProvider(t testing.TB) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	return tp, rec
}

// mixedModel is y = (x + x)·(x + x) elementwise on float32 x [2, L], c = k + k on int64 k [L]
// and s = Shape(x): one op the elementwise Loom kernels cover, one they do not (int64) and
// one without a kernel, optimizations off so the nodes stay as written.
func mixedModel(t testing.TB) *graph.Model {
	g := &graph.Graph{Name: "mixed"}
	g.Inputs = []*graph.Value{
		graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.DimOf(2), graph.SymDim("L")})),
		graph.Input("k", graph.TensorType(graph.Int64, graph.Shape{graph.SymDim("L")})),
	}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{}), graph.Output("c", graph.Type{}), graph.Output("s", graph.Type{})}
	g.Nodes = []*graph.Node{
		graph.NewNode("addf", "Add", []string{"x", "x"}, []string{"xx"}),
		graph.NewNode("mulf", "Mul", []string{"xx", "xx"}, []string{"y"}),
		graph.NewNode("addi", "Add", []string{"k", "k"}, []string{"c"}),
		graph.NewNode("shape", "Shape", []string{"x"}, []string{"s"}),
	}
	m, err := graph.FromGraph("mixed", g, map[string]int64{"": 13})
	require.NoError(t, err)
	return m
}

func mixedFeeds(t testing.TB, l int) []tensor.NamedTensor {
	rnd := inferRand()
	k := make([]int64, l)
	for i := range k {
		k[i] = rnd.Int64N(1000) - 500
	}
	return []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{2, int64(l)}, randomF32(rnd, 2*l))}, {Name: "k", Tensor: tensor.MustTensor([]int64{int64(l)}, k)}}
}

// The executors a test runs under: the interpreter (node by node) or compiled run plans.
var traceExecutors = []string{exec.ExecutorInterpreter, exec.ExecutorPlan}

// tracedOptions are the options of a host session sending spans to tp (the global provider
// when nil) and running executor.
func tracedOptions(tp trace.TracerProvider, executor string, more ...LoadOption) []LoadOption {
	opts := []LoadOption{WithExecutionProvider(ProviderHost)}
	if tp != nil {
		opts = append(opts, WithTracerProvider(tp))
	}
	if executor == exec.ExecutorInterpreter {
		opts = append(opts, WithOption(OptionRunPlan, "0"))
	}
	return append(opts, more...)
}

func newMixedSession(t testing.TB, tp trace.TracerProvider, executor string) *InferenceSession {
	s, err := FromGraph(mixedModel(t), tracedOptions(tp, executor, WithOptimizationLevel(opt.LevelDisabled))...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// executedNodes are the names of the nodes a run of s executes, in order: every node of the
// graph for the interpreter; for a plan, the nodes of its kernel segments and host steps
// (folded and aliasing nodes run when the plan is built).
func executedNodes(t *testing.T, s *InferenceSession, executor string) []string {
	var names []string
	if executor == exec.ExecutorInterpreter {
		for _, n := range s.Graph().Graph.Nodes {
			names = append(names, n.Name)
		}
		return names
	}
	plans := s.ExecutionPlans()
	require.Len(t, plans, 1)
	require.True(t, plans[0].Planned, plans[0].Reason)
	for _, seg := range plans[0].Segments {
		names = append(names, seg...)
	}
	for _, h := range plans[0].HostSteps {
		names = append(names, h.Node)
	}
	return names
}

// parentContext starts a span of tp that the session's spans should hang under.
func parentContext(t testing.TB, tp trace.TracerProvider) (context.Context, trace.Span) {
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	t.Cleanup(func() { span.End() })
	return ctx, span
}

func attrOf(s sdktrace.ReadOnlySpan, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func spansNamed(spans []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// childrenOf returns the spans whose parent is p, in start order.
func childrenOf(spans []sdktrace.ReadOnlySpan, p sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Parent().SpanID() == p.SpanContext().SpanID() && s.Parent().TraceID() == p.SpanContext().TraceID() {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	return out
}

// TestTraceSpansPerOp checks the interpreter's spans: one per graph node, in order, with the
// variant that ran.
func TestTraceSpansPerOp(t *testing.T) {
	tp, rec := recordingProvider(t)
	s := newMixedSession(t, tp, exec.ExecutorInterpreter)
	ctx, parent := parentContext(t, tp)
	const l = 5
	_, err := s.Run(ctx, mixedFeeds(t, l))
	require.NoError(t, err)

	spans := rec.Ended()
	runs := spansNamed(spans, "loom.Run")
	require.Len(t, runs, 1)
	run := runs[0]
	assert.Equal(t, parent.SpanContext().SpanID(), run.Parent().SpanID(), "the run hangs under the context's span")
	assert.Equal(t, parent.SpanContext().TraceID(), run.SpanContext().TraceID())
	assert.Equal(t, "mixed", attrOf(run, exec.AttrGraph).AsString())
	assert.Equal(t, "interpreter", attrOf(run, exec.AttrExecutor).AsString())
	assert.Equal(t, "run", attrOf(run, exec.AttrPhase).AsString())
	assert.Equal(t, []string{"x: float[2,5]", "k: int64[5]"}, attrOf(run, exec.AttrInputShapes).AsStringSlice())
	assert.Equal(t, []string{"float[2,5]", "int64[5]", "int64[2]"}, attrOf(run, exec.AttrOutputShapes).AsStringSlice())
	assert.Equal(t, codes.Unset, run.Status().Code)

	ops := childrenOf(spans, run)
	nodes := s.Graph().Graph.Nodes
	require.Len(t, ops, len(nodes), "one span per executed node")
	require.Len(t, spans, len(nodes)+1, "no spans besides the run's and its ops'")
	for i, n := range nodes {
		sp := ops[i]
		assert.Equal(t, n.OpType, sp.Name())
		assert.Equal(t, n.Name, attrOf(sp, exec.AttrNode).AsString())
		assert.Equal(t, n.OpType, attrOf(sp, exec.AttrOpType).AsString())
		assert.Equal(t, "ai.onnx", attrOf(sp, exec.AttrDomain).AsString())
		assert.Equal(t, "interpreter", attrOf(sp, exec.AttrExecutor).AsString())
		assert.Equal(t, codes.Unset, sp.Status().Code)
		assert.False(t, sp.EndTime().Before(sp.StartTime()))
	}
	byNode := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range ops {
		byNode[attrOf(sp, exec.AttrNode).AsString()] = sp
	}
	addf := byNode["addf"]
	assert.Equal(t, "loom:kernels/elementwise.loom:binary_flat[OP=0,XS=0,YS=0]", attrOf(addf, exec.AttrVariant).AsString())
	assert.Contains(t, attrOf(addf, exec.AttrReason).AsString(), "Loom kernel")
	assert.Equal(t, []string{"float[2,5]", "float[2,5]"}, attrOf(addf, exec.AttrInputShapes).AsStringSlice())
	assert.Equal(t, []string{"float[2,5]"}, attrOf(addf, exec.AttrOutputShapes).AsStringSlice())
	assert.Equal(t, "loom:kernels/elementwise.loom:binary_flat[OP=2,XS=0,YS=0]", attrOf(byNode["mulf"], exec.AttrVariant).AsString())

	addi := byNode["addi"]
	assert.Equal(t, "host", attrOf(addi, exec.AttrVariant).AsString())
	assert.Equal(t, "host: no Loom kernel for int64 inputs", attrOf(addi, exec.AttrReason).AsString())
	shape := byNode["shape"]
	assert.Equal(t, "host", attrOf(shape, exec.AttrVariant).AsString())
	assert.Equal(t, "host: no Loom kernel for Shape", attrOf(shape, exec.AttrReason).AsString())
	assert.Equal(t, []string{"int64[2]"}, attrOf(shape, exec.AttrOutputShapes).AsStringSlice())
}

// TestTraceOnlyUnderASpan checks that only runs whose context carries a span are traced.
func TestTraceOnlyUnderASpan(t *testing.T) {
	for _, executor := range traceExecutors {
		t.Run(executor, func(t *testing.T) {
			tp, rec := recordingProvider(t)
			s := newMixedSession(t, tp, executor)
			for range 2 { // the plan's signature is traced and planned by the first
				_, err := s.Run(context.Background(), mixedFeeds(t, 3))
				require.NoError(t, err)
			}
			assert.Empty(t, rec.Ended(), "no spans from a context without a span")

			ctx, _ := parentContext(t, tp)
			_, err := s.Run(ctx, mixedFeeds(t, 3))
			require.NoError(t, err)
			traced := len(rec.Ended())
			assert.Equal(t, 1+len(executedNodes(t, s, executor)), traced)

			cancelable, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, err = s.Run(cancelable, mixedFeeds(t, 3))
			require.NoError(t, err)
			assert.Len(t, rec.Ended(), traced, "no spans again from a context without a span")

			// A remote parent (a span context propagated into ctx) is a span too.
			remote := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, Remote: true}))
			_, err = s.Run(remote, mixedFeeds(t, 3))
			require.NoError(t, err)
			runs := spansNamed(rec.Ended(), "loom.Run")
			require.Len(t, runs, 2)
			assert.Equal(t, trace.TraceID{1}, runs[1].SpanContext().TraceID(), "the run joins the remote trace")
			assert.Equal(t, trace.SpanID{2}, runs[1].Parent().SpanID())
		})
	}
}

func TestTraceUsesGlobalProviderByDefault(t *testing.T) {
	tp, rec := recordingProvider(t)
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	s := newMixedSession(t, nil, exec.ExecutorInterpreter)
	ctx, parent := parentContext(t, tp)
	_, err := s.Run(ctx, mixedFeeds(t, 2))
	require.NoError(t, err)
	runs := spansNamed(rec.Ended(), "loom.Run")
	require.Len(t, runs, 1)
	assert.Equal(t, parent.SpanContext().SpanID(), runs[0].Parent().SpanID(), "the run hangs under the context's span")
}

// TestTracePlanExecutor checks the spans of a compiled run plan: one per executed step, all
// children of the run's span, kernel steps naming their kernels.
func TestTracePlanExecutor(t *testing.T) {
	tp, rec := recordingProvider(t)
	s := newMixedSession(t, tp, exec.ExecutorPlan)
	// A signature's first run is interpreted (and traced to build the plan); the next ones
	// run the plan.
	_, err := s.Run(context.Background(), mixedFeeds(t, 6))
	require.NoError(t, err)
	tctx, _ := parentContext(t, tp) // the runs in tctx are traced
	for range 2 {
		_, err := s.Run(tctx, mixedFeeds(t, 6))
		require.NoError(t, err)
	}
	spans := rec.Ended()
	runs := spansNamed(spans, "loom.Run")
	require.Len(t, runs, 2)
	want := executedNodes(t, s, exec.ExecutorPlan)
	require.NotEmpty(t, want)
	for _, run := range runs {
		assert.Equal(t, exec.ExecutorPlan, attrOf(run, exec.AttrExecutor).AsString())
		ops := childrenOf(spans, run)
		var got []string
		for _, sp := range ops {
			got = append(got, attrOf(sp, exec.AttrNode).AsString())
			assert.Equal(t, exec.ExecutorPlan, attrOf(sp, exec.AttrExecutor).AsString())
			assert.Empty(t, childrenOf(spans, sp), "plan steps are siblings")
			assert.NotEmpty(t, attrOf(sp, exec.AttrReason).AsString())
			switch attrOf(sp, exec.AttrNode).AsString() {
			case "addf":
				assert.Equal(t, "loom:kernels/elementwise.loom:binary_flat[OP=0,XS=0,YS=0]", attrOf(sp, exec.AttrVariant).AsString())
			case "addi":
				assert.Equal(t, "host", attrOf(sp, exec.AttrVariant).AsString())
			}
		}
		assert.ElementsMatch(t, want, got)
	}
	assert.Len(t, spans, len(runs)*(1+len(want)))
}

func TestTraceLoopBodyNestsUnderLoop(t *testing.T) {
	for _, executor := range traceExecutors {
		t.Run(executor, func(t *testing.T) {
			rnd := inferRand()
			const l = 4
			k, w := randomF32(rnd, l), randomF32(rnd, l)
			tp, rec := recordingProvider(t)
			s, err := FromGraph(loopModel(t, k, w), tracedOptions(tp, executor)...)
			require.NoError(t, err)
			defer s.Close()
			n := 2 + rnd.IntN(4)
			feeds := []tensor.NamedTensor{{Name: "n", Tensor: tensor.MustTensor([]int64{}, []int64{int64(n)})}, {Name: "x", Tensor: tensor.MustTensor([]int64{l}, randomF32(rnd, l))}}
			if executor == exec.ExecutorPlan { // the signature's first run builds the plan
				_, err = s.Run(context.Background(), feeds)
				require.NoError(t, err)
			}
			tctx, _ := parentContext(t, tp) // the runs in tctx are traced
			_, err = s.Run(tctx, feeds)
			require.NoError(t, err)

			spans := rec.Ended()
			runs := spansNamed(spans, "loom.Run")
			require.Len(t, runs, 1)
			assert.Equal(t, executor, attrOf(runs[0], exec.AttrExecutor).AsString())
			top := childrenOf(spans, runs[0])
			require.Len(t, top, 1)
			loop := top[0]
			assert.Equal(t, "Loop", loop.Name())
			assert.Equal(t, "host", attrOf(loop, exec.AttrVariant).AsString())
			assert.True(t, strings.HasPrefix(attrOf(loop, exec.AttrReason).AsString(), "host"), attrOf(loop, exec.AttrReason).AsString())

			body := childrenOf(spans, loop)
			bodyNodes := s.Graph().Graph.Nodes[0].Attr("body").Graph.Nodes
			require.Len(t, body, n*len(bodyNodes), "every iteration's body ops nest under the Loop span")
			require.Len(t, spans, 2+n*len(bodyNodes))
			for i, sp := range body {
				node := bodyNodes[i%len(bodyNodes)]
				assert.Equal(t, node.OpType, sp.Name())
				assert.Equal(t, node.Name, attrOf(sp, exec.AttrNode).AsString())
				assert.Empty(t, childrenOf(spans, sp))
				assert.False(t, sp.StartTime().Before(loop.StartTime()))
				assert.False(t, sp.EndTime().After(loop.EndTime()))
				switch node.OpType {
				case "Mul":
					assert.Equal(t, "loom:kernels/elementwise.loom:binary_flat[OP=2,XS=0,YS=0]", attrOf(sp, exec.AttrVariant).AsString())
				case "Add":
					assert.Equal(t, "loom:kernels/elementwise.loom:binary_flat[OP=0,XS=0,YS=0]", attrOf(sp, exec.AttrVariant).AsString())
				case "Identity":
					assert.Equal(t, "host", attrOf(sp, exec.AttrVariant).AsString())
					assert.Equal(t, "host: no Loom kernel for Identity", attrOf(sp, exec.AttrReason).AsString())
				}
			}
		})
	}
}

func TestTraceIfBranchNestsUnderIf(t *testing.T) {
	for _, executor := range traceExecutors {
		t.Run(executor, func(t *testing.T) {
			rnd := inferRand()
			tp, rec := recordingProvider(t)
			s, err := FromGraph(ifModel(t, randomF32(rnd, 3)), tracedOptions(tp, executor)...)
			require.NoError(t, err)
			defer s.Close()
			feeds := []tensor.NamedTensor{{Name: "c", Tensor: tensor.MustTensor([]int64{}, []bool{false})}, {Name: "x", Tensor: tensor.MustTensor([]int64{3}, randomF32(rnd, 3))}}
			if executor == exec.ExecutorPlan { // the signature's first run builds the plan
				_, err = s.Run(context.Background(), feeds)
				require.NoError(t, err)
			}
			tctx, _ := parentContext(t, tp) // the runs in tctx are traced
			_, err = s.Run(tctx, feeds)
			require.NoError(t, err)
			spans := rec.Ended()
			ifs := spansNamed(spans, "If")
			var branch []sdktrace.ReadOnlySpan
			if executor == exec.ExecutorPlan {
				// The condition is a specialized input: the plan inlines the else branch, whose
				// op runs as a step of the run.
				require.Empty(t, ifs)
				runs := spansNamed(spans, "loom.Run")
				require.Len(t, runs, 1)
				branch = childrenOf(spans, runs[0])
			} else {
				require.Len(t, ifs, 1)
				branch = childrenOf(spans, ifs[0])
			}
			require.Len(t, branch, 1)
			assert.Equal(t, "Sub", branch[0].Name())
			assert.Equal(t, "else_op", attrOf(branch[0], exec.AttrNode).AsString())
			assert.Equal(t, "loom:kernels/elementwise.loom:binary_flat[OP=1,XS=0,YS=0]", attrOf(branch[0], exec.AttrVariant).AsString())
		})
	}
}

func TestTraceRecordsErrors(t *testing.T) {
	g := &graph.Graph{Name: "reshape"}
	g.Inputs = []*graph.Value{
		graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("N")})),
		graph.Input("shape", graph.TensorType(graph.Int64, graph.Shape{graph.DimOf(1)})),
	}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.Nodes = []*graph.Node{graph.NewNode("rs", "Reshape", []string{"x", "shape"}, []string{"y"})}
	m, err := graph.FromGraph("reshape", g, map[string]int64{"": 13})
	require.NoError(t, err)
	tp, rec := recordingProvider(t)
	s, err := FromGraph(m, WithExecutionProvider(ProviderHost), WithTracerProvider(tp))
	require.NoError(t, err)
	defer s.Close()
	tctx, _ := parentContext(t, tp) // the runs in tctx are traced
	// 6 elements cannot take the shape [4].
	_, runErr := s.Run(tctx, []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{6}, randomF32(inferRand(), 6))}, {Name: "shape", Tensor: tensor.MustTensor([]int64{1}, []int64{4})}})
	require.Error(t, runErr)

	spans := rec.Ended()
	ops := spansNamed(spans, "Reshape")
	require.Len(t, ops, 1)
	assert.Equal(t, codes.Error, ops[0].Status().Code)
	require.NotEmpty(t, ops[0].Events())
	assert.Equal(t, "exception", ops[0].Events()[0].Name)
	runs := spansNamed(spans, "loom.Run")
	require.Len(t, runs, 1)
	assert.Equal(t, codes.Error, runs[0].Status().Code)
	assert.Equal(t, runErr.Error(), runs[0].Status().Description)
}

// TestTraceConcurrentRuns runs Runs concurrently, traced and not (go test -race checks the
// sharing); every run span that appears is complete.
func TestTraceConcurrentRuns(t *testing.T) {
	for _, executor := range traceExecutors {
		t.Run(executor, func(t *testing.T) {
			tp, rec := recordingProvider(t)
			s := newMixedSession(t, tp, executor)
			ctx, _ := parentContext(t, tp)
			const runners, perRunner = 4, 5
			var wg sync.WaitGroup
			errs := make(chan error, runners*perRunner)
			for r := range runners {
				wg.Go(func() {
					for i := range perRunner {
						runCtx := ctx
						if (r+i)%2 == 1 {
							runCtx = context.Background()
						}
						_, err := s.Run(runCtx, mixedFeeds(t, 3))
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			spans := rec.Ended()
			runs := spansNamed(spans, "loom.Run")
			require.Len(t, runs, runners*perRunner/2, "the runs in a context with a span are traced")
			want := executedNodes(t, s, executor)
			for _, run := range runs {
				var got []string
				for _, sp := range childrenOf(spans, run) {
					got = append(got, attrOf(sp, exec.AttrNode).AsString())
				}
				if attrOf(run, exec.AttrExecutor).AsString() == exec.ExecutorPlan {
					assert.ElementsMatch(t, want, got)
				} else {
					// Runs racing to build the plan interpret the graph.
					assert.Equal(t, executedNodes(t, s, exec.ExecutorInterpreter), got)
				}
			}
			var ops int
			for _, run := range runs {
				ops += len(childrenOf(spans, run))
			}
			assert.Len(t, spans, len(runs)+ops, "every op span belongs to a run span")
		})
	}
}

func TestKernelCallDescribeMatchesTraceVariant(t *testing.T) {
	d := ops.Describe(ops.KernelCall{File: "linalg.loom", Symbol: "pool2d", Config: map[string]string{"MAX": "true", "COUNT_PAD": "false"}})
	assert.Equal(t, "kernels/linalg.loom:pool2d[COUNT_PAD=false,MAX=true]", d)
	assert.True(t, strings.HasPrefix(ops.Describe(ops.KernelCall{File: "linalg.loom", Symbol: "gemm"}), "kernels/linalg.loom:gemm"))
}

// benchmarkRunTracing runs the mixed model (two Loom kernel ops, two host ops) repeatedly
// under each executor, with tracing on through an SDK provider that records every span but
// exports nowhere, or off.
func benchmarkRunTracing(b *testing.B, enabled bool) {
	for _, executor := range traceExecutors {
		b.Run(executor, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider()
			b.Cleanup(func() { require.NoError(b, tp.Shutdown(context.Background())) })
			s := newMixedSession(b, tp, executor)
			ctx := context.Background()
			if enabled {
				ctx, _ = parentContext(b, tp)
			}
			feeds := mixedFeeds(b, 64)
			_, err := s.Run(ctx, feeds) // compile the kernels (and build the plan) outside the timing
			require.NoError(b, err)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := s.Run(ctx, feeds); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRunTracingDisabled(b *testing.B) { benchmarkRunTracing(b, false) }
func BenchmarkRunTracingEnabled(b *testing.B)  { benchmarkRunTracing(b, true) }

// BenchmarkOpStartDisabled is the per-op cost of the hooks when tracing is off.
func BenchmarkOpStartDisabled(b *testing.B) {
	rc := testRunCtx(nil, 0)
	n := graph.NewNode("n", "Add", nil, nil)
	b.ReportAllocs()
	for b.Loop() {
		rc.OpStart(n, nil).End("", "", nil, nil)
	}
}
