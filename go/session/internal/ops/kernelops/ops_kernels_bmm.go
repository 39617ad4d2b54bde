package kernelops

import (
	"strconv"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/infer"
	"github.com/loomrt/loom/go/session/internal/ops"
)

// Batched matrix products as Loom kernels (kernels/bmm.loom): bmm (A·B) and bmm_nt (A·Bᵀ
// with both operands' rows contiguous), which the planners of batched MatMul, Attention, the
// recurrent ops and ConvTranspose share, and planBatchedMatMul, which covers every float32
// MatMul (numpy broadcasting of the batch axes folded into three, 1-D operands).

// bmmBatchAxes is how many batch axes bmm indexes (after folding, see foldBatch).
const bmmBatchAxes = 3

// bmmSpec describes one bmm launch: C[z] = A[z]·B[z] over batch axes dims, A [m, k] with
// strides (as0, as1), B [k, n] with row stride bs0 and contiguous rows, C [m, n] contiguous;
// each operand's batch strides (0 broadcasts) in elements. callNT reads B as [n, k] instead.
type bmmSpec struct {
	m, n, k  int
	dims     [bmmBatchAxes]int
	as0, as1 int
	bs0      int
	aBatch   [bmmBatchAxes]int
	bBatch   [bmmBatchAxes]int
	cBatch   [bmmBatchAxes]int
	a, b, c  ops.Operand
}

// call is the launch. MR (rows per thread) shrinks for short matrices so that a product with
// one or two rows does not compute six.
func (s bmmSpec) call() ops.KernelCall {
	mr, tm := 6, 2
	switch {
	case s.m <= 1:
		mr, tm = 1, 4
	case s.m <= 2:
		mr, tm = 2, 4
	case s.m <= 4:
		mr, tm = 4, 2
	}
	config := map[string]string{"MR": strconv.Itoa(mr), "TM": strconv.Itoa(tm)}
	// One vector of 16 lanes a row, not NV's two, where two outnumber the registers (see nnCost).
	if rpv := ceilDiv(16*4, vectorRegBytes); mr*2*rpv+2*rpv+1 > vectorRegs {
		config["NV"] = "1"
	}
	batch := s.dims[0] * s.dims[1] * s.dims[2]
	args := []uint64{U(s.m), U(s.n), U(batch), U(s.k), U(s.as0), U(s.as1), U(s.bs0), U(s.dims[1]), U(s.dims[2]),
		U(s.aBatch[0]), U(s.aBatch[1]), U(s.aBatch[2]), U(s.bBatch[0]), U(s.bBatch[1]), U(s.bBatch[2]),
		U(s.cBatch[0]), U(s.cBatch[1]), U(s.cBatch[2])}
	return ops.KernelCall{File: "bmm.loom", Symbol: "bmm", Config: config,
		Args: args, Workload: args[:3], Bind: []ops.KernelBinding{ops.ReadOf(s.a), ops.ReadOf(s.b), ops.WriteOf(s.c)}}
}

// callNT is the launch of C = A·Bᵀ (bmm_nt): B is [n, k] with row stride bs0 and contiguous
// rows, as are A's rows (as1 is ignored). MR and NC (columns per thread) adapt to short
// products.
func (s bmmSpec) callNT() ops.KernelCall {
	mr, nc, tm := 4, 4, 2
	switch {
	case s.m <= 1:
		mr, nc, tm = 1, 8, 1
	case s.m <= 2:
		mr, nc, tm = 2, 8, 1
	}
	batch := s.dims[0] * s.dims[1] * s.dims[2]
	args := []uint64{U(s.m), U(s.n), U(batch), U(s.k), U(s.as0), U(s.bs0), U(s.dims[1]), U(s.dims[2]),
		U(s.aBatch[0]), U(s.aBatch[1]), U(s.aBatch[2]), U(s.bBatch[0]), U(s.bBatch[1]), U(s.bBatch[2]),
		U(s.cBatch[0]), U(s.cBatch[1]), U(s.cBatch[2])}
	return ops.KernelCall{File: "bmm.loom", Symbol: "bmm_nt", Config: map[string]string{"MR": strconv.Itoa(mr), "NC": strconv.Itoa(nc), "TM": strconv.Itoa(tm)},
		Args: args, Workload: args[:3], Bind: []ops.KernelBinding{ops.ReadOf(s.a), ops.ReadOf(s.b), ops.WriteOf(s.c)}}
}

// foldBatch merges adjacent batch axes that every operand walks as one (stride of the outer
// axis = stride of the inner one · its size, which includes broadcasting on both), drops
// axes of size 1 and pads the result to bmmBatchAxes leading axes. ok is false when more
// axes remain.
func foldBatch(dims []int, strides ...[]int) (outDims [bmmBatchAxes]int, outStrides [][bmmBatchAxes]int, ok bool) {
	var fd []int
	fs := make([][]int, len(strides))
	for i, d := range dims {
		if d == 1 {
			continue
		}
		if len(fd) > 0 {
			last := len(fd) - 1
			merge := true
			for j, st := range strides {
				if fs[j][last] != st[i]*d {
					merge = false
					break
				}
			}
			if merge {
				fd[last] *= d
				for j, st := range strides {
					fs[j][last] = st[i]
				}
				continue
			}
		}
		fd = append(fd, d)
		for j, st := range strides {
			fs[j] = append(fs[j], st[i])
		}
	}
	if len(fd) > bmmBatchAxes {
		return outDims, nil, false
	}
	pad := bmmBatchAxes - len(fd)
	for i := range outDims {
		outDims[i] = 1
	}
	copy(outDims[pad:], fd)
	outStrides = make([][bmmBatchAxes]int, len(strides))
	for j := range strides {
		copy(outStrides[j][pad:], fs[j])
	}
	return outDims, outStrides, true
}

// batchStrides gives the batch-axis strides of a [batch..., r, c] operand (matrix size r·c
// elements) broadcast to the batch axes out.
func batchStrides(batch []int64, matrix int, out []int64) ([]int, error) {
	st, err := ops.BroadcastStrides(batch, out)
	if err != nil {
		return nil, err
	}
	for i := range st {
		st[i] *= matrix
	}
	return st, nil
}

func toInts(s []int64) []int {
	out := make([]int, len(s))
	for i, d := range s {
		out[i] = int(d)
	}
	return out
}

// planBatchedMatMul plans any float32 MatMul as one bmm launch: batch axes broadcast as
// numpy does (folded into at most three), a 1-D A is a row and a 1-D B a column. It is meant
// to be chained after planMatMul (ops_kernels.go), or to replace it.
func PlanBatchedMatMul(nd *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if len(in) < 2 || !allFloat32(in, 0, 1) {
		return nil, declineType(in), nil
	}
	as, bs := in[0].Shape, in[1].Shape
	d, err := infer.MatMulShapes(as, bs)
	if err != nil {
		return nil, "", ops.OpErr("%v", err)
	}
	m, k, n, batch, out := int(d.M), int(d.K), int(d.N), d.Batch, d.Out
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: out}}, Reason: reasonFloat32 + ", batched, broadcast batch axes"}
	if ops.Numel(out) == 0 {
		return p, "", nil
	}
	ast, err := batchStrides(d.ABatch, m*k, batch)
	if err != nil {
		return nil, "", err
	}
	bst, err := batchStrides(d.BBatch, k*n, batch)
	if err != nil {
		return nil, "", err
	}
	cst := ops.StridesOf(batch)
	for i := range cst {
		cst[i] *= m * n
	}
	dims, st, ok := foldBatch(toInts(batch), ast, bst, cst)
	if !ok {
		return nil, "host: the batch axes do not fold into three", nil
	}
	s := bmmSpec{m: m, n: n, k: k, dims: dims, as0: k, as1: 1, bs0: n, aBatch: st[0], bBatch: st[1], cBatch: st[2],
		a: ops.InputOperand(0), b: ops.InputOperand(1), c: ops.OutputOperand(0)}
	p.Calls = []ops.KernelCall{s.call()}
	return p, "", nil
}
