package infer

import (
	"testing"

	"github.com/loomrt/loom/go/graph"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Check checks the model as written, then again with the inferred types of the values it
// leaves untyped: an int8 Div's output feeding GlobalAveragePool (floating types only) passes
// graph.Model.Check and fails Check, naming the node, the value and the type.
func TestCheckUsesInferredTypes(t *testing.T) {
	model := func(dtype graph.DataType) *graph.Model {
		x := graph.Input("x", graph.TensorType(dtype, graph.ShapeOf(1, 2, 3)))
		return buildModel(t, []*graph.Value{x}, []*graph.Value{graph.Output("y", graph.Type{})}, []*graph.Node{
			graph.NewNode("div", "Div", []string{"x", "x"}, []string{"q"}),
			graph.NewNode("gap", "GlobalAveragePool", []string{"q"}, []string{"y"}),
		}, nil, 21)
	}
	m := model(graph.Int8)
	require.NoError(t, m.Check())
	err := Check(m)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `with its inferred types`)
	assert.Contains(t, err.Error(), `node "gap" (GlobalAveragePool) value "q": input "X" has type tensor(int8), not allowed for T`)

	require.NoError(t, Check(model(graph.Float)))

	// What the first check finds comes back as it is.
	bad := model(graph.Float)
	bad.Graph.Nodes[1].OpType = "NoSuchOp"
	err = Check(bad)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "inferred")
}
