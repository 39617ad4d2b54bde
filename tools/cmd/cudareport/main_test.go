package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOccupancyModel(t *testing.T) {
	sm := smLimits[90]
	for _, c := range []struct {
		threads, regs, shared int
		want                  float64
	}{
		{256, 32, 0, 1},          // 8 blocks of 8 warps: the warp limit
		{256, 255, 0, 0.125},     // 8160 registers a warp round to 8192: 8 warps fit
		{1, 16, 0, 0.5},          // the 32-block limit: 32 one-warp blocks
		{256, 32, 48 << 10, 0.5}, // 49 KiB a block (1 KiB reserved): 4 blocks
		{1024, 64, 0, 0.5},       // 2048 registers a warp: 32 warps, one block of 32
		{96, 40, 0, 0.75},        // 1280 registers a warp: 51 warps, 48 in groups of 4: 16 blocks of 3
	} {
		assert.InDelta(t, c.want, occupancy(sm, c.threads, c.regs, c.shared), 1e-9, "%+v", c)
	}
	assert.Zero(t, occupancy(sm, 0, 32, 0))
}

// TestResourceReportIsCurrent reads every shipped sm_90 cubin with cuobjdump and fails when a
// hot kernel misses the thresholds without being listed in kernels/aot/cuda_exceptions.txt,
// when a listed one meets them, or when docs/cuda.md is stale. It needs cuobjdump and nvdisasm
// (LOOM_CUOBJDUMP, LOOM_NVDISASM, from tools/cuda/fetch.sh): it skips without, except under
// LOOM_REQUIRE_NVRTC=1 (tools/test), where that is a failure. A cubin read before on this
// machine by the same two tools is taken from the check cache (package checkcache;
// LOOM_CHECK_CACHE=off reads them all again).
func TestResourceReportIsCurrent(t *testing.T) {
	if os.Getenv("TEST_SRCDIR") != "" {
		t.Skip("checked by `go test ./tools/cmd/cudareport` through go.work")
	}
	tool, disasm := requiredTool(t, "cuobjdump", "LOOM_CUOBJDUMP"), requiredTool(t, "nvdisasm", "LOOM_NVDISASM")
	var out strings.Builder
	err := run([]string{"-cuobjdump", tool, "-nvdisasm", disasm, "-dir", "../../../kernels", "-out", "../../../docs/cuda.md", "-check"}, &out)
	t.Log(out.String())
	require.NoError(t, err)
}

// requiredTool is the tool env names, else name on PATH; without either the test skips, or
// fails under LOOM_REQUIRE_NVRTC=1.
func requiredTool(t *testing.T, name, env string) string {
	t.Helper()
	tool := os.Getenv(env)
	if tool == "" {
		tool, _ = exec.LookPath(name)
	}
	if tool == "" {
		if os.Getenv("LOOM_REQUIRE_NVRTC") == "1" {
			t.Fatalf("LOOM_REQUIRE_NVRTC=1 but no %s: set %s (tools/cuda/fetch.sh)", name, env)
		}
		t.Skipf("no %s (%s, tools/cuda/fetch.sh)", name, env)
	}
	return tool
}
