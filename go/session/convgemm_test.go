package session

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/sessiontest"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// The register-tiled Conv and GEMM kernels (gemm_fast.loom, conv_fast.loom) against the Go
// host functions on fresh random inputs, one case per path of their planners.

// convGemmTol: float32 sums of up to a few thousand products, in another order than the
// host's.
const convGemmTol = 2e-4

func f32Rand(t *testing.T) func(shape ...int64) tensor.Tensor {
	rnd := sessiontest.NewRand(t)
	return func(shape ...int64) tensor.Tensor {
		return tensor.MustTensor(shape, randomF32(rnd, ops.Numel(shape)))
	}
}

// fusedActivations are FusedConv's activations with parameters (nil: the defaults).
var fusedActivations = []struct {
	name   string
	params []float32
}{{"", nil}, {"Relu", nil}, {"Sigmoid", nil}, {"Tanh", nil}, {"LeakyRelu", []float32{0.3}}, {"LeakyRelu", nil},
	{"HardSigmoid", []float32{0.25, 0.4}}, {"HardSigmoid", nil}, {"Clip", []float32{-0.5, 0.7}}, {"Clip", []float32{0}},
	{"Clip", nil}, {"HardSwish", nil}, {"Swish", []float32{1.5}}, {"Swish", nil}}

// Shorthands of the conv kernel tests.
func convNode(attrs ...*graph.Attribute) *graph.Node {
	return graph.NewNode("n", "Conv", nil, []string{"y"}, attrs...)
}
func padsAttr(p ...int64) *graph.Attribute      { return graph.IntsAttr("pads", p...) }
func stridesAttr(s ...int64) *graph.Attribute   { return graph.IntsAttr("strides", s...) }
func dilationsAttr(d ...int64) *graph.Attribute { return graph.IntsAttr("dilations", d...) }
func groupAttr(g int64) *graph.Attribute        { return graph.IntAttr("group", g) }

// requirePlanUses requires that node's plan for inputs in launches symbol (so that a case
// tests the path it is named after).
func requirePlanUses(t *testing.T, n *graph.Node, in []tensor.Tensor, symbol string) {
	t.Helper()
	p, reason, err := ops.KernelPlanners[ops.PlannerKey(n)](n, 18, ops.InfosOf(in))
	require.NoError(t, err)
	require.NotNil(t, p, "declined: %s", reason)
	var got []string
	for _, c := range p.Calls {
		if c.Symbol == symbol {
			return
		}
		got = append(got, ops.Describe(c))
	}
	require.Failf(t, "wrong kernels", "want %s, plan runs %v", symbol, got)
}

func TestConvKernelsAgainstHost(t *testing.T) {
	s := kernelCheckSession(t)
	f32 := f32Rand(t)
	conv, pads, strides, dil, group := convNode, padsAttr, stridesAttr, dilationsAttr, groupAttr
	cases := []struct {
		name   string
		node   *graph.Node
		in     []tensor.Tensor
		symbol string
	}{
		{"1x1", conv(), []tensor.Tensor{f32(1, 16, 6, 7), f32(20, 16, 1, 1), f32(20)}, "gemm_nn"},
		{"1x1_no_bias_batch", conv(), []tensor.Tensor{f32(3, 5, 4, 9), f32(7, 5, 1, 1)}, "gemm_nn"},
		{"1x1_grouped", conv(group(3)), []tensor.Tensor{f32(2, 6, 5, 5), f32(9, 2, 1, 1), f32(9)}, "gemm_nn"},
		{"1x1_one_pixel", conv(), []tensor.Tensor{f32(1, 120, 1, 1), f32(480, 120, 1, 1), f32(480)}, "gemm_nt"},
		{"1x1_strided", conv(strides(2, 2)), []tensor.Tensor{f32(1, 4, 9, 10), f32(6, 4, 1, 1), f32(6)}, "conv2d_direct"},
		{"1x1_padded", conv(pads(1, 0, 0, 2)), []tensor.Tensor{f32(1, 3, 5, 6), f32(4, 3, 1, 1)}, "conv2d_direct"},
		{"3x3_valid", conv(), []tensor.Tensor{f32(1, 5, 11, 19), f32(13, 5, 3, 3), f32(13)}, "conv2d_direct"},
		{"3x3_pad_stride_batch", conv(pads(1, 2, 0, 1), strides(2, 1)), []tensor.Tensor{f32(2, 3, 9, 8), f32(4, 3, 3, 3), f32(4)}, "conv_pad"},
		{"3x3_stride2", conv(pads(1, 1, 1, 1), strides(2, 2)), []tensor.Tensor{f32(1, 3, 48, 64), f32(16, 3, 3, 3), f32(16)}, "conv_pad"},
		{"3x3_stride_cols", conv(pads(0, 1, 0, 1), strides(1, 3)), []tensor.Tensor{f32(1, 2, 7, 20), f32(5, 2, 3, 3), f32(5)}, "conv_pad"},
		{"dilated", conv(pads(2, 2, 2, 2), dil(2, 2)), []tensor.Tensor{f32(1, 4, 12, 12), f32(6, 4, 3, 3), f32(6)}, "conv2d_direct"},
		{"dilated_strided", conv(pads(1, 3, 1, 3), dil(1, 3), strides(2, 2)), []tensor.Tensor{f32(1, 2, 10, 21), f32(3, 2, 2, 3)}, "conv2d_direct"},
		{"grouped", conv(group(2), pads(1, 1, 1, 1)), []tensor.Tensor{f32(1, 4, 6, 6), f32(6, 2, 3, 3)}, "conv2d_direct"},
		{"depthwise", conv(group(16), pads(1, 1, 1, 1)), []tensor.Tensor{f32(1, 16, 24, 40), f32(16, 1, 3, 3), f32(16)}, "conv2d_direct"},
		{"depthwise_5x5_stride_rows", conv(group(24), pads(2, 2, 2, 2), strides(2, 1)), []tensor.Tensor{f32(1, 24, 12, 20), f32(24, 1, 5, 5), f32(24)}, "conv2d_direct"},
		{"depthwise_stride_cols", conv(group(8), pads(1, 1, 1, 1), strides(1, 2)), []tensor.Tensor{f32(1, 8, 12, 30), f32(8, 1, 3, 3), f32(8)}, "conv_pad"},
		{"depthwise_multiplier", conv(group(4), pads(1, 1, 1, 1)), []tensor.Tensor{f32(2, 4, 7, 9), f32(8, 1, 3, 3), f32(8)}, "conv2d_direct"},
		{"mnist_same_upper", conv(graph.StringAttr("auto_pad", "SAME_UPPER"), graph.IntsAttr("kernel_shape", 5, 5)),
			[]tensor.Tensor{f32(1, 8, 14, 14), f32(16, 8, 5, 5), f32(16)}, "conv2d_cout"},
		{"row_1x3", conv(pads(0, 1, 0, 1)), []tensor.Tensor{f32(1, 48, 1, 40), f32(6, 48, 1, 3), f32(6)}, "conv2d_direct"},
		{"tiny_output", conv(), []tensor.Tensor{f32(1, 2, 3, 3), f32(3, 2, 3, 3), f32(3)}, "conv2d_direct"},
		{"narrow_output", conv(pads(1, 1, 1, 1)), []tensor.Tensor{f32(1, 3, 17, 3), f32(5, 3, 3, 3)}, "conv2d_direct"},
		{"conv1d", conv(pads(2, 1), strides(2)), []tensor.Tensor{f32(2, 3, 37), f32(5, 3, 4), f32(5)}, "conv2d_direct"},
		{"conv1d_1x1", conv(), []tensor.Tensor{f32(1, 8, 33), f32(4, 8, 1)}, "gemm_nn"},
		{"conv1d_long_kernel", conv(strides(16), pads(8, 8)), []tensor.Tensor{f32(1, 2, 300), f32(4, 2, 64), f32(4)}, "conv2d_direct"},
		{"conv1d_prime_kernel", conv(pads(3, 0)), []tensor.Tensor{f32(2, 3, 90), f32(5, 3, 53)}, "conv2d_direct"},
		{"large_k", conv(pads(1, 1, 1, 1)), []tensor.Tensor{f32(1, 96, 5, 9), f32(7, 96, 3, 3), f32(7)}, "conv2d_direct"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			requirePlanUses(t, c.node, c.in, c.symbol)
			checkKernelOp(t, s, c.node, 18, c.in, nil, convGemmTol, convGemmTol)
		})
	}
}

// TestConvVariantsAcrossBatchSizes: a padded convolution's plan launches the same kernel
// variants (file, symbol, specialization) at every batch size, only with other arguments, so
// that a dynamic-batch model's new batch size finds its convolutions' kernels loaded (or
// shipped, when the model was recorded at batch 1) instead of running shape-generic
// stand-ins while a variant compiles. conv_pad's planes a block were bounded by the batch's
// planes (a new variant at batches 2, 3 and 4 of a 3-channel image); by one image's channels,
// they are not. The batch 3 plans run against the host function.
func TestConvVariantsAcrossBatchSizes(t *testing.T) {
	s := kernelCheckSession(t)
	f32 := f32Rand(t)
	conv, pads, strides, group := convNode, padsAttr, stridesAttr, groupAttr
	cases := []struct {
		name      string
		node      *graph.Node
		c, h, w   int64
		m, cg, kh int64
	}{
		{"rgb_3x3_pad", conv(pads(1, 1, 1, 1)), 3, 32, 32, 16, 3, 3},
		{"3x3_pad_16ch", conv(pads(1, 1, 1, 1)), 16, 16, 16, 32, 16, 3},
		{"3x3_stride2", conv(pads(1, 1, 1, 1), strides(2, 2)), 3, 48, 64, 16, 3, 3},
		{"depthwise_stride_cols", conv(group(8), pads(1, 1, 1, 1), strides(1, 2)), 8, 12, 30, 8, 1, 3},
	}
	variants := func(n *graph.Node, in []tensor.Tensor) []string {
		p, reason, err := ops.KernelPlanners[ops.PlannerKey(n)](n, 18, ops.InfosOf(in))
		require.NoError(t, err)
		require.NotNil(t, p, "declined: %s", reason)
		var out []string
		for _, c := range p.Calls {
			out = append(out, ops.Describe(c))
		}
		return out
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := func(nb int64) []tensor.Tensor {
				return []tensor.Tensor{f32(nb, c.c, c.h, c.w), f32(c.m, c.cg, c.kh, c.kh), f32(c.m)}
			}
			requirePlanUses(t, c.node, in(1), "conv_pad")
			want := variants(c.node, in(1))
			for _, nb := range []int64{2, 3, 4, 5, 8, 64} {
				require.Equal(t, want, variants(c.node, in(nb)), "batch %d", nb)
			}
			checkKernelOp(t, s, c.node, 18, in(3), nil, convGemmTol, convGemmTol)
		})
	}
}

// activationRef is FusedConv's activation, written out independently of the kernels.
func activationRef(name string, params []float32) func(float64) float64 {
	p := func(i int, def float64) float64 {
		if i < len(params) {
			return float64(params[i])
		}
		return def
	}
	switch name {
	case "Relu":
		return func(v float64) float64 { return math.Max(v, 0) }
	case "Sigmoid":
		return func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	case "Tanh":
		return math.Tanh
	case "LeakyRelu":
		return func(v float64) float64 {
			if v < 0 {
				return v * p(0, 0.01)
			}
			return v
		}
	case "HardSigmoid":
		return func(v float64) float64 { return math.Max(0, math.Min(1, p(0, 0.2)*v+p(1, 0.5))) }
	case "Clip":
		return func(v float64) float64 { return math.Min(math.Max(v, p(0, math.Inf(-1))), p(1, math.Inf(1))) }
	}
	return func(v float64) float64 { return v }
}

// fusedConvRef is FusedConv as the host Conv followed by activationRef.
func fusedConvRef(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	y, err := ops.HostOps["Conv"](rc, n, in)
	if err != nil {
		return nil, err
	}
	f := activationRef(n.AttrString("activation", ""), n.AttrFloats("activation_params"))
	out := y[0].Data().([]float32)
	for i, v := range out {
		out[i] = float32(f(float64(v)))
	}
	return y, nil
}

func TestFusedConvActivationsAgainstHost(t *testing.T) {
	s := kernelCheckSession(t)
	f32 := f32Rand(t)
	// The reference below composes the ONNX activation ops; HardSwish and Swish (no such ops
	// at this opset) are checked against fusedConvHost in fusedconv_epilogue_test.go.
	acts := fusedActivations[:11]
	shapes := []struct {
		name   string
		in     []tensor.Tensor
		attrs  []*graph.Attribute
		symbol string
	}{
		{"direct", []tensor.Tensor{f32(1, 3, 10, 21), f32(5, 3, 3, 3), f32(5)}, []*graph.Attribute{graph.IntsAttr("pads", 1, 1, 1, 1)}, "conv2d_direct"},
		{"1x1", []tensor.Tensor{f32(1, 7, 4, 20), f32(6, 7, 1, 1), f32(6)}, nil, "gemm_nn"},
		{"1x1_one_pixel", []tensor.Tensor{f32(1, 40, 1, 1), f32(9, 40, 1, 1), f32(9)}, nil, "gemm_nt"},
		{"no_bias", []tensor.Tensor{f32(1, 2, 6, 6), f32(3, 2, 3, 3)}, nil, "conv2d_direct"},
	}
	for _, a := range acts {
		for _, sh := range shapes {
			if sh.name == "no_bias" && a.name != "Relu" {
				continue // one activation is enough for the BIAS=false variant
			}
			t.Run(a.name+"_"+sh.name, func(t *testing.T) {
				attrs := append([]*graph.Attribute{graph.StringAttr("activation", a.name)}, sh.attrs...)
				if a.params != nil {
					attrs = append(attrs, &graph.Attribute{Name: "activation_params", Type: graph.AttrFloats, Floats: a.params})
				}
				n := graph.NewNode("n", "FusedConv", nil, []string{"y"}, attrs...)
				n.Domain = graph.LoomDomain
				requirePlanUses(t, n, sh.in, sh.symbol)
				checkKernelOp(t, s, n, 18, sh.in, fusedConvRef, convGemmTol, convGemmTol)
			})
		}
	}
}

// matMulAddRef is MatMulAdd as the host MatMul and Add.
func matMulAddRef(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	p, err := ops.HostOps["MatMul"](rc, n, in[:2])
	if err != nil {
		return nil, err
	}
	return ops.HostOps["Add"](rc, n, []tensor.Tensor{p[0], in[2]})
}

func TestGemmKernelsAgainstHost(t *testing.T) {
	s := kernelCheckSession(t)
	f32 := f32Rand(t)
	node := func(op string, attrs ...*graph.Attribute) *graph.Node {
		return graph.NewNode("n", op, nil, []string{"y"}, attrs...)
	}
	gemm := func(ta, tb int64, alpha, beta float32) *graph.Node {
		return node("Gemm", graph.IntAttr("transA", ta), graph.IntAttr("transB", tb), graph.FloatAttr("alpha", alpha), graph.FloatAttr("beta", beta))
	}
	mma := node("MatMulAdd")
	mma.Domain = graph.LoomDomain
	cases := []struct {
		name   string
		node   *graph.Node
		in     []tensor.Tensor
		host   ops.OpFunc
		symbol string
	}{
		{"matmul_2d", node("MatMul"), []tensor.Tensor{f32(37, 53), f32(53, 45)}, nil, "gemm_nn"},
		{"matmul_folded_batch", node("MatMul"), []tensor.Tensor{f32(2, 3, 17), f32(17, 5)}, nil, "gemm_nn"},
		{"matmul_folded_4d", node("MatMul"), []tensor.Tensor{f32(2, 3, 4, 33), f32(33, 70)}, nil, "gemm_nn"},
		{"matmul_batched", node("MatMul"), []tensor.Tensor{f32(3, 4, 5), f32(3, 5, 6)}, nil, "gemm_nn"},
		{"matmul_broadcast_batch", node("MatMul"), []tensor.Tensor{f32(2, 1, 4, 5), f32(3, 5, 6)}, nil, "gemm_nn"},
		{"matmul_broadcast_a", node("MatMul"), []tensor.Tensor{f32(4, 9), f32(2, 3, 9, 7)}, nil, "gemm_nn"},
		{"matmul_attention", node("MatMul"), []tensor.Tensor{f32(1, 8, 40, 15), f32(1, 8, 15, 40)}, nil, "gemm_nn"},
		{"matmul_vector_a", node("MatMul"), []tensor.Tensor{f32(19), f32(19, 23)}, nil, "gemm_nn"},
		{"matmul_vector_b", node("MatMul"), []tensor.Tensor{f32(2, 6, 19), f32(19)}, nil, "gemm_nt"},
		{"matmul_k1", node("MatMul"), []tensor.Tensor{f32(7, 1), f32(1, 9)}, nil, "gemm_nn"},
		{"matmul_k0", node("MatMul"), []tensor.Tensor{f32(3, 0), f32(0, 4)}, nil, "gemm_nn"},
		{"gemm_k0_bias", gemm(0, 1, 1, 1), []tensor.Tensor{f32(3, 0), f32(4, 0), f32(4)}, nil, "gemm_nn"},
		{"matmul_m1", node("MatMul"), []tensor.Tensor{f32(1, 256), f32(256, 10)}, nil, "gemm_nn"},
		{"matmul_n1", node("MatMul"), []tensor.Tensor{f32(30, 200), f32(200, 1)}, nil, "gemm_nt"},
		{"matmul_large", node("MatMul"), []tensor.Tensor{f32(70, 300), f32(300, 90)}, nil, "gemm_nn"},
		{"matmuladd_vector_bias", mma, []tensor.Tensor{f32(2, 7, 64), f32(64, 128), f32(128)}, matMulAddRef, "gemm_nn"},
		{"matmuladd_matrix_bias", mma, []tensor.Tensor{f32(5, 9), f32(9, 7), f32(5, 7)}, matMulAddRef, "gemm_nn"},
		{"matmuladd_column_bias", mma, []tensor.Tensor{f32(5, 9), f32(9, 7), f32(5, 1)}, matMulAddRef, "gemm_nn"},
		{"gemm_plain", gemm(0, 0, 1, 1), []tensor.Tensor{f32(1, 256), f32(256, 10), f32(1, 10)}, nil, "gemm_nn"},
		{"gemm_no_c", gemm(0, 0, 1.5, 1), []tensor.Tensor{f32(9, 12), f32(12, 20)}, nil, "gemm_nn"},
		{"gemm_trans_a", gemm(1, 0, 0.5, 2), []tensor.Tensor{f32(11, 6), f32(11, 18), f32(18)}, nil, "gemm_nn"},
		{"gemm_trans_b", gemm(0, 1, 1, 1), []tensor.Tensor{f32(5, 40), f32(7, 40), f32(5, 7)}, nil, "gemm_nt"},
		{"gemm_trans_b_gemv", gemm(0, 1, 1, 1), []tensor.Tensor{f32(1, 300), f32(120, 300), f32(120)}, nil, "gemm_nt"},
		{"gemm_trans_both", gemm(1, 1, 0.5, 2), []tensor.Tensor{f32(6, 4), f32(3, 6), f32(3)}, nil, "transpose2d"},
		{"gemm_scalar_c", gemm(0, 0, 1, -0.5), []tensor.Tensor{f32(4, 3), f32(3, 5), f32(1)}, nil, "gemm_nn"},
		{"gemm_column_c", gemm(0, 1, 2, 1), []tensor.Tensor{f32(4, 33), f32(5, 33), f32(4, 1)}, nil, "gemm_nt"},
		{"gemm_beta0", gemm(0, 0, 1, 0), []tensor.Tensor{f32(3, 8), f32(8, 17), f32(3, 17)}, nil, "gemm_nn"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			requirePlanUses(t, c.node, c.in, c.symbol)
			checkKernelOp(t, s, c.node, 18, c.in, c.host, convGemmTol, convGemmTol)
		})
	}
}
