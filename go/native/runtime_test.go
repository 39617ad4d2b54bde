package native_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/native"
)

func newRuntime(t testing.TB, dev *native.Device, opts *native.RuntimeOptions) *native.Runtime {
	t.Helper()
	rt, err := native.NewRuntime(dev, opts)
	require.NoError(t, err)
	closeLater(t, rt)
	return rt
}

// rtAlloc allocates through the Runtime (charged), closing the buffer when the test ends.
func rtAlloc(t testing.TB, rt *native.Runtime, kind native.MemoryKind, bytes uint64) *native.Buffer {
	t.Helper()
	b, err := rt.Alloc(kind, bytes)
	require.NoError(t, err)
	closeLater(t, b)
	return b
}

// A download on the Download lane must wait for a slow kernel writing the buffer on the
// Compute lane (read after write across lanes).
func TestRuntimeDownloadWaitsForComputeWrite(t *testing.T) {
	r := newRand(t)
	dev := openHost(t)
	sleep := kernel(t, kernels(t, dev), "sleep_write_u32")
	rt := newRuntime(t, dev, nil)
	b := rtAlloc(t, rt, native.DeviceMemory, 4)
	require.NoError(t, rt.Fill(b, 0, 4, 0))
	v := r.Uint32() | 1
	require.NoError(t, rt.Launch(sleep, sleepWriteParams(b, 30*time.Millisecond, v)))
	got := make([]byte, 4)
	require.NoError(t, rt.Download(got, b, 0))
	require.NoError(t, rt.Synchronize())
	assert.Equal(t, []uint32{v}, bytesU32(got))
}

// An upload must wait for a slow kernel still writing the same buffer (write after write).
func TestRuntimeUploadWaitsForComputeWrite(t *testing.T) {
	r := newRand(t)
	dev := openHost(t)
	sleep := kernel(t, kernels(t, dev), "sleep_write_u32")
	rt := newRuntime(t, dev, nil)
	b := rtAlloc(t, rt, native.SharedMemory, 16)
	data := randomU32(r, 4)
	require.NoError(t, rt.Launch(sleep, sleepWriteParams(b, 30*time.Millisecond, ^data[0])))
	require.NoError(t, rt.Upload(b, 0, u32Bytes(data)))
	require.NoError(t, rt.Synchronize())
	assert.Equal(t, data, bytesU32(b.Bytes()))
}

// An upload must wait for a download still queued behind slow work to read the old contents
// (write after read).
func TestRuntimeUploadWaitsForPendingRead(t *testing.T) {
	r := newRand(t)
	dev := openHost(t)
	sleep := kernel(t, kernels(t, dev), "sleep_write_u32")
	rt := newRuntime(t, dev, nil)
	slow := rtAlloc(t, rt, native.DeviceMemory, 4)
	b := rtAlloc(t, rt, native.DeviceMemory, 64)
	old, fresh := u32Bytes(randomU32(r, 16)), u32Bytes(randomU32(r, 16))
	require.NoError(t, rt.Upload(b, 0, old))
	require.NoError(t, rt.Synchronize())
	// The Download lane is held up behind the slow kernel...
	require.NoError(t, rt.Launch(sleep, sleepWriteParams(slow, 30*time.Millisecond, 1)))
	slowOut := make([]byte, 4)
	require.NoError(t, rt.Download(slowOut, slow, 0))
	// ...so this read of b is still pending when the upload overwrites b.
	got := make([]byte, 64)
	require.NoError(t, rt.Download(got, b, 0))
	require.NoError(t, rt.Upload(b, 0, fresh))
	require.NoError(t, rt.Synchronize())
	assert.Equal(t, old, got, "the download saw the contents from before the upload")
	assert.Equal(t, []uint32{1}, bytesU32(slowOut))
	after := make([]byte, 64)
	require.NoError(t, rt.Download(after, b, 0))
	require.NoError(t, rt.Synchronize())
	assert.Equal(t, fresh, after)
}

// A pipeline reusing the same buffers across iterations: upload x, z = x + y, download z. Each
// iteration's upload must wait for the previous kernel to have read x, each kernel for its
// upload, each download for its kernel.
func TestRuntimePipelineAcrossLanes(t *testing.T) {
	r := newRand(t)
	dev := openHost(t)
	add := kernel(t, kernels(t, dev), "add_u32")
	rt := newRuntime(t, dev, nil)
	const n, iterations = 1 << 15, 12
	x := rtAlloc(t, rt, native.DeviceMemory, 4*n)
	y := rtAlloc(t, rt, native.DeviceMemory, 4*n)
	z := rtAlloc(t, rt, native.DeviceMemory, 4*n)
	yv := randomU32(r, n)
	require.NoError(t, rt.Upload(y, 0, u32Bytes(yv)))
	inputs := make([][]uint32, iterations)
	outputs := make([][]byte, iterations)
	for it := range inputs {
		inputs[it] = randomU32(r, n)
		outputs[it] = make([]byte, 4*n)
		require.NoError(t, rt.Upload(x, 0, u32Bytes(inputs[it])))
		require.NoError(t, rt.Launch(add, addParams(x, y, z, n)))
		require.NoError(t, rt.Download(outputs[it], z, 0))
	}
	require.NoError(t, rt.Synchronize())
	for it := range inputs {
		got := bytesU32(outputs[it])
		for i := range got {
			require.Equal(t, inputs[it][i]+yv[i], got[i], "iteration %d element %d", it, i)
		}
	}
}

func TestRuntimeChargesAllocations(t *testing.T) {
	dev := openHost(t)
	rt := newRuntime(t, dev, &native.RuntimeOptions{MemoryLimit: 1000})
	a, err := rt.Alloc(native.DeviceMemory, 600)
	require.NoError(t, err)
	assert.EqualValues(t, 600, rt.Charged())
	_, err = rt.Alloc(native.DeviceMemory, 500)
	require.ErrorIs(t, err, native.ErrOutOfMemory)
	assert.Contains(t, err.Error(), "memory limit of 1000 bytes")
	assert.EqualValues(t, 600, rt.Charged(), "a refused allocation charges nothing")
	require.NoError(t, a.Close())
	assert.EqualValues(t, 0, rt.Charged())
	b := rtAlloc(t, rt, native.DeviceMemory, 1000)
	assert.EqualValues(t, b.Size(), rt.Charged())
}

// blockingSession returns a session whose stage signals started and then waits for release.
func blockingStage(started chan<- struct{}, release <-chan struct{}) func(*int) (int, error) {
	return func(*int) (int, error) {
		close(started)
		<-release
		return 0, nil
	}
}

func fenceLane(rt *native.Runtime) func(*int) error {
	return func(*int) error { return rt.SynchronizeLane(native.Compute) }
}

func newIntSession(t testing.TB, rt *native.Runtime) *native.NativeSession[int] {
	s, err := native.New(rt, 0, fenceLane(rt))
	require.NoError(t, err)
	closeLater(t, s)
	return s
}

// With the capacity reached, submissions are refused with ErrBusy instead of queueing, and the
// queued ones all complete once the running stage ends.
func TestRuntimeAdmissionCapacity(t *testing.T) {
	dev := openHost(t)
	noop := kernel(t, kernels(t, dev), "noop")
	rt := newRuntime(t, dev, &native.RuntimeOptions{Capacity: 3})
	sess := newIntSession(t, rt)
	started, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := native.Run(sess, blockingStage(started, release))
		errs <- err
	}()
	<-started
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, err := native.Run(sess, func(*int) (int, error) { return 1, nil })
		errs <- err
	}()
	go func() {
		defer wg.Done()
		errs <- rt.Launch(noop, native.LaunchParams{Grid: native.Dim3{X: 1}, Block: native.Dim3{X: 1}})
	}()
	require.Eventually(t, func() bool { return rt.Queued() == 3 }, 10*time.Second, time.Millisecond)

	_, err := native.Run(sess, func(*int) (int, error) { return 0, nil })
	require.ErrorIs(t, err, native.ErrBusy)
	assert.Contains(t, err.Error(), "capacity")
	err = rt.Launch(noop, native.LaunchParams{Grid: native.Dim3{X: 1}, Block: native.Dim3{X: 1}})
	require.ErrorIs(t, err, native.ErrBusy)
	assert.Equal(t, 3, rt.Queued(), "refused submissions take no place")

	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, 0, rt.Queued())
}

// Compute work is admitted in order: a stage waiting behind a running one goes before compute
// submitted after it, which waits rather than overtaking.
func TestRuntimeAdmissionIsFIFO(t *testing.T) {
	dev := openHost(t)
	noop := kernel(t, kernels(t, dev), "noop")
	rt := newRuntime(t, dev, nil)
	sess := newIntSession(t, rt)
	var mu sync.Mutex
	var order []string
	note := func(s string) {
		mu.Lock()
		order = append(order, s)
		mu.Unlock()
	}
	started, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		_, err := native.Run(sess, func(*int) (int, error) {
			note("first stage")
			close(started)
			<-release
			return 0, nil
		})
		assert.NoError(t, err)
	}()
	<-started
	go func() {
		defer wg.Done()
		_, err := native.Run(sess, func(*int) (int, error) {
			note("waiting stage")
			return 0, nil
		})
		assert.NoError(t, err)
	}()
	require.Eventually(t, func() bool { return rt.Queued() == 2 }, 10*time.Second, time.Millisecond)
	go func() {
		defer wg.Done()
		assert.NoError(t, rt.Launch(noop, native.LaunchParams{Grid: native.Dim3{X: 1}, Block: native.Dim3{X: 1}}))
		note("later launch")
	}()
	require.Eventually(t, func() bool { return rt.Queued() == 3 }, 10*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	assert.Equal(t, []string{"first stage", "waiting stage", "later launch"}, order)
}

// Compute submitted before a stage has finished by the time the stage runs.
func TestRuntimeStageStartsOnADrainedLane(t *testing.T) {
	r := newRand(t)
	dev := openHost(t)
	sleep := kernel(t, kernels(t, dev), "sleep_write_u32")
	rt := newRuntime(t, dev, nil)
	out := rtAlloc(t, rt, native.SharedMemory, 4)
	require.NoError(t, rt.Fill(out, 0, 4, 0))
	v := r.Uint32() | 1
	require.NoError(t, rt.Launch(sleep, sleepWriteParams(out, 30*time.Millisecond, v)))
	sess := newIntSession(t, rt)
	seen, err := native.Run(sess, func(*int) (uint32, error) {
		return bytesU32(out.Bytes())[0], nil
	})
	require.NoError(t, err)
	assert.Equal(t, v, seen)
}

func TestRuntimeCloseIsIdempotentAndFinal(t *testing.T) {
	dev := openHost(t)
	rt, err := native.NewRuntime(dev, nil)
	require.NoError(t, err)
	b, err := rt.Alloc(native.DeviceMemory, 16)
	require.NoError(t, err)
	require.NoError(t, rt.Upload(b, 0, make([]byte, 16)))
	require.NoError(t, rt.Close())
	require.NoError(t, rt.Close())
	require.ErrorIs(t, rt.Upload(b, 0, make([]byte, 16)), native.ErrClosed)
	require.ErrorIs(t, rt.Fill(b, 0, 16, 0), native.ErrClosed)
	require.ErrorIs(t, rt.Synchronize(), native.ErrClosed)
	require.NoError(t, b.Close())
}
