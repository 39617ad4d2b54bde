package graph

import (
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph/internal/onnxpb"
	"google.golang.org/protobuf/proto"
)

// randomDataSequence is a sequence of 0..3 float tensors of random shapes and values.
func randomDataSequence(r *rand.Rand, name string) *DataValue {
	v := &DataValue{Name: name, Kind: KindSequence}
	for i := range r.Intn(4) {
		dims := []int64{int64(1 + r.Intn(3)), int64(r.Intn(4))}
		vals := randFloats(r, int(dims[0]*dims[1]))
		v.Elems = append(v.Elems, &DataValue{Kind: KindTensor, Tensor: TensorFromFloat32("e"+string(rune('0'+i)), dims, vals)})
	}
	return v
}

func TestDataValueRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	seq := randomDataSequence(r, "s")
	some := &DataValue{Name: "o", Kind: KindOptional, Elems: []*DataValue{seq}}
	none := &DataValue{Name: "n", Kind: KindOptional}
	optTensor := &DataValue{Name: "t", Kind: KindOptional, Elems: []*DataValue{{Kind: KindTensor, Tensor: TensorFromInt64("x", []int64{3}, []int64{r.Int63(), -1, 7})}}}
	for _, v := range []*DataValue{seq, some, none, optTensor} {
		b, err := v.Marshal()
		require.NoError(t, err)
		back, err := DecodeDataValue(b, v.Kind)
		require.NoError(t, err, v.Name)
		assert.Equal(t, v.Name, back.Name)
		assert.Equal(t, v.Kind, back.Kind)
		require.Len(t, back.Elems, len(v.Elems), v.Name)
		for i, e := range v.Elems {
			assert.Equal(t, e.Kind, back.Elems[i].Kind)
			if e.Kind == KindTensor {
				assert.Equal(t, e.Tensor.Dims, back.Elems[i].Tensor.Dims)
				assert.Equal(t, e.Tensor.Raw, back.Elems[i].Tensor.Raw)
				assert.Equal(t, e.Tensor.DType, back.Elems[i].Tensor.DType)
			} else {
				require.Len(t, back.Elems[i].Elems, len(e.Elems))
				for j, x := range e.Elems {
					assert.Equal(t, x.Tensor.Raw, back.Elems[i].Elems[j].Tensor.Raw)
				}
			}
		}
	}
}

func TestDecodeDataValueRefusesBadInput(t *testing.T) {
	mixed, err := proto.Marshal(&onnxpb.SequenceProto{Name: proto.String("m"), ElemType: proto.Int32(1),
		SequenceValues: []*onnxpb.SequenceProto{{}}})
	require.NoError(t, err)
	_, err = DecodeDataValue(mixed, KindSequence)
	assert.ErrorContains(t, err, "elem_type")

	two, err := proto.Marshal(&onnxpb.OptionalProto{Name: proto.String("o"),
		TensorValue: &onnxpb.TensorProto{DataType: proto.Int32(1)}, SequenceValue: &onnxpb.SequenceProto{}})
	require.NoError(t, err)
	_, err = DecodeDataValue(two, KindOptional)
	assert.ErrorContains(t, err, "more than one value")

	badTensor, err := proto.Marshal(&onnxpb.SequenceProto{Name: proto.String("b"),
		TensorValues: []*onnxpb.TensorProto{{DataType: proto.Int32(1), Dims: []int64{4}, FloatData: []float32{1}}}})
	require.NoError(t, err)
	_, err = DecodeDataValue(badTensor, KindSequence)
	assert.ErrorContains(t, err, "element 0")

	maps, err := proto.Marshal(&onnxpb.SequenceProto{MapValues: []*onnxpb.MapProto{{}}})
	require.NoError(t, err)
	_, err = DecodeDataValue(maps, KindSequence)
	assert.ErrorContains(t, err, "maps")

	_, err = DecodeDataValue([]byte{0xff, 0xff, 0xff}, KindSequence)
	assert.Error(t, err)
	_, err = DecodeDataValue(nil, KindMap)
	assert.Error(t, err)
}

// TestDecodeDataValueNodeTests decodes the sequence and optional files of the ONNX node tests
// (Debian libonnx-testdata) as their models declare them.
func TestDecodeDataValueNodeTests(t *testing.T) {
	const dir = "/usr/share/libonnx-testdata/data/node"
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("%s is absent: %v", dir, err)
	}
	cases := []struct {
		file  string
		kind  TypeKind
		elems int
	}{
		{"test_sequence_insert_at_back/test_data_set_0/input_0.pb", KindSequence, 3},
		{"test_optional_has_element_empty/test_data_set_0/input_0.pb", KindOptional, 0},
		{"test_optional_get_element/test_data_set_0/input_0.pb", KindOptional, 1},
		{"test_if_opt/test_data_set_0/output_0.pb", KindOptional, 1},
	}
	for _, c := range cases {
		b, err := os.ReadFile(filepath.Join(dir, c.file))
		require.NoError(t, err)
		v, err := DecodeDataValue(b, c.kind)
		require.NoError(t, err, c.file)
		assert.Equal(t, c.kind, v.Kind, c.file)
		assert.Len(t, v.Elems, c.elems, c.file)
	}
}

func FuzzDecodeDataValue(f *testing.F) {
	r := rand.New(rand.NewSource(1))
	for _, v := range []*DataValue{randomDataSequence(r, "a"), {Kind: KindOptional, Elems: []*DataValue{randomDataSequence(r, "b")}}} {
		b, err := v.Marshal()
		require.NoError(f, err)
		f.Add(b, uint8(v.Kind))
	}
	f.Fuzz(func(t *testing.T, data []byte, kind uint8) {
		v, err := DecodeDataValue(data, TypeKind(kind%6))
		if err != nil {
			return
		}
		// What decodes encodes again (nested kinds included).
		_, err = v.Marshal()
		require.NoError(t, err)
	})
}
