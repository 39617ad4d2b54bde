package session

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// TestRunSelected picks outputs by name, in the order named, on both executors: the values are
// Run's, and the runs after the first (a compiled plan's, whose unselected outputs go back to
// the session) still give them.
func TestRunSelected(t *testing.T) {
	rnd := inferRand()
	split := &graph.Node{Name: "split", OpType: "Split", Outputs: []string{"a", "b", "c"}}
	for _, executor := range traceExecutors {
		t.Run(executor, func(t *testing.T) {
			x := tensor.MustTensor([]int64{6}, randomF32(rnd, 6))
			s := singleNodeSession(t, executor, split, 13, []tensor.Tensor{x}, func(v tensor.Tensor) graph.Type {
				return graph.TensorType(v.DType(), graph.ShapeOf(v.Dims()...))
			})
			for run := 0; run < 3; run++ {
				x := tensor.MustTensor([]int64{6}, randomF32(rnd, 6))
				feeds := feedsOf([]tensor.Tensor{x})
				all, err := s.Run(context.Background(), feeds)
				require.NoError(t, err)
				got, err := s.RunSelected(context.Background(), feeds, "c", "a")
				require.NoError(t, err)
				require.Len(t, got, 2)
				want := [][]float32{mustF32(t, all[2]), mustF32(t, all[0])}
				for i := range got {
					assert.Equal(t, want[i], mustF32(t, got[i]), "run %d, output %d", run, i)
				}
				xs := mustF32(t, x)
				assert.Equal(t, xs[4:6], mustF32(t, got[0]), "run %d: c is the input's last third", run)
			}
		})
	}
}

// TestRunSelectedRefusesBadNames: an unknown name, a name given twice and no name are errors
// naming the problem (and the model's outputs), before anything runs.
func TestRunSelectedRefusesBadNames(t *testing.T) {
	split := &graph.Node{Name: "split", OpType: "Split", Outputs: []string{"a", "b", "c"}}
	x := tensor.MustTensor([]int64{6}, randomF32(inferRand(), 6))
	s := singleNodeSession(t, exec.ExecutorPlan, split, 13, []tensor.Tensor{x}, func(v tensor.Tensor) graph.Type {
		return graph.TensorType(v.DType(), graph.ShapeOf(v.Dims()...))
	})
	feeds := feedsOf([]tensor.Tensor{x})
	for _, c := range []struct {
		names []string
		says  string
	}{
		{[]string{"a", "logits"}, `no output named "logits"; the model's outputs are a, b, c`},
		{[]string{"b", "b"}, `output "b" named twice`},
		{nil, "no output named; the model's outputs are a, b, c"},
	} {
		_, err := s.RunSelected(context.Background(), feeds, c.names...)
		require.ErrorIs(t, err, ErrInvalidArgument, "%v", c.names)
		assert.ErrorContains(t, err, c.says)
		assert.ErrorContains(t, err, "RunSelected")
	}
	// The session is unharmed.
	got, err := s.RunSelected(context.Background(), feeds, "b")
	require.NoError(t, err)
	assert.Equal(t, mustF32(t, x)[2:4], mustF32(t, got[0]))
}

func mustF32(t *testing.T, v tensor.Tensor) []float32 {
	t.Helper()
	f, err := TensorOf[float32](v)
	require.NoError(t, err)
	return f
}

// TestIOMetaDims: a symbolic dimension is -1, known ones their size, an unknown rank nil.
func TestIOMetaDims(t *testing.T) {
	m := IOMeta{Name: "x", Ranked: true, Shape: graph.Shape{graph.SymDim("batch"), graph.DimOf(3), graph.UnknownDim()}}
	assert.Equal(t, []int64{-1, 3, -1}, m.Dims())
	assert.Nil(t, IOMeta{Name: "y"}.Dims())
	s, err := Load("testdata/models/tiny_encoder.onnx")
	require.NoError(t, err)
	defer s.Close()
	for _, in := range s.Inputs() {
		dims := in.Dims()
		require.Len(t, dims, len(in.Shape), "input %s", in.Name)
		for i, d := range in.Shape {
			if d.Known() {
				assert.Equal(t, d.Value, dims[i])
			} else {
				assert.Equal(t, int64(-1), dims[i])
			}
		}
	}
}
