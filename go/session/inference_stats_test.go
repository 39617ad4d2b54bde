package session

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// loopModel is y = Loop(n){x = x*k + w} over x [L] with a symbolic L: k is a body initializer,
// w an outer one the body reads from the parent scope; scan collects x after every iteration.
func loopModel(t *testing.T, k, w []float32) *graph.Model {
	l := int64(len(k))
	body := &graph.Graph{Name: "body"}
	body.Inputs = []*graph.Value{
		graph.Input("iter", graph.TensorType(graph.Int64, graph.Shape{})),
		graph.Input("cond_in", graph.TensorType(graph.Bool, graph.Shape{})),
		graph.Input("x_in", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("L")})),
	}
	body.Outputs = []*graph.Value{
		graph.Output("cond_out", graph.TensorType(graph.Bool, graph.Shape{})),
		graph.Output("x_out", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("L")})),
		graph.Output("x_scan", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("L")})),
	}
	body.AddInitializer(graph.TensorFromFloat32("k", []int64{l}, k))
	body.Nodes = []*graph.Node{
		graph.NewNode("keep", "Identity", []string{"cond_in"}, []string{"cond_out"}),
		graph.NewNode("scale", "Mul", []string{"x_in", "k"}, []string{"xk"}),
		graph.NewNode("shift", "Add", []string{"xk", "w"}, []string{"x_out"}),
		graph.NewNode("copy", "Identity", []string{"x_out"}, []string{"x_scan"}),
	}
	g := &graph.Graph{Name: "loop"}
	g.Inputs = []*graph.Value{
		graph.Input("n", graph.TensorType(graph.Int64, graph.Shape{})),
		graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("L")})),
	}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{}), graph.Output("ys", graph.Type{})}
	g.AddInitializer(graph.TensorFromFloat32("w", []int64{l}, w))
	g.Nodes = []*graph.Node{
		graph.NewNode("loop", "Loop", []string{"n", "", "x"}, []string{"y", "ys"},
			&graph.Attribute{Name: "body", Type: graph.AttrGraph, Graph: body}),
	}
	m, err := graph.FromGraph("loop", g, map[string]int64{"": 13})
	require.NoError(t, err)
	return m
}

func loopReference(x, k, w []float32, n int) (last []float32, all []float32) {
	last = append([]float32{}, x...)
	for range n {
		for i := range last {
			last[i] = last[i]*k[i] + w[i]
		}
		all = append(all, last...)
	}
	return last, all
}

func TestControlFlowStatsLoopBuildsOncePerSignature(t *testing.T) {
	rnd := inferRand()
	const l = 5
	k, w := randomF32(rnd, l), randomF32(rnd, l)
	for i := range k {
		k[i] = 0.5 + 0.5*k[i] // keep |x| bounded over the iterations
	}
	s, err := FromGraph(loopModel(t, k, w), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, ControlFlowStats{}, s.ControlFlowStats())

	n := 3 + rnd.IntN(6)
	x := randomF32(rnd, l)
	outs, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "n", Tensor: tensor.MustTensor([]int64{}, []int64{int64(n)})}, {Name: "x", Tensor: tensor.MustTensor([]int64{l}, x)}})
	require.NoError(t, err)
	wantLast, wantAll := loopReference(x, k, w, n)
	got, err := tensor.TensorOf[float32](outs[0])
	require.NoError(t, err)
	assert.InDeltaSlice(t, wantLast, got, 1e-4)
	gotAll, err := tensor.TensorOf[float32](outs[1])
	require.NoError(t, err)
	assert.Equal(t, []int64{int64(n), l}, outs[1].Shape())
	assert.InDeltaSlice(t, wantAll, gotAll, 1e-4)
	assert.Equal(t, ControlFlowStats{Loop: SubgraphStats{Builds: 1, Runs: int64(n)}}, s.ControlFlowStats())

	// The same signature on a later Run reuses the prepared body.
	_, err = s.Run(context.Background(), []tensor.NamedTensor{{Name: "n", Tensor: tensor.MustTensor([]int64{}, []int64{int64(n)})}, {Name: "x", Tensor: tensor.MustTensor([]int64{l}, randomF32(rnd, l))}})
	require.NoError(t, err)
	assert.Equal(t, ControlFlowStats{Loop: SubgraphStats{Builds: 1, Runs: int64(2 * n)}}, s.ControlFlowStats())
}

func TestControlFlowStatsNewSignatureBuildsAgain(t *testing.T) {
	rnd := inferRand()
	// k and w of length 1 broadcast over any x length, so the body sees a new shape.
	s, err := FromGraph(loopModel(t, []float32{0.75}, randomF32(rnd, 1)), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	for _, l := range []int64{1, 4} {
		_, err = s.Run(context.Background(), []tensor.NamedTensor{{Name: "n", Tensor: tensor.MustTensor([]int64{}, []int64{2})}, {Name: "x", Tensor: tensor.MustTensor([]int64{l}, randomF32(rnd, int(l)))}})
		require.NoError(t, err)
	}
	assert.Equal(t, SubgraphStats{Builds: 2, Runs: 4}, s.ControlFlowStats().Loop)
}

// ifModel is y = If(c){x + w}{x - w}.
func ifModel(t *testing.T, w []float32) *graph.Model {
	l := int64(len(w))
	branch := func(name, op string) *graph.Graph {
		b := &graph.Graph{Name: name}
		b.Outputs = []*graph.Value{graph.Output(name+"_y", graph.TensorType(graph.Float, graph.Shape{graph.DimOf(l)}))}
		b.Nodes = []*graph.Node{graph.NewNode(name+"_op", op, []string{"x", "w"}, []string{name + "_y"})}
		return b
	}
	g := &graph.Graph{Name: "if"}
	g.Inputs = []*graph.Value{
		graph.Input("c", graph.TensorType(graph.Bool, graph.Shape{})),
		graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.DimOf(l)})),
	}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.AddInitializer(graph.TensorFromFloat32("w", []int64{l}, w))
	g.Nodes = []*graph.Node{graph.NewNode("if", "If", []string{"c"}, []string{"y"},
		&graph.Attribute{Name: "then_branch", Type: graph.AttrGraph, Graph: branch("then", "Add")},
		&graph.Attribute{Name: "else_branch", Type: graph.AttrGraph, Graph: branch("else", "Sub")})}
	m, err := graph.FromGraph("if", g, map[string]int64{"": 13})
	require.NoError(t, err)
	return m
}

func TestControlFlowStatsIf(t *testing.T) {
	rnd := inferRand()
	w := randomF32(rnd, 3)
	// The interpreter's body cache is what this counts: compiled plans inline an If whose
	// condition is a specialized input (TestPlanInlinesIfOnSpecializedCondition).
	s, err := FromGraph(ifModel(t, w), WithExecutionProvider(ProviderHost), WithOption(OptionRunPlan, "0"))
	require.NoError(t, err)
	defer s.Close()
	for _, c := range []bool{true, true, false} {
		x := randomF32(rnd, 3)
		outs, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "c", Tensor: tensor.MustTensor([]int64{}, []bool{c})}, {Name: "x", Tensor: tensor.MustTensor([]int64{3}, x)}})
		require.NoError(t, err)
		got, err := tensor.TensorOf[float32](outs[0])
		require.NoError(t, err)
		for i := range x {
			want := x[i] - w[i]
			if c {
				want = x[i] + w[i]
			}
			assert.InDelta(t, want, got[i], 1e-6)
		}
	}
	// One build per branch, one run per If.
	assert.Equal(t, ControlFlowStats{If: SubgraphStats{Builds: 2, Runs: 3}}, s.ControlFlowStats())
}

func TestCacheStatsWarmupThenRun(t *testing.T) {
	rnd := inferRand()
	const in, out = 6, 4
	s, err := FromGraph(mlpModel(t, randomF32(rnd, in*out), randomF32(rnd, out), in, out), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, CacheStats{}, s.CacheStats())

	rows := int64(2 + rnd.IntN(5))
	require.NoError(t, s.Warmup(context.Background(), map[string][]int64{"x": {rows, in}}))
	st := s.CacheStats()
	assert.Positive(t, st.Warmup.Misses, "the warmup compiles the model's kernels")
	assert.Zero(t, st.Warmup.Hits)
	assert.LessOrEqual(t, st.Warmup.Compiles, st.Warmup.Misses)
	assert.Equal(t, KernelCacheCounts{}, st.Run)
	// Every session miss is a shipped kernel or one request to the session's Loom compiler.
	assert.Equal(t, st.Warmup.Misses-st.Warmup.Shipped, st.Compiler.Hits+st.Compiler.Misses)
	assert.Equal(t, st.Warmup.Compiles, st.Compiler.Misses)

	x := randomF32(rnd, int(rows)*in)
	outs, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{rows, in}, x)}})
	require.NoError(t, err)
	require.Len(t, outs, 1)
	after := s.CacheStats()
	assert.Equal(t, st.Warmup, after.Warmup)
	// The warmup ran the signature's plan (built from its shapes) and made its instance, which
	// holds its kernels: the run asks the cache for none, let alone a new one.
	assert.Equal(t, KernelCacheCounts{}, after.Run, "the run uses the warmed-up plan's kernels")
	plans := s.ExecutionPlans()
	require.Len(t, plans, 1)
	assert.True(t, plans[0].Planned, plans[0].Reason)
	assert.Zero(t, after.Run.Compiles)
	assert.Equal(t, st.Compiler, after.Compiler)
}

func TestWarmupErrors(t *testing.T) {
	rnd := inferRand()
	s, err := FromGraph(mlpModel(t, randomF32(rnd, 8), randomF32(rnd, 2), 4, 2), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()

	err = s.Warmup(context.Background(), map[string][]int64{"x": {1, 4}, "nope": {1}})
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	assert.Contains(t, err.Error(), `"nope"`)
	assert.Contains(t, err.Error(), "inputs: x")

	err = s.Warmup(context.Background(), map[string][]int64{"x": {4}})
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "rank 1")

	err = s.Warmup(context.Background(), map[string][]int64{"x": {2, 5}})
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "dimension 1 is 5")

	err = s.Warmup(context.Background(), map[string][]int64{"x": {-1, 4}})
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "negative")

	// x has a symbolic batch dimension, so it cannot be left out.
	err = s.Warmup(context.Background(), nil)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	assert.Contains(t, err.Error(), `input "x"`)
	assert.Contains(t, err.Error(), "Warmup needs its shape")

	assert.Equal(t, CacheStats{}, s.CacheStats(), "failed warmups compile nothing")

	require.NoError(t, s.Close())
	err = s.Warmup(context.Background(), map[string][]int64{"x": {1, 4}})
	require.ErrorIs(t, err, tensor.ErrClosed)
}

func TestWarmupUsesDeclaredShapes(t *testing.T) {
	rnd := inferRand()
	s, err := FromGraph(ifModel(t, randomF32(rnd, 3)), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	// Both inputs have fixed shapes; the random condition is non-zero, so then runs.
	require.NoError(t, s.Warmup(context.Background(), nil))
	assert.Equal(t, ControlFlowStats{If: SubgraphStats{Builds: 1, Runs: 1}}, s.ControlFlowStats())
}

func TestRandomNonZero(t *testing.T) {
	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for _, dt := range []tensor.DType{graph.Float, graph.Double, graph.Int64, graph.Int32, graph.Bool, graph.Float16} {
		tn, err := randomNonZero(rnd, dt, []int64{3, 7})
		require.NoError(t, err, dt)
		assert.Equal(t, dt, tn.DType())
		for i, v := range tensor.Float64s(tn) {
			assert.NotZero(t, v, "%s element %d", dt, i)
		}
	}
}

func TestDeviceID(t *testing.T) {
	s, err := FromGraph(mlpModel(t, randomF32(inferRand(), 4), randomF32(inferRand(), 2), 2, 2), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	id := s.DeviceID()
	assert.Equal(t, "host", id.Backend)
	assert.Equal(t, 0, id.Index)
	assert.Equal(t, s.eng.Ctx.Target(), id.Target)
	assert.True(t, strings.HasPrefix(id.Target, "host-"), id.Target)
	assert.Equal(t, "host:0 "+id.Target, id.String())
}

// scanModel is a cumulative sum over the rows of xs [T, L]: s += xs[t], emitting s each step.
func scanModel(t *testing.T) *graph.Model {
	row := graph.Shape{graph.SymDim("L")}
	body := &graph.Graph{Name: "body"}
	body.Inputs = []*graph.Value{graph.Input("s_in", graph.TensorType(graph.Float, row)), graph.Input("x_t", graph.TensorType(graph.Float, row))}
	body.Outputs = []*graph.Value{graph.Output("s_out", graph.TensorType(graph.Float, row)), graph.Output("y_t", graph.TensorType(graph.Float, row))}
	body.Nodes = []*graph.Node{
		graph.NewNode("acc", "Add", []string{"s_in", "x_t"}, []string{"s_out"}),
		graph.NewNode("emit", "Identity", []string{"s_out"}, []string{"y_t"}),
	}
	g := &graph.Graph{Name: "scan"}
	g.Inputs = []*graph.Value{
		graph.Input("s0", graph.TensorType(graph.Float, row)),
		graph.Input("xs", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("T"), graph.SymDim("L")})),
	}
	g.Outputs = []*graph.Value{graph.Output("s", graph.Type{}), graph.Output("ys", graph.Type{})}
	g.Nodes = []*graph.Node{graph.NewNode("scan", "Scan", []string{"s0", "xs"}, []string{"s", "ys"},
		graph.IntAttr("num_scan_inputs", 1), &graph.Attribute{Name: "body", Type: graph.AttrGraph, Graph: body})}
	m, err := graph.FromGraph("scan", g, map[string]int64{"": 13})
	require.NoError(t, err)
	return m
}

func TestControlFlowStatsScan(t *testing.T) {
	rnd := inferRand()
	s, err := FromGraph(scanModel(t), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	const l = 3
	steps := 2 + rnd.IntN(6)
	s0, xs := randomF32(rnd, l), randomF32(rnd, steps*l)
	outs, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "s0", Tensor: tensor.MustTensor([]int64{l}, s0)}, {Name: "xs", Tensor: tensor.MustTensor([]int64{int64(steps), l}, xs)}})
	require.NoError(t, err)
	want := append([]float32{}, s0...)
	var wantAll []float32
	for st := range steps {
		for i := range want {
			want[i] += xs[st*l+i]
		}
		wantAll = append(wantAll, want...)
	}
	got, err := tensor.TensorOf[float32](outs[0])
	require.NoError(t, err)
	assert.InDeltaSlice(t, want, got, 1e-5)
	gotAll, err := tensor.TensorOf[float32](outs[1])
	require.NoError(t, err)
	assert.InDeltaSlice(t, wantAll, gotAll, 1e-5)
	assert.Equal(t, ControlFlowStats{Scan: SubgraphStats{Builds: 1, Runs: int64(steps)}}, s.ControlFlowStats())
}

// TestControlFlowStatsConcurrentRuns shares the prepared body between concurrent runs (go test
// -race checks the sharing) and still builds it once.
func TestControlFlowStatsConcurrentRuns(t *testing.T) {
	rnd := inferRand()
	const l, n, runs = 4, 5, 6
	k, w := randomF32(rnd, l), randomF32(rnd, l)
	s, err := FromGraph(loopModel(t, k, w), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	xs := make([][]float32, runs)
	for i := range xs {
		xs[i] = randomF32(rnd, l)
	}
	errs := make(chan error, runs)
	results := make([][]float32, runs)
	for i := range runs {
		go func() {
			outs, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "n", Tensor: tensor.MustTensor([]int64{}, []int64{n})}, {Name: "x", Tensor: tensor.MustTensor([]int64{l}, xs[i])}})
			if err == nil {
				results[i], err = tensor.TensorOf[float32](outs[0])
			}
			errs <- err
		}()
	}
	for range runs {
		require.NoError(t, <-errs)
	}
	for i := range runs {
		want, _ := loopReference(xs[i], k, w, n)
		assert.InDeltaSlice(t, want, results[i], 1e-3)
	}
	assert.Equal(t, SubgraphStats{Builds: 1, Runs: runs * n}, s.ControlFlowStats().Loop)
}
