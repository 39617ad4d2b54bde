package exec

// The host functions register in package ops from the init functions of their packages, one per
// kind, and this package's init builds the interpreter's runs from the registry
// (inference_run.go): every host package is imported here, whether or not this package calls
// into it, so that Go initializes all of them before this package (kernelops imports only those
// whose functions its planners call). The kernel planners register the same way: kernelops
// (imported for its functions too) and mskernels, the planners of the com.microsoft contrib
// ops, which nothing calls directly.
import (
	_ "github.com/loomrt/loom/go/session/internal/ops/arith"
	_ "github.com/loomrt/loom/go/session/internal/ops/movement"
	_ "github.com/loomrt/loom/go/session/internal/ops/mskernels"
	_ "github.com/loomrt/loom/go/session/internal/ops/nn"
)
