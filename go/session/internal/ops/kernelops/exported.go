package kernelops

import (
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// The helpers this package's planners share with the planners of the packages above it
// (mskernels: the com.microsoft contrib ops), exported here rather than copied there.

// ReasonFloat32 is the reason (KernelPlan.Reason) of a plan whose kernels take float32
// operands; planners append what else they do.
const ReasonFloat32 = reasonFloat32

// HostFallback is the fallback to register with a kernel planner (ops.RegisterKernelOp): the
// host function registered for op in ops.HostOps, looked up when it runs.
func HostFallback(op string) ops.OpFunc { return hostFallback(op) }

// AllFloat32 reports whether the inputs at idx are all given and float32.
func AllFloat32(in []ops.ValueInfo, idx ...int) bool { return allFloat32(in, idx...) }

// DeclineType is a planner's reason for declining inputs whose types its kernels do not take.
func DeclineType(in []ops.ValueInfo) string { return declineType(in) }

// NeedInput reports whether input i is given (an omitted optional input is not).
func NeedInput(in []ops.ValueInfo, i int) bool { return needInput(in, i) }

// StaticInts reads an int32 or int64 input known before the run; ok is false when it is not
// known (or not an integer tensor).
func StaticInts(in []ops.ValueInfo, i int) ([]int64, bool) { return staticInts(in, i) }

// BinaryCall is one launch of elementwise.loom's binary kernel: y = OP(a or y, b) over out,
// with the operands' broadcast strides (acc: the first operand is y; scaled: times scale);
// ok is false when more than six axes remain after merging.
func BinaryCall(code string, out []int64, a, b []int64, acc, scaled bool, scale float32, opA, opB ops.Operand) (ops.KernelCall, bool) {
	return binaryCall(code, out, a, b, acc, scaled, scale, opA, opB)
}

// ActivationCall is one launch of norm.loom's activation kernel with op code (parameters p0
// and p1) over count elements, reading input 0 and writing output 0 (rebind Bind to change
// them).
func ActivationCall(code string, p0, p1 float32, count int) ops.KernelCall {
	return activationCall(code, p0, p1, count)
}

// ReduceFormOf merges the axes of shape into the reduce kernels' form [K0, R0, K1, R1, K2],
// reduced over R0 and R1; ok is false when the reduced axes form more than two runs.
func ReduceFormOf(shape []int64, reduced []bool) ([5]int64, bool) {
	f, ok := reduceFormOf(shape, reduced)
	return [5]int64(f), ok
}

// BMMSpec describes one launch of bmm.loom's batched products: C[z] = A[z]·B[z] over the batch
// axes Dims (after FoldBatch), A [M, K] with strides (AS0, AS1), B [K, N] with row stride BS0
// and contiguous rows, C [M, N] contiguous; each operand's batch strides (0 broadcasts) in
// elements. CallNT reads B as [N, K] (row stride BS0) and A's rows as contiguous.
type BMMSpec struct {
	M, N, K                int
	Dims                   [bmmBatchAxes]int
	AS0, AS1, BS0          int
	ABatch, BBatch, CBatch [bmmBatchAxes]int
	A, B, C                ops.Operand
}

func (s BMMSpec) spec() bmmSpec {
	return bmmSpec{m: s.M, n: s.N, k: s.K, dims: s.Dims, as0: s.AS0, as1: s.AS1, bs0: s.BS0,
		aBatch: s.ABatch, bBatch: s.BBatch, cBatch: s.CBatch, a: s.A, b: s.B, c: s.C}
}

// Call is the launch of C = A·B (bmm), its tile sized to the product.
func (s BMMSpec) Call() ops.KernelCall { return s.spec().call() }

// CallNT is the launch of C = A·Bᵀ (bmm_nt), its tile sized to the product.
func (s BMMSpec) CallNT() ops.KernelCall { return s.spec().callNT() }

// FoldBatch merges adjacent batch axes that every operand walks as one (their strides given
// per operand), drops axes of size 1 and pads the result to the three batch axes bmm indexes;
// ok is false when more axes remain.
func FoldBatch(dims []int, strides ...[]int) ([bmmBatchAxes]int, [][bmmBatchAxes]int, bool) {
	return foldBatch(dims, strides...)
}

// StridedCopyCall is one launch of movement.loom's strided_copy: over the axes of sizes n
// (outermost first), dst[yoff + Σ i·ys] = src[xoff + Σ i·xs] (element strides and offsets) for
// elements of type dt; ok is false for a type the movement kernels do not copy, or when more
// than six axes remain after merging.
func StridedCopyCall(dt tensor.DType, n, xs, ys []int64, xoff, yoff int64, src, dst ops.Operand) (ops.KernelCall, bool) {
	width, ok := widthType(dt)
	if !ok || len(xs) != len(n) || len(ys) != len(n) {
		return ops.KernelCall{}, false
	}
	axes := make([]copyAxis, len(n))
	for k := range n {
		axes[k] = copyAxis{n: n[k], xs: xs[k], ys: ys[k]}
	}
	return stridedCopyCall(width, axes, xoff, yoff, src, dst)
}
