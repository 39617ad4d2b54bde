package serve

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/session"
)

// A model with nothing running does not hold a request for the batching delay: waiting would
// leave it idle.
func TestIdleModelRunsAtOnce(t *testing.T) {
	ts := startServer(t, WithModelRepository(writeRepo(t, map[string]repoModel{
		"encoder": {file: encoderPath, config: `{"max_batch_size": 8, "max_queue_delay_us": 30000000}`},
	})))
	rng := newRand(t)
	start := time.Now()
	_, err := grpcInfer(context.Background(), ts.client, "encoder", session.NamedTensor{Name: "x", Tensor: encoderInput(rng, 1, 4)})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 15*time.Second, "the request waited for the 30 s batching delay")
}

// Requests queued behind a run form the next batch, cut to a power of two rows; the rest run
// next, first in line; every request gets its own rows back.
func TestBatchesArePowersOfTwo(t *testing.T) {
	ts := startServer(t, WithModelRepository(writeRepo(t, map[string]repoModel{
		"encoder": {file: encoderPath, config: `{"max_batch_size": 8, "max_queue_delay_us": 1000, "instances": 1}`},
	})))
	h := hook(t, ts.Server, "encoder", true)
	rng := newRand(t)
	ctx := context.Background()
	const queued = 5
	xs := make([]session.Tensor, 1+queued)
	for i := range xs {
		xs[i] = encoderInput(rng, 1, 6)
	}
	got := make([][]float32, len(xs))
	errs := make([]error, len(xs))
	var wg sync.WaitGroup
	infer := func(i int) {
		defer wg.Done()
		res, err := grpcInfer(ctx, ts.client, "encoder", session.NamedTensor{Name: "x", Tensor: xs[i]})
		if errs[i] = err; err == nil {
			got[i] = grpcFloats(t, res, 0)
		}
	}
	wg.Add(1)
	go infer(0)
	h.waitStarted(t) // the first request runs alone, held by the gate
	for i := 1; i <= queued; i++ {
		wg.Add(1)
		go infer(i)
	}
	eventually(t, func() bool { return queueLen(ts.Server, "encoder") == queued }, "the requests to queue")
	h.release()
	wg.Wait()
	for i, x := range xs {
		require.NoError(t, errs[i], "request %d", i)
		want := floatsOf(t, reference(t, encoderPath, session.NamedTensor{Name: "x", Tensor: x})[0])
		requireClose(t, want, got[i], fmt.Sprintf("request %d", i))
	}
	st, err := ts.Server.statistics("encoder", "1")
	require.NoError(t, err)
	sizes := map[uint64]uint64{}
	for _, b := range st[0].BatchStats {
		sizes[b.BatchSize] = b.ComputeInfer.Count
	}
	// 1 (alone, while the others queued), then 4 of the 5 queued, then the last one.
	assert.Equal(t, map[uint64]uint64{1: 2, 4: 1}, sizes)
	assert.EqualValues(t, 3, st[0].ExecutionCount)
	assert.EqualValues(t, 1+queued, st[0].InferenceCount)
}

// trim keeps the longest power-of-two prefix, puts the rest back first in line, and leaves a
// batch without such a prefix (beyond its first request) whole, for padding.
func TestTrimBatch(t *testing.T) {
	jobs := func(rows ...int64) []*job {
		var js []*job
		for _, r := range rows {
			js = append(js, &job{rows: r, taken: true})
		}
		return js
	}
	for _, tc := range []struct {
		rows      []int64
		keep, put int
	}{
		{[]int64{1}, 1, 0},
		{[]int64{1, 1, 1}, 2, 1},
		{[]int64{1, 1, 1, 1, 1, 1, 1}, 4, 3},
		{[]int64{2, 2, 4}, 3, 0},
		{[]int64{3, 1, 2}, 2, 1},
		{[]int64{3, 2}, 2, 0}, // 3, then 5: no power of two: whole, padded to 8
		{[]int64{2, 3}, 1, 1},
	} {
		s := &scheduler{m: &model{name: "m", version: "1"}, metrics: newMetrics()}
		s.queue = jobs(9)
		batch := jobs(tc.rows...)
		kept := s.trim(batch)
		assert.Len(t, kept, tc.keep, "%v", tc.rows)
		require.Len(t, s.queue, 1+tc.put, "%v", tc.rows)
		for i := range tc.put {
			assert.Same(t, batch[tc.keep+i], s.queue[i], "%v: put back in order, first in line", tc.rows)
			assert.False(t, s.queue[i].taken)
		}
		assert.EqualValues(t, 9, s.queue[tc.put].rows)
	}
}
