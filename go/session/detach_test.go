package session

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// An output that is a weight, a view of one, or the caller's input comes back as a copy, in
// interpreted and planned runs: writing into it, or recycling it, changes neither the model
// nor the input.
func TestOutputsNeverAliasWeightsOrInputs(t *testing.T) {
	rnd := inferRand()
	w := randomF32(rnd, 6)
	g := &graph.Graph{Name: "alias"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(6)))}
	g.Outputs = []*graph.Value{graph.Output("w", graph.Type{}), graph.Output("v", graph.Type{}),
		graph.Output("r", graph.Type{}), graph.Output("x2", graph.Type{}), graph.Output("y", graph.Type{})}
	g.AddInitializer(graph.TensorFromFloat32("w", []int64{6}, w))
	g.AddInitializer(graph.TensorFromInt64("shape", []int64{2}, []int64{2, 3}))
	g.Nodes = []*graph.Node{
		graph.NewNode("id", "Identity", []string{"w"}, []string{"v"}),
		graph.NewNode("reshape", "Reshape", []string{"w", "shape"}, []string{"r"}),
		graph.NewNode("idx", "Identity", []string{"x"}, []string{"x2"}),
		graph.NewNode("add", "Add", []string{"x", "w"}, []string{"y"}),
	}
	m, err := graph.FromGraph("alias", g, map[string]int64{"": 13})
	require.NoError(t, err)
	data, err := m.Marshal()
	require.NoError(t, err)
	for _, plan := range []string{"1", "0"} {
		s, err := LoadBytes(data, WithExecutionProvider(ProviderHost), WithOption(OptionRunPlan, plan))
		require.NoError(t, err)
		for run := range 3 {
			x := randomF32(rnd, 6)
			xKept := append([]float32{}, x...)
			outs, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{6}, x)}})
			require.NoError(t, err)
			for i := 0; i < 3; i++ {
				require.Equal(t, w, outs[i].Data(), "plan %s run %d output %d", plan, run, i)
			}
			require.Equal(t, xKept, outs[3].Data())
			for i := range outs[:4] {
				outs[i].Data().([]float32)[0] = 1e9 // the caller's to change
			}
			require.Equal(t, xKept, x, "the input is untouched")
			s.Recycle(outs...)
		}
		require.NoError(t, s.Close())
	}
}

// A sequence output holding a weight and the caller's input holds copies of them.
func TestSequenceOutputsNeverAliasWeightsOrInputs(t *testing.T) {
	rnd := inferRand()
	w := randomF32(rnd, 4)
	g := &graph.Graph{Name: "seq"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(4)))}
	g.Outputs = []*graph.Value{graph.Output("s", graph.Type{})}
	g.AddInitializer(graph.TensorFromFloat32("w", []int64{4}, w))
	g.Nodes = []*graph.Node{graph.NewNode("seq", "SequenceConstruct", []string{"w", "x"}, []string{"s"})}
	m, err := graph.FromGraph("seq", g, map[string]int64{"": 13})
	require.NoError(t, err)
	s, err := FromGraph(m, WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	for range 3 {
		x := randomF32(rnd, 4)
		xKept := append([]float32{}, x...)
		outs, err := s.RunValues(context.Background(), []tensor.NamedValue{{Name: "x", Value: tensor.TensorValue(tensor.MustTensor([]int64{4}, x))}})
		require.NoError(t, err)
		seq, err := outs[0].Sequence()
		require.NoError(t, err)
		require.Len(t, seq, 2)
		require.Equal(t, w, seq[0].Data())
		require.Equal(t, xKept, seq[1].Data())
		seq[0].Data().([]float32)[0] = 1e9
		seq[1].Data().([]float32)[0] = 1e9
		require.Equal(t, xKept, x, "the input is untouched")
	}
}
