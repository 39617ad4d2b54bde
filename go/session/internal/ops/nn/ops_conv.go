package nn

import (
	"fmt"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for the neural-network ops: the reference paths of the Loom-backed ops (for
// the types and shapes their kernels do not cover) and ops without a kernel yet. This file has
// Conv (its arithmetic is ops.ConvHost).

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
		out, err := ops.ConvHost(x, w, b, p)
		return []tensor.Tensor{out}, err
	}
}
