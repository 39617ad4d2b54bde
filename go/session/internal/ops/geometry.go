package ops

import (
	"fmt"
	"maps"
	"strconv"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/loom"
)

// Launch geometry within the device's limits. A kernel's launch program (in its .loom file)
// computes grid and block from the workload a planner passes, and a launch whose geometry a
// device cannot run fails at dispatch. Planners therefore keep to kernelLimits: the limits
// every target of the op library meets. CUDA devices (sm_50 to sm_90) take at most 1024
// threads per block, block z up to 64, grid y and z up to 65,535 and 48 KiB of static shared
// memory per block; the host backend reports the same launch limits (and 1 MiB of shared
// memory, see shim/src/host_backend.cc), so one plan serves every target and a plan the host
// runs also runs on a GPU.
//
// Planners choose their tiles themselves (conv2d_direct's block z, for one, stays within
// MaxBlockDim[2]); what no tile choice avoids, a tensor axis beyond grid y or z (a batch times
// channels, rows), fitPlan re-tiles after planning: kernels with grid y/z axes take a FOLD
// specialization that launches all blocks along grid x and divides the block index back into
// three (one division per block; the code without FOLD is unchanged), and fitPlan sets it
// where the grid needs it. kernelGeometry mirrors each kernel's launch program in Go for this;
// TestKernelGeometryProperty checks the mirror against the launch programs themselves.
var KernelLimits = loom.Limits{
	MaxThreadsPerBlock:      1024,
	MaxBlockDim:             [3]uint32{1024, 1024, 64},
	MaxGridDim:              [3]uint32{1<<31 - 1, 65535, 65535},
	MaxSharedMemoryPerBlock: 48 << 10,
}

// launchShape is a kernel's launch geometry as its launch program computes it (without FOLD),
// and whether the kernel can fold its grid y and z into x.
type launchShape struct {
	Grid, Block [3]int64
	Foldable    bool
}

// launchFormula computes a kernel's launch shape from its workload and specialization.
type launchFormula func(w []int64, spec func(name string, def int64) int64) launchShape

func cdiv(a, b int64) int64 {
	if b <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

// flat1D is the launch of a kernel over n = w[0] items in blocks of BLOCK threads.
func flat1D(def int64) launchFormula {
	return func(w []int64, spec func(string, int64) int64) launchShape {
		b := spec("BLOCK", def)
		return launchShape{Grid: [3]int64{cdiv(w[0], b), 1, 1}, Block: [3]int64{b, 1, 1}}
	}
}

// flat1DEPT is flat1D with EPT elements a thread: ceil(w[0] / (BLOCK * EPT)) blocks.
func flat1DEPT(def int64) launchFormula {
	return func(w []int64, spec func(string, int64) int64) launchShape {
		b := spec("BLOCK", def)
		return launchShape{Grid: [3]int64{cdiv(w[0], b*spec("EPT", 1)), 1, 1}, Block: [3]int64{b, 1, 1}}
	}
}

// serial1D is the launch of one thread per block over ceil(w[0] / per) blocks.
func serial1D(per string, def int64) launchFormula {
	return func(w []int64, spec func(string, int64) int64) launchShape {
		return launchShape{Grid: [3]int64{cdiv(w[0], spec(per, def)), 1, 1}, Block: [3]int64{1, 1, 1}}
	}
}

// tiled6D is the launch of the rank-6 kernels with BX x BY tiles over the two innermost axes.
func tiled6D(w []int64, spec func(string, int64) int64) launchShape {
	bx, by := spec("BX", 256), spec("BY", 1)
	return launchShape{Grid: [3]int64{cdiv(w[5], bx) * cdiv(w[4], by) * w[3] * w[2] * w[1] * w[0], 1, 1}, Block: [3]int64{bx, by, 1}}
}

// rowsGrid is a foldable launch of BLOCK threads along x = w[0], one block row per y = w[1]
// and z = w[2].
func rowsGrid(def int64) launchFormula {
	return func(w []int64, spec func(string, int64) int64) launchShape {
		b := spec("BLOCK", def)
		return launchShape{Grid: [3]int64{cdiv(w[0], b), w[1], w[2]}, Block: [3]int64{b, 1, 1}, Foldable: true}
	}
}

// blockARow is the launch of one block of 2^LOG2 threads for each of w[0] rows (the GPU-shaped
// row kernels).
func blockARow(w []int64, spec func(string, int64) int64) launchShape {
	return launchShape{Grid: [3]int64{w[0], 1, 1}, Block: [3]int64{1 << spec("LOG2", 8), 1, 1}}
}

// kernelGeometry mirrors the launch programs of the op library's kernels, by file:symbol.
var KernelGeometry = map[string]launchFormula{
	"elementwise.loom:binary":       tiled6D,
	"elementwise.loom:binary_flat":  flat1DEPT(1024),
	"elementwise.loom:unary":        flat1D(256),
	"attention.loom:attn_softmax":   rowsGrid(64),
	"linalg.loom:softmax_rows":      blockARow,
	"norm.loom:norm_rows_block":     blockARow,
	"reduce.loom:reduce_rows_block": blockARow,
	"attention.loom:attn_softmax_rows": func(w []int64, spec func(string, int64) int64) launchShape {
		return launchShape{Grid: [3]int64{w[0], w[1], w[2]}, Block: [3]int64{1 << spec("LOG2", 8), 1, 1}, Foldable: true}
	},
	"bmm.loom:bmm": func(w []int64, spec func(string, int64) int64) launchShape {
		mr, nr, tn, tm := spec("MR", 6), spec("VL", 16)*spec("NV", 2), spec("TN", 4), spec("TM", 2)
		return launchShape{Grid: [3]int64{cdiv(w[1], nr*tn), cdiv(w[0], mr*tm), w[2]}, Block: [3]int64{tn, tm, 1}, Foldable: true}
	},
	"bmm.loom:bmm_nt": func(w []int64, spec func(string, int64) int64) launchShape {
		mr, nc, tn, tm := spec("MR", 4), spec("NC", 4), spec("TN", 4), spec("TM", 2)
		return launchShape{Grid: [3]int64{cdiv(w[1], nc*tn), cdiv(w[0], mr*tm), w[2]}, Block: [3]int64{tn, tm, 1}, Foldable: true}
	},
	"conv_fast.loom:conv_pad": serial1D("PLANES", 1),
	"conv_fast.loom:conv2d_direct": func(w []int64, spec func(string, int64) int64) launchShape {
		nb, mg, oh, ow, groups := w[0], w[1], w[2], w[3], w[4]
		tx, ty, tz := spec("TX", 1), spec("TY", 1), spec("TZ", 1)
		gz := groups * cdiv(mg, tz*spec("MR", 4))
		if spec("DEPTHWISE", 0) != 0 {
			gz = cdiv(groups, tz)
		}
		return launchShape{Grid: [3]int64{cdiv(cdiv(ow, spec("NVX", 2)*spec("VL", 16)), tx), cdiv(cdiv(oh, spec("NVY", 1)), ty), nb * gz},
			Block: [3]int64{tx, ty, tz}, Foldable: true}
	},
	"conv_fast.loom:conv_cols": func(w []int64, spec func(string, int64) int64) launchShape {
		return launchShape{Grid: [3]int64{cdiv(w[1], spec("ROWS", 1)), w[0], 1}, Block: [3]int64{1, 1, 1}, Foldable: true}
	},
	"conv_fast.loom:conv2d_cout": func(w []int64, spec func(string, int64) int64) launchShape {
		nb, mg, oh, groups := w[0], w[1], w[2], w[4]
		bm := spec("MV", 1) * spec("VL", 16)
		return launchShape{Grid: [3]int64{1, cdiv(cdiv(oh, spec("NY", 1)), spec("RB", 1)), nb * groups * cdiv(mg, bm)}, Block: [3]int64{1, 1, 1}, Foldable: true}
	},
	"conv_fast.loom:conv_wt": func(w []int64, spec func(string, int64) int64) launchShape {
		return launchShape{Grid: [3]int64{cdiv(w[1], spec("ROWS", 64)), w[0], 1}, Block: [3]int64{1, 1, 1}, Foldable: true}
	},
	"convtranspose.loom:col2im": rowsGrid(64),
	"gemm_fast.loom:gemm_nn": func(w []int64, spec func(string, int64) int64) launchShape {
		tx, ty := spec("TX", 1), spec("TY", 1)
		nr := spec("NV", 2) * spec("VL", 16)
		return launchShape{Grid: [3]int64{cdiv(cdiv(w[3], nr), tx), cdiv(cdiv(w[2], spec("MR", 4)), ty), w[0] * w[1]}, Block: [3]int64{tx, ty, 1}, Foldable: true}
	},
	"gemm_fast.loom:gemm_nt": func(w []int64, spec func(string, int64) int64) launchShape {
		tx, ty := spec("TX", 1), spec("TY", 1)
		return launchShape{Grid: [3]int64{cdiv(cdiv(w[3], spec("NC", 3)), tx), cdiv(cdiv(w[2], spec("MR", 4)), ty), w[0] * w[1]}, Block: [3]int64{tx, ty, 1}, Foldable: true}
	},
	"gemm_fast.loom:pack_a": serial1D("MR", 4),
	"gemm_gpu.loom:gemm_tiled": func(w []int64, spec func(string, int64) int64) launchShape {
		bm, bn := spec("BM", 64), spec("BN", 64)
		return launchShape{Grid: [3]int64{cdiv(w[3], bn), cdiv(w[2], bm), w[0] * w[1]}, Block: [3]int64{bn / spec("TN", 4), bm / spec("TM", 4), 1}, Foldable: true}
	},
	"gemm_fast.loom:transpose2d": func(w []int64, spec func(string, int64) int64) launchShape {
		return launchShape{Grid: [3]int64{cdiv(w[1], spec("TILE", 64)), w[0], 1}, Block: [3]int64{1, 1, 1}, Foldable: true}
	},
	"linalg.loom:pool2d": func(w []int64, spec func(string, int64) int64) launchShape {
		b := spec("BLOCK", 64)
		return launchShape{Grid: [3]int64{cdiv(w[1]*w[2], b), w[0], 1}, Block: [3]int64{b, 1, 1}, Foldable: true}
	},
	"linalg.loom:pool2d_window": func(w []int64, spec func(string, int64) int64) launchShape {
		b, rows := spec("BLOCK", 64), spec("ROWS", 1)
		return launchShape{Grid: [3]int64{cdiv(w[2], b), cdiv(w[1], rows), w[0]}, Block: [3]int64{b, rows, 1}, Foldable: true}
	},
	"linalg.loom:pool2d_rows": serial1D("CH", 1),
	"linalg.loom:pool2d_pad": func(w []int64, _ func(string, int64) int64) launchShape {
		return launchShape{Grid: [3]int64{cdiv(w[0], max(w[3], 1)), 1, 1}, Block: [3]int64{1, 1, 1}}
	},
	"linalg.loom:softmax":        flat1D(64),
	"movement.loom:strided_copy": tiled6D,
	"movement.loom:where":        tiled6D,
	"movement.loom:pad":          tiled6D,
	"movement.loom:gather": func(w []int64, spec func(string, int64) int64) launchShape {
		bx, by := spec("BX", 256), spec("BY", 1)
		return launchShape{Grid: [3]int64{cdiv(w[2], bx) * cdiv(w[1], by) * w[0], 1, 1}, Block: [3]int64{bx, by, 1}}
	},
	"movement.loom:cast":           flat1D(256),
	"movement.loom:cast_to_bool":   flat1D(256),
	"movement.loom:cast_from_bool": flat1D(256),
	"norm.loom:norm_rows":          flat1D(16),
	"norm.loom:batch_norm": func(w []int64, spec func(string, int64) int64) launchShape {
		bx, by := spec("BX", 256), spec("BY", 1)
		return launchShape{Grid: [3]int64{cdiv(w[1], bx) * cdiv(w[0], by), 1, 1}, Block: [3]int64{bx, by, 1}}
	},
	"norm.loom:activation":    flat1D(256),
	"norm.loom:compare":       tiled6D,
	"norm.loom:clip":          flat1D(256),
	"reduce.loom:reduce_rows": flat1D(64),
	"reduce.loom:reduce_inner": func(w []int64, spec func(string, int64) int64) launchShape {
		b := spec("BLOCK", 8)
		return launchShape{Grid: [3]int64{cdiv(w[2], b*spec("VL", 16)) * w[1] * w[0], 1, 1}, Block: [3]int64{b, 1, 1}}
	},
	"reduce.loom:arg_reduce":     flat1D(64),
	"resize.loom:resize_table":   flat1D(64),
	"resize.loom:resize_nearest": rowsGrid(256),
	"resize.loom:resize_linear":  rowsGrid(256),
	"rnn.loom:rows":              rowsGrid(64),
	"rnn.loom:rnn_bias": func(w []int64, spec func(string, int64) int64) launchShape {
		b := spec("BLOCK", 64)
		return launchShape{Grid: [3]int64{cdiv(w[0], b), w[1], 1}, Block: [3]int64{b, 1, 1}}
	},
	"rnn.loom:rnn_step": func(w []int64, spec func(string, int64) int64) launchShape {
		return launchShape{Grid: [3]int64{cdiv(w[0], spec("UB", 16)), w[1], w[2]}, Block: [3]int64{1, 1, 1}, Foldable: true}
	},
	"quant.loom:mnb_prep": func(w []int64, spec func(string, int64) int64) launchShape {
		return launchShape{Grid: [3]int64{w[0], 1, 1}, Block: [3]int64{1, 1, 1}}
	},
	"quant.loom:matmul_nbits": func(w []int64, spec func(string, int64) int64) launchShape {
		return launchShape{Grid: [3]int64{cdiv(w[1], spec("NC", 4)) * cdiv(w[0], spec("MR", 1)), 1, 1}, Block: [3]int64{1, 1, 1}}
	},
	"gqa.loom:gqa_kv": func(w []int64, spec func(string, int64) int64) launchShape {
		return launchShape{Grid: [3]int64{cdiv(w[0], spec("BLOCK", 64)), w[1], w[2]}, Block: [3]int64{spec("BLOCK", 64), 1, 1}}
	},
	"gqa.loom:gqa_attn": func(w []int64, spec func(string, int64) int64) launchShape {
		return launchShape{Grid: [3]int64{cdiv(w[0], spec("BLOCK", 1)), w[1], w[2]}, Block: [3]int64{spec("BLOCK", 1), 1, 1}}
	},
	"quant.loom:gather_bq": func(w []int64, spec func(string, int64) int64) launchShape {
		bx := spec("BX", 64)
		return launchShape{Grid: [3]int64{cdiv(w[1], bx) * w[0], 1, 1}, Block: [3]int64{bx, 1, 1}}
	},
}

// specOf reads a call's specialization constant name (an integer or a bool), def when unset.
func (c KernelCall) specOf(name string, def int64) int64 {
	v, ok := c.Config[name]
	if !ok {
		return def
	}
	switch v {
	case "true":
		return 1
	case "false":
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return def
	}
	return n
}

// geometry is the call's launch geometry as kernelGeometry computes it (FOLD applied), and
// false for a kernel kernelGeometry does not know.
func Geometry(c KernelCall) (launchShape, bool) {
	f, ok := KernelGeometry[c.File+":"+c.Symbol]
	if !ok {
		return launchShape{}, false
	}
	w := make([]int64, len(c.Workload))
	for i, b := range c.Workload {
		w[i] = int64(b)
	}
	s := f(w, c.specOf)
	if s.Foldable && c.specOf("FOLD", 0) != 0 {
		s.Grid = [3]int64{s.Grid[0] * s.Grid[1] * s.Grid[2], 1, 1}
	}
	return s, true
}

// checkGeometry reports why the launch shape s exceeds limits, or "".
func checkGeometry(s launchShape, limits loom.Limits) string {
	threads := int64(1)
	for d := range 3 {
		if s.Block[d] < 1 || (limits.MaxBlockDim[d] != 0 && s.Block[d] > int64(limits.MaxBlockDim[d])) {
			return fmt.Sprintf("block %v: block[%d] = %d is outside 1..%d", s.Block, d, s.Block[d], limits.MaxBlockDim[d])
		}
		threads *= s.Block[d]
		if s.Grid[d] < 0 || (limits.MaxGridDim[d] != 0 && s.Grid[d] > int64(limits.MaxGridDim[d])) {
			return fmt.Sprintf("grid %v: grid[%d] = %d exceeds the limit %d", s.Grid, d, s.Grid[d], limits.MaxGridDim[d])
		}
	}
	if limits.MaxThreadsPerBlock != 0 && threads > int64(limits.MaxThreadsPerBlock) {
		return fmt.Sprintf("block %v: %d threads exceed the limit %d", s.Block, threads, limits.MaxThreadsPerBlock)
	}
	return ""
}

// fitCall re-tiles one launch to limits: a grid whose y or z exceeds them folds into x (the
// kernel's FOLD). It fails, naming the kernel, when no folding makes the launch fit.
func FitCall(c *KernelCall, limits loom.Limits) error {
	s, ok := Geometry(*c)
	if !ok {
		return nil // not a kernel of the op library's table: the dispatch checks it
	}
	why := checkGeometry(s, limits)
	if why == "" {
		return nil
	}
	overY := limits.MaxGridDim[1] != 0 && s.Grid[1] > int64(limits.MaxGridDim[1])
	overZ := limits.MaxGridDim[2] != 0 && s.Grid[2] > int64(limits.MaxGridDim[2])
	if s.Foldable && (overY || overZ) && c.specOf("FOLD", 0) == 0 {
		folded := *c
		folded.Config = maps.Clone(c.Config)
		if folded.Config == nil {
			folded.Config = map[string]string{}
		}
		folded.Config["FOLD"] = "true"
		fs, _ := Geometry(folded)
		fwhy := checkGeometry(fs, limits)
		if fwhy == "" {
			*c = folded
			return nil
		}
		why = fwhy + " (grid y and z folded into x)"
	}
	return OpErr("kernel %s cannot launch workload %v within the device limits: %s", Describe(*c), c.Workload, why)
}

// fitPlan re-tiles every launch of p to limits (see fitCall).
func FitPlan(p *KernelPlan, limits loom.Limits) error {
	if p == nil {
		return nil
	}
	for i := range p.Calls {
		if err := FitCall(&p.Calls[i], limits); err != nil {
			return err
		}
	}
	return nil
}

// fitted wraps a planner so that its plans keep to kernelLimits (see fitPlan).
func fitted(planner KernelPlanner) KernelPlanner {
	return func(n *graph.Node, opset int64, in []ValueInfo) (*KernelPlan, string, error) {
		p, reason, err := planner(n, opset, in)
		if err != nil || p == nil {
			return p, reason, err
		}
		if err := FitPlan(p, KernelLimits); err != nil {
			return nil, "", err
		}
		return p, reason, nil
	}
}
