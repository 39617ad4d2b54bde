package session_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session"
)

// Models holding the sub-byte and float8 element types of ONNX 1.22 load and check, and the
// session refuses what it cannot run with an error naming the value and its type, not a
// crash.
func TestRecentElementTypesRefused(t *testing.T) {
	for _, dt := range []graph.DataType{graph.Int4, graph.Uint4, graph.Int2, graph.Uint2, graph.Float4E2M1, graph.Float8E8M0, graph.Float8E4M3FN} {
		t.Run(dt.String()+" initializer", func(t *testing.T) {
			raw := make([]byte, dt.ByteSize(4))
			w, err := graph.NewTensor("w", dt, []int64{4}, raw)
			require.NoError(t, err)
			g := &graph.Graph{Name: "g", Inputs: []*graph.Value{graph.Input("s", graph.TensorType(graph.Float, graph.Shape{}))},
				Outputs: []*graph.Value{graph.Output("y", graph.Type{})},
				Nodes:   []*graph.Node{graph.NewNode("dq", "DequantizeLinear", []string{"w", "s"}, []string{"y"})}}
			if dt == graph.Float8E8M0 {
				// An MX scale type, not a quantized one: DequantizeLinear's x refuses it.
				g.Nodes = []*graph.Node{graph.NewNode("id", "Identity", []string{"w"}, []string{"y"})}
			}
			g.AddInitializer(w)
			m, err := graph.FromGraph("m", g, map[string]int64{"": 25})
			require.NoError(t, err)
			require.NoError(t, m.Check())
			data, err := m.Marshal()
			require.NoError(t, err)
			s, err := session.LoadBytes(data)
			if err == nil {
				defer s.Close()
				_, err = s.Run(context.Background(), []session.NamedTensor{{Name: "s", Tensor: session.MustTensor([]int64{}, []float32{1})}})
			}
			require.Error(t, err)
			assert.True(t, errors.Is(err, session.ErrInvalidArgument), "%v", err)
			assert.Contains(t, err.Error(), `"w"`)
			assert.Contains(t, err.Error(), "element type "+dt.String()+" is not supported")
		})
		t.Run(dt.String()+" cast", func(t *testing.T) {
			g := &graph.Graph{Name: "g", Inputs: []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(4)))},
				Outputs: []*graph.Value{graph.Output("y", graph.Type{})},
				Nodes:   []*graph.Node{graph.NewNode("c", "Cast", []string{"x"}, []string{"y"}, graph.IntAttr("to", int64(dt)))}}
			m, err := graph.FromGraph("m", g, map[string]int64{"": 25})
			require.NoError(t, err)
			require.NoError(t, m.Check())
			data, err := m.Marshal()
			require.NoError(t, err)
			s, err := session.LoadBytes(data)
			if err == nil {
				defer s.Close()
				_, err = s.Run(context.Background(), []session.NamedTensor{{Name: "x", Tensor: session.MustTensor([]int64{4}, []float32{1, 2, 3, 4})}})
			}
			require.Error(t, err)
			assert.True(t, errors.Is(err, session.ErrInvalidArgument), "%v", err)
			assert.Contains(t, err.Error(), "(Cast)")
			assert.Contains(t, err.Error(), "element type "+dt.String()+" is not supported")
		})
	}
}
