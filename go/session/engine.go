package session

import (
	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/ep"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// engine is what the interpreter needs of an InferenceSession: the model it runs, its
// weights, opset and placements, the device context, and the caches its runs share (the
// kernel cache, the prepared subgraphs, the idle per-run ModelSessions). It is safe for
// concurrent runs; every run has its own runCtx.
type engine struct {
	model    *graph.Model
	weights  map[string]tensor.Tensor
	opset    int64
	provider ep.Name // the provider actually used
	// inputNames are the graph inputs a Run feeds, in order (initializers excluded).
	inputNames []string
	// held is the memory of the weights, which outputs must not alias (detachOutputs).
	held heldRanges

	// placements are where every node (subgraphs' too) runs, decided once (internal/ep).
	placements ep.Placements

	ctx     *device.ModelContext
	kernels kernelCache // the Loom kernels the runs use, loaded once
	bodies  bodyCache   // the prepared If/Loop/Scan subgraphs, by input shape signature

	runSessions runSessionPool // idle per-run ModelSessions
	threads     int            // intra-op threads (0: the hardware's)

	tracing sessionTracing // see inference_trace.go
}
