package conformance

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session"
	"github.com/loomrt/loom/go/session/internal/plan"
)

// nodeTests is the node suite (NodeTests: $LOOM_NODE_TESTS, else libonnx-testdata's).
var nodeTests = NodeTests()

// TestNodeConformance runs the ONNX node tests of Debian's libonnx-testdata (ONNX 1.12) and
// fails when fewer pass than testdata/conformance_threshold.txt records.
func TestNodeConformance(t *testing.T) {
	if _, err := os.Stat(nodeTests); err != nil {
		t.Skipf("%s is absent (apt-get install -y libonnx-testdata): %v", nodeTests, err)
	}
	runSuite(t, nodeTests, "conformance_threshold.txt")
}

// TestNodeConformanceONNX122 runs ONNX 1.22.0's node tests (1,765 cases, opsets up to 27;
// $LOOM_NODE_TESTS_ONNX122, which tools/onnx/fetch_node_tests.sh fetches and tools/test sets)
// and fails when fewer pass than testdata/conformance_threshold_onnx122.txt records.
func TestNodeConformanceONNX122(t *testing.T) {
	dir := os.Getenv("LOOM_NODE_TESTS_ONNX122")
	if dir == "" {
		t.Skip("LOOM_NODE_TESTS_ONNX122 is unset: eval \"$(tools/onnx/fetch_node_tests.sh)\" sets it")
	}
	_, err := os.Stat(dir)
	require.NoError(t, err, "LOOM_NODE_TESTS_ONNX122")
	runSuite(t, dir, "conformance_threshold_onnx122.txt")
}

// TestNodeConformanceSharedArenas runs the node tests with every compiled plan on the
// session's shared arenas (plan.SetSharedArenaMin(0); by default only arenas of 128 KiB or
// more are): the kernels' arena bindings, rebound to the run's slab each run, and the host
// steps' views of it must give the same results as an arena of the plan's own.
func TestNodeConformanceSharedArenas(t *testing.T) {
	if _, err := os.Stat(nodeTests); err != nil {
		t.Skipf("%s is absent (apt-get install -y libonnx-testdata): %v", nodeTests, err)
	}
	defer plan.SetSharedArenaMin(0)()
	runSuite(t, nodeTests, "conformance_threshold.txt")
}

// runSuite runs the node tests under dir and fails when fewer pass than testdata/threshold
// records, listing the failures then.
func runSuite(t *testing.T, dir, threshold string) {
	raw, err := os.ReadFile(filepath.Join("testdata", threshold))
	require.NoError(t, err)
	want, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	tests, err := Discover([]string{dir})
	require.NoError(t, err)
	require.NotEmpty(t, tests)
	results := Run(tests, Options{}, nil)
	sum := Tally(results)
	t.Logf("%s: %s (threshold %d)", dir, sum, want)
	if sum.Passed < want {
		for _, r := range results {
			if r.Status == Fail {
				t.Logf("%s: %s", r.Name, r.Message)
			}
		}
	}
	assert.GreaterOrEqual(t, sum.Passed, want, "conformance regressed")
}

// TestNodeConformanceCUDAStandIn runs the node tests through the cuda provider's placements and
// copies on a host device whose memory behaves as a GPU's (session.OptionCUDAStandIn): every
// test the host provider passes must pass there too, so a transfer the CUDA path misses, or
// device memory it reads before writing, fails here. Both runs take two tests at a time, so
// sessions of the same provider run concurrently here too (under -race in CI).
func TestNodeConformanceCUDAStandIn(t *testing.T) {
	if _, err := os.Stat(nodeTests); err != nil {
		t.Skipf("%s is absent (apt-get install -y libonnx-testdata): %v", nodeTests, err)
	}
	if testing.Short() {
		t.Skip("the whole node suite a second time; -short skips it")
	}
	tests, err := Discover([]string{nodeTests})
	require.NoError(t, err)
	compareProviders(t, tests, "cuda stand-in", 2, []session.LoadOption{
		session.WithExecutionProvider(session.ProviderCUDA),
		session.WithOption(session.OptionCUDAStandIn, "1"),
	})
}

// compareProviders runs tests on the host provider and with opts (named what), parallel tests
// at a time, and fails on every test that passes on the host and not with opts. A test that
// fails with opts is run again alone before it counts: one that then passes is reported as
// failing only when run concurrently with others (a race between sessions), still a failure.
// It logs both tallies, each run's wall time and its slowest tests.
func compareProviders(t *testing.T, tests []string, what string, parallel int, opts []session.LoadOption) {
	t.Helper()
	start := time.Now()
	host := Run(tests, Options{Parallel: parallel}, nil)
	hostWall := time.Since(start)
	start = time.Now()
	other := Run(tests, Options{Session: opts, Parallel: parallel}, nil)
	otherWall := time.Since(start)
	require.Len(t, other, len(host))
	regressed, concurrent := 0, 0
	for i, r := range other {
		if host[i].Status != Pass || r.Status == Pass {
			continue
		}
		regressed++
		if parallel > 1 {
			alone := Run(tests[i:i+1], Options{Session: opts}, nil)[0]
			if alone.Status == Pass {
				concurrent++
				t.Errorf("%s passes on the host provider and %s when run alone, not when run beside other tests: %s", r.Name, what, r.Message)
				continue
			}
		}
		if regressed <= 40 {
			t.Errorf("%s passes on the host provider, not %s: %s", r.Name, what, r.Message)
		}
	}
	t.Logf("host: %s; %s: %s; %d regressed (%d only when run concurrently)", Tally(host), what, Tally(other), regressed, concurrent)
	t.Logf("wall time, %d tests at a time: host %.1fs, %s %.1fs", max(parallel, 1), hostWall.Seconds(), what, otherWall.Seconds())
	t.Logf("slowest on the host: %s", strings.Join(Slowest(host, 8), ", "))
	t.Logf("slowest %s: %s", what, strings.Join(Slowest(other, 8), ", "))
}

// TestNodeConformanceCUDA runs the ONNX node suite through the cuda provider on a real GPU
// (every run's kernels on the device, compiled plans with device arenas from the second run
// on) and through the host provider, and fails on every test that passes on the host and not
// on the GPU (each within the suite's tolerances, the same for both). Tests run one per CPU at
// a time (at most 16), each in its own session on the same device. The device check and
// //go/session/conformance:conformance_gpu_test run it (the suite is data: LOOM_NODE_TESTS, or
// Debian's libonnx-testdata). Without a CUDA device it skips.
func TestNodeConformanceCUDA(t *testing.T) {
	if n, err := native.Devices(native.BackendCUDA); err != nil || n == 0 {
		t.Skipf("no CUDA device (%v)", err)
	}
	dir := NodeTests()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the node suite %s is absent (LOOM_NODE_TESTS names it): %v", dir, err)
	}
	tests, err := Discover([]string{dir})
	require.NoError(t, err)
	require.NotEmpty(t, tests)
	// The cuda provider must be the one the sessions get (it falls back to the host when it
	// cannot open the device, which would compare the host with itself).
	probe, err := session.Load(filepath.Join(tests[0], "model.onnx"), session.WithExecutionProvider(session.ProviderCUDA))
	require.NoError(t, err)
	require.Equal(t, session.ProviderCUDA, probe.Provider(), "%v", probe.ExecutionProviderFallbackReport())
	require.NoError(t, probe.Close())
	compareProviders(t, tests, "cuda", min(runtime.NumCPU(), 16), []session.LoadOption{
		session.WithExecutionProvider(session.ProviderCUDA),
	})
}

func TestDecodeTensorAndCompare(t *testing.T) {
	if _, err := os.Stat(nodeTests); err != nil {
		t.Skipf("%s is absent: %v", nodeTests, err)
	}
	dir := filepath.Join(nodeTests, "test_add", "test_data_set_0")
	b, err := os.ReadFile(filepath.Join(dir, "input_0.pb"))
	require.NoError(t, err)
	x, name, err := DecodeTensor(b)
	require.NoError(t, err)
	assert.Equal(t, "x", name)
	assert.Equal(t, []int64{3, 4, 5}, x.Shape())
	assert.Equal(t, "", Compare(x, x, 1e-3, 1e-7))
	v, err := session.TensorOf[float32](x)
	require.NoError(t, err)
	moved := append([]float32{}, v...)
	moved[7] += 1
	assert.Contains(t, Compare(session.MustTensor(x.Shape(), moved), x, 1e-3, 1e-7), "1 of 60 elements differ; element 7")
	assert.Contains(t, Compare(x.Reshaped(60), x, 1e-3, 1e-7), "shape")
	_, _, err = DecodeTensor([]byte{0xff, 0xff, 0xff})
	assert.Error(t, err)
}

func TestSummaryLine(t *testing.T) {
	rs := []Result{{Status: Pass}, {Status: Fail}, {Status: Skip}, {Status: Pass}}
	assert.Equal(t, "2 passed, 1 failed, 1 skipped", Tally(rs).String())
}
