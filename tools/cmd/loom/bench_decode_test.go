package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --decode N times N steps with bindings (eager), and with --capture N replays of the
// captured device graph.
func TestBenchDecodeCapture(t *testing.T) {
	model := filepath.Join("testdata", "add.onnx")
	rc, out, errOut := runBenchArgs(t, model, "a=shape:64", "b=shape:64", "--decode", "20", "--capture", "--ep", "host", "--json")
	require.Equal(t, 0, rc, errOut)
	var r decodeResult
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &r))
	assert.Equal(t, 20, r.Steps)
	assert.True(t, r.Captured, r.Reason)
	assert.Equal(t, 1, r.Segments)
	assert.Greater(t, r.EagerMedianMs, 0.0)
	assert.Greater(t, r.ReplayMedianMs, 0.0)
	assert.LessOrEqual(t, r.ReplayMedianMs, r.ReplayP95Ms)

	rc, out, errOut = runBenchArgs(t, model, "a=shape:64", "b=shape:64", "--decode", "5", "--capture", "--ep", "host")
	require.Equal(t, 0, rc, errOut)
	assert.Regexp(t, `^add\.onnx on host, 5 decode steps with bindings, 1 thread\(s\):
  eager   median [0-9.]+ ms, p95 [0-9.]+ ms
  replay  median [0-9.]+ ms, p95 [0-9.]+ ms \(captured graph of 1 segment\(s\)\)
$`, out)
	rc, out, errOut = runBenchArgs(t, model, "--decode", "3", "--ep", "host")
	require.Equal(t, 0, rc, errOut)
	assert.NotContains(t, out, "replay")

	for _, args := range [][]string{{model, "--capture"}, {model, "--decode", "-1"}} {
		rc, _, errOut := runBenchArgs(t, args...)
		assert.Equal(t, 2, rc)
		assert.NotEmpty(t, errOut)
	}
}
