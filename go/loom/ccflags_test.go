package loom_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
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

// GCC gets GCCOnlyFlags, clang and zig cc do not (they reject -fira-region=all), and
// x86-64-v4 code asks every compiler for 512-bit vectors.
func TestHostFlagsAddGCCOnlyFlagsForGCCAlone(t *testing.T) {
	ctx := context.Background()
	v4 := loom.MustParseTarget("host-x86_64-v4")
	v3 := loom.MustParseTarget("host-x86_64-v3")
	require.NotEmpty(t, loom.GCCOnlyFlags())
	cases := []struct {
		name, version string
		gcc           bool
	}{
		{"gcc", "gcc (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.\nThis is free software; see the source for copying conditions.", true},
		{"cc as gcc", "cc (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.", true},
		{"clang", "Debian clang version 14.0.6\nTarget: x86_64-pc-linux-gnu\nThread model: posix", false},
		{"zig cc", "clang version 22.1.8\nTarget: x86_64-unknown-linux6.18.44-gnu2.36.0", false},
	}
	for _, c := range cases {
		comp := loom.NewCompiler(loom.Config{CC: fakeCC(t, c.version), CacheDir: t.TempDir()})
		for _, target := range []loom.Target{v4, v3} {
			flags, err := comp.HostFlags(ctx, target)
			require.NoError(t, err, c.name)
			require.Subset(t, flags, loom.StaticCFlags(target), c.name)
			for _, f := range loom.GCCOnlyFlags() {
				if c.gcc {
					require.Contains(t, flags, f, c.name)
				} else {
					require.NotContains(t, flags, f, c.name)
				}
			}
			if target == v4 {
				require.Contains(t, flags, "-mprefer-vector-width=512", c.name)
			} else {
				require.NotContains(t, flags, "-mprefer-vector-width=512", c.name)
			}
		}
		require.NoError(t, comp.Close())
	}
}
