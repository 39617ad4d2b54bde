package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/kernelops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// conv2d_cout's PAD mode (conv_fast.loom): tiles of whole output rows read x itself and skip
// the taps that fall on padding, so no conv_pad runs. Each case pins the mode (or its
// absence) and checks the plan, with the weights known and not, against the Go host Conv on
// fresh random inputs.

// coutPadConfig returns the conv2d_cout launch of n's plan for in (weights known) and
// whether the plan also launches conv_pad.
func coutPadConfig(t *testing.T, n *graph.Node, in []tensor.Tensor) (cfg map[string]string, convPad bool) {
	t.Helper()
	p, reason, err := ops.KernelPlanners[ops.PlannerKey(n)](n, 18, ops.InfosOfStatic(in))
	require.NoError(t, err)
	require.NotNil(t, p, "declined: %s", reason)
	for _, c := range p.Calls {
		switch c.Symbol {
		case "conv2d_cout":
			cfg = c.Config
		case "conv_pad":
			convPad = true
		}
	}
	require.NotNil(t, cfg, "no conv2d_cout in the plan")
	return cfg, convPad
}

func TestConvCoutPadAgainstHost(t *testing.T) {
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
		pad  bool // conv2d_cout's PAD mode, without conv_pad
		// convPad: the plan copies x through conv_pad (padding, rows wider than one tile).
		convPad bool
	}{
		{"mnist_conv2", conv(pads(2, 2, 2, 2)), []tensor.Tensor{f32(1, 8, 14, 14), f32(16, 8, 5, 5), f32(16)}, true, false},
		{"mnist_conv2_batch_no_bias", conv(pads(2, 2, 2, 2)), []tensor.Tensor{f32(3, 8, 14, 14), f32(16, 8, 5, 5)}, true, false},
		// Padding larger than the kernel's reach on one side, none on another.
		{"asymmetric_padding", conv(pads(0, 3, 2, 0)), []tensor.Tensor{f32(1, 4, 10, 9), f32(16, 4, 3, 3), f32(16)}, true, false},
		{"stride2", conv(pads(1, 1, 1, 1), strides(2, 2)), []tensor.Tensor{f32(2, 4, 15, 17), f32(8, 4, 3, 3), f32(8)}, true, false},
		{"stride_rows_only", conv(pads(1, 2, 1, 2), strides(2, 1)), []tensor.Tensor{f32(1, 3, 13, 12), f32(16, 3, 3, 5), f32(16)}, true, false},
		{"dilated", conv(pads(2, 2, 2, 2), dil(2, 2)), []tensor.Tensor{f32(1, 4, 12, 12), f32(16, 4, 3, 3), f32(16)}, true, false},
		{"groups_channel_tiles", conv(pads(1, 1, 1, 1), group(2)), []tensor.Tensor{f32(2, 6, 9, 10), f32(64, 3, 3, 3), f32(64)}, true, false},
		{"1d", conv(pads(2, 2)), []tensor.Tensor{f32(1, 2, 10), f32(16, 2, 5), f32(16)}, true, false},
		{"same_upper", conv(graph.StringAttr("auto_pad", "SAME_UPPER"), graph.IntsAttr("kernel_shape", 5, 5)),
			[]tensor.Tensor{f32(1, 8, 14, 14), f32(16, 8, 5, 5), f32(16)}, true, false},
		// Rows too wide for one tile keep conv_pad.
		{"wide_rows", conv(pads(2, 2, 2, 2)), []tensor.Tensor{f32(1, 16, 3, 26), f32(16, 16, 5, 5), f32(16)}, false, true},
		// No padding: nothing to fold.
		{"no_padding", conv(), []tensor.Tensor{f32(1, 6, 12, 12), f32(16, 6, 3, 3), f32(16)}, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, convPad := coutPadConfig(t, c.node, c.in)
			if c.pad {
				require.Equal(t, "true", cfg["PAD"])
				require.False(t, convPad)
			} else {
				require.NotEqual(t, "true", cfg["PAD"])
			}
			require.Equal(t, c.convPad, convPad)
			checkKernelOp(t, s, c.node, 18, c.in, nil, convGemmTol, convGemmTol)
			checkKernelOpDynamic(t, s, c.node, c.in, nil, convGemmTol, convGemmTol)
		})
	}
}
