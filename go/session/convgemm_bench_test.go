package session

import (
	"flag"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// The Conv and GEMM benchmarks run an op's kernel plan the way a compiled run plan runs it:
// operands placed once, the plan's launches recorded once into a graph, then Replay +
// Synchronize per iteration, on a host device with one worker thread. They report the op's
// time (us/op wall, cpu-us/op of process CPU time) and its arithmetic rate (GFLOP/s by CPU
// time, 2 flops per multiply-add).
//
//	go test ./go/session -run '^$' -bench 'ConvGemm' -benchtime 100x -count 3

// planBench is one op to benchmark: its node, the shapes of its float32 inputs and its
// multiply-adds.
type planBench struct {
	name   string
	node   *graph.Node
	shapes [][]int64
	macs   float64
	// static lists the inputs the planner sees as constants (a model's weights: packed as
	// the session packs them).
	static []int
}

// convMACs is N·M·OH·OW·(C/group)·KH·KW for x [N, C, H, W], w [M, C/group, KH, KW] and the
// output size.
func convMACs(x, w []int64, oh, ow int64) float64 {
	return float64(x[0] * w[0] * oh * ow * w[1] * w[2] * w[3])
}

func convBench(name string, x, w []int64, oh, ow int64, bias bool, attrs ...*graph.Attribute) planBench {
	shapes := [][]int64{x, w}
	if bias {
		shapes = append(shapes, []int64{w[0]})
	}
	return planBench{name: name, node: graph.NewNode("n", "Conv", nil, []string{"y"}, attrs...), shapes: shapes, macs: convMACs(x, w, oh, ow)}
}

func fusedConvBench(name, act string, x, w []int64, oh, ow int64, attrs ...*graph.Attribute) planBench {
	n := graph.NewNode("n", "FusedConv", nil, []string{"y"}, append(attrs, graph.StringAttr("activation", act))...)
	n.Domain = graph.LoomDomain
	return planBench{name: name, node: n, shapes: [][]int64{x, w, {w[0]}}, macs: convMACs(x, w, oh, ow)}
}

// convGemmBenches are the Conv and GEMM shapes of the models the op library is tuned for:
// MNIST, PP-OCRv4 recognition (1x3x48x320 input) and the tiny encoder (x [2, 7, 64]).
func convGemmBenches() []planBench {
	pads := func(p int64) *graph.Attribute { return graph.IntsAttr("pads", p, p, p, p) }
	strides := func(h, w int64) *graph.Attribute { return graph.IntsAttr("strides", h, w) }
	group := func(g int64) *graph.Attribute { return graph.IntAttr("group", g) }
	matmul := func(name string, a, b []int64) planBench {
		m := int64(1)
		for _, d := range a[:len(a)-1] {
			m *= d
		}
		return planBench{name: name, node: graph.NewNode("n", "MatMul", nil, []string{"y"}), shapes: [][]int64{a, b}, macs: float64(m * b[0] * b[1])}
	}
	batchedMatMul := func(name string, a, b []int64) planBench {
		batch := int64(ops.Numel(a[:len(a)-2]))
		m, k, n := a[len(a)-2], a[len(a)-1], b[len(b)-1]
		return planBench{name: name, node: graph.NewNode("n", "MatMul", nil, []string{"y"}), shapes: [][]int64{a, b}, macs: float64(batch * m * k * n)}
	}
	weights := func(p planBench) planBench {
		p.static = []int{1}
		if len(p.shapes) > 2 {
			p.static = append(p.static, 2)
		}
		return p
	}
	matMulAdd := func(name string, a, b []int64) planBench {
		p := matmul(name, a, b)
		p.node = graph.NewNode("n", "MatMulAdd", nil, []string{"y"})
		p.node.Domain = graph.LoomDomain
		p.shapes = append(p.shapes, []int64{b[1]})
		return p
	}
	return []planBench{
		// A launch that does almost nothing: the fixed cost of one launch in a replayed graph.
		{name: "launch_overhead_relu_1", node: graph.NewNode("n", "Relu", nil, []string{"y"}), shapes: [][]int64{{1}}},
		fusedConvBench("mnist_conv1_5x5_c1_m8_28x28", "Relu", []int64{1, 1, 28, 28}, []int64{8, 1, 5, 5}, 28, 28, pads(2)),
		fusedConvBench("mnist_conv2_5x5_c8_m16_14x14", "Relu", []int64{1, 8, 14, 14}, []int64{16, 8, 5, 5}, 14, 14, pads(2)),
		{name: "mnist_gemm_1x256x10", node: graph.NewNode("n", "Gemm", nil, []string{"y"}),
			shapes: [][]int64{{1, 256}, {256, 10}, {1, 10}}, macs: 256 * 10},
		convBench("ocr_conv_3x3_s2_c3_m16_48x320", []int64{1, 3, 48, 320}, []int64{16, 3, 3, 3}, 24, 160, true, pads(1), strides(2, 2)),
		convBench("ocr_dw_3x3_c16_24x160", []int64{1, 16, 24, 160}, []int64{16, 1, 3, 3}, 24, 160, true, pads(1), group(16)),
		convBench("ocr_dw_3x3_s1x2_c128_12x160", []int64{1, 128, 12, 160}, []int64{128, 1, 3, 3}, 12, 80, true, pads(1), strides(1, 2), group(128)),
		convBench("ocr_dw_5x5_c240_12x80", []int64{1, 240, 12, 80}, []int64{240, 1, 5, 5}, 12, 80, true, pads(2), group(240)),
		convBench("ocr_dw_5x5_c480_3x80", []int64{1, 480, 3, 80}, []int64{480, 1, 5, 5}, 3, 80, true, pads(2), group(480)),
		convBench("ocr_pw_1x1_c16_m32_24x160", []int64{1, 16, 24, 160}, []int64{32, 16, 1, 1}, 24, 160, true),
		convBench("ocr_pw_1x1_c64_m128_12x160", []int64{1, 64, 12, 160}, []int64{128, 64, 1, 1}, 12, 160, true),
		convBench("ocr_pw_1x1_c240_m240_12x80", []int64{1, 240, 12, 80}, []int64{240, 240, 1, 1}, 12, 80, true),
		convBench("ocr_pw_1x1_c480_m480_3x80", []int64{1, 480, 3, 80}, []int64{480, 480, 1, 1}, 3, 80, true),
		fusedConvBench("ocr_se_1x1_c120_m480_1x1", "HardSigmoid", []int64{1, 120, 1, 1}, []int64{480, 120, 1, 1}, 1, 1),
		convBench("ocr_conv_1x3_c480_m60_1x40", []int64{1, 480, 1, 40}, []int64{60, 480, 1, 3}, 1, 40, true, graph.IntsAttr("pads", 0, 1, 0, 1)),
		matMulAdd("ocr_matmuladd_40x120x360", []int64{1, 40, 120}, []int64{120, 360}),
		matMulAdd("ocr_matmuladd_40x240x120", []int64{1, 40, 240}, []int64{240, 120}),
		matMulAdd("ocr_matmuladd_40x120x6625", []int64{1, 40, 120}, []int64{120, 6625}),
		batchedMatMul("ocr_attention_8x40x15x40", []int64{1, 8, 40, 15}, []int64{1, 8, 15, 40}),
		matMulAdd("encoder_matmuladd_2x7x64x128", []int64{2, 7, 64}, []int64{64, 128}),
		matMulAdd("encoder_matmuladd_2x7x128x64", []int64{2, 7, 128}, []int64{128, 64}),
		matMulAdd("encoder_matmuladd_2x3x64x192", []int64{2, 3, 64}, []int64{64, 192}),
		matmul("matmul_256x256x256", []int64{256, 256}, []int64{256, 256}),
		// Transformer projections over 128 tokens (BERT-base: QKV, attention output, MLP up and
		// down) and 1024³, with the weight constant as in a model.
		weights(matMulAdd("bert_matmuladd_128x768x2304", []int64{128, 768}, []int64{768, 2304})),
		weights(matMulAdd("bert_matmuladd_128x768x768", []int64{128, 768}, []int64{768, 768})),
		weights(matMulAdd("bert_matmuladd_128x768x3072", []int64{128, 768}, []int64{768, 3072})),
		weights(matMulAdd("bert_matmuladd_128x3072x768", []int64{128, 3072}, []int64{3072, 768})),
		weights(matmul("matmul_1024x1024x1024_weights", []int64{1024, 1024}, []int64{1024, 1024})),
	}
}

// benchSession opens a host session with one worker thread, closed when the benchmark ends.
func benchSession(b *testing.B) *device.ModelSession {
	b.Helper()
	ms, err := device.Open(0, device.WithWorkerThreads(1))
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, ms.Close()) })
	return ms
}

// placePlan plans node for float32 inputs of the given shapes (fresh random values; the
// planner sees no values, as for a model's dynamic inputs, except those of the inputs static
// lists, which it sees as a model's weights), places its operands in ms and
// returns the plan's launches as commands, with the region of output 0. A valid x replaces
// input 0 by a region of x (its leading bytes), so that consecutive ops form a chain.
func placePlan(b *testing.B, ms *device.ModelSession, node *graph.Node, shapes [][]int64, x device.Region, static ...int) ([]device.Command, device.Region, *ops.KernelPlan) {
	b.Helper()
	rnd := inferRand()
	in := make([]tensor.Tensor, len(shapes))
	for i, s := range shapes {
		in[i] = tensor.MustTensor(s, randomF32(rnd, ops.Numel(s)))
	}
	planner, ok := ops.KernelPlanners[ops.PlannerKey(node)]
	require.True(b, ok, "no planner for %s", ops.PlannerKey(node))
	infos := ops.InfosOf(in)
	for _, i := range static { // constants, with a cache of what is derived from them (packed)
		infos[i].Static, infos[i].Derived = in[i], &ops.DerivedConsts{}
	}
	p, reason, err := planner(node, 18, infos)
	require.NoError(b, err)
	if p == nil {
		b.Skipf("the planner declined: %s", reason)
	}
	cmds, y := placeKernelPlan(b, ms, p, in, x)
	return cmds, y, p
}

// placeKernelPlan places p's operands for the inputs in (input 0 at a region of x when x is
// set) in ms, uploading the inputs and the plan's constants, and returns p's launches as
// commands with the region of output 0.
func placeKernelPlan(b *testing.B, ms *device.ModelSession, p *ops.KernelPlan, in []tensor.Tensor, x device.Region) ([]device.Command, device.Region) {
	b.Helper()
	regions := map[ops.Operand]device.Region{}
	region := func(o ops.Operand) device.Region {
		if r, ok := regions[o]; ok {
			return r
		}
		var value tensor.Tensor // uploaded: an input or a constant
		var bytes int64
		switch o.Kind {
		case ops.OperandInput:
			value = in[o.Index]
		case ops.OperandConst:
			value = p.Consts[o.Index]
		case ops.OperandOutput:
			bytes = ops.Bytes(p.Outputs[o.Index])
		case ops.OperandScratch:
			bytes = p.Scratch[o.Index]
		}
		if value.IsValid() {
			bytes = value.DType().ByteSize(int64(value.Len()))
		}
		var r device.Region
		var err error
		if o.Kind == ops.OperandInput && o.Index == 0 && x.Bytes() > 0 {
			r, err = x.Slice(0, uint64(bytes))
			require.NoError(b, err)
		} else {
			r, err = ms.Allocate(uint64(max(bytes, 4)))
			require.NoError(b, err)
			if value.IsValid() {
				raw, _ := ops.RawBytes(value)
				require.NoError(b, ms.Upload(r, raw))
			}
		}
		regions[o] = r
		return r
	}
	var cmds []device.Command
	for _, c := range p.Calls {
		src, err := exec.SourceOf(c.File, c.Symbol, c.Config)
		require.NoError(b, err)
		ids, err := ms.Compile([]device.KernelSource{src})
		require.NoError(b, err)
		d := device.Dispatch{Kernel: ids[0], Args: c.Args, Workload: c.Workload}
		for _, bd := range c.Bind {
			d.Bindings = append(d.Bindings, device.Binding{Region: region(bd.Operand), Access: bd.Access})
		}
		cmds = append(cmds, d)
	}
	return cmds, region(ops.OutputOperand(0))
}

// benchRepeats is how many times a recording repeats an op's launches (each repetition
// waits for the one before: they write the same output), so that the fixed cost of a replay
// and its synchronization spreads over many ops, as in a model's graph. Slow kernels (the
// naive ones these replaced) are timed with fewer.
var benchRepeats = flag.Int("convgemm.repeats", 64, "launch sequences per recorded graph in the ConvGemm benchmarks")

// processCPU is the CPU time the process has used, its threads and the host backend's
// worker together: on a loaded machine it measures the work where wall time also counts the
// waits for a core.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// recordRepeated records cmds benchRepeats times over as "op".
func recordRepeated(b *testing.B, ms *device.ModelSession, cmds []device.Command) {
	var all []device.Command
	for range *benchRepeats {
		all = append(all, cmds...)
	}
	require.NoError(b, ms.Record("op", all))
}

// replayTimes replays the recording "op" b.N times and reports, per op (a replay holds
// benchRepeats of them), wall time (us/op), process CPU time (cpu-us/op) and GFLOP/s for
// macs multiply-adds by CPU time.
func replayTimes(b *testing.B, ms *device.ModelSession, macs float64) {
	require.NoError(b, ms.Replay("op")) // warm the caches and the worker
	require.NoError(b, ms.Synchronize())
	cpu0 := processCPU()
	for b.Loop() {
		require.NoError(b, ms.Replay("op"))
		require.NoError(b, ms.Synchronize())
	}
	ops := float64(b.N * *benchRepeats)
	wall := b.Elapsed().Seconds() / ops
	cpu := (processCPU() - cpu0).Seconds() / ops
	b.ReportMetric(wall*1e6, "us/op")
	b.ReportMetric(cpu*1e6, "cpu-us/op")
	if macs > 0 {
		b.ReportMetric(2*macs/cpu/1e9, "GFLOP/s")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkConvGemm times each shape of convGemmBenches through its kernel plan.
func BenchmarkConvGemm(b *testing.B) { runPlanBenches(b, convGemmBenches()) }

// runPlanBenches times each case's kernel plan as a recorded graph replayed on one worker.
func runPlanBenches(b *testing.B, cases []planBench) {
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			ms := benchSession(b)
			cmds, _, p := placePlan(b, ms, c.node, c.shapes, device.Region{}, c.static...)
			b.Logf("%s", ops.Variant(p))
			recordRepeated(b, ms, cmds)
			replayTimes(b, ms, c.macs)
		})
	}
}

// BenchmarkConvGemmMNIST replays MNIST's two convolutions and its Gemm as one graph, each
// reading (a prefix of) the previous one's output so that they run in order as in the model
// (whose other ops, two MaxPools and a Reshape, are left out): the per-run cost of MNIST's
// Conv and GEMM kernels together.
func BenchmarkConvGemmMNIST(b *testing.B) {
	ms := benchSession(b)
	var cmds []device.Command
	var macs float64
	var prev device.Region
	for _, c := range convGemmBenches()[1:4] {
		more, out, _ := placePlan(b, ms, c.node, c.shapes, prev)
		cmds, prev = append(cmds, more...), out
		macs += c.macs
	}
	recordRepeated(b, ms, cmds)
	replayTimes(b, ms, macs)
}
