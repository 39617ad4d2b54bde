package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// The movement, reduction and normalization benchmarks time an op's kernel plan as a compiled
// run plan runs it (operands placed once, launches recorded once, Replay + Synchronize per
// iteration, one host worker thread: see convgemm_bench_test.go) next to its Go host function
// on the same inputs (allocating its output, as the interpreter does).
//
//	go test ./go/session -run '^$' -bench 'KernelOpsVsHost' -benchtime 200x

type opBench struct {
	name string
	node *graph.Node
	in   []tensor.Tensor
}

func kernelOpBenches() []opBench {
	r := movementRand{inferRand()}
	idx := make([]int64, 128)
	for i := range idx {
		idx[i] = int64(r.rnd.IntN(1000))
	}
	return []opBench{
		{"transpose_attention_heads", kernelNode("Transpose", graph.IntsAttr("perm", 0, 2, 1, 3)), []tensor.Tensor{r.f32(1, 128, 12, 64)}},
		{"transpose_matrix", kernelNode("Transpose"), []tensor.Tensor{r.f32(256, 256)}},
		{"concat_channels", kernelNode("Concat", graph.IntAttr("axis", 1)), []tensor.Tensor{r.f32(1, 64, 32, 32), r.f32(1, 64, 32, 32)}},
		{"concat_kv_cache", kernelNode("Concat", graph.IntAttr("axis", 2)), []tensor.Tensor{r.f32(1, 12, 128, 64), r.f32(1, 12, 1, 64)}},
		{"gather_embedding", kernelNode("Gather"), []tensor.Tensor{r.f32(1000, 256), int64Vec(idx...)}},
		{"where_bool", kernelNode("Where"), []tensor.Tensor{r.of(graph.Bool, 128, 768), r.f32(128, 768), r.f32(1)}},
		{"add_residual", kernelNode("Add"), []tensor.Tensor{r.f32(128, 768), r.f32(128, 768)}},
		{"add_bias_rows", kernelNode("Add"), []tensor.Tensor{r.f32(128, 768), r.f32(768)}},
		{"mul_per_row", kernelNode("Mul"), []tensor.Tensor{r.f32(12, 128, 128), r.f32(12, 128, 1)}},
		{"less_broadcast", kernelNode("Less"), []tensor.Tensor{r.f32(128, 768), r.f32(768)}},
		{"less_per_row", kernelNode("Less"), []tensor.Tensor{r.f32(12, 128, 128), r.f32(12, 128, 1)}},
		{"where_per_row", kernelNode("Where"), []tensor.Tensor{r.of(graph.Bool, 12, 128, 128), r.f32(12, 128, 128), r.f32(12, 128, 1)}},
		{"reduce_mean_rows", kernelNode("ReduceMean"), []tensor.Tensor{r.f32(128, 768), int64Vec(-1)}},
		{"reduce_sum_middle", kernelNode("ReduceSum"), []tensor.Tensor{r.f32(64, 256, 64), int64Vec(1)}},
		{"layernorm", multiOutputNode("LayerNormalization", []string{"y"}), []tensor.Tensor{r.f32(128, 768), r.f32(768), r.f32(768)}},
		{"gelu", kernelNode("Gelu"), []tensor.Tensor{r.f32(128, 768)}},
	}
}

// placeStaticPlan plans n for the tensors in (all static), places its operands in ms and
// returns its launches.
func placeStaticPlan(b *testing.B, ms *device.ModelSession, n *graph.Node, in []tensor.Tensor) []device.Command {
	b.Helper()
	p, reason, err := ops.KernelPlanners[ops.PlannerKey(n)](n, 18, ops.InfosOfStatic(in))
	require.NoError(b, err)
	require.NotNil(b, p, reason)
	cmds, _ := placeKernelPlan(b, ms, p, in, device.Region{})
	return cmds
}

func BenchmarkKernelOpsVsHost(b *testing.B) {
	for _, c := range kernelOpBenches() {
		b.Run(c.name+"/kernel", func(b *testing.B) {
			ms := benchSession(b)
			recordRepeated(b, ms, placeStaticPlan(b, ms, c.node, c.in))
			replayTimes(b, ms, 0)
		})
		b.Run(c.name+"/host", func(b *testing.B) {
			rc := testRunCtx(nil, 18)
			f := ops.HostOps[c.node.OpType]
			for b.Loop() {
				_, err := f(rc, c.node, c.in)
				require.NoError(b, err)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/op")
		})
	}
}
