package session

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/kernelops"
	"github.com/loomrt/loom/go/session/internal/ops/nn"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// conv2d_cout (conv_fast.loom) keeps output channels in its vectors, for small images with
// output channels per group a multiple of 8. Its weights are transposed once when the plan
// knows them (a constant operand) and by conv_wt each run otherwise; each case runs both
// ways against the Go host functions on fresh random inputs.

// planSymbols plans node for in, with the inputs' values known to the planner (static) or
// not, and returns the symbols the plan launches.
func planSymbols(t *testing.T, n *graph.Node, in []tensor.Tensor, static bool) []string {
	t.Helper()
	infos := ops.InfosOf(in)
	if static {
		infos = ops.InfosOfStatic(in)
	}
	p, reason, err := ops.KernelPlanners[ops.PlannerKey(n)](n, 18, infos)
	require.NoError(t, err)
	require.NotNil(t, p, "declined: %s", reason)
	var got []string
	for _, c := range p.Calls {
		got = append(got, c.Symbol)
	}
	return got
}

// checkKernelOpDynamic is checkKernelOp for a planner that sees no input values (as for a
// model's weights fed at run time).
func checkKernelOpDynamic(t *testing.T, s *InferenceSession, n *graph.Node, in []tensor.Tensor, host ops.OpFunc, atol, rtol float64) {
	t.Helper()
	p, reason, err := ops.KernelPlanners[ops.PlannerKey(n)](n, 18, ops.InfosOf(in))
	require.NoError(t, err)
	require.NotNil(t, p, "the planner declined: %s", reason)
	rc := testRunCtx(s, 18)
	defer rc.Close()
	got, err := rc.RunKernelPlan(p, in)
	require.NoError(t, err)
	if host == nil {
		host = ops.HostOps[n.OpType]
	}
	want, err := host(rc, n, in)
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].Dims(), got[i].Dims(), "output %d shape", i)
		w, g := tensor.Float64s(want[i]), tensor.Float64s(got[i])
		for j := range w {
			require.InDelta(t, w[j], g[j], atol+rtol*math.Abs(w[j]), "output %d element %d (%s)", i, j, ops.Variant(p))
		}
	}
}

// checkCout requires that n runs as conv2d_cout for in, with its weights as a constant
// operand when the planner knows them and through conv_wt when not, and checks both plans.
func checkCout(t *testing.T, s *InferenceSession, n *graph.Node, in []tensor.Tensor, host ops.OpFunc) {
	t.Helper()
	static := planSymbols(t, n, in, true)
	require.Contains(t, static, "conv2d_cout")
	require.NotContains(t, static, "conv_wt")
	require.NotContains(t, static, "conv2d_direct")
	dynamic := planSymbols(t, n, in, false)
	require.Contains(t, dynamic, "conv2d_cout")
	require.Contains(t, dynamic, "conv_wt")
	checkKernelOp(t, s, n, 18, in, host, convGemmTol, convGemmTol)
	checkKernelOpDynamic(t, s, n, in, host, convGemmTol, convGemmTol)
}

func TestConvCoutAgainstHost(t *testing.T) {
	// The tile choices below were measured on AVX-512's 32 registers (AVX2's 16 keep smaller
	// tiles: fewer columns than a row, so no PAD mode for MNIST's rows of 14).
	defer kernelops.SetVectorFile(loom.MustParseTarget("host-x86_64-v4"))()
	s := kernelCheckSession(t)
	f32 := f32Rand(t)
	conv, pads, strides, dil, group := convNode, padsAttr, stridesAttr, dilationsAttr, groupAttr
	cases := []struct {
		name string
		node *graph.Node
		in   []tensor.Tensor
	}{
		{"mnist_conv2", conv(pads(2, 2, 2, 2)), []tensor.Tensor{f32(1, 8, 14, 14), f32(16, 8, 5, 5), f32(16)}},
		{"mnist_conv2_no_bias", conv(pads(2, 2, 2, 2)), []tensor.Tensor{f32(1, 8, 14, 14), f32(16, 8, 5, 5)}},
		// Odd sizes: 13 columns, 11 rows, three input channels, batches.
		{"odd_sizes_batch", conv(pads(1, 1, 1, 1)), []tensor.Tensor{f32(2, 3, 11, 13), f32(16, 3, 3, 3), f32(16)}},
		// 8 output channels (8-lane vectors), stride 2 (conv_pad's column phases).
		{"stride2_8_channels", conv(pads(1, 1, 1, 1), strides(2, 2)), []tensor.Tensor{f32(1, 4, 15, 17), f32(8, 4, 3, 3), f32(8)}},
		{"stride_1x3", conv(pads(2, 1, 0, 2), strides(1, 3)), []tensor.Tensor{f32(1, 5, 9, 29), f32(16, 5, 3, 4), f32(16)}},
		// No padding and unit strides: x read in place, no conv_pad.
		{"no_padding", conv(), []tensor.Tensor{f32(1, 6, 12, 12), f32(16, 6, 3, 3), f32(16)}},
		{"asymmetric_padding", conv(pads(0, 1, 2, 0)), []tensor.Tensor{f32(1, 4, 10, 9), f32(16, 4, 3, 3)}},
		{"24_channels", conv(pads(1, 1, 1, 1)), []tensor.Tensor{f32(1, 8, 6, 6), f32(24, 8, 3, 3), f32(24)}},
		{"dilated", conv(pads(2, 2, 2, 2), dil(2, 2)), []tensor.Tensor{f32(1, 4, 12, 12), f32(16, 4, 3, 3), f32(16)}},
		// Several channel vectors per tile, and channel tiles.
		{"48_channels", conv(pads(1, 1, 1, 1)), []tensor.Tensor{f32(1, 8, 7, 7), f32(48, 8, 3, 3), f32(48)}},
		{"groups", conv(pads(1, 1, 1, 1), group(2)), []tensor.Tensor{f32(2, 6, 9, 10), f32(32, 3, 3, 3), f32(32)}},
		// 1-D: one row of 10 outputs.
		{"1d", conv(pads(2, 2)), []tensor.Tensor{f32(1, 2, 10), f32(16, 2, 5), f32(16)}},
		// SAME_UPPER, as MNIST's export states its padding.
		{"same_upper", conv(graph.StringAttr("auto_pad", "SAME_UPPER"), graph.IntsAttr("kernel_shape", 5, 5)),
			[]tensor.Tensor{f32(1, 8, 14, 14), f32(16, 8, 5, 5), f32(16)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkCout(t, s, c.node, c.in, nil) })
	}
}

// convAffineRef is FusedConv without an activation: the host Conv, then output_scale and
// output_shift.
func convAffineRef(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	y, err := ops.HostOps["Conv"](rc, n, in)
	if err != nil {
		return nil, err
	}
	scale, shift := n.AttrFloat("output_scale", 1), n.AttrFloat("output_shift", 0)
	out := y[0].Data().([]float32)
	for i, v := range out {
		out[i] = v*scale + shift
	}
	return y, nil
}

func TestFusedConvCoutActivationsAgainstHost(t *testing.T) {
	s := kernelCheckSession(t)
	f32 := f32Rand(t)
	acts := fusedActivations
	shapes := []struct {
		name  string
		in    []tensor.Tensor
		attrs []*graph.Attribute
	}{
		{"mnist_conv2", []tensor.Tensor{f32(1, 8, 14, 14), f32(16, 8, 5, 5), f32(16)}, []*graph.Attribute{graph.IntsAttr("pads", 2, 2, 2, 2)}},
		{"stride2_no_bias", []tensor.Tensor{f32(1, 3, 13, 11), f32(8, 3, 3, 3)}, []*graph.Attribute{graph.IntsAttr("pads", 1, 1, 1, 1), graph.IntsAttr("strides", 2, 2)}},
	}
	for _, a := range acts {
		for _, sh := range shapes {
			for _, affine := range []bool{false, true} {
				name := a.name + "_" + sh.name
				attrs := append([]*graph.Attribute{graph.StringAttr("activation", a.name)}, sh.attrs...)
				if a.params != nil {
					attrs = append(attrs, &graph.Attribute{Name: "activation_params", Type: graph.AttrFloats, Floats: a.params})
				}
				if affine {
					name += "_affine"
					attrs = append(attrs, graph.FloatAttr("output_scale", 0.75), graph.FloatAttr("output_shift", -0.25))
				}
				t.Run(name, func(t *testing.T) {
					n := graph.NewNode("n", "FusedConv", nil, []string{"y"}, attrs...)
					n.Domain = graph.LoomDomain
					host := nn.FusedConvHost
					if a.name == "" {
						host = convAffineRef // (the host FusedConv wants an activation)
					}
					checkCout(t, s, n, sh.in, host)
				})
			}
		}
	}
}

// TestConvCoutKeepsDirect pins the shapes that stay on conv2d_direct: MNIST's first
// convolution (one input channel: 25 multiply-adds per vector of results, which the lane by
// lane stores would outweigh), wide images, output channels that are no multiple of 8,
// depthwise convolutions.
func TestConvCoutKeepsDirect(t *testing.T) {
	f32 := f32Rand(t)
	conv := func(attrs ...*graph.Attribute) *graph.Node {
		return graph.NewNode("n", "Conv", nil, []string{"y"}, attrs...)
	}
	pads := func(p int64) *graph.Attribute { return graph.IntsAttr("pads", p, p, p, p) }
	cases := []struct {
		name string
		node *graph.Node
		in   []tensor.Tensor
	}{
		{"mnist_conv1", conv(pads(2)), []tensor.Tensor{f32(1, 1, 28, 28), f32(8, 1, 5, 5), f32(8)}},
		{"wide", conv(pads(1)), []tensor.Tensor{f32(1, 8, 8, 40), f32(16, 8, 3, 3), f32(16)}},
		{"12_channels", conv(pads(1)), []tensor.Tensor{f32(1, 8, 14, 14), f32(12, 8, 3, 3), f32(12)}},
		{"depthwise", conv(pads(1), graph.IntAttr("group", 16)), []tensor.Tensor{f32(1, 16, 14, 14), f32(16, 1, 3, 3), f32(16)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, static := range []bool{false, true} {
				got := planSymbols(t, c.node, c.in, static)
				require.Contains(t, got, "conv2d_direct")
				require.NotContains(t, got, "conv2d_cout")
			}
		})
	}
}

func TestCoutWeights(t *testing.T) {
	// w [groups 2, mg 3, kd 2] -> wt [2, 2, 3].
	w := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	require.Equal(t, []float32{1, 3, 5, 2, 4, 6, 7, 9, 11, 8, 10, 12}, kernelops.CoutWeights(w, 2, 3, 2))
}

// BenchmarkConvCout times convolutions that run as conv2d_cout as BenchmarkConvGemm does (a
// recorded graph replayed on one worker thread); their planner sees no weights, so each
// run also transposes them (conv_wt).
//
//	go test ./go/session -run '^$' -bench ConvCout -benchtime 2000x
func BenchmarkConvCout(b *testing.B) {
	pads := func(p int64) *graph.Attribute { return graph.IntsAttr("pads", p, p, p, p) }
	cases := []planBench{
		fusedConvBench("mnist_conv2_5x5_c8_m16_14x14", "Relu", []int64{1, 8, 14, 14}, []int64{16, 8, 5, 5}, 14, 14, pads(2)),
		convBench("3x3_c16_m8_6x6", []int64{1, 16, 6, 6}, []int64{8, 16, 3, 3}, 6, 6, false, pads(1)),
		convBench("3x3_c8_m48_7x7", []int64{1, 8, 7, 7}, []int64{48, 8, 3, 3}, 7, 7, true, pads(1)),
		convBench("3x3_s2_c4_m8_15x17", []int64{1, 4, 15, 17}, []int64{8, 4, 3, 3}, 8, 9, true, pads(1), graph.IntsAttr("strides", 2, 2)),
	}
	runPlanBenches(b, cases)
}
