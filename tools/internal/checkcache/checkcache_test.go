package checkcache

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeysSeparateTheirParts(t *testing.T) {
	assert.NotEqual(t, Key([]byte("ab"), []byte("c")), Key([]byte("a"), []byte("bc")))
	assert.NotEqual(t, Key([]byte("a")), Key([]byte("a"), nil))
	assert.Equal(t, Key([]byte("x"), []byte("y")), Key([]byte("x"), []byte("y")))
}

func TestStoredResultsAreFoundByTheirKeyOnly(t *testing.T) {
	t.Setenv("LOOM_CHECK_CACHE_DIR", t.TempDir())
	t.Setenv("LOOM_CHECK_CACHE", "")
	c := Open("a-check")
	require.NotNil(t, c)
	k := Key([]byte("tool"), []byte("input"))
	_, ok := c.Get(k)
	assert.False(t, ok)
	c.Put(k, []byte("result"))
	got, ok := c.Get(k)
	require.True(t, ok)
	assert.Equal(t, "result", string(got))
	_, ok = c.Get(Key([]byte("tool"), []byte("other input")))
	assert.False(t, ok)
	// Another check's cache does not see it; a second Open of the same one does.
	_, ok = Open("another-check").Get(k)
	assert.False(t, ok)
	got, ok = Open("a-check").Get(k)
	require.True(t, ok)
	assert.Equal(t, "result", string(got))
	assert.Contains(t, c.Stats(), "1 of 3 results from the cache")
	// No temporary files are left behind.
	entries, err := os.ReadDir(filepath.Join(os.Getenv("LOOM_CHECK_CACHE_DIR"), "a-check"))
	require.NoError(t, err)
	assert.Len(t, entries, 1)
}

func TestOffKeepsNothing(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("LOOM_CHECK_CACHE_DIR", dir)
	t.Setenv("LOOM_CHECK_CACHE", "off")
	c := Open("a-check")
	assert.Nil(t, c)
	c.Put("k", []byte("v"))
	_, ok := c.Get("k")
	assert.False(t, ok)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)
}

func TestFileHashIsTheContentsHash(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(p, []byte("abc"), 0o644))
	h, err := FileHash(p)
	require.NoError(t, err)
	assert.Equal(t, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", h)
	_, err = FileHash(filepath.Join(t.TempDir(), "missing"))
	assert.Error(t, err)
}
