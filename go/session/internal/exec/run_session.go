package exec

import (
	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/ep"
)

// ModelSession internals for compiled run plans (plan.go).

// RunSession opens a ModelSession for an InferenceSession's run or plan: on the host
// provider its stream is inline (each operation runs on the calling thread: a run waits for
// every op anyway, and the hand-off to a stream thread costs more than small kernels).
func (e *Engine) RunSession() (*device.ModelSession, error) {
	opts := native.StreamOptions{MaxThreads: e.Threads}
	if e.Provider == ep.Host {
		opts.Inline = true
	}
	return device.NewSessionWith("Run", e.Ctx, false, opts)
}
