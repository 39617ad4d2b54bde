package session

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/kernelops"
	"github.com/loomrt/loom/go/session/internal/ops/nn"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// checkPlannerAgainstHost is checkKernelOp for a planner that is not (or not yet) the one
// registered for the node's op: it runs planner's kernels and host on the same inputs and
// compares within atol + rtol·|want|.
func checkPlannerAgainstHost(t *testing.T, s *InferenceSession, planner ops.KernelPlanner, n *graph.Node, opset int64, in []tensor.Tensor, host ops.OpFunc, atol, rtol float64) {
	t.Helper()
	p, reason, err := planner(n, opset, ops.InfosOfStatic(in))
	require.NoError(t, err)
	require.NotNil(t, p, "the planner declined: %s", reason)
	rc := testRunCtx(s, opset)
	defer rc.Close()
	got, err := rc.RunKernelPlan(p, in)
	require.NoError(t, err)
	want, err := host(rc, n, in)
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].DType(), got[i].DType(), "output %d type", i)
		require.Equal(t, want[i].Dims(), got[i].Dims(), "output %d shape", i)
		w, g := tensor.Float64s(want[i]), tensor.Float64s(got[i])
		for j := range w {
			if math.IsNaN(w[j]) {
				require.True(t, math.IsNaN(g[j]), "output %d element %d: want NaN, got %v", i, j, g[j])
				continue
			}
			require.InDelta(t, w[j], g[j], atol+rtol*math.Abs(w[j]), "output %d element %d (%s)", i, j, ops.Variant(p))
		}
	}
}

func randomBools(rnd *rand.Rand, n int) []bool {
	v := make([]bool, n)
	for i := range v {
		v[i] = rnd.IntN(3) != 0
	}
	return v
}

// TestAttentionKernelsAgainstHost checks Loom's fused Attention kernels against loomAttention
// (the composition of the ai.onnx ops). Both compute in float32; the products are summed in
// a different order (1e-5).
func TestAttentionKernelsAgainstHost(t *testing.T) {
	s := kernelCheckSession(t)
	rnd := inferRand()
	f32 := func(shape ...int64) tensor.Tensor {
		return tensor.MustTensor(shape, randomF32(rnd, ops.Numel(shape)))
	}
	bools := func(shape ...int64) tensor.Tensor {
		return tensor.MustTensor(shape, randomBools(rnd, ops.Numel(shape)))
	}
	causal := func(l int64) tensor.Tensor {
		v := make([]bool, l*l)
		for i := range l {
			for j := range l {
				v[i*l+j] = j > i
			}
		}
		return tensor.MustTensor([]int64{l, l}, v)
	}
	attn := func(kt bool, scale float32, mode int64, fill float32) *graph.Node {
		attrs := []*graph.Attribute{graph.FloatAttr("scale", scale)}
		if kt {
			attrs = append(attrs, graph.IntAttr("k_transposed", 1))
		}
		if mode != 0 {
			attrs = append(attrs, graph.IntAttr("mask_mode", mode), graph.FloatAttr("mask_fill", fill))
		}
		n := graph.NewNode("n", "Attention", nil, []string{"y"}, attrs...)
		n.Domain = graph.LoomDomain
		return n
	}
	cases := []struct {
		name string
		node *graph.Node
		in   []tensor.Tensor
	}{
		{"plain_k", attn(false, 1, 0, 0), []tensor.Tensor{f32(2, 3, 5, 8), f32(2, 3, 7, 8), f32(2, 3, 7, 6)}},
		{"k_transposed_scaled", attn(true, 0.125, 0, 0), []tensor.Tensor{f32(2, 3, 5, 40), f32(2, 3, 40, 37), f32(2, 3, 37, 33)}},
		{"broadcast_batch", attn(true, 0.3, 0, 0), []tensor.Tensor{f32(4, 5, 8), f32(1, 8, 7), f32(7, 6)}},
		{"broadcast_kv_heads", attn(false, 0.5, 0, 0), []tensor.Tensor{f32(2, 4, 3, 16), f32(2, 1, 9, 16), f32(1, 4, 9, 16)}},
		{"additive_mask", attn(true, 0.25, 1, 0), []tensor.Tensor{f32(2, 2, 6, 8), f32(2, 2, 8, 10), f32(2, 2, 10, 4), f32(1, 1, 6, 10)}},
		{"keep_mask", attn(true, 1, 2, -1e4), []tensor.Tensor{f32(3, 6, 8), f32(3, 8, 11), f32(3, 11, 5), bools(3, 1, 11)}},
		{"causal_fill_mask", attn(false, 0.17, 3, float32(math.Inf(-1))), []tensor.Tensor{f32(1, 4, 16, 32), f32(1, 4, 16, 32), f32(1, 4, 16, 32), causal(16)}},
		{"decode_one_query", attn(true, 0.125, 1, 0), []tensor.Tensor{f32(1, 8, 1, 64), f32(1, 8, 64, 23), f32(1, 8, 23, 64), f32(1, 1, 1, 23)}},
		{"matrices", attn(false, 1, 0, 0), []tensor.Tensor{f32(9, 5), f32(12, 5), f32(12, 3)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkKernelOp(t, s, c.node, 18, c.in, nn.LoomAttention, 1e-5, 1e-5)
		})
	}
}

// TestBatchedMatMulKernelsAgainstHost checks planBatchedMatMul against the MatMul host
// function (float64 sums): 1e-5 covers inner dimensions up to ~100 of values in [-1, 1].
func TestBatchedMatMulKernelsAgainstHost(t *testing.T) {
	s := kernelCheckSession(t)
	rnd := inferRand()
	f32 := func(shape ...int64) tensor.Tensor {
		return tensor.MustTensor(shape, randomF32(rnd, ops.Numel(shape)))
	}
	cases := []struct {
		name string
		in   []tensor.Tensor
	}{
		{"batched_3d", []tensor.Tensor{f32(4, 7, 9), f32(4, 9, 33)}},
		{"broadcast_b", []tensor.Tensor{f32(2, 3, 5, 6), f32(3, 6, 40)}},
		{"broadcast_both", []tensor.Tensor{f32(2, 1, 4, 13, 8), f32(1, 3, 4, 8, 17)}},
		{"broadcast_a_matrix", []tensor.Tensor{f32(13, 8), f32(5, 8, 19)}},
		{"b_matrix", []tensor.Tensor{f32(3, 25, 64), f32(64, 70)}},
		{"row_vector", []tensor.Tensor{f32(9), f32(2, 9, 31)}},
		{"column_vector", []tensor.Tensor{f32(2, 3, 7, 9), f32(9)}},
		{"vectors", []tensor.Tensor{f32(100), f32(100)}},
		{"one_row", []tensor.Tensor{f32(3, 1, 96), f32(3, 96, 130)}},
		{"tall", []tensor.Tensor{f32(2, 257, 31), f32(2, 31, 47)}},
		{"empty_k", []tensor.Tensor{f32(2, 3, 0), f32(2, 0, 4)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkPlannerAgainstHost(t, s, kernelops.PlanBatchedMatMul, graph.NewNode("n", "MatMul", nil, []string{"y"}), 18, c.in, ops.HostOps["MatMul"], 1e-5, 1e-5)
		})
	}
	_, _, err := kernelops.PlanBatchedMatMul(graph.NewNode("n", "MatMul", nil, []string{"y"}), 18, ops.InfosOf([]tensor.Tensor{f32(2, 3, 4), f32(2, 5, 6)}))
	require.ErrorContains(t, err, "inner dimensions differ")
	p, reason, err := kernelops.PlanBatchedMatMul(graph.NewNode("n", "MatMul", nil, []string{"y"}), 18,
		ops.InfosOf([]tensor.Tensor{f32(2, 1, 2, 1, 3, 4), f32(1, 2, 1, 2, 4, 5)}))
	require.NoError(t, err)
	require.Nil(t, p)
	require.Contains(t, reason, "fold")
}
