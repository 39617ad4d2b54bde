package graph

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

func f32(shape ...int64) Type { return TensorType(Float, ShapeOf(shape...)) }

// buildModel makes a model from nodes with opset 17 unless given.
func buildModel(t testing.TB, inputs, outputs []*Value, nodes []*Node, inits []*Tensor, opset ...int64) *Model {
	t.Helper()
	g := &Graph{Name: "g", Inputs: inputs, Outputs: outputs, Nodes: nodes}
	for _, in := range inits {
		g.AddInitializer(in)
	}
	v := int64(17)
	if len(opset) > 0 {
		v = opset[0]
	}
	m, err := FromGraph("test", g, map[string]int64{"": v})
	require.NoError(t, err)
	return m
}

// roundTrip serializes a model and loads it back.
func roundTrip(t testing.TB, m *Model) *Model {
	t.Helper()
	data, err := m.Marshal()
	require.NoError(t, err)
	back, err := LoadBytesWithOptions(data, LoadOptions{Name: m.Name})
	require.NoError(t, err)
	return back
}

func randFloats(r *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = r.Float32()*2 - 1
	}
	return out
}
