// Package archcheck holds the test that keeps docs/architecture.md true: which of Loom's packages
// may import which, and how large a package may grow.
package archcheck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/loomrt/loom/"

// layers maps each layer (a path prefix below the module) to the layers it may import. A
// package may always import its own layer's packages; Go itself enforces internal/.
var layers = []struct {
	prefix string
	may    []string
}{
	{"kernels", nil},
	{"go/native", nil},
	{"go/loom", nil},
	{"go/graph", nil},
	{"go/session", []string{"go/native", "go/loom", "go/graph", "kernels"}},
	{"go/serve", []string{"go/native", "go/loom", "go/graph", "go/session", "kernels"}},
	{"tools", []string{"go/native", "go/loom", "go/graph", "go/session", "go/serve", "kernels"}},
}

// maxLines bounds a package's hand-written, non-test Go lines (docs/architecture.md).
const maxLines = 5000

// oversized are the packages still above maxLines, each with the issue that splits it (none
// now: issue 16 moved the com.microsoft planners out of kernelops into mskernels).
var oversized = map[string]string{}

type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Skipf("no go.work at %s (not a checkout): %v", root, err)
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	cmd := exec.Command("go", "list", "-json", "./go/native/...", "./go/loom/...", "./go/graph/...",
		"./go/session/...", "./go/serve/...", "./kernels/...", "./tools/...")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		require.NoError(t, dec.Decode(&p))
		pkgs = append(pkgs, p)
	}
	require.NotEmpty(t, pkgs)
	return pkgs
}

func layerOf(path string) (string, []string, bool) {
	rel := strings.TrimPrefix(path, module)
	for _, l := range layers {
		if rel == l.prefix || strings.HasPrefix(rel, l.prefix+"/") {
			return l.prefix, l.may, true
		}
	}
	return "", nil, false
}

// TestImportsPointOneWay fails when a package imports a layer docs/architecture.md does not
// allow it to.
func TestImportsPointOneWay(t *testing.T) {
	for _, p := range listPackages(t) {
		layer, may, ok := layerOf(p.ImportPath)
		require.True(t, ok, "package %s belongs to no layer of docs/architecture.md", p.ImportPath)
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			other, _, ok := layerOf(imp)
			require.True(t, ok, "%s imports %s, which belongs to no layer", p.ImportPath, imp)
			if other == layer {
				continue
			}
			allowed := false
			for _, m := range may {
				allowed = allowed || m == other
			}
			require.True(t, allowed, "%s (layer %s) imports %s (layer %s): docs/architecture.md does not allow it",
				p.ImportPath, layer, imp, other)
		}
	}
}

// inner are one-way rules inside a layer: the package named by prefix may import, of the layer
// named, only the packages listed in may (docs/architecture.md, the paragraph after the table).
var inner = []struct {
	prefix, layer string
	may           []string
}{
	{"go/session/internal/tensor", "go/session", nil},
	{"go/session/internal/device", "go/session", []string{"go/session/internal/tensor"}},
	{"go/session/internal/ops", "go/session", []string{"go/session/internal/tensor", "go/session/internal/device"}},
	{"go/session/internal/ops/movement", "go/session", []string{"go/session/internal/tensor", "go/session/internal/device", "go/session/internal/ops"}},
	{"go/session/internal/ops/arith", "go/session", []string{"go/session/internal/tensor", "go/session/internal/device", "go/session/internal/ops"}},
	{"go/session/internal/ops/nn", "go/session", []string{"go/session/internal/tensor", "go/session/internal/device", "go/session/internal/ops"}},
	{"go/session/internal/ops/kernelops", "go/session", []string{"go/session/internal/tensor", "go/session/internal/device", "go/session/internal/ops", "go/session/internal/ops/movement", "go/session/internal/ops/arith", "go/session/internal/ops/nn"}},
	{"go/session/internal/ops/mskernels", "go/session", []string{"go/session/internal/tensor", "go/session/internal/device", "go/session/internal/ops", "go/session/internal/ops/nn", "go/session/internal/ops/kernelops"}},
	{"go/session/internal/ep", "go/session", []string{"go/session/internal/tensor", "go/session/internal/device", "go/session/internal/ops"}},
	{"go/session/internal/exec", "go/session", []string{"go/session/internal/tensor", "go/session/internal/device", "go/session/internal/ops", "go/session/internal/ops/movement", "go/session/internal/ops/arith", "go/session/internal/ops/nn", "go/session/internal/ops/kernelops", "go/session/internal/ops/mskernels", "go/session/internal/ep"}},
	{"go/session/internal/plan", "go/session", []string{"go/session/internal/tensor", "go/session/internal/device", "go/session/internal/ops", "go/session/internal/ep", "go/session/internal/exec"}},
	{"go/session/internal/epcontext", "go/session", []string{"go/session/internal/ops", "go/session/internal/ep"}},
	{"go/session/internal/sessiontest", "go/session", nil},
	{"go/graph/internal/modelmem", "go/graph", nil},
	{"go/graph", "go/graph", []string{"go/graph/internal/onnxpb", "go/graph/internal/modelmem"}},
	{"go/graph/infer", "go/graph", []string{"go/graph"}},
}

// TestInnerImportsPointOneWay fails when a package low in a layer imports a package above it in
// the same layer.
func TestInnerImportsPointOneWay(t *testing.T) {
	checked := 0
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(p.ImportPath, module)
		for _, r := range inner {
			if rel != r.prefix {
				continue
			}
			checked++
			for _, imp := range p.Imports {
				irel := strings.TrimPrefix(imp, module)
				if slices.Contains(r.may, irel) {
					continue
				}
				require.False(t, irel == r.layer || strings.HasPrefix(irel, r.layer+"/"),
					"%s imports %s: of %s it may import only %v (docs/architecture.md)", p.ImportPath, imp, r.layer, r.may)
			}
		}
	}
	require.Equal(t, len(inner), checked, "every package named in inner exists")
}

// TestPackageSizes fails when a package other than the known oversized ones has more than
// maxLines hand-written lines (generated files, marked as Go marks them, are not counted).
func TestPackageSizes(t *testing.T) {
	for _, p := range listPackages(t) {
		lines := 0
		for _, f := range append(append([]string{}, p.GoFiles...), p.CgoFiles...) {
			n, generated := countLines(t, filepath.Join(p.Dir, f))
			if !generated {
				lines += n
			}
		}
		rel := strings.TrimPrefix(p.ImportPath, module)
		if why, known := oversized[rel]; known {
			t.Logf("%s: %d lines (over %d: %s)", rel, lines, maxLines, why)
			continue
		}
		require.LessOrEqual(t, lines, maxLines, "package %s has %d lines; split it (docs/architecture.md)", rel, lines)
	}
}

// countLines counts a file's lines and reports whether it carries Go's generated-code marker.
func countLines(t *testing.T, path string) (int, bool) {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	n, generated := 0, false
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<24)
	for s.Scan() {
		line := s.Text()
		if strings.HasPrefix(line, "// Code generated ") && strings.HasSuffix(line, " DO NOT EDIT.") {
			generated = true
		}
		n++
	}
	require.NoError(t, s.Err())
	return n, generated
}
