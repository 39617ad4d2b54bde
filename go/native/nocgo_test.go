package native

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Building without cgo fails with one error that says cgo is needed (internal/cabi's
// cabi_nocgo.go), not with the undefined names of the cgo code in every file above it.
func TestBuildWithoutCgoSaysWhy(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on the PATH (Bazel's sandbox)")
	}
	cmd := exec.Command(goTool, "build", ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "building without cgo must fail")
	text := string(out)
	assert.Contains(t, text, "Loom_needs_cgo__build_with_CGO_ENABLED_1_and_gcc_and_gxx")
	assert.NotContains(t, text, "undefined: cabi.", "the cabi package stops the build first")
	assert.LessOrEqual(t, strings.Count(text, "\n"), 4, "one short error:\n%s", text)
}
