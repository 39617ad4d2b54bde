package arith

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Operators of ONNX opsets 24-26 (ONNX 1.19-1.22): Swish and BitCast. (CumProd is CumSum's
// twin, in ops_reduce.go.)

func init() {
	// Swish-24: x * sigmoid(alpha * x).
	ops.HostOps["Swish"] = unaryOp(func(n *graph.Node) func(float64) float64 {
		a := float64(n.AttrFloat("alpha", 1))
		return func(x float64) float64 { return x / (1 + math.Exp(-a*x)) }
	})
	// BitCast-26: the input's bits as elements of the type `to`, which must have the same
	// width; the shape is kept.
	ops.HostOps["BitCast"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		to := graph.DataType(n.AttrInt("to", 0))
		if !to.Valid() || to == graph.String || x.DType() == graph.String {
			return nil, fmt.Errorf("BitCast from %s to %s: both types must be numeric (to=%d)", x.DType(), to, int64(to))
		}
		if to.BitSize() != x.DType().BitSize() {
			return nil, fmt.Errorf("BitCast from %s (%d bits) to %s (%d bits): the widths must be equal", x.DType(), x.DType().BitSize(), to, to.BitSize())
		}
		raw, ok := ops.RawBytes(x)
		if !ok {
			return nil, fmt.Errorf("BitCast of a %s tensor is not supported", x.DType())
		}
		if _, err := tensor.MakeSlice(to, 0); err != nil {
			return nil, fmt.Errorf("BitCast to %s: %v", to, err)
		}
		out := append([]byte(nil), raw...)
		if w := to.BitSize(); w < 8 { // a sub-byte type: one element per byte, its low bits
			for i := range out {
				out[i] &= byte(1<<w - 1)
			}
		}
		return []tensor.Tensor{tensor.ViewBytes(to, x.Dims(), out)}, nil
	}
}
