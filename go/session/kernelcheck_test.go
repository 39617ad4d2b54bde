package session

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/kernelops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// kernelCheckSession is a host InferenceSession whose kernel cache and device the kernel
// checks use (its model is a placeholder: the checks call planners and host functions
// directly).
func kernelCheckSession(t testing.TB) *InferenceSession {
	t.Helper()
	g := &graph.Graph{Name: "kernel_check"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(1)))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.Nodes = []*graph.Node{graph.NewNode("id", "Identity", []string{"x"}, []string{"y"})}
	m, err := graph.FromGraph(g.Name, g, map[string]int64{"": 18})
	require.NoError(t, err)
	s, err := FromGraph(m, WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// checkKernelOp is the op library's backend check (as ggml's test-backend-ops): it requires
// that node n's kernel planner accepts the inputs, runs the plan's Loom kernels and the op's
// host function (host, or hostOps[n.OpType] when nil) on the same inputs, and requires equal
// types and shapes and values within atol + rtol·|want| (NaNs must match NaNs). It returns
// the kernel plan's outputs.
func checkKernelOp(t *testing.T, s *InferenceSession, n *graph.Node, opset int64, in []tensor.Tensor, host ops.OpFunc, atol, rtol float64) []tensor.Tensor {
	t.Helper()
	planner, ok := ops.KernelPlanners[ops.PlannerKey(n)]
	require.True(t, ok, "no kernel planner for %s", ops.PlannerKey(n))
	p, reason, err := planner(n, opset, ops.InfosOfStatic(in))
	require.NoError(t, err)
	require.NotNil(t, p, "the planner declined: %s", reason)
	rc := testRunCtx(s, opset)
	defer rc.Close()
	got, err := rc.RunKernelPlan(p, in)
	require.NoError(t, err)
	if host == nil {
		host = ops.HostOps[n.OpType]
	}
	require.NotNil(t, host, "no host function for %s", n.OpType)
	want, err := host(rc, n, in)
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].DType(), got[i].DType(), "output %d type", i)
		require.Equal(t, want[i].Dims(), got[i].Dims(), "output %d shape", i)
		if want[i].DType() == graph.String {
			require.Equal(t, want[i].Data(), got[i].Data())
			continue
		}
		w, g := tensor.Float64s(want[i]), tensor.Float64s(got[i])
		for j := range w {
			if math.IsNaN(w[j]) {
				require.True(t, math.IsNaN(g[j]), "output %d element %d: want NaN, got %v", i, j, g[j])
				continue
			}
			require.InDelta(t, w[j], g[j], atol+rtol*math.Abs(w[j]), "output %d element %d (%s)", i, j, ops.Variant(p))
		}
	}
	return got
}

func TestKernelOpsAgainstHost(t *testing.T) {
	s := kernelCheckSession(t)
	rnd := inferRand()
	f32 := func(shape ...int64) tensor.Tensor {
		return tensor.MustTensor(shape, randomF32(rnd, ops.Numel(shape)))
	}
	cases := []struct {
		name string
		node *graph.Node
		in   []tensor.Tensor
		tol  float64
	}{
		{"add_broadcast", graph.NewNode("n", "Add", nil, []string{"y"}), []tensor.Tensor{f32(2, 3, 4), f32(3, 1)}, 1e-6},
		{"div", graph.NewNode("n", "Div", nil, []string{"y"}), []tensor.Tensor{f32(5, 7), f32(7)}, 1e-4},
		{"mul_flat", graph.NewNode("n", "Mul", nil, []string{"y"}), []tensor.Tensor{f32(3, 1500), f32(3, 1500)}, 1e-6},
		{"sub_scalar_first", graph.NewNode("n", "Sub", nil, []string{"y"}), []tensor.Tensor{f32(), f32(2, 9)}, 1e-6},
		{"div_scalar_second", graph.NewNode("n", "Div", nil, []string{"y"}), []tensor.Tensor{f32(4, 5), f32(1)}, 1e-5},
		// elementwise.loom's binary over five and six axes after merging, and the narrow tiles.
		{"add_rank5_broadcast", graph.NewNode("n", "Add", nil, []string{"y"}), []tensor.Tensor{f32(2, 1, 3, 1, 5), f32(3, 1, 4, 5)}, 1e-6},
		{"sub_rank6_broadcast", graph.NewNode("n", "Sub", nil, []string{"y"}), []tensor.Tensor{f32(2, 1, 3, 1, 4, 1), f32(1, 3, 1, 2, 1, 5)}, 1e-6},
		{"mul_columns", graph.NewNode("n", "Mul", nil, []string{"y"}), []tensor.Tensor{f32(300, 1), f32(1, 3, 300, 2)}, 1e-6},
		{"div_small_tiles", graph.NewNode("n", "Div", nil, []string{"y"}), []tensor.Tensor{f32(3, 20, 17), f32(20, 1)}, 1e-4},
		{"tanh", graph.NewNode("n", "Tanh", nil, []string{"y"}), []tensor.Tensor{f32(3, 50)}, 1e-6},
		{"leaky_relu", graph.NewNode("n", "LeakyRelu", nil, []string{"y"}, graph.FloatAttr("alpha", 0.3)), []tensor.Tensor{f32(40)}, 1e-6},
		{"matmul_packed_a", graph.NewNode("n", "MatMul", nil, []string{"y"}), []tensor.Tensor{f32(70, 96), f32(96, 200)}, 1e-5},
		{"gemm_packed_a_trans", graph.NewNode("n", "Gemm", nil, []string{"y"}, graph.IntAttr("transA", 1), graph.FloatAttr("alpha", 0.5)),
			[]tensor.Tensor{f32(130, 64), f32(130, 300), f32(300)}, 1e-5},
		{"conv1x1_packed_weights", graph.NewNode("n", "Conv", nil, []string{"y"}), []tensor.Tensor{f32(2, 64, 10, 20), f32(96, 64, 1, 1), f32(96)}, 1e-5},
		{"matmul_folded", graph.NewNode("n", "MatMul", nil, []string{"y"}), []tensor.Tensor{f32(2, 3, 17), f32(17, 5)}, 1e-5},
		{"gemm_trans", graph.NewNode("n", "Gemm", nil, []string{"y"}, graph.IntAttr("transA", 1), graph.IntAttr("transB", 1),
			graph.FloatAttr("alpha", 0.5), graph.FloatAttr("beta", 2)), []tensor.Tensor{f32(6, 4), f32(3, 6), f32(3)}, 1e-5},
		{"conv_pad_stride", graph.NewNode("n", "Conv", nil, []string{"y"}, graph.IntsAttr("pads", 1, 2, 0, 1), graph.IntsAttr("strides", 2, 1)),
			[]tensor.Tensor{f32(2, 3, 9, 8), f32(4, 3, 3, 3), f32(4)}, 1e-5},
		{"conv_group_no_bias", graph.NewNode("n", "Conv", nil, []string{"y"}, graph.IntAttr("group", 2)),
			[]tensor.Tensor{f32(1, 4, 6, 6), f32(6, 2, 3, 3)}, 1e-5},
		{"maxpool", graph.NewNode("n", "MaxPool", nil, []string{"y"}, graph.IntsAttr("kernel_shape", 3, 2), graph.IntsAttr("pads", 1, 0, 1, 1)),
			[]tensor.Tensor{f32(2, 3, 7, 6)}, 0},
		{"averagepool", graph.NewNode("n", "AveragePool", nil, []string{"y"}, graph.IntsAttr("kernel_shape", 2, 2), graph.IntsAttr("strides", 2, 2)),
			[]tensor.Tensor{f32(1, 2, 8, 8)}, 1e-6},
		{"maxpool_window_2x2", graph.NewNode("n", "MaxPool", nil, []string{"y"}, graph.IntsAttr("kernel_shape", 2, 2), graph.IntsAttr("strides", 2, 2)),
			[]tensor.Tensor{f32(1, 3, 28, 27)}, 0},
		{"maxpool_window_3x3_s3", graph.NewNode("n", "MaxPool", nil, []string{"y"}, graph.IntsAttr("kernel_shape", 3, 3), graph.IntsAttr("strides", 3, 3)),
			[]tensor.Tensor{f32(2, 2, 14, 14)}, 0},
		{"maxpool_window_overlap", graph.NewNode("n", "MaxPool", nil, []string{"y"}, graph.IntsAttr("kernel_shape", 3, 2), graph.IntsAttr("strides", 1, 2)),
			[]tensor.Tensor{f32(1, 2, 9, 150)}, 0},
		{"maxpool_ceil_overhang", graph.NewNode("n", "MaxPool", nil, []string{"y"}, graph.IntsAttr("kernel_shape", 2, 2), graph.IntsAttr("strides", 2, 2), graph.IntAttr("ceil_mode", 1)),
			[]tensor.Tensor{f32(1, 2, 7, 9)}, 0},
		{"averagepool_window_3x2", graph.NewNode("n", "AveragePool", nil, []string{"y"}, graph.IntsAttr("kernel_shape", 3, 2), graph.IntsAttr("strides", 1, 1)),
			[]tensor.Tensor{f32(2, 3, 6, 70)}, 1e-6},
		{"global_average_pool", graph.NewNode("n", "GlobalAveragePool", []string{"x"}, []string{"y"}), []tensor.Tensor{f32(2, 5, 7, 9)}, 1e-5},
		{"global_max_pool_1d", graph.NewNode("n", "GlobalMaxPool", []string{"x"}, []string{"y"}), []tensor.Tensor{f32(1, 3, 40)}, 0},
		{"global_average_pool_3d", graph.NewNode("n", "GlobalAveragePool", []string{"x"}, []string{"y"}), []tensor.Tensor{f32(1, 2, 3, 4, 5)}, 1e-5},
		{"softmax", graph.NewNode("n", "Softmax", nil, []string{"y"}), []tensor.Tensor{f32(4, 33)}, 1e-6},
		{"softmax_few_long_rows", graph.NewNode("n", "Softmax", nil, []string{"y"}), []tensor.Tensor{f32(40, 1000)}, 1e-6},
		{"log_softmax_long_rows", graph.NewNode("n", "LogSoftmax", nil, []string{"y"}), []tensor.Tensor{f32(3, 2049)}, 1e-5},
		{"log_softmax", graph.NewNode("n", "LogSoftmax", nil, []string{"y"}), []tensor.Tensor{f32(2, 3, 9)}, 1e-5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkKernelOp(t, s, c.node, 18, c.in, nil, c.tol, c.tol)
		})
	}
}

// The pool planner takes pool2d_window (pool2d_rows for rows narrower than 32 outputs) only
// when every window lies inside the image, pool2d_pad for the others; the GPU planner
// pool2d_window or pool2d (a thread an output).
func TestPoolPlannerChoosesWindowKernel(t *testing.T) {
	plan := func(n *graph.Node, shape ...int64) string {
		p, reason, err := ops.KernelPlanners[ops.PlannerKey(n)](n, 18, []ops.ValueInfo{{ValueType: ops.ValueType{Dtype: graph.Float, Shape: shape}, Present: true}})
		require.NoError(t, err)
		require.NotNil(t, p, reason)
		return p.Calls[0].Symbol
	}
	pool := func(attrs ...*graph.Attribute) *graph.Node {
		return graph.NewNode("n", "MaxPool", []string{"x"}, []string{"y"}, append(attrs, graph.IntsAttr("kernel_shape", 2, 2))...)
	}
	require.Equal(t, "pool2d_rows", plan(pool(graph.IntsAttr("strides", 2, 2)), 1, 8, 28, 28))
	require.Equal(t, "pool2d_window", plan(pool(graph.IntsAttr("strides", 2, 2)), 1, 8, 28, 64))
	require.Equal(t, "pool2d_pad", plan(pool(graph.IntsAttr("strides", 2, 2), graph.IntAttr("ceil_mode", 1)), 1, 8, 7, 7))
	require.Equal(t, "pool2d_pad", plan(pool(graph.IntsAttr("pads", 1, 1, 1, 1)), 1, 8, 7, 7))
	require.Equal(t, "pool2d_pad", plan(pool(graph.IntsAttr("dilations", 2, 2)), 1, 8, 7, 7))

	gpu := func(n *graph.Node, shape ...int64) string {
		p, reason, err := ops.GPUKernelPlanners[ops.PlannerKey(n)](n, 18, []ops.ValueInfo{{ValueType: ops.ValueType{Dtype: graph.Float, Shape: shape}, Present: true}})
		require.NoError(t, err)
		require.NotNil(t, p, reason)
		return p.Calls[0].Symbol
	}
	require.Equal(t, "pool2d_window", gpu(pool(graph.IntsAttr("strides", 2, 2)), 1, 8, 28, 28))
	require.Equal(t, "pool2d", gpu(pool(graph.IntsAttr("pads", 1, 1, 1, 1)), 1, 8, 7, 7))
}

// Tall gemm_nn tiles over a long k read A packed by pack_a; the result is checked above
// (matmul_packed_a, gemm_packed_a_trans), and here the plan is.
func TestGemmPacksA(t *testing.T) {
	// The tile choices below were measured on AVX-512's 32 registers (AVX2's 16 keep smaller
	// tiles, so other kernels win there).
	defer kernelops.SetVectorFile(loom.MustParseTarget("host-x86_64-v4"))()
	plan := func(n *graph.Node, a, b []int64) []string {
		in := []ops.ValueInfo{{ValueType: ops.ValueType{Dtype: graph.Float, Shape: a}, Present: true}, {ValueType: ops.ValueType{Dtype: graph.Float, Shape: b}, Present: true}}
		p, reason, err := ops.KernelPlanners[ops.PlannerKey(n)](n, 18, in)
		require.NoError(t, err)
		require.NotNil(t, p, reason)
		var symbols []string
		for _, c := range p.Calls {
			symbols = append(symbols, c.Symbol+":"+c.Config["PACKA"])
		}
		return symbols
	}
	mm := graph.NewNode("n", "MatMul", []string{"a", "b"}, []string{"y"})
	require.Equal(t, []string{"pack_a:", "gemm_nn:true"}, plan(mm, []int64{70, 96}, []int64{96, 200}))
	require.Equal(t, []string{"gemm_nn:false"}, plan(mm, []int64{70, 16}, []int64{16, 200}), "short k")
	require.Equal(t, []string{"gemm_nn:false"}, plan(mm, []int64{3, 70, 96}, []int64{3, 96, 200}), "A differs by batch")

	// A 1x1 convolution's known weights are packed once, by the planner: no pack_a launch.
	w := f32Rand(t)(96, 64, 1, 1)
	conv := graph.NewNode("n", "Conv", []string{"x", "w"}, []string{"y"})
	in := []ops.ValueInfo{{ValueType: ops.ValueType{Dtype: graph.Float, Shape: []int64{1, 64, 10, 20}}, Present: true},
		{ValueType: ops.ValueType{Dtype: graph.Float, Shape: w.Dims()}, Present: true, Static: w}}
	p, reason, err := ops.KernelPlanners[ops.PlannerKey(conv)](conv, 18, in)
	require.NoError(t, err)
	require.NotNil(t, p, reason)
	require.Len(t, p.Calls, 1)
	require.Equal(t, "gemm_nn", p.Calls[0].Symbol)
	require.Equal(t, "true", p.Calls[0].Config["PACKA"])
	require.Len(t, p.Consts, 1)
	require.Equal(t, ops.ConstOperand(0), p.Calls[0].Bind[0].Operand)
}
