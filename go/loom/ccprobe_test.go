//go:build unix

package loom

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeProbeCC writes a C compiler that logs each call's arguments (a line each) to log,
// answers --version as GCC does, and "builds" an output with vector calls in it (_ZGV) unless
// the file slow exists, in which case it waits to be killed.
func fakeProbeCC(t *testing.T) (cc, log, slow string) {
	dir := t.TempDir()
	cc, log, slow = filepath.Join(dir, "cc"), filepath.Join(dir, "calls.log"), filepath.Join(dir, "slow")
	script := "#!/bin/sh\n" +
		"echo \"$*\" >> " + log + "\n" +
		"if [ \"$1\" = --version ]; then echo 'gcc (Fake) 1.0'; echo 'Copyright (C) Free Software Foundation'; exit 0; fi\n" +
		"if [ -e " + slow + " ]; then sleep 30; fi\n" +
		"out=''; prev=''\n" +
		"for a in \"$@\"; do [ \"$prev\" = -o ] && out=$a; prev=$a; done\n" +
		"[ -n \"$out\" ] && echo _ZGVdN8v_expf > \"$out\"\n" +
		"exit 0\n"
	require.NoError(t, os.WriteFile(cc, []byte(script), 0o755))
	return cc, log, slow
}

func calls(t *testing.T, log string) (version, builds int) {
	b, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return 0, 0
	}
	require.NoError(t, err)
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "--version" {
			version++
		} else if l != "" {
			builds++
		}
	}
	return version, builds
}

// A process asks a C compiler who it is and whether libmvec links once, whatever the number
// of Compilers (one a session): each answer runs the compiler.
func TestCompilerProbesOncePerProcess(t *testing.T) {
	if HostTarget().Arch != "x86_64" {
		t.Skip("the libmvec probe is x86-64's")
	}
	cc, log, _ := fakeProbeCC(t)
	for i := 0; i < 3; i++ {
		c := NewCompiler(Config{CC: cc, CacheDir: t.TempDir()})
		flags, err := c.HostFlags(context.Background(), HostTarget())
		require.NoError(t, err)
		require.Contains(t, flags, "-DLOOM_LIBMVEC=2")
		require.Contains(t, flags, gccOnlyFlags[0], "the cached identity says GCC")
		c.Close()
	}
	version, builds := calls(t, log)
	require.Equal(t, 1, version, "--version once for three Compilers")
	require.Equal(t, 1, builds, "one probe build (level 2 links) for three Compilers")
}

// A probe cut short by its context decides nothing: the next kernel's flags still have the
// libmvec level the compiler supports (kept, the cancelled probe's "does not link" gave every
// later kernel other flags, other keys and no vector math).
func TestCancelledProbeDecidesNothing(t *testing.T) {
	if HostTarget().Arch != "x86_64" {
		t.Skip("the libmvec probe is x86-64's")
	}
	cc, log, slow := fakeProbeCC(t)
	require.NoError(t, os.WriteFile(slow, nil, 0o644))
	c := NewCompiler(Config{CC: cc, CacheDir: t.TempDir()})
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.HostFlags(ctx, HostTarget())
		done <- err
	}()
	require.Eventually(t, func() bool { _, b := calls(t, log); return b > 0 }, 10*time.Second, 10*time.Millisecond,
		"the probe build never started")
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(20 * time.Second):
		t.Fatal("the cancelled probe did not return")
	}
	require.NoError(t, os.Remove(slow))
	for _, comp := range []*Compiler{c, NewCompiler(Config{CC: cc, CacheDir: t.TempDir()})} {
		flags, err := comp.HostFlags(context.Background(), HostTarget())
		require.NoError(t, err)
		require.Contains(t, flags, "-DLOOM_LIBMVEC=2")
	}
}
