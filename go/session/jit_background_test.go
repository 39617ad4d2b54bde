package session

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/session/internal/exec"
)

// jitMLP is an mlpModel with odd random sizes (rows of x are the batch, symbolic), its
// weights, and a runner comparing its outputs with the reference.
type jitMLP struct {
	in, out int
	w, b    []float32
	s       *InferenceSession
}

func newJITMLP(t *testing.T, rnd *rand.Rand, opts ...LoadOption) *jitMLP {
	t.Helper()
	m := &jitMLP{in: 33 + 2*rnd.IntN(15), out: 21 + 2*rnd.IntN(13)}
	m.w, m.b = randomF32(rnd, m.in*m.out), randomF32(rnd, m.out)
	s, err := FromGraph(mlpModel(t, m.w, m.b, m.in, m.out), append([]LoadOption{WithIntraOpThreads(1)}, opts...)...)
	require.NoError(t, err)
	m.s = s
	return m
}

// run runs rows of random x and checks y against the reference.
func (m *jitMLP) run(t *testing.T, rnd *rand.Rand, rows int) {
	t.Helper()
	x := randomF32(rnd, rows*m.in)
	outs, err := m.s.Run(context.Background(), []NamedTensor{{Name: "x", Tensor: MustTensor([]int64{int64(rows), int64(m.in)}, x)}})
	require.NoError(t, err)
	require.Len(t, outs, 1)
	got := outs[0].Data().([]float32)
	want := mlpReference(x, m.w, m.b, rows, m.in, m.out)
	require.Len(t, got, len(want))
	for i := range want {
		require.InDelta(t, want[i], got[i], 1e-4*math.Max(1, math.Abs(float64(want[i]))), "rows %d, element %d", rows, i)
	}
}

// planOf is the report of the plan whose signature has rows rows.
func (m *jitMLP) planOf(t *testing.T, rows int) PlanReport {
	t.Helper()
	sig := fmt.Sprintf("x: tensor(float)[%d,%d]", rows, m.in)
	for _, r := range m.s.ExecutionPlans() {
		if r.Signature == sig {
			return r
		}
	}
	t.Fatalf("no plan for %s", sig)
	return PlanReport{}
}

// generic says whether the plan's kernel steps include shape-generic stand-ins.
func generic(r PlanReport) bool {
	for _, n := range r.Nodes {
		if n.Step == PlanKernel && strings.Contains(n.Reason, "shape-generic") {
			return true
		}
	}
	return false
}

// deferredRows runs batches of 1.. rows until one's first run queues a background compile (its
// exact kernels are not shipped, its shape-generic ones are) and returns it.
func (m *jitMLP) deferredRows(t *testing.T, rnd *rand.Rand) int {
	t.Helper()
	for rows := 1; rows <= 64; rows++ {
		m.run(t, rnd, rows)
		if m.s.CacheStats().Background.Queued > 0 {
			return rows
		}
	}
	t.Fatalf("no batch of 1..64 rows of a %dx%d product needed a kernel that is not shipped while its shape-generic kernels are: %+v", m.in, m.out, m.s.CacheStats())
	return 0
}

// A signature whose exact kernels are not shipped runs its first run with the shape-generic
// shipped kernels and no compile on the run path; the exact kernels compile in the
// background, and once they are loaded the signature's next run plans it again with them,
// still without compiling on the run path. Outputs match the reference throughout.
func TestBackgroundJITFirstRunDoesNotCompile(t *testing.T) {
	t.Setenv("LOOM_CACHE_DIR", t.TempDir()) // cold: every kernel not shipped needs the C compiler
	rnd := inferRand()
	m := newJITMLP(t, rnd)
	defer m.s.Close()
	rows := m.deferredRows(t, rnd)
	st := m.s.CacheStats()
	require.Zero(t, st.Run.Compiles, "a kernel was compiled on the run path")
	require.Empty(t, st.JITUnavailable)
	require.Positive(t, st.ProvisionalPlans)
	require.True(t, generic(m.planOf(t, rows)), "the provisional plan runs shape-generic kernels: %+v", m.planOf(t, rows).Nodes)
	m.run(t, rnd, rows) // the provisional plan

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, m.s.waitBackground(ctx))
	st = m.s.CacheStats()
	require.Equal(t, st.Background.Queued, st.Background.Done, "%+v", st.Background)
	require.Zero(t, st.Background.Failed)
	require.Positive(t, st.Background.Compiles, "the cold cache had none of the exact kernels")

	m.run(t, rnd, rows) // planned again, with the exact kernels
	m.run(t, rnd, rows)
	after := m.s.CacheStats()
	require.Zero(t, after.Run.Compiles, "the exact kernels were loaded by the background compiler")
	require.Equal(t, st.Background, after.Background, "nothing more to compile")
	require.Positive(t, after.ReplannedPlans)
	r := m.planOf(t, rows)
	require.True(t, r.Planned, r.Reason)
	require.False(t, generic(r), "the plan still runs shape-generic kernels: %+v", r.Nodes)
}

// A stand-in for a product whose weight the session holds packed reads that weight unpacked,
// a second copy until the plan is replaced. When the exact kernels are in the disk cache (a
// process restarted over it), the first run loads them instead: no stand-in, nothing queued,
// no compile. The first session's stand-ins and the second's exact kernels agree.
func TestDiskCachedKernelsServePackedWeightsFirstRun(t *testing.T) {
	t.Setenv("LOOM_CACHE_DIR", t.TempDir())
	rnd := inferRand()
	const k, n, rows = 768, 768, 40
	w, bias := randomF32(rnd, k*n), randomF32(rnd, n)
	model := weightProductModel(t, w, bias, k, n, false, 2)
	feeds := []NamedTensor{{Name: "x", Tensor: MustTensor([]int64{rows, k}, randomF32(rnd, rows*k))}}

	first, err := FromGraph(model, WithIntraOpThreads(1))
	require.NoError(t, err)
	defer first.Close()
	want, err := first.Run(context.Background(), feeds)
	require.NoError(t, err)
	require.Positive(t, first.CacheStats().Background.Queued, "the exact kernels compile in the background")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, first.waitBackground(ctx))

	later, err := FromGraph(model, WithIntraOpThreads(1))
	require.NoError(t, err)
	defer later.Close()
	got, err := later.Run(context.Background(), feeds)
	require.NoError(t, err)
	st := later.CacheStats()
	require.Zero(t, st.Background.Queued, "%+v", st.Background)
	require.Zero(t, st.Run.Compiles, "loaded from the disk cache, not compiled")
	require.Zero(t, st.ProvisionalPlans)
	for _, r := range later.ExecutionPlans() {
		require.True(t, r.Planned, r.Reason)
		require.False(t, generic(r), "a stand-in served the packed weight: %+v", r.Nodes)
	}
	wv, gv := want[0].Data().([]float32), got[0].Data().([]float32)
	require.Len(t, gv, len(wv))
	for i := range wv {
		require.InDelta(t, wv[i], gv[i], 1e-4*math.Max(1, math.Abs(float64(wv[i]))), "element %d", i)
	}
}

// The sync policy compiles on the run path (today's behaviour), off never compiles (only shipped
// kernels run, the JIT reported unavailable), and the policy's name is checked.
func TestJITPolicies(t *testing.T) {
	t.Setenv("LOOM_CACHE_DIR", t.TempDir())
	rnd := inferRand()
	seed := rnd.Uint64()
	// The same sizes and batches for the three sessions.
	mk := func(policy string) *jitMLP {
		return newJITMLP(t, rand.New(rand.NewPCG(seed, 1)), WithOption(OptionJIT, policy))
	}
	bg := mk("background")
	defer bg.s.Close()
	rows := bg.deferredRows(t, rnd)

	syn := mk("sync")
	defer syn.s.Close()
	for r := 1; r <= rows; r++ {
		syn.run(t, rnd, r)
	}
	st := syn.s.CacheStats()
	require.Positive(t, st.Run.Compiles, "the sync policy compiles on the run path")
	require.Zero(t, st.Background.Queued)
	require.Zero(t, st.ProvisionalPlans)
	require.False(t, generic(syn.planOf(t, rows)))

	off := mk("off")
	defer off.s.Close()
	for r := 1; r <= rows; r++ {
		off.run(t, rnd, r)
	}
	st = off.s.CacheStats()
	require.Zero(t, st.Run.Compiles)
	require.Zero(t, st.Background.Queued)
	require.Contains(t, st.JITUnavailable, "loom.jit=off")
	require.True(t, generic(off.planOf(t, rows)), "without the JIT the shape-generic kernels serve")

	_, err := FromGraph(mlpModel(t, syn.w, syn.b, syn.in, syn.out), WithOption(OptionJIT, "later"))
	require.ErrorContains(t, err, "must be background, sync or off")
}

// Closing a session while the background compiler works stops it (the compile in flight is
// cancelled, nothing is loaded afterwards) and waits for it: no native handle leaks (TestMain
// checks), no race (go test -race), and nothing is counted as failed.
func TestBackgroundJITCloseWhileCompiling(t *testing.T) {
	t.Setenv("LOOM_CACHE_DIR", t.TempDir())
	rnd := inferRand()
	// The first background compile waits for the worker's context: Close must cancel it.
	started, cancelled := make(chan struct{}), make(chan struct{})
	var once sync.Once
	defer exec.SetBackgroundHook(func(ctx context.Context) {
		first := false
		once.Do(func() { first = true })
		if !first {
			return
		}
		close(started)
		<-ctx.Done()
		close(cancelled)
	})()
	m := newJITMLP(t, rnd)
	m.deferredRows(t, rnd)
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("no background compile started")
	}
	require.NoError(t, m.s.Close())
	select {
	case <-cancelled:
	default:
		t.Fatal("Close returned before the compile in flight was cancelled")
	}
	st := m.s.CacheStats()
	require.Zero(t, st.Background.Failed, "%+v", st.Background)
	require.Zero(t, st.Background.Done, "%+v", st.Background)
	// Nothing runs after Close: the counters stay.
	time.Sleep(20 * time.Millisecond)
	require.Equal(t, st.Background, m.s.CacheStats().Background)

	// The hook lets the later compiles through: a Close right after the first runs (the
	// worker usually mid-compile).
	for range 2 {
		m := newJITMLP(t, rnd)
		m.deferredRows(t, rnd)
		require.NoError(t, m.s.Close())
		st := m.s.CacheStats()
		require.Zero(t, st.Background.Failed, "%+v", st.Background)
		require.LessOrEqual(t, st.Background.Done, st.Background.Queued)
	}
}

// Concurrent runs of different shapes while the background compiler loads their kernels
// (go test -race): every output matches the reference, and after the compiles every
// signature is planned with its exact kernels.
func TestBackgroundJITConcurrentShapes(t *testing.T) {
	t.Setenv("LOOM_CACHE_DIR", t.TempDir())
	rnd := inferRand()
	m := newJITMLP(t, rnd)
	defer m.s.Close()
	const workers, shapes = 4, 12
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	for w := range workers {
		wg.Add(1)
		r := rand.New(rand.NewPCG(rnd.Uint64(), uint64(w)))
		go func() {
			defer wg.Done()
			for i := range 3 * shapes {
				rows := 1 + (i*7+w*5)%shapes
				x := randomF32(r, rows*m.in)
				outs, err := m.s.Run(context.Background(), []NamedTensor{{Name: "x", Tensor: MustTensor([]int64{int64(rows), int64(m.in)}, x)}})
				if err != nil {
					errs <- err.Error()
					return
				}
				got, want := outs[0].Data().([]float32), mlpReference(x, m.w, m.b, rows, m.in, m.out)
				for j := range want {
					if math.Abs(float64(got[j]-want[j])) > 1e-4*math.Max(1, math.Abs(float64(want[j]))) {
						errs <- fmt.Sprintf("rows %d element %d: %v, want %v", rows, j, got[j], want[j])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, m.s.waitBackground(ctx))
	for rows := 1; rows <= shapes; rows++ {
		m.run(t, rnd, rows)
		m.run(t, rnd, rows)
		r := m.planOf(t, rows)
		require.True(t, r.Planned, r.Reason)
		require.False(t, generic(r), "rows %d: %+v", rows, r.Nodes)
	}
	require.Zero(t, m.s.CacheStats().Background.Failed)
}

// A session's JIT stops at OptionJITMaxKernels modules: past it, new batch sizes run on what
// is loaded or shipped (shape-generic stand-ins, host functions), their outputs still the
// reference's, and CacheStats says why the JIT is off.
func TestJITMaxKernels(t *testing.T) {
	t.Setenv("LOOM_CACHE_DIR", t.TempDir())
	rnd := inferRand()
	seed := rnd.Uint64()
	mk := func(opts ...LoadOption) *jitMLP {
		return newJITMLP(t, rand.New(rand.NewPCG(seed, 1)), append([]LoadOption{WithOption(OptionJIT, "sync")}, opts...)...)
	}
	free := mk()
	defer free.s.Close()
	const rows = 24
	for r := 1; r <= rows; r++ {
		free.run(t, rnd, r)
	}
	if all := free.s.CacheStats(); all.JITKernels < 2 {
		t.Skipf("batches 1-%d loaded %d compiled kernels: %+v", rows, all.JITKernels, all)
	}

	capped := mk(WithOption(OptionJITMaxKernels, "1"))
	defer capped.s.Close()
	for r := 1; r <= rows; r++ {
		capped.run(t, rnd, r)
	}
	st := capped.s.CacheStats()
	require.Contains(t, st.JITUnavailable, "loaded 1 kernels compiled at run time, its limit (session option loom.jit_max_kernels)")
	require.Equal(t, int64(1), st.JITKernels, "one module built by the JIT, no more: %+v", st)
	for r := 1; r <= rows; r++ {
		capped.run(t, rnd, r) // the plans of every batch size, once more
	}

	for _, bad := range []string{"0", "-3", "many", ""} {
		_, err := FromGraph(mlpModel(t, free.w, free.b, free.in, free.out), WithOption(OptionJITMaxKernels, bad))
		require.ErrorContains(t, err, "loom.jit_max_kernels must be a positive integer", "%q", bad)
	}
}
