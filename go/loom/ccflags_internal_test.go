package loom

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeCC writes a C compiler stand-in that prints version as its --version and fails
// anything else (so the libmvec probe finds no libmvec).
func fakeCC(t *testing.T, version string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cc")
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then\ncat <<'END'\n" + version + "\nEND\nexit 0\nfi\nexit 1\n"
	require.NoError(t, os.WriteFile(path, []byte(script), 0o755))
	return path
}

// GCC gets gccOnlyFlags (on its command line and in the cache key), clang and zig cc do not:
// they reject -fira-region=all. x86-64-v4 code asks every compiler for 512-bit vectors.
func TestHostFlagsAddGCCOnlyFlagsForGCCAlone(t *testing.T) {
	ctx := context.Background()
	target := Target{Kind: TargetHost, Arch: "x86_64", Level: "v4"}
	cases := []struct {
		name, version string
		gcc           bool
	}{
		{"gcc", "gcc (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.\nThis is free software; see the source for copying conditions.", true},
		{"cc as gcc", "cc (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.", true},
		{"clang", "Debian clang version 14.0.6\nTarget: x86_64-pc-linux-gnu\nThread model: posix", false},
		{"zig cc", "clang version 19.1.7 (https://github.com/ziglang/zig-bootstrap 1c3c59435891bc9caf8cd1d3783773369d191c5f)\nTarget: x86_64-unknown-linux-musl", false},
	}
	keys := map[string]bool{}
	for _, c := range cases {
		comp := NewCompiler(Config{CC: fakeCC(t, c.version), CacheDir: t.TempDir()})
		require.NoError(t, comp.init())
		flags, err := comp.hostFlags(ctx, target)
		require.NoError(t, err, c.name)
		for _, f := range gccOnlyFlags {
			if c.gcc {
				require.Contains(t, flags, f, c.name)
			} else {
				require.NotContains(t, flags, f, c.name)
			}
		}
		require.Subset(t, flags, cflags(target), c.name)
		key, err := comp.key(ctx, KernelSource{Source: []byte("kernel k {}"), Specialization: Specialization{Symbol: "k"}}, target)
		require.NoError(t, err, c.name)
		keys[key] = true
		require.NoError(t, comp.Close())
	}
	require.Len(t, keys, len(cases), "each compiler's kernels have keys of their own")
	// Every compiler keeps x86-64-v4's 16-lane vectors whole (clang would split them).
	require.Contains(t, cflags(target), "-mprefer-vector-width=512")
	require.NotContains(t, cflags(Target{Kind: TargetHost, Arch: "x86_64", Level: "v3"}), "-mprefer-vector-width=512")
	require.Equal(t, gccOnlyFlags, GCCOnlyFlags())
}
