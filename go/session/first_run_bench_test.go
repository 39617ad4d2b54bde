package session

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/session/internal/tensor"
)

// BenchmarkFirstRunNewBatch times the first run of the classifier at each batch size 1-16, every
// one a signature the session has not planned (each run again, untimed): what a dynamic-batch service pays when a new
// batch size arrives (the plan built from shapes, its arena, its kernels loaded). The sessions
// are made, and the kernels compiled once, outside the clock.
func BenchmarkFirstRunNewBatch(b *testing.B) {
	rnd := inferRand()
	feeds := make([][]tensor.NamedTensor, 16)
	for i := range feeds {
		n := i + 1
		feeds[i] = []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{int64(n), 3, 32, 32}, randomF32(rnd, n*3*32*32))}}
	}
	open := func() *InferenceSession {
		s, err := Load(classifierPath, WithExecutionProvider(ProviderHost), WithIntraOpThreads(1))
		require.NoError(b, err)
		return s
	}
	warm := open()
	for _, f := range feeds {
		_, err := warm.Run(context.Background(), f)
		require.NoError(b, err)
	}
	// The disk cache holds every kernel: Close cancels the compiles still queued or running.
	require.NoError(b, warm.waitBackground(context.Background()))
	require.NoError(b, warm.Close())
	var s *InferenceSession
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	i := 0
	var first, second time.Duration
	for b.Loop() {
		if i%len(feeds) == 0 {
			b.StopTimer()
			if s != nil {
				s.Close()
			}
			s = open()
			b.StartTimer()
		}
		t0 := time.Now()
		if _, err := s.Run(context.Background(), feeds[i%len(feeds)]); err != nil {
			b.Fatal(err)
		}
		first += time.Since(t0)
		// A second run, as a service's batch sizes recur (a sweep of sizes that never come
		// back would have the session interpret new sizes: plan.Tiering).
		b.StopTimer()
		t0 = time.Now()
		if _, err := s.Run(context.Background(), feeds[i%len(feeds)]); err != nil {
			b.Fatal(err)
		}
		second += time.Since(t0)
		b.StartTimer()
		i++
	}
	// first/second: a size's first run over its second (the plan built; until the background
	// compiles land, the same shape-generic kernels).
	b.ReportMetric(float64(first)/float64(second), "first/second")
}
