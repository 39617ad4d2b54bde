package movement

import (
	"fmt"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Scan (opset 8 and 9+): the body runs once per slice of the scan inputs along their scan
// axes, threading the state variables; scan outputs are stacked along their axes. Scan, If and
// Loop run through the session's control flow; their entries here make the ops known.

func init() {
	ops.HostOps["Scan"] = func(ops.OpRun, *graph.Node, []tensor.Tensor) ([]tensor.Tensor, error) {
		return nil, fmt.Errorf("Scan runs through controlFlow")
	}
	ops.HostOps["If"] = func(ops.OpRun, *graph.Node, []tensor.Tensor) ([]tensor.Tensor, error) { return nil, nil }
	ops.HostOps["Loop"] = ops.HostOps["If"]
}
