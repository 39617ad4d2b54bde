package graph

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// weightFile writes a model file with a [k, n] float weight of random values and returns its
// path and the weight's bytes.
func weightFile(t *testing.T, k, n int) (string, []byte) {
	t.Helper()
	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	g := &Graph{Name: "w"}
	g.Inputs = []*Value{Input("x", TensorType(Float, ShapeOf(1, int64(k))))}
	g.Outputs = []*Value{Output("y", Type{})}
	vals := make([]float32, k*n)
	for i := range vals {
		vals[i] = rnd.Float32()
	}
	w := TensorFromFloat32("w", []int64{int64(k), int64(n)}, vals)
	g.AddInitializer(w)
	g.Nodes = []*Node{NewNode("mm", "MatMul", []string{"x", "w"}, []string{"y"})}
	m, err := FromGraph("w", g, map[string]int64{"": 17})
	require.NoError(t, err)
	data, err := m.Marshal()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "w.onnx")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path, append([]byte{}, w.Raw...)
}

// TestLoadKeepsLargeWeightsOutsideTheGoHeap: a model file's large weights are not Go heap (the
// collector would let a process's garbage grow to their size), hold the file's bytes, sit
// aligned, and go back at Model.Close, once however often it is called.
func TestLoadKeepsLargeWeightsOutsideTheGoHeap(t *testing.T) {
	path, want := weightFile(t, 1024, 1030) // 4 MiB, with room (n no multiple of 16)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m, err := Load(path)
	require.NoError(t, err)
	runtime.GC()
	runtime.ReadMemStats(&after)
	w := m.Graph.Initializers["w"]
	require.NotNil(t, w)
	require.NotNil(t, m.weights, "the weight is in a store")
	assert.Equal(t, want, w.Raw)
	assert.Zero(t, uintptr(unsafe.Pointer(&w.Raw[0]))%weightAlign, "aligned")
	assert.True(t, m.weights.inStore(w.Raw), "the weight lies in the model's store")
	assert.Greater(t, len(w.RawRoom()), len(w.Raw), "its room too")
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	assert.Less(t, grew, int64(len(want)/4), "the Go heap grew by %d bytes for a %d-byte weight", grew, len(want))

	require.NoError(t, m.Close())
	assert.True(t, m.weights.blocks.released(), "Close releases the store")
	require.NoError(t, m.Close(), "once")
	assert.False(t, m.weights.inStore(w.Raw))
}

// TestWeightStoreLivesWithItsTensors: a model dropped without Close keeps its weights while a
// tensor of it is reachable, and gives them back once nothing is.
func TestWeightStoreLivesWithItsTensors(t *testing.T) {
	path, want := weightFile(t, 256, 300)
	m, err := Load(path)
	require.NoError(t, err)
	w := m.Graph.Initializers["w"]
	require.NotNil(t, m.weights, "the weight is in a store")
	blocks := m.weights.blocks // the memory, without keeping its store reachable
	m = nil                    // dropped, not closed: w alone keeps the store
	for range 3 {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	assert.False(t, blocks.released(), "a reachable tensor keeps its store")
	assert.Equal(t, want, w.Raw, "and its bytes")
	runtime.KeepAlive(w)
	w = nil
	deadline := time.Now().Add(10 * time.Second)
	for !blocks.released() && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	assert.True(t, blocks.released(), "the store goes once nothing reaches it")
	_ = m
}

// TestWeightStoreCarving: parts are aligned, do not overlap, and a full or released store
// hands out nothing.
func TestWeightStoreCarving(t *testing.T) {
	lens, rooms := []int{100, 70000, 1, 65536}, []int{0, 300, 0, 64}
	size := weightStoreSize(lens, rooms)
	require.Positive(t, size)
	s := newWeightStore(size)
	require.NotNil(t, s)
	var prevEnd uintptr
	for i := range lens {
		b := s.take(lens[i], rooms[i])
		require.NotNil(t, b, "part %d", i)
		assert.Len(t, b, lens[i])
		assert.Equal(t, lens[i]+rooms[i], cap(b))
		p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		assert.Zero(t, p%weightAlign)
		assert.GreaterOrEqual(t, p, prevEnd, "part %d does not overlap the one before", i)
		prevEnd = p + uintptr(cap(b))
		for j := range b {
			b[j] = byte(i)
		}
	}
	assert.Nil(t, s.take(1, 0), "full")
	assert.Nil(t, s.take(-1, 0))
	require.NoError(t, s.release())
	assert.True(t, s.blocks.released())
	assert.Nil(t, s.take(0, 0), "released")
	require.NoError(t, s.release(), "once")
	assert.Equal(t, -1, weightStoreSize([]int{int(^uint(0) >> 2), int(^uint(0) >> 2), 1 << 20}, []int{0, 0, 0}))
}
