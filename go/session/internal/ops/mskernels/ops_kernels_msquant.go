package mskernels

import (
	"fmt"
	"strconv"
	"unsafe"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/kernelops"
	"github.com/loomrt/loom/go/session/internal/ops/nn"
)

// The block-quantized contrib operators as Loom kernels (kernels/quant.loom): the packed uint8
// codes, the scales and the zero points are bound as they are stored (no derived constant, no
// float copy of the weights); the kernels dequantize as they read.

const quantFile = "quant.loom"

func init() {
	ops.RegisterKernelOp(graph.MSDomain+":MatMulNBits", PlanMatMulNBits, nn.MatMulNBitsHost)
	ops.RegisterKernelOp(graph.MSDomain+":GatherBlockQuantized", PlanGatherBlockQuantized, nn.GatherBlockQuantizedHost)
}

// operandsOfInfos describes a planner's inputs to the checks of package nn.
func operandsOfInfos(in []ops.ValueInfo) []nn.Operand {
	out := make([]nn.Operand, len(in))
	for i, v := range in {
		if v.Present {
			out[i] = nn.Operand{Present: true, Dtype: v.Dtype, Shape: v.Shape}
		}
	}
	return out
}

// MatMulNBitsTile is the register tile matmul_nbits runs for m rows and n columns: MR rows
// by NC columns a thread (1x4 for a decode step's one row, 2x4 for two or three, 4x2 beyond),
// never larger than the product; ok is false for fewer than 4 columns (the host function
// serves them).
func MatMulNBitsTile(m, n int64) (mr, nc int64, ok bool) {
	switch {
	case n < 4:
		return 0, 0, false
	case m == 1:
		return 1, 4, true
	case m < 4:
		return 2, 4, true
	}
	return 4, 2, true
}

// PlanMatMulNBits plans com.microsoft MatMulNBits (float32 A, scales and bias; 4- or 8-bit
// codes; packed uint8 zero points or none) as mnb_prep (A padded to whole blocks, in the
// order the codes come out of their u32 words) and matmul_nbits (the product, dequantizing
// each weight block as it reads it). B is bound as it is stored, read as u32 words.
func PlanMatMulNBits(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	g, err := nn.CheckMatMulNBits(n, operandsOfInfos(in))
	if err != nil {
		return nil, "", err
	}
	if in[0].Dtype != graph.Float {
		return nil, "host: the matmul_nbits kernel takes float32 A and scales, got " + in[0].Dtype.String(), nil
	}
	if g.FloatZP {
		return nil, "host: the matmul_nbits kernel takes packed uint8 zero points, not float ones", nil
	}
	if g.GIdx {
		return nil, "host: the matmul_nbits kernel reads blocks in K's order; g_idx (act-order) runs on the host", nil
	}
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: g.Out}},
		Reason: fmt.Sprintf("Loom kernel: matmul_nbits (%d-bit codes dequantized in the kernel, blocks of %d)", g.Bits, g.BlockSize)}
	if g.M == 0 {
		return p, "", nil
	}
	mr, nc, ok := MatMulNBitsTile(g.M, g.N)
	if !ok {
		return nil, fmt.Sprintf("host: N = %d is under matmul_nbits' narrowest tile (4 columns)", g.N), nil
	}
	if in[1].Static.IsValid() {
		// The kernel reads the codes as u32 words where they are held (the host backend binds
		// a weight's own memory): a weight cut from an unaligned external-data mapping, say,
		// runs on the host.
		if raw, _ := ops.RawBytes(in[1].Static); len(raw) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%4 != 0 {
			return nil, "host: input B's codes are not 4-byte aligned in memory", nil
		}
	}
	kp := g.KBlocks * g.BlockSize
	p.Scratch = []int64{g.M * kp * 4}
	// VW words of codes a vector (32/bits codes a word): up to 8, a block's words at most.
	vw := min(g.BlockSize*g.Bits/32, 8)
	prep := []uint64{bits64(g.M), bits64(g.K), bits64(kp)}
	zp, bias := ops.InputOperand(1), ops.ScratchOperand(0)
	if g.HasZP {
		zp = ops.InputOperand(3)
	}
	if g.HasBias {
		bias = ops.InputOperand(5)
	}
	args := []uint64{bits64(g.M), bits64(g.N), bits64(g.KBlocks), bits64(g.ZPBytes)}
	p.Calls = []ops.KernelCall{
		{File: quantFile, Symbol: "mnb_prep",
			Config: map[string]string{"BITS": strconv.FormatInt(g.Bits, 10), "VW": strconv.FormatInt(vw, 10)},
			Args:   prep, Workload: prep[:1],
			Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.WriteOf(ops.ScratchOperand(0))}},
		{File: quantFile, Symbol: "matmul_nbits",
			Config: map[string]string{"BITS": strconv.FormatInt(g.Bits, 10), "BS": strconv.FormatInt(g.BlockSize, 10),
				"VW": strconv.FormatInt(vw, 10), "MR": strconv.FormatInt(mr, 10), "NC": strconv.FormatInt(nc, 10),
				"HASZP": strconv.FormatBool(g.HasZP), "BIAS": strconv.FormatBool(g.HasBias)},
			Args: args, Workload: args[:2],
			Bind: []ops.KernelBinding{ops.ReadOf(ops.ScratchOperand(0)), ops.ReadOf(ops.InputOperand(1)), ops.ReadOf(ops.InputOperand(2)),
				ops.ReadOf(zp), ops.ReadOf(bias), ops.WriteOf(ops.OutputOperand(0))}},
	}
	return p, "", nil
}

// PlanGatherBlockQuantized plans com.microsoft GatherBlockQuantized along axis 0 of uint8
// data with float32 scales as gather_bq; other axes and float16 scales run on the host.
func PlanGatherBlockQuantized(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	g, err := nn.CheckGatherBlockQuantized(n, operandsOfInfos(in))
	if err != nil {
		return nil, "", err
	}
	if g.Narrow {
		return nil, "host: gather_bq reads packed uint8 codes, not " + in[0].Dtype.String() + " data", nil
	}
	if g.GatherAxis != 0 {
		return nil, fmt.Sprintf("host: gather_bq gathers along axis 0, not %d", g.GatherAxis), nil
	}
	if g.OutType != graph.Float {
		return nil, "host: gather_bq takes float32 scales, got " + g.OutType.String(), nil
	}
	dim := g.Logical[0]
	if ids, ok := kernelops.StaticInts(in, 1); ok {
		for _, v := range ids {
			if v < -dim || v >= dim {
				return nil, "", ops.OpErr("input indices holds %d, outside [%d, %d)", v, -dim, dim)
			}
		}
	}
	it := "i64"
	if in[1].Dtype == graph.Int32 {
		it = "i32"
	}
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: g.Out}},
		Reason: fmt.Sprintf("Loom kernel: gather_bq (%d-bit codes dequantized in the kernel; indices outside the axis are skipped by the guarded read and flagged)", g.Bits)}
	nidx := int64(ops.Numel(in[1].Shape))
	// Rows of the output: each index selects dim's row, that is inner = cols·(rows/dim) codes;
	// the kernel sees data as [dim, inner] with blocks along inner's last axis, so inner is
	// one row of codes only when data has rank 2.
	if len(g.Logical) != 2 {
		return nil, "host: gather_bq takes rank-2 data", nil
	}
	if nidx == 0 || g.Cols == 0 {
		return p, "", nil
	}
	zp := ops.InputOperand(0)
	if g.HasZP {
		zp = ops.InputOperand(3)
	}
	args := []uint64{bits64(nidx), bits64(g.Cols), bits64(g.Rows), bits64(g.KBlocks), bits64(g.ZPBytes), bits64(g.BlockSize)}
	p.Calls = []ops.KernelCall{{File: quantFile, Symbol: "gather_bq",
		Config: map[string]string{"BITS": strconv.FormatInt(g.Bits, 10), "IT": it, "HASZP": strconv.FormatBool(g.HasZP), "BX": "64"},
		Args:   args, Workload: args[:2],
		Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.ReadOf(ops.InputOperand(1)), ops.ReadOf(ops.InputOperand(2)),
			ops.ReadOf(zp), ops.WriteOf(ops.OutputOperand(0))}}}
	return p, "", nil
}
