package session

import (
	"sync"

	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/exec"
)

// The memory budget and the loop limit of an InferenceSession (docs/reliability.md).

// DefaultMaxLoopIterations is the iterations one run of a Loop, Scan or SequenceMap node may
// take unless WithMaxLoopIterations says otherwise (2^24).
const DefaultMaxLoopIterations = exec.DefaultMaxLoopIterations

// WithMemoryBudget bounds the memory a session's runs hold at once, all runs together, in
// bytes: every tensor a run makes (intermediate values, outputs, Loop's and Scan's
// accumulated outputs, sequences), the compiled plans' arenas, the kernels' buffers on the
// host, and the buffers of device bindings (AllocateDeviceBinding, held until destroyed). Where a size comes from the inputs (ConstantOfShape, Expand, Tile, Range,
// OneHot, Loop, every kernel's outputs, a plan's steps) it is checked before the memory is
// allocated; every other node's outputs are checked as the node returns. A run that would
// exceed it fails with an *Error matching ErrOverBudget that names the node, the tensor, the
// size asked for and what is held already; what the run held is given back, and the session
// stays usable. Outputs leave the budget when Run returns them (they are the caller's). The
// weights are not charged (loading bounds them: WithLimits), nor is device memory of the
// cuda provider (the device bounds it). The default is three quarters of the memory the
// process may use (the smaller of the machine's physical memory and a cgroup's memory
// limit; DefaultMemoryBudget); Unlimited turns the budget off.
func WithMemoryBudget(bytes uint64) LoadOption {
	return func(o *loadOptions) {
		if bytes == 0 {
			o.fail("a memory budget of 0 bytes allows no run; use Unlimited for no budget")
			return
		}
		o.memBudget = bytes
	}
}

// WithMaxLoopIterations bounds the iterations of one run of a Loop, Scan or SequenceMap node
// (default DefaultMaxLoopIterations); a run that would go further fails with an *Error
// matching ErrOverBudget naming the node. Cancelling the run's context also stops a loop,
// between iterations.
func WithMaxLoopIterations(n int64) LoadOption {
	return func(o *loadOptions) {
		if n < 1 {
			o.fail("the loop iteration limit must be at least 1, got %d", n)
			return
		}
		o.maxLoop = n
	}
}

// MemoryBudget returns the session's memory budget and what its runs and plans hold of it now.
func (s *InferenceSession) MemoryBudget() (limit, held uint64) {
	return s.eng.Mem.Limit(), s.eng.Mem.Charged()
}

// DefaultMemoryBudget is the memory budget of a session made without WithMemoryBudget: three
// quarters of the memory this process may use, the smaller of the machine's physical memory
// and the memory limit of its cgroup (a container's), or Unlimited where neither is known.
func DefaultMemoryBudget() uint64 {
	defaultBudgetOnce.Do(func() {
		limit := device.MachineMemoryLimit()
		defaultBudget = device.Unlimited
		if limit > 0 {
			defaultBudget = limit / 4 * 3
		}
	})
	return defaultBudget
}

var (
	defaultBudgetOnce sync.Once
	defaultBudget     uint64
)

// memoryBudget is the budget a session with these options charges its runs to.
func (b *loadOptions) memoryBudget() *device.Budget {
	limit := b.memBudget
	if limit == 0 {
		limit = DefaultMemoryBudget()
	}
	return device.NewBudget(limit, "the session's memory budget (WithMemoryBudget)")
}
