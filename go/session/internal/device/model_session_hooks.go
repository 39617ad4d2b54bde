package device

import (
	"errors"
	"sync"

	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// loadedKernel is a kernel an InferenceSession compiled and loaded once for all its runs: the
// module stays loaded until the session closes, so a run only has to register the kernel with
// its ModelSession (no compile-cache lookup, no module load per run).
type LoadedKernel struct {
	Kernel *native.Kernel
	Sig    KernelSignature // normalized
}

// useLoadedKernel makes a kernel that the caller keeps loaded dispatchable in s without handing
// s its module (unlike ImportKernel): the module must outlive s. sig must be normalized.
func UseLoadedKernel(s *ModelSession, op string, k *LoadedKernel) (KernelID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return KernelID{}, err
	}
	return s.addKernel(k.Kernel, k.Sig), nil
}

// resetForReuse waits for the session's work and releases its recordings and allocations,
// keeping its stream and readback buffer, so that a later run can use it as if new. The
// session gets a fresh owner, so regions and kernel ids of the earlier use are refused rather
// than resolved against the new ones. It fails (leaving the session to be closed) when the
// session is closed, frozen or failed, or owns modules (a session of runCtx never does: its
// kernels are the InferenceSession's).
func ResetForReuse(s *ModelSession, op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return err
	}
	if len(s.modules) > 0 {
		return tensor.NewError(op, tensor.ErrInvalidArgument, "the session owns modules")
	}
	if err := s.synchronize(op); err != nil {
		return err
	}
	errs := s.closeRecordings()
	for _, a := range s.allocs {
		errs = append(errs, s.ctx.freeAllocation(a))
	}
	clear(s.allocs)
	s.allocs = s.allocs[:0]
	clear(s.kernels)
	s.kernels = s.kernels[:0]
	s.owner = newOwner()
	if err := tensor.JoinErrors(op, errs); err != nil {
		s.failed = err
		return err
	}
	return nil
}

// issueOnce validates commands and enqueues them directly on the session's stream, after the
// work enqueued before them: what Record and Replay do for a command list run once, without
// building a graph (one stream runs its work in order, so the inferred edges add nothing).
func IssueOnce(s *ModelSession, op string, commands []Command) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return err
	}
	if len(commands) == 0 {
		return tensor.NewError(op, tensor.ErrInvalidArgument, "no commands")
	}
	prepared, err := s.memory().prepare(op, commands)
	if err != nil {
		return err
	}
	// Dispatches without a violation word of their own get one that lives until the next
	// wait reads it.
	words, err := attachViolationWords(op, s.ctx, prepared, "the commands run once")
	if err != nil {
		return err
	}
	if words != nil {
		words.transient = true
	}
	return s.issueDirect(op, &recording{commands: prepared, words: words})
}

// emptyWeight stands in for a weight of no elements: kernels are bound to at least 4 bytes.
var EmptyWeight = make([]byte, 4)

// hostBytes returns the bytes of r as host memory the caller may read and write while no
// device work uses them, or nil when r's allocation is not host-visible.
func HostBytes(s *ModelSession, r Region) ([]byte, error) {
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
func RunRecorded(s *ModelSession, key string, maxThreads int, bindings []native.RunBinding, mem [][]byte) error {
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
			return tensor.WrapError(op, tensor.ErrInvalidArgument, err, "cannot run %q", key)
		}
		return s.latch(op, err)
	}
	if rec.words != nil || len(s.pending) > 0 {
		// The run has completed, and the work before it too: read the session's words.
		// (A plan's dispatches bind words of their own, which the plan reads.)
		s.launched(rec.words)
		return s.checkViolations(op)
	}
	return nil
}

// dispatchNodes reports, by node, which nodes of the graph recorded under key launch a
// kernel (a dispatch with an empty grid records an empty node, which binds nothing).
func DispatchNodes(s *ModelSession, key string) ([]bool, error) {
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
func ReleaseRegions(s *ModelSession, regions []Region) error {
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
			return tensor.NewError(op, tensor.ErrInvalidArgument, "%s is not a whole allocation", r)
		}
		if a.borrowed {
			return tensor.NewError(op, tensor.ErrInvalidArgument, "%s is a shared weight, not the session's to release", r)
		}
		errs = append(errs, s.ctx.freeAllocation(a))
		a.released = true
	}
	return tensor.JoinErrors(op, errs)
}

// SharedWeight binds the weight key names (WeightKey, UnpackedKey), held by store, as a
// weight of this session: uploaded once for all the sessions that bind it, and never freed by
// this one; raw gives its bytes (key's length of them) the first time. Each call takes a
// reference to the buffer that ReleaseWeights gives back; keep says the buffer stays once no
// reference is left (the model's own weights: a plan built later binds them again), else it
// is freed then (a constant one plan made: a mask, a weight unpacked for a stand-in kernel).
func SharedWeight(s *ModelSession, store *SharedWeights, key SharedWeightKey, raw func() []byte, keep bool) (Region, error) {
	const op = "ModelSession.Weight"
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return Region{}, err
	}
	buf, streamFailed, err := store.get(op, s.ctx, s.stream, key, raw, keep)
	if streamFailed {
		return Region{}, s.latch(op, err)
	}
	if err != nil {
		return Region{}, err
	}
	a := &allocation{index: len(s.allocs), buf: buf, bytes: uint64(key.bytes), kind: native.DeviceMemory, weight: true, borrowed: true}
	s.allocs = append(s.allocs, a)
	return Region{owner: s.owner, alloc: a.index, bytes: a.bytes}, nil
}

// sharedWeights holds the buffers of the weights and constant operands that compiled run
// plans read: one per distinct tensor memory, shared by every instance of every plan of an
// InferenceSession (concurrent runs each have an arena of their own, not weights of their
// own). On the host backend a buffer wraps the tensor's own memory (no copy at all; on
// PP-OCRv4 recognition 10.7 MB less), elsewhere it is a device copy. It owns the buffers; the
// instances' ModelSessions borrow them (sharedWeight).
//
// Buffers are counted by the references SharedWeight takes (one per plan instance) and those
// not kept are freed when the last is given back, so that the constants of plans no longer
// cached do not pile up over the input shapes a session sees.
type SharedWeights struct {
	Mu   sync.Mutex
	Bufs map[SharedWeightKey]*native.Buffer
	refs map[SharedWeightKey]int
	kept map[SharedWeightKey]bool
	// held keeps the memory wrapped buffers read when the key does not (UnpackedKey).
	held map[SharedWeightKey][]byte
}

// SharedWeightKey is a weight's memory: its first byte and length; with unpacked, the
// elements (that many bytes) unpacked from the packed memory there by the unpacking named
// (tensor.Relaid's layout).
type SharedWeightKey struct {
	first    *byte
	bytes    int
	unpacked string
}

// UnpackedKey names the n bytes that unpacking (a tensor.Relaid's layout, not empty) makes
// of the elements held packed in packed.
func UnpackedKey(packed []byte, n int, unpacking string) SharedWeightKey {
	return SharedWeightKey{&packed[0], n, unpacking}
}

// get returns raw's buffer, allocated in ctx and uploaded through stream (and waited for,
// since other sessions' streams may read it next) the first time. streamFailed says the
// upload failed on the stream (which is then failed for good), not the allocation.
func (w *SharedWeights) get(op string, ctx *ModelContext, stream *native.Stream, key SharedWeightKey, rawOf func() []byte, keep bool) (buf *native.Buffer, streamFailed bool, err error) {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	defer func() {
		if err == nil {
			w.refs[key]++
			if keep {
				w.kept[key] = true
			}
		}
	}()
	if buf := w.Bufs[key]; buf != nil {
		return buf, false, nil
	}
	raw := rawOf()
	if len(raw) != key.bytes {
		return nil, false, tensor.NewError(op, tensor.ErrInternal, "a weight of %d bytes named as %d", len(raw), key.bytes)
	}
	if len(raw) == 0 {
		raw = EmptyWeight
	}
	if ctx.dev.Backend() == native.BackendHost && !ctx.dev.Discrete() {
		// The host's kernels read the weight where the session holds it: no second copy.
		// The session's weights and plans never change their memory. (A discrete host
		// device, like a GPU, gets a device copy.)
		buf, err = ctx.dev.WrapHost(raw)
		if err != nil {
			return nil, false, tensor.WrapError(op, tensor.ErrDevice, err, "cannot bind %d bytes of weights", len(raw))
		}
		w.put(key, buf)
		if key.unpacked != "" {
			w.held[key] = raw
		}
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

func (w *SharedWeights) put(key SharedWeightKey, buf *native.Buffer) {
	if w.Bufs == nil {
		w.Bufs = map[SharedWeightKey]*native.Buffer{}
		w.refs = map[SharedWeightKey]int{}
		w.kept = map[SharedWeightKey]bool{}
		w.held = map[SharedWeightKey][]byte{}
	}
	w.Bufs[key] = buf
}

// ReleaseWeights gives back one reference to each of keys (taken by SharedWeight) and frees
// the buffers no reference is left to and that are not kept. The sessions that bound them
// must be closed first.
func ReleaseWeights(w *SharedWeights, ctx *ModelContext, keys []SharedWeightKey) error {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	var errs []error
	for _, key := range keys {
		buf := w.Bufs[key]
		if buf == nil || w.refs[key] <= 0 {
			continue // freed by CloseWeights already
		}
		if w.refs[key]--; w.refs[key] > 0 || w.kept[key] {
			continue
		}
		errs = append(errs, freeWeight(ctx, buf))
		delete(w.Bufs, key)
		delete(w.refs, key)
		delete(w.kept, key)
		delete(w.held, key)
	}
	return errors.Join(errs...)
}

// freeWeight frees a buffer of SharedWeights: a wrapped one is charged nothing.
func freeWeight(ctx *ModelContext, buf *native.Buffer) error {
	if buf.Kind() == native.SharedMemory {
		return buf.Close()
	}
	return ctx.free(buf)
}

// close frees the buffers, once no plan instance is left to read them. Idempotent.
func CloseWeights(w *SharedWeights, ctx *ModelContext) []error {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	var errs []error
	for key, buf := range w.Bufs {
		errs = append(errs, freeWeight(ctx, buf))
		delete(w.Bufs, key)
	}
	clear(w.refs)
	clear(w.kept)
	clear(w.held)
	return errs
}

// allocationInfo describes one live allocation of a session, for audits.
type allocationInfo struct {
	// Weight: immutable, written once; Borrowed: a weight another owner holds (shared weights).
	Weight, Borrowed bool
	// Buf is the allocation's buffer.
	Buf *native.Buffer
}

// allocations lists s's live allocations.
func Allocations(s *ModelSession) []allocationInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]allocationInfo, 0, len(s.allocs))
	for _, a := range s.allocs {
		out = append(out, allocationInfo{Weight: a.weight, Borrowed: a.borrowed, Buf: a.buf})
	}
	return out
}

// readbackBytes is the size of s's host-visible readback buffer (0 without one).
func ReadbackBytes(s *ModelSession) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readback == nil {
		return 0
	}
	return s.readback.Size()
}

// contextUsers is how many sessions and definitions use c.
func ContextUsers(c *ModelContext) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.users
}

// weightKey is the key of raw's bytes in a weight store (raw is not empty).
func WeightKey(raw []byte) SharedWeightKey { return SharedWeightKey{first: &raw[0], bytes: len(raw)} }
