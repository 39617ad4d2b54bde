package native_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/native"
)

// modelState is a session state: device buffers charged to the Runtime, and a drop counter
// (Close) for the session's drop semantics.
type modelState struct {
	rt      *native.Runtime
	add     *native.Kernel
	x, y, z *native.Buffer
	n       int
	drops   *atomic.Int32
}

func (m *modelState) Close() error {
	m.drops.Add(1)
	return errors.Join(m.x.Close(), m.y.Close(), m.z.Close())
}

func newModelState(t *testing.T, rt *native.Runtime, add *native.Kernel, n int) modelState {
	t.Helper()
	st := modelState{rt: rt, add: add, n: n, drops: new(atomic.Int32)}
	var err error
	st.x, err = rt.Alloc(native.DeviceMemory, uint64(4*n))
	require.NoError(t, err)
	st.y, err = rt.Alloc(native.DeviceMemory, uint64(4*n))
	require.NoError(t, err)
	st.z, err = rt.Alloc(native.DeviceMemory, uint64(4*n))
	require.NoError(t, err)
	return st
}

// sum is a stage: z = x + y on the compute lane, read back after the lanes drained.
func sumStage(xv, yv []uint32) func(*modelState) ([]uint32, error) {
	return func(m *modelState) ([]uint32, error) {
		if err := m.rt.Upload(m.x, 0, u32Bytes(xv)); err != nil {
			return nil, err
		}
		if err := m.rt.Upload(m.y, 0, u32Bytes(yv)); err != nil {
			return nil, err
		}
		if err := m.rt.Launch(m.add, addParams(m.x, m.y, m.z, m.n)); err != nil {
			return nil, err
		}
		out := make([]byte, 4*m.n)
		if err := m.rt.Download(out, m.z, 0); err != nil {
			return nil, err
		}
		if err := m.rt.Synchronize(); err != nil {
			return nil, err
		}
		return bytesU32(out), nil
	}
}

type countingFence struct {
	calls atomic.Int32
	fail  func() error
}

func (f *countingFence) fence(rt *native.Runtime) func(*modelState) error {
	return func(*modelState) error {
		f.calls.Add(1)
		if f.fail != nil {
			return f.fail()
		}
		return rt.SynchronizeLane(native.Compute)
	}
}

// openHostForQuarantine opens a host device for a test that quarantines a session: what the
// quarantine retains keeps the device in use for the life of the process, so it is not closed.
func openHostForQuarantine(t *testing.T) *native.Device {
	t.Helper()
	dev, err := native.Open(native.BackendHost, 0, &native.OpenOptions{WorkerThreads: 2})
	require.NoError(t, err)
	return dev
}

func setup(t *testing.T) (*native.Runtime, *native.Kernel) {
	dev := openHost(t)
	add := kernel(t, kernels(t, dev), "add_u32")
	return newRuntime(t, dev, nil), add
}

func TestSessionRunsStagesAndFencesEveryExit(t *testing.T) {
	r := newRand(t)
	rt, add := setup(t)
	const n = 300
	var f countingFence
	sess, err := native.New(rt, newModelState(t, rt, add, n), f.fence(rt))
	require.NoError(t, err)

	// Success.
	xv, yv := randomU32(r, n), randomU32(r, n)
	got, err := native.Run(sess, sumStage(xv, yv))
	require.NoError(t, err)
	for i := range got {
		require.Equal(t, xv[i]+yv[i], got[i])
	}
	assert.EqualValues(t, 1, f.calls.Load())

	// A client error is returned as is and harms nothing.
	clientErr := errors.New("client: bad request")
	_, err = native.Run(sess, func(*modelState) (int, error) { return 0, clientErr })
	require.ErrorIs(t, err, clientErr)
	assert.EqualValues(t, 2, f.calls.Load())

	// A panic is re-raised after the fence ran.
	require.PanicsWithValue(t, "stage exploded", func() {
		_, _ = native.Run(sess, func(*modelState) (int, error) { panic("stage exploded") })
	})
	assert.EqualValues(t, 3, f.calls.Load())
	_, err = sess.State()
	require.NoError(t, err, "State after a panicking stage")

	// runtime.Goexit (t.FailNow in a stage, say) is fenced too.
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = native.Run(sess, func(*modelState) (int, error) { runtime.Goexit(); return 0, nil })
	}()
	<-done
	assert.EqualValues(t, 4, f.calls.Load())
	_, err = sess.State()
	require.NoError(t, err, "State after a stage that called runtime.Goexit")

	// Still healthy after all of that.
	xv, yv = randomU32(r, n), randomU32(r, n)
	got, err = native.Run(sess, sumStage(xv, yv))
	require.NoError(t, err)
	assert.Equal(t, xv[0]+yv[0], got[0])
	assert.EqualValues(t, 5, f.calls.Load())
	st, err := sess.State()
	require.NoError(t, err)
	assert.Equal(t, n, st.n)

	// Close drops the state once.
	drops := st.drops
	require.NoError(t, sess.Close())
	require.NoError(t, sess.Close())
	assert.EqualValues(t, 1, drops.Load())
	_, err = native.Run(sess, sumStage(xv, yv))
	require.ErrorIs(t, err, native.ErrClosed)
	_, err = sess.State()
	require.ErrorIs(t, err, native.ErrClosed)
	assert.EqualValues(t, 5, f.calls.Load(), "no stage, no fence")
	assert.EqualValues(t, 0, rt.Charged(), "the dropped state freed its buffers")
}

// A fence that really fails (the compute stream's synchronize reports a device fault)
// quarantines the session for good; its state and charges are retained, and the Runtime's
// other sessions keep working on a fresh compute lane.
func TestFailingFenceQuarantinesTheSession(t *testing.T) {
	r := newRand(t)
	dev := openHostForQuarantine(t)
	add := kernel(t, kernels(t, dev), "add_u32")
	rt, err := native.NewRuntime(dev, nil)
	require.NoError(t, err)
	const n = 64
	var f countingFence
	victim, err := native.New(rt, newModelState(t, rt, add, n), f.fence(rt))
	require.NoError(t, err)
	var g countingFence
	bystander, err := native.New(rt, newModelState(t, rt, add, n), g.fence(rt))
	require.NoError(t, err)
	charged := rt.Charged()
	require.EqualValues(t, 2*3*4*n, charged)
	oldCompute := rt.Stream(native.Compute)

	st, err := victim.State()
	require.NoError(t, err)
	drops := st.drops
	_, err = native.Run(victim, func(m *modelState) (int, error) {
		// The device will report a failure at the next synchronize: the fence.
		if err := rt.Stream(native.Compute).InjectFault(native.FaultNextSynchronize); err != nil {
			return 0, err
		}
		return 0, m.rt.Launch(m.add, addParams(m.x, m.y, m.z, m.n))
	})
	require.ErrorIs(t, err, native.ErrDeviceLost)
	require.ErrorIs(t, err, native.ErrDevice, "the fence's failure is kept as the cause")
	assert.Contains(t, err.Error(), "injected fault")
	assert.EqualValues(t, 1, f.calls.Load())
	assert.Equal(t, 1, rt.Quarantined())

	// Every later Run, State and Close report the loss; no stage or fence runs.
	ran := false
	_, err = native.Run(victim, func(*modelState) (int, error) { ran = true; return 0, nil })
	require.ErrorIs(t, err, native.ErrDeviceLost)
	assert.False(t, ran)
	assert.EqualValues(t, 1, f.calls.Load())
	_, err = victim.State()
	require.ErrorIs(t, err, native.ErrDeviceLost)
	require.ErrorIs(t, victim.Close(), native.ErrDeviceLost)
	assert.EqualValues(t, 0, drops.Load(), "a quarantined state is never dropped")
	assert.Equal(t, charged, rt.Charged(), "its charges stay")
	assert.NotSame(t, oldCompute, rt.Stream(native.Compute), "the failed compute stream was retired")

	// The other session on the Runtime is unaffected.
	xv, yv := randomU32(r, n), randomU32(r, n)
	got, err := native.Run(bystander, sumStage(xv, yv))
	require.NoError(t, err)
	for i := range got {
		require.Equal(t, xv[i]+yv[i], got[i])
	}
	assert.EqualValues(t, 1, g.calls.Load())
	require.NoError(t, bystander.Close())
	require.NoError(t, rt.Close())
	// The device stays busy with what the quarantine retained.
	require.ErrorIs(t, dev.Close(), native.ErrInUse)
}

func TestPanickingFenceQuarantinesAndPanics(t *testing.T) {
	dev := openHostForQuarantine(t)
	rt, err := native.NewRuntime(dev, nil)
	require.NoError(t, err)
	sess, err := native.New(rt, 7, func(*int) error { panic("fence exploded") })
	require.NoError(t, err)
	require.PanicsWithValue(t, "fence exploded", func() {
		_, _ = native.Run(sess, func(*int) (int, error) { return 1, nil })
	})
	_, err = native.Run(sess, func(*int) (int, error) { return 1, nil })
	require.ErrorIs(t, err, native.ErrDeviceLost)
	assert.Contains(t, err.Error(), "fence panicked: fence exploded")

	// A stage panic and a fence panic: the stage's panic is the one re-raised.
	sess2, err := native.New(rt, 7, func(*int) error { panic("fence exploded") })
	require.NoError(t, err)
	require.PanicsWithValue(t, "stage exploded", func() {
		_, _ = native.Run(sess2, func(*int) (int, error) { panic("stage exploded") })
	})
	_, err = sess2.State()
	require.ErrorIs(t, err, native.ErrDeviceLost)
	assert.Equal(t, 2, rt.Quarantined())
	require.NoError(t, rt.Close())
	require.ErrorIs(t, dev.Close(), native.ErrInUse)
}

func TestNestedRunIsBusyNotDeadlocked(t *testing.T) {
	dev := openHost(t)
	noop := kernel(t, kernels(t, dev), "noop")
	rt := newRuntime(t, dev, nil)
	outer, inner := newIntSession(t, rt), newIntSession(t, rt)
	_, err := native.Run(outer, func(*int) (int, error) {
		_, err := native.Run(inner, func(*int) (int, error) { return 0, nil })
		require.ErrorIs(t, err, native.ErrBusy)
		assert.Contains(t, err.Error(), "nested")
		_, err = native.Run(outer, func(*int) (int, error) { return 0, nil })
		require.ErrorIs(t, err, native.ErrBusy)
		// The stage's own compute work is not nested admission: it goes straight through.
		return 0, rt.Launch(noop, native.LaunchParams{Grid: native.Dim3{X: 1}, Block: native.Dim3{X: 1}})
	})
	require.NoError(t, err)
	// And the inner session is fine afterwards.
	v, err := native.Run(inner, func(p *int) (int, error) { *p = 5; return *p, nil })
	require.NoError(t, err)
	assert.Equal(t, 5, v)
}

// Many goroutines run stages on many sessions of one Runtime: stages never overlap, each
// session's state sees its own stages only, and every stage is fenced exactly once.
func TestConcurrentSessions(t *testing.T) {
	r := newRand(t)
	rt, add := setup(t)
	const sessions, goroutinesPerSession, runs, n = 4, 4, 8, 128
	var fences, inStage, maxInStage atomic.Int32
	type state struct {
		model modelState
		count int
	}
	all := make([]*native.NativeSession[state], sessions)
	for i := range all {
		s, err := native.New(rt, state{model: newModelState(t, rt, add, n)}, func(*state) error {
			fences.Add(1)
			return rt.SynchronizeLane(native.Compute)
		})
		require.NoError(t, err)
		all[i] = s
	}
	seeds := randomU32(r, sessions*goroutinesPerSession)
	var wg sync.WaitGroup
	for i, sess := range all {
		for g := 0; g < goroutinesPerSession; g++ {
			wg.Add(1)
			go func(sess *native.NativeSession[state], seed uint32) {
				defer wg.Done()
				for k := 0; k < runs; k++ {
					xv := make([]uint32, n)
					yv := make([]uint32, n)
					for j := range xv {
						xv[j], yv[j] = seed+uint32(j), seed*uint32(k+1)
					}
					got, err := native.Run(sess, func(st *state) ([]uint32, error) {
						if now := inStage.Add(1); now > maxInStage.Load() {
							maxInStage.Store(now)
						}
						defer inStage.Add(-1)
						st.count++
						return sumStage(xv, yv)(&st.model)
					})
					if !assert.NoError(t, err) {
						return
					}
					for j := range got {
						if got[j] != xv[j]+yv[j] {
							t.Errorf("wrong sum at %d", j)
							return
						}
					}
				}
			}(sess, seeds[i*goroutinesPerSession+g])
		}
	}
	wg.Wait()
	assert.EqualValues(t, sessions*goroutinesPerSession*runs, fences.Load())
	assert.EqualValues(t, 1, maxInStage.Load(), "stages hold the compute lane exclusively")
	for _, sess := range all {
		st, err := sess.State()
		require.NoError(t, err)
		assert.Equal(t, goroutinesPerSession*runs, st.count)
		require.NoError(t, st.model.Close())
		require.NoError(t, sess.Close())
	}
}

// counterState is a state a stage writes continually while it runs.
type counterState struct{ n int }

func newCounterSession(t *testing.T, rt *native.Runtime, fence func(*counterState) error) *native.NativeSession[counterState] {
	t.Helper()
	if fence == nil {
		fence = func(*counterState) error { return rt.SynchronizeLane(native.Compute) }
	}
	s, err := native.New(rt, counterState{}, fence)
	require.NoError(t, err)
	closeLater(t, s)
	return s
}

// requireStateBusy checks that State refuses with ErrBusy. Should it hand out the state, the
// state is read, which the race detector reports while a stage is writing it.
func requireStateBusy(t *testing.T, s *native.NativeSession[counterState]) {
	t.Helper()
	st, err := s.State()
	if err == nil {
		t.Fatalf("State returned the state (n=%d) while a stage owns it", st.n)
	}
	require.ErrorIs(t, err, native.ErrBusy)
	var e *native.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "NativeSession.State", e.Op)
	assert.Contains(t, err.Error(), "a stage of the session is running")
}

// waitFor polls cond until it holds, failing the test after 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// While a stage runs, State is ErrBusy from another goroutine (the stage keeps writing the
// state meanwhile, so a pointer handed out would race) and from the stage itself; once the
// Run returned it is the state again.
func TestStateIsBusyWhileAStageRuns(t *testing.T) {
	rt, _ := setup(t)
	sess := newCounterSession(t, rt, nil)
	entered, release := make(chan struct{}), make(chan struct{})
	stop := sync.OnceFunc(func() { close(release) })
	t.Cleanup(stop) // after the session's Close, so it runs first: a failing test still ends the stage
	var inside error
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := native.Run(sess, func(st *counterState) (int, error) {
			_, inside = sess.State()
			close(entered)
			for {
				st.n++ // at least once after entered: unordered with what the test does then
				select {
				case <-release:
					return st.n, nil
				default:
					runtime.Gosched()
				}
			}
		})
		done <- result{n, err}
	}()
	<-entered
	requireStateBusy(t, sess)
	requireStateBusy(t, sess)
	stop()
	r := <-done
	require.NoError(t, r.err)
	require.ErrorIs(t, inside, native.ErrBusy, "State from inside the stage")
	require.Positive(t, r.n)

	st, err := sess.State()
	require.NoError(t, err, "State after the Run returned")
	assert.Equal(t, r.n, st.n)
}

// The fence belongs to the Run: State is busy until it has run.
func TestStateIsBusyDuringTheFence(t *testing.T) {
	rt, _ := setup(t)
	fenceEntered, releaseFence := make(chan struct{}), make(chan struct{})
	stop := sync.OnceFunc(func() { close(releaseFence) })
	var block atomic.Bool
	sess := newCounterSession(t, rt, func(st *counterState) error {
		if block.Load() {
			close(fenceEntered)
			<-releaseFence
		}
		st.n++
		return rt.SynchronizeLane(native.Compute)
	})
	t.Cleanup(stop) // after the session's Close, so it runs first: a failing test still ends the fence
	block.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := native.Run(sess, func(st *counterState) (int, error) { st.n++; return 0, nil })
		done <- err
	}()
	<-fenceEntered
	requireStateBusy(t, sess)
	stop()
	require.NoError(t, <-done)
	st, err := sess.State()
	require.NoError(t, err)
	assert.Equal(t, 2, st.n, "the stage and the fence each counted once")
}

// A Run still waiting for admission (queued behind another session's stage) has not started:
// its session's State is not busy. A second Run of the session whose stage runs does not
// change that session's answer either.
func TestStateOfAQueuedRunIsNotBusy(t *testing.T) {
	rt, _ := setup(t)
	running, queued := newCounterSession(t, rt, nil), newCounterSession(t, rt, nil)
	entered, release := make(chan struct{}), make(chan struct{})
	stop := sync.OnceFunc(func() { close(release) })
	t.Cleanup(stop)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := native.Run(running, func(*counterState) (int, error) {
			close(entered)
			<-release
			return 0, nil
		})
		errs <- err
	}()
	<-entered
	for _, s := range []*native.NativeSession[counterState]{queued, running} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := native.Run(s, func(st *counterState) (int, error) { st.n++; return 0, nil })
			errs <- err
		}()
	}
	waitFor(t, "both Runs wait for admission", func() bool { return rt.Queued() == 3 })

	st, err := queued.State()
	require.NoError(t, err, "a queued Run does not make State busy")
	assert.Equal(t, 0, st.n)
	requireStateBusy(t, running)

	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, s := range []*native.NativeSession[counterState]{queued, running} {
		st, err := s.State()
		require.NoError(t, err)
		assert.Equal(t, 1, st.n)
	}
}

// A stage holds the compute lane only: an upload and a download on the same Runtime, from
// another goroutine, complete while the stage waits for them.
func TestUploadAndDownloadCompleteWhileAStageRuns(t *testing.T) {
	r := newRand(t)
	rt, _ := setup(t)
	sess := newIntSession(t, rt)
	const n = 256
	buf := rtAlloc(t, rt, native.DeviceMemory, 4*n)
	want := u32Bytes(randomU32(r, n))
	got := make([]byte, len(want))
	_, err := native.Run(sess, func(*int) (int, error) {
		done := make(chan error, 1)
		go func() {
			err := rt.Upload(buf, 0, want)
			if err == nil {
				err = rt.Download(got, buf, 0)
			}
			if err == nil {
				err = rt.SynchronizeLane(native.Download)
			}
			done <- err
		}()
		select {
		case err := <-done:
			return 0, err
		case <-time.After(10 * time.Second):
			return 0, errors.New("the upload and download did not complete within 10s while the stage held the compute lane")
		}
	})
	require.NoError(t, err)
	assert.Equal(t, want, got, "the download read what the upload wrote")
}
