package loom_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
)

// A cache hit marks its entry used (the trim's "least recently used" is by that time), and a
// Compiler whose writes pass an eighth of CacheMaxBytes trims the cache to it: with a limit
// smaller than one entry, the entry it wrote is gone once the trim ran, and the same kernel
// compiles again.
func TestCompilerKeepsItsCacheWithinCacheMaxBytes(t *testing.T) {
	dir := t.TempDir()
	c := loom.NewCompiler(loom.Config{CacheDir: dir})
	defer c.Close()
	a, err := c.Compile(fillSource(t, nil), loom.HostTarget())
	require.NoError(t, err)
	meta := filepath.Join(dir, a.Key[:2], a.Key+".json")
	old := time.Now().Add(-48 * time.Hour)
	require.NoError(t, os.Chtimes(meta, old, old))
	c2 := loom.NewCompiler(loom.Config{CacheDir: dir})
	defer c2.Close()
	_, err = c2.Compile(fillSource(t, nil), loom.HostTarget())
	require.NoError(t, err)
	require.Equal(t, loom.CacheStats{Hits: 1}, c2.Stats())
	st, err := os.Stat(meta)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), st.ModTime(), time.Hour, "the hit marked the entry used")

	small := loom.NewCompiler(loom.Config{CacheDir: dir, CacheMaxBytes: 100})
	_, err = small.Compile(fillSource(t, map[string]string{"BLOCK": "64"}), loom.HostTarget())
	require.NoError(t, err)
	require.NoError(t, small.Close()) // waits for the trim its write started
	entries, err := filepath.Glob(filepath.Join(dir, "??", "*"))
	require.NoError(t, err)
	require.Empty(t, entries, "a cache bounded to 100 bytes keeps no entry")
	again := loom.NewCompiler(loom.Config{CacheDir: dir, CacheMaxBytes: -1})
	defer again.Close()
	_, err = again.Compile(fillSource(t, nil), loom.HostTarget())
	require.NoError(t, err)
	require.Equal(t, loom.CacheStats{Misses: 1}, again.Stats(), "trimmed, so compiled again")
}
