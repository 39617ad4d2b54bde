package opt

import (
	"testing"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/infer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Silero VAD computes its STFT padding from constants inside If branches; after basic
// optimization folds them, a signature with the sample rate plans every activation.
func TestPlanAfterFoldingSilero(t *testing.T) {
	m := referenceModel(t, "silero_vad_v5.onnx")
	sig := infer.Signature{Shapes: map[string]graph.Shape{"input": graph.ShapeOf(1, 512), "state": graph.ShapeOf(2, 1, 128)},
		Values: map[string]*graph.Tensor{"sr": graph.TensorFromInt64("sr", nil, []int64{16000})}}
	plan := func() *graph.MemoryPlan {
		require.NoError(t, infer.ShapesFor(m, sig))
		p, err := graph.PlanMemory(m, graph.PlanOptions{})
		require.NoError(t, err)
		return p
	}
	before := plan()
	require.NoError(t, Optimize(m, LevelBasic))
	after := plan()
	t.Logf("before folding: %v; after: %v", before, after)
	assert.Empty(t, after.Unplanned)
	for _, o := range m.Graph.Outputs {
		v := m.Graph.Value(o.Name)
		assert.True(t, v.Type.Shape.Static(), "%s: %v", o.Name, v.Type)
	}
}
