package native_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/native"
)

// cudaSource holds the CUDA versions of two test kernels, in the CUDA calling convention: the
// bound buffers' pointers, the violation word, then the scalars.
const cudaSource = `
extern "C" __global__ void add_u32(const unsigned* x, const unsigned* y, unsigned* z,
                                   unsigned* violation, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = x[i] + y[i];
}
extern "C" __global__ void axpy_u32(const unsigned* x, unsigned* y, unsigned* violation,
                                    unsigned alpha, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += alpha * x[i];
}
`

// openCUDA opens CUDA device 0, or skips the test where there is none (no driver, no GPU).
func openCUDA(t *testing.T) *native.Device {
	t.Helper()
	n, err := native.Devices(native.BackendCUDA)
	if err != nil || n == 0 {
		t.Skipf("no CUDA device (%d devices, %v)", n, err)
	}
	dev, err := native.Open(native.BackendCUDA, 0, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, dev.Close()) })
	t.Logf("CUDA device: %s", dev)
	return dev
}

func cudaKernels(t *testing.T, dev *native.Device) *native.Module {
	t.Helper()
	m, err := dev.LoadCUDASource("test_kernels.cu", []byte(cudaSource), "")
	require.NoError(t, err)
	closeLater(t, m)
	return m
}

func TestCUDAProps(t *testing.T) {
	dev := openCUDA(t)
	p := dev.Props()
	assert.Equal(t, native.BackendCUDA, p.Backend)
	assert.Regexp(t, `^sm_\d+$`, p.Target)
	assert.EqualValues(t, 32, p.WarpSize)
	assert.Greater(t, p.ComputeUnits, uint32(0))
	assert.EqualValues(t, 48<<10, p.MaxSharedMemoryPerBlock)
	assert.GreaterOrEqual(t, p.MaxSharedMemoryPerBlockOptin, uint32(96<<10), "opt-in shared memory (sm_70 and later)")
	assert.GreaterOrEqual(t, p.DriverVersion, uint32(11000), "driver version")
}

func TestCUDASourceKernelMatchesGo(t *testing.T) {
	r := newRand(t)
	dev := openCUDA(t)
	add := kernel(t, cudaKernels(t, dev), "add_u32")
	s := newStream(t, dev)
	n := 1 + r.IntN(100000)
	x, y := randomU32(r, n), randomU32(r, n)
	bx := alloc(t, dev, native.DeviceMemory, uint64(4*n))
	by := alloc(t, dev, native.DeviceMemory, uint64(4*n))
	bz := alloc(t, dev, native.DeviceMemory, uint64(4*n))
	require.NoError(t, s.Upload(bx, 0, u32Bytes(x)))
	require.NoError(t, s.Upload(by, 0, u32Bytes(y)))
	p := addParams(bx, by, bz, n)
	p.Block = native.Dim3{X: 256}
	p.Grid = native.Dim3{X: uint32((n + 255) / 256)}
	require.NoError(t, s.Launch(add, p))
	got := bytesU32(download(t, s, bz))
	for i := range x {
		require.Equal(t, x[i]+y[i], got[i], "element %d", i)
	}
}

func TestCUDASharedMemoryIsHostVisible(t *testing.T) {
	r := newRand(t)
	dev := openCUDA(t)
	add := kernel(t, cudaKernels(t, dev), "add_u32")
	s := newStream(t, dev)
	const n = 4096
	x := randomU32(r, n)
	b := alloc(t, dev, native.SharedMemory, 4*n)
	z := alloc(t, dev, native.SharedMemory, 4*n)
	copy(b.Bytes(), u32Bytes(x))
	require.NoError(t, s.Launch(add, addParams(b, b, z, n)))
	require.NoError(t, s.Synchronize())
	got := bytesU32(z.Bytes())
	for i := range x {
		require.Equal(t, 2*x[i], got[i])
	}
}

func TestCUDAGraphReplayMatchesGo(t *testing.T) {
	r := newRand(t)
	dev := openCUDA(t)
	m := cudaKernels(t, dev)
	s := newStream(t, dev)
	n := 1 + r.IntN(50000)
	cg := buildChainGraph(t, r, dev, m, n)
	exec, err := cg.graph.Instantiate()
	require.NoError(t, err)
	closeLater(t, exec)
	for round := 0; round < 3; round++ {
		x := randomU32(r, n)
		require.NoError(t, s.Upload(cg.x, 0, u32Bytes(x)))
		require.NoError(t, exec.Launch(s))
		require.Equal(t, cg.want(x), bytesU32(download(t, s, cg.total)), "round %d", round)
	}
	cg.alphas[7][2] = r.Uint32()
	require.NoError(t, exec.UpdateKernelNode(cg.axpyNodes[7][2], axpyParams(cg.x, cg.accs[7], cg.alphas[7][2], n)))
	x := randomU32(r, n)
	require.NoError(t, s.Upload(cg.x, 0, u32Bytes(x)))
	require.NoError(t, exec.Launch(s))
	require.Equal(t, cg.want(x), bytesU32(download(t, s, cg.total)))
}

func TestCUDACaptureReplayMatchesGo(t *testing.T) {
	r := newRand(t)
	dev := openCUDA(t)
	axpy := kernel(t, cudaKernels(t, dev), "axpy_u32")
	s := newStream(t, dev)
	n := 1 + r.IntN(50000)
	x := alloc(t, dev, native.DeviceMemory, uint64(4*n))
	y := alloc(t, dev, native.DeviceMemory, uint64(4*n))
	alphas := randomU32(r, 4)
	require.NoError(t, s.BeginCapture())
	require.NoError(t, s.Fill(y, 0, uint64(4*n), 0))
	for _, a := range alphas {
		require.NoError(t, s.Launch(axpy, axpyParams(x, y, a, n)))
	}
	g, err := s.EndCapture()
	require.NoError(t, err)
	closeLater(t, g)
	exec, err := g.Instantiate()
	require.NoError(t, err)
	closeLater(t, exec)
	for round := 0; round < 3; round++ {
		xv := randomU32(r, n)
		require.NoError(t, s.Upload(x, 0, u32Bytes(xv)))
		require.NoError(t, exec.Launch(s))
		got := bytesU32(download(t, s, y))
		for i := range xv {
			var want uint32
			for _, a := range alphas {
				want += a * xv[i]
			}
			require.Equal(t, want, got[i], "round %d element %d", round, i)
		}
	}
}

func TestCUDACompileErrorCarriesTheLog(t *testing.T) {
	dev := openCUDA(t)
	_, err := dev.LoadCUDASource("broken.cu", []byte(`extern "C" __global__ void k() { this is not CUDA; }`), "")
	require.ErrorIs(t, err, native.ErrCompile)
	assert.Contains(t, err.Error(), "broken.cu")
	_, err = dev.LoadCUDAPTX("other.ptx", []byte(".version 7.0\n.target sm_50\n"), "sm_1")
	require.ErrorIs(t, err, native.ErrTargetMismatch)
}

func TestCUDARuntimeSessionFence(t *testing.T) {
	r := newRand(t)
	dev := openCUDA(t)
	add := kernel(t, cudaKernels(t, dev), "add_u32")
	rt := newRuntime(t, dev, nil)
	const n = 1 << 16
	st := newModelState(t, rt, add, n)
	sess, err := native.New(rt, st, func(*modelState) error { return rt.SynchronizeLane(native.Compute) })
	require.NoError(t, err)
	xv, yv := randomU32(r, n), randomU32(r, n)
	got, err := native.Run(sess, func(m *modelState) ([]uint32, error) {
		p := addParams(m.x, m.y, m.z, m.n)
		p.Block, p.Grid = native.Dim3{X: 256}, native.Dim3{X: n / 256}
		if err := m.rt.Upload(m.x, 0, u32Bytes(xv)); err != nil {
			return nil, err
		}
		if err := m.rt.Upload(m.y, 0, u32Bytes(yv)); err != nil {
			return nil, err
		}
		if err := m.rt.Launch(m.add, p); err != nil {
			return nil, err
		}
		out := make([]byte, 4*n)
		if err := m.rt.Download(out, m.z, 0); err != nil {
			return nil, err
		}
		// out is written by the download only once the lanes are synchronized: read it after.
		if err := m.rt.Synchronize(); err != nil {
			return nil, err
		}
		return bytesU32(out), nil
	})
	require.NoError(t, err)
	for i := range got {
		require.Equal(t, xv[i]+yv[i], got[i])
	}
	require.NoError(t, sess.Close())
}
