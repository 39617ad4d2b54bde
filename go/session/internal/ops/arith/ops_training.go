package arith

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for the optimizer steps of ai.onnx.preview.training: Adagrad, Adam and
// Momentum. Each takes R (the learning rate, a scalar), T (the update count, a scalar) and then
// k groups of equally many tensors (X..., G..., and the optimizer's state: H for Adagrad, V
// and H for Adam, V for Momentum), and returns the new X... and the new state, in float64
// rounded to each tensor's type. A tensor and its gradient and state must have one shape.

const trainingDomain = "ai.onnx.preview.training"

func init() {
	ops.HostOps[trainingDomain+":Adagrad"] = optimizerOp(3, func(n *graph.Node) (optimizerStep, error) {
		norm, decay, eps := attr64(n, "norm_coefficient", 0), attr64(n, "decay_factor", 0), attr64(n, "epsilon", 1e-6)
		return func(r, t float64, x, g float64, state []float64) float64 {
			rate := r / (1 + t*decay)
			gr := norm*x + g
			state[0] += gr * gr
			return x - rate*gr/(math.Sqrt(state[0])+eps)
		}, nil
	})
	ops.HostOps[trainingDomain+":Adam"] = optimizerOp(4, func(n *graph.Node) (optimizerStep, error) {
		alpha, beta := attr64(n, "alpha", 0.9), attr64(n, "beta", 0.999)
		norm, post, eps := attr64(n, "norm_coefficient", 0), attr64(n, "norm_coefficient_post", 0), attr64(n, "epsilon", 1e-6)
		return func(r, t float64, x, g float64, state []float64) float64 {
			gr := norm*x + g
			state[0] = alpha*state[0] + (1-alpha)*gr
			state[1] = beta*state[1] + (1-beta)*gr*gr
			rate := r
			if t > 0 {
				rate = r * math.Sqrt(1-math.Pow(beta, t)) / (1 - math.Pow(alpha, t))
			}
			return (1 - post) * (x - rate*state[0]/(math.Sqrt(state[1])+eps))
		}, nil
	})
	ops.HostOps[trainingDomain+":Momentum"] = optimizerOp(3, func(n *graph.Node) (optimizerStep, error) {
		for _, name := range []string{"alpha", "beta", "norm_coefficient", "mode"} {
			if n.Attr(name) == nil {
				return nil, fmt.Errorf("the required attribute %s is missing", name)
			}
		}
		alpha, beta, norm := attr64(n, "alpha", 0), attr64(n, "beta", 0), attr64(n, "norm_coefficient", 0)
		mode := n.AttrString("mode", "")
		if mode != "standard" && mode != "nesterov" {
			return nil, fmt.Errorf("mode %q is not \"standard\" or \"nesterov\"", mode)
		}
		return func(r, t float64, x, g float64, state []float64) float64 {
			gr := norm*x + g
			b := beta
			if t <= 0 {
				b = 1
			}
			state[0] = alpha*state[0] + b*gr
			if mode == "nesterov" {
				return x - r*(gr+alpha*state[0])
			}
			return x - r*state[0]
		}, nil
	})
}

// optimizerStep updates one element: the new x from r, t, x and its gradient g, updating the
// element's state in place (as many values as the optimizer keeps).
type optimizerStep func(r, t float64, x, g float64, state []float64) float64

func attr64(n *graph.Node, name string, def float32) float64 { return float64(n.AttrFloat(name, def)) }

// optimizerOp runs an optimizer whose inputs after R and T come in groups tensors per
// optimized tensor (X, G, then groups-2 state tensors), with outputs X_new... then each state
// tensor's new value.
func optimizerOp(groups int, build func(n *graph.Node) (optimizerStep, error)) ops.OpFunc {
	return func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		step, err := build(n)
		if err != nil {
			return nil, err
		}
		if len(in) < 2+groups || (len(in)-2)%groups != 0 {
			return nil, fmt.Errorf("%d inputs; want R, T and %d tensors per optimized tensor (X, G and the state)", len(in), groups)
		}
		scalar := func(i int, what string) (float64, error) {
			if !in[i].IsValid() || in[i].Len() != 1 || in[i].DType() == graph.String {
				return 0, fmt.Errorf("%s (input %d) must be a numeric scalar, got %s", what, i, in[i])
			}
			return tensor.Float64s(in[i])[0], nil
		}
		r, err := scalar(0, "the learning rate R")
		if err != nil {
			return nil, err
		}
		t, err := scalar(1, "the update count T")
		if err != nil {
			return nil, err
		}
		k := (len(in) - 2) / groups
		outs := make([]tensor.Tensor, len(in)-2)
		for j := range k {
			x := in[2+j]
			vals := make([][]float64, groups)
			for gi := range groups {
				v := in[2+gi*k+j]
				if !v.IsValid() || !ops.SameShape(v.Dims(), x.Dims()) || !v.DType().IsFloat() {
					return nil, fmt.Errorf("input %d is %s; want a float tensor of X's shape %v (input %d)", 2+gi*k+j, v, x.Dims(), 2+j)
				}
				vals[gi] = tensor.Float64s(v)
			}
			state := make([]float64, groups-2)
			for e := range vals[0] {
				for s := range state {
					state[s] = vals[2+s][e]
				}
				vals[0][e] = step(r, t, vals[0][e], vals[1][e], state)
				for s := range state {
					vals[2+s][e] = state[s]
				}
			}
			for gi := range groups {
				if gi == 1 {
					continue // the gradient is not an output
				}
				o := gi
				if gi > 1 {
					o = gi - 1
				}
				res, err := tensor.FromFloat64s(in[2+gi*k+j].DType(), x.Dims(), vals[gi])
				if err != nil {
					return nil, err
				}
				outs[o*k+j] = res
			}
		}
		// Outputs: X_new for every tensor, then each state's new values.
		return outs[:k*(groups-1)], nil
	}
}
