package graph

import (
	"math"
	"testing"

	"github.com/loomrt/loom/go/graph/internal/modelmem"
	"github.com/loomrt/loom/go/graph/internal/onnxpb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

// The element types ONNX added after 1.18 (float8e8m0, uint2, int2) load with their TensorProto
// numbers, in both the raw and the int32_data layouts.
func TestRecentElementTypesDecode(t *testing.T) {
	l := &loader{lim: DefaultLimits(), maps: modelmem.NewMappings("")}
	cases := []struct {
		name  string
		tp    *onnxpb.TensorProto
		bytes int
		want  []float64
	}{
		// 0b00_01_10_11: elements low bits first: 3, 2, 1, 0; int2 reads 3 as -1 and 2 as -2.
		{"int2 packed", &onnxpb.TensorProto{DataType: proto.Int32(26), Dims: []int64{5}, Int32Data: []int32{0x1B, 0x01}}, 2, []float64{-1, -2, 1, 0, 1}},
		{"uint2 raw", &onnxpb.TensorProto{DataType: proto.Int32(25), Dims: []int64{2, 3}, RawData: []byte{0xE4, 0x0D}}, 2, []float64{0, 1, 2, 3, 1, 3}},
		{"float8e8m0 packed", &onnxpb.TensorProto{DataType: proto.Int32(24), Dims: []int64{3}, Int32Data: []int32{127, 130, 0}}, 3, []float64{1, 8, math.Ldexp(1, -127)}},
		{"float8e8m0 raw", &onnxpb.TensorProto{DataType: proto.Int32(24), Dims: []int64{1}, RawData: []byte{126}}, 1, []float64{0.5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tn, err := l.tensor(tc.tp, 0)
			require.NoError(t, err)
			assert.Len(t, tn.Raw, tc.bytes)
			got, err := tn.Float64s()
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	nan, err := l.tensor(&onnxpb.TensorProto{DataType: proto.Int32(24), Dims: []int64{1}, RawData: []byte{0xFF}}, 0)
	require.NoError(t, err)
	v, err := nan.Float64s()
	require.NoError(t, err)
	assert.True(t, math.IsNaN(v[0]), "float8e8m0 0xFF is NaN")

	assert.Equal(t, "float8e8m0", Float8E8M0.String())
	assert.Equal(t, "uint2", Uint2.String())
	assert.Equal(t, "int2", Int2.String())
	assert.Equal(t, DataType(24), Float8E8M0)
	assert.Equal(t, DataType(25), Uint2)
	assert.Equal(t, DataType(26), Int2)
	assert.Equal(t, int64(3), Int2.ByteSize(9))
	assert.True(t, Float8E8M0.IsFloat())
	assert.True(t, Int2.IsInteger() && Uint2.IsInteger())

	// Wrong entry counts and byte lengths are refused, naming the tensor.
	bad := []*onnxpb.TensorProto{
		{Name: proto.String("w"), DataType: proto.Int32(26), Dims: []int64{5}, Int32Data: []int32{0}},
		{Name: proto.String("w"), DataType: proto.Int32(25), Dims: []int64{5}, RawData: []byte{0}},
		{Name: proto.String("w"), DataType: proto.Int32(27), Dims: []int64{1}, RawData: []byte{0}},
	}
	for i, tp := range bad {
		_, err := l.tensor(tp, 0)
		require.Error(t, err, "case %d", i)
		assert.Contains(t, err.Error(), `tensor "w"`)
	}
}

// Building these types from numbers is refused rather than written as zeros.
func TestRecentElementTypesNotBuiltFromNumbers(t *testing.T) {
	for _, dt := range []DataType{Float8E8M0, Uint2, Int2, Int4, Float8E4M3FN, Float4E2M1} {
		_, err := TensorFromValues("c", dt, []int64{2}, []float64{1, 2})
		require.Error(t, err, "%v", dt)
		assert.Contains(t, err.Error(), `tensor "c": cannot build `+dt.String())
	}
}

// A model at opset 25 with int2 and float8e8m0 values and initializers loads, survives a
// round trip and checks; an operator whose constraint lacks the type is refused naming the
// node and the value.
func TestRecentElementTypesInModels(t *testing.T) {
	w, err := NewTensor("w", Int2, []int64{5}, []byte{0x1B, 0x01})
	require.NoError(t, err)
	s, err := NewTensor("s", Float8E8M0, []int64{2}, []byte{127, 128})
	require.NoError(t, err)
	m := buildModel(t,
		[]*Value{Input("x", TensorType(Int2, ShapeOf(5))), Input("e", TensorType(Float8E8M0, ShapeOf(2)))},
		[]*Value{Output("y", TensorType(Int2, ShapeOf(5))), Output("f", TensorType(Float8E8M0, ShapeOf(2))),
			Output("wy", Type{}), Output("sy", Type{})},
		[]*Node{
			NewNode("id", "Identity", []string{"x"}, []string{"y"}),
			NewNode("id2", "Identity", []string{"e"}, []string{"f"}),
			NewNode("idw", "Identity", []string{"w"}, []string{"wy"}),
			NewNode("ids", "Identity", []string{"s"}, []string{"sy"}),
		}, []*Tensor{w, s}, 25)
	require.NoError(t, m.Check())
	back := roundTrip(t, m)
	require.NoError(t, back.Check())
	assert.Equal(t, Int2, back.Graph.Value("x").Type.Elem)
	assert.Equal(t, Float8E8M0, back.Graph.Value("e").Type.Elem)
	wb := back.Graph.Initializer("w")
	require.NotNil(t, wb)
	vals, err := wb.Float64s()
	require.NoError(t, err)
	assert.Equal(t, []float64{-1, -2, 1, 0, 1}, vals)

	bad := buildModel(t,
		[]*Value{Input("x", TensorType(Int2, ShapeOf(5)))},
		[]*Value{Output("y", Type{})},
		[]*Node{NewNode("add", "Add", []string{"x", "x"}, []string{"y"})}, nil, 25)
	err = bad.Check()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `model "test"`)
	assert.Contains(t, err.Error(), "(Add)")
	assert.Contains(t, err.Error(), `value "x"`)
	assert.Contains(t, err.Error(), "has type tensor(int2), not allowed for T")
}

// The schema table is ONNX 1.22's: ai.onnx up to opset 27, ai.onnx.ml up to 5, the preview
// domains at 1; type constraints widened in opsets 18-27 come from ONNX, not by hand.
func TestSchemaTableIsONNX122(t *testing.T) {
	_, err := schemas()
	require.NoError(t, err)
	assert.Equal(t, "1.22.0", SchemaONNXVersion())
	assert.Equal(t, int64(27), MaxOpset(""))
	assert.Equal(t, int64(27), MaxOpset("ai.onnx"))
	assert.Equal(t, int64(5), MaxOpset("ai.onnx.ml"))
	assert.Equal(t, int64(1), MaxOpset("ai.onnx.preview.training"))
	assert.Equal(t, int64(1), MaxOpset("ai.onnx.preview"))
	assert.Equal(t, int64(0), MaxOpset("com.example"))
	assert.True(t, KnownDomain("ai.onnx.preview.training"))
	assert.False(t, KnownDomain("com.microsoft"))

	eq, _ := LookupSchema("", "Equal", 19)
	require.NotNil(t, eq)
	assert.Contains(t, eq.TypeConstraints["T"], "tensor(string)")
	cast, _ := LookupSchema("", "Cast", 25)
	require.NotNil(t, cast)
	assert.Equal(t, int64(25), cast.Since)
	assert.Contains(t, cast.TypeConstraints["T2"], "tensor(int2)")
	assert.Contains(t, cast.Attrs, "round_mode")
	rng, _ := LookupSchema("", "Range", 27)
	require.NotNil(t, rng)
	assert.Contains(t, rng.Attrs, "stash_type")
	// ONNX spells map constraints map(int64, float); they are kept as a value's type reads.
	dv, _ := LookupSchema("ai.onnx.ml", "DictVectorizer", 1)
	require.NotNil(t, dv)
	assert.Contains(t, dv.TypeConstraints["T1"], "map(int64,tensor(float))")

	m := buildModel(t, []*Value{Input("x", f32(2))}, []*Value{Output("y", Type{})},
		[]*Node{NewNode("r", "Relu", []string{"x"}, []string{"y"})}, nil, 27)
	require.NoError(t, m.Check())
	m.Opsets[""] = 28
	err = m.Check()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `opset 28 of domain "ai.onnx" is newer than the 27 Loom knows`)
}

func TestNormalizeTypeString(t *testing.T) {
	for in, want := range map[string]string{
		"tensor(float)":               "tensor(float)",
		"map(string, int64)":          "map(string,tensor(int64))",
		"seq(map(int64, float))":      "seq(map(int64,tensor(float)))",
		"optional(seq(tensor(int2)))": "optional(seq(tensor(int2)))",
	} {
		got := normalizeTypeString(in)
		assert.Equal(t, want, got, in)
		require.NoError(t, checkTypeString(got), in)
	}
	assert.Error(t, checkTypeString("tensor(int3)"))
	assert.Error(t, checkTypeString("blob(float)"))
}
