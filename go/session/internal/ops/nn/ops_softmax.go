package nn

import (
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// softmaxHost computes Softmax, LogSoftmax or Hardmax over axis (opset 13) or over the
// flattened trailing axes from axis (before 13).
func softmaxHost(rc ops.OpRun, n *graph.Node, x tensor.Tensor, kind string) (tensor.Tensor, error) {
	r := len(x.Dims())
	ax, err := ops.NormAxis(n.AttrInt("axis", ops.SoftmaxDefaultAxis(rc.OpsetVersion())), r)
	if err != nil {
		return tensor.Tensor{}, err
	}
	var outer, dim, inner int
	if rc.OpsetVersion() < 13 {
		outer, dim, inner = ops.Numel(x.Dims()[:ax]), ops.Numel(x.Dims()[ax:]), 1
	} else {
		outer, dim, inner = ops.Numel(x.Dims()[:ax]), int(x.Dims()[ax]), ops.Numel(x.Dims()[ax+1:])
	}
	v := tensor.Float64s(x)
	out := make([]float64, len(v))
	for o := 0; o < outer; o++ {
		for j := 0; j < inner; j++ {
			at := func(i int) int { return (o*dim+i)*inner + j }
			m, arg := math.Inf(-1), 0
			for i := 0; i < dim; i++ {
				if v[at(i)] > m {
					m, arg = v[at(i)], i
				}
			}
			s := 0.0
			for i := 0; i < dim; i++ {
				s += math.Exp(v[at(i)] - m)
			}
			for i := 0; i < dim; i++ {
				switch kind {
				case "Softmax":
					out[at(i)] = math.Exp(v[at(i)]-m) / s
				case "LogSoftmax":
					out[at(i)] = v[at(i)] - m - math.Log(s)
				default:
					out[at(i)] = ops.B2F(i == arg)
				}
			}
		}
	}
	return tensor.FromFloat64s(x.DType(), x.Dims(), out)
}

func init() {
	for _, k := range []string{"Softmax", "LogSoftmax", "Hardmax"} {
		k := k
		ops.HostOps[k] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
			out, err := softmaxHost(rc, n, in[0], k)
			return []tensor.Tensor{out}, err
		}
	}
}
