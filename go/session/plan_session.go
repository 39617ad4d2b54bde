package session

import (
	"errors"

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
		errs = append(errs, s.ctx.free(a.buf))
		a.buf, a.released = nil, true
	}
	return joinErrors(op, errs)
}
