package infer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
)

// The ai.onnx.ml rules: Binarizer keeps the type, ArrayFeatureExtractor's last axis is the
// indices' count ([1, n] for a 1-D X), LabelEncoder takes its values' element type, and
// TreeEnsemble is [N, n_targets].
func TestMLShapes(t *testing.T) {
	i64 := func(s ...int64) graph.Type { return graph.TensorType(graph.Int64, graph.ShapeOf(s...)) }
	str := func(s ...int64) graph.Type { return graph.TensorType(graph.String, graph.ShapeOf(s...)) }
	cases := []struct {
		name string
		op   string
		in   []graph.Type
		attr []*graph.Attribute
		want string
	}{
		{"binarizer", "Binarizer", []graph.Type{f32(3, 4)}, []*graph.Attribute{graph.FloatAttr("threshold", 0.5)}, "tensor(float)[3,4]"},
		{"extractor 2-D", "ArrayFeatureExtractor", []graph.Type{f32(3, 5), i64(2)}, nil, "tensor(float)[3,2]"},
		{"extractor 1-D", "ArrayFeatureExtractor", []graph.Type{f32(5), i64(2, 2)}, nil, "tensor(float)[1,4]"},
		{"label encoder to int", "LabelEncoder", []graph.Type{str(4)}, []*graph.Attribute{
			{Name: "keys_strings", Type: graph.AttrStrings, Strings: [][]byte{[]byte("a")}},
			graph.IntsAttr("values_int64s", 1)}, "tensor(int64)[4]"},
		{"label encoder to string", "LabelEncoder", []graph.Type{i64(2, 3)}, []*graph.Attribute{
			graph.IntsAttr("keys_int64s", 1),
			{Name: "values_strings", Type: graph.AttrStrings, Strings: [][]byte{[]byte("a")}}}, "tensor(string)[2,3]"},
		{"tree ensemble", "TreeEnsemble", []graph.Type{f32(7, 3)}, []*graph.Attribute{graph.IntAttr("n_targets", 2)}, "tensor(float)[7,2]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var inputs []*graph.Value
			var names []string
			for i, typ := range tc.in {
				name := []string{"x", "y"}[i]
				names = append(names, name)
				inputs = append(inputs, graph.Input(name, typ))
			}
			n := graph.NewNode("ml", tc.op, names, []string{"z"}, tc.attr...)
			n.Domain = "ai.onnx.ml"
			g := &graph.Graph{Name: "g", Inputs: inputs, Outputs: []*graph.Value{graph.Output("z", graph.Type{})}, Nodes: []*graph.Node{n}}
			m, err := graph.FromGraph("test", g, map[string]int64{"": 21, "ai.onnx.ml": 5})
			require.NoError(t, err)
			require.NoError(t, Shapes(m))
			assert.Equal(t, tc.want, m.Graph.Outputs[0].Type.String())
		})
	}
}
