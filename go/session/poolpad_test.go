package session

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/sessiontest"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// pool2d_pad (linalg.loom) pools every window whose taps may leave the image (padding,
// dilation, ceil_mode's overhang) in vectors over each row's interior columns and tests each
// tap of the border ones. Random windows, strides, pads, dilations and modes on fresh random
// images (narrower and wider than the vectors, fewer rows than the window) match the Go host
// function; named cases pin the common ones (ResNet's stem pool, Inception's 3x3 average,
// YOLO's 5x5 SPP pool) and the vector widths.
func TestPoolPadAgainstHost(t *testing.T) {
	s := kernelCheckSession(t)
	f32 := f32Rand(t)
	rnd := sessiontest.NewRand(t)
	pool := func(op string, kernel, strides, pads, dilations []int64, ceil, countPad int64) *graph.Node {
		attrs := []*graph.Attribute{graph.IntsAttr("kernel_shape", kernel...), graph.IntsAttr("strides", strides...),
			graph.IntsAttr("pads", pads...), graph.IntAttr("ceil_mode", ceil)}
		if dilations != nil {
			attrs = append(attrs, graph.IntsAttr("dilations", dilations...))
		}
		if op == "AveragePool" {
			attrs = append(attrs, graph.IntAttr("count_include_pad", countPad))
		}
		return graph.NewNode("n", op, []string{"x"}, []string{"y"}, attrs...)
	}
	type poolCase struct {
		name string
		node *graph.Node
		in   tensor.Tensor
		vl   string // "" any
	}
	cases := []poolCase{
		{"resnet_stem", pool("MaxPool", []int64{3, 3}, []int64{2, 2}, []int64{1, 1, 1, 1}, nil, 0, 0), f32(1, 8, 112, 112), "16"},
		{"inception_avg", pool("AveragePool", []int64{3, 3}, []int64{1, 1}, []int64{1, 1, 1, 1}, nil, 0, 0), f32(1, 6, 28, 28), "16"},
		{"inception_avg_count_pad", pool("AveragePool", []int64{3, 3}, []int64{1, 1}, []int64{1, 1, 1, 1}, nil, 0, 1), f32(1, 6, 13, 13), "8"},
		{"yolo_spp", pool("MaxPool", []int64{5, 5}, []int64{1, 1}, []int64{2, 2, 2, 2}, nil, 0, 0), f32(1, 4, 20, 20), "16"},
		{"ceil_overhang", pool("MaxPool", []int64{2, 2}, []int64{2, 2}, []int64{0, 0, 0, 0}, nil, 1, 0), f32(2, 3, 9, 41), "16"},
		{"narrow", pool("AveragePool", []int64{3, 3}, []int64{2, 2}, []int64{1, 1, 1, 1}, nil, 1, 1), f32(1, 3, 5, 6), ""},
		{"pads_wider_than_image", pool("MaxPool", []int64{3, 3}, []int64{1, 1}, []int64{2, 2, 2, 2}, nil, 0, 0), f32(1, 2, 1, 2), ""},
	}
	for i := range 24 {
		kh, kw := int64(1+rnd.IntN(5)), int64(1+rnd.IntN(5))
		sh, sw := int64(1+rnd.IntN(3)), int64(1+rnd.IntN(3))
		dh, dw := int64(1+rnd.IntN(2)), int64(1+rnd.IntN(2))
		pad := func(k int64) int64 { return rand.Int64N(k) } // ONNX: a pad shorter than the window
		pads := []int64{pad(kh), pad(kw), pad(kh), pad(kw)}
		h := max((kh-1)*dh+1-pads[0]-pads[2], 1) + int64(rnd.IntN(12))
		w := max((kw-1)*dw+1-pads[1]-pads[3], 1) + int64(rnd.IntN(70))
		op := []string{"MaxPool", "AveragePool"}[i%2]
		n := pool(op, []int64{kh, kw}, []int64{sh, sw}, pads, []int64{dh, dw}, int64(rnd.IntN(2)), int64(rnd.IntN(2)))
		if op == "AveragePool" && (dh != 1 || dw != 1) { // AveragePool's dilations are opset 19's
			dh, dw = 1, 1
			n = pool(op, []int64{kh, kw}, []int64{sh, sw}, pads, nil, int64(rnd.IntN(2)), int64(rnd.IntN(2)))
		}
		cases = append(cases, poolCase{fmt.Sprintf("%s_k%dx%d_s%dx%d_d%dx%d_p%v_%dx%d", op, kh, kw, sh, sw, dh, dw, pads, h, w), n,
			f32(int64(1+rnd.IntN(2)), int64(1+rnd.IntN(5)), h, w), ""})
	}
	padded := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, reason, err := ops.KernelPlanners[ops.PlannerKey(c.node)](c.node, 19, ops.InfosOf([]tensor.Tensor{c.in}))
			require.NoError(t, err)
			require.NotNil(t, p, reason)
			require.Len(t, p.Calls, 1)
			if p.Calls[0].Symbol == "pool2d_pad" {
				padded++
				if c.vl != "" {
					require.Equal(t, c.vl, p.Calls[0].Config["VL"])
				}
			} else {
				require.Empty(t, c.vl, "%s: not pool2d_pad", p.Calls[0].Symbol)
			}
			checkKernelOp(t, s, c.node, 19, []tensor.Tensor{c.in}, nil, 1e-6, 1e-6)
		})
	}
	require.Greater(t, padded, len(cases)/2, "pool2d_pad served the padded windows")
}
