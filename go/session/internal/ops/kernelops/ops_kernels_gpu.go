package kernelops

import (
	"fmt"
	"strconv"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
)

// The GPU planners (ops.RegisterGPUKernelPlanner) of the row kernels: each takes the op's own
// plan and replaces its CPU-shaped row kernel (a thread a row) by the GPU-shaped one (one block
// of 2^LOG2 threads a row, the threads striding the row, block reductions through shared
// memory), call for call: the same file, arguments, workload and bindings.
var (
	softmaxRows     = gpuRows{from: "softmax", to: "softmax_rows", rowArg: 1, keep: []string{"LOG"}}
	normRowsBlock   = gpuRows{from: "norm_rows", to: "norm_rows_block", rowArg: 1, keep: []string{"SCOL", "BIAS"}}
	attnSoftmaxRows = gpuRows{from: "attn_softmax", to: "attn_softmax_rows", rowArg: 4, keep: []string{"MASK"}}
	// A reduction's contiguous runs shorter than a warp stay a thread per output.
	reduceRowsBlock = gpuRows{from: "reduce_rows", to: "reduce_rows_block", rowArg: 4, minRow: 32, keep: []string{"OP"}}
)

// gpuRows is one such replacement.
type gpuRows struct {
	from, to string   // the row kernels' symbols
	rowArg   int      // the argument holding a row's length
	minRow   int      // rows shorter than this keep from
	keep     []string // from's specialization constants that to takes too
}

// planner is base with its calls of g.from replaced by g.to.
func (g gpuRows) planner(base ops.KernelPlanner) ops.KernelPlanner {
	return func(nd *graph.Node, opset int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
		p, reason, err := base(nd, opset, in)
		if err != nil || p == nil {
			return p, reason, err
		}
		for i, c := range p.Calls {
			row := int(c.Args[g.rowArg])
			if c.Symbol != g.from || row < g.minRow {
				continue
			}
			cfg := map[string]string{"LOG2": strconv.Itoa(rowBlockLog2(row))}
			for _, k := range g.keep {
				if v, ok := c.Config[k]; ok {
					cfg[k] = v
				}
			}
			c.Symbol, c.Config = g.to, cfg
			p.Calls[i] = c
			p.Reason += ", " + g.to + " (GPU: a block a row)"
		}
		return p, reason, nil
	}
}

// rowBlockLog2 is the LOG2 of the GPU row kernels' blocks for rows of n elements: n rounded up
// to a power of two, at least a warp (32 threads) and at most 256, so that every thread has
// elements to stride over and a long row takes 8 warps.
func rowBlockLog2(n int) int {
	log2 := 5
	for log2 < 8 && 1<<log2 < n {
		log2++
	}
	return log2
}

// gpuFlatBlock and gpuFlatEPT are binary_flat's geometry on a GPU: blocks of 256 threads, each
// thread EPT elements 256 apart with all their loads in flight before its stores (the host's
// EPT 1 leaves two loads a thread, about 40% of an H200's copy bandwidth on 64 MB operands).
const (
	gpuFlatBlock = "256"
	gpuFlatEPT   = "4"
)

// gpuFlat is the GPU planner of an elementwise planner: its binary_flat calls take the GPU's
// geometry (gpuFlatBlock, gpuFlatEPT), call for call with the same arguments and bindings.
func gpuFlat(base ops.KernelPlanner) ops.KernelPlanner {
	return func(nd *graph.Node, opset int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
		p, reason, err := base(nd, opset, in)
		if err != nil || p == nil {
			return p, reason, err
		}
		for i, c := range p.Calls {
			if c.Symbol != "binary_flat" {
				continue
			}
			cfg := make(map[string]string, len(c.Config)+2)
			for k, v := range c.Config {
				cfg[k] = v
			}
			cfg["BLOCK"], cfg["EPT"] = gpuFlatBlock, gpuFlatEPT
			c.Config = cfg
			p.Calls[i] = c
			p.Reason += ", " + gpuFlatEPT + " elements a thread (GPU)"
		}
		return p, reason, nil
	}
}

// The GPU planners of the matrix products: MatMul, Gemm, Loom's MatMulAdd, and Conv and
// FusedConv where they are matrix products (1x1 convolutions, dot products along the receptive
// field), planned as on the host but with gemm_tiled (kernels/gemm_gpu.loom: a block of 256
// threads a 64x64 or 128x128 tile of the output, k in slices through shared memory) for the
// product. Batched MatMuls whose batch axes do not fold into two decline and keep bmm.
func registerGPUGemmPlanners() {
	ops.RegisterGPUKernelPlanner("MatMul", gpuGemm(planMatMulOn))
	ops.RegisterGPUKernelPlanner("Gemm", gpuGemm(planGemmOn))
	ops.RegisterGPUKernelPlanner(graph.LoomDomain+":MatMulAdd", gpuGemm(planMatMulAddOn))
	for key, fused := range map[string]bool{"Conv": false, graph.LoomDomain + ":FusedConv": true} {
		ops.RegisterGPUKernelPlanner(key, gpuGemm(func(nd *graph.Node, in []ops.ValueInfo, gpu bool) (*ops.KernelPlan, string, error) {
			return convPlan(nd, in, fused, gpu)
		}))
	}
}

// gpuGemm is the GPU planner of a planner whose matrix products launch gemm_tiled with gpu.
func gpuGemm(planner func(nd *graph.Node, in []ops.ValueInfo, gpu bool) (*ops.KernelPlan, string, error)) ops.KernelPlanner {
	return func(nd *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
		p, reason, err := planner(nd, in, true)
		if err != nil || p == nil {
			return p, reason, err
		}
		for _, c := range p.Calls {
			if c.Symbol == "gemm_tiled" {
				p.Reason += fmt.Sprintf(", gemm_tiled (GPU: a block a %sx%s tile)", c.Config["BM"], c.Config["BN"])
				break
			}
		}
		return p, reason, nil
	}
}
