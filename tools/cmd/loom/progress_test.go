package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// captureStderr points os.Stderr at a file for f's duration and returns what was written.
func captureStderr(t *testing.T, terminal bool, f func()) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stderr")
	file, err := os.Create(path)
	require.NoError(t, err)
	saved, savedTerm := os.Stderr, stderrIsTerminal
	os.Stderr, stderrIsTerminal = file, func() bool { return terminal }
	defer func() { os.Stderr, stderrIsTerminal = saved, savedTerm }()
	f()
	require.NoError(t, file.Close())
	out, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(out)
}

// TestWorkingSpinner: on a terminal, work that outlasts the delay shows a spinner with its
// label, and stop erases it; work that ends sooner, or any work when stderr is not a terminal,
// writes nothing.
func TestWorkingSpinner(t *testing.T) {
	out := captureStderr(t, true, func() {
		stop := working("loom run: loading big.onnx", true, 10*time.Millisecond)
		time.Sleep(300 * time.Millisecond)
		stop()
		stop() // idempotent
	})
	assert.Contains(t, out, "loom run: loading big.onnx")
	assert.True(t, strings.HasSuffix(out, "\r"), "the spinner is erased at the end: %q", out)

	assert.Empty(t, captureStderr(t, true, func() {
		stop := working("quick", true, time.Second)
		stop()
	}), "work shorter than the delay shows nothing")
	assert.Empty(t, captureStderr(t, false, func() {
		stop := working("piped", true, time.Millisecond)
		time.Sleep(50 * time.Millisecond)
		stop()
	}), "nothing when stderr is not a terminal")
	assert.Empty(t, captureStderr(t, true, func() {
		stop := working("--json", false, time.Millisecond)
		time.Sleep(50 * time.Millisecond)
		stop()
	}), "nothing when the command asks for none")
}

// TestConformanceProgress: on a terminal the conformance command counts tests on a bar; in a
// pipe (every other test of this package) stderr stays empty.
func TestConformanceProgress(t *testing.T) {
	out := captureStderr(t, true, func() {
		bar := newProgress(3, "loom conformance", "tests", true)
		for range 3 {
			require.NoError(t, bar.Add(1))
			require.NoError(t, bar.Clear())
		}
		require.NoError(t, bar.Finish())
	})
	assert.Contains(t, out, "loom conformance")
	assert.Contains(t, out, "/3, ") // drawn at most every 100 ms: the first count at least
	assert.Empty(t, captureStderr(t, false, func() {
		bar := newProgress(3, "loom conformance", "tests", true)
		bar.Add(3)
		bar.Finish()
	}))
}
