package session

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// runShipped is the one place this file runs a session (one line to change with the Run API).
func runShipped(ctx context.Context, s *InferenceSession, feeds []tensor.NamedTensor) ([]tensor.Tensor, error) {
	return s.Run(ctx, feeds)
}

// TestShippedKernelsWithoutACompiler runs a model with no C compiler: the shipped kernels serve
// it, the JIT's absence is reported in CacheStats and never an error, and with the shipped
// kernels ignored (LOOM_AOT=off) every kernel op runs as its host function, in the interpreter
// and in the compiled run plan, saying why.
func TestShippedKernelsWithoutACompiler(t *testing.T) {
	t.Setenv("CC", filepath.Join(t.TempDir(), "no-cc"))
	t.Setenv("LOOM_CACHE_DIR", t.TempDir())
	rnd := inferRand()
	const in, out = 6, 4
	w, b := randomF32(rnd, in*out), randomF32(rnd, out)
	for _, off := range []bool{false, true} {
		t.Run(map[bool]string{false: "shipped", true: "aot_off"}[off], func(t *testing.T) {
			defer func(was bool) { exec.AotOff = was }(exec.AotOff)
			exec.AotOff = off
			tp, rec := recordingProvider(t)
			s, err := FromGraph(mlpModel(t, w, b, in, out), WithExecutionProvider(ProviderHost), WithTracerProvider(tp))
			require.NoError(t, err)
			defer s.Close()
			// Runs are traced under the caller's span.
			ctx, request := tp.Tracer("test").Start(context.Background(), "request")
			const rows = 3
			for range 3 { // the interpreter, then the compiled run plan
				x := randomF32(rnd, rows*in)
				outs, err := runShipped(ctx, s, []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{rows, in}, x)}})
				require.NoError(t, err)
				got, err := tensor.TensorOf[float32](outs[0])
				require.NoError(t, err)
				want := mlpReference(x, w, b, rows, in, out)
				for i := range want {
					assert.InDelta(t, want[i], got[i], 1e-5)
				}
			}
			request.End()
			st := s.CacheStats()
			t.Logf("cache stats: %+v", st)
			assert.Contains(t, st.JITUnavailable, "no-cc")
			shipped := st.Warmup.Shipped + st.Run.Shipped
			assert.Zero(t, st.Run.Compiles+st.Warmup.Compiles)
			// The trace says so once a run, on the run's span; the ops that fell back say why.
			runs, fellBack := 0, 0
			for _, sp := range rec.Ended() {
				for _, kv := range sp.Attributes() {
					switch {
					case sp.Name() == "loom.Run" && kv.Key == exec.AttrJITUnavailable:
						runs++
					case kv.Key == exec.AttrReason && strings.Contains(kv.Value.AsString(), "not shipped"):
						fellBack++
					}
				}
			}
			assert.Equal(t, 3, runs)
			if off {
				assert.Positive(t, fellBack)
			}
			if !off {
				assert.Positive(t, shipped, "Add, Relu and Softmax ship")
				return
			}
			assert.Zero(t, shipped)
			assert.Positive(t, st.NotShipped)
			for _, p := range s.ExecutionPlans() {
				for _, h := range p.HostSteps {
					if h.OpType != "MatMul" && h.OpType != "Add" && h.OpType != "Relu" && h.OpType != "Softmax" {
						continue
					}
					assert.True(t, strings.Contains(h.Reason, "not shipped") && strings.Contains(h.Reason, "JIT is unavailable"), "%s: %s", h.Node, h.Reason)
				}
			}
		})
	}
}
