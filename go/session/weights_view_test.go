package session

import (
	"context"
	"math/rand/v2"
	"os"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// A session that loaded its model views the model's initializer bytes as its weights (one
// copy, not two); a session over a caller's model copies them; both compute the same outputs.
// (Weights held packed in place of their bytes, relayWeights, are TestRelaidWeightsAreHeldOnce's.)
func TestWeightsShareTheOwnedModelsBytes(t *testing.T) {
	const path = "testdata/models/tiny_encoder.onnx"
	owned, err := Load(path, WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer owned.Close()
	viewed := 0
	for name, gt := range owned.eng.Model.Graph.Initializers {
		w := owned.eng.Weights[name]
		if tensor.RelaidOf(w) != nil {
			continue // held packed in place of its bytes (TestRelaidWeightsAreHeldOnce)
		}
		raw, ok := ops.RawBytes(w)
		require.True(t, ok, name)
		require.Equal(t, gt.Raw, raw, name)
		if tensor.ViewableConstant(gt) {
			require.Equal(t, unsafe.Pointer(&gt.Raw[0]), unsafe.Pointer(&raw[0]), "initializer %s is copied", name)
			viewed++
		}
	}
	require.Positive(t, viewed)

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	m, err := graph.LoadBytes(data)
	require.NoError(t, err)
	theirs, err := FromGraph(m, WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer theirs.Close()
	for name, gt := range m.Graph.Initializers {
		if tensor.RelaidOf(theirs.eng.Weights[name]) != nil {
			continue
		}
		raw, _ := ops.RawBytes(theirs.eng.Weights[name])
		require.Equal(t, gt.Raw, raw, name)
		if len(raw) > 0 {
			require.NotEqual(t, unsafe.Pointer(&gt.Raw[0]), unsafe.Pointer(&raw[0]), "a caller's initializer %s is shared", name)
		}
	}

	x := make([]float32, 16*64)
	for i := range x {
		x[i] = rand.Float32()*2 - 1
	}
	in, err := tensor.NewTensor([]int64{1, 16, 64}, x)
	require.NoError(t, err)
	feeds := []tensor.NamedTensor{{Name: owned.Inputs()[0].Name, Tensor: in}}
	for run := 0; run < 3; run++ { // the interpreted first run, then the plan
		a, err := owned.Run(context.Background(), feeds)
		require.NoError(t, err)
		b, err := theirs.Run(context.Background(), feeds)
		require.NoError(t, err)
		require.Equal(t, len(a), len(b))
		for i := range a {
			ra, _ := ops.RawBytes(a[i])
			rb, _ := ops.RawBytes(b[i])
			require.Equal(t, rb, ra)
		}
	}
}

// Constants that cannot be viewed as they are (bool bytes, external data, misaligned bytes)
// are decoded into fresh memory.
func TestWeightTensorCopiesWhatItCannotView(t *testing.T) {
	f32 := &graph.Tensor{Name: "f", DType: graph.Float, Dims: []int64{2}, Raw: []byte{0, 0, 128, 63, 0, 0, 0, 64}}
	w, err := tensor.WeightTensor(f32)
	require.NoError(t, err)
	require.Equal(t, []float32{1, 2}, w.Data())
	raw, _ := ops.RawBytes(w)
	require.Equal(t, unsafe.Pointer(&f32.Raw[0]), unsafe.Pointer(&raw[0]))

	// Misaligned for float32 whatever alignment the allocator gives buf.
	buf := make([]byte, 16)
	off := 1
	if uintptr(unsafe.Pointer(&buf[off]))%4 == 0 {
		off = 2
	}
	copy(buf[off:], f32.Raw)
	misaligned := &graph.Tensor{Name: "m", DType: graph.Float, Dims: []int64{2}, Raw: buf[off : off+8]}
	external := &graph.Tensor{Name: "e", DType: graph.Float, Dims: []int64{2}, Raw: f32.Raw, Ref: graph.WeightRef{Location: "w.bin"}}
	boolean := &graph.Tensor{Name: "b", DType: graph.Bool, Dims: []int64{2}, Raw: []byte{0, 2}}
	for _, gt := range []*graph.Tensor{misaligned, external, boolean} {
		require.False(t, tensor.ViewableConstant(gt), gt.Name)
		w, err := tensor.WeightTensor(gt)
		require.NoError(t, err, gt.Name)
		raw, _ := ops.RawBytes(w)
		require.NotEqual(t, unsafe.Pointer(&gt.Raw[0]), unsafe.Pointer(&raw[0]), gt.Name)
	}
	w, err = tensor.WeightTensor(boolean)
	require.NoError(t, err)
	require.Equal(t, []bool{false, true}, w.Data())
}
