package device

import (
	"testing"

	"github.com/loomrt/loom/go/session/internal/sessiontest"
	"github.com/stretchr/testify/require"
)

// smallKernelGraph records 200 axpy dispatches of 256 float32 elements each: 8 independent
// chains of 25 dispatches (y_c += 0.001 * x, repeatedly), the shape of a small model's
// per-layer kernels.
func smallKernelGraph(b *testing.B) *ModelSession {
	const (
		n        = 256
		chains   = 8
		perChain = 25
	)
	s := hostSession(b)
	k, err := s.ImportKernel(testKernel(b, s.ctx.dev, "axpy_f32"), axpySignature())
	require.NoError(b, err)
	x, err := s.Allocate(4 * n)
	require.NoError(b, err)
	ys := make([]Region, chains)
	for c := range ys {
		ys[c], err = s.Allocate(4 * n)
		require.NoError(b, err)
		require.NoError(b, s.Upload(ys[c], float32Bytes(make([]float32, n))))
	}
	rnd := sessiontest.NewRand(b)
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = rnd.Float32()
	}
	require.NoError(b, s.Upload(x, float32Bytes(xs)))
	var cmds []Command
	for range perChain {
		for c := range chains {
			cmds = append(cmds, axpy(k, 0.001, n, x, ys[c]))
		}
	}
	require.Len(b, cmds, 200)
	require.NoError(b, s.Record("fwd", cmds))
	return s
}

// BenchmarkForward200 runs ModelSession.Benchmark on the 200-dispatch graph and reports its
// medians: graph-ms and direct-ms per forward pass, and direct/graph, the speed-up of graph
// replay over issuing the same commands one by one.
//
//	go test ./go/session -run '^$' -bench Forward200 -benchtime 5x
func BenchmarkForward200(b *testing.B) {
	s := smallKernelGraph(b)
	var last ForwardTimings
	for b.Loop() {
		var err error
		last, err = s.Benchmark("fwd", 100)
		require.NoError(b, err)
	}
	b.ReportMetric(last.Graph.MedianMs, "graph-ms")
	b.ReportMetric(last.Graph.P95Ms, "graph-p95-ms")
	b.ReportMetric(last.Direct.MedianMs, "direct-ms")
	b.ReportMetric(last.Direct.P95Ms, "direct-p95-ms")
	b.ReportMetric(last.Direct.MedianMs/last.Graph.MedianMs, "direct/graph")
}

// BenchmarkReplay200 and BenchmarkDirect200 time one forward pass (submission through
// synchronize) each way with Go's own benchmark loop.
func BenchmarkReplay200(b *testing.B) {
	s := smallKernelGraph(b)
	for b.Loop() {
		require.NoError(b, s.Replay("fwd"))
		require.NoError(b, s.Synchronize())
	}
}

func BenchmarkDirect200(b *testing.B) {
	s := smallKernelGraph(b)
	rec := s.recordings["fwd"]
	for b.Loop() {
		s.mu.Lock()
		err := s.issueDirect("bench", rec)
		s.mu.Unlock()
		require.NoError(b, err)
		require.NoError(b, s.Synchronize())
	}
}
