package session

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/plan"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// planPair opens two sessions of one model: with compiled run plans (the default) and
// interpreting every run.
func planPair(t *testing.T, load func(opts ...LoadOption) (*InferenceSession, error)) (planned, interpreted *InferenceSession) {
	t.Helper()
	var err error
	planned, err = load(WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, planned.Close()) })
	interpreted, err = load(WithExecutionProvider(ProviderHost), WithOption(OptionRunPlan, "0"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, interpreted.Close()) })
	return planned, interpreted
}

// requireSameOutputs runs both sessions on feeds and requires equal outputs within tol. The
// planned session runs twice: a signature's first run is interpreted (and traced to build
// the plan), the second runs the plan.
func requireSameOutputs(t *testing.T, planned, interpreted *InferenceSession, feeds []tensor.NamedTensor, tol float64) {
	t.Helper()
	want, err := interpreted.Run(context.Background(), feeds)
	require.NoError(t, err)
	_, err = planned.Run(context.Background(), feeds)
	require.NoError(t, err)
	got, err := planned.Run(context.Background(), feeds)
	require.NoError(t, err)
	requireOutputsMatch(t, want, got, tol)
}

// requireOutputsMatch requires got to have want's types and shapes and its values within tol
// (relative, with an absolute floor of tol).
func requireOutputsMatch(t *testing.T, want, got []tensor.Tensor, tol float64) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].DType(), got[i].DType(), "output %d", i)
		require.Equal(t, want[i].Dims(), got[i].Dims(), "output %d", i)
		w, g := tensor.Float64s(want[i]), tensor.Float64s(got[i])
		for j := range w {
			require.InDelta(t, w[j], g[j], tol*(1+math.Abs(w[j])), "output %d element %d", i, j)
		}
	}
}

func TestPlanMatchesInterpreterOnModels(t *testing.T) {
	rnd := inferRand()
	dir := filepath.Join("testdata", "models")
	t.Run("tiny_encoder", func(t *testing.T) {
		planned, interpreted := planPair(t, func(opts ...LoadOption) (*InferenceSession, error) {
			return Load(filepath.Join(dir, "tiny_encoder.onnx"), opts...)
		})
		for _, shape := range [][]int64{{2, 7, 64}, {1, 3, 64}, {2, 7, 64}} {
			x := tensor.MustTensor(shape, randomF32(rnd, ops.Numel(shape)))
			requireSameOutputs(t, planned, interpreted, []tensor.NamedTensor{{Name: "x", Tensor: x}}, 1e-5)
		}
		plans := planned.ExecutionPlans()
		require.Len(t, plans, 2, "one plan per input signature")
		for _, p := range plans {
			require.True(t, p.Planned, p.Reason)
			assert.NotEmpty(t, p.Segments)
			assert.Positive(t, p.KernelSteps)
			assert.Positive(t, p.Folded, "the Shape arithmetic folds")
		}
	})
	t.Run("tiny_gpt_kv", func(t *testing.T) {
		planned, interpreted := planPair(t, func(opts ...LoadOption) (*InferenceSession, error) {
			return Load(filepath.Join(dir, "tiny_gpt_kv.onnx"), opts...)
		})
		for _, c := range []struct{ b, t, s int64 }{{1, 4, 0}, {1, 1, 4}, {2, 3, 5}, {1, 1, 4}} {
			ids := make([]int64, c.b*c.t)
			for i := range ids {
				ids[i] = rnd.Int64N(512)
			}
			feeds := []tensor.NamedTensor{{Name: "input_ids", Tensor: tensor.MustTensor([]int64{c.b, c.t}, ids)}}
			for _, name := range []string{"past_k0", "past_v0", "past_k1", "past_v1"} {
				shape := []int64{c.b, 4, c.s, 16}
				feeds = append(feeds, tensor.NamedTensor{Name: name, Tensor: tensor.MustTensor(shape, randomF32(rnd, ops.Numel(shape)))})
			}
			requireSameOutputs(t, planned, interpreted, feeds, 1e-5)
		}
		for _, p := range planned.ExecutionPlans() {
			require.True(t, p.Planned, p.Reason)
		}
	})
}

// nonZeroModel is y = NonZero(x > 0) cast to float and scaled: its output shape depends on
// the data, which the plan's guard must catch.
func nonZeroModel(t *testing.T) *graph.Model {
	g := &graph.Graph{Name: "nonzero"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(8)))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.AddInitializer(graph.TensorFromFloat32("zero", []int64{}, []float32{0}))
	g.AddInitializer(graph.TensorFromFloat32("two", []int64{}, []float32{2}))
	g.Nodes = []*graph.Node{
		graph.NewNode("relu", "Relu", []string{"x"}, []string{"r"}),
		graph.NewNode("gt", "Greater", []string{"r", "zero"}, []string{"mask"}),
		graph.NewNode("nz", "NonZero", []string{"mask"}, []string{"idx"}),
		graph.NewNode("cast", "Cast", []string{"idx"}, []string{"f"}, graph.IntAttr("to", int64(graph.Float))),
		graph.NewNode("mul", "Mul", []string{"f", "two"}, []string{"y"}),
	}
	m, err := graph.FromGraph(g.Name, g, map[string]int64{"": 13})
	require.NoError(t, err)
	return m
}

func TestPlanGuardCatchesDataDependentShapes(t *testing.T) {
	planned, interpreted := planPair(t, func(opts ...LoadOption) (*InferenceSession, error) {
		return FromGraph(nonZeroModel(t), opts...)
	})
	x := func(positive int) []tensor.NamedTensor {
		v := make([]float32, 8)
		for i := range v {
			v[i] = -1 - rand.Float32()
		}
		for _, i := range rand.Perm(8)[:positive] {
			v[i] = 1 + rand.Float32()
		}
		return []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{8}, v)}}
	}
	requireSameOutputs(t, planned, interpreted, x(3), 0)
	require.True(t, planned.ExecutionPlans()[0].Planned)
	requireSameOutputs(t, planned, interpreted, x(3), 0) // same shapes: the plan holds
	requireSameOutputs(t, planned, interpreted, x(5), 0) // NonZero's shape changes: guarded
	p := planned.ExecutionPlans()[0]
	require.False(t, p.Planned)
	require.Contains(t, p.Reason, "data-dependent")
	requireSameOutputs(t, planned, interpreted, x(2), 0)
}

func TestPlanRunsNondeterministicOpsEachRun(t *testing.T) {
	g := &graph.Graph{Name: "random"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(16)))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.Nodes = []*graph.Node{
		graph.NewNode("r", "RandomNormal", nil, []string{"noise"}, graph.IntsAttr("shape", 16)),
		graph.NewNode("add", "Add", []string{"x", "noise"}, []string{"y"}),
	}
	m, err := graph.FromGraph(g.Name, g, map[string]int64{"": 13})
	require.NoError(t, err)
	s, err := FromGraph(m, WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	feeds := []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{16}, randomF32(inferRand(), 16))}}
	a, err := s.Run(context.Background(), feeds)
	require.NoError(t, err)
	b, err := s.Run(context.Background(), feeds)
	require.NoError(t, err)
	require.NotEqual(t, a[0].Data(), b[0].Data(), "the noise is drawn anew each run, never folded")
	require.True(t, s.ExecutionPlans()[0].Planned)
}

func TestPlanConcurrentRuns(t *testing.T) {
	planned, interpreted := planPair(t, func(opts ...LoadOption) (*InferenceSession, error) {
		return Load(filepath.Join("testdata", "models", "tiny_encoder.onnx"), opts...)
	})
	rnd := inferRand()
	const runs = 12
	feeds := make([][]tensor.NamedTensor, runs)
	want := make([][]tensor.Tensor, runs)
	for i := range feeds {
		x := tensor.MustTensor([]int64{1, 5, 64}, randomF32(rnd, 5*64))
		feeds[i] = []tensor.NamedTensor{{Name: "x", Tensor: x}}
		var err error
		want[i], err = interpreted.Run(context.Background(), feeds[i])
		require.NoError(t, err)
	}
	_, err := planned.Run(context.Background(), feeds[0]) // traces the signature's plan
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, runs)
	got := make([][]tensor.Tensor, runs)
	for i := range feeds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = planned.Run(context.Background(), feeds[i])
		}()
	}
	wg.Wait()
	for i := range feeds {
		require.NoError(t, errs[i])
		w, g := tensor.Float64s(want[i][0]), tensor.Float64s(got[i][0])
		for j := range w {
			require.InDelta(t, w[j], g[j], 1e-5*(1+math.Abs(w[j])), "run %d element %d", i, j)
		}
	}
}

// The arena placement never lets two slots that are live at the same step overlap.
func TestPlanSlotPlacementProperty(t *testing.T) {
	rnd := inferRand()
	for trial := 0; trial < 300; trial++ {
		tmpl := &plan.Template{}
		steps := 1 + rnd.IntN(40)
		for i := 0; i < 1+rnd.IntN(60); i++ {
			first := rnd.IntN(steps+1) - 1
			last := first + rnd.IntN(steps-first+1)
			tmpl.Slots = append(tmpl.Slots, plan.PlanSlot{Bytes: int64(rnd.IntN(5000)), First: first, Last: last})
		}
		tmpl.PlaceSlots()
		var total int64
		for i, a := range tmpl.Slots {
			total += a.Bytes
			require.Zero(t, a.Offset%plan.Align)
			require.LessOrEqual(t, a.Offset+a.Bytes, tmpl.ArenaBytes)
			for j, b := range tmpl.Slots[:i] {
				liveTogether := a.First <= b.Last && b.First <= a.Last
				disjoint := a.Offset+max(a.Bytes, 4) <= b.Offset || b.Offset+max(b.Bytes, 4) <= a.Offset
				require.True(t, !liveTogether || disjoint, "trial %d: slots %d %+v and %d %+v", trial, i, a, j, b)
			}
		}
	}
}

func BenchmarkPlanVsInterpreter(b *testing.B) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, mode := range []string{"plan", "interpreter"} {
		b.Run(fmt.Sprintf("tiny_encoder/%s", mode), func(b *testing.B) {
			opts := []LoadOption{WithExecutionProvider(ProviderHost), WithIntraOpThreads(1)}
			if mode == "interpreter" {
				opts = append(opts, WithOption(OptionRunPlan, "0"))
			}
			s, err := Load(filepath.Join("testdata", "models", "tiny_encoder.onnx"), opts...)
			require.NoError(b, err)
			defer s.Close()
			feeds := []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{1, 16, 64}, randomF32(rnd, 16*64))}}
			_, err = s.Run(context.Background(), feeds)
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Run(context.Background(), feeds); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPlanTinyAdd is the per-run overhead of a planned run on a model of one Add over
// 1024 floats (one kernel step, one input copy, one output copy).
func BenchmarkPlanTinyAdd(b *testing.B) { benchmarkPlanTinyAdd(b, context.Background()) }

func benchmarkPlanTinyAdd(b *testing.B, ctx context.Context) {
	g := &graph.Graph{Name: "add"}
	g.Inputs = []*graph.Value{graph.Input("a", graph.TensorType(graph.Float, graph.ShapeOf(1024))),
		graph.Input("b", graph.TensorType(graph.Float, graph.ShapeOf(1024)))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.Nodes = []*graph.Node{graph.NewNode("add", "Add", []string{"a", "b"}, []string{"y"})}
	m, err := graph.FromGraph(g.Name, g, map[string]int64{"": 13})
	require.NoError(b, err)
	s, err := FromGraph(m, WithExecutionProvider(ProviderHost), WithIntraOpThreads(1))
	require.NoError(b, err)
	defer s.Close()
	rnd := rand.New(rand.NewPCG(3, 4))
	feeds := []tensor.NamedTensor{{Name: "a", Tensor: tensor.MustTensor([]int64{1024}, randomF32(rnd, 1024))},
		{Name: "b", Tensor: tensor.MustTensor([]int64{1024}, randomF32(rnd, 1024))}}
	for range 2 {
		_, err = s.Run(ctx, feeds)
		require.NoError(b, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Run(ctx, feeds); err != nil {
			b.Fatal(err)
		}
	}
}

// An If whose condition is a small integer or boolean input is inlined: the input is part of
// the plan's signature, and each value gets a plan running the branch it takes.
func TestPlanInlinesIfOnSpecializedCondition(t *testing.T) {
	rnd := inferRand()
	w := randomF32(rnd, 3)
	planned, interpreted := planPair(t, func(opts ...LoadOption) (*InferenceSession, error) {
		return FromGraph(ifModel(t, w), opts...)
	})
	for _, c := range []bool{true, false, true} {
		feeds := []tensor.NamedTensor{{Name: "c", Tensor: tensor.MustTensor([]int64{}, []bool{c})}, {Name: "x", Tensor: tensor.MustTensor([]int64{3}, randomF32(rnd, 3))}}
		requireSameOutputs(t, planned, interpreted, feeds, 0)
	}
	plans := planned.ExecutionPlans()
	require.Len(t, plans, 2, "one plan per condition value")
	for _, p := range plans {
		require.True(t, p.Planned, p.Reason)
		assert.Equal(t, 1, p.Inlined)
		assert.Equal(t, []string{"c"}, p.Specialized)
		assert.Empty(t, p.HostSteps, "the branch's op joins the kernel segment")
		assert.Contains(t, p.Signature, "c: tensor(bool)[] = {")
	}
}

// A kernel that stops a block at a bounds check fails the run, naming the node and kernel,
// instead of returning a partly written output; the next valid run works. (The indices are
// computed in the graph, so the plan cannot diagnose the node again on the run's inputs, as
// TestGatherOutOfRangeIsNamed's does: the kernel's own words are the error.)
func TestPlanReportsKernelBoundsViolations(t *testing.T) {
	rnd := inferRand()
	g := &graph.Graph{Name: "gather"}
	g.Inputs = []*graph.Value{graph.Input("idx", graph.TensorType(graph.Int64, graph.ShapeOf(3)))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.AddInitializer(graph.TensorFromFloat32("table", []int64{5, 4}, randomF32(rnd, 20)))
	g.AddInitializer(graph.TensorFromInt64("zero", []int64{1}, []int64{0}))
	g.Nodes = []*graph.Node{
		graph.NewNode("shift", "Add", []string{"idx", "zero"}, []string{"i"}),
		graph.NewNode("lookup", "Gather", []string{"table", "i"}, []string{"y"}),
	}
	m, err := graph.FromGraph(g.Name, g, map[string]int64{"": 13})
	require.NoError(t, err)
	s, err := FromGraph(m, WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	feed := func(idx ...int64) []tensor.NamedTensor {
		return []tensor.NamedTensor{{Name: "idx", Tensor: tensor.MustTensor([]int64{3}, idx)}}
	}
	for range 2 { // the first run traces, the second runs the plan
		_, err = s.Run(context.Background(), feed(0, 4, 2))
		require.NoError(t, err)
	}
	require.Equal(t, "Loom kernel", s.ExecutionPlans()[0].Nodes[1].Reason[:len("Loom kernel")], "Gather runs as a kernel step")
	_, err = s.Run(context.Background(), feed(1, 9, 2))
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	require.ErrorContains(t, err, `node "lookup" (Gather)`)
	require.ErrorContains(t, err, "bounds check")
	out, err := s.Run(context.Background(), feed(4, 0, 3))
	require.NoError(t, err, "the violation words are cleared for the next run")
	require.Equal(t, []int64{3, 4}, out[0].Shape())
}

// Run's fast path (inputs fed in the graph's order, an idle plan instance ready) must give
// what the interpreter gives, and leave every malformed call to the general path's errors.
func TestPlanFastPathMatchesAndRefusesBadInput(t *testing.T) {
	g := &graph.Graph{Name: "sub"}
	g.Inputs = []*graph.Value{graph.Input("a", graph.TensorType(graph.Float, graph.ShapeOf(16, 20))),
		graph.Input("b", graph.TensorType(graph.Float, graph.ShapeOf(16, 20)))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.Nodes = []*graph.Node{graph.NewNode("sub", "Sub", []string{"a", "b"}, []string{"y"})}
	m, err := graph.FromGraph(g.Name, g, map[string]int64{"": 13})
	require.NoError(t, err)
	s, err := FromGraph(m, WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	rnd := inferRand()
	type kept struct {
		out  []float32
		want []float32
	}
	var keep []kept // outputs held across later runs (small outputs share memory blocks)
	for run := range 12 {
		a, b := randomF32(rnd, 320), randomF32(rnd, 320)
		feeds := []tensor.NamedTensor{{Name: "a", Tensor: tensor.MustTensor([]int64{16, 20}, a)}, {Name: "b", Tensor: tensor.MustTensor([]int64{16, 20}, b)}}
		if run == 3 { // out of the graph's order: the general path
			feeds[0], feeds[1] = feeds[1], feeds[0]
		}
		outs, err := s.Run(context.Background(), feeds)
		require.NoError(t, err)
		got := outs[0].Data().([]float32)
		want := make([]float32, len(a))
		for i := range a {
			want[i] = a[i] - b[i]
			require.Equal(t, want[i], got[i], "run %d element %d", run, i)
		}
		require.Equal(t, len(got), cap(got), "an append must not reach another output's memory")
		keep = append(keep, kept{got, want})
		got[0] = 42 // the caller owns the output: the next run must not see it
		want[0] = 42
	}
	for run, k := range keep {
		require.Equal(t, k.want, k.out, "run %d's output changed after later runs", run)
	}
	require.Len(t, s.ExecutionPlans(), 1)
	ok := tensor.MustTensor([]int64{16, 20}, randomF32(rnd, 320))
	_, err = s.Run(context.Background(), []tensor.NamedTensor{{Name: "a", Tensor: ok}, {Name: "b", Tensor: tensor.MustTensor([]int64{16, 20}, make([]float64, 320))}})
	require.ErrorContains(t, err, `input "b": element type`)
	_, err = s.Run(context.Background(), []tensor.NamedTensor{{Name: "a", Tensor: ok}, {Name: "c", Tensor: ok}})
	require.ErrorContains(t, err, `missing input "b"`)
	_, err = s.Run(context.Background(), []tensor.NamedTensor{{Name: "a", Tensor: ok}, {Name: "b", Tensor: tensor.MustTensor([]int64{20, 16}, randomF32(rnd, 320))}})
	require.ErrorContains(t, err, `input "b": dimension 0`)
	_, err = s.Run(context.Background(), []tensor.NamedTensor{{Name: "a", Tensor: ok}, {Name: "b"}})
	require.ErrorContains(t, err, `input "b": empty value`)
}

// The tuner alternates one thread and all of them, then keeps all only when clearly faster.
func TestThreadTunerChoosesFaster(t *testing.T) {
	for _, c := range []struct {
		one, all time.Duration
		want     int
	}{{100, 50, 4}, {100, 95, 1}, {50, 100, 1}} {
		tt := &plan.ThreadTuner{}
		for range 2 * plan.TuneSamples {
			n, slot := tt.Threads(4)
			require.GreaterOrEqual(t, slot, 0)
			d := c.one
			if n == 4 {
				d = c.all
			}
			tt.Record(slot, 4, d)
		}
		n, slot := tt.Threads(4)
		require.Equal(t, -1, slot)
		require.Equal(t, c.want, n, "one %v, all %v", c.one, c.all)
		require.Equal(t, c.want, tt.Chosen())
	}
	one := &plan.ThreadTuner{}
	n, slot := one.Threads(1)
	require.Equal(t, 1, n)
	require.Equal(t, -1, slot)
}

// A session with two intra-op threads times each segment on one and two threads, settles on
// one of them, and gives the interpreter's results throughout.
func TestPlanSettlesThreadCount(t *testing.T) {
	dir := filepath.Join("testdata", "models")
	load := func(opts ...LoadOption) (*InferenceSession, error) {
		return Load(filepath.Join(dir, "tiny_encoder.onnx"), append(opts, WithIntraOpThreads(2))...)
	}
	planned, interpreted := planPair(t, load)
	rnd := inferRand()
	for range 2*plan.TuneSamples + 2 {
		feeds := []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{1, 5, 64}, randomF32(rnd, 5*64))}}
		requireSameOutputs(t, planned, interpreted, feeds, 1e-4)
	}
	reports := planned.ExecutionPlans()
	require.Len(t, reports, 1)
	require.NotEmpty(t, reports[0].SegmentThreads)
	for _, n := range reports[0].SegmentThreads {
		require.Contains(t, []int{0, 1, 2}, n)
	}
}

// Where a segment's work decides it, its thread count is chosen when the plan is built, the
// same in every session: all threads for products that stream megabytes of weights, one for a
// few small launches, and for products of a few MFLOP that bind little; a convolution in
// between is timed (ThreadTuner); outputs match the interpreter's.
func TestThreadCountPresetFromWork(t *testing.T) {
	rnd := inferRand()
	// Four 1024 x 1024 weights (16 MiB read per run): all threads. The weights are scaled by
	// sqrt(3/1024), so that every layer keeps its input's variance: unscaled, the outputs grow
	// to about 7e4 and one that cancels to near 0 differs between summation orders by more
	// than the relative tolerance (the rounding error follows the terms, not the sum).
	g := &graph.Graph{Name: "big"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.DimOf(1), graph.DimOf(1024)}))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	prev := "x"
	for i := range 4 {
		w := fmt.Sprintf("w%d", i)
		wv := randomF32(rnd, 1024*1024)
		for j := range wv {
			wv[j] *= float32(math.Sqrt(3.0 / 1024))
		}
		g.AddInitializer(graph.TensorFromFloat32(w, []int64{1024, 1024}, wv))
		out := fmt.Sprintf("h%d", i)
		if i == 3 {
			out = "y"
		}
		g.Nodes = append(g.Nodes, graph.NewNode(fmt.Sprintf("mm%d", i), "MatMul", []string{prev, w}, []string{out}))
		prev = out
	}
	big, err := graph.FromGraph("big", g, map[string]int64{"": 13})
	require.NoError(t, err)
	// A convolution of 8 x 12 x 12 by 16 x 8 x 5 x 5: under the bytes that decide one thread
	// (its im2col scratch included), but 0.4 MFLOP of products: timed (-1 while the timing
	// runs).
	cg := &graph.Graph{Name: "conv"}
	cg.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.DimOf(1), graph.DimOf(8), graph.DimOf(12), graph.DimOf(12)}))}
	cg.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	cw := randomF32(rnd, 16*8*5*5)
	for j := range cw {
		cw[j] *= 0.1
	}
	cg.AddInitializer(graph.TensorFromFloat32("w", []int64{16, 8, 5, 5}, cw))
	cg.Nodes = append(cg.Nodes, graph.NewNode("conv", "Conv", []string{"x", "w"}, []string{"y"}))
	conv, err := graph.FromGraph("conv", cg, map[string]int64{"": 13})
	require.NoError(t, err)
	// The same convolution over 8 x 28 x 28: about 1 MiB bound, under the bytes that decide all
	// threads, but 3.7 MFLOP of products in two launches: all threads.
	bg := &graph.Graph{Name: "conv_big"}
	bg.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.DimOf(1), graph.DimOf(8), graph.DimOf(28), graph.DimOf(28)}))}
	bg.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	bg.AddInitializer(graph.TensorFromFloat32("w", []int64{16, 8, 5, 5}, cw))
	bg.Nodes = append(bg.Nodes, graph.NewNode("conv", "Conv", []string{"x", "w"}, []string{"y"}))
	bigConv, err := graph.FromGraph("conv_big", bg, map[string]int64{"": 13})
	require.NoError(t, err)
	for name, c := range map[string]struct {
		load  func(opts ...LoadOption) (*InferenceSession, error)
		shape []int64
		want  int
	}{
		"big": {func(opts ...LoadOption) (*InferenceSession, error) { return FromGraph(big, opts...) }, []int64{1, 1024}, 0},
		"add": {func(opts ...LoadOption) (*InferenceSession, error) {
			return Load(filepath.Join("testdata", "models", "add.onnx"), opts...)
		}, []int64{16}, 1},
		"conv":     {func(opts ...LoadOption) (*InferenceSession, error) { return FromGraph(conv, opts...) }, []int64{1, 8, 12, 12}, -1},
		"conv_big": {func(opts ...LoadOption) (*InferenceSession, error) { return FromGraph(bigConv, opts...) }, []int64{1, 8, 28, 28}, 0},
	} {
		for range 2 { // the same choice in every session
			planned, interpreted := planPair(t, func(opts ...LoadOption) (*InferenceSession, error) {
				return c.load(append(opts, WithIntraOpThreads(2))...)
			})
			var feeds []tensor.NamedTensor
			for _, in := range planned.Inputs() {
				n := 1
				for _, d := range c.shape {
					n *= int(d)
				}
				feeds = append(feeds, tensor.NamedTensor{Name: in.Name, Tensor: tensor.MustTensor(c.shape, randomF32(rnd, n))})
			}
			for range 2 { // the plan is built by the first run and chosen then
				requireSameOutputs(t, planned, interpreted, feeds, 1e-3)
			}
			reports := planned.ExecutionPlans()
			require.Len(t, reports, 1, name)
			require.NotEmpty(t, reports[0].SegmentThreads, name)
			for _, n := range reports[0].SegmentThreads {
				require.Equal(t, c.want, n, "%s: threads chosen without timing (0: all; -1: timed)", name)
			}
		}
	}
}
