package session

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/kernelops"
	"github.com/loomrt/loom/go/session/internal/ops/nn"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// oneNodeSession is a host InferenceSession of a model holding only n, whose inputs in[i]
// are initializers for i in static and graph inputs otherwise (absent inputs stay absent);
// it returns the feeds for the graph inputs. Runs go through the compiled run plan, where a
// planner sees only the initializers' values.
func oneNodeSession(t testing.TB, n *graph.Node, opset int64, in []tensor.Tensor, static ...int) (*InferenceSession, []tensor.NamedTensor) {
	t.Helper()
	g := &graph.Graph{Name: "one_node"}
	var feeds []tensor.NamedTensor
	node := *n
	node.Inputs = make([]string, len(in))
	for i, v := range in {
		if !v.IsValid() {
			continue
		}
		name := fmt.Sprintf("in%d", i)
		node.Inputs[i] = name
		if slices.Contains(static, i) {
			raw, _ := ops.RawBytes(v)
			gt, err := graph.NewTensor(name, v.DType(), v.Dims(), append([]byte{}, raw...))
			require.NoError(t, err)
			g.AddInitializer(gt)
			continue
		}
		g.Inputs = append(g.Inputs, graph.Input(name, graph.TensorType(v.DType(), graph.ShapeOf(v.Dims()...))))
		feeds = append(feeds, tensor.NamedTensor{Name: name, Tensor: v})
	}
	for _, o := range node.Outputs {
		if o != "" {
			g.Outputs = append(g.Outputs, graph.Output(o, graph.Type{}))
		}
	}
	g.Nodes = []*graph.Node{&node}
	m, err := graph.FromGraph(g.Name, g, map[string]int64{"": opset, graph.LoomDomain: 1})
	require.NoError(t, err)
	s, err := FromGraph(m, WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, feeds
}

// TestHeavyKernelOpsInRunPlan runs the kernels through the compiled run plan (arena, static
// inputs as initializers, outputs the node does not produce) and compares each produced
// output with the host function's.
func TestHeavyKernelOpsInRunPlan(t *testing.T) {
	rnd := inferRand()
	f32 := func(shape ...int64) tensor.Tensor {
		return tensor.MustTensor(shape, randomF32(rnd, ops.Numel(shape)))
	}
	lstm, lstmIn := rnnCase{op: "LSTM", seq: 5, batch: 3, in: 7, hidden: 21, dir: "bidirectional", bias: true, h0: true, c0: true, lens: true}.build(rnd)
	lstm.Outputs = []string{"", "yh"} // Y and Y_c not produced
	gru, gruIn := rnnCase{op: "GRU", seq: 4, batch: 2, in: 5, hidden: 9, dir: "reverse", layout: 1, bias: true}.build(rnd)
	gru.Outputs = []string{"y"}
	attn := graph.NewNode("n", "Attention", nil, []string{"y"}, graph.FloatAttr("scale", 0.3), graph.IntAttr("mask_mode", 1))
	attn.Domain = graph.LoomDomain
	cases := []struct {
		name   string
		node   *graph.Node
		opset  int64
		in     []tensor.Tensor
		static []int
		host   ops.OpFunc
		tol    float64
	}{
		{"lstm_unproduced_outputs", lstm, 14, lstmIn, []int{1, 2, 3, 4}, ops.HostOps["LSTM"], 2e-5},
		{"gru_y_only", gru, 14, gruIn, nil, ops.HostOps["GRU"], 2e-5},
		{"resize_static_scales", graph.NewNode("n", "Resize", nil, []string{"y"}, graph.StringAttr("mode", "linear")), 19,
			[]tensor.Tensor{f32(2, 3, 5, 6), {}, tensor.MustTensor([]int64{4}, []float32{1, 1, 1.6, 2.2})}, []int{2}, ops.HostOps["Resize"], 1e-6},
		{"resize_static_sizes", graph.NewNode("n", "Resize", nil, []string{"y"}, graph.StringAttr("nearest_mode", "ceil")), 19,
			[]tensor.Tensor{f32(2, 3, 5, 6), {}, {}, tensor.MustTensor([]int64{4}, []int64{2, 3, 9, 4})}, []int{3}, ops.HostOps["Resize"], 0},
		{"convtranspose_weights", graph.NewNode("n", "ConvTranspose", nil, []string{"y"}, graph.IntsAttr("strides", 2, 2), graph.IntAttr("group", 2)), 17,
			[]tensor.Tensor{f32(2, 4, 5, 6), f32(4, 3, 3, 3), f32(6)}, []int{1, 2}, ops.HostOps["ConvTranspose"], 1e-5},
		{"attention_mask", attn, 18, []tensor.Tensor{f32(2, 4, 6, 8), f32(2, 4, 9, 8), f32(2, 4, 9, 5), f32(1, 1, 6, 9)}, []int{3}, nn.LoomAttention, 1e-5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, feeds := oneNodeSession(t, c.node, c.opset, c.in, c.static...)
			for range 2 { // the first run traces and plans, the second replays the plan
				got, err := s.Run(context.Background(), feeds)
				require.NoError(t, err)
				rc := testRunCtx(s, c.opset)
				want, err := c.host(rc, c.node, c.in)
				rc.Close()
				require.NoError(t, err)
				k := 0
				for j, name := range c.node.Outputs {
					if name == "" {
						continue
					}
					require.Equal(t, want[j].Dims(), got[k].Dims(), "output %s", name)
					w, g := tensor.Float64s(want[j]), tensor.Float64s(got[k])
					for i := range w {
						require.InDelta(t, w[i], g[i], c.tol+c.tol*math.Abs(w[i]), "output %s element %d", name, i)
					}
					k++
				}
			}
			plans := s.ExecutionPlans()
			require.Len(t, plans, 1)
			require.True(t, plans[0].Planned, plans[0].Reason)
			require.Empty(t, plans[0].HostSteps, "the node ran on the host")
			require.Equal(t, 1, plans[0].KernelSteps)
		})
	}
}

// benchKernelOp times a one-node model of n on the host provider (a compiled run plan, the
// inputs flagged static as initializers) against n's host function on the same inputs.
func benchKernelOp(b *testing.B, planner ops.KernelPlanner, n *graph.Node, opset int64, in []tensor.Tensor, host ops.OpFunc, static ...int) {
	p, reason, err := planner(n, opset, ops.InfosOfStatic(in))
	require.NoError(b, err)
	require.NotNil(b, p, reason)
	s, feeds := oneNodeSession(b, n, opset, in, static...)
	_, err = s.Run(context.Background(), feeds) // compile and plan outside the timing
	require.NoError(b, err)
	b.Run("loom", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Run(context.Background(), feeds); err != nil {
				b.Fatal(err)
			}
		}
	})
	rc := testRunCtx(s, opset)
	defer rc.Close()
	b.Run("host", func(b *testing.B) {
		for b.Loop() {
			if _, err := host(rc, n, in); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkHeavyKernelOps(b *testing.B) {
	rnd := inferRand()
	f32 := func(shape ...int64) tensor.Tensor {
		return tensor.MustTensor(shape, randomF32(rnd, ops.Numel(shape)))
	}
	b.Run("lstm_silero_1x1x128", func(b *testing.B) {
		n, in := rnnCase{op: "LSTM", seq: 1, batch: 1, in: 128, hidden: 128, dir: "forward", bias: true, h0: true, c0: true}.build(rnd)
		benchKernelOp(b, ops.KernelPlanners["LSTM"], n, 14, in, ops.HostOps["LSTM"], 1, 2, 3)
	})
	b.Run("lstm_seq64_b4_256", func(b *testing.B) {
		n, in := rnnCase{op: "LSTM", seq: 64, batch: 4, in: 256, hidden: 256, dir: "bidirectional", bias: true}.build(rnd)
		benchKernelOp(b, ops.KernelPlanners["LSTM"], n, 14, in, ops.HostOps["LSTM"], 1, 2, 3)
	})
	b.Run("gru_seq64_b4_256", func(b *testing.B) {
		n, in := rnnCase{op: "GRU", seq: 64, batch: 4, in: 256, hidden: 256, dir: "forward", bias: true}.build(rnd)
		benchKernelOp(b, ops.KernelPlanners["GRU"], n, 14, in, ops.HostOps["GRU"], 1, 2, 3)
	})
	b.Run("resize_linear_1x32x128x128_x2", func(b *testing.B) {
		n := graph.NewNode("n", "Resize", nil, []string{"y"}, graph.StringAttr("mode", "linear"))
		benchKernelOp(b, kernelops.PlanResize, n, 19, []tensor.Tensor{f32(1, 32, 128, 128), {}, tensor.MustTensor([]int64{4}, []float32{1, 1, 2, 2})}, ops.HostOps["Resize"], 2)
	})
	b.Run("resize_nearest_1x32x128x128_x2", func(b *testing.B) {
		n := graph.NewNode("n", "Resize", nil, []string{"y"})
		benchKernelOp(b, kernelops.PlanResize, n, 19, []tensor.Tensor{f32(1, 32, 128, 128), {}, tensor.MustTensor([]int64{4}, []float32{1, 1, 2, 2})}, ops.HostOps["Resize"], 2)
	})
	b.Run("convtranspose_1x64x32x32_k4s2", func(b *testing.B) {
		n := graph.NewNode("n", "ConvTranspose", nil, []string{"y"}, graph.IntsAttr("strides", 2, 2), graph.IntsAttr("pads", 1, 1, 1, 1))
		benchKernelOp(b, kernelops.PlanConvTranspose, n, 17, []tensor.Tensor{f32(1, 64, 32, 32), f32(64, 32, 4, 4), f32(32)}, ops.HostOps["ConvTranspose"], 1, 2)
	})
	b.Run("attention_1x8x128x64", func(b *testing.B) {
		n := graph.NewNode("n", "Attention", nil, []string{"y"}, graph.IntAttr("k_transposed", 1), graph.FloatAttr("scale", 0.125))
		n.Domain = graph.LoomDomain
		benchKernelOp(b, kernelops.PlanAttention, n, 18, []tensor.Tensor{f32(1, 8, 128, 64), f32(1, 8, 64, 128), f32(1, 8, 128, 64)}, nn.LoomAttention)
	})
}

// BenchmarkBatchedMatMulPlanners compares planBatchedMatMul's bmm with the registered MatMul
// planner, both run by the interpreter (upload, launch, read-back).
func BenchmarkBatchedMatMulPlanners(b *testing.B) {
	s := kernelCheckSession(b)
	rnd := inferRand()
	n := graph.NewNode("n", "MatMul", nil, []string{"y"})
	in := []tensor.Tensor{tensor.MustTensor([]int64{8, 128, 256}, randomF32(rnd, 8*128*256)), tensor.MustTensor([]int64{8, 256, 256}, randomF32(rnd, 8*256*256))}
	for _, c := range []struct {
		name    string
		planner ops.KernelPlanner
	}{{"bmm", kernelops.PlanBatchedMatMul}, {"registered", ops.KernelPlanners["MatMul"]}} {
		p, reason, err := c.planner(n, 18, ops.InfosOfStatic(in))
		require.NoError(b, err)
		require.NotNil(b, p, reason)
		rc := testRunCtx(s, 18)
		_, err = rc.RunKernelPlan(p, in)
		require.NoError(b, err)
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := rc.RunKernelPlan(p, in); err != nil {
					b.Fatal(err)
				}
			}
		})
		rc.Close()
	}
}
