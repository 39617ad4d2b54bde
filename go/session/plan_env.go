package session

import (
	"sync"

	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/exec"
)

// planEnv is what the compiled run plans need of an InferenceSession, besides its engine:
// the device copies of the weights, the output memory handed back for reuse, and the inputs
// whose values decide shapes or control flow.
type planEnv struct {
	eng *exec.Engine
	// outputNames are the graph outputs, in order.
	outputNames []string
	// recycled is output memory handed back with Recycle, for later runs' outputs.
	recycled recycledOutputs
	// planWeights are the device copies of the weights the compiled run plans read, shared by
	// all their instances.
	planWeights device.SharedWeights
	// control are the inputs whose values decide shapes or control flow (controlInputs).
	control     map[string]bool
	controlOnce sync.Once
}
