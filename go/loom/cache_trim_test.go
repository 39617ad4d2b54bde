package loom_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
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
	meta := strings.TrimSuffix(a.SharedObject, ".so") + ".json"
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

// An entry that an earlier code generation wrote (the same key; its files named without this
// revision's -r<N>) is not read: Cached says no, Compile compiles the kernel again and writes
// this revision's entry beside it, and the trim takes the old entry once it is unused for 30
// days, apart from the new one.
func TestCacheEntriesOfAnEarlierCodegenAreNotRead(t *testing.T) {
	dir := t.TempDir()
	c := loom.NewCompiler(loom.Config{CacheDir: dir})
	a, err := c.Compile(fillSource(t, nil), loom.HostTarget())
	require.NoError(t, err)
	require.NoError(t, c.Close())
	base := strings.TrimSuffix(a.SharedObject, ".so")
	require.Regexp(t, `/[0-9a-f]{64}-r[0-9]+$`, base)
	legacy := filepath.Join(filepath.Dir(base), a.Key)
	files, err := filepath.Glob(base + ".*")
	require.NoError(t, err)
	require.Len(t, files, 3) // .json, .so, .txt
	old := time.Now().Add(-40 * 24 * time.Hour)
	for _, f := range files {
		to := legacy + filepath.Ext(f)
		require.NoError(t, os.Rename(f, to))
		require.NoError(t, os.Chtimes(to, old, old))
	}

	c2 := loom.NewCompiler(loom.Config{CacheDir: dir})
	require.False(t, c2.Cached(context.Background(), fillSource(t, nil), loom.HostTarget()))
	a2, err := c2.Compile(fillSource(t, nil), loom.HostTarget())
	require.NoError(t, err)
	require.Equal(t, a.Key, a2.Key)
	require.Equal(t, base+".so", a2.SharedObject)
	require.Equal(t, loom.CacheStats{Misses: 1}, c2.Stats())
	require.True(t, c2.Cached(context.Background(), fillSource(t, nil), loom.HostTarget()))
	require.NoError(t, c2.Close())

	// The trim that a Compiler's first write starts removes the legacy entry, unused for 40
	// days, and keeps the fresh one.
	require.NoError(t, os.Remove(filepath.Join(dir, "trim.txt"))) // the last trim: long ago
	c3 := loom.NewCompiler(loom.Config{CacheDir: dir})
	defer c3.Close()
	_, err = c3.Compile(fillSource(t, map[string]string{"BLOCK": "128"}), loom.HostTarget())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		for _, ext := range []string{".json", ".so", ".txt"} {
			if _, err := os.Stat(legacy + ext); !os.IsNotExist(err) {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "the earlier codegen's entry was not trimmed")
	for _, ext := range []string{".json", ".so", ".txt"} {
		_, err = os.Stat(base + ext)
		require.NoError(t, err, ext)
	}
}
