package session

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// classifierPath is a small CNN image classifier with a symbolic batch N (x [N, 3, 32, 32] ->
// y [N, 10]): three padded 3x3 convolutions with Relu, two 2x2 max pools, a global average
// pool and a Gemm with transB, then Softmax; fixed random weights. `loom bench
// go/session/testdata/models/cnn_classifier.onnx --sweep N=1..64` times its new batch sizes
// (docs/performance.md). TestWriteClassifierModel writes it.
const classifierPath = "testdata/models/cnn_classifier.onnx"

// classifierModel builds classifierPath's model from a seeded generator.
func classifierModel(t *testing.T) *graph.Model {
	rnd := rand.New(rand.NewPCG(20261205, 1))
	w := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rnd.Float64()*0.4 - 0.2)
		}
		return v
	}
	g := &graph.Graph{Name: "cnn_classifier"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("N"), graph.DimOf(3), graph.DimOf(32), graph.DimOf(32)}))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("N"), graph.DimOf(10)}))}
	g.AddInitializer(graph.TensorFromFloat32("w1", []int64{16, 3, 3, 3}, w(16*27)))
	g.AddInitializer(graph.TensorFromFloat32("b1", []int64{16}, w(16)))
	g.AddInitializer(graph.TensorFromFloat32("w2", []int64{32, 16, 3, 3}, w(32*16*9)))
	g.AddInitializer(graph.TensorFromFloat32("b2", []int64{32}, w(32)))
	g.AddInitializer(graph.TensorFromFloat32("w3", []int64{64, 32, 3, 3}, w(64*32*9)))
	g.AddInitializer(graph.TensorFromFloat32("b3", []int64{64}, w(64)))
	g.AddInitializer(graph.TensorFromFloat32("wf", []int64{10, 64}, w(640)))
	g.AddInitializer(graph.TensorFromFloat32("bf", []int64{10}, w(10)))
	pads := graph.IntsAttr("pads", 1, 1, 1, 1)
	pool := []*graph.Attribute{graph.IntsAttr("kernel_shape", 2, 2), graph.IntsAttr("strides", 2, 2)}
	g.Nodes = []*graph.Node{
		graph.NewNode("conv1", "Conv", []string{"x", "w1", "b1"}, []string{"c1"}, pads),
		graph.NewNode("relu1", "Relu", []string{"c1"}, []string{"r1"}),
		graph.NewNode("pool1", "MaxPool", []string{"r1"}, []string{"p1"}, pool...),
		graph.NewNode("conv2", "Conv", []string{"p1", "w2", "b2"}, []string{"c2"}, pads),
		graph.NewNode("relu2", "Relu", []string{"c2"}, []string{"r2"}),
		graph.NewNode("pool2", "MaxPool", []string{"r2"}, []string{"p2"}, pool...),
		graph.NewNode("conv3", "Conv", []string{"p2", "w3", "b3"}, []string{"c3"}, pads),
		graph.NewNode("relu3", "Relu", []string{"c3"}, []string{"r3"}),
		graph.NewNode("gap", "GlobalAveragePool", []string{"r3"}, []string{"gp"}),
		graph.NewNode("flatten", "Flatten", []string{"gp"}, []string{"f"}),
		graph.NewNode("fc", "Gemm", []string{"f", "wf", "bf"}, []string{"l"}, graph.IntAttr("transB", 1)),
		graph.NewNode("softmax", "Softmax", []string{"l"}, []string{"y"}, graph.IntAttr("axis", -1)),
	}
	m, err := graph.FromGraph("cnn_classifier", g, map[string]int64{"": 13})
	require.NoError(t, err)
	return m
}

// TestWriteClassifierModel rewrites classifierPath when LOOM_WRITE_TESTDATA=1; otherwise it
// checks that the committed file is what classifierModel builds.
func TestWriteClassifierModel(t *testing.T) {
	requireCommittedModel(t, classifierPath, classifierModel(t))
}

// requireCommittedModel writes m to path when LOOM_WRITE_TESTDATA=1; otherwise it requires
// the committed file at path to be m, byte for byte.
func requireCommittedModel(t *testing.T, path string, m *graph.Model) {
	t.Helper()
	b, err := m.Marshal()
	require.NoError(t, err)
	if os.Getenv("LOOM_WRITE_TESTDATA") == "1" {
		require.NoError(t, os.WriteFile(path, b, 0o644))
		return
	}
	committed, err := os.ReadFile(path)
	require.NoError(t, err, "run with LOOM_WRITE_TESTDATA=1 to write it")
	require.True(t, bytes.Equal(b, committed), "%s is not what the test builds: run with LOOM_WRITE_TESTDATA=1", path)
}

// TestClassifierBatchSweepMatchesInterpreter runs the committed classifier over new batch
// sizes, each first run planned from shapes, against an interpreting session.
func TestClassifierBatchSweepMatchesInterpreter(t *testing.T) {
	planned, interpreted := planPair(t, func(opts ...LoadOption) (*InferenceSession, error) {
		return Load(filepath.FromSlash(classifierPath), opts...)
	})
	rnd := inferRand()
	for _, n := range []int{1, 2, 3, 5, 8, 13, 1 + rnd.IntN(64)} {
		x := randomF32(rnd, n*3*32*32)
		feeds := []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{int64(n), 3, 32, 32}, x)}}
		want, err := interpreted.Run(context.Background(), feeds)
		require.NoError(t, err)
		got, err := planned.Run(context.Background(), feeds)
		require.NoError(t, err)
		require.Equal(t, []int64{int64(n), 10}, got[0].Dims())
		wv, gv := tensor.Float64s(want[0]), tensor.Float64s(got[0])
		for j := range wv {
			require.InDelta(t, wv[j], gv[j], 1e-5, "batch %d element %d", n, j)
		}
	}
	for _, p := range planned.ExecutionPlans() {
		require.True(t, p.Planned, p.Reason)
		require.True(t, p.FromShapes, "batch sizes plan from shapes")
	}
}
