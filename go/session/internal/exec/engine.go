// Package exec is the interpreter of InferenceSession (go/session): the per-run state
// (RunCtx), the op loop over a graph's nodes, the control-flow ops (If, Loop, Scan,
// SequenceMap) with the subgraph cache, the kernel cache with the shipped-kernel lookup and
// the JIT, kernel runs, the per-run ModelSession pool and the run tracing (OpenTelemetry
// spans). Engine is the state of a session they share; go/session owns it, checks the inputs,
// picks the run path and runs compiled run plans, whose host steps run through RunCtx.
package exec

import (
	"sync"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/ep"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Engine is what the interpreter needs of an InferenceSession: the model it runs, its
// weights, opset and placements, the device context, and the caches its runs share (the
// kernel cache, the prepared subgraphs, the idle per-run ModelSessions). It is safe for
// concurrent runs; every run has its own RunCtx.
type Engine struct {
	Model    *graph.Model
	Weights  map[string]tensor.Tensor
	Opset    int64
	Provider ep.Name // the provider actually used
	// InputNames are the graph inputs a Run feeds, in order (initializers excluded).
	InputNames []string
	// Held is the memory of the weights, which outputs must not alias (detachOutputs).
	Held HeldRanges

	// Placements are where every node (subgraphs' too) runs, decided once (internal/ep).
	Placements ep.Placements

	Ctx     *device.ModelContext
	Kernels KernelCache // the Loom kernels the runs use, loaded once
	Bodies  bodyCache   // the prepared If/Loop/Scan subgraphs, by input shape signature

	RunSessions runSessionPool // idle per-run ModelSessions
	Threads     int            // intra-op threads (0: the hardware's)

	Tracing sessionTracing // see inference_trace.go

	// MaxElements bounds the elements of any tensor a run's ops make (the session's
	// graph.Limits.MaxElements); 0 is the default limit.
	MaxElements int64
	// Mem is the session's memory budget (session.WithMemoryBudget), which the runs charge
	// (budget.go); nil: none.
	Mem *device.Budget
	// MaxLoopIterations bounds the iterations of one Loop or Scan node's run
	// (session.WithMaxLoopIterations); 0 is DefaultMaxLoopIterations.
	MaxLoopIterations int64

	// deadAfter holds ops.DeadAfter's lists by graph (the model's and its subgraphs'): it
	// lives and dies with the engine, so that a closed session keeps no graph alive.
	deadAfter sync.Map // *graph.Graph -> [][]string
}

// DeadAfter is ops.DeadAfter(g), computed once per graph of the engine's model (every time
// without an engine).
func (e *Engine) DeadAfter(g *graph.Graph) [][]string {
	if e == nil {
		return ops.DeadAfter(g)
	}
	if v, ok := e.deadAfter.Load(g); ok {
		return v.([][]string)
	}
	v, _ := e.deadAfter.LoadOrStore(g, ops.DeadAfter(g))
	return v.([][]string)
}

// ForgetGraphs drops what the engine caches by graph (Close calls it).
func (e *Engine) ForgetGraphs() { e.deadAfter.Clear() }

// PlanTarget is the shape of the kernels the engine's planners pick: a GPU's for the cuda
// provider (on a GPU, or on the cuda stand-in, which runs the same kernels on the host), the
// host's otherwise.
func (e *Engine) PlanTarget() ops.PlanTarget {
	if e.Provider == ep.CUDA {
		return ops.PlanGPU
	}
	return ops.PlanHost
}
