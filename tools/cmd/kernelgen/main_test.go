package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var kernelsDir = filepath.Join("..", "..", "..", "kernels")

// TestGeneratedFilesAreCurrent fails while kernels/opcodes.go differs from what the .loom files
// generate: run `go generate ./kernels` after editing an op code.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run([]string{"-dir", kernelsDir, "-check"}, &out), "run `go generate ./kernels`")
}

func TestOpCodes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	write("a.loom", "const FLT_MAX f32 = 3.4e38\nconst MODE_FAST = 1 // the fast one\nconst lower_case = 2\nconst NOUNDERSCORE = 3\n")
	write("b.loom", "const MODE_FAST = 1\nconst MODE_SLOW = 0x2\n")
	require.NoError(t, run([]string{"-dir", dir}, &bytes.Buffer{}))
	src, err := os.ReadFile(filepath.Join(dir, "opcodes.go"))
	require.NoError(t, err)
	text := string(src)
	require.Contains(t, text, "// ModeFast is MODE_FAST (the fast one).\n\tModeFast = \"1\"")
	require.Contains(t, text, "ModeSlow = \"0x2\"")
	require.Equal(t, 1, strings.Count(text, "ModeFast ="), "a code shared by two files is declared once")
	for _, absent := range []string{"FltMax", "lower", "Nounderscore"} {
		require.NotContains(t, text, absent)
	}
	require.NoError(t, run([]string{"-dir", dir, "-check"}, &bytes.Buffer{}))

	// Files that disagree on a shared code are an error naming both places.
	write("b.loom", "const MODE_FAST = 7\n")
	err = run([]string{"-dir", dir}, &bytes.Buffer{})
	require.ErrorContains(t, err, "b.loom:1: op code MODE_FAST = 7 differs from MODE_FAST = 1 at a.loom:2")

	// A stale file fails the check.
	write("b.loom", "const MODE_FAST = 1\nconst MODE_NEW = 3\n")
	err = run([]string{"-dir", dir, "-check"}, &bytes.Buffer{})
	require.ErrorContains(t, err, "is not current: run `go generate ./kernels`")
}
