package session

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
)

// benchKernelOp times a one-node model of n on the host provider (a compiled run plan, the
// inputs flagged static as initializers) against n's host function on the same inputs.
func benchKernelOp(b *testing.B, planner kernelPlanner, n *graph.Node, opset int64, in []Tensor, host opFunc, static ...int) {
	p, reason, err := planner(n, opset, infosOfStatic(in))
	require.NoError(b, err)
	require.NotNil(b, p, reason)
	g := &graph.Graph{Name: "bench"}
	var feeds []NamedTensor
	node := *n
	node.Inputs = make([]string, len(in))
	for i, t := range in {
		if !t.IsValid() {
			continue
		}
		name := fmt.Sprintf("in%d", i)
		node.Inputs[i] = name
		if slices.Contains(static, i) {
			raw, _ := rawBytes(t)
			gt, err := graph.NewTensor(name, t.dtype, t.shape, append([]byte{}, raw...))
			require.NoError(b, err)
			g.AddInitializer(gt)
			continue
		}
		g.Inputs = append(g.Inputs, graph.Input(name, graph.TensorType(t.dtype, graph.ShapeOf(t.shape...))))
		feeds = append(feeds, NamedTensor{Name: name, Tensor: t})
	}
	for _, o := range node.Outputs {
		if o != "" {
			g.Outputs = append(g.Outputs, graph.Output(o, graph.Type{}))
		}
	}
	g.Nodes = []*graph.Node{&node}
	m, err := graph.FromGraph(g.Name, g, map[string]int64{"": opset, graph.LoomDomain: 1})
	require.NoError(b, err)
	s, err := Builder().WithExecutionProvider(ProviderHost).FromGraph(m)
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, s.Close()) })
	_, err = s.Run(feeds) // compile and plan outside the timing
	require.NoError(b, err)
	b.Run("loom", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Run(feeds); err != nil {
				b.Fatal(err)
			}
		}
	})
	rc := &runCtx{s: s, opset: opset}
	defer rc.close()
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
	f32 := func(shape ...int64) Tensor { return MustTensor(shape, randomF32(rnd, numel(shape))) }
	b.Run("lstm_silero_1x1x128", func(b *testing.B) {
		n, in := rnnCase{op: "LSTM", seq: 1, batch: 1, in: 128, hidden: 128, dir: "forward", bias: true, h0: true, c0: true}.build(rnd)
		benchKernelOp(b, kernelPlanners["LSTM"], n, 14, in, hostOps["LSTM"], 1, 2, 3)
	})
	b.Run("lstm_seq64_b4_256", func(b *testing.B) {
		n, in := rnnCase{op: "LSTM", seq: 64, batch: 4, in: 256, hidden: 256, dir: "bidirectional", bias: true}.build(rnd)
		benchKernelOp(b, kernelPlanners["LSTM"], n, 14, in, hostOps["LSTM"], 1, 2, 3)
	})
	b.Run("gru_seq64_b4_256", func(b *testing.B) {
		n, in := rnnCase{op: "GRU", seq: 64, batch: 4, in: 256, hidden: 256, dir: "forward", bias: true}.build(rnd)
		benchKernelOp(b, kernelPlanners["GRU"], n, 14, in, hostOps["GRU"], 1, 2, 3)
	})
	b.Run("resize_linear_1x32x128x128_x2", func(b *testing.B) {
		n := graph.NewNode("n", "Resize", nil, []string{"y"}, graph.StringAttr("mode", "linear"))
		benchKernelOp(b, planResize, n, 19, []Tensor{f32(1, 32, 128, 128), {}, MustTensor([]int64{4}, []float32{1, 1, 2, 2})}, hostOps["Resize"], 2)
	})
	b.Run("resize_nearest_1x32x128x128_x2", func(b *testing.B) {
		n := graph.NewNode("n", "Resize", nil, []string{"y"})
		benchKernelOp(b, planResize, n, 19, []Tensor{f32(1, 32, 128, 128), {}, MustTensor([]int64{4}, []float32{1, 1, 2, 2})}, hostOps["Resize"], 2)
	})
	b.Run("convtranspose_1x64x32x32_k4s2", func(b *testing.B) {
		n := graph.NewNode("n", "ConvTranspose", nil, []string{"y"}, graph.IntsAttr("strides", 2, 2), graph.IntsAttr("pads", 1, 1, 1, 1))
		benchKernelOp(b, planConvTranspose, n, 17, []Tensor{f32(1, 64, 32, 32), f32(64, 32, 4, 4), f32(32)}, hostOps["ConvTranspose"], 1, 2)
	})
	b.Run("attention_1x8x128x64", func(b *testing.B) {
		n := graph.NewNode("n", "Attention", nil, []string{"y"}, graph.IntAttr("k_transposed", 1), graph.FloatAttr("scale", 0.125))
		n.Domain = graph.LoomDomain
		benchKernelOp(b, planAttention, n, 18, []Tensor{f32(1, 8, 128, 64), f32(1, 8, 64, 128), f32(1, 8, 128, 64)}, loomAttention)
	})
	b.Run("batched_matmul_8x128x256x256", func(b *testing.B) {
		n := graph.NewNode("n", "MatMul", nil, []string{"y"})
		benchKernelOp(b, planBatchedMatMul, n, 18, []Tensor{f32(8, 128, 256), f32(8, 256, 256)}, kernelOps["MatMul"])
	})
}
