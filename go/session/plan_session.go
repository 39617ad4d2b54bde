package session

import (
	"errors"
	"sync"

	"github.com/loomrt/loom/go/native"
)

// ModelSession internals for compiled run plans (plan.go).

// runSession opens a ModelSession for an InferenceSession's run or plan: on the host
// provider its stream is inline (each operation runs on the calling thread: a run waits for
// every op anyway, and the hand-off to a stream thread costs more than small kernels).
func (s *InferenceSession) runSession() (*ModelSession, error) {
	opts := native.StreamOptions{MaxThreads: s.threads}
	if s.provider == ProviderHost {
		opts.Inline = true
	}
	return newSessionWith("Run", s.ctx, false, opts)
}

// hostBytes returns the bytes of r as host memory the caller may read and write while no
// device work uses them, or nil when r's allocation is not host-visible.
func (s *ModelSession) hostBytes(r Region) ([]byte, error) {
	const op = "Run"
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return nil, err
	}
	a, err := s.memory().region(op, "the plan's arena", r)
	if err != nil {
		return nil, err
	}
	if !a.hostVisible() || a.buf == nil {
		return nil, nil
	}
	view := a.buf.Bytes()
	if uint64(len(view)) < r.offset+r.bytes {
		return nil, nil
	}
	return view[r.offset : r.offset+r.bytes : r.offset+r.bytes], nil
}

// runRecorded runs the graph recorded under key to completion before returning, after the
// work enqueued before it; on the host backend on the calling thread, each kernel's blocks
// on at most maxThreads threads (0: the device's pool too). See native.GraphExec.Run. With
// bindings, some kernel bindings move onto caller memory for this run (see
// native.GraphExec.RunBound): a plan's inputs and outputs, read and written in place rather
// than copied through the arena.
func (s *ModelSession) runRecorded(key string, maxThreads int, bindings []native.RunBinding, mem *[native.MaxRunMemories][]byte) error {
	const op = "Run"
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.recording(op, key)
	if err != nil {
		return err
	}
	if len(bindings) == 0 {
		err = rec.exec.Run(s.stream, maxThreads)
	} else {
		err = rec.exec.RunBound(s.stream, maxThreads, bindings, mem)
	}
	if err != nil {
		if errors.Is(err, native.ErrInvalidArgument) {
			// Refused before anything ran: the stream is fine.
			return wrapError(op, ErrInvalidArgument, err, "cannot run %q", key)
		}
		return s.latch(op, err)
	}
	return nil
}

// dispatchNodes reports, by node, which nodes of the graph recorded under key launch a
// kernel (a dispatch with an empty grid records an empty node, which binds nothing).
func (s *ModelSession) dispatchNodes(key string) ([]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.recording("Run", key)
	if err != nil {
		return nil, err
	}
	kernels := make([]bool, len(rec.commands))
	for i, c := range rec.commands {
		kernels[i] = c.kind == dispatchCommand
	}
	return kernels, nil
}

// release gives the memory of whole allocations back before the session ends (an
// interpreted op's operands, once it has run and its outputs are read), after the work
// enqueued so far, so that a run does not hold every op's operands until it ends. Regions of
// released allocations are refused from then on.
func (s *ModelSession) release(regions []Region) error {
	const op = "Run"
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return err
	}
	if err := s.synchronize(op); err != nil {
		return err
	}
	var errs []error
	for _, r := range regions {
		a, err := s.memory().region(op, "a released region", r)
		if err != nil {
			return err
		}
		if r.offset != 0 || r.bytes != a.bytes {
			return newError(op, ErrInvalidArgument, "%s is not a whole allocation", r)
		}
		if a.borrowed {
			return newError(op, ErrInvalidArgument, "%s is a shared weight, not the session's to release", r)
		}
		errs = append(errs, s.ctx.free(a.buf))
		a.buf, a.released = nil, true
	}
	return joinErrors(op, errs)
}

// sharedWeights holds the buffers of the weights and constant operands that compiled run
// plans read: one per distinct tensor memory, shared by every instance of every plan of an
// InferenceSession (concurrent runs each have an arena of their own, not weights of their
// own). On the host backend a buffer wraps the tensor's own memory (no copy at all; on
// PP-OCRv4 recognition 10.7 MB less), elsewhere it is a device copy. It owns the buffers; the
// instances' ModelSessions borrow them (sharedWeight).
type sharedWeights struct {
	mu   sync.Mutex
	bufs map[sharedWeightKey]*native.Buffer
}

// sharedWeightKey is a weight's memory: its first byte and length.
type sharedWeightKey struct {
	first *byte
	bytes int
}

// emptyWeight stands in for a weight of no elements: kernels are bound to at least 4 bytes.
var emptyWeight = make([]byte, 4)

// get returns raw's buffer, allocated in ctx and uploaded through stream (and waited for,
// since other sessions' streams may read it next) the first time. streamFailed says the
// upload failed on the stream (which is then failed for good), not the allocation.
func (w *sharedWeights) get(op string, ctx *ModelContext, stream *native.Stream, raw []byte) (buf *native.Buffer, streamFailed bool, err error) {
	key := sharedWeightKey{&raw[0], len(raw)}
	w.mu.Lock()
	defer w.mu.Unlock()
	if buf := w.bufs[key]; buf != nil {
		return buf, false, nil
	}
	if ctx.dev.Backend() == native.BackendHost {
		// The host's kernels read the weight where the session holds it: no second copy.
		// The session's weights and plans never change their memory.
		buf, err = ctx.dev.WrapHost(raw)
		if err != nil {
			return nil, false, wrapError(op, ErrDevice, err, "cannot bind %d bytes of weights", len(raw))
		}
		w.put(key, buf)
		return buf, false, nil
	}
	buf, err = ctx.alloc(op, native.DeviceMemory, uint64(len(raw)))
	if err != nil {
		return nil, false, err
	}
	if err := stream.Upload(buf, 0, raw); err == nil {
		err = stream.Synchronize()
	}
	if err != nil {
		return nil, true, errors.Join(err, ctx.free(buf))
	}
	w.put(key, buf)
	return buf, false, nil
}

func (w *sharedWeights) put(key sharedWeightKey, buf *native.Buffer) {
	if w.bufs == nil {
		w.bufs = map[sharedWeightKey]*native.Buffer{}
	}
	w.bufs[key] = buf
}

// close frees the buffers, once no plan instance is left to read them. Idempotent.
func (w *sharedWeights) close(ctx *ModelContext) []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	for key, buf := range w.bufs {
		if buf.Kind() == native.SharedMemory { // wrapped: charged nothing
			errs = append(errs, buf.Close())
		} else {
			errs = append(errs, ctx.free(buf))
		}
		delete(w.bufs, key)
	}
	return errs
}

// sharedWeight binds raw, held by store, as a weight of this session: uploaded once for all
// the sessions that bind it, and never freed by this one.
func (s *ModelSession) sharedWeight(store *sharedWeights, raw []byte) (Region, error) {
	const op = "ModelSession.Weight"
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return Region{}, err
	}
	if len(raw) == 0 {
		raw = emptyWeight
	}
	buf, streamFailed, err := store.get(op, s.ctx, s.stream, raw)
	if streamFailed {
		return Region{}, s.latch(op, err)
	}
	if err != nil {
		return Region{}, err
	}
	a := &allocation{index: len(s.allocs), buf: buf, bytes: uint64(len(raw)), kind: native.DeviceMemory, weight: true, borrowed: true}
	s.allocs = append(s.allocs, a)
	return Region{owner: s.owner, alloc: a.index, bytes: a.bytes}, nil
}
