package session

// The host functions register in package ops from the init functions of their packages, one per
// kind; the runs built from the registry (inference_run.go) need all of them, so every host
// package is imported here, whether or not this package calls into it (kernelops imports only
// those whose functions its planners call).
import (
	_ "github.com/loomrt/loom/go/session/internal/ops/arith"
	_ "github.com/loomrt/loom/go/session/internal/ops/movement"
	_ "github.com/loomrt/loom/go/session/internal/ops/nn"
)
