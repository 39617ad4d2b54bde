package session

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/kernelops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// scaled draws float32 elements uniformly from [-s, s].
func (m movementRand) scaled(s float32, shape ...int64) tensor.Tensor {
	x := m.f32(shape...)
	for i, v := range x.Data().([]float32) {
		x.Data().([]float32)[i] = v * s
	}
	return x
}

// few draws float32 elements from {-1, 0, 1, 2}, so that comparisons see equal operands.
func (m movementRand) few(shape ...int64) tensor.Tensor {
	x := m.f32(shape...)
	for i := range x.Data().([]float32) {
		x.Data().([]float32)[i] = float32(m.rnd.IntN(4) - 1)
	}
	return x
}

func multiOutputNode(op string, outputs []string, attrs ...*graph.Attribute) *graph.Node {
	return graph.NewNode("n", op, nil, outputs, attrs...)
}

func loomDomain(n *graph.Node) *graph.Node {
	n.Domain = graph.LoomDomain
	return n
}

func TestKernelNormOps(t *testing.T) {
	r := movementRand{inferRand()}
	stats := []string{"y", "mean", "inv"}
	axis := func(a int64) *graph.Attribute { return graph.IntAttr("axis", a) }
	cases := []kernelCase{
		{name: "layernorm_last_axis", node: multiOutputNode("LayerNormalization", stats), in: []tensor.Tensor{r.f32(4, 37), r.f32(37), r.f32(37)}, atol: 1e-5, rtol: 1e-5},
		{name: "layernorm_two_axes", node: multiOutputNode("LayerNormalization", stats, axis(1)), in: []tensor.Tensor{r.f32(2, 3, 20), r.f32(3, 20)}, atol: 1e-5, rtol: 1e-5},
		{name: "layernorm_negative_axis", node: multiOutputNode("LayerNormalization", stats, axis(-2), graph.FloatAttr("epsilon", 1e-3)),
			in: []tensor.Tensor{r.f32(3, 5, 16), r.f32(5, 16), r.f32(1)}, atol: 1e-5, rtol: 1e-5},
		{name: "layernorm_scalar_scale", node: multiOutputNode("LayerNormalization", stats), in: []tensor.Tensor{r.f32(6, 9), r.f32(), r.f32(9)}, atol: 1e-5, rtol: 1e-5},
		{name: "layernorm_loom_domain", node: loomDomain(multiOutputNode("LayerNormalization", stats)), opset: 13,
			in: []tensor.Tensor{r.f32(5, 64), r.f32(64), r.f32(64)}, atol: 1e-5, rtol: 1e-5},
		{name: "layernorm_rank1", node: multiOutputNode("LayerNormalization", stats), in: []tensor.Tensor{r.f32(50), r.f32(50), r.f32(50)}, atol: 1e-5, rtol: 1e-5},
		{name: "instancenorm", node: kernelNode("InstanceNormalization"), in: []tensor.Tensor{r.f32(2, 3, 5, 7), r.f32(3), r.f32(3)}, atol: 1e-5, rtol: 1e-5},
		{name: "instancenorm_rank3", node: kernelNode("InstanceNormalization", graph.FloatAttr("epsilon", 0.01)), in: []tensor.Tensor{r.f32(1, 4, 50), r.f32(4), r.f32(4)}, atol: 1e-5, rtol: 1e-5},
		{name: "batchnorm", node: kernelNode("BatchNormalization"), in: []tensor.Tensor{r.f32(2, 3, 4, 5), r.f32(3), r.f32(3), r.f32(3), positiveOf(r, 3)}, atol: 1e-5, rtol: 1e-5},
		{name: "batchnorm_rank2", node: kernelNode("BatchNormalization", graph.FloatAttr("epsilon", 0.1)), in: []tensor.Tensor{r.f32(5, 3), r.f32(3), r.f32(3), r.f32(3), positiveOf(r, 3)}, atol: 1e-5, rtol: 1e-5},
		{name: "batchnorm_wide", node: kernelNode("BatchNormalization"), in: []tensor.Tensor{r.f32(1, 2, 300), r.f32(2), r.f32(2), r.f32(2), positiveOf(r, 2)}, atol: 1e-5, rtol: 1e-5},

		{name: "erf_wide", node: kernelNode("Erf"), in: []tensor.Tensor{r.scaled(5, 2000)}, atol: 2e-7, rtol: 5e-7},
		{name: "erf_small", node: kernelNode("Erf"), in: []tensor.Tensor{r.scaled(1e-3, 300)}, atol: 0, rtol: 5e-7},
		{name: "gelu", node: kernelNode("Gelu"), in: []tensor.Tensor{r.scaled(8, 3, 400)}, atol: 5e-7, rtol: 1e-6},
		{name: "gelu_tanh", node: kernelNode("Gelu", graph.StringAttr("approximate", "tanh")), in: []tensor.Tensor{r.scaled(6, 500)}, atol: 1e-6, rtol: 1e-6},
		{name: "gelu_loom_domain", node: loomDomain(kernelNode("Gelu")), opset: 13, in: []tensor.Tensor{r.scaled(4, 7, 9)}, atol: 5e-7, rtol: 1e-6},
		{name: "hardsigmoid", node: kernelNode("HardSigmoid", graph.FloatAttr("alpha", 0.3), graph.FloatAttr("beta", 0.4)), in: []tensor.Tensor{r.scaled(4, 100)}, atol: 1e-6},
		{name: "hardswish", node: kernelNode("HardSwish"), in: []tensor.Tensor{r.scaled(5, 100)}, atol: 1e-6, rtol: 1e-6},
		{name: "softplus", node: kernelNode("Softplus"), in: []tensor.Tensor{r.scaled(30, 500)}, atol: 0, rtol: 1e-6},
		{name: "softsign", node: kernelNode("Softsign"), in: []tensor.Tensor{r.scaled(10, 64)}, atol: 1e-7, rtol: 1e-6},
		{name: "elu", node: kernelNode("Elu", graph.FloatAttr("alpha", 0.5)), in: []tensor.Tensor{r.scaled(3, 300)}, atol: 0, rtol: 1e-6},
		{name: "elu_small", node: kernelNode("Elu"), in: []tensor.Tensor{r.scaled(1e-4, 64)}, atol: 0, rtol: 1e-6},
		{name: "celu", node: kernelNode("Celu", graph.FloatAttr("alpha", 2)), in: []tensor.Tensor{r.scaled(6, 300)}, atol: 0, rtol: 1e-6},
		{name: "selu", node: kernelNode("Selu"), in: []tensor.Tensor{r.scaled(3, 2, 50)}, atol: 0, rtol: 1e-6},
		{name: "mish", node: kernelNode("Mish"), in: []tensor.Tensor{r.scaled(20, 400)}, atol: 1e-7, rtol: 2e-6},
		{name: "thresholded_relu", node: kernelNode("ThresholdedRelu", graph.FloatAttr("alpha", 0.3)), in: []tensor.Tensor{r.f32(99)}},
		{name: "activation_scalar", node: kernelNode("Softplus"), in: []tensor.Tensor{r.f32()}, rtol: 1e-6},
		{name: "activation_empty", node: kernelNode("Erf"), in: []tensor.Tensor{r.f32(0, 3)}},

		{name: "clip_both", node: kernelNode("Clip"), in: []tensor.Tensor{r.f32(7, 9), tensor.MustTensor([]int64{}, []float32{-0.3}), tensor.MustTensor([]int64{}, []float32{0.5})}},
		{name: "clip_max_only", node: kernelNode("Clip"), in: []tensor.Tensor{r.f32(40), tensor.Tensor{}, tensor.MustTensor([]int64{}, []float32{0.1})}},
		{name: "clip_none", node: kernelNode("Clip"), in: []tensor.Tensor{r.f32(3, 3)}},
		{name: "clip_opset6_attrs", node: kernelNode("Clip", graph.FloatAttr("min", -0.2), graph.FloatAttr("max", 0.7)), opset: 6, in: []tensor.Tensor{r.f32(33)}},

		{name: "pow_square", node: kernelNode("Pow"), in: []tensor.Tensor{r.scaled(3, 4, 5), tensor.MustTensor([]int64{}, []float32{2})}, rtol: 1e-7},
		{name: "pow_scalar_fraction", node: kernelNode("Pow"), in: []tensor.Tensor{r.scaled(3, 50), tensor.MustTensor([]int64{1}, []float32{1.7})}, rtol: 1e-6},
		{name: "pow_broadcast", node: kernelNode("Pow"), in: []tensor.Tensor{r.scaled(2, 3, 4), r.scaled(3, 4)}, rtol: 1e-6},
		{name: "pow_integer_exponents", node: kernelNode("Pow"), in: []tensor.Tensor{r.scaled(2, 6, 8), integral(r, 8)}, rtol: 1e-6},
		{name: "pow_exponent_bigger", node: kernelNode("Pow"), in: []tensor.Tensor{r.scaled(2, 5), r.scaled(3, 2, 1)}, rtol: 1e-6},

		{name: "equal_broadcast", node: kernelNode("Equal"), in: []tensor.Tensor{r.few(3, 4), r.few(4)}},
		{name: "less", node: kernelNode("Less"), in: []tensor.Tensor{r.few(2, 3, 4), r.few(3, 1)}},
		{name: "less_or_equal", node: kernelNode("LessOrEqual"), in: []tensor.Tensor{r.few(20), r.few()}},
		{name: "greater_int32", node: kernelNode("Greater"), in: []tensor.Tensor{r.of(graph.Int32, 5, 6), r.of(graph.Int32, 5, 1)}},
		{name: "greater_or_equal", node: kernelNode("GreaterOrEqual"), in: []tensor.Tensor{r.few(4, 70), r.few(4, 70)}},
		{name: "equal_int64", node: kernelNode("Equal"), in: []tensor.Tensor{int64Vec(1, 2, 3, -4), int64Vec(1, 0, 3, -4)}},

		{name: "sum_three", node: kernelNode("Sum"), in: []tensor.Tensor{r.f32(2, 3, 4), r.f32(3, 1), r.f32(4)}, atol: 1e-6},
		{name: "mean_two", node: kernelNode("Mean"), in: []tensor.Tensor{r.f32(5, 6), r.f32(5, 6)}, atol: 1e-6},
		{name: "mean_four", node: kernelNode("Mean"), in: []tensor.Tensor{r.f32(3), r.f32(2, 3), r.f32(1, 3), r.f32()}, atol: 1e-6},
		{name: "max_four", node: kernelNode("Max"), in: []tensor.Tensor{r.f32(7), r.f32(3, 7), r.f32(1, 7), r.f32(3, 1)}},
		{name: "min_one", node: kernelNode("Min"), in: []tensor.Tensor{r.f32(2, 5)}},
		{name: "max_nan", node: kernelNode("Max"), in: []tensor.Tensor{withNaN(r.f32(6), 1), withNaN(r.f32(6), 4)}},
		// ACC and SCALE launches over six axes after merging.
		{name: "sum_rank6", node: kernelNode("Sum"), in: []tensor.Tensor{r.f32(2, 1, 3, 1, 4, 1), r.f32(1, 3, 1, 2, 1, 5), r.f32(2, 3, 1, 2, 1, 1)}, atol: 1e-6},
		{name: "mean_rank5_three", node: kernelNode("Mean"), in: []tensor.Tensor{r.f32(2, 3, 1, 4, 1), r.f32(3, 2, 4, 5), r.f32(5)}, atol: 1e-6},
		{name: "min_rank6_nan", node: kernelNode("Min"), in: []tensor.Tensor{withNaN(r.f32(2, 1, 2, 1, 2, 3), 2), r.f32(1, 2, 1, 2, 1, 3), withNaN(r.f32(3), 1)}},
		{name: "pow_rank6", node: kernelNode("Pow"), in: []tensor.Tensor{r.scaled(2, 1, 3, 1, 2, 4), r.scaled(2, 1, 3, 1, 1)}, rtol: 1e-6},
	}
	runKernelCases(t, cases)
}

func positiveOf(r movementRand, shape ...int64) tensor.Tensor {
	x := r.f32(shape...)
	for i, v := range x.Data().([]float32) {
		x.Data().([]float32)[i] = v*v + 0.05
	}
	return x
}

func integral(r movementRand, shape ...int64) tensor.Tensor {
	x := r.f32(shape...)
	for i := range x.Data().([]float32) {
		x.Data().([]float32)[i] = float32(r.rnd.IntN(9) - 4)
	}
	return x
}

func withNaN(x tensor.Tensor, at int) tensor.Tensor {
	x.Data().([]float32)[at] = float32(math.NaN())
	return x
}

// TestKernelLayerNormOutputs checks the plans for LayerNormalization nodes that name fewer
// outputs: unnamed statistics go to scratch memory.
func TestKernelLayerNormOutputs(t *testing.T) {
	s := kernelCheckSession(t)
	r := movementRand{inferRand()}
	in := []tensor.Tensor{r.f32(3, 10), r.f32(10), r.f32(10)}
	firstOutputs := func(k int) ops.OpFunc {
		return func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
			out, err := ops.HostOps["LayerNormalization"](rc, n, in)
			if err != nil {
				return nil, err
			}
			return out[:k], nil
		}
	}
	got := checkKernelOp(t, s, multiOutputNode("LayerNormalization", []string{"y"}), 18, in, firstOutputs(1), 1e-5, 1e-5)
	require.Len(t, got, 1)
	got = checkKernelOp(t, s, multiOutputNode("LayerNormalization", []string{"y", "mean"}), 18, in, firstOutputs(2), 1e-5, 1e-5)
	require.Len(t, got, 2)
	p, reason, err := kernelops.PlanLayerNorm(multiOutputNode("LayerNormalization", []string{"y", "", "inv"}), 18, ops.InfosOf(in))
	require.NoError(t, err)
	require.Nil(t, p)
	require.Contains(t, reason, "host:")
}

func TestKernelNormDeclines(t *testing.T) {
	r := movementRand{inferRand()}
	for _, c := range []struct {
		name string
		node *graph.Node
		in   []ops.ValueInfo
	}{
		{"layernorm_partial_scale", kernelNode("LayerNormalization", graph.IntAttr("axis", 1)), ops.InfosOf([]tensor.Tensor{r.f32(2, 3, 4), r.f32(4)})},
		{"batchnorm_training", kernelNode("BatchNormalization", graph.IntAttr("training_mode", 1)),
			ops.InfosOf([]tensor.Tensor{r.f32(2, 3), r.f32(3), r.f32(3), r.f32(3), r.f32(3)})},
		{"pow_int_exponent", kernelNode("Pow"), ops.InfosOf([]tensor.Tensor{r.f32(3), int64Vec(2)})},
		{"compare_mixed", kernelNode("Less"), ops.InfosOf([]tensor.Tensor{r.f32(3), r.of(graph.Double, 3)})},
		{"clip_int", kernelNode("Clip"), ops.InfosOf([]tensor.Tensor{r.of(graph.Int64, 3)})},
		{"gelu_double", kernelNode("Gelu"), ops.InfosOf([]tensor.Tensor{r.of(graph.Double, 3)})},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, reason, err := ops.KernelPlanners[ops.PlannerKey(c.node)](c.node, 18, c.in)
			require.NoError(t, err)
			require.Nil(t, p)
			require.Contains(t, reason, "host:")
		})
	}
	_, _, err := kernelops.PlanBatchNorm(kernelNode("BatchNormalization"), 18, ops.InfosOf([]tensor.Tensor{r.f32(2, 3), r.f32(4), r.f32(3), r.f32(3), r.f32(3)}))
	require.ErrorContains(t, err, "one per channel")
	_, _, err = kernelops.PlanGelu(kernelNode("Gelu", graph.StringAttr("approximate", "fast")), 20, ops.InfosOf([]tensor.Tensor{r.f32(3)}))
	require.ErrorContains(t, err, "approximate")
}

// TestKernelLoomDomainRegistration checks that the interpreter runs Loom's LayerNormalization
// and Gelu through their kernel planners (another init must not replace them).
func TestKernelLoomDomainRegistration(t *testing.T) {
	s := kernelCheckSession(t)
	r := movementRand{inferRand()}
	for _, c := range []struct {
		node *graph.Node
		in   []tensor.Tensor
	}{
		{loomDomain(kernelNode("Gelu")), []tensor.Tensor{r.f32(4)}},
		{loomDomain(multiOutputNode("LayerNormalization", []string{"y"})), []tensor.Tensor{r.f32(2, 4), r.f32(4)}},
	} {
		f, ok := exec.LookupOp(c.node)
		require.True(t, ok)
		rc := testRunCtx(s, 13)
		_, err := f(rc, c.node, c.in)
		require.NoError(t, err)
		require.Contains(t, rc.KernelVariant, "kernels/norm.loom", c.node.OpType)
		rc.Close()
	}
}
