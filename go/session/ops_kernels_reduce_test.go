package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

func TestKernelReduceOps(t *testing.T) {
	r := movementRand{inferRand()}
	positive := func(shape ...int64) tensor.Tensor {
		x := r.f32(shape...)
		for i, v := range x.Data().([]float32) {
			x.Data().([]float32)[i] = v*v + 0.1
		}
		return x
	}
	// ties draws from a few values so that ArgMax/ArgMin see repeated extremes.
	ties := func(shape ...int64) tensor.Tensor {
		x := r.f32(shape...)
		for i := range x.Data().([]float32) {
			x.Data().([]float32)[i] = float32(r.rnd.IntN(3))
		}
		return x
	}
	keep0 := graph.IntAttr("keepdims", 0)
	cases := []kernelCase{
		{name: "sum_all_scalar", node: kernelNode("ReduceSum"), in: []tensor.Tensor{r.f32()}, atol: 1e-6},
		{name: "sum_middle_axis", node: kernelNode("ReduceSum"), in: []tensor.Tensor{r.f32(3, 40, 37), int64Vec(1)}, atol: 2e-5, rtol: 1e-5},
		{name: "sum_all", node: kernelNode("ReduceSum"), in: []tensor.Tensor{r.f32(17, 33)}, atol: 1e-4, rtol: 1e-5},
		{name: "sum_opset11_attr", node: kernelNode("ReduceSum", graph.IntsAttr("axes", 0), keep0), opset: 11, in: []tensor.Tensor{r.f32(9, 20)}, atol: 2e-5},
		{name: "sum_noop_empty_axes", node: kernelNode("ReduceSum", graph.IntAttr("noop_with_empty_axes", 1)), in: []tensor.Tensor{r.f32(4, 5)}},
		{name: "sum_size1_axes", node: kernelNode("ReduceSum"), in: []tensor.Tensor{r.f32(5, 1, 6), int64Vec(1)}, atol: 1e-6},
		{name: "mean_last_axis", node: kernelNode("ReduceMean"), in: []tensor.Tensor{r.f32(7, 100), int64Vec(-1)}, atol: 1e-6, rtol: 1e-5},
		{name: "mean_keepdims0", node: kernelNode("ReduceMean", keep0), in: []tensor.Tensor{r.f32(2, 3, 19), int64Vec(0, 2)}, atol: 1e-6, rtol: 1e-5},
		{name: "max_two_runs", node: kernelNode("ReduceMax"), in: []tensor.Tensor{r.f32(3, 4, 5), int64Vec(0, 2)}},
		{name: "min_two_runs_inner_kept", node: kernelNode("ReduceMin"), in: []tensor.Tensor{r.f32(3, 4, 5, 18), int64Vec(0, 2)}},
		{name: "min_rank4", node: kernelNode("ReduceMin", keep0), in: []tensor.Tensor{r.f32(2, 3, 4, 5), int64Vec(1, 3)}},
		{name: "prod_axis0", node: kernelNode("ReduceProd"), in: []tensor.Tensor{r.f32(6, 40), int64Vec(0)}, atol: 1e-30, rtol: 1e-5},
		{name: "prod_last", node: kernelNode("ReduceProd"), in: []tensor.Tensor{r.f32(3, 21), int64Vec(1)}, atol: 1e-30, rtol: 1e-5},
		{name: "l1_last", node: kernelNode("ReduceL1", keep0), in: []tensor.Tensor{r.f32(5, 35), int64Vec(-1)}, atol: 1e-5, rtol: 1e-5},
		{name: "l2_opset13_attr", node: kernelNode("ReduceL2", graph.IntsAttr("axes", 1)), opset: 13, in: []tensor.Tensor{r.f32(4, 9, 3)}, atol: 1e-6, rtol: 1e-5},
		{name: "sum_square_all", node: kernelNode("ReduceSumSquare"), in: []tensor.Tensor{r.f32(6, 7, 8)}, atol: 1e-4, rtol: 1e-5},
		{name: "log_sum", node: kernelNode("ReduceLogSum"), in: []tensor.Tensor{positive(4, 50), int64Vec(1)}, atol: 1e-5, rtol: 1e-5},
		{name: "log_sum_exp_middle", node: kernelNode("ReduceLogSumExp"), in: []tensor.Tensor{r.f32(4, 33, 17), int64Vec(1)}, atol: 1e-5, rtol: 1e-5},
		{name: "log_sum_exp_last", node: kernelNode("ReduceLogSumExp"), in: []tensor.Tensor{r.f32(5, 70), int64Vec(-1)}, atol: 1e-5, rtol: 1e-5},
		{name: "sum_empty_axis", node: kernelNode("ReduceSum"), in: []tensor.Tensor{r.f32(3, 0, 2), int64Vec(1)}},
		{name: "max_empty_axis", node: kernelNode("ReduceMax"), in: []tensor.Tensor{r.f32(3, 0, 2), int64Vec(1)}},
		{name: "mean_empty_axis", node: kernelNode("ReduceMean"), in: []tensor.Tensor{r.f32(3, 0), int64Vec(1)}},
		{name: "log_sum_exp_empty", node: kernelNode("ReduceLogSumExp"), in: []tensor.Tensor{r.f32(2, 0), int64Vec(1)}},
		{name: "sum_empty_output", node: kernelNode("ReduceSum"), in: []tensor.Tensor{r.f32(0, 3), int64Vec(1)}},

		{name: "argmax_axis1", node: kernelNode("ArgMax", graph.IntAttr("axis", 1)), in: []tensor.Tensor{r.f32(3, 7, 4)}},
		{name: "argmax_last_ties", node: kernelNode("ArgMax", graph.IntAttr("axis", -1), graph.IntAttr("select_last_index", 1)), in: []tensor.Tensor{ties(6, 9)}},
		{name: "argmin_first_ties", node: kernelNode("ArgMin", graph.IntAttr("axis", 0), keep0), in: []tensor.Tensor{ties(8, 5)}},
		{name: "argmin_last_ties", node: kernelNode("ArgMin", graph.IntAttr("axis", 1), graph.IntAttr("select_last_index", 1)), in: []tensor.Tensor{ties(2, 6, 3)}},
		{name: "argmax_vector", node: kernelNode("ArgMax", keep0), in: []tensor.Tensor{r.f32(31)}},
		{name: "argmax_empty_axis", node: kernelNode("ArgMax", graph.IntAttr("axis", 1)), in: []tensor.Tensor{r.f32(3, 0)}},
	}
	runKernelCases(t, cases)
}

func TestKernelReduceDeclines(t *testing.T) {
	r := movementRand{inferRand()}
	for _, c := range []struct {
		name string
		node *graph.Node
		in   []ops.ValueInfo
	}{
		{"three_runs", kernelNode("ReduceSum"), ops.InfosOfStatic([]tensor.Tensor{r.f32(2, 3, 4, 5, 6), int64Vec(0, 2, 4)})},
		{"dynamic_axes", kernelNode("ReduceMean"), ops.InfosOf([]tensor.Tensor{r.f32(2, 3), int64Vec(1)})},
		{"int64_data", kernelNode("ReduceMax"), ops.InfosOfStatic([]tensor.Tensor{r.of(graph.Int64, 2, 3), int64Vec(1)})},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, reason, err := ops.KernelPlanners[c.node.OpType](c.node, 18, c.in)
			require.NoError(t, err)
			require.Nil(t, p)
			require.Contains(t, reason, "host:")
		})
	}
	_, _, err := ops.KernelPlanners["ReduceSum"](kernelNode("ReduceSum"), 18, ops.InfosOfStatic([]tensor.Tensor{r.f32(2, 3), int64Vec(2)}))
	require.ErrorContains(t, err, "out of range")
}
