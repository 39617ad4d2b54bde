package session

import (
	"context"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/tensor"
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
		s.eng.RunSessions.Mu.Lock()
		defer s.eng.RunSessions.Mu.Unlock()
		var total uint64
		for _, ms := range s.eng.RunSessions.Idle {
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
	// The exact kernels those runs queued for the background compiler load when they land
	// (from the disk cache, in milliseconds): the count is taken once they have.
	require.NoError(t, s.waitBackground(context.Background()))
	s.eng.Kernels.Mu.Lock()
	kernels, modules := len(s.eng.Kernels.Kernels), len(s.eng.Kernels.Modules)
	s.eng.Kernels.Mu.Unlock()
	require.Positive(t, kernels, "the first run loaded the model's kernels")
	assert.LessOrEqual(t, modules, kernels)
	assert.Equal(t, pooled(), s.eng.Ctx.Charged(), "the run's device memory was freed")

	for rows := 1; rows <= 4; rows++ {
		require.NoError(t, check(rows, randomF32(rnd, rows*in)))
	}
	var wg sync.WaitGroup
	errs := make([]error, 2*exec.MaxIdleRunSessions)
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
	s.eng.Kernels.Mu.Lock()
	assert.Equal(t, kernels, len(s.eng.Kernels.Kernels), "later runs compiled nothing new")
	assert.Equal(t, modules, len(s.eng.Kernels.Modules), "later runs loaded no module")
	s.eng.Kernels.Mu.Unlock()
	s.eng.RunSessions.Mu.Lock()
	idle := len(s.eng.RunSessions.Idle)
	s.eng.RunSessions.Mu.Unlock()
	assert.Positive(t, idle, "finished runs keep their ModelSession")
	assert.LessOrEqual(t, idle, exec.MaxIdleRunSessions)
	assert.Equal(t, pooled(), s.eng.Ctx.Charged(), "no run's device memory outlives it")

	require.NoError(t, s.Close())
	assert.Empty(t, s.eng.RunSessions.Idle, "Close closes the idle sessions")
	assert.Empty(t, s.eng.Kernels.Modules, "Close unloads the modules")
	assert.Zero(t, s.eng.Ctx.Charged(), "Close freed the idle sessions' buffers")
	require.NoError(t, s.Close(), "Close is idempotent")
}

// TestResetForReuseRefusesEarlierRegions checks that a reset ModelSession frees its memory and
// refuses the regions and kernels of its earlier use instead of resolving them anew.
func TestResetForReuseRefusesEarlierRegions(t *testing.T) {
	s, err := FromGraph(mlpModel(t, randomF32(inferRand(), 4), randomF32(inferRand(), 2), 2, 2), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	rc := testRunCtx(s, 13)
	defer rc.Close()
	ms, k, err := rc.Compile("elementwise.loom", "unary", map[string]string{"OP": "0"})
	require.NoError(t, err)
	r, err := ms.Allocate(64)
	require.NoError(t, err)
	require.NoError(t, ms.Upload(r, make([]byte, 64)))
	assert.Equal(t, uint64(64), s.eng.Ctx.Charged())

	require.NoError(t, device.ResetForReuse(ms, "test"))
	assert.Zero(t, s.eng.Ctx.Charged(), "reset freed the allocation")
	assert.ErrorIs(t, ms.Upload(r, make([]byte, 64)), tensor.ErrInvalidArgument, "a region of the earlier use is refused")
	_, err = ms.LaunchConfig(k, []uint64{1})
	assert.ErrorIs(t, err, tensor.ErrInvalidArgument, "a kernel id of the earlier use is refused")
	r2, err := ms.Allocate(32)
	require.NoError(t, err, "the reset session still works")
	assert.NoError(t, ms.Upload(r2, make([]byte, 32)))
}
