// Package consumecheck builds a module of a user's own against this clone, in the two ways
// docs/consuming.md shows (a go.work, and replace directives), with the files exactly as that
// page has them and the README's quick start as the program, and runs it; and checks that the
// go commands a clone's user runs leave go.work.sum as committed.
package consumecheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// quickStartOutput is what the README's quick start prints.
const quickStartOutput = "c tensor(float)[3] [11 22 33]"

// fence matches a fenced block: its info string and its text.
var fence = regexp.MustCompile("(?ms)^```([a-z.]*)\n(.*?)^```\n")

type recipe struct {
	files    map[string]string // app/ file name -> contents
	commands []string          // shell lines run in app/
}

// recipes reads docs/consuming.md's recipes: a ```go.mod or ```go.work block is that file of
// app/, a ```sh block lists commands.
func recipes(t *testing.T, doc string) map[string]recipe {
	t.Helper()
	out := map[string]recipe{}
	sections := strings.Split(doc, "\n## ")
	for _, s := range sections {
		title, body, _ := strings.Cut(s, "\n")
		if !strings.HasPrefix(title, "Recipe ") {
			continue
		}
		r := recipe{files: map[string]string{}}
		for _, m := range fence.FindAllStringSubmatch(body, -1) {
			switch m[1] {
			case "go.mod", "go.work":
				r.files[m[1]] = m[2]
			case "sh":
				for _, line := range strings.Split(strings.TrimSpace(m[2]), "\n") {
					r.commands = append(r.commands, line)
				}
			default:
				t.Fatalf("docs/consuming.md, %q: a block of kind %q the test does not know", title, m[1])
			}
		}
		out[title] = r
	}
	return out
}

// quickStart returns the README's quick start program.
func quickStart(t *testing.T, readme string) string {
	t.Helper()
	_, after, ok := strings.Cut(readme, "## Quick start (Go)")
	require.True(t, ok, "README.md has no quick start section")
	m := fence.FindStringSubmatch(after)
	require.NotNil(t, m, "the README's quick start has no code block")
	require.Equal(t, "go", m[1])
	return m[2]
}

func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(r, "go.work")); err != nil {
		t.Skipf("no go.work at %s (not a checkout): %v", r, err)
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	return r
}

// TestDownstreamModule builds and runs docs/consuming.md's recipes. Each builds go/session and
// the shipped kernels outside -race; after the first build they come from Go's build cache.
func TestDownstreamModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own (-short)")
	}
	clone := root(t)
	doc, err := os.ReadFile(filepath.Join(clone, "docs", "consuming.md"))
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(clone, "README.md"))
	require.NoError(t, err)
	model, err := os.ReadFile(filepath.Join(clone, "go", "session", "testdata", "models", "add.onnx"))
	require.NoError(t, err)
	program := quickStart(t, string(readme))

	rs := recipes(t, string(doc))
	require.Len(t, rs, 2, "docs/consuming.md should show two recipes")
	for title, r := range rs {
		t.Run(strings.TrimSuffix(strings.Fields(title)[1], ":"), func(t *testing.T) {
			require.Contains(t, r.files, "go.mod", "%s shows no app/go.mod", title)
			require.NotEmpty(t, r.commands, "%s shows no commands", title)
			// app/ is the user's module; the page's ../loom is this clone, named by its own path
			// (not a link beside app/) so that the packages keep their directories and the
			// builds come from Go's build cache after the first.
			app := filepath.Join(t.TempDir(), "app")
			require.NoError(t, os.MkdirAll(filepath.Join(app, "testdata", "models"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(app, "testdata", "models", "add.onnx"), model, 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(app, "main.go"), []byte(program), 0o644))
			for name, text := range r.files {
				text = strings.ReplaceAll(text, "../loom/", clone+"/")
				require.NoError(t, os.WriteFile(filepath.Join(app, name), []byte(text), 0o644))
			}
			var last string
			for _, line := range r.commands {
				cmd := exec.Command("sh", "-c", line)
				cmd.Dir = app
				cmd.Env = userEnv()
				out, err := cmd.CombinedOutput()
				require.NoError(t, err, "%s: %s in app/:\n%s", title, line, out)
				last = string(out)
			}
			require.Contains(t, last, quickStartOutput, "%s: the program's output", title)
		})
	}
}

// userEnv is this process's environment without what the test run itself set for the go
// command (a workspace, flags), as a user's shell would have it.
func userEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "GOWORK", "GOFLAGS", "GOTOOLCHAIN":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GOTOOLCHAIN=local")
}
