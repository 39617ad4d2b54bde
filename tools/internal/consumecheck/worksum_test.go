package consumecheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGoWorkSumIsComplete: the go commands a user or tools/test runs in a clone (go mod download
// in each module, go list -m all) add nothing to go.work.sum, so that they leave the clone's
// tree clean. It runs them against a copy of go.work and go.work.sum (go.work's `use` paths
// made absolute) and fails with the lines they would add.
func TestGoWorkSumIsComplete(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command over the whole workspace (-short)")
	}
	clone := root(t)
	work, err := os.ReadFile(filepath.Join(clone, "go.work"))
	require.NoError(t, err)
	sum, err := os.ReadFile(filepath.Join(clone, "go.work.sum"))
	require.NoError(t, err)

	dir := t.TempDir()
	use := regexp.MustCompile(`(?m)^(\s*(?:use\s+)?)\./(\S*)\s*$`)
	var modules []string
	abs := use.ReplaceAllStringFunc(string(work), func(line string) string {
		m := use.FindStringSubmatch(line)
		modules = append(modules, m[2])
		return m[1] + filepath.Join(clone, m[2])
	})
	require.NotEmpty(t, modules, "go.work uses no ./module")
	workFile := filepath.Join(dir, "go.work")
	require.NoError(t, os.WriteFile(workFile, []byte(abs), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.work.sum"), sum, 0o644))

	env := append(userEnv(), "GOWORK="+workFile)
	run := func(in string, args ...string) {
		cmd := exec.Command("go", args...)
		cmd.Dir = in
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s in %s:\n%s", strings.Join(args, " "), in, out)
	}
	for _, m := range modules {
		run(filepath.Join(clone, m), "mod", "download")
	}
	run(clone, "list", "-m", "all")

	after, err := os.ReadFile(filepath.Join(dir, "go.work.sum"))
	require.NoError(t, err)
	have := map[string]bool{}
	for _, l := range strings.Split(string(sum), "\n") {
		have[l] = true
	}
	var added []string
	for _, l := range strings.Split(string(after), "\n") {
		if l != "" && !have[l] {
			added = append(added, l)
		}
	}
	sort.Strings(added)
	if len(added) > 0 {
		t.Fatalf("go mod download and go list -m all add %d lines to go.work.sum; run "+
			"`for m in go/native go/loom go/graph go/session go/serve tools; do (cd $m && go mod download); done; go list -m all` "+
			"at the root and commit go.work.sum. The lines:\n%s", len(added), strings.Join(added, "\n"))
	}
}
