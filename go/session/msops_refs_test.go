package session_test

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph/opt"
	"github.com/loomrt/loom/go/session"
)

// msOpsTolerance is how close each case of testdata/msops must come to ONNX Runtime's outputs,
// by case-name prefix: |got - want| <= atol + rtol·|want|. Loom's host functions compute in
// float64 and its kernels in float32; ONNX Runtime computes in float32 with its own exp, erf
// and tanh approximations, and sums attention in blocks.
var msOpsTolerance = []struct {
	prefix     string
	atol, rtol float64
}{
	{"skip_", 2e-5, 1e-5},
	{"simplified_", 2e-5, 1e-5},
	{"fast_gelu", 2e-5, 1e-5},
	{"bias_gelu", 2e-5, 1e-5},
	{"rotary_", 1e-5, 1e-5},
	{"mha_", 1e-5, 1e-5},
	{"gqa_", 1e-5, 1e-5},
	{"function_", 1e-6, 1e-6},
}

// TestMSOpsMatchOnnxRuntime runs the models of testdata/msops (made by
// tools/onnx/msops_models.py with onnx 1.22.0 and onnxruntime 1.30.0: one node each of
// com.microsoft SkipLayerNormalization, SkipSimplifiedLayerNormalization, FastGelu, BiasGelu,
// RotaryEmbedding, MultiHeadAttention and GroupQueryAttention, and ai.onnx
// SimplifiedLayerNormalization, over their attribute and input variants; and a model calling
// model-local functions, nested, with an attribute reference and a default) on their inputs
// and compares every output that has a reference with ONNX Runtime's (CPU provider), at every
// optimization level and on the cuda stand-in.
func TestMSOpsMatchOnnxRuntime(t *testing.T) {
	dirs, err := filepath.Glob("testdata/msops/*")
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	for _, dir := range dirs {
		name := filepath.Base(dir)
		atol, rtol := -1.0, 0.0
		for _, tol := range msOpsTolerance {
			if strings.HasPrefix(name, tol.prefix) {
				atol, rtol = tol.atol, tol.rtol
			}
		}
		require.GreaterOrEqual(t, atol, 0.0, "%s: no tolerance for this case", name)
		t.Run(name, func(t *testing.T) {
			forLevels(t, func(t *testing.T, setup realSetup) {
				s := loadReal(t, filepath.Join(dir, "model.onnx"), setup)
				outs := run(t, s, npyFeeds(t, dir)...)
				refs, err := filepath.Glob(filepath.Join(dir, "ref", "*.npy"))
				require.NoError(t, err)
				require.NotEmpty(t, refs)
				for _, ref := range refs {
					out := strings.TrimSuffix(filepath.Base(ref), ".npy")
					got, ok := outs[out]
					require.True(t, ok, "no output %q", out)
					requireWithin(t, out, got, readNpy(t, ref), atol, rtol)
				}
			})
		})
	}
}

// requireWithin checks got against want elementwise: |got - want| <= atol + rtol·|want|, and
// logs the largest error.
func requireWithin(t *testing.T, what string, got, want session.Tensor, atol, rtol float64) {
	t.Helper()
	require.Equal(t, want.Shape(), got.Shape(), "%s: shape", what)
	g, err := session.TensorOf[float32](got)
	require.NoError(t, err, what)
	w, err := session.TensorOf[float32](want)
	require.NoError(t, err, what)
	worst, bad, first := 0.0, 0, -1
	for i := range w {
		d := math.Abs(float64(g[i]) - float64(w[i]))
		if math.IsNaN(d) {
			d = math.Inf(1)
		}
		worst = math.Max(worst, d)
		if d > atol+rtol*math.Abs(float64(w[i])) {
			if first < 0 {
				first = i
			}
			bad++
		}
	}
	t.Logf("%s %s: max abs error %.3g over %d elements", t.Name(), what, worst, len(w))
	if bad > 0 {
		t.Fatalf("%s: %d of %d elements off (atol %g, rtol %g); first at %d: got %g, want %g", what, bad, len(w), atol, rtol, first, g[first], w[first])
	}
}

// The com.microsoft nodes of testdata/msops that have kernel planners run as Loom kernels in
// the host provider's compiled plan (at every optimization level, their plan's steps for them
// are kernel steps), but for the cases the planners leave to the host function.
func TestMSOpsRunAsKernels(t *testing.T) {
	kernelOps := map[string]bool{"SkipLayerNormalization": true, "SkipSimplifiedLayerNormalization": true, "SimplifiedLayerNormalization": true,
		"FastGelu": true, "BiasGelu": true, "MultiHeadAttention": true, "RotaryEmbedding": true, "GroupQueryAttention": true}
	hostCases := map[string]string{"rotary_partial_offset": "a start position fed at run time"}
	dirs, err := filepath.Glob("testdata/msops/*")
	require.NoError(t, err)
	for _, dir := range dirs {
		if hostCases[filepath.Base(dir)] != "" {
			continue
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			for _, level := range []opt.Level{opt.LevelDisabled, opt.LevelAll} {
				s := loadReal(t, filepath.Join(dir, "model.onnx"), realSetup{Level: level})
				run(t, s, npyFeeds(t, dir)...)
				plans := s.ExecutionPlans()
				require.NotEmpty(t, plans)
				for _, n := range plans[0].Nodes {
					if kernelOps[n.OpType] {
						assert.Equal(t, session.PlanKernel, n.Step, "%s (%s) at %s: %s", n.Node, n.OpType, level, n.Reason)
					}
				}
			}
		})
	}
}

// Every kernel the planners of testdata/msops's ops pick is shipped (kernels/aot): with no C
// compiler, nothing is compiled and no op falls back to its host function for want of one.
func TestMSOpsKernelsShipped(t *testing.T) {
	t.Setenv("CC", filepath.Join(t.TempDir(), "no-cc"))
	t.Setenv("LOOM_CACHE_DIR", t.TempDir())
	dirs, err := filepath.Glob("testdata/msops/*")
	require.NoError(t, err)
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			for _, level := range []opt.Level{opt.LevelDisabled, opt.LevelAll} {
				s := loadReal(t, filepath.Join(dir, "model.onnx"), realSetup{Level: level})
				for range 2 { // the interpreter, then the compiled plan
					run(t, s, npyFeeds(t, dir)...)
				}
				st := s.CacheStats()
				assert.Zero(t, st.NotShipped, "%s: an op ran as its host function for want of a kernel", level)
				assert.Zero(t, st.Run.Compiles+st.Warmup.Compiles, "%s: a kernel was compiled", level)
			}
		})
	}
}
