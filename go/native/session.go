package native

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// NativeSession owns a state T (buffers, kernels, graph execs: whatever a client keeps on the
// device) and runs stages against it on a Runtime's compute lane, each followed by a fence that
// proves the stage's device work finished.
//
// It lives in package native rather than a package of its own because it is built from the
// Runtime's private admission and lane-replacement machinery; a separate package would have
// to export those, and go/session's model-level sessions already sit one layer up.
//
// Semantics:
//   - Run reserves the compute lane (FIFO with other submissions; see Runtime), runs the stage
//     on the calling goroutine, then runs the fence on every exit path: normal return, error,
//     panic and runtime.Goexit. A stage's panic is re-raised after the fence.
//   - Errors the stage returns are the client's: they are passed back and do not harm the
//     session.
//   - A fence that fails or panics quarantines the session for good: work it submitted may
//     still be in flight, so its state, and the Runtime allocation charges of the buffers in
//     it, are retained and never freed; the Runtime's compute stream is retired the same way
//     and replaced, so other sessions on the Runtime keep working. State and every later Run
//     return ErrDeviceLost.
//   - State is for use between Runs: while a Run of this session is in its stage or fence,
//     State returns ErrBusy rather than a pointer the stage may be writing, also when called
//     from the stage itself (which already has its *T). A Run that is still waiting for
//     admission (queued behind other compute work) does not make State busy; once it enters
//     its stage, a pointer obtained before must no longer be used. A quarantined session's
//     State is ErrDeviceLost, even while the Run whose fence failed is finishing; a closed
//     one's ErrClosed.
//   - A Run from inside a stage on the same Runtime (same goroutine) fails with ErrBusy
//     instead of waiting for itself. The stage's own compute work (Runtime.Launch and the
//     like) must likewise come from the stage's goroutine: submitted from another goroutine
//     it queues behind the stage, and a stage waiting for it would wait forever.
type NativeSession[T any] struct {
	rt    *Runtime
	fence func(*T) error
	state T

	mu      sync.Mutex
	lost    *Error
	closed  bool
	running bool // a Run is in its stage or fence
}

// New creates a session on rt owning state, fenced by fence (typically synchronizing the
// compute lane: func(*T) error { return rt.SynchronizeLane(native.Compute) }).
func New[T any](rt *Runtime, state T, fence func(*T) error) (*NativeSession[T], error) {
	if rt == nil || fence == nil {
		return nil, newError("New", StatusInvalidArgument, "a session needs a runtime and a fence")
	}
	return &NativeSession[T]{rt: rt, fence: fence, state: state}, nil
}

// State is the session's state, for use between Runs. It returns ErrDeviceLost once the
// session is quarantined, else ErrClosed after Close, else ErrBusy while a Run of the session
// is in its stage or fence (from any goroutine, the stage's own included).
func (s *NativeSession[T]) State() (*T, error) {
	const op = "NativeSession.State"
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(op); err != nil {
		return nil, err
	}
	if s.running {
		return nil, newError(op, StatusBusy, "a stage of the session is running (or its fence): the state belongs to the stage until its Run returns")
	}
	return &s.state, nil
}

// Runtime is the session's Runtime.
func (s *NativeSession[T]) Runtime() *Runtime { return s.rt }

func (s *NativeSession[T]) usable(op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usableLocked(op)
}

// usableLocked is usable with s.mu held.
func (s *NativeSession[T]) usableLocked(op string) error {
	if s.lost != nil {
		return s.lost
	}
	if s.closed {
		return newError(op, StatusClosed, "the session is closed")
	}
	return nil
}

// Run runs stage on s's state with the compute lane reserved, then the fence. It returns the
// stage's result and error; if the fence fails, an error that matches ErrDeviceLost and wraps
// the fence's (and the stage's) error. (Go methods cannot have type parameters, hence a
// function.)
func Run[T, R any](s *NativeSession[T], stage func(*T) (R, error)) (R, error) {
	const op = "NativeSession.Run"
	var zero R
	if s == nil || stage == nil {
		return zero, newError(op, StatusInvalidArgument, "nil session or stage")
	}
	if err := s.usable(op); err != nil {
		return zero, err
	}
	t, err := s.rt.admitStage(op)
	if err != nil {
		return zero, err
	}
	// Quarantined or closed while this Run waited for admission? If not, the stage starts:
	// State is busy from here until the fence has run.
	if err := s.enter(op); err != nil {
		t.release()
		return zero, err
	}
	return runStage(s, t, stage)
}

// enter checks that s is still usable and marks a stage running. The caller holds the
// compute lane, so no other stage of s can be running.
func (s *NativeSession[T]) enter(op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(op); err != nil {
		return err
	}
	s.running = true
	return nil
}

// leave marks the stage and its fence finished, before the compute lane is released (so that
// it cannot clear the mark of the session's next Run).
func (s *NativeSession[T]) leave() {
	s.mu.Lock()
	s.running = false
	s.mu.Unlock()
}

func runStage[T, R any](s *NativeSession[T], t ticket, stage func(*T) (R, error)) (result R, err error) {
	returned := false
	defer func() {
		if returned {
			return
		}
		// The stage panicked or called runtime.Goexit: fence, then let it carry on.
		p := recover()
		fenceErr, fencePanic := s.callFence()
		if fenceErr != nil || fencePanic != nil {
			s.quarantine(fenceErr, fencePanic, nil)
		}
		s.leave()
		t.release()
		if p != nil {
			panic(p)
		}
		if fencePanic != nil {
			panic(fencePanic)
		}
	}()
	result, err = stage(&s.state)
	returned = true
	fenceErr, fencePanic := s.callFence()
	if fenceErr != nil || fencePanic != nil {
		lost := s.quarantine(fenceErr, fencePanic, err)
		s.leave()
		t.release()
		if fencePanic != nil {
			panic(fencePanic)
		}
		var zero R
		return zero, lost
	}
	s.leave()
	t.release()
	return result, err
}

// callFence runs the fence, turning a panic into a value.
func (s *NativeSession[T]) callFence() (err error, panicked any) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
		}
	}()
	return s.fence(&s.state), nil
}

// quarantine marks the session lost, retains its state forever and retires the compute lane.
// The caller holds the compute lane.
func (s *NativeSession[T]) quarantine(fenceErr error, fencePanic any, stageErr error) *Error {
	cause := fenceErr
	if fencePanic != nil {
		cause = fmt.Errorf("the fence panicked: %v", fencePanic)
	}
	lost := &Error{
		Op:      "NativeSession.Run",
		Status:  StatusDeviceLost,
		Message: "the session is quarantined because its fence failed; its device work may still be in flight, so its state and memory are retained",
		Cause:   errors.Join(cause, stageErr),
	}
	s.mu.Lock()
	s.lost = lost
	s.mu.Unlock()
	retain(&s.state)
	s.rt.mu.Lock()
	s.rt.quarantined++
	s.rt.mu.Unlock()
	s.rt.replaceCompute()
	return lost
}

// Close drops the session's state: if *T implements io.Closer its Close is called, once. It
// waits for a running stage (and fails with ErrBusy when called from one). A quarantined
// session keeps its state and returns ErrDeviceLost. Idempotent otherwise.
func (s *NativeSession[T]) Close() error {
	const op = "NativeSession.Close"
	t, err := s.rt.admit(op, true)
	if err != nil && !errorsIsClosed(err) {
		return err
	}
	defer t.release()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost != nil {
		return s.lost
	}
	if s.closed {
		return nil
	}
	s.closed = true
	if c, ok := any(&s.state).(io.Closer); ok {
		return c.Close()
	}
	return nil
}
