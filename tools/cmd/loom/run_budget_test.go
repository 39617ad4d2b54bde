package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loom run's --memory-budget bounds the run: an Add of two 40 MB vectors fails (exit 1) under
// 10MB and writes its output under 1GiB; a malformed size is a usage error (exit 2).
func TestRunMemoryBudgetFlag(t *testing.T) {
	model := filepath.Join("testdata", "add.onnx")
	dir := t.TempDir()
	big := []string{model, "a=shape:10000000", "b=shape:10000000", "-o", dir, "--ep", "host"}
	assert.Equal(t, 1, runModel(append(big, "--memory-budget", "10MB")))
	_, err := os.Stat(filepath.Join(dir, "c.npy"))
	assert.True(t, os.IsNotExist(err), "nothing written after a failed run")
	require.Equal(t, 0, runModel(append(big, "--memory-budget", "1GiB")))
	st, err := os.Stat(filepath.Join(dir, "c.npy"))
	require.NoError(t, err)
	assert.Greater(t, st.Size(), int64(40e6))
	assert.Equal(t, 2, runModel(append(big, "--memory-budget", "lots")))
	assert.Equal(t, 2, runModel(append(big, "--max-loop-iterations", "x")))
}

func TestByteSizeParses(t *testing.T) {
	for in, want := range map[string]uint64{"4096": 4096, "500MB": 500e6, "1.5GiB": 3 << 29, "2 gib": 2 << 30, "7kb": 7000, "1TiB": 1 << 40} {
		var b byteSize
		require.NoError(t, b.Set(in), in)
		assert.Equal(t, want, uint64(b), in)
	}
	for _, in := range []string{"", "0", "-5MB", "5XB", "MB", "1e30", "NaN", "Inf"} {
		var b byteSize
		assert.Error(t, b.Set(in), in)
	}
}
