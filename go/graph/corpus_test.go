package graph

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// nodeTestRoot is where Debian's libonnx-testdata puts the ONNX node tests (ONNX 1.12).
// LOOM_ONNX_NODE_TESTS names another node-test directory instead, such as the one in the onnx
// 1.22.0 wheel (onnx/backend/test/data/node).
const nodeTestRoot = "/usr/share/libonnx-testdata/data/node"

// nodeTestModels lists the node-test models, skipping the test when the package is missing.
func nodeTestModels(t testing.TB) []string {
	t.Helper()
	root := nodeTestRoot
	if d := os.Getenv("LOOM_ONNX_NODE_TESTS"); d != "" {
		root = d
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "*", "model.onnx"))
	if len(dirs) == 0 {
		t.Skipf("ONNX node tests not installed at %s (apt-get install -y libonnx-testdata)", root)
	}
	sort.Strings(dirs)
	return dirs
}

// referenceModels lists the real models available: the small generated ones committed in
// go/session/testdata/models, the ones tools/models/fetch.sh puts in $LOOM_MODELS_DIR (default
// ~/.cache/loom-models), and any in LOOM_ONNX_MODELS (a directory of .onnx files). None is
// required.
func referenceModels() []string {
	var out []string
	dirs := []string{"../session/testdata/models"}
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

// testDirName names a node test by its directory.
func testDirName(path string) string { return filepath.Base(filepath.Dir(path)) }
