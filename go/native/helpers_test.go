package native_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/native/internal/testkernels"
)

// leaks counts handles the garbage collector found unclosed. Tests that leak on purpose swap
// the hook; every other leak fails the run in TestMain.
var (
	leakMu    sync.Mutex
	leakKinds []string
)

func TestMain(m *testing.M) {
	// Under Bazel, LOOM_NVRTC_LIBRARY (@nvrtc's $(rootpath)) and CC and CXX (the pinned
	// zig cc's driver, tools/defs.bzl's ZIG_CC_ENV: the JIT's C compiler) are relative to the
	// workspace's runfiles directory, which rules_go's test runner has left for the package's
	// directory. A value without a slash is a name for PATH and stays as it is.
	for _, name := range []string{"LOOM_NVRTC_LIBRARY", "CC", "CXX"} {
		if v := os.Getenv(name); strings.Contains(v, "/") && !filepath.IsAbs(v) && os.Getenv("TEST_SRCDIR") != "" {
			os.Setenv(name, filepath.Join(os.Getenv("TEST_SRCDIR"), os.Getenv("TEST_WORKSPACE"), v))
		}
	}
	native.SetLeakHook(func(kind string) {
		leakMu.Lock()
		leakKinds = append(leakKinds, kind)
		leakMu.Unlock()
	})
	code := m.Run()
	// Give the backstop a chance to report whatever the tests dropped without closing.
	for i := 0; i < 5; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	leakMu.Lock()
	if len(leakKinds) > 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "FAIL: handles leaked without Close: %v\n", leakKinds)
		code = 1
	}
	leakMu.Unlock()
	os.Exit(code)
}

// newRand returns a generator seeded freshly for each run; the seed is logged so a failure
// can be replayed.
func newRand(t testing.TB) *rand.Rand {
	seed := rand.Uint64()
	t.Logf("random seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// openHost opens the host device, closing it when the test ends.
func openHost(t testing.TB) *native.Device {
	t.Helper()
	dev, err := native.Open(native.BackendHost, 0, &native.OpenOptions{WorkerThreads: 2})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, dev.Close()) })
	return dev
}

// closeLater closes c when the test ends (before the device, registered earlier).
func closeLater(t testing.TB, c interface{ Close() error }) {
	t.Helper()
	t.Cleanup(func() { require.NoError(t, c.Close()) })
}

// kernels loads the test kernels on dev.
func kernels(t testing.TB, dev *native.Device) *native.Module {
	t.Helper()
	m, err := testkernels.Load(dev)
	require.NoError(t, err)
	closeLater(t, m)
	return m
}

func kernel(t testing.TB, m *native.Module, name string) *native.Kernel {
	t.Helper()
	k, err := m.Kernel(name)
	require.NoError(t, err)
	return k
}

func newStream(t testing.TB, dev *native.Device) *native.Stream {
	t.Helper()
	s, err := dev.NewStream()
	require.NoError(t, err)
	closeLater(t, s)
	return s
}

func alloc(t testing.TB, dev *native.Device, kind native.MemoryKind, bytes uint64) *native.Buffer {
	t.Helper()
	b, err := dev.Alloc(kind, bytes)
	require.NoError(t, err)
	closeLater(t, b)
	return b
}

func randomU32(r *rand.Rand, n int) []uint32 {
	v := make([]uint32, n)
	for i := range v {
		v[i] = r.Uint32()
	}
	return v
}

func u32Bytes(v []uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.NativeEndian.PutUint32(b[4*i:], x)
	}
	return b
}

func bytesU32(b []byte) []uint32 {
	v := make([]uint32, len(b)/4)
	for i := range v {
		v[i] = binary.NativeEndian.Uint32(b[4*i:])
	}
	return v
}

// addParams binds add_u32(x, y, z; n) over n elements with 64-thread blocks.
func addParams(x, y, z *native.Buffer, n int) native.LaunchParams {
	return native.LaunchParams{
		Grid:    native.Dim3{X: uint32((n + 63) / 64)},
		Block:   native.Dim3{X: 64},
		Buffers: []native.Binding{{Buffer: x}, {Buffer: y}, {Buffer: z}},
		Scalars: new(native.Scalars).Uint32(uint32(n)).Bytes(),
	}
}

// axpyParams binds axpy_u32(x, y; alpha, n).
func axpyParams(x, y *native.Buffer, alpha uint32, n int) native.LaunchParams {
	return native.LaunchParams{
		Grid:    native.Dim3{X: uint32((n + 63) / 64)},
		Block:   native.Dim3{X: 64},
		Buffers: []native.Binding{{Buffer: x}, {Buffer: y}},
		Scalars: new(native.Scalars).Uint32(alpha).Uint32(uint32(n)).Bytes(),
	}
}

// sleepWriteParams binds sleep_write_u32(out; micros, value).
func sleepWriteParams(out *native.Buffer, d time.Duration, value uint32) native.LaunchParams {
	return native.LaunchParams{
		Grid:    native.Dim3{X: 1},
		Block:   native.Dim3{X: 1},
		Buffers: []native.Binding{{Buffer: out}},
		Scalars: new(native.Scalars).Uint32(uint32(d.Microseconds())).Uint32(value).Bytes(),
	}
}

// download reads a buffer back through a stream.
func download(t testing.TB, s *native.Stream, b *native.Buffer) []byte {
	t.Helper()
	out := make([]byte, b.Size())
	require.NoError(t, s.Download(out, b, 0))
	require.NoError(t, s.Synchronize())
	return out
}

// expectLeak runs drop (which must leave exactly one unclosed handle of kind unreachable)
// and collects garbage until the leak hook reports it.
func expectLeak(t *testing.T, kind string, drop func()) {
	t.Helper()
	var seen atomic.Int32
	prev := native.SetLeakHook(func(k string) {
		if k == kind {
			seen.Add(1)
		}
	})
	defer native.SetLeakHook(prev)
	drop()
	for i := 0; i < 100 && seen.Load() == 0; i++ {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	require.EqualValues(t, 1, seen.Load(), "the leak hook should report the dropped %s once", kind)
}
