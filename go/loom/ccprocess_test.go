//go:build unix

package loom

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A cancelled compile takes its children and its temporary files with it: the fake compiler
// writes into $TMPDIR and starts a child, as gcc starts cc1 and as, then both sleep until
// killed.
func TestCancelledCompileLeavesNoProcessOrFile(t *testing.T) {
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	require.NoError(t, os.Mkdir(tmp, 0o755))
	pidFile := filepath.Join(dir, "child.pid")
	cc := filepath.Join(dir, "cc")
	script := "#!/bin/sh\n" +
		"echo partial > \"$TMPDIR/cc123.s\"\n" +
		"sleep 60 &\n" +
		"echo $! > " + pidFile + "\n" +
		"wait\n"
	require.NoError(t, os.WriteFile(cc, []byte(script), 0o755))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ccCommand(ctx, tmp, cc, "-c", "kernel.c").Run() }()
	var child int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		child, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "the fake compiler never started its child")
	require.FileExists(t, filepath.Join(tmp, "cc123.s"), "TMPDIR was not the compilation's directory")

	cancel()
	select {
	case err := <-done:
		require.Error(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled compile did not return: its children hold its output open")
	}
	// The child is gone (reaped by init once killed; kill(pid, 0) fails).
	require.Eventually(t, func() bool { return syscall.Kill(child, 0) == syscall.ESRCH }, 10*time.Second, 10*time.Millisecond,
		"the compiler's child %d outlived the cancelled compile", child)
}
