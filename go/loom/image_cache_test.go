package loom_test

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
)

// TestCachedImage: a miss builds and caches, a hit reads back the same bytes without building
// (in a new Compiler on the same directory too), any part of the key changes the entry, a
// corrupt entry is rebuilt, and a build error is returned and not cached.
func TestCachedImage(t *testing.T) {
	dir := t.TempDir()
	c := loom.NewCompiler(loom.Config{CacheDir: dir})
	defer c.Close()
	image := make([]byte, 4096+int(randByte(t)))
	_, err := rand.Read(image)
	require.NoError(t, err)
	var builds atomic.Int32
	build := func() ([]byte, error) {
		builds.Add(1)
		return append([]byte(nil), image...), nil
	}
	key := loom.ImageKey{Artifact: "0123456789abcdef", Target: "sm_90", Kind: "cubin", Compiler: "NVRTC 12.9", Driver: "CUDA driver 12080"}

	got, hit, err := c.CachedImage(key, build)
	require.NoError(t, err)
	require.False(t, hit)
	require.Equal(t, image, got)
	got, hit, err = c.CachedImage(key, build)
	require.NoError(t, err)
	require.True(t, hit)
	require.Equal(t, image, got)
	require.EqualValues(t, 1, builds.Load())
	require.Equal(t, int64(1), c.Stats().ImageHits)
	require.Equal(t, int64(1), c.Stats().ImageMisses)

	c2 := loom.NewCompiler(loom.Config{CacheDir: dir})
	defer c2.Close()
	got, hit, err = c2.CachedImage(key, build)
	require.NoError(t, err)
	require.True(t, hit, "another Compiler on the same directory")
	require.Equal(t, image, got)

	for _, other := range []loom.ImageKey{
		{Artifact: "0123456789abcdef", Target: "sm_80", Kind: "cubin", Compiler: "NVRTC 12.9", Driver: "CUDA driver 12080"},
		{Artifact: "0123456789abcdef", Target: "sm_90", Kind: "ptx", Compiler: "NVRTC 12.9", Driver: "CUDA driver 12080"},
		{Artifact: "0123456789abcdef", Target: "sm_90", Kind: "cubin", Compiler: "NVRTC 13.0", Driver: "CUDA driver 12080"},
		{Artifact: "0123456789abcdef", Target: "sm_90", Kind: "cubin", Compiler: "NVRTC 12.9", Driver: "CUDA driver 13000"},
		{Artifact: "fedcba9876543210", Target: "sm_90", Kind: "cubin", Compiler: "NVRTC 12.9", Driver: "CUDA driver 12080"},
	} {
		before := builds.Load()
		_, hit, err := c.CachedImage(other, build)
		require.NoError(t, err)
		require.False(t, hit, "%+v must not find the entry of %+v", other, key)
		require.Equal(t, before+1, builds.Load())
	}

	// Corrupt the image file: the entry is rebuilt (and counted), then served again.
	files, err := filepath.Glob(filepath.Join(dir, "images", "*", "*.cubin"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		data[len(data)/2] ^= 0x40
		require.NoError(t, os.WriteFile(f, data, 0o644))
	}
	corrupt := c.Stats().Corrupt
	before := builds.Load()
	got, hit, err = c.CachedImage(key, build)
	require.NoError(t, err)
	require.False(t, hit, "a corrupt entry is never trusted")
	require.Equal(t, image, got)
	require.Equal(t, before+1, builds.Load())
	require.Equal(t, corrupt+1, c.Stats().Corrupt)
	_, hit, err = c.CachedImage(key, build)
	require.NoError(t, err)
	require.True(t, hit)

	// A build error is the caller's, and nothing is cached.
	failing := loom.ImageKey{Artifact: "badbadbadbad", Target: "sm_90", Kind: "cubin", Compiler: "NVRTC 12.9"}
	boom := errors.New("nvrtc: error: boom")
	_, _, err = c.CachedImage(failing, func() ([]byte, error) { return nil, boom })
	require.ErrorIs(t, err, boom)
	_, hit, err = c.CachedImage(failing, build)
	require.NoError(t, err)
	require.False(t, hit)

	// A key without its compiler, or no build function, is refused.
	_, _, err = c.CachedImage(loom.ImageKey{Artifact: "a", Target: "sm_90", Kind: "cubin"}, build)
	require.ErrorContains(t, err, "lacks")
	_, _, err = c.CachedImage(key, nil)
	require.Error(t, err)
	require.NoError(t, c.Close())
	_, _, err = c.CachedImage(key, build)
	require.ErrorIs(t, err, loom.ErrClosed)
}

func randByte(t *testing.T) byte {
	var b [1]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return b[0]
}
