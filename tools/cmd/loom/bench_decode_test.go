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

// --decode N --grow runs a decode loop through Run: each step's present outputs are the next
// step's past inputs, so the past length grows by a token a step.
func TestBenchDecodeGrow(t *testing.T) {
	model := filepath.Join("..", "..", "..", "go", "session", "testdata", "models", "tiny_gpt_kv.onnx")
	args := []string{model, "input_ids=shape:1x1", "past_k0=shape:1x4x3x16", "past_v0=shape:1x4x3x16", "past_k1=shape:1x4x3x16",
		"past_v1=shape:1x4x3x16", "--ep", "host", "--decode", "12", "--grow", "--warmup", "2"}
	rc, out, errOut := runBenchArgs(t, append(args, "--json")...)
	require.Equal(t, 0, rc, errOut)
	var r decodeResult
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &r))
	assert.True(t, r.Grow)
	assert.Equal(t, 12, r.Steps)
	assert.Equal(t, int64(5), r.PastFirst, "two warmup steps after a past of 3")
	assert.Equal(t, int64(16), r.PastLast)
	assert.Greater(t, r.EagerMedianMs, 0.0)
	rc, out, errOut = runBenchArgs(t, args...)
	require.Equal(t, 0, rc, errOut)
	assert.Regexp(t, `^tiny_gpt_kv\.onnx on host, 12 decode steps through Run, the KV cache growing \(past length 5 to 16\), 1 thread\(s\):
  run     median [0-9.]+ ms, p95 [0-9.]+ ms
$`, out)
	// A model without past inputs, and --grow with --capture or without --decode.
	rc, _, errOut = runBenchArgs(t, filepath.Join("testdata", "add.onnx"), "--decode", "3", "--grow", "--ep", "host")
	assert.Equal(t, 1, rc)
	assert.Contains(t, errOut, "no past inputs")
	for _, extra := range [][]string{{"--grow"}, {"--decode", "3", "--grow", "--capture"}} {
		rc, _, errOut := runBenchArgs(t, append([]string{model}, extra...)...)
		assert.Equal(t, 2, rc, strings.Join(extra, " "))
		assert.NotEmpty(t, errOut)
	}
}
