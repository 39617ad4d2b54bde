package infer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
)

// DFT's output shapes: the complex transform keeps the axis, RFFT keeps floor(n/2)+1 of it,
// IRFFT (onesided and inverse) returns the real signal of length dft_length, by default
// 2 * (n - 1), as ONNX's test_dft_irfft_opset19 expects.
func TestDFTShapes(t *testing.T) {
	cases := []struct {
		name   string
		opset  int64
		in     []int64
		attrs  []*graph.Attribute
		length []int64 // dft_length, when given
		want   string
	}{
		{"complex", 19, []int64{1, 6, 10, 2}, []*graph.Attribute{graph.IntAttr("axis", 1)}, nil, "tensor(float)[1,6,10,2]"},
		{"rfft", 19, []int64{1, 10, 10, 1}, []*graph.Attribute{graph.IntAttr("axis", 1), graph.IntAttr("onesided", 1)}, nil, "tensor(float)[1,6,10,2]"},
		{"irfft", 19, []int64{1, 6, 10, 2}, []*graph.Attribute{graph.IntAttr("axis", 1), graph.IntAttr("inverse", 1), graph.IntAttr("onesided", 1)}, nil, "tensor(float)[1,10,10,1]"},
		{"irfft length", 19, []int64{1, 6, 10, 2}, []*graph.Attribute{graph.IntAttr("axis", 1), graph.IntAttr("inverse", 1), graph.IntAttr("onesided", 1)}, []int64{9}, "tensor(float)[1,9,10,1]"},
		{"irfft opset 20", 20, []int64{1, 10, 6, 2}, []*graph.Attribute{graph.IntAttr("inverse", 1), graph.IntAttr("onesided", 1)}, nil, "tensor(float)[1,10,10,1]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inputs := []string{"x"}
			var inits []*graph.Tensor
			if tc.length != nil {
				inputs = append(inputs, "len")
				inits = append(inits, graph.TensorFromInt64("len", nil, tc.length))
			}
			m := buildModel(t, []*graph.Value{graph.Input("x", f32(tc.in...))}, []*graph.Value{graph.Output("y", graph.Type{})},
				[]*graph.Node{graph.NewNode("dft", "DFT", inputs, []string{"y"}, tc.attrs...)}, inits, tc.opset)
			require.NoError(t, Shapes(m))
			assert.Equal(t, tc.want, m.Graph.Outputs[0].Type.String())
		})
	}
}
