package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/kernelops"
	"github.com/loomrt/loom/go/session/internal/ops/nn"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Convolutions with few output positions run as gemm_nt dot products along the receptive
// field (convDotProducts): reading x's windows in place, or through conv_cols. Each case is
// checked against the Go host Conv on fresh random inputs.

// requirePlanAvoids requires that node's plan for inputs launches no kernel named symbol.
func requirePlanAvoids(t *testing.T, n *graph.Node, in []tensor.Tensor, symbol string) {
	t.Helper()
	p, reason, err := ops.KernelPlanners[ops.PlannerKey(n)](n, 18, ops.InfosOf(in))
	require.NoError(t, err)
	require.NotNil(t, p, "declined: %s", reason)
	for _, c := range p.Calls {
		require.NotEqual(t, symbol, c.Symbol, "plan runs %s", ops.Describe(c))
	}
}

func TestConvDotProductsAgainstHost(t *testing.T) {
	s := kernelCheckSession(t)
	f32 := f32Rand(t)
	conv, pads, strides, dil, group := convNode, padsAttr, stridesAttr, dilationsAttr, groupAttr
	cases := []struct {
		name string
		node *graph.Node
		in   []tensor.Tensor
		// cols: whether the plan copies receptive fields (conv_cols) or reads x in place.
		cols bool
	}{
		// Silero VAD v5 at 16 kHz: the STFT as a convolution (3 positions of 256 samples) and
		// the four encoder convolutions.
		{"silero_stft", conv(strides(128)), []tensor.Tensor{f32(1, 1, 576), f32(258, 1, 256)}, false},
		{"silero_stft_2d", conv(strides(1, 128)), []tensor.Tensor{f32(1, 1, 1, 640), f32(258, 1, 1, 256)}, false},
		{"silero_encoder_0", conv(pads(1, 1)), []tensor.Tensor{f32(1, 129, 3), f32(128, 129, 3), f32(128)}, true},
		{"silero_encoder_1", conv(pads(1, 1), strides(2)), []tensor.Tensor{f32(1, 128, 3), f32(64, 128, 3), f32(64)}, true},
		{"silero_encoder_2", conv(pads(1, 1), strides(2)), []tensor.Tensor{f32(1, 64, 2), f32(64, 64, 3), f32(64)}, true},
		{"silero_encoder_3", conv(pads(1, 1)), []tensor.Tensor{f32(1, 64, 1), f32(128, 64, 3), f32(128)}, true},
		// Windows in place with batches, groups and a bias, and a window stride that
		// leaves samples out.
		{"windows_grouped_batch", conv(strides(20), group(3)), []tensor.Tensor{f32(2, 3, 100), f32(6, 1, 40), f32(6)}, false},
		{"windows_gaps", conv(strides(50)), []tensor.Tensor{f32(1, 1, 163), f32(5, 1, 37)}, false},
		// End padding the last window reaches, start padding, dilation: copied.
		{"padded_end_window", conv(strides(30), pads(0, 30)), []tensor.Tensor{f32(1, 1, 100), f32(4, 1, 40), f32(4)}, true},
		{"padded_windows", conv(strides(32), pads(16, 16)), []tensor.Tensor{f32(1, 1, 300), f32(17, 1, 64), f32(17)}, true},
		{"dilated_windows", conv(strides(50), dil(2)), []tensor.Tensor{f32(1, 1, 200), f32(5, 1, 33)}, true},
		// Odd sizes: 7 output channels over 39 inputs (scalar tails), one position.
		{"odd_one_position", conv(pads(1, 1)), []tensor.Tensor{f32(1, 13, 1), f32(7, 13, 3), f32(7)}, true},
		// 2-D, batches, groups, asymmetric padding, strides and dilation.
		{"grouped_2d", conv(group(3), pads(1, 2, 0, 1), dil(1, 2), strides(2, 3)),
			[]tensor.Tensor{f32(3, 12, 5, 7), f32(9, 4, 3, 4), f32(9)}, true},
		{"small_map_2d", conv(pads(1, 1, 1, 1)), []tensor.Tensor{f32(2, 40, 4, 4), f32(33, 40, 3, 3), f32(33)}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			requirePlanUses(t, c.node, c.in, "gemm_nt")
			requirePlanAvoids(t, c.node, c.in, "conv2d_direct")
			if c.cols {
				requirePlanUses(t, c.node, c.in, "conv_cols")
			} else {
				requirePlanAvoids(t, c.node, c.in, "conv_cols")
			}
			checkKernelOp(t, s, c.node, 18, c.in, nil, convGemmTol, convGemmTol)
		})
	}
}

// TestConvDotProductsKeepsDirect pins the shapes that stay on conv2d_direct: a full vector of
// output columns, many positions, short receptive fields.
func TestConvDotProductsKeepsDirect(t *testing.T) {
	// The tile choices below were measured on AVX-512's 32 registers (AVX2's 16 keep smaller
	// tiles, so other kernels win there).
	defer kernelops.SetVectorFile(loom.MustParseTarget("host-x86_64-v4"))()
	f32 := f32Rand(t)
	conv := func(pads ...int64) *graph.Node {
		return graph.NewNode("n", "Conv", nil, []string{"y"}, graph.IntsAttr("pads", pads...))
	}
	cases := []struct {
		name string
		node *graph.Node
		in   []tensor.Tensor
	}{
		{"16_columns", conv(1, 1), []tensor.Tensor{f32(1, 64, 16), f32(32, 64, 3)}},
		{"many_positions", conv(1, 1, 1, 1), []tensor.Tensor{f32(1, 16, 6, 6), f32(12, 16, 3, 3)}}, // (8 channels run as conv2d_cout)
		{"short_fields", conv(1, 1), []tensor.Tensor{f32(1, 3, 4), f32(8, 3, 3)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { requirePlanUses(t, c.node, c.in, "conv2d_direct") })
	}
}

func TestFusedConvDotProductsActivationsAgainstHost(t *testing.T) {
	s := kernelCheckSession(t)
	f32 := f32Rand(t)
	acts := []struct {
		name   string
		params []float32
	}{{"Relu", nil}, {"Sigmoid", nil}, {"Tanh", nil}, {"LeakyRelu", []float32{0.3}},
		{"HardSigmoid", []float32{0.25, 0.4}}, {"Clip", []float32{-0.5, 0.7}}, {"Clip", nil}}
	shapes := []struct {
		name  string
		in    []tensor.Tensor
		attrs []*graph.Attribute
	}{
		{"cols", []tensor.Tensor{f32(1, 129, 3), f32(128, 129, 3), f32(128)}, []*graph.Attribute{graph.IntsAttr("pads", 1, 1)}},
		{"cols_no_bias", []tensor.Tensor{f32(1, 64, 2), f32(64, 64, 3)}, []*graph.Attribute{graph.IntsAttr("pads", 1, 1), graph.IntsAttr("strides", 2)}},
		{"windows", []tensor.Tensor{f32(1, 1, 576), f32(20, 1, 256), f32(20)}, []*graph.Attribute{graph.IntsAttr("strides", 128)}},
	}
	for _, a := range acts {
		for _, sh := range shapes {
			t.Run(a.name+"_"+sh.name, func(t *testing.T) {
				attrs := append([]*graph.Attribute{graph.StringAttr("activation", a.name)}, sh.attrs...)
				if a.params != nil {
					attrs = append(attrs, &graph.Attribute{Name: "activation_params", Type: graph.AttrFloats, Floats: a.params})
				}
				n := graph.NewNode("n", "FusedConv", nil, []string{"y"}, attrs...)
				n.Domain = graph.LoomDomain
				requirePlanUses(t, n, sh.in, "gemm_nt")
				checkKernelOp(t, s, n, 18, sh.in, fusedConvRef, convGemmTol, convGemmTol)
			})
		}
	}
	// FusedConv's newer activations and its output affine, against its host function.
	for _, act := range []string{"HardSwish", "Swish"} {
		t.Run(act+"_affine", func(t *testing.T) {
			in := []tensor.Tensor{f32(1, 128, 3), f32(64, 128, 3), f32(64)}
			n := graph.NewNode("n", "FusedConv", nil, []string{"y"}, graph.StringAttr("activation", act),
				graph.IntsAttr("pads", 1, 1), graph.IntsAttr("strides", 2),
				graph.FloatAttr("output_scale", 0.75), graph.FloatAttr("output_shift", -0.25))
			n.Domain = graph.LoomDomain
			requirePlanUses(t, n, in, "gemm_nt")
			checkKernelOp(t, s, n, 18, in, nn.FusedConvHost, convGemmTol, convGemmTol)
		})
	}
}

// TestPadReflectAgainstHost covers both paths of the pad kernel's reflect mode: one reflection
// per axis (Silero VAD's padding before its STFT) and pads longer than the axis, which reflect
// more than once.
func TestPadReflectAgainstHost(t *testing.T) {
	s := kernelCheckSession(t)
	f32 := f32Rand(t)
	pad := kernelNode("Pad", graph.StringAttr("mode", "reflect"))
	cases := []struct {
		name string
		in   []tensor.Tensor
	}{
		{"silero", []tensor.Tensor{f32(1, 1, 512), int64Vec(0, 0, 0, 0, 0, 64)}},
		{"both_ends_2d", []tensor.Tensor{f32(2, 3, 6, 5), int64Vec(0, 0, 3, 4, 0, 0, 5, 3)}},
		{"several_reflections", []tensor.Tensor{f32(3, 4), int64Vec(0, 7, 0, 9)}},
		{"outer_axes", []tensor.Tensor{f32(4, 3, 7), int64Vec(2, 1, 0, 3, 1, 6)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// (The Pad planner's one kernel is pad.)
			checkKernelOp(t, s, pad, 18, c.in, nil, 0, 0)
		})
	}
}

// BenchmarkConvDotProducts times Silero VAD v5's convolutions (16 kHz) through the compiled
// run plan, weights as initializers.
func BenchmarkConvDotProducts(b *testing.B) {
	rnd := inferRand()
	f32 := func(shape ...int64) tensor.Tensor {
		return tensor.MustTensor(shape, randomF32(rnd, ops.Numel(shape)))
	}
	conv := func(attrs ...*graph.Attribute) *graph.Node {
		return graph.NewNode("n", "Conv", nil, []string{"y"}, attrs...)
	}
	cases := []struct {
		name string
		node *graph.Node
		in   []tensor.Tensor
	}{
		{"silero_stft_1x1x576_258x256_s128", conv(graph.IntsAttr("strides", 128)), []tensor.Tensor{f32(1, 1, 576), f32(258, 1, 256)}},
		{"silero_encoder_1x129x3_128x3", conv(graph.IntsAttr("pads", 1, 1)), []tensor.Tensor{f32(1, 129, 3), f32(128, 129, 3), f32(128)}},
		{"silero_encoder_1x64x1_128x3", conv(graph.IntsAttr("pads", 1, 1)), []tensor.Tensor{f32(1, 64, 1), f32(128, 64, 3), f32(128)}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			benchKernelOp(b, ops.KernelPlanners["Conv"], c.node, 18, c.in, ops.HostOps["Conv"], 1, 2)
		})
	}
}
