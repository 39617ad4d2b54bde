package nn

import (
	"fmt"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Conv's host function: the reference path of the Loom convolution kernels, for the types and
// shapes they do not cover (its arithmetic is ops.ConvHost, shared with the fused and the
// integer convolutions).

func init() {
	ops.HostOps["Conv"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x, w := in[0], in[1]
		if len(x.Dims()) < 3 {
			return nil, fmt.Errorf("Conv input of rank %d", len(x.Dims()))
		}
		p, err := ops.ConvParamsOf(n, x.Dims(), w.Dims())
		if err != nil {
			return nil, err
		}
		var b tensor.Tensor
		if len(in) > 2 {
			b = in[2]
		}
		out, err := ops.ConvHost(rc, x, w, b, p)
		return []tensor.Tensor{out}, err
	}
}
