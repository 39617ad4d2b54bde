package infer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
)

// msShapes infers a one-node model of op (domain com.microsoft unless onnx) over inputs typed
// in (an unnamed entry is an omitted input) and returns its outputs' types or the error.
func msShapes(t *testing.T, op string, onnx bool, in []graph.Type, outs int, attrs ...*graph.Attribute) ([]string, error) {
	t.Helper()
	var inputs []*graph.Value
	var names []string
	for i, typ := range in {
		if typ.Kind == graph.KindUnknown {
			names = append(names, "")
			continue
		}
		name := string(rune('a' + i))
		names = append(names, name)
		inputs = append(inputs, graph.Input(name, typ))
	}
	var outNames []string
	var outputs []*graph.Value
	for i := range outs {
		name := string(rune('p' + i))
		outNames = append(outNames, name)
		outputs = append(outputs, graph.Output(name, graph.Type{}))
	}
	n := graph.NewNode("n", op, names, outNames, attrs...)
	if !onnx {
		n.Domain = graph.MSDomain
	}
	g := &graph.Graph{Name: "g", Inputs: inputs, Outputs: outputs, Nodes: []*graph.Node{n}}
	m, err := graph.FromGraph("test", g, map[string]int64{"": 21, graph.MSDomain: 1})
	require.NoError(t, err)
	require.NoError(t, m.Check())
	if err := Shapes(m); err != nil {
		return nil, err
	}
	var got []string
	for _, o := range m.Graph.Outputs {
		got = append(got, o.Type.String())
	}
	return got, nil
}

// The com.microsoft rules (ops_ms.go): outputs' shapes from the inputs' and the attributes,
// and the statically wrong cases refused naming the input or attribute.
func TestMSShapes(t *testing.T) {
	none := graph.Type{}
	i32 := func(s ...int64) graph.Type { return graph.TensorType(graph.Int32, graph.ShapeOf(s...)) }
	cases := []struct {
		name  string
		op    string
		onnx  bool
		in    []graph.Type
		outs  int
		attrs []*graph.Attribute
		want  []string
	}{
		{"skip layer norm", "SkipLayerNormalization", false, []graph.Type{f32(2, 5, 8), f32(5, 8), f32(8)}, 4, nil,
			[]string{"tensor(float)[2,5,8]", "tensor(float)[2,5,1]", "tensor(float)[2,5,1]", "tensor(float)[2,5,8]"}},
		{"simplified layer norm", "SimplifiedLayerNormalization", true, []graph.Type{f32(2, 5, 8), f32(5, 8)}, 2, []*graph.Attribute{graph.IntAttr("axis", 1)},
			[]string{"tensor(float)[2,5,8]", "tensor(float)[2,1,1]"}},
		{"fast gelu", "FastGelu", false, []graph.Type{f32(3, 7), f32(7)}, 1, nil, []string{"tensor(float)[3,7]"}},
		{"rotary", "RotaryEmbedding", false, []graph.Type{f32(1, 4, 32), graph.TensorType(graph.Int64, graph.ShapeOf(1, 4)), f32(8, 4), f32(8, 4)}, 1,
			[]*graph.Attribute{graph.IntAttr("num_heads", 4)}, []string{"tensor(float)[1,4,32]"}},
		{"mha with past", "MultiHeadAttention", false, []graph.Type{f32(2, 3, 16), f32(2, 3, 16), f32(2, 3, 24), none, none, none, f32(2, 2, 5, 8), f32(2, 2, 5, 12)}, 3,
			[]*graph.Attribute{graph.IntAttr("num_heads", 2)}, []string{"tensor(float)[2,3,24]", "tensor(float)[2,2,8,8]", "tensor(float)[2,2,8,12]"}},
		{"mha split kv", "MultiHeadAttention", false, []graph.Type{f32(2, 3, 16), f32(2, 2, 7, 8), f32(2, 2, 7, 4)}, 1,
			[]*graph.Attribute{graph.IntAttr("num_heads", 2)}, []string{"tensor(float)[2,3,8]"}},
		{"gqa", "GroupQueryAttention", false, []graph.Type{f32(2, 1, 64), f32(2, 1, 32), f32(2, 1, 32), f32(2, 2, 9, 16), f32(2, 2, 9, 16), i32(2), i32()}, 3,
			[]*graph.Attribute{graph.IntAttr("num_heads", 4), graph.IntAttr("kv_num_heads", 2)}, []string{"tensor(float)[2,1,64]", "tensor(float)[2,2,?,16]", "tensor(float)[2,2,?,16]"}},
		{"gqa packed", "GroupQueryAttention", false, []graph.Type{f32(1, 6, 96), none, none, none, none, i32(1), i32()}, 1,
			[]*graph.Attribute{graph.IntAttr("num_heads", 4), graph.IntAttr("kv_num_heads", 1)}, []string{"tensor(float)[1,6,64]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := msShapes(t, c.op, c.onnx, c.in, c.outs, c.attrs...)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
	bad := []struct {
		name  string
		op    string
		in    []graph.Type
		attrs []*graph.Attribute
		says  string
	}{
		{"skip rank", "SkipLayerNormalization", []graph.Type{f32(8), f32(8), f32(8)}, nil, "input (input 0) has rank 1"},
		{"rotary heads", "RotaryEmbedding", []graph.Type{f32(1, 4, 30), graph.TensorType(graph.Int64, graph.ShapeOf(1, 4)), f32(8, 4), f32(8, 4)},
			[]*graph.Attribute{graph.IntAttr("num_heads", 4)}, "num_heads 4 does not divide the hidden size 30"},
		{"mha heads", "MultiHeadAttention", []graph.Type{f32(2, 3, 15), f32(2, 3, 15), f32(2, 3, 15)}, []*graph.Attribute{graph.IntAttr("num_heads", 2)},
			"num_heads 2 does not divide the query's hidden size 15"},
		{"gqa ratio", "GroupQueryAttention", []graph.Type{f32(1, 1, 48)}, []*graph.Attribute{graph.IntAttr("num_heads", 3), graph.IntAttr("kv_num_heads", 2)},
			"num_heads 3 must be a positive multiple of kv_num_heads 2"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := msShapes(t, c.op, false, c.in, 1, c.attrs...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.says)
			assert.Contains(t, err.Error(), `node "n"`)
		})
	}
}
