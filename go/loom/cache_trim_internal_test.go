package loom

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeEntry writes a cache entry's files (bytes each) under dir and dates them used.
func fakeEntry(t *testing.T, dir, sub string, i int, exts []string, bytes int, used time.Time) []string {
	t.Helper()
	key := fmt.Sprintf("%064x", i+1)
	var files []string
	for _, ext := range exts {
		rel := filepath.Join(sub, key[:2], key+"."+ext)
		p := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, make([]byte, bytes), 0o644))
		require.NoError(t, os.Chtimes(p, used, used))
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

// Over its limit the cache loses its least recently used entries, whole, down to three
// quarters of the limit; entries unused for 30 days go whatever the size; abandoned temporary
// files go after an hour; files that are not the cache's stay.
func TestTrimCacheRemovesLeastRecentlyUsedEntries(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	var byAge [][]string // oldest first
	for i := range 10 {
		byAge = append(byAge, fakeEntry(t, dir, "", i, []string{"json", "so"}, 1000, now.Add(time.Duration(i-20)*time.Minute)))
	}
	for i := range 2 {
		byAge = append(byAge, fakeEntry(t, dir, "images", 100+i, []string{"json", "cubin"}, 1000, now.Add(time.Duration(i-5)*time.Minute)))
	}
	other := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(other, []byte("mine"), 0o644))
	oldTmp, newTmp := filepath.Join(dir, "0a", ".tmp-123"), filepath.Join(dir, "0b", ".tmp-456")
	for _, p := range []string{oldTmp, newTmp} {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("partial"), 0o644))
	}
	require.NoError(t, os.Chtimes(oldTmp, now.Add(-2*time.Hour), now.Add(-2*time.Hour)))

	// 12 entries of 2000 bytes over a limit of 12000: down to 9000, so the 4 newest stay.
	removed := trimCache(dir, 12000, now)
	var want []string
	for _, files := range byAge[:8] {
		want = append(want, files...)
	}
	want = append(want, "0a/.tmp-123")
	sort.Strings(want)
	sort.Strings(removed)
	require.Equal(t, want, removed)
	for _, files := range byAge[8:] {
		for _, f := range files {
			require.FileExists(t, filepath.Join(dir, f))
		}
	}
	require.FileExists(t, other)
	require.FileExists(t, newTmp)
	marker, err := os.ReadFile(filepath.Join(dir, "trim.txt"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(marker), now.UTC().Format("2006-01-02")))

	// Under the limit nothing goes but what has not been used for 30 days.
	stale := fakeEntry(t, dir, "", 50, []string{"json", "so"}, 10, now.Add(-31*24*time.Hour))
	require.ElementsMatch(t, stale, trimCache(dir, 1<<30, now))
	require.Empty(t, trimCache(dir, 1<<30, now))
}
