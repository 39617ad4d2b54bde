package session

import (
	"context"
	"math"
	"sync"
	"testing"

	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/tensor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInferenceSessionReusesKernelsAndRunSessions runs a model many times, in turn and at
// once, and checks that every result matches the reference, that the kernels were compiled and
// loaded once for all runs, that finished runs' ModelSessions are pooled (bounded) and that
// no run's device memory outlives it.
func TestInferenceSessionReusesKernelsAndRunSessions(t *testing.T) {
	rnd := inferRand()
	const in, out = 12, 5
	w, b := randomF32(rnd, in*out), randomF32(rnd, out)
	// The interpreter's per-run sessions are what this test watches; compiled plans keep
	// their arenas by design (plan_test.go).
	s, err := FromGraph(mlpModel(t, w, b, in, out), WithExecutionProvider(ProviderHost), WithOption(OptionRunPlan, "0"))
	require.NoError(t, err)
	defer s.Close()
	check := func(rows int, x []float32) error {
		res, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{int64(rows), in}, x)}})
		if err != nil {
			return err
		}
		got, err := tensor.TensorOf[float32](res[0])
		if err != nil {
			return err
		}
		for i, v := range mlpReference(x, w, b, rows, in, out) {
			if math.Abs(float64(v-got[i])) > 1e-5 {
				return assert.AnError
			}
		}
		return nil
	}
	// pooled holds the bytes idle sessions keep: their readback buffers, nothing of the runs.
	pooled := func() uint64 {
		s.eng.runSessions.mu.Lock()
		defer s.eng.runSessions.mu.Unlock()
		var total uint64
		for _, ms := range s.eng.runSessions.idle {
			assert.Empty(t, device.Allocations(ms), "an idle session holds no allocation")
			total += device.ReadbackBytes(ms)
		}
		return total
	}
	// Kernels may be specialized by shape class, so every row count the test uses runs once
	// before the kernels are counted.
	for rows := 1; rows <= 4; rows++ {
		require.NoError(t, check(rows, randomF32(rnd, rows*in)))
	}
	s.eng.kernels.mu.Lock()
	kernels, modules := len(s.eng.kernels.kernels), len(s.eng.kernels.modules)
	s.eng.kernels.mu.Unlock()
	require.Positive(t, kernels, "the first run loaded the model's kernels")
	assert.LessOrEqual(t, modules, kernels)
	assert.Equal(t, pooled(), s.eng.ctx.Charged(), "the run's device memory was freed")

	for rows := 1; rows <= 4; rows++ {
		require.NoError(t, check(rows, randomF32(rnd, rows*in)))
	}
	var wg sync.WaitGroup
	errs := make([]error, 2*maxIdleRunSessions)
	for g := range errs {
		rows := g%3 + 1
		x := randomF32(rnd, rows*in)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				if errs[g] = check(rows, x); errs[g] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	for g, err := range errs {
		assert.NoError(t, err, "goroutine %d", g)
	}
	s.eng.kernels.mu.Lock()
	assert.Equal(t, kernels, len(s.eng.kernels.kernels), "later runs compiled nothing new")
	assert.Equal(t, modules, len(s.eng.kernels.modules), "later runs loaded no module")
	s.eng.kernels.mu.Unlock()
	s.eng.runSessions.mu.Lock()
	idle := len(s.eng.runSessions.idle)
	s.eng.runSessions.mu.Unlock()
	assert.Positive(t, idle, "finished runs keep their ModelSession")
	assert.LessOrEqual(t, idle, maxIdleRunSessions)
	assert.Equal(t, pooled(), s.eng.ctx.Charged(), "no run's device memory outlives it")

	require.NoError(t, s.Close())
	assert.Empty(t, s.eng.runSessions.idle, "Close closes the idle sessions")
	assert.Empty(t, s.eng.kernels.modules, "Close unloads the modules")
	assert.Zero(t, s.eng.ctx.Charged(), "Close freed the idle sessions' buffers")
	require.NoError(t, s.Close(), "Close is idempotent")
}

// TestResetForReuseRefusesEarlierRegions checks that a reset ModelSession frees its memory and
// refuses the regions and kernels of its earlier use instead of resolving them anew.
func TestResetForReuseRefusesEarlierRegions(t *testing.T) {
	s, err := FromGraph(mlpModel(t, randomF32(inferRand(), 4), randomF32(inferRand(), 2), 2, 2), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	rc := testRunCtx(s, 13)
	defer rc.close()
	ms, k, err := rc.compile("elementwise.loom", "unary", map[string]string{"OP": "0"})
	require.NoError(t, err)
	r, err := ms.Allocate(64)
	require.NoError(t, err)
	require.NoError(t, ms.Upload(r, make([]byte, 64)))
	assert.Equal(t, uint64(64), s.eng.ctx.Charged())

	require.NoError(t, device.ResetForReuse(ms, "test"))
	assert.Zero(t, s.eng.ctx.Charged(), "reset freed the allocation")
	assert.ErrorIs(t, ms.Upload(r, make([]byte, 64)), tensor.ErrInvalidArgument, "a region of the earlier use is refused")
	_, err = ms.LaunchConfig(k, []uint64{1})
	assert.ErrorIs(t, err, tensor.ErrInvalidArgument, "a kernel id of the earlier use is refused")
	r2, err := ms.Allocate(32)
	require.NoError(t, err, "the reset session still works")
	assert.NoError(t, ms.Upload(r2, make([]byte, 32)))
}
