package nn

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions of Loom's fused operators. FusedConv and MatMulAdd are kernel ops
// (kernelops, ops_kernels.go); FusedConvHost is FusedConv's host fallback. So is Attention
// (ops_kernels_attention.go), with LoomAttention as its fallback.

// FusedConvHost is Conv followed by the activation named by the activation attribute (none
// when empty), with its parameters in activation_params (LeakyRelu alpha; HardSigmoid alpha, beta; Clip min, max;
// Swish β), then output_scale·y + output_shift.
func FusedConvHost(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	act := n.AttrString("activation", "")
	params := n.AttrFloats("activation_params")
	param := func(i int, def float64) float64 {
		if i < len(params) {
			return float64(params[i])
		}
		return def
	}
	var f func(float64) float64
	switch act {
	case "": // none: the node carries only an output scale and shift
		f = func(v float64) float64 { return v }
	case "Relu":
		f = func(v float64) float64 { return math.Max(v, 0) }
	case "Sigmoid":
		f = func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	case "Tanh":
		f = math.Tanh
	case "LeakyRelu":
		a := param(0, 0.01)
		f = func(v float64) float64 { return ops.MathSelect(v < 0, a*v, v) }
	case "HardSigmoid":
		a, b := param(0, 0.2), param(1, 0.5)
		f = func(v float64) float64 { return math.Max(0, math.Min(1, a*v+b)) }
	case "Clip":
		lo, hi := param(0, math.Inf(-1)), param(1, math.Inf(1))
		f = func(v float64) float64 { return math.Min(math.Max(v, lo), hi) }
	case "HardSwish":
		f = func(v float64) float64 { return v * math.Max(0, math.Min(1, v/6+0.5)) }
	case "Swish":
		beta := param(0, 1)
		f = func(v float64) float64 { return v / (1 + math.Exp(-beta*v)) }
	default:
		return nil, ops.OpErr("FusedConv: unknown activation %q", act)
	}
	y, err := rc.KernelOp("Conv", n, in)
	if err != nil {
		return nil, err
	}
	out, ok := y[0].Data().([]float32)
	if !ok {
		return nil, ops.OpErr("FusedConv needs float input, got %s", y[0].DType())
	}
	// The convolution's output is this node's own, so the activation may overwrite it.
	scale, shift := n.AttrFloat("output_scale", 1), n.AttrFloat("output_shift", 0)
	for i, v := range out {
		out[i] = scale*float32(f(float64(v))) + shift
	}
	return y, nil
}

// LoomAttention is softmax(Q·Kᵀ·scale ⊕ mask)·V over the last two axes: K is given as Kᵀ when
// k_transposed=1; mask_mode 1 adds the mask, 2 keeps the scores where the boolean mask is
// true and puts mask_fill elsewhere, 3 puts mask_fill where it is true.
func LoomAttention(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	if len(in) < 3 {
		return nil, ops.OpErr("Attention needs Q, K and V, got %d inputs", len(in))
	}
	q, k, v := in[0], in[1], in[2]
	if len(k.Dims()) < 2 {
		return nil, ops.OpErr("Attention: K must have rank 2 or more, got %v", k.Dims())
	}
	if n.AttrInt("k_transposed", 0) == 0 {
		r := len(k.Dims())
		perm := make([]int, r)
		for i := range perm {
			perm[i] = i
		}
		perm[r-1], perm[r-2] = r-2, r-1
		s, idx := ops.TransposeIndex(k.Dims(), perm)
		k = tensor.Take(k, s, idx)
	}
	scores, err := rc.KernelOp("MatMul", n, []tensor.Tensor{q, k})
	if err != nil {
		return nil, err
	}
	s := scores[0]
	if scale := n.AttrFloat("scale", 1); scale != 1 {
		if s, err = scalarOp(rc, "Mul", s, scale); err != nil {
			return nil, err
		}
	}
	mask := ops.Optional(in, 3)
	mode := n.AttrInt("mask_mode", 0)
	if mode != 0 && !mask.IsValid() {
		return nil, ops.OpErr("Attention: mask_mode %d without a mask input", mode)
	}
	switch mode {
	case 0:
	case 1:
		r, err := rc.KernelOp("Add", n, []tensor.Tensor{s, mask})
		if err != nil {
			return nil, err
		}
		s = r[0]
	case 2, 3:
		fill := tensor.MustTensor([]int64{}, []float32{n.AttrFloat("mask_fill", 0)})
		args := []tensor.Tensor{mask, s, fill}
		if mode == 3 {
			args = []tensor.Tensor{mask, fill, s}
		}
		r, err := ops.HostOps["Where"](rc, n, args)
		if err != nil {
			return nil, err
		}
		s = r[0]
	default:
		return nil, ops.OpErr("Attention: unknown mask_mode %d", mode)
	}
	softmax := &graph.Node{Name: n.Name, OpType: "Softmax", Attrs: []*graph.Attribute{graph.IntAttr("axis", -1)}}
	p, err := rc.KernelOp("Softmax", softmax, []tensor.Tensor{s})
	if err != nil {
		return nil, err
	}
	return rc.KernelOp("MatMul", n, []tensor.Tensor{p[0], v})
}

// scalarOp applies the binary op to x and a float32 scalar c.
func scalarOp(rc ops.OpRun, op string, x tensor.Tensor, c float32) (tensor.Tensor, error) {
	if x.DType() != graph.Float {
		return tensor.Tensor{}, fmt.Errorf("%s by a scalar needs float input, got %s", op, x.DType())
	}
	r, err := rc.KernelOp(op, &graph.Node{OpType: op}, []tensor.Tensor{x, tensor.MustTensor([]int64{}, []float32{c})})
	if err != nil {
		return tensor.Tensor{}, err
	}
	return r[0], nil
}
