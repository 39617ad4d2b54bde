package session

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/nn"
	"github.com/loomrt/loom/go/session/internal/sessiontest"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// FusedConv's hard swish (ACT 7) and swish (ACT 8) activations and its output_scale and
// output_shift (AFFINE) on every conv path (conv2d_direct, gemm_nn for 1x1, gemm_nt for one
// pixel and for few output positions), against the host Conv followed by the same functions
// written out here, on fresh random inputs.

// epilogueRef is FusedConv as the host Conv, the activation and output_scale·y + output_shift.
func epilogueRef(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	y, err := ops.HostOps["Conv"](rc, n, in)
	if err != nil {
		return nil, err
	}
	params := n.AttrFloats("activation_params")
	var f func(float64) float64
	switch a := n.AttrString("activation", ""); a {
	case "HardSwish":
		f = func(v float64) float64 { return v * math.Max(0, math.Min(1, v/6+0.5)) }
	case "Swish":
		beta := 1.0
		if len(params) > 0 {
			beta = float64(params[0])
		}
		f = func(v float64) float64 { return v / (1 + math.Exp(-beta*v)) }
	default:
		f = activationRef(a, params)
	}
	scale, shift := float64(n.AttrFloat("output_scale", 1)), float64(n.AttrFloat("output_shift", 0))
	out := y[0].Data().([]float32)
	for i, v := range out {
		out[i] = float32(scale*f(float64(v)) + shift)
	}
	return y, nil
}

// scaledF32 draws values in [-k, k], so that conv outputs reach past hard swish's bends at ±3.
func scaledF32(t *testing.T, k float32) func(shape ...int64) tensor.Tensor {
	rnd := sessiontest.NewRand(t)
	return func(shape ...int64) tensor.Tensor {
		v := randomF32(rnd, ops.Numel(shape))
		for i := range v {
			v[i] *= k
		}
		return tensor.MustTensor(shape, v)
	}
}

func fusedConvNode(act string, params []float32, affine bool, attrs ...*graph.Attribute) *graph.Node {
	attrs = append(attrs, graph.StringAttr("activation", act))
	if params != nil {
		attrs = append(attrs, &graph.Attribute{Name: "activation_params", Type: graph.AttrFloats, Floats: params})
	}
	if affine {
		attrs = append(attrs, graph.FloatAttr("output_scale", -0.37), graph.FloatAttr("output_shift", 0.81))
	}
	n := graph.NewNode("n", "FusedConv", nil, []string{"y"}, attrs...)
	n.Domain = graph.LoomDomain
	return n
}

func TestFusedConvEpilogueAgainstHost(t *testing.T) {
	s := kernelCheckSession(t)
	f32 := scaledF32(t, 2)
	pads := func(p ...int64) *graph.Attribute { return graph.IntsAttr("pads", p...) }
	acts := []struct {
		name   string
		params []float32
		affine bool
	}{
		{"HardSwish", nil, false}, {"HardSwish", nil, true}, {"Swish", nil, false}, {"Swish", []float32{1.7}, true},
		{"Relu", nil, true}, {"Clip", []float32{-0.5, 0.7}, true},
	}
	shapes := []struct {
		name   string
		in     []tensor.Tensor
		attrs  []*graph.Attribute
		symbol string
	}{
		{"direct", []tensor.Tensor{f32(1, 3, 10, 21), f32(5, 3, 3, 3), f32(5)}, []*graph.Attribute{pads(1, 1, 1, 1)}, "conv2d_direct"},
		// PP-OCR's depthwise 3x3 over 16 channels.
		{"depthwise", []tensor.Tensor{f32(1, 16, 12, 40), f32(16, 1, 3, 3), f32(16)}, []*graph.Attribute{pads(1, 1, 1, 1), graph.IntAttr("group", 16)}, "conv2d_direct"},
		{"no_bias", []tensor.Tensor{f32(1, 2, 6, 6), f32(3, 2, 3, 3)}, nil, "conv2d_direct"},
		{"1x1", []tensor.Tensor{f32(1, 7, 4, 20), f32(6, 7, 1, 1), f32(6)}, nil, "gemm_nn"},
		{"1x1_one_pixel", []tensor.Tensor{f32(1, 40, 1, 1), f32(9, 40, 1, 1), f32(9)}, nil, "gemm_nt"},
		{"few_positions", []tensor.Tensor{f32(1, 64, 1), f32(20, 64, 3), f32(20)}, []*graph.Attribute{pads(1, 1)}, "gemm_nt"},
	}
	for _, a := range acts {
		for _, sh := range shapes {
			name := a.name + "_" + sh.name
			if a.affine {
				name += "_affine"
			}
			t.Run(name, func(t *testing.T) {
				n := fusedConvNode(a.name, a.params, a.affine, sh.attrs...)
				requirePlanUses(t, n, sh.in, sh.symbol)
				checkKernelOp(t, s, n, 18, sh.in, epilogueRef, convGemmTol, convGemmTol)
			})
		}
	}
}

// The host fallback computes the same as the reference.
func TestFusedConvHostEpilogue(t *testing.T) {
	s := kernelCheckSession(t)
	f32 := scaledF32(t, 2)
	rc := testRunCtx(s, 18)
	defer rc.Close()
	for _, a := range []struct {
		name   string
		params []float32
	}{{"HardSwish", nil}, {"Swish", nil}, {"Swish", []float32{0.6}}} {
		n := fusedConvNode(a.name, a.params, true, graph.IntsAttr("pads", 1, 1, 1, 1))
		in := []tensor.Tensor{f32(2, 3, 7, 9), f32(4, 3, 3, 3), f32(4)}
		want, err := epilogueRef(rc, n, in)
		require.NoError(t, err)
		got, err := nn.FusedConvHost(rc, n, in)
		require.NoError(t, err)
		w, g := tensor.Float64s(want[0]), tensor.Float64s(got[0])
		for i := range w {
			require.InDelta(t, w[i], g[i], 1e-5*(1+math.Abs(w[i])), "%s element %d", a.name, i)
		}
	}
}

// The optimizer's HardSwish for models before opset 14 runs the activation kernel.
func TestLoomHardSwishKernel(t *testing.T) {
	s := kernelCheckSession(t)
	n := graph.NewNode("n", "HardSwish", nil, []string{"y"})
	n.Domain = graph.LoomDomain
	checkKernelOp(t, s, n, 9, []tensor.Tensor{scaledF32(t, 5)(3, 70)}, ops.HostOps["HardSwish"], 1e-6, 1e-6)
}
