package nn

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for the loss operators NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss (ONNX opset 12+). Inputs are (N, C, d1..dk) with integer targets
// (N, d1..dk); the per-class weight is optional and targets equal to ignore_index contribute
// neither loss nor weight.

// nllLoss computes the loss from log-probabilities logp (as float64, in x's layout) and
// returns it in dtype dt with the node's reduction.
func nllLoss(n *graph.Node, dt tensor.DType, shape []int64, logp []float64, target, weight tensor.Tensor) (tensor.Tensor, error) {
	if len(shape) < 2 {
		return tensor.Tensor{}, fmt.Errorf("input must be (N, C, ...), got shape %v", shape)
	}
	nb, c := int(shape[0]), int(shape[1])
	inner := ops.Numel(shape[2:])
	wantT := append([]int64{shape[0]}, shape[2:]...)
	if !ops.SameShape(target.Dims(), wantT) {
		return tensor.Tensor{}, fmt.Errorf("target shape %v does not match input %v (want %v)", target.Dims(), shape, wantT)
	}
	var w []float64
	if weight.IsValid() {
		if len(weight.Dims()) != 1 || int(weight.Dims()[0]) != c {
			return tensor.Tensor{}, fmt.Errorf("weight shape %v, want [%d]", weight.Dims(), c)
		}
		w = tensor.Float64s(weight)
	}
	ignore, hasIgnore := int64(0), n.Attr("ignore_index") != nil
	if hasIgnore {
		ignore = n.AttrInt("ignore_index", 0)
	}
	tv := tensor.Int64s(target)
	loss := make([]float64, len(tv))
	wsum := 0.0
	for b := 0; b < nb; b++ {
		for j := 0; j < inner; j++ {
			i := b*inner + j
			t := tv[i]
			if hasIgnore && t == ignore {
				continue
			}
			if t < 0 || t >= int64(c) {
				return tensor.Tensor{}, fmt.Errorf("target %d at flat index %d is outside [0, %d)", t, i, c)
			}
			wt := 1.0
			if w != nil {
				wt = w[t]
			}
			loss[i] = -logp[(b*c+int(t))*inner+j] * wt
			wsum += wt
		}
	}
	switch red := n.AttrString("reduction", "mean"); red {
	case "none":
		return tensor.FromFloat64s(dt, wantT, loss)
	case "sum", "mean":
		s := 0.0
		for _, v := range loss {
			s += v
		}
		if red == "mean" {
			s /= wsum
		}
		return tensor.FromFloat64s(dt, nil, []float64{s})
	default:
		return tensor.Tensor{}, fmt.Errorf("reduction %q is not one of none, sum, mean", red)
	}
}

func init() {
	ops.HostOps["NegativeLogLikelihoodLoss"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		out, err := nllLoss(n, x.DType(), x.Dims(), tensor.Float64s(x), in[1], ops.Optional(in, 2))
		return []tensor.Tensor{out}, err
	}
	ops.HostOps["SoftmaxCrossEntropyLoss"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		if len(x.Dims()) < 2 {
			return nil, fmt.Errorf("scores must be (N, C, ...), got shape %v", x.Dims())
		}
		nb, c, inner := int(x.Dims()[0]), int(x.Dims()[1]), ops.Numel(x.Dims()[2:])
		v := tensor.Float64s(x)
		logp := make([]float64, len(v))
		for b := 0; b < nb; b++ {
			for j := 0; j < inner; j++ {
				at := func(k int) int { return (b*c+k)*inner + j }
				m := math.Inf(-1)
				for k := 0; k < c; k++ {
					m = math.Max(m, v[at(k)])
				}
				s := 0.0
				for k := 0; k < c; k++ {
					s += math.Exp(v[at(k)] - m)
				}
				ls := math.Log(s)
				for k := 0; k < c; k++ {
					logp[at(k)] = v[at(k)] - m - ls
				}
			}
		}
		out, err := nllLoss(n, x.DType(), x.Dims(), logp, in[1], ops.Optional(in, 2))
		if err != nil {
			return nil, err
		}
		lp, err := tensor.FromFloat64s(x.DType(), x.Dims(), logp)
		return []tensor.Tensor{out, lp}, err
	}
}
