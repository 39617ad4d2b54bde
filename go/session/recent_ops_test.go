package session

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// The ONNX 1.22 operators added as host functions (TensorScatter, CenterCropPad, Col2Im,
// AffineGrid) refuse bad values with an
// error naming the node and the input, and the session keeps running good inputs. Their
// results are checked by the ONNX 1.22 node suite (TestNodeConformanceONNX122).
func TestRecentOpsRefuseBadValues(t *testing.T) {
	f32 := func(shape []int64) tensor.Tensor {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(i%7) - 3
		}
		return tensor.MustTensor(shape, v)
	}
	i64 := func(v ...int64) tensor.Tensor { return tensor.MustTensor([]int64{int64(len(v))}, v) }
	// TensorScatter: a cache of 4 rows a batch takes 2 new rows at write_indices.
	scatter := func(at int64) []tensor.Tensor {
		return []tensor.Tensor{f32([]int64{2, 4, 3}), f32([]int64{2, 2, 3}), i64(1, at)}
	}
	// CenterCropPad to the sizes given.
	crop := func(h, w int64) []tensor.Tensor { return []tensor.Tensor{f32([]int64{5, 6}), i64(h, w)} }
	// Col2Im: 1 channel of 2x2 blocks over a 3x3 image: 4 blocks.
	col2im := func(bh int64) []tensor.Tensor {
		return []tensor.Tensor{f32([]int64{1, 4, 4}), i64(3, 3), i64(bh, 2)}
	}
	// AffineGrid of one 2-D theta to the size given.
	affine := func(h int64) []tensor.Tensor { return []tensor.Tensor{f32([]int64{1, 2, 3}), i64(1, 1, h, 4)} }
	scatterNode := graph.NewNode("scatter", "TensorScatter", nil, []string{"y"})
	cropNode := graph.NewNode("crop", "CenterCropPad", nil, []string{"y"})
	col2imNode := graph.NewNode("col2im", "Col2Im", nil, []string{"y"})
	affineNode := graph.NewNode("grid", "AffineGrid", nil, []string{"y"})
	inv := tensor.ErrInvalidArgument
	runHostileCases(t, []hostileCase{
		{"tensorscatter_index_past_the_cache", scatterNode, 24, scatter(2), scatter(3), inv, []string{"write_indices[1] = 3", "want [0, 2]"}, nil},
		{"tensorscatter_negative_index", scatterNode, 24, scatter(0), scatter(-1), inv, []string{"write_indices[1] = -1"}, nil},
		{"centercroppad_negative_size", cropNode, 18, crop(3, 8), crop(-2, 8), inv, []string{"negative size"}, nil},
		{"col2im_block_past_the_image", col2imNode, 18, col2im(2), col2im(4), inv, []string{"block"}, nil},
		{"affinegrid_negative_size", affineNode, 20, affine(3), affine(-3), inv, []string{"negative value"}, nil},
	})
}

// AffineGrid's size (input 1) decides its output's shape: a compiled plan is keyed by its value,
// so a second run with another size gets a grid of that size.
func TestAffineGridSizeKeysThePlan(t *testing.T) {
	theta := tensor.MustTensor([]int64{1, 2, 3}, []float32{1, 0, 0, 0, 1, 0})
	size := func(h int64) tensor.Tensor { return tensor.MustTensor([]int64{4}, []int64{1, 1, h, 4}) }
	for _, executor := range traceExecutors {
		// AffineGrid, then a Relu (a kernel step planned for the grid's shape).
		g := &graph.Graph{Name: "grid_relu",
			Inputs: []*graph.Value{graph.Input("theta", graph.TensorType(graph.Float, graph.ShapeOf(1, 2, 3))),
				graph.Input("size", graph.TensorType(graph.Int64, graph.ShapeOf(4)))},
			Outputs: []*graph.Value{graph.Output("y", graph.Type{})},
			Nodes: []*graph.Node{graph.NewNode("grid", "AffineGrid", []string{"theta", "size"}, []string{"g"}),
				graph.NewNode("relu", "Relu", []string{"g"}, []string{"y"})}}
		m, err := graph.FromGraph(g.Name, g, map[string]int64{"": 20})
		require.NoError(t, err)
		s, err := FromGraph(m, tracedOptions(nil, executor)...)
		require.NoError(t, err)
		defer s.Close()
		for _, h := range []int64{3, 5, 3, 2} {
			outs, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "theta", Tensor: theta}, {Name: "size", Tensor: size(h)}})
			require.NoError(t, err)
			require.Equal(t, []int64{1, h, 4, 2}, outs[0].Shape(), "%s, size %d", executor, h)
		}
	}
}
