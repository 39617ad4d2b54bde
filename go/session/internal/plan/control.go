package plan

import (
	"github.com/loomrt/loom/go/graph"
)

// msControlPositions are controlPositions for the com.microsoft ops whose output shapes
// depend on an input's value: GroupQueryAttention's present_key and present_value hold
// max(past buffer, total_sequence_length) positions, so total_sequence_length (input 6)
// specializes the plan, and its kernels (mskernels) are planned for that length. seqlens_k
// (input 5), which only says where each sequence's tokens go, stays a run-time value the
// kernels read and check.
var msControlPositions = map[string][]int{
	"GroupQueryAttention": {6},
}

// controlPositionsOf is the control positions of n (controlPositions, msControlPositions), and
// whether ControlInputs follows n at all: the ai.onnx ops, and the com.microsoft ops listed in
// msControlPositions; the inputs of other domains' nodes are never taken as control values.
func controlPositionsOf(n *graph.Node) ([]int, bool) {
	if onnxDomain(n) {
		return controlPositions[n.OpType], true
	}
	if n.Domain == graph.MSDomain {
		p, ok := msControlPositions[n.OpType]
		return p, ok
	}
	return nil, false
}
