package main

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/session"
	"github.com/loomrt/loom/tools/internal/npy"
)

// TestLoomRunsWithoutACompiler is issue 12's "kernels shipped ahead of time": a `loom` binary
// built with `go build`, run with no C compiler on PATH (nor $CC) and an empty cache, runs its
// demo and the real models on the op library's shipped kernels (kernels/aot), matching the
// references the repository keeps, with no op falling back to the host for want of a shipped
// kernel. A model that tools/models/fetch.sh has not fetched is skipped; the embedded MNIST
// demo always runs.
func TestLoomRunsWithoutACompiler(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the loom command")
	}
	tmp := t.TempDir()
	// LOOM_BINARY: a loom command already built by `go build` from this checkout (tools/test
	// builds it once for every test that runs it); else build one here.
	bin := os.Getenv("LOOM_BINARY")
	if bin == "" {
		if _, err := exec.LookPath("go"); err != nil {
			t.Skipf("no go command to build loom with: %v", err)
		}
		bin = filepath.Join(tmp, "loom")
		build := exec.Command("go", "build", "-o", bin, ".")
		out, err := build.CombinedOutput()
		require.NoError(t, err, "go build:\n%s", out)
	} else {
		abs, err := filepath.Abs(bin)
		require.NoError(t, err)
		bin = abs
	}

	// No C compiler anywhere: PATH is an empty directory and CC is unset.
	empty := filepath.Join(tmp, "bin")
	cache := filepath.Join(tmp, "cache")
	require.NoError(t, os.Mkdir(empty, 0o755))
	env := []string{"PATH=" + empty, "HOME=" + filepath.Join(tmp, "home"), "LOOM_CACHE_DIR=" + cache, "TMPDIR=" + tmp}
	loom := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "loom %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}

	demo := loom("demo", "--ep", "host")
	require.Contains(t, demo, "All 3 predictions match", demo)

	repo, err := filepath.Abs("../../..")
	require.NoError(t, err)
	real := filepath.Join(repo, "go/session/testdata/realmodels")
	modelsDir := os.Getenv("LOOM_MODELS_DIR")
	if modelsDir == "" {
		if home, err := os.UserHomeDir(); err == nil {
			modelsDir = filepath.Join(home, ".cache", "loom-models")
		}
	}
	models := []struct {
		name, path string
		inputs     []string
		refs       map[string]string // output -> reference .npy
	}{
		{"tiny_encoder", filepath.Join(repo, "go/session/testdata/models/tiny_encoder.onnx"),
			[]string{"x=" + filepath.Join(real, "tiny_encoder/x.npy")},
			map[string]string{"y": filepath.Join(real, "tiny_encoder/ref/y.npy")}},
		{"silero_vad_v5", filepath.Join(modelsDir, "silero_vad_v5.onnx"),
			[]string{"input=" + filepath.Join(real, "silero_vad_v5/input_0.npy"), "state=" + filepath.Join(real, "silero_vad_v5/state_0.npy"), "sr=value:16000"},
			map[string]string{"output": filepath.Join(real, "silero_vad_v5/ref_0/output.npy"), "stateN": filepath.Join(real, "silero_vad_v5/ref_0/stateN.npy")}},
		{"ppocr_v4_rec", filepath.Join(modelsDir, "ch_PP-OCRv4_rec_infer.onnx"),
			[]string{"x=" + filepath.Join(real, "ppocr_v4_rec/x.npy")},
			map[string]string{"softmax_11.tmp_0": filepath.Join(real, "ppocr_v4_rec/ref/softmax_11.tmp_0.npy")}},
	}
	stats := regexp.MustCompile(`kernels: (\d+) loaded: (\d+) shipped, (\d+) from the JIT .*; (\d+) op runs fell back to the host`)
	for _, m := range models {
		t.Run(m.name, func(t *testing.T) {
			if _, err := os.Stat(m.path); err != nil {
				t.Skipf("model %s is absent (%v): run tools/models/fetch.sh", m.path, err)
			}
			dir := t.TempDir()
			args := append([]string{"run", m.path}, m.inputs...)
			text := loom(append(args, "-ep", "host", "-o", dir, "--stats", "--plan")...)
			got := stats.FindStringSubmatch(text)
			require.NotNil(t, got, "no kernel counts in:\n%s", text)
			shipped, _ := strconv.Atoi(got[2])
			jit, _ := strconv.Atoi(got[3])
			fellBack, _ := strconv.Atoi(got[4])
			t.Logf("%s: %s kernels loaded, %d shipped, %d from the JIT; %d op runs fell back to the host because a kernel was not shipped",
				m.name, got[1], shipped, jit, fellBack)
			for _, line := range strings.Split(text, "\n") {
				if strings.Contains(line, "not shipped in this binary") {
					t.Log(line)
				}
			}
			require.Greater(t, shipped, 0, text)
			require.Zero(t, jit, "kernels came from a JIT without a compiler:\n%s", text)
			require.Zero(t, fellBack, "ops ran on the host because their kernels are not shipped:\n%s", text)
			for name, ref := range m.refs {
				g, err := npy.Read(filepath.Join(dir, sanitize(name)+".npy"))
				require.NoError(t, err)
				w, err := npy.Read(ref)
				require.NoError(t, err)
				requireNear(t, name, g, w)
			}
		})
	}
	// Nothing was compiled: the cache holds no shared objects.
	filepath.WalkDir(cache, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".so") {
			t.Errorf("the cache holds a compiled kernel: %s", path)
		}
		return nil
	})
}

// requireNear checks got against want within the real-model tolerance of go/session's tests
// (|got-want| <= 1e-4 + 1e-3*|want|).
func requireNear(t *testing.T, what string, got, want session.Tensor) {
	t.Helper()
	require.Equal(t, want.Shape(), got.Shape(), "%s: shape", what)
	g, err := session.TensorOf[float32](got)
	require.NoError(t, err, what)
	w, err := session.TensorOf[float32](want)
	require.NoError(t, err, what)
	worst := 0.0
	for i := range w {
		d := math.Abs(float64(g[i]) - float64(w[i]))
		if math.IsNaN(d) || d > 1e-4+1e-3*math.Abs(float64(w[i])) {
			require.Failf(t, "outputs differ", "%s: element %d is %v, want %v", what, i, g[i], w[i])
		}
		worst = math.Max(worst, d)
	}
	t.Logf("%s: %d elements, max |error| %.3g", what, len(w), worst)
}
