package kernelops

import (
	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
)

// The shape-generic pooling: pool2d_window and pool2d_rows (linalg.loom) specialize on the
// window, the strides and the tile, so without a C compiler a MaxPool or AveragePool the
// corpus did not record runs as pool2d, which takes all of them at run time and ships for
// every MAX and COUNT_PAD (kernels/aot/manifest.txt).

func init() {
	for op, isMax := range map[string]bool{"MaxPool": true, "AveragePool": false} {
		genericPlanners[op] = func(nd *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
			return poolPlan(nd, in, isMax, false)
		}
	}
}
