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

// DeformConv (opset 19) refuses inputs whose shapes disagree and attributes out of range with
// an error naming the node; offsets and masks of any value are defined results (a sample
// outside the image reads zero). Its results on ordinary inputs are checked by the ONNX 1.22
// node suite.

// deformInputs are X (1, c, 3, 3) holding 0..., W (oc, c/group, 2, 2) of ones, an offset of
// offCh channels over the 2x2 output, holding off, and, when maskCh > 0, a mask of maskCh
// channels holding m.
func deformInputs(c, oc, group, offCh int64, off float32, maskCh int64, m float32) []tensor.Tensor {
	x := make([]float32, c*9)
	for i := range x {
		x[i] = float32(i)
	}
	w := make([]float32, oc*(c/group)*4)
	for i := range w {
		w[i] = 1
	}
	o := make([]float32, offCh*4)
	for i := range o {
		o[i] = off
	}
	in := []tensor.Tensor{
		tensor.MustTensor([]int64{1, c, 3, 3}, x),
		tensor.MustTensor([]int64{oc, c / group, 2, 2}, w),
		tensor.MustTensor([]int64{1, offCh, 2, 2}, o),
	}
	if maskCh > 0 {
		mv := make([]float32, maskCh*4)
		for i := range mv {
			mv[i] = m
		}
		in = append(in, tensor.MustTensor([]int64{oc}, make([]float32, oc)), tensor.MustTensor([]int64{1, maskCh, 2, 2}, mv))
	}
	return in
}

func TestDeformConvRefusesBadShapes(t *testing.T) {
	node := func(attrs ...*graph.Attribute) *graph.Node {
		return graph.NewNode("deform", "DeformConv", nil, []string{"y"}, attrs...)
	}
	plain := node()
	inv := tensor.ErrInvalidArgument
	runDynamicCases(t, []hostileCase{
		{"offset_channels_not_2_kernel", plain, 19, deformInputs(1, 1, 1, 8, 0, 0, 0), deformInputs(1, 1, 1, 6, 0, 0, 0), inv, []string{"offset (input 2"}, nil},
		{"mask_channels_not_kernel", plain, 19, deformInputs(1, 1, 1, 8, 0, 4, 1), deformInputs(1, 1, 1, 8, 0, 3, 1), inv, []string{"mask (input 4"}, nil},
		{"offset_group_not_dividing", node(graph.IntAttr("offset_group", 2)), 19, nil, deformInputs(3, 1, 1, 16, 0, 0, 0), inv, []string{"offset_group 2"}, nil},
		{"offset_group_zero", node(graph.IntAttr("offset_group", 0)), 19, nil, deformInputs(1, 1, 1, 8, 0, 0, 0), inv, []string{"offset_group 0"}, nil},
		{"group_not_dividing", node(graph.IntAttr("group", 2)), 19, nil, deformInputs(3, 2, 3, 8, 0, 0, 0), inv, []string{"group"}, nil},
		{"zero_stride", node(graph.IntsAttr("strides", 0, 1)), 19, nil, deformInputs(1, 1, 1, 8, 0, 0, 0), inv, []string{"strides"}, nil},
		{"negative_dilation", node(graph.IntsAttr("dilations", 1, -1)), 19, nil, deformInputs(1, 1, 1, 8, 0, 0, 0), inv, []string{"dilations"}, nil},
		{"kernel_shape_disagrees", node(graph.IntsAttr("kernel_shape", 3, 3)), 19, nil, deformInputs(1, 1, 1, 8, 0, 0, 0), inv, []string{"kernel_shape"}, nil},
		{"huge_pads", node(graph.IntsAttr("pads", 1<<40, 0, 1<<40, 0)), 19, nil, deformInputs(1, 1, 1, 8, 0, 0, 0), inv, []string{"pads"}, nil},
	})
}

// TestDeformConvOffsetValues checks the results of offsets and masks of hostile values: an
// offset moving every sample out of the image (1e30, -1e30, +Inf) or NaN reads zero; a NaN
// mask makes the output NaN, as the arithmetic does.
func TestDeformConvOffsetValues(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	run := func(t *testing.T, in []tensor.Tensor) []float64 {
		t.Helper()
		s := dynamicSession(t, "", graph.NewNode("deform", "DeformConv", nil, []string{"y"}), 19, in)
		out, err := s.Run(context.Background(), feedsOf(in))
		require.NoError(t, err)
		require.Equal(t, []int64{1, 1, 2, 2}, out[0].Dims())
		return tensor.Float64s(out[0])
	}
	// With no offset a 2x2 window of ones sums the 3x3 image 0..8.
	assert.Equal(t, []float64{8, 12, 20, 24}, run(t, deformInputs(1, 1, 1, 8, 0, 0, 0)))
	assert.Equal(t, []float64{8, 12, 20, 24}, run(t, deformInputs(1, 1, 1, 8, 0, 4, 1)))
	// Half a pixel along both axes: each sample averages four elements, those past the last
	// row or column reading zero.
	assert.InDeltaSlice(t, []float64{16, 14, 18, 15}, run(t, deformInputs(1, 1, 1, 8, 0.5, 0, 0)), 1e-9)
	for _, off := range []float32{1e30, -1e30, inf, -inf, nan} {
		assert.Equal(t, []float64{0, 0, 0, 0}, run(t, deformInputs(1, 1, 1, 8, off, 0, 0)), "offset %v", off)
	}
	for _, v := range run(t, deformInputs(1, 1, 1, 8, 0, 4, nan)) {
		assert.True(t, math.IsNaN(v))
	}
	assert.Equal(t, []float64{0, 0, 0, 0}, run(t, deformInputs(1, 1, 1, 8, 0, 4, 0)))
}

// TestDeformConvRanks runs the 1-D and 3-D forms: with no offset they are the convolution.
func TestDeformConvRanks(t *testing.T) {
	n := graph.NewNode("deform", "DeformConv", nil, []string{"y"})
	x1 := tensor.MustTensor([]int64{1, 1, 4}, []float32{1, 2, 3, 4})
	w1 := tensor.MustTensor([]int64{1, 1, 2}, []float32{1, 10})
	o1 := tensor.MustTensor([]int64{1, 2, 3}, []float32{0, 0, 0, 0, 0, 1})
	in := []tensor.Tensor{x1, w1, o1}
	s := dynamicSession(t, "", n, 19, in)
	out, err := s.Run(context.Background(), feedsOf(in))
	require.NoError(t, err)
	// The last output's second tap moves past the end: 3 + 10*0.
	assert.Equal(t, []float64{21, 32, 3}, tensor.Float64s(out[0]))

	x3 := make([]float32, 8)
	for i := range x3 {
		x3[i] = float32(i + 1)
	}
	w3 := make([]float32, 8)
	for i := range w3 {
		w3[i] = 1
	}
	in = []tensor.Tensor{
		tensor.MustTensor([]int64{1, 1, 2, 2, 2}, x3),
		tensor.MustTensor([]int64{1, 1, 2, 2, 2}, w3),
		tensor.MustTensor([]int64{1, 24, 1, 1, 1}, make([]float32, 24)),
	}
	s = dynamicSession(t, "", n, 19, in)
	out, err = s.Run(context.Background(), feedsOf(in))
	require.NoError(t, err)
	assert.Equal(t, []float64{36}, tensor.Float64s(out[0]))
}
