package graph

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph/internal/modelmem"
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
	assert.Zero(t, uintptr(unsafe.Pointer(&w.Raw[0]))%modelmem.Align, "aligned")
	assert.True(t, m.weights.Contains(w.Raw), "the weight lies in the model's store")
	assert.Greater(t, len(w.RawRoom()), len(w.Raw), "its room too")
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	assert.Less(t, grew, int64(len(want)/4), "the Go heap grew by %d bytes for a %d-byte weight", grew, len(want))

	require.NoError(t, m.Close())
	assert.True(t, m.weights.Memory().Released(), "Close releases the store")
	require.NoError(t, m.Close(), "once")
	assert.False(t, m.weights.Contains(w.Raw))
}

// LoadBytes copies large weights out of the caller's bytes into the model's store as Load does,
// and only reads them: the caller's buffer is unchanged (the file path drops the mapping's
// pages as it copies; done to a caller's memory, that would zero it).
func TestLoadBytesKeepsLargeWeightsOutsideTheGoHeap(t *testing.T) {
	path, want := weightFile(t, 1024, 1030)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	kept := append([]byte(nil), data...)
	m, err := LoadBytes(data)
	require.NoError(t, err)
	w := m.Graph.Initializers["w"]
	require.NotNil(t, w)
	require.NotNil(t, m.weights, "the weight is in a store")
	assert.True(t, m.weights.Contains(w.Raw))
	assert.Equal(t, want, w.Raw)
	assert.True(t, bytes.Equal(kept, data), "LoadBytes changed the caller's bytes")
	for i := range data { // the model does not alias them
		data[i] = 0
	}
	assert.Equal(t, want, w.Raw)
	require.NoError(t, m.Close())
	assert.True(t, m.weights.Memory().Released())
}

// TestWeightStoreLivesWithItsTensors: a model dropped without Close keeps its weights while a
// tensor of it is reachable, and gives them back once nothing is.
func TestWeightStoreLivesWithItsTensors(t *testing.T) {
	path, want := weightFile(t, 256, 300)
	m, err := Load(path)
	require.NoError(t, err)
	w := m.Graph.Initializers["w"]
	require.NotNil(t, m.weights, "the weight is in a store")
	blocks := m.weights.Memory() // the memory, without keeping its store reachable
	m = nil                      // dropped, not closed: w alone keeps the store
	for range 3 {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	assert.False(t, blocks.Released(), "a reachable tensor keeps its store")
	assert.Equal(t, want, w.Raw, "and its bytes")
	runtime.KeepAlive(w)
	w = nil
	deadline := time.Now().Add(10 * time.Second)
	for !blocks.Released() && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	assert.True(t, blocks.Released(), "the store goes once nothing reaches it")
	_ = m
}
