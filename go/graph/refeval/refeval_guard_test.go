package refeval

import (
	"testing"

	"github.com/loomrt/loom/go/graph"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ai.onnx's Attention (opset 23+) shares its name with Loom's fused Attention but not its
// inputs or attributes: the reference evaluator (and so constant folding) refuses it.
func TestEvalRefusesONNXAttention(t *testing.T) {
	q := &Value{DType: graph.Float, Dims: []int64{1, 2, 2}, Data: []float64{1, 2, 3, 4}}
	n := graph.NewNode("a", "Attention", []string{"q", "k", "v"}, []string{"y"}, graph.IntAttr("is_causal", 1))
	_, err := Eval(n, 23, []*Value{q, q, q})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `Attention of domain "ai.onnx" is not supported`)
	n.Domain = graph.LoomDomain
	n.Attrs = nil
	_, err = Eval(n, 1, []*Value{q, q, q})
	require.NoError(t, err)
}
