package device

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/loomrt/loom/go/session/internal/sessiontest"
	"github.com/stretchr/testify/require"
)

// TestCUDACompileRecordRead runs a Loom kernel through NVRTC on a CUDA device: Compile,
// Record, Replay and ReadMany through the readback buffer.
func TestCUDACompileRecordRead(t *testing.T) {
	s := testSession(t, newContext(t, sessiontest.CUDADevice(t), Unlimited))
	ids, err := s.Compile([]KernelSource{fillSource("f32")})
	require.NoError(t, err)
	const n = 5000
	out, err := s.Allocate(4 * n)
	require.NoError(t, err)
	shared, err := s.AllocateShared(4 * n)
	require.NoError(t, err)
	value := sessiontest.NewRand(t).Float32()
	require.NoError(t, s.Record("fill", []Command{
		Dispatch{Kernel: ids[0], Args: []uint64{uint64(math.Float32bits(value)), n}, Bindings: []Binding{out.Write()}},
		Copy{Src: out, Dst: shared},
	}))
	require.NoError(t, s.Replay("fill"))
	a, b := make([]byte, 4*n), make([]byte, 4*n)
	require.NoError(t, s.ReadMany([]ReadRequest{{Region: out, Dst: a}, {Region: shared, Dst: b}}))
	for i := range n {
		require.Equal(t, value, math.Float32frombits(binary.NativeEndian.Uint32(a[4*i:])), "element %d", i)
	}
	require.Equal(t, a, b)
}

// TestCUDARecordedGraphMatchesSequentialExecution is the Loom property test on a CUDA device.
func TestCUDARecordedGraphMatchesSequentialExecution(t *testing.T) {
	r := sessiontest.NewRand(t)
	h := &propertyHarness{t: t, ctx: newContext(t, sessiontest.CUDADevice(t), Unlimited), mixes: &loomMixes{ids: map[*ModelSession]map[string]KernelID{}}, maxBindings: 2}
	for i := range 200 {
		if diff := h.run(r, h.generate(r)); diff != "" {
			t.Fatalf("case %d: %s", i, diff)
		}
	}
}
