package session_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph/opt"
	"github.com/loomrt/loom/go/session"
)

// TestMSQuantModelsMatchOnnxRuntime runs the models of testdata/msquant (made by
// tools/onnx/msquant_models.py with onnx 1.22.0: com.microsoft MatMulNBits over several
// shapes, 4- and 8-bit, with and without zero points and bias, K not a multiple of the block
// size, M = 1 and M > 1; GatherBlockQuantized; and two GPT-style decoders, a decode step and a
// prefill, whose linear layers are 4-bit MatMulNBits and whose embedding is a 4-bit
// GatherBlockQuantized) on their inputs and compares every output with ONNX Runtime 1.30's
// (CPU provider), within the real models' tolerance (rtol 1e-3, atol 1e-4), at every
// optimization level and on the cuda stand-in. On the host, every MatMulNBits and
// GatherBlockQuantized node runs as Loom kernels in the compiled plan, but for the forms the
// kernels do not take (hostOnlyMSQuant), which run their host functions.
func TestMSQuantModelsMatchOnnxRuntime(t *testing.T) {
	dirs, err := filepath.Glob("testdata/msquant/*")
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			forLevels(t, func(t *testing.T, setup realSetup) {
				checkAgainstRefs(t, filepath.Join(dir, "model.onnx"), dir, setup)
				if setup.StandIn || setup.CUDA || setup.Level != opt.LevelAll {
					return
				}
				s := loadReal(t, filepath.Join(dir, "model.onnx"), setup)
				feeds := npyFeeds(t, dir)
				run(t, s, feeds...)
				plans := s.ExecutionPlans()
				require.NotEmpty(t, plans)
				if reason, ok := hostOnlyMSQuant[filepath.Base(dir)]; ok {
					require.Len(t, plans[0].HostSteps, 1)
					assert.Contains(t, plans[0].HostSteps[0].Reason, reason)
					return
				}
				for _, h := range plans[0].HostSteps {
					assert.NotContains(t, []string{"MatMulNBits", "GatherBlockQuantized"}, h.OpType, "%s runs on the host: %s", h.Node, h.Reason)
				}
				assert.Positive(t, plans[0].KernelSteps)
			})
		})
	}
}

// hostOnlyMSQuant: the cases of testdata/msquant whose node the kernels leave to its host
// function, with the planner's reason.
var hostOnlyMSQuant = map[string]string{
	"mm_float_zp":                "float ones",
	"mm_g_idx_float_zp":          "float ones",
	"mm_g_idx_nozp":              "g_idx (act-order) runs on the host",
	"gbq_int4_axis1_zp":          "not int4 data",
	"gbq_uint4_axis0_nozp":       "not uint4 data",
	"gbq_uint4_rank3_gather1_zp": "not uint4 data",
}

func npyFeeds(t *testing.T, dir string) []session.NamedTensor {
	t.Helper()
	inputs, err := filepath.Glob(filepath.Join(dir, "*.npy"))
	require.NoError(t, err)
	var feeds []session.NamedTensor
	for _, f := range inputs {
		name := filepath.Base(f)
		feeds = append(feeds, session.NamedTensor{Name: name[:len(name)-len(".npy")], Tensor: readNpy(t, f)})
	}
	_, err = os.Stat(filepath.Join(dir, "ref"))
	require.NoError(t, err)
	return feeds
}
