// Package sessiontest holds the test scaffolding of go/session's packages: a TestMain that keeps
// Loom's kernel cache private to the run and fails it when native handles leak, and a host
// device opened for one test.
package sessiontest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/native"
)

// Main runs m's tests with LOOM_CACHE_DIR pointing at a fresh temporary directory (removed
// afterwards) and exits with their status; a native handle the garbage collector finds
// unclosed fails the run. Under Bazel it first makes LOOM_NVRTC_LIBRARY, CC and CXX, given
// relative to the workspace's runfiles directory, absolute.
func Main(m *testing.M) {
	cache, err := os.MkdirTemp("", "loom-session-test-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("LOOM_CACHE_DIR", cache)
	// Under Bazel, LOOM_NVRTC_LIBRARY (@nvrtc's $(rootpath)) and CC and CXX (the pinned
	// zig cc's driver, tools/defs.bzl's ZIG_CC_ENV: the JIT's C compiler) are relative to the
	// workspace's runfiles directory, which rules_go's test runner has left for the package's
	// directory. A value without a slash is a name for PATH and stays as it is.
	for _, name := range []string{"LOOM_NVRTC_LIBRARY", "CC", "CXX"} {
		if v := os.Getenv(name); strings.Contains(v, "/") && !filepath.IsAbs(v) && os.Getenv("TEST_SRCDIR") != "" {
			os.Setenv(name, filepath.Join(os.Getenv("TEST_SRCDIR"), os.Getenv("TEST_WORKSPACE"), v))
		}
	}
	var (
		leakMu    sync.Mutex
		leakKinds []string
	)
	native.SetLeakHook(func(kind string) {
		leakMu.Lock()
		leakKinds = append(leakKinds, kind)
		leakMu.Unlock()
	})
	code := m.Run()
	for range 5 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	leakMu.Lock()
	if len(leakKinds) > 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "FAIL: native handles leaked without Close: %v\n", leakKinds)
		code = 1
	}
	leakMu.Unlock()
	os.RemoveAll(cache)
	os.Exit(code)
}

// OpenHost opens the host device with workers threads, closed when the test ends.
func OpenHost(t testing.TB, workers int) *native.Device {
	t.Helper()
	dev, err := native.Open(native.BackendHost, 0, &native.OpenOptions{WorkerThreads: workers})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, dev.Close()) })
	return dev
}

// CUDADevice opens CUDA device 0, closed when the test ends, or skips the test on machines
// without one.
func CUDADevice(t *testing.T) *native.Device {
	t.Helper()
	if n, err := native.Devices(native.BackendCUDA); err != nil || n == 0 {
		t.Skipf("no CUDA device (%v)", err)
	}
	dev, err := native.Open(native.BackendCUDA, 0, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, dev.Close()) })
	return dev
}

// RequireNVRTC skips the test where NVRTC cannot be loaded, except under LOOM_REQUIRE_NVRTC=1
// (tools/test and .bazelrc set it; Bazel targets declare @nvrtc), where that is a failure.
func RequireNVRTC(t testing.TB) string {
	t.Helper()
	v, err := native.CUDACompiler()
	if err != nil {
		if os.Getenv("LOOM_REQUIRE_NVRTC") == "1" {
			t.Fatalf("LOOM_REQUIRE_NVRTC=1 but %v", err)
		}
		t.Skipf("no NVRTC: %v", err)
	}
	return v
}

// NewRand returns a generator seeded freshly for each run; the seed is logged so a failure
// can be replayed.
func NewRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := rand.Uint64()
	t.Logf("random seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}
