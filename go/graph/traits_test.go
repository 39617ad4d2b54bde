package graph_test

import (
	"testing"

	"github.com/loomrt/loom/go/graph"
	"github.com/stretchr/testify/assert"
)

func TestTraits(t *testing.T) {
	assert.True(t, graph.Traits("", "RandomNormal").Nondeterministic)
	assert.True(t, graph.Traits("ai.onnx", "Dropout").Nondeterministic)
	assert.True(t, graph.Traits("", "Reshape").View)
	assert.True(t, graph.Traits("", "Loop").ControlFlow && graph.Traits("", "Loop").TakesValues)
	assert.True(t, graph.Traits("", "Scan").ControlFlow)
	assert.False(t, graph.Traits("", "Scan").TakesValues)
	assert.True(t, graph.Traits("", "Add").InPlace)
	assert.True(t, graph.Traits(graph.LoomDomain, "Gelu").InPlace)
	assert.False(t, graph.Traits(graph.LoomDomain, "Reshape").View, "traits belong to a domain's operator")
	assert.Equal(t, graph.OpTraits{}, graph.Traits("com.example", "RandomNormal"))
	assert.Equal(t, graph.OpTraits{}, graph.Traits("", "MatMul"))
	n := graph.NewNode("r", "Identity", []string{"x"}, []string{"y"})
	assert.Equal(t, graph.Traits("", "Identity"), n.Traits())
}
