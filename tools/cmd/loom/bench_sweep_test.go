package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --sweep N=... times the first run at each size of add.onnx's symbolic N (both inputs have
// it) against its warm runs; bad sweeps are usage errors naming the problem.
func TestBenchSweep(t *testing.T) {
	model := filepath.Join("testdata", "add.onnx")
	rc, out, errOut := runBenchArgs(t, model, "--sweep", "N=1..9:4", "--runs", "3", "--ep", "host", "--json")
	require.Equal(t, 0, rc, errOut)
	var r sweepResult
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &r))
	assert.Equal(t, "N", r.Dim)
	require.Len(t, r.Points, 3)
	for i, p := range r.Points {
		assert.Equal(t, int64(1+4*i), p.Size)
		assert.Greater(t, p.FirstMs, 0.0)
		assert.Greater(t, p.WarmMs, 0.0)
		assert.InDelta(t, p.FirstMs/p.WarmMs, p.Ratio, 0.01+0.01*p.Ratio)
		assert.LessOrEqual(t, p.Ratio, r.Worst)
	}
	assert.LessOrEqual(t, r.Median, r.Worst)

	rc, out, errOut = runBenchArgs(t, model, "--sweep", "N=3,64", "--runs", "2", "--ep", "host")
	require.Equal(t, 0, rc, errOut)
	assert.Regexp(t, `^add\.onnx on host, 1 thread\(s\), first run at each new N against the fastest warm run:
  N=3 +first +[0-9.]+ ms  warm +[0-9.]+ ms  first/warm [0-9.]+
  N=64 +first +[0-9.]+ ms  warm +[0-9.]+ ms  first/warm [0-9.]+
first/warm: median [0-9.]+, worst [0-9.]+ \(N=(3|64)\); first runs [0-9.]+ ms in all, warm [0-9.]+ ms
$`, out)

	for _, c := range []struct{ sweep, says string }{
		{"N", "want DIM=LO..HI"},
		{"N=0..4", "1 <= LO <= HI"},
		{"N=5..4", "1 <= LO <= HI"},
		{"N=1..4:0", "STEP >= 1"},
		{"N=1,x", `size "x"`},
		{"N=1..100000", "at most 10000"},
	} {
		rc, _, errOut := runBenchArgs(t, model, "--sweep", c.sweep)
		assert.Equal(t, 2, rc, c.sweep)
		assert.Contains(t, errOut, c.says, c.sweep)
	}
	rc, _, errOut = runBenchArgs(t, model, "--sweep", "W=1..3", "--ep", "host")
	assert.Equal(t, 1, rc)
	assert.Contains(t, errOut, `no input has a dimension named "W" (the inputs' symbolic dimensions: N)`)
	rc, _, errOut = runBenchArgs(t, model, "--sweep", "N=1..3", "--decode", "2")
	assert.Equal(t, 2, rc)
	assert.Contains(t, errOut, "separate benchmarks")
}
