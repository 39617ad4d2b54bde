package session

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/opt"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// viewModel reads contiguous ranges of values in every way a plan meets them, x [2, L]:
//
//	t = Relu(x); p0, p1 = Split(t, axis 0)      parts of a kernel's output
//	a = Add(p0, p1)                             a kernel reading two views of one slot
//	q = Slice(x, [1], [2], axes [0])            a view of a graph input
//	r = Reshape(q, [L])                         an alias of a view
//	y = Mul(a, r)                               a kernel output
//	c = CumSum(p1, axis 1)                      a host step reading a view
//	p1 and c are graph outputs too               an output that is a view
//	w = Slice(t, [0, 1], [2, L], axes [0, 1])   not contiguous: a copy
func viewModel(t testing.TB, l int64) *graph.Model {
	g := &graph.Graph{Name: "views"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.DimOf(2), graph.DimOf(l)}))}
	for _, o := range []string{"y", "p1", "c", "w"} {
		g.Outputs = append(g.Outputs, graph.Output(o, graph.Type{}))
	}
	g.AddInitializer(graph.TensorFromInt64("split", []int64{2}, []int64{1, 1}))
	g.AddInitializer(graph.TensorFromInt64("one", []int64{1}, []int64{1}))
	g.AddInitializer(graph.TensorFromInt64("two", []int64{1}, []int64{2}))
	g.AddInitializer(graph.TensorFromInt64("zero", []int64{1}, []int64{0}))
	g.AddInitializer(graph.TensorFromInt64("len", []int64{1}, []int64{l}))
	g.AddInitializer(graph.TensorFromInt64("axis1", []int64{}, []int64{1}))
	g.AddInitializer(graph.TensorFromInt64("w_starts", []int64{2}, []int64{0, 1}))
	g.AddInitializer(graph.TensorFromInt64("w_ends", []int64{2}, []int64{2, l}))
	g.AddInitializer(graph.TensorFromInt64("w_axes", []int64{2}, []int64{0, 1}))
	g.Nodes = []*graph.Node{
		graph.NewNode("relu", "Relu", []string{"x"}, []string{"t"}),
		graph.NewNode("split", "Split", []string{"t", "split"}, []string{"p0", "p1"}, &graph.Attribute{Name: "axis", Type: graph.AttrInt, Int: 0}),
		graph.NewNode("add", "Add", []string{"p0", "p1"}, []string{"a"}),
		graph.NewNode("slice", "Slice", []string{"x", "one", "two", "zero"}, []string{"q"}),
		graph.NewNode("reshape", "Reshape", []string{"q", "len"}, []string{"r"}),
		graph.NewNode("mul", "Mul", []string{"a", "r"}, []string{"y"}),
		graph.NewNode("cumsum", "CumSum", []string{"p1", "axis1"}, []string{"c"}),
		graph.NewNode("strided", "Slice", []string{"t", "w_starts", "w_ends", "w_axes"}, []string{"w"}),
	}
	m, err := graph.FromGraph("views", g, map[string]int64{"": 17})
	require.NoError(t, err)
	return m
}

// A Split's parts and a Slice of leading indices are views of their input's memory in a
// compiled plan (no step, PlanAlias), read by kernels, host steps, an alias and the outputs;
// the results are the interpreter's, bit for bit, on fresh random inputs, with the input in
// place and copied, small and on a shared arena, traced and not, on a host arena and on a
// device arena.
func TestViewPlansForContiguousSlices(t *testing.T) {
	rnd := inferRand()
	for _, l := range []int64{8, 3, 1 << 15} {
		t.Run(fmt.Sprint(l), func(t *testing.T) {
			m := viewModel(t, l)
			planned, err := FromGraph(m, WithExecutionProvider(ProviderHost), WithOptimizationLevel(opt.LevelDisabled))
			require.NoError(t, err)
			defer planned.Close()
			interpreted, err := FromGraph(m, WithExecutionProvider(ProviderHost), WithOption(OptionRunPlan, "0"), WithOptimizationLevel(opt.LevelDisabled))
			require.NoError(t, err)
			defer interpreted.Close()
			tp, _ := recordingProvider(t)
			traced, err := FromGraph(m, WithExecutionProvider(ProviderHost), WithTracerProvider(tp), WithOptimizationLevel(opt.LevelDisabled))
			require.NoError(t, err)
			defer traced.Close()
			standIn, err := FromGraph(m, WithExecutionProvider(ProviderCUDA), WithOption(OptionCUDAStandIn, "1"), WithOptimizationLevel(opt.LevelDisabled))
			require.NoError(t, err)
			defer standIn.Close()
			ctx, _ := parentContext(t, tp)
			for run := range 3 {
				x := tensor.MustTensor([]int64{2, l}, randomF32(rnd, int(2*l)))
				feeds := []tensor.NamedTensor{{Name: "x", Tensor: x}}
				want, err := interpreted.Run(context.Background(), feeds)
				require.NoError(t, err)
				got, err := planned.Run(context.Background(), feeds)
				require.NoError(t, err)
				gotTraced, err := traced.Run(ctx, feeds)
				require.NoError(t, err)
				gotDevice, err := standIn.Run(context.Background(), feeds)
				require.NoError(t, err)
				for i := range want {
					require.Equal(t, want[i].Data(), gotDevice[i].Data(), "device arena: run %d output %s", run, planned.Outputs()[i].Name)
					require.Equal(t, want[i].Dims(), got[i].Dims(), "run %d output %d", run, i)
					require.Equal(t, want[i].Data(), got[i].Data(), "run %d output %s", run, planned.Outputs()[i].Name)
					require.Equal(t, want[i].Data(), gotTraced[i].Data(), "traced: run %d output %s", run, planned.Outputs()[i].Name)
				}
			}
			plans := planned.ExecutionPlans()
			require.Len(t, plans, 1)
			p := plans[0]
			require.True(t, p.Planned, p.Reason)
			if l*8 >= 128<<10 {
				require.True(t, p.SharedArena, "arena %d bytes", p.ArenaBytes)
			}
			steps := map[string]PlanStepKind{}
			for _, n := range p.Nodes {
				steps[n.Node] = n.Step
			}
			require.Equal(t, PlanAlias, steps["split"], "Split's parts are views")
			require.Equal(t, PlanAlias, steps["slice"], "a Slice of a leading index is a view")
			require.Equal(t, PlanAlias, steps["reshape"])
			require.Equal(t, PlanKernel, steps["strided"], "a strided Slice copies")
			require.Equal(t, PlanHost, steps["cumsum"])
			require.Equal(t, 3, p.Aliases)
			// On a device arena (the cuda provider's stand-in) too: the views are parts of
			// the slots' host copies where a host step or an output reads them.
			dp := standIn.ExecutionPlans()
			require.Len(t, dp, 1)
			require.True(t, dp[0].DeviceArena)
			require.Equal(t, 3, dp[0].Aliases)
		})
	}
}
