package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeFile creates path (and its directories) with n bytes.
func writeFile(t *testing.T, path string, n int) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte{'x'}, n), 0o644))
}

// fakeOutputBase makes an output base for workspace dir ws, as Bazel lays one out: the marker
// naming the workspace, execroot/<name>, read-only outputs and a link back to the workspace.
func fakeOutputBase(t *testing.T, root, hash, ws, name string) string {
	t.Helper()
	base := filepath.Join(root, hash)
	writeFile(t, filepath.Join(base, "DO_NOT_BUILD_HERE"), 0)
	require.NoError(t, os.WriteFile(filepath.Join(base, "DO_NOT_BUILD_HERE"), []byte(ws), 0o644))
	out := filepath.Join(base, "execroot", name, "bazel-out", "k8-fastbuild", "bin")
	writeFile(t, filepath.Join(out, "kernel.o"), 1000)
	require.NoError(t, os.Symlink(ws, filepath.Join(base, "execroot", name, "WORKSPACE-link")))
	require.NoError(t, os.Chmod(out, 0o555))
	return base
}

func TestRemovesOnlyTheOutputBasesOfGoneLoomWorkspaces(t *testing.T) {
	tmp := t.TempDir()
	root := filepath.Join(tmp, "_bazel_user")
	live := filepath.Join(tmp, "clone-live")
	require.NoError(t, os.MkdirAll(live, 0o755))
	// A file the gone workspace's link would reach if it were followed: it must survive.
	keep := filepath.Join(tmp, "precious")
	writeFile(t, keep, 10)

	gone := fakeOutputBase(t, root, "aaaa", filepath.Join(tmp, "clone-gone"), "loom")
	alive := fakeOutputBase(t, root, "bbbb", live, "loom")
	other := fakeOutputBase(t, root, "cccc", filepath.Join(tmp, "someone-else"), "other")
	running := fakeOutputBase(t, root, "dddd", filepath.Join(tmp, "clone-gone-2"), "loom")
	writeFile(t, filepath.Join(running, "server", "server.pid.txt"), 0)
	require.NoError(t, os.WriteFile(filepath.Join(running, "server", "server.pid.txt"), []byte("1\n"), 0o644)) // init: alive
	linkTo := fakeOutputBase(t, root, "eeee", filepath.Join(tmp, "clone-gone-3"), "loom")
	require.NoError(t, os.Symlink(keep, filepath.Join(linkTo, "execroot", "loom", "precious-link")))
	writeFile(t, filepath.Join(root, "install", "abc", "bazel"), 10) // no marker: not an output base

	var out bytes.Buffer
	require.Equal(t, 0, run([]string{"-output-user-root", root}, &out, time.Now()), out.String())
	t.Log(out.String())

	assert.NoDirExists(t, gone)
	assert.NoDirExists(t, linkTo)
	assert.DirExists(t, alive, "its workspace is still there")
	assert.DirExists(t, other, "another project's output base")
	assert.DirExists(t, running, "its server is running")
	assert.FileExists(t, filepath.Join(root, "install", "abc", "bazel"))
	assert.FileExists(t, keep, "a link was followed")
	assert.Contains(t, out.String(), "removed the output base of "+filepath.Join(tmp, "clone-gone")+" (gone)")
	assert.Equal(t, 2, strings.Count(out.String(), "removed the output base"))
}

func TestDryRunRemovesNothing(t *testing.T) {
	tmp := t.TempDir()
	root := filepath.Join(tmp, "root")
	gone := fakeOutputBase(t, root, "aaaa", filepath.Join(tmp, "gone"), "loom")
	cache := filepath.Join(tmp, "cache")
	writeFile(t, filepath.Join(cache, "cas", "00", "old"), 100)
	old := time.Now().Add(-30 * 24 * time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(cache, "cas", "00", "old"), old, old))

	var out bytes.Buffer
	require.Equal(t, 0, run([]string{"-n", "-output-user-root", root, "-disk-cache", cache}, &out, time.Now()))
	assert.DirExists(t, gone)
	assert.FileExists(t, filepath.Join(cache, "cas", "00", "old"))
	assert.Contains(t, out.String(), "would remove the output base")
	assert.Contains(t, out.String(), "would remove 1 entries (100 B)")
}

func TestCacheTrimsByAgeThenLeastRecentlyRead(t *testing.T) {
	cache := t.TempDir()
	now := time.Now()
	// name: size, read this long ago
	files := []struct {
		name string
		size int
		age  time.Duration
	}{
		{"ac/01/stale", 10, 10 * 24 * time.Hour},
		{"cas/02/stale", 1000, 6 * 24 * time.Hour},
		{"cas/03/oldest-fresh", 400, 3 * 24 * time.Hour},
		{"cas/04/older", 300, 2 * 24 * time.Hour},
		{"cas/05/recent", 300, time.Hour},
		{"cas/06/newest", 300, time.Minute},
	}
	for _, f := range files {
		p := filepath.Join(cache, f.name)
		writeFile(t, p, f.size)
		at := now.Add(-f.age)
		require.NoError(t, os.Chtimes(p, at, at))
	}
	var out bytes.Buffer
	// 5 days; at most 700 bytes: the stale two go by age, then the least recently read until
	// 700 bytes remain (400 + 300 + 300 + 300 = 1300 -> drop 400 and 300).
	require.Equal(t, 0, run([]string{"-disk-cache", cache, "-max-age", "120h", "-max-size", "700B"}, &out, now), out.String())
	for _, f := range files {
		p := filepath.Join(cache, f.name)
		switch f.name {
		case "cas/05/recent", "cas/06/newest":
			assert.FileExists(t, p)
		default:
			assert.NoFileExists(t, p)
		}
	}
	assert.Contains(t, out.String(), "removed 4 entries (1.7 KiB)")
	assert.Contains(t, out.String(), "600 B left in 2")

	// A missing cache is nothing to do, not an error.
	out.Reset()
	require.Equal(t, 0, run([]string{"-disk-cache", filepath.Join(cache, "absent")}, &out, now))
	assert.Contains(t, out.String(), "removed 0 entries")
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-max-size", "lots"},
		{"-max-size", "-3GiB"},
		{"-want-free", "1ZiB"},
		{"-max-age", "-1h"},
		{"-no-such-flag"},
	} {
		var out bytes.Buffer
		assert.Equal(t, 2, run(args, &out, time.Now()), "%v", args)
		assert.NotEmpty(t, out.String(), "%v says why", args)
	}
}

func TestParseAndFormatSize(t *testing.T) {
	for in, want := range map[string]int64{"24GiB": 24 << 30, "512MiB": 512 << 20, "1000": 1000, "1.5KiB": 1536, "7B": 7} {
		got, err := parseSize(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	assert.Equal(t, "1.5 KiB", formatSize(1536))
	assert.Equal(t, "24.0 GiB", formatSize(24<<30))
	assert.Equal(t, "999 B", formatSize(999))
}
