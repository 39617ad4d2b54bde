package graph

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

// A model file whose initializers are large is decoded from its mapping with those raw_data
// fields copied out by hand (loadMapped): Load and LoadBytes give the same model as the
// protobuf decoder alone, bytes for bytes, with every large initializer aligned for its elements; a file cut short fails as
// LoadBytes fails on the same bytes.
func TestLoadCopiesLargeWeightsOutOfTheMapping(t *testing.T) {
	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	g := &Graph{Name: "big"}
	g.Inputs = []*Value{Input("x", TensorType(Float, ShapeOf(3, 300)))}
	g.Outputs = []*Value{Output("y", Type{})}
	// Sizes around the cut (64 KiB), and odd ones so that raw_data starts at odd offsets.
	for i, dims := range [][]int64{{300, 300}, {300, 55}, {300, 54}, {1, 300}, {300, 301}, {40, 520}, {40, 511}, {40, 528}} {
		vals := make([]float32, dims[0]*dims[1])
		for j := range vals {
			vals[j] = rnd.Float32()
		}
		name := string(rune('a' + i))
		g.AddInitializer(TensorFromFloat32(name, dims, vals))
	}
	g.Nodes = []*Node{NewNode("mm", "MatMul", []string{"x", "a"}, []string{"y"})}
	m, err := FromGraph("big", g, map[string]int64{"": 17})
	require.NoError(t, err)
	data, err := m.Marshal()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "big.onnx")
	require.NoError(t, os.WriteFile(path, data, 0o644))

	_, cuts, ok := cutLargeRaw(data)
	require.True(t, ok)
	assert.Len(t, cuts, 6, "the six initializers of 64 KiB or more are cut out")

	loaded, err := Load(path)
	require.NoError(t, err)
	defer loaded.Close()
	want, err := decodeBytes(data, LoadOptions{}) // the protobuf decoder alone
	require.NoError(t, err)
	fromBytes, err := LoadBytes(data) // the same copying out, from the caller's bytes
	require.NoError(t, err)
	defer fromBytes.Close()
	require.Equal(t, len(want.Graph.Initializers), len(loaded.Graph.Initializers))
	require.Equal(t, len(want.Graph.Initializers), len(fromBytes.Graph.Initializers))
	for name, w := range want.Graph.Initializers {
		got := loaded.Graph.Initializers[name]
		b := fromBytes.Graph.Initializers[name]
		require.NotNil(t, b, name)
		assert.Equal(t, w.Raw, b.Raw, name)
		assert.Equal(t, len(got.RawRoom()), len(b.RawRoom()), "%s: LoadBytes leaves the room Load leaves", name)
		require.NotNil(t, got, name)
		assert.Equal(t, w.Dims, got.Dims, name)
		assert.Equal(t, w.Raw, got.Raw, name)
		assert.True(t, got.Ref.Inline(), name)
		if len(got.Raw) >= mappedRawMin {
			assert.Zero(t, uintptr(unsafe.Pointer(&got.Raw[0]))%8, "%s is aligned", name)
		}
		// Room behind the cut 2-D float weights of at least 4·rawRoomColumns columns, no
		// multiple of 16: k·127 elements, the rest of the memory Raw's own (RawRoom), none for
		// the others.
		room := got.RawRoom()
		assert.Same(t, unsafe.SliceData(got.Raw), unsafe.SliceData(room), name)
		if len(got.Raw) >= mappedRawMin && got.Dims[1] >= 4*rawRoomColumns && got.Dims[1]%16 != 0 {
			assert.Equal(t, len(got.Raw)+int(got.Dims[0])*(rawRoomColumns-1)*4, len(room), name)
			got.Raw = append([]byte{}, got.Raw...) // replaced: its room is gone
			assert.Len(t, got.RawRoom(), len(got.Raw), name)
		} else {
			assert.Len(t, room, len(got.Raw), name)
		}
		assert.Len(t, w.RawRoom(), len(w.Raw), "%s decoded from bytes has no room", name)
	}
	assert.Equal(t, len(want.Graph.Nodes), len(loaded.Graph.Nodes))

	twice := append(append([]byte{}, data...), data...) // two graph fields, merged by proto
	_, _, ok = cutLargeRaw(twice)
	assert.False(t, ok, "a file with two graph fields is left to proto")

	for _, cut := range []int{len(data) - 1, len(data) / 2, 40} {
		short := filepath.Join(t.TempDir(), "short.onnx")
		require.NoError(t, os.WriteFile(short, data[:cut], 0o644))
		_, errFile := Load(short)
		_, errBytes := LoadBytesWithOptions(data[:cut], LoadOptions{Name: "short.onnx"})
		require.Error(t, errFile, "cut at %d", cut)
		require.Error(t, errBytes)
		assert.Equal(t, errBytes.Error(), errFile.Error(), "cut at %d", cut)
	}
}

// A weight whose dims claim far more elements than its raw_data holds is refused with an
// error, as LoadBytes refuses it, and sizes no allocation: the room behind a cut weight
// (RawRoom) follows its bytes, not its dims (a [2^26, 520] claim over 64 KiB once made the
// loader allocate 34 GB and die).
func TestLoadRefusesDimsBeyondTheBytes(t *testing.T) {
	for _, d0 := range []int64{1 << 26, 1 << 40, 1<<62 - 1} {
		g := &Graph{Name: "liar"}
		g.Inputs = []*Value{Input("x", TensorType(Float, ShapeOf(1, 520)))}
		g.Outputs = []*Value{Output("y", Type{})}
		w := TensorFromFloat32("w", []int64{40, 520}, make([]float32, 40*520))
		g.AddInitializer(w)
		g.Nodes = []*Node{NewNode("mm", "MatMul", []string{"x", "w"}, []string{"y"})}
		m, err := FromGraph("liar", g, map[string]int64{"": 17})
		require.NoError(t, err)
		mp, err := m.toProto()
		require.NoError(t, err)
		require.Len(t, mp.GetGraph().GetInitializer(), 1)
		mp.GetGraph().GetInitializer()[0].Dims = []int64{d0, 520}
		data, err := proto.Marshal(mp)
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), "liar.onnx")
		require.NoError(t, os.WriteFile(path, data, 0o644))
		_, errFile := Load(path)
		require.Error(t, errFile, "dims [%d, 520] over 83,200 bytes", d0)
		_, errBytes := LoadBytesWithOptions(data, LoadOptions{Name: "liar.onnx"})
		require.Error(t, errBytes)
		assert.Equal(t, errBytes.Error(), errFile.Error())
	}
}
