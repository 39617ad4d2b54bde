package native_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/native/internal/testkernels"
)

func TestHostDeviceProps(t *testing.T) {
	n, err := native.Devices(native.BackendHost)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	dev := openHost(t)
	p := dev.Props()
	assert.Equal(t, native.BackendHost, p.Backend)
	assert.Equal(t, 0, p.Index)
	assert.True(t, strings.HasPrefix(p.Target, "host-"), "target %q", p.Target)
	assert.Equal(t, p.Target, dev.Target())
	assert.EqualValues(t, 1, p.WarpSize)
	assert.EqualValues(t, 2, p.ComputeUnits, "worker threads asked for")
	assert.EqualValues(t, 1<<20, p.MaxSharedMemoryPerBlock)
	assert.Equal(t, p.MaxSharedMemoryPerBlock, p.MaxSharedMemoryPerBlockOptin)
	assert.Zero(t, p.DriverVersion)
	assert.NotEmpty(t, p.Name)
	assert.Greater(t, p.TotalMemory, uint64(0))
	assert.Contains(t, dev.String(), p.Target)
}

func TestOpenErrors(t *testing.T) {
	_, err := native.Open(native.BackendHost, 1, nil)
	require.ErrorIs(t, err, native.ErrNoDevice)
	assert.Contains(t, err.Error(), "no host device with index 1")

	_, err = native.Open(native.Backend(99), 0, nil)
	require.ErrorIs(t, err, native.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "unknown backend 99")

	_, err = native.Open(native.BackendHost, 0, &native.OpenOptions{WorkerThreads: -1})
	require.ErrorIs(t, err, native.ErrInvalidArgument)

	var e *native.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "Open", e.Op)
	assert.Equal(t, native.StatusInvalidArgument, e.Status)
}

func TestCUDAWithoutDriverSaysWhatItTried(t *testing.T) {
	n, err := native.Devices(native.BackendCUDA)
	if err == nil {
		t.Skipf("a CUDA driver is present (%d devices); the no-driver path cannot be exercised", n)
	}
	require.ErrorIs(t, err, native.ErrNoDriver)
	assert.Contains(t, err.Error(), "no CUDA driver: tried libcuda.so.1, libcuda.so")

	_, err = native.Open(native.BackendCUDA, 0, nil)
	require.ErrorIs(t, err, native.ErrNoDriver)
	assert.Contains(t, err.Error(), "no CUDA driver: tried libcuda.so.1, libcuda.so")
}

func TestUploadDownloadRoundTrip(t *testing.T) {
	r := newRand(t)
	dev := openHost(t)
	s := newStream(t, dev)
	for _, kind := range []native.MemoryKind{native.DeviceMemory, native.SharedMemory} {
		size := 1 + r.IntN(1<<16)
		b := alloc(t, dev, kind, uint64(size))
		assert.EqualValues(t, size, b.Size())
		assert.Equal(t, kind, b.Kind())
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(r.Uint32())
		}
		// Two uploads at random offsets, and a source that changes right after each call:
		// Upload must have copied it already.
		cut := r.IntN(size)
		first, second := bytes.Clone(want[:cut]), bytes.Clone(want[cut:])
		require.NoError(t, s.Upload(b, 0, first))
		require.NoError(t, s.Upload(b, uint64(cut), second))
		for i := range first {
			first[i] ^= 0xff
		}
		for i := range second {
			second[i] ^= 0xff
		}
		got := make([]byte, size)
		require.NoError(t, s.Download(got, b, 0))
		require.Equal(t, make([]byte, size), got, "a download is completed by Synchronize, not before")
		require.NoError(t, s.Synchronize())
		require.Equal(t, want, got)
		if kind == native.SharedMemory {
			require.Equal(t, want, b.Bytes(), "the shared view is the memory itself")
		} else {
			require.Nil(t, b.Bytes())
		}
	}
}

func TestSharedViewWritesReachTheDevice(t *testing.T) {
	r := newRand(t)
	dev := openHost(t)
	s := newStream(t, dev)
	shared := alloc(t, dev, native.SharedMemory, 4096)
	local := alloc(t, dev, native.DeviceMemory, 4096)
	want := u32Bytes(randomU32(r, 1024))
	copy(shared.Bytes(), want)
	require.NoError(t, s.Copy(local, 0, shared, 0, 4096))
	require.Equal(t, want, download(t, s, local))
}

func TestFillAndCopyWithOffsets(t *testing.T) {
	r := newRand(t)
	dev := openHost(t)
	s := newStream(t, dev)
	a := alloc(t, dev, native.DeviceMemory, 256)
	b := alloc(t, dev, native.DeviceMemory, 256)
	v := byte(1 + r.IntN(255))
	require.NoError(t, s.Fill(a, 0, 256, 0))
	require.NoError(t, s.Fill(a, 16, 64, v))
	require.NoError(t, s.Fill(b, 0, 256, 0xee))
	require.NoError(t, s.Copy(b, 100, a, 0, 100))
	want := bytes.Repeat([]byte{0xee}, 256)
	copy(want[100:200], append(append(make([]byte, 16), bytes.Repeat([]byte{v}, 64)...), make([]byte, 20)...))
	require.Equal(t, want, download(t, s, b))
}

func TestOutOfRangeIsRefusedWithTheReason(t *testing.T) {
	dev := openHost(t)
	s := newStream(t, dev)
	b := alloc(t, dev, native.DeviceMemory, 64)
	err := s.Upload(b, 60, make([]byte, 8))
	require.ErrorIs(t, err, native.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "outside the buffer of 64 bytes")
	assert.Contains(t, err.Error(), "Stream.Upload")

	err = s.Download(make([]byte, 65), b, 0)
	require.ErrorIs(t, err, native.ErrInvalidArgument)

	err = s.Copy(b, 0, b, 8, 16)
	require.ErrorIs(t, err, native.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "overlap")

	require.ErrorIs(t, s.Upload(nil, 0, nil), native.ErrInvalidArgument)
	require.NoError(t, s.Synchronize(), "refused calls leave the stream healthy")
}

func TestHandlesOfAnotherDeviceAreRefused(t *testing.T) {
	dev1, dev2 := openHost(t), openHost(t)
	s := newStream(t, dev1)
	b := alloc(t, dev2, native.DeviceMemory, 64)
	err := s.Fill(b, 0, 64, 1)
	require.ErrorIs(t, err, native.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "belongs to device")
}

func TestAddKernelMatchesGo(t *testing.T) {
	r := newRand(t)
	dev := openHost(t)
	m := kernels(t, dev)
	add := kernel(t, m, "add_u32")
	s := newStream(t, dev)
	n := 1 + r.IntN(5000) // rarely a multiple of the block size
	x, y := randomU32(r, n), randomU32(r, n)
	bx := alloc(t, dev, native.DeviceMemory, uint64(4*n))
	by := alloc(t, dev, native.DeviceMemory, uint64(4*n))
	bz := alloc(t, dev, native.DeviceMemory, uint64(4*n))
	viol := alloc(t, dev, native.SharedMemory, 4)
	require.NoError(t, s.Fill(viol, 0, 4, 0))
	require.NoError(t, s.Upload(bx, 0, u32Bytes(x)))
	require.NoError(t, s.Upload(by, 0, u32Bytes(y)))
	p := addParams(bx, by, bz, n)
	p.Violation = viol
	require.NoError(t, s.Launch(add, p))
	got := bytesU32(download(t, s, bz))
	for i := range x {
		require.Equal(t, x[i]+y[i], got[i], "element %d", i)
	}
	assert.Equal(t, []byte{0, 0, 0, 0}, viol.Bytes(), "no access was out of bounds")
}

func TestViolationWordCollectsSkippedAccesses(t *testing.T) {
	r := newRand(t)
	dev := openHost(t)
	add := kernel(t, kernels(t, dev), "add_u32")
	s := newStream(t, dev)
	const n = 256
	x := randomU32(r, n)
	bx := alloc(t, dev, native.DeviceMemory, 4*n)
	bz := alloc(t, dev, native.SharedMemory, 4*n)
	viol := alloc(t, dev, native.SharedMemory, 8)
	require.NoError(t, s.Upload(bx, 0, u32Bytes(x)))
	require.NoError(t, s.Fill(bz, 0, 4*n, 0))
	require.NoError(t, s.Fill(viol, 0, 8, 0))
	// z bound 64 elements from its end: the kernel may only write those and must flag the rest.
	p := addParams(bx, bx, bz, n)
	p.Buffers[2].Offset = 4 * (n - 64)
	p.Violation, p.ViolationOffset = viol, 4
	require.NoError(t, s.Launch(add, p))
	require.NoError(t, s.Synchronize())
	got := bytesU32(bz.Bytes())
	for i := 0; i < n; i++ {
		if i >= n-64 {
			require.Equal(t, 2*x[i-(n-64)], got[i], "element %d", i)
		} else {
			require.Zero(t, got[i], "element %d was not bound", i)
		}
	}
	words := bytesU32(viol.Bytes())
	assert.Zero(t, words[0], "the word before the violation offset is untouched")
	assert.EqualValues(t, 1, words[1], "out-of-bounds bit")
}

func TestSharedMemoryScratch(t *testing.T) {
	r := newRand(t)
	dev := openHost(t)
	sum := kernel(t, kernels(t, dev), "block_sum_u32")
	s := newStream(t, dev)
	const block, blocks = 128, 7
	n := block*(blocks-1) + 1 + r.IntN(block-1)
	x := randomU32(r, n)
	bx := alloc(t, dev, native.DeviceMemory, uint64(4*n))
	out := alloc(t, dev, native.DeviceMemory, 4*blocks)
	require.NoError(t, s.Upload(bx, 0, u32Bytes(x)))
	require.NoError(t, s.Launch(sum, native.LaunchParams{
		Grid: native.Dim3{X: blocks}, Block: native.Dim3{X: block}, SharedBytes: 4 * block,
		Buffers: []native.Binding{{Buffer: bx}, {Buffer: out}},
		Scalars: new(native.Scalars).Uint32(uint32(n)).Bytes(),
	}))
	got := bytesU32(download(t, s, out))
	for b := 0; b < blocks; b++ {
		var want uint32
		for i := b * block; i < min(n, (b+1)*block); i++ {
			want += x[i]
		}
		require.Equal(t, want, got[b], "block %d", b)
	}
}

func TestModuleErrors(t *testing.T) {
	dev := openHost(t)
	m := kernels(t, dev)
	_, err := m.Kernel("no_such_kernel")
	require.ErrorIs(t, err, native.ErrNotFound)
	assert.Contains(t, err.Error(), "no_such_kernel")

	_, err = dev.LoadHostStatic("no_such_module", dev.Target())
	require.ErrorIs(t, err, native.ErrNotFound)

	_, err = dev.LoadHostStatic("loom_testkernels", "host-x86_64-v1-not-this-one")
	require.ErrorIs(t, err, native.ErrTargetMismatch)

	_, err = dev.LoadCUDASource("k", []byte("extern \"C\" __global__ void k() {}"), "")
	require.ErrorIs(t, err, native.ErrNotSupported, "the host backend loads no CUDA code")

	err = native.RegisterHostModule("", dev.Target(), nil, 0)
	require.ErrorIs(t, err, native.ErrInvalidArgument)

	k1, err := m.Kernel("add_u32")
	require.NoError(t, err)
	k2, err := m.Kernel("add_u32")
	require.NoError(t, err)
	assert.Same(t, k1, k2)
	assert.Equal(t, "add_u32", k1.Name())
	assert.Same(t, m, k1.Module())
}

// TestHostSharedObject builds a host module as a shared object with the C compiler ($CC, as
// Loom's JIT takes it: the pinned zig cc under Bazel; else the system's cc) and loads it through
// dlopen.
func TestHostSharedObject(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if env := os.Getenv("CC"); env != "" {
		// A compiler that was asked for must be there: no skip.
		cc, err = exec.LookPath(env)
		require.NoError(t, err, "$CC")
	} else if err != nil {
		t.Skip("no C compiler to build a shared object with")
	}
	include := abiIncludeDir()
	if include == "" {
		t.Skip("shim/include/loom/loom.h not found")
	}
	r := newRand(t)
	dev := openHost(t)
	dir := t.TempDir()
	build := func(name, target string) string {
		src := filepath.Join(dir, name+".c")
		so := filepath.Join(dir, name+".so")
		code := `#include <stdint.h>
#include "loom/loom.h"
static void twice(const loom_host_kernel_args* a) {
  uint32_t* v = (uint32_t*)a->buffers[0];
  uint64_t n = a->buffer_bytes[0] / 4;
  for (uint32_t t = 0; t < a->block[0]; t++) {
    uint64_t i = (uint64_t)a->block_id[0] * a->block[0] + t;
    if (i < n) v[i] *= 2;
  }
}
static const loom_host_kernel_entry entries[] = {{"twice", twice}};
const loom_host_kernel_entry* loom_host_module_entries(uint32_t* count, const char** target) {
  *count = 1;
  *target = "` + target + `";
  return entries;
}
`
		require.NoError(t, os.WriteFile(src, []byte(code), 0o600))
		out, err := exec.Command(cc, "-shared", "-fPIC", "-O2", "-I", include, "-o", so, src).CombinedOutput()
		require.NoError(t, err, "%s", out)
		return so
	}

	m, err := dev.LoadHostSharedObject(build("twice", dev.Target()), dev.Target())
	require.NoError(t, err)
	closeLater(t, m)
	twice := kernel(t, m, "twice")
	s := newStream(t, dev)
	v := randomU32(r, 1000)
	b := alloc(t, dev, native.DeviceMemory, 4000)
	require.NoError(t, s.Upload(b, 0, u32Bytes(v)))
	require.NoError(t, s.Launch(twice, native.LaunchParams{
		Grid: native.Dim3{X: 8}, Block: native.Dim3{X: 128}, Buffers: []native.Binding{{Buffer: b}},
	}))
	got := bytesU32(download(t, s, b))
	for i := range v {
		require.Equal(t, 2*v[i], got[i])
	}

	_, err = dev.LoadHostSharedObject(build("other", "host-other-target"), dev.Target())
	require.ErrorIs(t, err, native.ErrTargetMismatch)
	assert.Contains(t, err.Error(), "host-other-target")

	_, err = dev.LoadHostSharedObject(filepath.Join(dir, "missing.so"), dev.Target())
	require.ErrorIs(t, err, native.ErrNotFound)
}

// abiIncludeDir finds the directory holding loom/loom.h: next to this source file under
// `go test`, in the runfiles under Bazel. Empty if neither has it.
func abiIncludeDir() string {
	_, thisFile, _, _ := runtime.Caller(0)
	candidates := []string{filepath.Join(filepath.Dir(thisFile), "..", "..", "shim", "include")}
	if runfiles := os.Getenv("TEST_SRCDIR"); runfiles != "" {
		candidates = append(candidates, filepath.Join(runfiles, os.Getenv("TEST_WORKSPACE"), "shim", "include"))
	}
	for _, dir := range candidates {
		if _, err := os.Stat(filepath.Join(dir, "loom", "loom.h")); err == nil {
			return dir
		}
	}
	return ""
}

func TestCloseIsIdempotentAndLaterUseFails(t *testing.T) {
	dev := openHost(t)
	s, err := dev.NewStream()
	require.NoError(t, err)
	b, err := dev.Alloc(native.SharedMemory, 64)
	require.NoError(t, err)
	ev, err := dev.NewEvent()
	require.NoError(t, err)
	require.NoError(t, b.Close())
	require.NoError(t, b.Close())
	assert.Nil(t, b.Bytes(), "no view of freed memory")
	err = s.Fill(b, 0, 64, 0)
	require.ErrorIs(t, err, native.ErrClosed)
	assert.Contains(t, err.Error(), "buffer #")
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Synchronize(), native.ErrClosed)
	require.ErrorIs(t, s.Record(ev), native.ErrClosed)
	require.NoError(t, ev.Close())
	_, err = ev.Done()
	require.ErrorIs(t, err, native.ErrClosed)
}

func TestDeviceCloseNamesLiveHandles(t *testing.T) {
	dev, err := native.Open(native.BackendHost, 0, nil)
	require.NoError(t, err)
	s, err := dev.NewStream()
	require.NoError(t, err)
	b, err := dev.Alloc(native.DeviceMemory, 16)
	require.NoError(t, err)

	err = dev.Close()
	require.ErrorIs(t, err, native.ErrInUse)
	assert.Contains(t, err.Error(), s.String())
	assert.Contains(t, err.Error(), "buffer #")
	assert.Contains(t, err.Error(), "2 live dependents")

	// Still fully usable after the refusal.
	require.NoError(t, s.Fill(b, 0, 16, 3))
	require.NoError(t, s.Synchronize())

	require.NoError(t, s.Close())
	require.NoError(t, b.Close())
	require.NoError(t, dev.Close())
	require.NoError(t, dev.Close())
	_, err = dev.NewStream()
	require.ErrorIs(t, err, native.ErrClosed)
}

func TestModuleCloseWhileGraphRefersToItsKernel(t *testing.T) {
	dev := openHost(t)
	require.NoError(t, testkernels.Register(dev.Target()))
	m, err := dev.LoadHostStatic(testkernels.Module, dev.Target())
	require.NoError(t, err)
	noop := kernel(t, m, "noop")
	g, err := dev.NewGraph()
	require.NoError(t, err)
	_, err = g.AddKernel(noop, native.LaunchParams{Grid: native.Dim3{X: 1}, Block: native.Dim3{X: 1}})
	require.NoError(t, err)
	err = m.Close()
	require.ErrorIs(t, err, native.ErrInUse)
	assert.Contains(t, err.Error(), g.String())
	require.NoError(t, g.Close())
	require.NoError(t, m.Close())
	s := newStream(t, dev)
	require.ErrorIs(t, s.Launch(noop, native.LaunchParams{Grid: native.Dim3{X: 1}, Block: native.Dim3{X: 1}}), native.ErrClosed)
}

func TestBufferCloseWaitsForWorkUsingIt(t *testing.T) {
	dev := openHost(t)
	sleep := kernel(t, kernels(t, dev), "sleep_write_u32")
	s := newStream(t, dev)
	ev, err := dev.NewEvent()
	require.NoError(t, err)
	closeLater(t, ev)
	b, err := dev.Alloc(native.DeviceMemory, 4)
	require.NoError(t, err)
	require.NoError(t, s.Launch(sleep, sleepWriteParams(b, 30*time.Millisecond, 1)))
	require.NoError(t, s.Record(ev))
	require.NoError(t, b.Close())
	done, err := ev.Done()
	require.NoError(t, err)
	assert.True(t, done, "Close returned while a kernel writing the buffer was still queued")
}

func TestLeakedHandlesAreReportedAndReleased(t *testing.T) {
	dev, err := native.Open(native.BackendHost, 0, nil)
	require.NoError(t, err)
	expectLeak(t, "buffer", func() {
		_, err := dev.Alloc(native.DeviceMemory, 1024)
		require.NoError(t, err)
	})
	expectLeak(t, "stream", func() {
		s, err := dev.NewStream()
		require.NoError(t, err)
		require.NoError(t, s.Synchronize())
	})
	// The backstop released both, so the device closes (once its goroutine got to it).
	require.Eventually(t, func() bool { return dev.Close() == nil }, 10*time.Second, 5*time.Millisecond)
	expectLeak(t, "device", func() {
		_, err := native.Open(native.BackendHost, 0, nil)
		require.NoError(t, err)
	})
}

func TestFaultInjectionFailsTheStreamForGood(t *testing.T) {
	dev := openHost(t)
	s := newStream(t, dev)
	b := alloc(t, dev, native.DeviceMemory, 64)
	require.NoError(t, s.InjectFault(native.FaultNextOperation))
	require.NoError(t, s.Fill(b, 0, 64, 1), "the failure shows on the device, not at enqueue")
	err := s.Synchronize()
	require.ErrorIs(t, err, native.ErrDevice)
	assert.Contains(t, err.Error(), "injected fault")
	require.ErrorIs(t, s.Synchronize(), native.ErrDevice, "sticky")
	err = s.Fill(b, 0, 64, 2)
	require.ErrorIs(t, err, native.ErrDevice)
	assert.Contains(t, err.Error(), "refused")

	s2 := newStream(t, dev)
	require.NoError(t, s2.InjectFault(native.FaultNextSynchronize))
	require.NoError(t, s2.Fill(b, 0, 64, 1))
	require.ErrorIs(t, s2.Synchronize(), native.ErrDevice)

	s3 := newStream(t, dev)
	require.NoError(t, s3.Fill(b, 0, 64, 1))
	require.NoError(t, s3.Synchronize(), "other streams are unaffected")
}

func TestEventsOrderStreams(t *testing.T) {
	r := newRand(t)
	dev := openHost(t)
	sleep := kernel(t, kernels(t, dev), "sleep_write_u32")
	producer, consumer := newStream(t, dev), newStream(t, dev)
	src := alloc(t, dev, native.DeviceMemory, 4)
	dst := alloc(t, dev, native.DeviceMemory, 4)
	start, end := make2Events(t, dev)
	v := r.Uint32() | 1
	require.NoError(t, producer.Fill(src, 0, 4, 0))
	require.NoError(t, producer.Record(start))
	require.NoError(t, producer.Launch(sleep, sleepWriteParams(src, 20*time.Millisecond, v)))
	require.NoError(t, producer.Record(end))
	require.NoError(t, consumer.Wait(end))
	require.NoError(t, consumer.Copy(dst, 0, src, 0, 4))
	require.Equal(t, []uint32{v}, bytesU32(download(t, consumer, dst)), "the copy waited for the producer")
	require.NoError(t, end.Synchronize())
	done, err := end.Done()
	require.NoError(t, err)
	assert.True(t, done)
	elapsed, err := native.Elapsed(start, end)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, elapsed, time.Duration(0))
}

func make2Events(t *testing.T, dev *native.Device) (*native.Event, *native.Event) {
	a, err := dev.NewEvent()
	require.NoError(t, err)
	closeLater(t, a)
	b, err := dev.NewEvent()
	require.NoError(t, err)
	closeLater(t, b)
	return a, b
}

func TestScalarsAreNaturallyAligned(t *testing.T) {
	var s native.Scalars
	s.Uint32(1).Uint64(2).Float32(3).Int32(-4).Float64(5).Int64(-6)
	b := s.Bytes()
	require.Len(t, b, 4+4+8+4+4+8+8)
	assert.Equal(t, []uint32{1, 0}, bytesU32(b[0:8]), "the uint64 starts at offset 8")
	assert.Equal(t, uint32(2), bytesU32(b[8:12])[0])
}

// TestConcurrentUse drives one device from many goroutines, each with its own stream, while
// they share a module and a read-only input buffer.
func TestConcurrentUse(t *testing.T) {
	r := newRand(t)
	dev := openHost(t)
	add := kernel(t, kernels(t, dev), "add_u32")
	const n, workers, rounds = 512, 12, 10
	x := randomU32(r, n)
	shared := alloc(t, dev, native.DeviceMemory, 4*n)
	{
		s := newStream(t, dev)
		require.NoError(t, s.Upload(shared, 0, u32Bytes(x)))
		require.NoError(t, s.Synchronize())
	}
	seeds := randomU32(r, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(seed uint32) {
			defer wg.Done()
			errs <- func() error {
				s, err := dev.NewStream()
				if err != nil {
					return err
				}
				defer s.Close()
				y, err := dev.Alloc(native.DeviceMemory, 4*n)
				if err != nil {
					return err
				}
				defer y.Close()
				z, err := dev.Alloc(native.DeviceMemory, 4*n)
				if err != nil {
					return err
				}
				defer z.Close()
				for round := 0; round < rounds; round++ {
					yv := make([]uint32, n)
					for i := range yv {
						yv[i] = seed*uint32(round+1) + uint32(i)
					}
					if err := s.Upload(y, 0, u32Bytes(yv)); err != nil {
						return err
					}
					if err := s.Launch(add, addParams(shared, y, z, n)); err != nil {
						return err
					}
					got := make([]byte, 4*n)
					if err := s.Download(got, z, 0); err != nil {
						return err
					}
					if err := s.Synchronize(); err != nil {
						return err
					}
					for i, v := range bytesU32(got) {
						if v != x[i]+yv[i] {
							return errors.New("wrong sum")
						}
					}
				}
				return nil
			}()
		}(seeds[w])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// TestConcurrentCloseAndUse races Close against calls on the same handles: every call either
// works or reports ErrClosed, and nothing crashes.
func TestConcurrentCloseAndUse(t *testing.T) {
	dev := openHost(t)
	for round := 0; round < 20; round++ {
		s, err := dev.NewStream()
		require.NoError(t, err)
		b, err := dev.Alloc(native.SharedMemory, 256)
		require.NoError(t, err)
		var wg sync.WaitGroup
		for g := 0; g < 6; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					var err error
					switch (g + i) % 4 {
					case 0:
						err = s.Fill(b, 0, 256, byte(i))
					case 1:
						err = s.Synchronize()
					case 2:
						err = b.Close()
					case 3:
						err = s.Upload(b, 0, make([]byte, 16))
					}
					if err != nil && !errors.Is(err, native.ErrClosed) {
						t.Errorf("unexpected error: %v", err)
					}
				}
			}(g)
		}
		wg.Wait()
		require.NoError(t, b.Close())
		require.NoError(t, s.Close())
	}
}

// The host backend maps buffers of 128 KiB and more from the kernel (and unmaps them when
// freed) rather than taking them from malloc: sizes on both sides of that line, of both kinds,
// hold what is written to them, are 64-byte aligned, and can be freed and allocated again.
func TestHostBuffersAcrossTheMappedSize(t *testing.T) {
	dev := openHost(t)
	s, err := dev.NewStream()
	require.NoError(t, err)
	closeLater(t, s)
	rnd := newRand(t)
	for round := 0; round < 3; round++ {
		for _, size := range []uint64{1, 4096, 128<<10 - 1, 128 << 10, 128<<10 + 1, 3<<20 + 7} {
			for _, kind := range []native.MemoryKind{native.DeviceMemory, native.SharedMemory} {
				b, err := dev.Alloc(kind, size)
				require.NoError(t, err)
				want := make([]byte, size)
				for i := range want {
					want[i] = byte(rnd.Uint32())
				}
				require.NoError(t, s.Upload(b, 0, want))
				got := make([]byte, size)
				require.NoError(t, s.Download(got, b, 0))
				require.NoError(t, s.Synchronize())
				require.Equal(t, want, got, "%d bytes of %s memory", size, kind)
				if kind == native.SharedMemory {
					view := b.Bytes()
					require.Equal(t, want, view)
					require.Zero(t, uintptr(unsafe.Pointer(&view[0]))%64, "%d bytes: the view is not 64-byte aligned", size)
				}
				require.NoError(t, b.Close())
				require.NoError(t, b.Close())
			}
		}
	}
}

// A wrapped Go slice is read by kernels in place (through garbage collections, since it is
// pinned), Bytes is the slice itself, and closing the buffer leaves the slice alone.
func TestWrapHostReadsGoMemoryInPlace(t *testing.T) {
	r := newRand(t)
	dev := openHost(t)
	m := kernels(t, dev)
	s := newStream(t, dev)
	n := 1 + r.IntN(5000)
	x := randomU32(r, n)
	xb := u32Bytes(x)
	wrapped, err := dev.WrapHost(xb)
	require.NoError(t, err)
	require.Equal(t, native.SharedMemory, wrapped.Kind())
	require.Equal(t, uint64(len(xb)), wrapped.Size())
	require.Same(t, &xb[0], &wrapped.Bytes()[0])
	y := alloc(t, dev, native.SharedMemory, uint64(4*n))
	require.NoError(t, s.Upload(y, 0, make([]byte, 4*n)))
	alpha := r.Uint32()
	runtime.GC()
	require.NoError(t, s.Launch(kernel(t, m, "axpy_u32"), axpyParams(wrapped, y, alpha, n)))
	want := make([]uint32, n)
	for i, v := range x {
		want[i] = alpha * v
	}
	require.Equal(t, want, bytesU32(download(t, s, y)))
	require.NoError(t, wrapped.Close())
	require.NoError(t, wrapped.Close())
	require.Equal(t, x, bytesU32(xb), "the slice is the caller's again, unchanged")

	_, err = dev.WrapHost(nil)
	require.ErrorIs(t, err, native.ErrInvalidArgument)
}
