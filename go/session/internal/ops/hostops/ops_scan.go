package hostops

import (
	"fmt"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Scan (opset 8 and 9+): the body runs once per slice of the scan inputs along their scan
// axes, threading the state variables; scan outputs are stacked along their axes.

func init() {
	ops.HostOps["Scan"] = func(ops.OpRun, *graph.Node, []tensor.Tensor) ([]tensor.Tensor, error) {
		return nil, fmt.Errorf("Scan runs through controlFlow")
	}
}
