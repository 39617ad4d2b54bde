package infer

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
)

// typesOf spells every value's type in m's main graph.
func typesOf(m *graph.Model) map[string]string {
	out := map[string]string{}
	for name, v := range m.Graph.Values {
		out[name] = v.Type.String() + " / " + v.Inferred.String()
	}
	return out
}

// TestResolvedSignatureInfersAsResolving: a signature that says the model is resolved infers
// the same types as one that has ShapesFor resolve it (the reference models, their symbolic
// dimensions bound to 3 and then 5).
func TestResolvedSignatureInfersAsResolving(t *testing.T) {
	eachReferenceModel(t, func(t *testing.T, m *graph.Model) {
		for _, size := range []int64{3, 5} {
			sig := Signature{Shapes: map[string]graph.Shape{}}
			for _, in := range m.Graph.Inputs {
				if in.Initializer != nil || in.Declared.Kind != graph.KindTensor {
					continue
				}
				s := in.Declared.Shape.Clone()
				for i, d := range s {
					if !d.Known() {
						s[i] = graph.DimOf(size)
					}
				}
				sig.Shapes[in.Name] = s
			}
			require.NoError(t, ShapesFor(m, sig))
			want := typesOf(m)
			sig.Resolved = true
			require.NoError(t, Shapes(m)) // back to the declared shapes, then bound again
			require.NoError(t, ShapesFor(m, sig))
			require.Equal(t, want, typesOf(m), "size %d", size)
		}
	})
}
