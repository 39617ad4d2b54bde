package session

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// mlNodeSession is singleNodeSession for a node of the ai.onnx.ml domain: the model imports
// ai.onnx at opset and ai.onnx.ml at 5. It returns the session or the load error.
func mlNodeSession(t *testing.T, executor string, n *graph.Node, opset int64, in []tensor.Tensor) (*InferenceSession, error) {
	t.Helper()
	node := *n
	node.Domain = "ai.onnx.ml"
	return nodeSessionWith(t, executor, &node, map[string]int64{"": opset, "ai.onnx.ml": 5}, in, func(v tensor.Tensor) graph.Type {
		return graph.TensorType(v.DType(), graph.ShapeOf(v.Dims()...))
	})
}

// runMLHostileCases is runHostileCases for ai.onnx.ml nodes (see mlNodeSession).
func runMLHostileCases(t *testing.T, cases []hostileCase) {
	for _, c := range cases {
		for _, executor := range traceExecutors {
			t.Run(c.name+"/"+executor, func(t *testing.T) {
				s, err := mlNodeSession(t, executor, c.node, c.opset, c.good)
				require.NoError(t, err)
				checkHostileCase(t, s, c)
			})
		}
	}
}

// ArrayFeatureExtractor's indices outside [0, X.shape[-1]) are errors naming the node and the
// index, on both executors.
func TestMLOpsRefuseBadIndices(t *testing.T) {
	x := tensor.MustTensor([]int64{2, 3}, []float32{1, 2, 3, 4, 5, 6})
	idx := func(v ...int64) []tensor.Tensor {
		return []tensor.Tensor{x, tensor.MustTensor([]int64{int64(len(v))}, v)}
	}
	afe := graph.NewNode("afe", "ArrayFeatureExtractor", nil, []string{"z"})
	inv := tensor.ErrInvalidArgument
	runMLHostileCases(t, []hostileCase{
		{"array_feature_extractor_index_3", afe, 18, idx(0, 2), idx(0, 3), inv, []string{"Y[1] = 3", "out of range"}, nil},
		{"array_feature_extractor_index_-1", afe, 18, idx(1, 2), idx(-1, 2), inv, []string{"Y[0] = -1"}, nil},
		{"array_feature_extractor_index_2^40", afe, 18, idx(1, 2), idx(1, 1<<40), inv, []string{"1099511627776"}, nil},
	})
}

// The ai.onnx.ml ops compute what the spec says on both executors.
func TestMLOpsValues(t *testing.T) {
	nan := float32(math.NaN())
	f32 := func(shape []int64, v ...float32) tensor.Tensor { return tensor.MustTensor(shape, v) }
	modes, err := graph.TensorFromValues("modes", graph.Uint8, []int64{3}, []float64{0, 6, 5})
	require.NoError(t, err)
	cases := []struct {
		name string
		node *graph.Node
		in   []tensor.Tensor
		want any
	}{
		{"binarizer", graph.NewNode("bin", "Binarizer", nil, []string{"y"}, graph.FloatAttr("threshold", 1)),
			[]tensor.Tensor{f32([]int64{4}, 0.5, 1, 1.5, nan)}, []float32{0, 0, 1, 0}},
		{"array_feature_extractor_1d", graph.NewNode("afe", "ArrayFeatureExtractor", nil, []string{"y"}),
			[]tensor.Tensor{f32([]int64{3}, 7, 8, 9), tensor.MustTensor([]int64{2}, []int64{2, 0})}, []float32{9, 7}},
		{"label_encoder_float_nan_key", graph.NewNode("le", "LabelEncoder", nil, []string{"y"},
			&graph.Attribute{Name: "keys_floats", Type: graph.AttrFloats, Floats: []float32{nan, 0, 2}},
			&graph.Attribute{Name: "values_int64s", Type: graph.AttrInts, Ints: []int64{10, 20, 30}}),
			[]tensor.Tensor{f32([]int64{4}, nan, float32(math.Copysign(0, -1)), 2, 5)}, []int64{10, 20, 30, -1}},
		// Node 0: x0 <= 0.5 ? node 1 : leaf 0. Node 1: x1 in {1, 3} ? leaf 1 : node 2.
		// Node 2: x1 != 4 ? leaf 2 : leaf 3 (NaN tracks true). Two targets.
		{"tree_ensemble", graph.NewNode("te", "TreeEnsemble", nil, []string{"y"},
			graph.TensorAttr("nodes_splits", graph.TensorFromFloat32("s", []int64{3}, []float32{0.5, 0, 4})),
			graph.IntsAttr("nodes_featureids", 0, 1, 1),
			graph.TensorAttr("nodes_modes", modes),
			graph.IntsAttr("nodes_truenodeids", 1, 1, 2),
			graph.IntsAttr("nodes_falsenodeids", 0, 2, 3),
			graph.IntsAttr("nodes_trueleafs", 0, 1, 1),
			graph.IntsAttr("nodes_falseleafs", 1, 0, 1),
			graph.IntsAttr("nodes_missing_value_tracks_true", 0, 0, 1),
			graph.TensorAttr("membership_values", graph.TensorFromFloat32("m", []int64{3}, []float32{1, 3, nan})),
			graph.IntsAttr("leaf_targetids", 0, 1, 0, 1),
			graph.TensorAttr("leaf_weights", graph.TensorFromFloat32("w", []int64{4}, []float32{1, 2, 3, 4})),
			graph.IntsAttr("tree_roots", 0, 1),
			graph.IntAttr("n_targets", 2)),
			[]tensor.Tensor{f32([]int64{4, 2}, 1, 0, 0, 3, 0, 4, 0, nan)},
			// Row 0: tree 0 -> leaf 0 (t0 += 1); tree 1 (root node 1): x1=0 not in set -> node 2 -> 0 != 4 -> leaf 2 (t0 += 3).
			// Row 1: tree 0 -> node 1 -> leaf 1 (t1 += 2), tree 1 -> leaf 1 (t1 += 2).
			// Row 2: tree 0 -> node 1 -> node 2 -> 4 != 4 false -> leaf 3 (t1 += 4), twice.
			// Row 3: NaN: not in set -> node 2 -> NaN tracks true -> leaf 2 (t0 += 3), twice.
			[]float32{4, 0, 0, 4, 0, 8, 6, 0}},
	}
	for _, c := range cases {
		for _, executor := range traceExecutors {
			t.Run(c.name+"/"+executor, func(t *testing.T) {
				s, err := mlNodeSession(t, executor, c.node, 18, c.in)
				require.NoError(t, err)
				for range 2 {
					out, err := s.Run(context.Background(), feedsOf(c.in))
					require.NoError(t, err)
					require.Len(t, out, 1)
					assert.Equal(t, c.want, out[0].Data())
				}
			})
		}
	}
}

// Malformed TreeEnsemble and LabelEncoder attributes are errors (at load or at run), never
// panics: lengths that disagree, child indices out of range, a cycle.
func TestMLOpsRefuseBadAttributes(t *testing.T) {
	modes, err := graph.TensorFromValues("modes", graph.Uint8, []int64{2}, []float64{0, 0})
	require.NoError(t, err)
	tree := func(trueIDs, falseIDs, trueLeafs, falseLeafs []int64, featureIDs []int64) *graph.Node {
		return graph.NewNode("te", "TreeEnsemble", nil, []string{"y"},
			graph.TensorAttr("nodes_splits", graph.TensorFromFloat32("s", []int64{2}, []float32{0.5, 0.5})),
			graph.IntsAttr("nodes_featureids", featureIDs...),
			graph.TensorAttr("nodes_modes", modes),
			graph.IntsAttr("nodes_truenodeids", trueIDs...),
			graph.IntsAttr("nodes_falsenodeids", falseIDs...),
			graph.IntsAttr("nodes_trueleafs", trueLeafs...),
			graph.IntsAttr("nodes_falseleafs", falseLeafs...),
			graph.IntsAttr("leaf_targetids", 0, 0),
			graph.TensorAttr("leaf_weights", graph.TensorFromFloat32("w", []int64{2}, []float32{1, 2})),
			graph.IntsAttr("tree_roots", 0),
			graph.IntAttr("n_targets", 1))
	}
	x := []tensor.Tensor{tensor.MustTensor([]int64{1, 2}, []float32{0, 0})}
	cases := []struct {
		name string
		node *graph.Node
		in   []tensor.Tensor
		says string
	}{
		{"tree_cycle", tree([]int64{1, 0}, []int64{1, 0}, []int64{0, 0}, []int64{0, 0}, []int64{0, 1}), x, "cycle"},
		{"tree_child_out_of_range", tree([]int64{1, 7}, []int64{1, 0}, []int64{0, 1}, []int64{0, 1}, []int64{0, 1}), x, "out of range"},
		{"tree_leaf_out_of_range", tree([]int64{1, 2}, []int64{1, 0}, []int64{0, 1}, []int64{0, 1}, []int64{0, 1}), x, "out of range"},
		{"tree_lengths_disagree", tree([]int64{1}, []int64{1, 0}, []int64{0, 1}, []int64{0, 1}, []int64{0, 1}), x, "nodes_truenodeids"},
		{"tree_feature_out_of_range", tree([]int64{1, 0}, []int64{1, 0}, []int64{0, 1}, []int64{0, 1}, []int64{0, 9}), x, "feature 9"},
		{"label_encoder_lengths_disagree", graph.NewNode("le", "LabelEncoder", nil, []string{"y"},
			graph.IntsAttr("keys_int64s", 1, 2, 3), graph.IntsAttr("values_int64s", 1, 2)),
			[]tensor.Tensor{tensor.MustTensor([]int64{2}, []int64{1, 2})}, "3 keys but 2 values"},
	}
	for _, c := range cases {
		for _, executor := range traceExecutors {
			t.Run(c.name+"/"+executor, func(t *testing.T) {
				s, err := mlNodeSession(t, executor, c.node, 18, c.in)
				if err == nil {
					_, err = s.Run(context.Background(), feedsOf(c.in))
					require.Error(t, err)
					var e *tensor.Error
					require.ErrorAs(t, err, &e)
					assert.Equal(t, c.node.Name, e.Node, "%v", err)
					assert.NotErrorIs(t, err, tensor.ErrInternal, "%v", err)
					assert.Contains(t, err.Error(), c.says)
				}
				require.Error(t, err)
			})
		}
	}
}
