package infer

import (
	"math/rand"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
)

// exercise runs everything that takes untrusted input on data; it must return errors, never
// panic, and never report an internal error.
func exercise(t testing.TB, data []byte) {
	m, err := graph.LoadBytesWithOptions(data, graph.LoadOptions{Name: "fuzz"})
	if err != nil {
		return
	}
	defer m.Close()
	_ = m.Check()
	if err := Shapes(m); err != nil && strings.Contains(err.Error(), "internal error") {
		t.Fatalf("inference panicked: %v", err)
	}
	if out, err := m.Marshal(); err == nil {
		m2, err := graph.LoadBytes(out)
		if err == nil {
			m2.Close()
		}
	}
}

// seedModels are small models built here (no third-party data) covering subgraphs, shape
// arithmetic and convolutions; the committed corpus under testdata/fuzz holds their bytes.
func seedModels(t testing.TB) [][]byte {
	var out [][]byte
	add := func(m *graph.Model) {
		data, err := m.Marshal()
		require.NoError(t, err)
		out = append(out, data)
	}
	add(buildModel(t, []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("N"), graph.DimOf(3)}))}, []*graph.Value{graph.Output("y", graph.Type{})},
		[]*graph.Node{graph.NewNode("r", "Relu", []string{"x"}, []string{"y"})}, nil))
	add(buildModel(t, []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("N"), graph.DimOf(3), graph.DimOf(8), graph.DimOf(8)}))}, []*graph.Value{graph.Output("y", graph.Type{})},
		[]*graph.Node{
			graph.NewNode("c", "Conv", []string{"x", "w"}, []string{"c"}, graph.IntsAttr("pads", 1, 1, 1, 1), graph.IntsAttr("strides", 2, 2)),
			graph.NewNode("s", "Shape", []string{"c"}, []string{"s"}),
			graph.NewNode("g", "Gather", []string{"s", "i0"}, []string{"g"}),
			graph.NewNode("u", "Unsqueeze", []string{"g", "ax"}, []string{"u"}),
			graph.NewNode("cat", "Concat", []string{"u", "m1"}, []string{"shape"}, graph.IntAttr("axis", 0)),
			graph.NewNode("rs", "Reshape", []string{"c", "shape"}, []string{"y"}),
		}, []*graph.Tensor{
			graph.TensorFromFloat32("w", []int64{4, 3, 3, 3}, make([]float32, 108)),
			graph.TensorFromInt64("i0", nil, []int64{0}), graph.TensorFromInt64("ax", []int64{1}, []int64{0}),
			graph.TensorFromInt64("m1", []int64{1}, []int64{-1}),
		}))
	then := &graph.Graph{Name: "then", Outputs: []*graph.Value{graph.Output("t", graph.Type{})}, Nodes: []*graph.Node{graph.NewNode("n", "Neg", []string{"x"}, []string{"t"})}}
	els := &graph.Graph{Name: "else", Outputs: []*graph.Value{graph.Output("e", graph.Type{})}, Nodes: []*graph.Node{graph.NewNode("a", "Abs", []string{"x"}, []string{"e"})}}
	add(buildModel(t, []*graph.Value{graph.Input("x", f32(2, 2)), graph.Input("c", graph.TensorType(graph.Bool, graph.Shape{}))}, []*graph.Value{graph.Output("y", graph.Type{})},
		[]*graph.Node{graph.NewNode("if", "If", []string{"c"}, []string{"y"}, &graph.Attribute{Name: "then_branch", Type: graph.AttrGraph, Graph: then}, &graph.Attribute{Name: "else_branch", Type: graph.AttrGraph, Graph: els})}, nil))
	body := &graph.Graph{Name: "body", Inputs: []*graph.Value{graph.Input("i", graph.TensorType(graph.Int64, graph.Shape{})), graph.Input("cin", graph.TensorType(graph.Bool, graph.Shape{})), graph.Input("acc", graph.Type{})},
		Outputs: []*graph.Value{graph.Output("cout", graph.Type{}), graph.Output("acc2", graph.Type{}), graph.Output("scan", graph.Type{})},
		Nodes: []*graph.Node{graph.NewNode("id", "Identity", []string{"cin"}, []string{"cout"}), graph.NewNode("add", "Add", []string{"acc", "x"}, []string{"acc2"}),
			graph.NewNode("id2", "Identity", []string{"acc2"}, []string{"scan"})}}
	add(buildModel(t, []*graph.Value{graph.Input("x", f32(3)), graph.Input("m", graph.TensorType(graph.Int64, graph.Shape{})), graph.Input("c", graph.TensorType(graph.Bool, graph.Shape{}))},
		[]*graph.Value{graph.Output("final", graph.Type{}), graph.Output("scans", graph.Type{})},
		[]*graph.Node{graph.NewNode("loop", "Loop", []string{"m", "c", "x"}, []string{"final", "scans"}, &graph.Attribute{Name: "body", Type: graph.AttrGraph, Graph: body})}, nil))
	return out
}

func FuzzLoadBytes(f *testing.F) {
	for _, s := range seedModels(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		exercise(t, data)
	})
}

// FuzzMutateModel applies byte-driven structural mutations (attribute values, dims, names,
// op types, opsets) to a valid seed model so that the fuzzer reaches checking and inference
// rather than stopping at protobuf decoding.
func FuzzMutateModel(f *testing.F) {
	seeds := seedModels(f)
	f.Add(uint8(0), []byte{0, 1, 2, 3})
	f.Add(uint8(1), []byte{1, 200, 3, 7, 4, 0xff})
	f.Add(uint8(2), []byte{5, 9, 2, 1})
	f.Add(uint8(3), []byte{6, 1, 0, 3, 3, 3})
	f.Fuzz(func(t *testing.T, seed uint8, script []byte) {
		m, err := graph.LoadBytes(seeds[int(seed)%len(seeds)])
		require.NoError(t, err)
		mutate(m, script)
		if data, err := m.Marshal(); err == nil {
			exercise(t, data)
		}
		_ = m.Check()
		if err := Shapes(m); err != nil && strings.Contains(err.Error(), "internal error") {
			t.Fatalf("inference panicked: %v", err)
		}
	})
}

var mutationOps = []string{"Reshape", "Slice", "Gather", "Concat", "Conv", "MaxPool", "Split", "Squeeze", "Unsqueeze",
	"Transpose", "Expand", "Tile", "Pad", "Resize", "TopK", "ReduceSum", "Einsum", "Loop", "Scan", "If", "MatMul",
	"Gemm", "Range", "OneHot", "ConstantOfShape", "Flatten", "DepthToSpace", "GatherND", "ConvTranspose", "LSTM", "DFT"}

func mutate(m *graph.Model, script []byte) {
	var graphs []*graph.Graph
	m.Graph.Walk(func(g *graph.Graph) { graphs = append(graphs, g) })
	for i := 0; i+2 < len(script); i += 3 {
		op, a, b := script[i], int(script[i+1]), script[i+2]
		g := graphs[a%len(graphs)]
		if len(g.Nodes) == 0 {
			continue
		}
		n := g.Nodes[a%len(g.Nodes)]
		v := int64(int8(b))
		switch op % 8 {
		case 0: // set an INT attribute
			names := []string{"axis", "group", "keepdims", "transA", "blocksize", "k", "batch_dims", "num_scan_inputs"}
			n.SetAttr(graph.IntAttr(names[int(b)%len(names)], v))
		case 1: // set an INTS attribute
			names := []string{"pads", "strides", "kernel_shape", "perm", "axes", "dilations", "starts", "split"}
			n.SetAttr(graph.IntsAttr(names[int(b)%len(names)], v, v/2, -v, 1))
		case 2: // change an input dimension
			if len(g.Inputs) > 0 {
				in := g.Inputs[a%len(g.Inputs)]
				if in.Declared.Ranked && len(in.Declared.Shape) > 0 {
					in.Declared.Shape[int(b)%len(in.Declared.Shape)] = graph.DimOf(int64(b) * 1000003)
					in.Type = in.Declared.Clone()
				}
			}
		case 3: // change the op type
			n.OpType = mutationOps[int(b)%len(mutationOps)]
		case 4: // rewire an input
			if len(n.Inputs) > 0 && len(g.Inputs) > 0 {
				n.Inputs[int(b)%len(n.Inputs)] = g.Inputs[a%len(g.Inputs)].Name
			}
		case 5: // change the opset
			m.Opsets[""] = int64(b%24) + 1
		case 6: // drop or add an input
			if b%2 == 0 && len(n.Inputs) > 0 {
				n.Inputs = n.Inputs[:len(n.Inputs)-1]
			} else {
				n.Inputs = append(n.Inputs, "")
			}
		case 7: // change an initializer's contents
			for _, name := range g.InitOrder {
				t := g.Initializers[name]
				if t.DType == graph.Int64 && len(t.Raw) >= 8 {
					t.Raw = append([]byte{}, t.Raw...)
					t.Raw[int(b)%len(t.Raw)] ^= byte(a)
				}
			}
		}
	}
}

// TestCorruptedModels feeds truncated and bit-flipped copies of every available model (node
// tests, reference models and the built-in seeds) through loading, checking and inference.
func TestCorruptedModels(t *testing.T) {
	var inputs [][]byte
	inputs = append(inputs, seedModels(t)...)
	if paths, _ := globNodeTests(); len(paths) > 0 {
		for _, p := range paths {
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			inputs = append(inputs, data)
		}
	} else {
		t.Logf("ONNX node tests not installed; corrupting the built-in seeds only")
	}
	for _, p := range referenceModels() {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		if len(data) < 4<<20 {
			inputs = append(inputs, data)
		}
	}
	r := rand.New(rand.NewSource(rand.Int63()))
	variants := 0
	for _, data := range inputs {
		for k := 0; k < 8; k++ {
			exercise(t, data[:r.Intn(len(data)+1)])
			variants++
		}
		for k := 0; k < 16; k++ {
			c := append([]byte{}, data...)
			for f := 0; f <= r.Intn(4); f++ {
				i := r.Intn(len(c))
				c[i] ^= 1 << uint(r.Intn(8))
			}
			exercise(t, c)
			variants++
		}
	}
	t.Logf("%d corrupted variants of %d models handled without panics", variants, len(inputs))
}
