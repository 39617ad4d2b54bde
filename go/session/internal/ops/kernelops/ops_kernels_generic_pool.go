package kernelops

import (
	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
)

// The shape-generic pooling: pool2d_window and pool2d_rows (linalg.loom) specialize on the
// window, the strides and the tile, so without a C compiler a MaxPool or AveragePool the
// corpus did not record runs as pool2d_pad, which takes the window, the padding and the row
// stride at run time and ships for column strides 1 and 2 (kernels/aot/manifest.txt), or as
// pool2d (every window at run time) for other column strides.

func init() {
	for op, isMax := range map[string]bool{"MaxPool": true, "AveragePool": false} {
		genericPlanners[op] = func(nd *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
			return poolPlan(nd, in, isMax, poolGeneric)
		}
	}
}
