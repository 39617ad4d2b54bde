package arith

import (
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

func init() {
	// Before opset 14 (HardSwish), 17 (LayerNormalization) and 20 (Gelu) the optimizer puts
	// these standard operators in Loom's domain; their semantics are ai.onnx's. All are kernel ops
	// (kernelops' ops_kernels_norm.go registers LoomOps for them, with these host functions as
	// fallbacks), so this init must not set LoomOps.
	ops.HostOps["Gelu"] = gelu
}

// gelu is x·Φ(x), exact (erf) or with the tanh approximation (approximate="tanh").
func gelu(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	if !x.DType().IsFloat() {
		return nil, ops.OpErr("Gelu needs a floating-point input, got %s", x.DType())
	}
	var f func(float64) float64
	switch a := n.AttrString("approximate", "none"); a {
	case "none":
		f = func(v float64) float64 { return 0.5 * v * (1 + math.Erf(v/math.Sqrt2)) }
	case "tanh":
		c := math.Sqrt(2 / math.Pi)
		f = func(v float64) float64 { return 0.5 * v * (1 + math.Tanh(c*(v+0.044715*v*v*v))) }
	default:
		return nil, ops.OpErr("Gelu: unknown approximate=%q (want none or tanh)", a)
	}
	return unaryOp(simple(f))(rc, n, in)
}
