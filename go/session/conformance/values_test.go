package conformance

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session"
)

// randomFloats are n fresh values in [-1, 1).
func randomFloats(n int) []float32 {
	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	v := make([]float32, n)
	for i := range v {
		v[i] = rnd.Float32()*2 - 1
	}
	return v
}

func TestCompareValues(t *testing.T) {
	a := session.MustTensor([]int64{3}, randomFloats(3))
	b := session.MustTensor([]int64{2, 2}, randomFloats(4))
	seq := func(ts ...session.Tensor) session.Value {
		v, err := session.SequenceValue(graph.Float, ts...)
		require.NoError(t, err)
		return v
	}
	opt := func(v session.Value) session.Value {
		o, err := session.OptionalValue(v)
		require.NoError(t, err)
		return o
	}
	moved := append([]float32{}, a.Data().([]float32)...)
	moved[1] += 0.5
	a2 := session.MustTensor([]int64{3}, moved)

	assert.Equal(t, "", CompareValues(seq(a, b), seq(a, b), 1e-3, 1e-7))
	assert.Equal(t, "", CompareValues(opt(seq(a)), opt(seq(a)), 1e-3, 1e-7))
	assert.Equal(t, "", CompareValues(session.NoneValue(graph.Float), session.NoneValue(graph.Float), 1e-3, 1e-7))
	assert.Equal(t, "a sequence of 1 tensors, want 2", CompareValues(seq(a), seq(a, b), 1e-3, 1e-7))
	assert.Contains(t, CompareValues(seq(a, a2), seq(a, a), 1e-3, 1e-7), "sequence element 1: 1 of 3 elements differ; element 1")
	assert.Equal(t, "a tensor, want a sequence", CompareValues(session.TensorValue(a), seq(a), 1e-3, 1e-7))
	assert.Equal(t, "none, want a value", CompareValues(session.NoneValue(graph.Float), opt(seq(a)), 1e-3, 1e-7))
	assert.Contains(t, CompareValues(opt(seq(a)), session.NoneValue(graph.Float), 1e-3, 1e-7), "want none")
	assert.Contains(t, CompareValues(opt(session.TensorValue(a2)), opt(session.TensorValue(a)), 1e-3, 1e-7), "optional content: 1 of 3")
	i64, err := session.SequenceValue(graph.Int64)
	require.NoError(t, err)
	assert.Equal(t, "a sequence of float, want int64", CompareValues(seq(), i64, 1e-3, 1e-7))
}

// writeValue serializes v into dir/file.
func writeValue(t *testing.T, dir, file string, v *graph.DataValue) {
	t.Helper()
	b, err := v.Marshal()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, file), b, 0o644))
}

func tensorData(name string, dims []int64, v []float32) *graph.DataValue {
	return &graph.DataValue{Name: name, Kind: graph.KindTensor, Tensor: graph.TensorFromFloat32(name, dims, v)}
}

// TestRunsSequenceAndOptionalTests runs a hand-made test directory whose model takes a sequence
// and returns a sequence and an optional: it passes with the right expected outputs and fails
// naming the sequence element when one expected element is off.
func TestRunsSequenceAndOptionalTests(t *testing.T) {
	floats := graph.UnrankedTensor(graph.Float)
	seqT := graph.Type{Kind: graph.KindSequence, Inner: &floats}
	optT := graph.Type{Kind: graph.KindOptional, Inner: &floats}
	g := &graph.Graph{Name: "seq",
		Inputs:  []*graph.Value{graph.Input("s", seqT), graph.Input("x", floats)},
		Outputs: []*graph.Value{graph.Output("grown", seqT), graph.Output("wrapped", optT)},
		Nodes: []*graph.Node{
			graph.NewNode("push", "SequenceInsert", []string{"s", "x", "front"}, []string{"grown"}),
			graph.NewNode("wrap", "Optional", []string{"x"}, []string{"wrapped"}),
		}}
	g.AddInitializer(graph.TensorFromInt64("front", nil, []int64{0}))
	m, err := graph.FromGraph("seq", g, map[string]int64{"": 18})
	require.NoError(t, err)
	model, err := m.Marshal()
	require.NoError(t, err)

	dir := filepath.Join(t.TempDir(), "test_sequence_made_here")
	set := filepath.Join(dir, "test_data_set_0")
	require.NoError(t, os.MkdirAll(set, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.onnx"), model, 0o644))
	e0, e1, x := randomFloats(2), randomFloats(3), randomFloats(4)
	writeValue(t, set, "input_0.pb", &graph.DataValue{Name: "s", Kind: graph.KindSequence,
		Elems: []*graph.DataValue{tensorData("", []int64{2}, e0), tensorData("", []int64{3}, e1)}})
	writeValue(t, set, "input_1.pb", tensorData("x", []int64{2, 2}, x))
	expect := func(last []float32) {
		writeValue(t, set, "output_0.pb", &graph.DataValue{Name: "grown", Kind: graph.KindSequence,
			Elems: []*graph.DataValue{tensorData("", []int64{2, 2}, x), tensorData("", []int64{2}, e0), tensorData("", []int64{3}, last)}})
		writeValue(t, set, "output_1.pb", &graph.DataValue{Name: "wrapped", Kind: graph.KindOptional,
			Elems: []*graph.DataValue{tensorData("", []int64{2, 2}, x)}})
	}
	expect(e1)
	res := Run([]string{dir}, Options{}, nil)
	require.Len(t, res, 1)
	assert.Equal(t, Pass, res[0].Status, res[0].Message)

	off := append([]float32{}, e1...)
	off[2] += 0.25
	expect(off)
	res = Run([]string{dir}, Options{}, nil)
	require.Len(t, res, 1)
	assert.Equal(t, Fail, res[0].Status)
	assert.Contains(t, res[0].Message, "output 0 (grown): sequence element 2: 1 of 3 elements differ; element 2")
}
