package infer

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/loomrt/loom/go/graph"
	"github.com/stretchr/testify/require"
)

// The helpers below are go/graph's test helpers, for this package's white-box tests.

func f32(shape ...int64) graph.Type { return graph.TensorType(graph.Float, graph.ShapeOf(shape...)) }

// buildModel makes a model from nodes with opset 17 unless given.
func buildModel(t testing.TB, inputs, outputs []*graph.Value, nodes []*graph.Node, inits []*graph.Tensor, opset ...int64) *graph.Model {
	t.Helper()
	g := &graph.Graph{Name: "g", Inputs: inputs, Outputs: outputs, Nodes: nodes}
	for _, in := range inits {
		g.AddInitializer(in)
	}
	v := int64(17)
	if len(opset) > 0 {
		v = opset[0]
	}
	m, err := graph.FromGraph("test", g, map[string]int64{"": v})
	require.NoError(t, err)
	return m
}

// roundTrip serializes a model and loads it back.
func roundTrip(t testing.TB, m *graph.Model) *graph.Model {
	t.Helper()
	data, err := m.Marshal()
	require.NoError(t, err)
	back, err := graph.LoadBytesWithOptions(data, graph.LoadOptions{Name: m.Name})
	require.NoError(t, err)
	return back
}

// nodeTestRoot is where Debian's libonnx-testdata puts the ONNX node tests (ONNX 1.12).
// LOOM_ONNX_NODE_TESTS names another node-test directory instead, such as the one in the onnx
// 1.22.0 wheel (onnx/backend/test/data/node).
const nodeTestRoot = "/usr/share/libonnx-testdata/data/node"

func nodeTestDir() string {
	if d := os.Getenv("LOOM_ONNX_NODE_TESTS"); d != "" {
		return d
	}
	return nodeTestRoot
}

// globNodeTests lists the node-test models, none when the package is missing.
func globNodeTests() ([]string, error) {
	return filepath.Glob(filepath.Join(nodeTestDir(), "*", "model.onnx"))
}

// nodeTestModels lists the node-test models, skipping the test when the package is missing.
func nodeTestModels(t testing.TB) []string {
	t.Helper()
	dirs, _ := globNodeTests()
	if len(dirs) == 0 {
		t.Skipf("ONNX node tests not installed at %s (apt-get install -y libonnx-testdata)", nodeTestDir())
	}
	sort.Strings(dirs)
	return dirs
}

// testDirName names a node test by its directory.
func testDirName(path string) string { return filepath.Base(filepath.Dir(path)) }

// referenceModels lists the real models available: the small generated ones committed in
// go/session/testdata/models, the ones tools/models/fetch.sh puts in $LOOM_MODELS_DIR (default
// ~/.cache/loom-models), and any in LOOM_ONNX_MODELS (a directory of .onnx files). None is
// required.
func referenceModels() []string {
	var out []string
	dirs := []string{"../../session/testdata/models"}
	if d := os.Getenv("LOOM_MODELS_DIR"); d != "" {
		dirs = append(dirs, d, filepath.Join(d, "mnist"))
	} else if home, err := os.UserHomeDir(); err == nil {
		d := filepath.Join(home, ".cache", "loom-models")
		dirs = append(dirs, d, filepath.Join(d, "mnist"))
	}
	if d := os.Getenv("LOOM_ONNX_MODELS"); d != "" {
		dirs = append(dirs, d)
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		files, _ := filepath.Glob(filepath.Join(d, "*.onnx"))
		for _, f := range files {
			abs, err := filepath.Abs(f)
			if err != nil {
				continue
			}
			if real, err := filepath.EvalSymlinks(abs); err == nil {
				abs = real
			}
			if !seen[abs] {
				seen[abs] = true
				out = append(out, abs)
			}
		}
	}
	sort.Strings(out)
	return out
}

// eachReferenceModel runs f on each reference model (referenceModels), loaded and with its
// shapes inferred, as a subtest; it skips the test when there is none.
func eachReferenceModel(t *testing.T, f func(t *testing.T, m *graph.Model)) {
	models := referenceModels()
	if len(models) == 0 {
		t.Skip("no reference models found (go/session/testdata/models, tools/models/fetch.sh, or LOOM_ONNX_MODELS)")
	}
	for _, p := range models {
		t.Run(filepath.Base(p), func(t *testing.T) {
			m, err := graph.Load(p)
			require.NoError(t, err)
			defer m.Close()
			require.NoError(t, Shapes(m))
			f(t, m)
		})
	}
}
