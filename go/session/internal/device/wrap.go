package device

import (
	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// CanWrapHost says whether s's device runs kernels on memory the program holds: the host
// backend's own device (not a discrete stand-in for a GPU).
func CanWrapHost(s *ModelSession) bool {
	return s.ctx.dev.Backend() == native.BackendHost && !s.ctx.dev.Discrete()
}

// WrapHost binds b, memory the caller holds, as a region of s without copying it: kernels
// read it (and, when writable, write it) in place. Nothing is charged to the budget (the
// caller's memory is the caller's to account for). Only where CanWrapHost; b must be aligned
// for the elements kernels access, stay alive and unchanged by anything else until the
// region is released (ReleaseRegions) or the session closed, and a read-only region is
// immutable, as a weight.
func WrapHost(s *ModelSession, b []byte, writable bool) (Region, error) {
	const op = "ModelSession.WrapHost"
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return Region{}, err
	}
	if !CanWrapHost(s) {
		return Region{}, tensor.NewError(op, tensor.ErrInvalidArgument, "the %s device cannot run kernels on host memory", s.ctx.dev.Target())
	}
	if len(b) == 0 {
		return Region{}, tensor.NewError(op, tensor.ErrInvalidArgument, "an allocation needs at least 1 byte")
	}
	buf, err := s.ctx.dev.WrapHost(b)
	if err != nil {
		return Region{}, tensor.WrapError(op, tensor.ErrDevice, err, "cannot bind %d bytes of host memory", len(b))
	}
	a := &allocation{index: len(s.allocs), buf: buf, bytes: uint64(len(b)), kind: native.SharedMemory, weight: !writable, wrapped: true}
	s.allocs = append(s.allocs, a)
	return Region{owner: s.owner, alloc: a.index, bytes: a.bytes}, nil
}
