package graph

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/loomrt/loom/go/graph/internal/modelmem"
	"github.com/loomrt/loom/go/graph/internal/onnxpb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

func TestLoadBytesRejectsGarbage(t *testing.T) {
	_, err := LoadBytes([]byte{0xff, 0xff, 0xff, 0xff})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a valid ONNX ModelProto")
	_, err = LoadBytes(nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no graph")
}

func TestRoundTripNodeTests(t *testing.T) {
	for _, p := range nodeTestModels(t) {
		m, err := Load(p)
		require.NoError(t, err)
		back := roundTrip(t, m)
		require.Equal(t, m.Graph.NodeCount(), back.Graph.NodeCount(), p)
		require.Equal(t, m.Opsets, back.Opsets, p)
		require.Equal(t, len(m.Graph.Initializers), len(back.Graph.Initializers), p)
		for name, init := range m.Graph.Initializers {
			require.Equal(t, init.Raw, back.Graph.Initializers[name].Raw, "%s %s", p, name)
			require.Equal(t, init.Strings, back.Graph.Initializers[name].Strings, "%s %s", p, name)
		}
		for i, n := range m.Graph.Nodes {
			require.Equal(t, n.OpType, back.Graph.Nodes[i].OpType)
			require.Equal(t, n.Inputs, back.Graph.Nodes[i].Inputs)
		}
		m.Close()
	}
}

func TestModelMetadata(t *testing.T) {
	mp := &onnxpb.ModelProto{
		IrVersion: proto.Int64(9), ProducerName: proto.String("prod"), ProducerVersion: proto.String("1.2"),
		Domain: proto.String("org.example"), ModelVersion: proto.Int64(7), DocString: proto.String("doc"),
		OpsetImport:   []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(21)}, {Domain: proto.String("ai.onnx.ml"), Version: proto.Int64(3)}},
		MetadataProps: []*onnxpb.StringStringEntryProto{{Key: proto.String("k"), Value: proto.String("v")}},
		Graph: &onnxpb.GraphProto{Name: proto.String("main"),
			Input:  []*onnxpb.ValueInfoProto{{Name: proto.String("x"), Type: typeProto(TensorType(Float, Shape{SymDim("N"), DimOf(3)}))}},
			Output: []*onnxpb.ValueInfoProto{{Name: proto.String("y")}},
			Node:   []*onnxpb.NodeProto{{OpType: proto.String("Relu"), Input: []string{"x"}, Output: []string{"y"}}}},
	}
	data, err := proto.Marshal(mp)
	require.NoError(t, err)
	m, err := LoadBytes(data)
	require.NoError(t, err)
	assert.Equal(t, int64(9), m.IRVersion)
	assert.Equal(t, "prod", m.ProducerName)
	assert.Equal(t, "1.2", m.ProducerVersion)
	assert.Equal(t, "org.example", m.Domain)
	assert.Equal(t, int64(7), m.ModelVersion)
	assert.Equal(t, "doc", m.Doc)
	assert.Equal(t, map[string]string{"k": "v"}, m.MetadataProps)
	assert.Equal(t, int64(21), m.Opset(""))
	assert.Equal(t, int64(3), m.Opset("ai.onnx.ml"))
	require.NoError(t, m.Check())
}

func TestTensorDecoding(t *testing.T) {
	l := &loader{lim: DefaultLimits(), maps: modelmem.NewMappings("")}
	cases := []struct {
		name string
		tp   *onnxpb.TensorProto
		want []float64
	}{
		{"float", &onnxpb.TensorProto{DataType: proto.Int32(int32(Float)), Dims: []int64{2}, FloatData: []float32{1.5, -2}}, []float64{1.5, -2}},
		{"double", &onnxpb.TensorProto{DataType: proto.Int32(int32(Double)), Dims: []int64{1}, DoubleData: []float64{math.Pi}}, []float64{math.Pi}},
		{"int8", &onnxpb.TensorProto{DataType: proto.Int32(int32(Int8)), Dims: []int64{3}, Int32Data: []int32{-128, 0, 127}}, []float64{-128, 0, 127}},
		{"uint16", &onnxpb.TensorProto{DataType: proto.Int32(int32(Uint16)), Dims: []int64{1}, Int32Data: []int32{65535}}, []float64{65535}},
		{"bool", &onnxpb.TensorProto{DataType: proto.Int32(int32(Bool)), Dims: []int64{2}, Int32Data: []int32{1, 0}}, []float64{1, 0}},
		{"float16", &onnxpb.TensorProto{DataType: proto.Int32(int32(Float16)), Dims: []int64{3}, Int32Data: []int32{0x3c00, 0xc000, 0x3555}}, []float64{1, -2, float64(Float16ToFloat32(0x3555))}},
		{"bfloat16", &onnxpb.TensorProto{DataType: proto.Int32(int32(BFloat16)), Dims: []int64{1}, Int32Data: []int32{0x3fc0}}, []float64{1.5}},
		{"uint32", &onnxpb.TensorProto{DataType: proto.Int32(int32(Uint32)), Dims: []int64{1}, Uint64Data: []uint64{4000000000}}, []float64{4000000000}},
		{"int64", &onnxpb.TensorProto{DataType: proto.Int32(int32(Int64)), Dims: []int64{2}, Int64Data: []int64{-5, 1 << 40}}, []float64{-5, 1 << 40}},
		{"int4 packed", &onnxpb.TensorProto{DataType: proto.Int32(int32(Int4)), Dims: []int64{3}, Int32Data: []int32{0x7F, 0x08}}, []float64{-1, 7, -8}},
		{"uint4 raw", &onnxpb.TensorProto{DataType: proto.Int32(int32(Uint4)), Dims: []int64{2}, RawData: []byte{0x3A}}, []float64{10, 3}},
		{"float8e4m3fn", &onnxpb.TensorProto{DataType: proto.Int32(int32(Float8E4M3FN)), Dims: []int64{2}, Int32Data: []int32{0x38, 0xC0}}, []float64{1, -2}},
		{"float8e5m2", &onnxpb.TensorProto{DataType: proto.Int32(int32(Float8E5M2)), Dims: []int64{1}, RawData: []byte{0x3C}}, []float64{1}},
		{"raw float", &onnxpb.TensorProto{DataType: proto.Int32(int32(Float)), Dims: []int64{1}, RawData: binary.LittleEndian.AppendUint32(nil, math.Float32bits(0.25))}, []float64{0.25}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tn, err := l.tensor(tc.tp, 0)
			require.NoError(t, err)
			got, err := tn.Float64s()
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	str, err := l.tensor(&onnxpb.TensorProto{DataType: proto.Int32(int32(String)), Dims: []int64{2}, StringData: [][]byte{[]byte("a"), []byte("bc")}}, 0)
	require.NoError(t, err)
	assert.Equal(t, [][]byte{[]byte("a"), []byte("bc")}, str.Strings)

	bad := []*onnxpb.TensorProto{
		{DataType: proto.Int32(int32(Float)), Dims: []int64{3}, FloatData: []float32{1}},
		{DataType: proto.Int32(int32(Float)), Dims: []int64{2}, RawData: []byte{1, 2, 3}},
		{DataType: proto.Int32(99), Dims: []int64{1}},
		{DataType: proto.Int32(int32(Float)), Dims: []int64{-1}},
		{DataType: proto.Int32(int32(Float)), Dims: []int64{1 << 40, 1 << 40}},
		{DataType: proto.Int32(int32(Float)), Dims: []int64{1 << 33, 4}, FloatData: []float32{1}},
		{DataType: proto.Int32(int32(String)), Dims: []int64{2}, StringData: [][]byte{[]byte("a")}},
	}
	for i, tp := range bad {
		_, err := l.tensor(tp, 0)
		assert.Error(t, err, "case %d", i)
	}
}

func TestFloat16Conversion(t *testing.T) {
	for _, f := range []float32{0, 1, -1, 0.5, 65504, 6.1035156e-05, 5.9604645e-08, 3.140625} {
		assert.Equal(t, f, Float16ToFloat32(Float32ToFloat16(f)), "%v", f)
	}
	assert.True(t, math.IsInf(float64(Float16ToFloat32(Float32ToFloat16(1e6))), 1))
	assert.True(t, math.IsNaN(float64(Float16ToFloat32(Float32ToFloat16(float32(math.NaN()))))))
	assert.Equal(t, float32(1.5), BFloat16ToFloat32(Float32ToBFloat16(1.5)))
}

// relu returns a one-node model x -> Relu -> y.
func reluModel(t *testing.T) *Model {
	return buildModel(t, []*Value{Input("x", f32(2, 3))}, []*Value{Output("y", Type{})},
		[]*Node{NewNode("r", "Relu", []string{"x"}, []string{"y"})}, nil)
}

func TestStructuralErrors(t *testing.T) {
	mk := func(nodes []*Node, outputs ...string) error {
		g := &Graph{Name: "g", Inputs: []*Value{Input("x", f32(2))}, Nodes: nodes}
		for _, o := range outputs {
			g.Outputs = append(g.Outputs, Output(o, Type{}))
		}
		_, err := FromGraph("m", g, map[string]int64{"": 17})
		return err
	}
	err := mk([]*Node{NewNode("a", "Add", []string{"x", "b"}, []string{"a"}), NewNode("bnode", "Relu", []string{"a"}, []string{"b"})}, "a")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cycle")
	assert.Contains(t, err.Error(), `node "a" (Add)`)

	err = mk([]*Node{NewNode("n", "Relu", []string{"nowhere"}, []string{"y"})}, "y")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `value "nowhere"`)
	assert.Contains(t, err.Error(), "not defined")

	err = mk([]*Node{NewNode("n1", "Relu", []string{"x"}, []string{"y"}), NewNode("n2", "Relu", []string{"x"}, []string{"y"})}, "y")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `node "n2" (Relu) value "y": output already defined`)

	err = mk([]*Node{NewNode("n", "Relu", []string{"x"}, []string{"x"})}, "x")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "graph input or initializer")

	err = mk(nil, "missing")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `value "missing": graph output is not produced`)

	err = mk([]*Node{NewNode("n", "Relu", []string{"x"}, []string{"y"})}, "y", "x", "y", "y")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `value "y": graph output is listed twice`)
	assert.Equal(t, 1, strings.Count(err.Error(), "listed twice"), "one error per name")
}

func TestTopologicalSortOnLoad(t *testing.T) {
	m := buildModel(t, []*Value{Input("x", f32(2))}, []*Value{Output("z", Type{})},
		[]*Node{NewNode("second", "Relu", []string{"y"}, []string{"z"}), NewNode("first", "Neg", []string{"x"}, []string{"y"})}, nil)
	require.Equal(t, "first", m.Graph.Nodes[0].Name)
	back := roundTrip(t, m)
	require.Equal(t, "first", back.Graph.Nodes[0].Name)
}

func TestCheckErrors(t *testing.T) {
	cases := []struct {
		name  string
		opset int64
		node  *Node
		in    []*Value
		want  string
	}{
		{"op too new", 13, NewNode("g", "Gelu", []string{"x"}, []string{"y"}), nil, "operator Gelu does not exist in opset 13 of \"ai.onnx\" (it first appears in opset 20)"},
		{"unknown op", 17, NewNode("f", "Frobnicate", []string{"x"}, []string{"y"}), nil, "unknown operator Frobnicate"},
		{"attr type", 17, NewNode("c", "Softmax", []string{"x"}, []string{"y"}, FloatAttr("axis", 1)), nil, `attribute "axis" is FLOAT, want INT`},
		{"unknown attr", 17, NewNode("c", "Relu", []string{"x"}, []string{"y"}, IntAttr("alpha", 1)), nil, `attribute "alpha" is not defined for Relu`},
		{"missing input", 17, NewNode("c", "Conv", []string{"x"}, []string{"y"}), nil, "1 inputs given, Conv needs at least 2 (missing \"W\")"},
		{"empty required", 17, NewNode("c", "Add", []string{"", "x"}, []string{"y"}), nil, `required input 0 ("A") is empty`},
		{"required attr", 17, NewNode("c", "Cast", []string{"x"}, []string{"y"}), nil, `required attribute "to" is missing`},
		{"type mismatch", 17, NewNode("c", "Add", []string{"x", "i"}, []string{"y"}), []*Value{Input("i", TensorType(Int64, ShapeOf(2)))}, `input "B" has type tensor(int64) but "x" bound T to tensor(float)`},
		{"type not allowed", 17, NewNode("c", "Relu", []string{"s"}, []string{"y"}), []*Value{Input("s", TensorType(String, ShapeOf(2)))}, "has type tensor(string), not allowed for T"},
		{"removed op", 10, NewNode("u", "Upsample", []string{"x", "x"}, []string{"y"}), nil, "deprecated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]*Value{Input("x", f32(2))}, tc.in...)
			m := buildModel(t, in, []*Value{Output("y", Type{})}, []*Node{tc.node}, nil, tc.opset)
			err := m.Check()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), `model "test"`)
			assert.Contains(t, err.Error(), "("+tc.node.OpType+")")
		})
	}
}

func TestCheckUnimportedDomain(t *testing.T) {
	m := buildModel(t, []*Value{Input("x", f32(2))}, []*Value{Output("y", Type{})},
		[]*Node{{Name: "c", OpType: "Custom", Domain: "com.example", Inputs: []string{"x"}, Outputs: []string{"y"}}}, nil)
	err := m.Check()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `domain "com.example" is not imported`)
	m.Opsets["com.example"] = 1
	require.NoError(t, m.Check())
}

func TestSubgraphOuterReferences(t *testing.T) {
	then := &Graph{Name: "then", Outputs: []*Value{Output("t_out", Type{})},
		Nodes: []*Node{NewNode("t", "Neg", []string{"outer"}, []string{"t_out"})}}
	els := &Graph{Name: "else", Outputs: []*Value{Output("e_out", Type{})},
		Nodes: []*Node{NewNode("e", "Relu", []string{"outer"}, []string{"e_out"})}}
	ifNode := NewNode("if", "If", []string{"cond"}, []string{"y"},
		&Attribute{Name: "then_branch", Type: AttrGraph, Graph: then}, &Attribute{Name: "else_branch", Type: AttrGraph, Graph: els})
	// The If comes first in the list although it reads "outer", produced by the later node.
	m := buildModel(t, []*Value{Input("x", f32(4, 2)), Input("cond", TensorType(Bool, Shape{}))}, []*Value{Output("y", Type{})},
		[]*Node{ifNode, NewNode("mk", "Abs", []string{"x"}, []string{"outer"})}, nil)
	require.Equal(t, "mk", m.Graph.Nodes[0].Name)
	assert.Equal(t, []string{"outer"}, then.OuterRefs)
	assert.Equal(t, []string{"outer"}, ifNode.ImplicitInputs())
	require.NoError(t, m.Check())
	back := roundTrip(t, m)
	assert.Equal(t, []string{"outer"}, back.Graph.Nodes[1].Attr("then_branch").Graph.OuterRefs)

	bad := &Graph{Name: "bad", Outputs: []*Value{Output("o", Type{})}, Nodes: []*Node{NewNode("n", "Neg", []string{"ghost"}, []string{"o"})}}
	g := &Graph{Name: "g", Inputs: []*Value{Input("c", TensorType(Bool, Shape{}))}, Outputs: []*Value{Output("y", Type{})},
		Nodes: []*Node{NewNode("if", "If", []string{"c"}, []string{"y"}, &Attribute{Name: "then_branch", Type: AttrGraph, Graph: bad}, &Attribute{Name: "else_branch", Type: AttrGraph, Graph: bad})}}
	_, err := FromGraph("m", g, map[string]int64{"": 17})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `value "ghost"`)
}

func TestNestingLimit(t *testing.T) {
	inner := &Graph{Name: "leaf", Outputs: []*Value{Output("c0", TensorType(Bool, Shape{}))}}
	g := inner
	for i := 0; i < 40; i++ {
		leaf := &Graph{Name: "leaf", Outputs: []*Value{Output("c0", Type{})}}
		g = &Graph{Name: "level" + strconv.Itoa(i), Outputs: []*Value{Output("c", Type{})},
			Nodes: []*Node{NewNode("if", "If", []string{"c0"}, []string{"c"}, &Attribute{Name: "then_branch", Type: AttrGraph, Graph: g}, &Attribute{Name: "else_branch", Type: AttrGraph, Graph: leaf})}}
	}
	main := &Graph{Name: "main", Inputs: []*Value{Input("c0", TensorType(Bool, Shape{}))}, Outputs: g.Outputs, Nodes: g.Nodes}
	mp := &onnxpb.ModelProto{IrVersion: proto.Int64(8), OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(17)}}}
	gp, err := graphProto(main)
	require.NoError(t, err)
	mp.Graph = gp
	data, err := proto.Marshal(mp)
	require.NoError(t, err)
	_, err = LoadBytes(data)
	require.Error(t, err)
	_, err = LoadBytesWithOptions(data, LoadOptions{Limits: Limits{MaxNesting: 64}})
	require.NoError(t, err)
}

// writeExternalModel writes weights.bin and model.onnx referencing it with the given location.
func writeExternalModel(t *testing.T, dir, location string, vals []float32, offset int64) string {
	t.Helper()
	raw := make([]byte, offset)
	for _, v := range vals {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "weights.bin"), raw, 0o644))
	loc := onnxpb.TensorProto_EXTERNAL
	w := &onnxpb.TensorProto{Name: proto.String("w"), DataType: proto.Int32(int32(Float)), Dims: []int64{int64(len(vals))}, DataLocation: &loc,
		ExternalData: []*onnxpb.StringStringEntryProto{
			{Key: proto.String("location"), Value: proto.String(location)},
			{Key: proto.String("offset"), Value: proto.String(strconv.FormatInt(offset, 10))},
			{Key: proto.String("length"), Value: proto.String(strconv.Itoa(4 * len(vals)))}}}
	mp := &onnxpb.ModelProto{IrVersion: proto.Int64(8), OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{Name: proto.String("ext"), Initializer: []*onnxpb.TensorProto{w},
			Input:  []*onnxpb.ValueInfoProto{{Name: proto.String("x"), Type: typeProto(f32(int64(len(vals))))}},
			Output: []*onnxpb.ValueInfoProto{{Name: proto.String("y")}},
			Node:   []*onnxpb.NodeProto{{OpType: proto.String("Add"), Input: []string{"x", "w"}, Output: []string{"y"}}}}}
	data, err := proto.Marshal(mp)
	require.NoError(t, err)
	path := filepath.Join(dir, "model.onnx")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

func TestExternalData(t *testing.T) {
	dir := t.TempDir()
	vals := []float32{1.5, -2, 3.25}
	path := writeExternalModel(t, dir, "weights.bin", vals, 16)
	m, err := Load(path)
	require.NoError(t, err)
	w := m.Graph.Initializers["w"]
	got, err := w.Float32s()
	require.NoError(t, err)
	assert.Equal(t, vals, got)
	assert.Equal(t, WeightRef{Location: "weights.bin", Offset: 16, Length: 12}, w.Ref)
	require.NoError(t, m.Check())
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "Close is idempotent")

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	_, err = LoadBytes(data)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "needs a model directory")
	m, err = LoadBytesWithOptions(data, LoadOptions{Dir: dir})
	require.NoError(t, err)
	require.NoError(t, m.Close())
}

func TestExternalDataRefusesEscapes(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "model")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "secret.bin"), make([]byte, 64), 0o644))
	for _, loc := range []string{"../secret.bin", "/etc/passwd", "sub/../../secret.bin", filepath.Join(root, "secret.bin")} {
		path := writeExternalModel(t, dir, loc, []float32{1}, 0)
		_, err := Load(path)
		require.Error(t, err, loc)
		assert.Contains(t, err.Error(), `value "w"`)
	}
	require.NoError(t, os.Symlink(filepath.Join(root, "secret.bin"), filepath.Join(dir, "link.bin")))
	path := writeExternalModel(t, dir, "link.bin", []float32{1}, 0)
	_, err := Load(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "escapes the model directory")

	path = writeExternalModel(t, dir, "weights.bin", []float32{1, 2}, 0)
	require.NoError(t, os.Truncate(filepath.Join(dir, "weights.bin"), 4))
	_, err = Load(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "run past")
}

func TestFromGraphRequiresInlineWeights(t *testing.T) {
	w := TensorFromFloat32("w", []int64{2}, []float32{1, 2})
	w.Ref = WeightRef{Location: "weights.bin", Length: 8}
	g := &Graph{Name: "g", Inputs: []*Value{Input("x", f32(2))}, Outputs: []*Value{Output("y", Type{})},
		Nodes: []*Node{NewNode("add", "Add", []string{"x", "w"}, []string{"y"})}}
	g.AddInitializer(w)
	_, err := FromGraph("m", g, map[string]int64{"": 17})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "must be inline")

	w.Ref = WeightRef{}
	w.Raw = w.Raw[:4]
	_, err = FromGraph("m", g, map[string]int64{"": 17})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "4 bytes of data for 2 float elements")
}
