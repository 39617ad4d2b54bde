package native_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/native"
)

// A host device opened with OpenOptions.Discrete behaves as a GPU's memory does: no wrapped
// host memory, no graph runs on caller memory, fresh device memory not zeroed; uploads,
// kernels and downloads work as on any host device.
func TestDiscreteHostDeviceBehavesAsAGPU(t *testing.T) {
	r := newRand(t)
	plain := openHost(t)
	require.False(t, plain.Discrete())
	dev, err := native.Open(native.BackendHost, 0, &native.OpenOptions{WorkerThreads: 2, Discrete: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, dev.Close()) })
	require.True(t, dev.Discrete())

	n := 1 + r.IntN(3000)
	x := randomU32(r, n)
	_, err = dev.WrapHost(u32Bytes(x))
	require.ErrorIs(t, err, native.ErrNotSupported)
	require.ErrorContains(t, err, "discrete")

	s := newStream(t, dev)
	a := alloc(t, dev, native.DeviceMemory, uint64(4*n))
	b := alloc(t, dev, native.DeviceMemory, uint64(4*n))
	require.Nil(t, a.Bytes(), "device memory has no host view")
	require.Equal(t, bytes.Repeat([]byte{0xff}, 4*n), download(t, s, b), "fresh device memory is not zeroed")

	add := kernel(t, kernels(t, dev), "add_u32")
	require.NoError(t, s.Upload(a, 0, u32Bytes(x)))
	g, err := dev.NewGraph()
	require.NoError(t, err)
	closeLater(t, g)
	node, err := g.AddKernel(add, addParams(a, a, b, n))
	require.NoError(t, err)
	exec, err := g.Instantiate()
	require.NoError(t, err)
	closeLater(t, exec)
	require.NoError(t, exec.Run(s, 0))
	got := bytesU32(download(t, s, b))
	for i := range x {
		require.Equal(t, 2*x[i], got[i], "element %d", i)
	}
	out := make([]byte, 4*n)
	err = exec.RunBound(s, 0, []native.RunBinding{{Node: uint32(node), Index: 2, Arg: 0, Bytes: uint64(4 * n)}}, [][]byte{out})
	require.ErrorIs(t, err, native.ErrNotSupported)
	require.ErrorContains(t, err, "discrete")
	require.NoError(t, exec.Run(s, 0), "the refusal leaves the stream usable")
}
