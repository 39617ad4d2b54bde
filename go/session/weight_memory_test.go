package session

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// A model file's large weights live outside the Go heap, in memory its model owns until the
// session that loaded it closes (go/graph's weight store). Nothing a run hands out may point
// into that memory: outputs that are weights (a graph output naming an initializer, an
// Identity of one, a Reshape of one) must still read right after the session is closed and
// the collector has run, and runs before the Close give the weights' values.
func TestOutputsOutliveTheSessionsWeights(t *testing.T) {
	rnd := inferRand()
	const k, n = 256, 300 // 300 KiB: the loader copies it out of the file
	w, v := randomF32(rnd, k*n), randomF32(rnd, k*n)
	g := &graph.Graph{Name: "weights_out"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(1, k)))}
	g.Outputs = []*graph.Value{
		graph.Output("w", graph.Type{}), graph.Output("wi", graph.Type{}), graph.Output("vr", graph.Type{}), graph.Output("y", graph.Type{}),
	}
	g.AddInitializer(graph.TensorFromFloat32("w", []int64{k, n}, w))
	g.AddInitializer(graph.TensorFromFloat32("v", []int64{k, n}, v))
	g.AddInitializer(graph.TensorFromInt64("shape", []int64{2}, []int64{n, k}))
	g.Nodes = []*graph.Node{
		graph.NewNode("id", "Identity", []string{"w"}, []string{"wi"}),
		graph.NewNode("rs", "Reshape", []string{"v", "shape"}, []string{"vr"}),
		graph.NewNode("mm", "MatMul", []string{"x", "w"}, []string{"y"}),
	}
	m, err := graph.FromGraph("weights_out", g, map[string]int64{"": 17})
	require.NoError(t, err)
	data, err := m.Marshal()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "weights_out.onnx")
	require.NoError(t, os.WriteFile(path, data, 0o644))

	for _, planned := range []bool{true, false} {
		opts := []LoadOption{WithExecutionProvider(ProviderHost), WithIntraOpThreads(1)}
		if !planned {
			opts = append(opts, WithOption(OptionRunPlan, "0"))
		}
		s, err := Load(path, opts...)
		require.NoError(t, err)
		x := randomF32(rnd, k)
		var outs [][]tensor.Tensor
		for range 3 { // the first run, then planned ones
			o, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{1, k}, x)}})
			require.NoError(t, err)
			outs = append(outs, o)
		}
		require.NoError(t, s.Close())
		for range 3 {
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
		want := make([]float32, n)
		for j := range n {
			var acc float64
			for i := range k {
				acc += float64(x[i]) * float64(w[i*n+j])
			}
			want[j] = float32(acc)
		}
		for r, o := range outs {
			require.Len(t, o, 4)
			assert.Equal(t, w, o[0].Data(), "planned %v run %d: the initializer output", planned, r)
			assert.Equal(t, w, o[1].Data(), "planned %v run %d: its Identity", planned, r)
			assert.Equal(t, v, o[2].Data(), "planned %v run %d: a Reshape of an initializer", planned, r)
			assert.InDeltaSlice(t, want, o[3].Data(), 1e-3, "planned %v run %d: the product", planned, r)
		}
	}
}
