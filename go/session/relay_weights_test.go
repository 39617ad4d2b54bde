package session

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/tensor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// relaidWeights counts the session's weights held packed alone (tensor.Relaid).
func relaidWeights(s *InferenceSession) int {
	n := 0
	for _, w := range s.eng.Weights {
		if tensor.RelaidOf(w) != nil {
			n++
		}
	}
	return n
}

// relayModel has products of x [m, 256] by weights [256, 1024] that the host packs (rows 4 KiB
// apart): y = x·w1 (MatMul) + (x·w2 + b) (Loom's MatMulAdd after fusion) + x·w3 (Gemm,
// transB 0); z = x·w4 + x·(w4·s), s = mean(x), so that w4 is also read by a Mul; v = x·w5,
// and w5 is a graph output too.
func relayModel(t *testing.T, ws map[string][]float32) *graph.Model {
	g := &graph.Graph{Name: "relay"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("m"), graph.DimOf(256)}))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{}), graph.Output("z", graph.Type{}), graph.Output("v", graph.Type{}), graph.Output("w5", graph.Type{})}
	for _, name := range []string{"w1", "w2", "w3", "w4", "w5"} {
		g.AddInitializer(graph.TensorFromFloat32(name, []int64{256, 1024}, ws[name]))
	}
	g.AddInitializer(graph.TensorFromFloat32("b", []int64{1024}, ws["b"]))
	g.Nodes = []*graph.Node{
		graph.NewNode("mm1", "MatMul", []string{"x", "w1"}, []string{"h1"}),
		graph.NewNode("mm2", "MatMul", []string{"x", "w2"}, []string{"p2"}),
		graph.NewNode("add2", "Add", []string{"p2", "b"}, []string{"h2"}),
		graph.NewNode("gemm3", "Gemm", []string{"x", "w3"}, []string{"h3"}),
		graph.NewNode("sum12", "Add", []string{"h1", "h2"}, []string{"h12"}),
		graph.NewNode("sum", "Add", []string{"h12", "h3"}, []string{"y"}),
		graph.NewNode("mm4", "MatMul", []string{"x", "w4"}, []string{"p4"}),
		graph.NewNode("mean", "ReduceMean", []string{"x"}, []string{"s"}, graph.IntAttr("keepdims", 0)),
		graph.NewNode("scale", "Mul", []string{"w4", "s"}, []string{"w4s"}), // w4 read as stored
		graph.NewNode("mm4s", "MatMul", []string{"x", "w4s"}, []string{"q4"}),
		graph.NewNode("sum4", "Add", []string{"p4", "q4"}, []string{"z"}),
		graph.NewNode("mm5", "MatMul", []string{"x", "w5"}, []string{"v"}),
	}
	m, err := graph.FromGraph("relay", g, map[string]int64{"": 13})
	require.NoError(t, err)
	return m
}

// A session holds a weight that only matrix products read as B once, packed (relayWeights):
// MatMul's, MatMulAdd's and Gemm's (transB 0) weights are relaid, one that a Mul also reads
// or that is a graph output is not (it is packed beside); the outputs match a float64
// reference on fresh random inputs of several heights (a plan each, interpreted first) and
// the session with packing off; a model the session loaded has those initializers' bytes
// dropped, and Graph gives them back exactly; a model the caller made is left as it was; a
// closed session keeps no weight.
func TestRelaidWeightsAreHeldOnce(t *testing.T) {
	rnd := inferRand()
	ws := map[string][]float32{"b": randomF32(rnd, 1024)}
	for _, name := range []string{"w1", "w2", "w3", "w4", "w5"} {
		ws[name] = randomF32(rnd, 256*1024)
	}
	model := relayModel(t, ws)
	data, err := model.Marshal()
	require.NoError(t, err)
	loaded, err := LoadBytes(data, WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer loaded.Close()
	made, err := FromGraph(model, WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer made.Close()
	unpacked, err := LoadBytes(data, WithExecutionProvider(ProviderHost), WithOption(OptionPackWeights, "0"))
	require.NoError(t, err)
	defer unpacked.Close()

	for _, s := range []*InferenceSession{loaded, made} {
		for name, want := range map[string]bool{"w1": true, "w2": true, "w3": true, "w4": false, "w5": false, "b": false} {
			assert.Equal(t, want, tensor.RelaidOf(s.eng.Weights[name]) != nil, "weight %s relaid", name)
		}
	}
	assert.Zero(t, relaidWeights(unpacked))
	for _, name := range []string{"w1", "w2", "w3"} {
		assert.Nil(t, loaded.eng.Model.Graph.Initializers[name].Raw, "a loaded model's relaid initializer %s is dropped", name)
	}
	assert.NotNil(t, loaded.eng.Model.Graph.Initializers["w4"].Raw)

	// x·w in float64, and the sum of its terms' magnitudes.
	mul := func(x []float32, m int, w []float32, scale float64) (out, mag []float64) {
		out, mag = make([]float64, m*1024), make([]float64, m*1024)
		for r := range m {
			for p := range 256 {
				a := float64(x[r*256+p])
				for j := range 1024 {
					v := a * float64(w[p*1024+j]) * scale
					out[r*1024+j] += v
					mag[r*1024+j] += math.Abs(v)
				}
			}
		}
		return out, mag
	}
	for _, m := range []int{1, 7, 64, 7} {
		x := randomF32(rnd, m*256)
		mean := 0.0
		for _, v := range x {
			mean += float64(v)
		}
		mean = float64(float32(mean / float64(len(x))))
		y, ym := make([]float64, m*1024), make([]float64, m*1024)
		for _, name := range []string{"w1", "w2", "w3"} {
			o, mg := mul(x, m, ws[name], 1)
			for i := range y {
				y[i] += o[i]
				ym[i] += mg[i]
			}
		}
		for i := range y {
			y[i] += float64(ws["b"][i%1024])
		}
		z, zm := mul(x, m, ws["w4"], 1+mean)
		v, vm := mul(x, m, ws["w5"], 1)
		feeds := []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{int64(m), 256}, x)}}
		for name, s := range map[string]*InferenceSession{"loaded": loaded, "made": made, "unpacked": unpacked} {
			for run := range 2 { // interpreted (traced), then the plan
				outs, err := s.Run(context.Background(), feeds)
				require.NoError(t, err)
				for i, want := range [][2][]float64{{y, ym}, {z, zm}, {v, vm}} {
					got := outs[i].Data().([]float32)
					require.Equal(t, len(want[0]), len(got), "%s m=%d run %d output %d", name, m, run, i)
					for j := range got {
						// float32 sums of 256 terms err by about 16·ε of the terms' magnitudes.
						require.InDelta(t, want[0][j], float64(got[j]), 1e-5*(1+want[1][j]), "%s m=%d run %d output %d element %d", name, m, run, i, j)
					}
				}
				got5 := outs[3].Data().([]float32)
				require.Len(t, got5, len(ws["w5"]))
				for j := range got5 {
					require.Equal(t, ws["w5"][j], got5[j], "%s m=%d run %d: w5, an output, element %d", name, m, run, j)
				}
			}
		}
	}
	assert.Equal(t, 2, loaded.pe.Derived.Len(), "w4 and w5 packed beside the weights as stored, nothing else")
	assert.Equal(t, 2, made.pe.Derived.Len(), "w4 and w5 packed beside the weights as stored, nothing else")

	// Graph gives the loaded model's bytes back exactly; the caller's model was never changed.
	g := loaded.Graph().Graph
	for _, name := range []string{"w1", "w2", "w3"} {
		got, err := tensor.FromGraphTensor(g.Initializers[name])
		require.NoError(t, err)
		assert.Equal(t, ws[name], got.Data().([]float32), "Graph's %s", name)
		mine, err := tensor.FromGraphTensor(model.Graph.Initializers[name])
		require.NoError(t, err)
		assert.Equal(t, ws[name], mine.Data().([]float32), "the caller's %s", name)
	}
	require.NoError(t, loaded.Close())
	assert.Nil(t, loaded.eng.Weights, "a closed session keeps no weight")

	// An EP context model written by a session that relays carries the weights as stored
	// (embedded in its graph), and the session writing it still holds them packed alone.
	path := filepath.Join(t.TempDir(), "relay_ctx.onnx")
	writer, err := LoadBytes(data, WithExecutionProvider(ProviderHost), WithOption(OptionEPContextEnable, "1"), WithOption(OptionEPContextFilePath, path))
	require.NoError(t, err)
	defer writer.Close()
	assert.Equal(t, 3, relaidWeights(writer))
	assert.Nil(t, writer.eng.Model.Graph.Initializers["w1"].Raw)
	ctx, err := Load(path, WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer ctx.Close()
	x := randomF32(rnd, 3*256)
	feeds := []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{3, 256}, x)}}
	want, err := unpacked.Run(context.Background(), feeds)
	require.NoError(t, err)
	for run := range 2 {
		got, err := ctx.Run(context.Background(), feeds)
		require.NoError(t, err)
		for i := range 3 {
			w, g := want[i].Data().([]float32), got[i].Data().([]float32)
			require.Len(t, g, len(w))
			for j := range g {
				require.InDelta(t, w[j], g[j], 1e-4*(1+math.Abs(float64(w[j]))), "EP context model run %d output %d element %d", run, i, j)
			}
		}
	}
}

// A weight whose panels outgrow it (n not a multiple of the panel width: the last panel
// overlaps its neighbour) is packed in the room its loader left behind it when the session
// loads the model file (graph.Tensor.RawRoom; the panels are checked against the planners' in
// internal/ops/kernelops): the products, short ones reading several panels side by side
// (PS) and tall ones, match a float64 reference on fresh random inputs, and Graph gives the
// weight back exactly.
func TestRelayIntoTheLoadersRoom(t *testing.T) {
	rnd := inferRand()
	const k, n = 300, 1000
	w, bias := randomF32(rnd, k*n), randomF32(rnd, n)
	data, err := weightProductModel(t, w, bias, k, n, false, 2).Marshal()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "room.onnx")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	s, err := Load(path, WithExecutionProvider(ProviderHost), WithIntraOpThreads(2))
	require.NoError(t, err)
	defer s.Close()
	require.NotNil(t, tensor.RelaidOf(s.eng.Weights["w"]), "w is held packed")
	assert.Nil(t, s.eng.Model.Graph.Initializers["w"].Raw, "its bytes as stored are dropped")
	for _, m := range []int{1, 3, 1, 70} {
		x := randomF32(rnd, m*k)
		outs, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{int64(m), k}, x)}})
		require.NoError(t, err)
		got := outs[0].Data().([]float32)
		require.Len(t, got, m*n)
		for r := range m {
			for j := range n {
				want, mag := float64(bias[j]), math.Abs(float64(bias[j]))
				for p := range k {
					want += float64(x[r*k+p]) * float64(w[p*n+j])
					mag += math.Abs(float64(x[r*k+p]) * float64(w[p*n+j]))
				}
				require.InDelta(t, want, float64(got[r*n+j]), 1e-6*(1+mag)*math.Sqrt(k), "m %d, y[%d, %d]", m, r, j)
			}
		}
	}
	back, err := s.Graph().Graph.Initializers["w"].Float32s()
	require.NoError(t, err)
	assert.Equal(t, w, back, "Graph gives the weight back as stored")
}
