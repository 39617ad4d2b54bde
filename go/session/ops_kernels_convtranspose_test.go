package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/kernelops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// TestConvTransposeKernelsAgainstHost checks the bmm + col2im kernels against the float64
// host function. The kernels sum C/group products, then up to KH·KW taps, in float32:
// 1e-5 absolute and relative covers sums of ~100 products of values in [-1, 1].
func TestConvTransposeKernelsAgainstHost(t *testing.T) {
	s := kernelCheckSession(t)
	rnd := inferRand()
	f32 := func(shape ...int64) tensor.Tensor {
		return tensor.MustTensor(shape, randomF32(rnd, ops.Numel(shape)))
	}
	ints := graph.IntsAttr
	cases := []struct {
		name  string
		attrs []*graph.Attribute
		in    []tensor.Tensor
	}{
		{"plain", nil, []tensor.Tensor{f32(1, 3, 5, 4), f32(3, 2, 3, 3)}},
		{"bias_stride_pad", []*graph.Attribute{ints("strides", 2, 3), ints("pads", 1, 0, 2, 1)},
			[]tensor.Tensor{f32(2, 4, 6, 5), f32(4, 3, 3, 4), f32(3)}},
		{"groups_dilations", []*graph.Attribute{graph.IntAttr("group", 2), ints("dilations", 2, 1), ints("strides", 1, 2)},
			[]tensor.Tensor{f32(2, 6, 4, 7), f32(6, 2, 3, 2), f32(4)}},
		{"output_padding", []*graph.Attribute{ints("strides", 3, 2), ints("output_padding", 1, 1), ints("pads", 1, 1, 1, 1)},
			[]tensor.Tensor{f32(1, 2, 5, 5), f32(2, 5, 3, 3)}},
		{"output_shape", []*graph.Attribute{ints("strides", 2, 2), ints("output_shape", 11, 12)},
			[]tensor.Tensor{f32(1, 3, 5, 6), f32(3, 2, 3, 3), f32(2)}},
		{"output_shape_beyond_full", []*graph.Attribute{ints("strides", 2, 2), ints("output_shape", 1, 2, 13, 14)},
			[]tensor.Tensor{f32(1, 3, 5, 6), f32(3, 2, 3, 3)}},
		{"auto_pad_same_upper", []*graph.Attribute{graph.StringAttr("auto_pad", "SAME_UPPER"), ints("strides", 2, 2)},
			[]tensor.Tensor{f32(2, 2, 4, 3), f32(2, 3, 4, 4)}},
		{"auto_pad_same_lower", []*graph.Attribute{graph.StringAttr("auto_pad", "SAME_LOWER"), ints("strides", 3, 1)},
			[]tensor.Tensor{f32(1, 2, 3, 4), f32(2, 3, 2, 3)}},
		{"depthwise_big", []*graph.Attribute{graph.IntAttr("group", 8), ints("strides", 2, 2), ints("pads", 1, 1, 1, 1)},
			[]tensor.Tensor{f32(1, 8, 16, 16), f32(8, 1, 4, 4), f32(8)}},
		{"many_channels", []*graph.Attribute{ints("strides", 2, 2)},
			[]tensor.Tensor{f32(1, 64, 6, 6), f32(64, 40, 2, 2), f32(40)}},
		{"1d", []*graph.Attribute{ints("strides", 2), ints("pads", 1, 0), ints("dilations", 2)},
			[]tensor.Tensor{f32(2, 3, 9), f32(3, 4, 3), f32(4)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkKernelOp(t, s, graph.NewNode("n", "ConvTranspose", nil, []string{"y"}, c.attrs...), 17, c.in, nil, 1e-5, 1e-5)
		})
	}
}

func TestConvTransposeKernelsDecline(t *testing.T) {
	rnd := inferRand()
	x := tensor.MustTensor([]int64{1, 2, 3, 3, 3}, randomF32(rnd, 54))
	w := tensor.MustTensor([]int64{2, 2, 2, 2, 2}, randomF32(rnd, 32))
	p, reason, err := kernelops.PlanConvTranspose(graph.NewNode("n", "ConvTranspose", nil, []string{"y"}), 17, ops.InfosOf([]tensor.Tensor{x, w}))
	require.NoError(t, err)
	require.Nil(t, p)
	require.Contains(t, reason, "1-D and 2-D")
	x = tensor.MustTensor([]int64{1, 3, 3, 3}, randomF32(rnd, 27))
	w = tensor.MustTensor([]int64{2, 2, 2, 2}, randomF32(rnd, 16))
	_, _, err = kernelops.PlanConvTranspose(graph.NewNode("n", "ConvTranspose", nil, []string{"y"}), 17, ops.InfosOf([]tensor.Tensor{x, w}))
	require.ErrorContains(t, err, "disagree")
}
