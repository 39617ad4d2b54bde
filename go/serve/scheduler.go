package serve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/loomrt/loom/go/session"
)

// job is one inference request waiting for, or in, a run.
type job struct {
	ctx     context.Context
	inputs  []session.NamedTensor // in the model's input order
	rows    int64                 // the batch dimension's size (batching models)
	sig     string                // requests with equal signatures may share a batch
	enqueue time.Time
	taken   bool // guarded by the scheduler's mu: a run took it (it may no longer be abandoned)
	done    chan jobResult
}

type jobResult struct {
	outputs []session.Tensor
	err     error
	queue   time.Duration // time spent queued
	compute time.Duration // the run's duration
}

// scheduler queues a model's requests and runs them: alone, or (dynamic batching) several
// requests of equal trailing shapes concatenated along dimension 0, up to MaxBatchSize rows or
// until the first has waited MaxQueueDelay. The queue is bounded by MaxQueueSize; at most
// Instances runs are in flight. A request whose context ends while it is queued leaves the
// queue and never runs.
type scheduler struct {
	m       *model
	metrics *metrics
	delay   time.Duration

	mu      sync.Mutex
	queue   []*job
	closed  bool
	running int // runs in flight (guarded by mu)

	wake  chan struct{} // a job was queued, or the scheduler closed
	slots chan struct{} // one token per run in flight
	runs  sync.WaitGroup
	done  chan struct{} // the dispatch loop ended
}

func newScheduler(m *model, mt *metrics) *scheduler {
	s := &scheduler{
		m: m, metrics: mt,
		delay: time.Duration(m.cfg.MaxQueueDelayMicroseconds) * time.Microsecond,
		wake:  make(chan struct{}, 1),
		slots: make(chan struct{}, m.cfg.Instances),
		done:  make(chan struct{}),
	}
	go s.loop()
	return s
}

// signature is the key requests must share to be batched: every input's type and trailing
// dimensions, and the same first dimension across inputs.
func signature(inputs []session.NamedTensor) (rows int64, sig string, ok bool) {
	var b strings.Builder
	for i, in := range inputs {
		dims := in.Tensor.Dims()
		if len(dims) == 0 {
			return 0, "", false
		}
		if i == 0 {
			rows = dims[0]
		} else if dims[0] != rows {
			return 0, "", false
		}
		b.WriteString(strconv.Itoa(int(in.Tensor.DType())))
		for _, d := range dims[1:] {
			b.WriteByte(',')
			b.WriteString(strconv.FormatInt(d, 10))
		}
		b.WriteByte(';')
	}
	return rows, b.String(), true
}

// submit queues a request and waits for its outputs, or for its context to end.
func (s *scheduler) submit(ctx context.Context, inputs []session.NamedTensor) ([]session.Tensor, time.Duration, time.Duration, error) {
	j := &job{ctx: ctx, inputs: inputs, enqueue: time.Now(), done: make(chan jobResult, 1)}
	if s.m.batching {
		rows, sig, ok := signature(inputs)
		if ok && rows > 0 && rows <= int64(s.m.cfg.MaxBatchSize) {
			j.rows, j.sig = rows, sig
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, 0, err
	}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return nil, 0, 0, errorf(kindUnavailable, "model %q version %s is unloading or the server is shutting down", s.m.name, s.m.version)
	case len(s.queue) >= s.m.cfg.MaxQueueSize:
		s.mu.Unlock()
		return nil, 0, 0, errorf(kindExhausted, "model %q version %s: the queue is full (%d requests waiting; max_queue_size)", s.m.name, s.m.version, s.m.cfg.MaxQueueSize)
	}
	s.queue = append(s.queue, j)
	s.metrics.queueDepth.WithLabelValues(s.m.name, s.m.version).Set(float64(len(s.queue)))
	s.mu.Unlock()
	s.signal()
	select {
	case r := <-j.done:
		return r.outputs, r.queue, r.compute, r.err
	case <-ctx.Done():
		s.mu.Lock()
		if !j.taken {
			s.queue = slices.DeleteFunc(s.queue, func(q *job) bool { return q == j })
			s.metrics.queueDepth.WithLabelValues(s.m.name, s.m.version).Set(float64(len(s.queue)))
			s.mu.Unlock()
			return nil, time.Since(j.enqueue), 0, context.Cause(ctx)
		}
		s.mu.Unlock()
		// A run holds the request: it stops at its next seam if every request of its batch
		// has gone (runCtx), and its result is dropped.
		return nil, 0, 0, context.Cause(ctx)
	}
}

func (s *scheduler) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// close refuses new requests, lets the queued and running ones finish, and waits for them.
func (s *scheduler) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.signal()
	<-s.done
	s.runs.Wait()
}

// loop takes a run slot, forms the next batch and starts its run, until closed and drained.
func (s *scheduler) loop() {
	defer close(s.done)
	for {
		s.slots <- struct{}{}
		batch := s.next()
		if batch == nil {
			<-s.slots
			return
		}
		s.runs.Add(1)
		s.mu.Lock()
		s.running++
		s.mu.Unlock()
		go func() {
			defer func() {
				s.mu.Lock()
				s.running--
				s.mu.Unlock()
				<-s.slots
				s.runs.Done()
				s.signal() // a batcher waiting on a busy model may run now
			}()
			s.execute(batch)
		}()
	}
}

// next waits for a request and takes it with the queued requests that may share its run;
// nil once the scheduler is closed and its queue empty.
//
// A batch waits for more requests (up to MaxBatchSize rows, at most MaxQueueDelay after its
// first request was queued) only while another run of the model is in flight: then the
// processor is busy anyway and the wait costs no throughput. A model with nothing running
// runs what is queued at once, as waiting would leave it idle. The batch's rows are cut to a
// power of two where its requests allow (see batchRows); the requests left over stay queued,
// first in line for the next run.
func (s *scheduler) next() []*job {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) == 0 {
		if s.closed {
			return nil
		}
		s.mu.Unlock()
		<-s.wake
		s.mu.Lock()
	}
	first := s.queue[0]
	s.queue = s.queue[1:]
	first.taken = true
	batch := []*job{first}
	if first.sig == "" { // not batched
		s.metrics.queueDepth.WithLabelValues(s.m.name, s.m.version).Set(float64(len(s.queue)))
		return batch
	}
	rows, maxRows := first.rows, int64(s.m.cfg.MaxBatchSize)
	deadline := first.enqueue.Add(s.delay)
	var timer *time.Timer
	for {
		// Take the queued requests that fit, in order.
		kept := s.queue[:0]
		for _, j := range s.queue {
			if j.sig == first.sig && rows+j.rows <= maxRows {
				j.taken = true
				rows += j.rows
				batch = append(batch, j)
				continue
			}
			kept = append(kept, j)
		}
		clear(s.queue[len(kept):])
		s.queue = kept
		s.metrics.queueDepth.WithLabelValues(s.m.name, s.m.version).Set(float64(len(s.queue)))
		wait := time.Until(deadline)
		if rows >= maxRows || wait <= 0 || s.closed || s.running == 0 {
			break
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-timer.C:
		}
		s.mu.Lock()
	}
	batch = s.trim(batch)
	if len(s.queue) > 0 {
		s.signal() // requests the batch left behind: the next batch need not wait for a new one
	}
	return batch
}

// trim cuts a batch (in queue order) to the longest prefix whose rows are a power of two, and
// puts the requests after it back at the front of the queue, in order: the session compiles a
// run plan per input shape (and keeps 16), so batches of every size from 1 to 32 would keep
// most runs in the interpreter, where power-of-two batches need at most 6 plans a trailing
// shape. A batch without such a prefix longer than its first request runs whole, padded (see
// paddedRows). Called with mu held.
func (s *scheduler) trim(batch []*job) []*job {
	if len(batch) < 2 {
		return batch
	}
	var rows int64
	cut := 1
	for i, j := range batch {
		rows += j.rows
		if rows&(rows-1) == 0 {
			cut = i + 1
		}
	}
	if cut == len(batch) || cut == 1 && batch[0].rows&(batch[0].rows-1) != 0 {
		return batch
	}
	back := batch[cut:]
	for _, j := range back {
		j.taken = false
	}
	s.queue = append(slices.Clone(back), s.queue...)
	s.metrics.queueDepth.WithLabelValues(s.m.name, s.m.version).Set(float64(len(s.queue)))
	return batch[:cut]
}

// execute runs a batch and hands each request its outputs. Requests whose context ended before
// the run are answered with that and do not run.
func (s *scheduler) execute(batch []*job) {
	live := batch[:0:0]
	for _, j := range batch {
		if err := j.ctx.Err(); err != nil {
			j.done <- jobResult{err: context.Cause(j.ctx), queue: time.Since(j.enqueue)}
			continue
		}
		live = append(live, j)
	}
	if len(live) == 0 {
		return
	}
	start := time.Now()
	if len(live) == 1 {
		j := live[0]
		outs, err := s.m.run.Run(j.ctx, j.inputs)
		s.metrics.executed(s.m, max(j.rows, 1), time.Since(start))
		j.done <- jobResult{outputs: outs, err: err, queue: start.Sub(j.enqueue), compute: time.Since(start)}
		return
	}
	var rows int64
	for _, j := range live {
		rows += j.rows
	}
	outs, err := s.runBatch(live)
	compute := time.Since(start)
	s.metrics.executed(s.m, rows, compute)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		// One request's data may have failed the batch: run each alone, so that an error
		// reaches only the request it belongs to.
		for _, j := range live {
			t := time.Now()
			o, e := s.m.run.Run(j.ctx, j.inputs)
			s.metrics.executed(s.m, j.rows, time.Since(t))
			j.done <- jobResult{outputs: o, err: e, queue: start.Sub(j.enqueue), compute: compute + time.Since(t)}
		}
		return
	}
	var at int64
	for _, j := range live {
		r := jobResult{queue: start.Sub(j.enqueue), compute: compute, err: err}
		if err == nil {
			r.outputs = make([]session.Tensor, len(outs))
			for i, o := range outs {
				if r.outputs[i], r.err = sliceRows(o, at, at+j.rows); r.err != nil {
					r.err = errorf(kindInternal, "model %q output %q: batched output of shape %v does not split into the batch's %d rows: %v",
						s.m.name, s.m.outputs[i].Name, o.Dims(), rows, r.err)
					break
				}
			}
		}
		at += j.rows
		j.done <- r
	}
}

// paddedRows is the row count a batch of rows runs with: the next power of two (at most
// maxRows). The session compiles a run plan per input shape and keeps at most 16, so batches of
// every size from 1 to 32 would keep most runs in the interpreter; padded, a trailing shape
// needs at most 6 plans. The padding rows are zeros and their outputs are dropped.
func paddedRows(rows, maxRows int64) int64 {
	p := int64(1)
	for p < rows {
		p *= 2
	}
	return max(min(p, maxRows), rows)
}

// runBatch concatenates the batch's inputs along dimension 0 (padded with zero rows to
// paddedRows) and runs them under a context that
// ends when every request's context has ended (so a batch nobody waits for stops at its next
// seam) and that carries the first request's span, so the session's spans join its trace.
func (s *scheduler) runBatch(live []*job) ([]session.Tensor, error) {
	var rows int64
	for _, j := range live {
		rows += j.rows
	}
	padded := paddedRows(rows, int64(s.m.cfg.MaxBatchSize))
	inputs := make([]session.NamedTensor, len(live[0].inputs))
	parts := make([]session.Tensor, len(live), len(live)+1)
	for i, in := range live[0].inputs {
		parts = parts[:len(live)]
		for k, j := range live {
			parts[k] = j.inputs[i].Tensor
		}
		if padded > rows {
			shape := in.Tensor.Shape()
			shape[0] = padded - rows
			z, err := session.Zeros(in.Tensor.DType(), shape)
			if err != nil {
				return nil, fmt.Errorf("padding input %q: %w", in.Name, err)
			}
			parts = append(parts, z)
		}
		t, err := concatRows(parts)
		if err != nil {
			return nil, fmt.Errorf("batching input %q: %w", in.Name, err)
		}
		inputs[i] = session.NamedTensor{Name: in.Name, Tensor: t}
	}
	ctx, cancel := context.WithCancel(trace.ContextWithSpan(context.Background(), trace.SpanFromContext(live[0].ctx)))
	defer cancel()
	var mu sync.Mutex
	left := len(live)
	for _, j := range live {
		stop := context.AfterFunc(j.ctx, func() {
			mu.Lock()
			left--
			if left == 0 {
				cancel()
			}
			mu.Unlock()
		})
		defer stop()
	}
	return s.m.run.Run(ctx, inputs)
}
