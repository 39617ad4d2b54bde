package session

import (
	"context"
	"strconv"

	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/exec"
)

// The session's side of the background JIT (internal/exec, jit_background.go) and of the plan
// cache's bounds (internal/plan, Cache).

// planArenaShare is the part of the session's memory budget the cached plans' arenas may hold
// together before the least recently used idle plans are evicted to make room for a new
// instance: the rest stays for the runs' own values.
const planArenaShare = 4

// setupJIT applies OptionJIT to the kernel cache and bounds the plans' arenas by the memory
// budget (once, while the session is built).
func (s *InferenceSession) setupJIT() {
	policy, _ := exec.ParseJITPolicy(s.options[OptionJIT]) // checked by WithOption
	if s.options[OptionJIT] == "" {
		policy = exec.JITBackground
	}
	s.eng.Kernels.Policy = policy
	s.eng.Kernels.MaxJITModules, _ = strconv.Atoi(s.options[OptionJITMaxKernels]) // checked; "": 0, the default
	if limit := s.eng.Mem.Limit(); limit != device.Unlimited {
		s.plans.MaxArenaBytes = int64(min(limit/planArenaShare, 1<<62))
	}
}

// waitBackground waits until the background JIT has nothing queued or compiling (tests), or
// ctx is done.
func (s *InferenceSession) waitBackground(ctx context.Context) error {
	return s.eng.Kernels.WaitBackground(ctx)
}
