package exec

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/sessiontest"
	"github.com/loomrt/loom/go/session/internal/tensor"
	"github.com/loomrt/loom/kernels/aot"
)

func TestMain(m *testing.M) { sessiontest.Main(m) }

// The modules the JIT builds for a session stop at MaxJITModules: a specialization asked for
// past it is not compiled (on the run path or in the background) and fails with the reason,
// which the session reports as the JIT's unavailability from then on; the kernels loaded
// before it, and the shipped ones, are still served.
func TestJITModulesStopAtTheSessionsLimit(t *testing.T) {
	dev := sessiontest.OpenHost(t, 1)
	mctx, err := device.NewContext(dev, device.Unlimited)
	require.NoError(t, err)
	defer func() { require.NoError(t, mctx.Close()) }()
	comp, err := mctx.Compiler()
	require.NoError(t, err)
	if err := comp.Loom.JIT(comp.Target); err != nil {
		t.Skipf("no JIT here: %v", err)
	}
	c := &KernelCache{Policy: JITSync, MaxJITModules: 2}
	defer func() { require.Empty(t, joinErrs(c.Close())) }()

	// pool2d_rows with channel blocks that no shipped variant has: each one a module of its
	// own, as a shape-dependent specialization is.
	cfg := func(ch int) map[string]string {
		return map[string]string{"MAX": "true", "KH": "2", "KW": "2", "SH": "2", "SW": "2", "VL": "8", "CH": strconv.Itoa(ch)}
	}
	for _, ch := range []int{37, 41, 43, 47} {
		src, err := SourceOf("linalg.loom", "pool2d_rows", cfg(ch))
		require.NoError(t, err)
		require.Nil(t, LookupShipped(src, comp.Target), "CH=%d is not shipped", ch)
	}
	for _, ch := range []int{37, 41} {
		k, err := c.Get(mctx, PhaseRun, "linalg.loom", "pool2d_rows", cfg(ch))
		require.NoError(t, err, "CH=%d", ch)
		require.NotNil(t, k)
	}
	require.Equal(t, 2, c.jitModules)
	require.Empty(t, c.jitUnavailable(), "at the limit, not past it")

	_, err = c.Get(mctx, PhaseRun, "linalg.loom", "pool2d_rows", cfg(43))
	require.Error(t, err)
	require.ErrorIs(t, err, tensor.ErrCompile)
	require.Contains(t, err.Error(), "loaded 2 kernels compiled at run time, its limit")
	require.Contains(t, c.jitUnavailable(), "loom.jit_max_kernels", "the session says why the JIT is off")
	require.Equal(t, 2, c.jitModules)
	require.Len(t, c.Modules, 2, "nothing more was loaded")

	// What was loaded is still served, and so are shipped kernels.
	_, err = c.Get(mctx, PhaseRun, "linalg.loom", "pool2d_rows", cfg(41))
	require.NoError(t, err)
	var shipped *aot.Variant
	for _, v := range aot.Variants() {
		if v.Target == comp.Target.String() && v.File == "linalg.loom" {
			shipped = v
			break
		}
	}
	if shipped != nil && !AotOff {
		_, err = c.Get(mctx, PhaseRun, shipped.File, shipped.Symbol, shipped.Config)
		require.NoError(t, err, "a shipped kernel needs no JIT")
	}

	// The background worker does not compile past the limit either.
	before := comp.Loom.Stats().Misses
	err = c.compileBackground(context.Background(), mctx, bgJob{key: "k47", file: "linalg.loom", symbol: "pool2d_rows", config: cfg(47)})
	require.ErrorContains(t, err, "its limit")
	require.Equal(t, before, comp.Loom.Stats().Misses, "no compile was started")
	require.Len(t, c.Modules, 2+boolInt(shipped != nil && !AotOff))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func joinErrs(errs []error) []error {
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}
