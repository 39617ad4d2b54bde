package device

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// ModelSession builds and runs one model on one device: it allocates memory (device-local,
// host-visible, or immutable weights), compiles Loom kernels, records command lists into
// graphs whose edges it infers from the commands' declared bindings, replays them, and reads
// results back. Freeze turns it into a ModelDefinition that can run many copies at once.
//
// Its work runs in order on one stream of its own. When any operation on that stream fails,
// the session latches failed: every later call returns an error matching ErrFailed (with the
// stream's failure as its cause); only Close still works.
//
// A kernel that skips an access at a bounds check is an error by default: unless a Dispatch
// binds a Violation word of its own or sets IgnoreViolations, the session gives it a word and
// the next call that waits for its work (Synchronize, Read, ReadMany, Freeze) returns an
// error matching ErrInvalidArgument that names the command, the recording and the kernel.
// That error does not fail the session.
//
// The methods are safe for concurrent use; they are serialized.
type ModelSession struct {
	mu          sync.Mutex
	ctx         *ModelContext
	ownsCtx     bool
	owner       *owner
	stream      *native.Stream
	allocs      []*allocation
	kernels     []*kernelEntry
	modules     []*native.Module          // owned: loaded by Compile or taken over by ImportKernel
	moduleByKey map[string]*native.Module // Compile's modules by artifact key
	recordings  map[string]*recording
	readback    *native.Buffer // grow-only, host-visible (ReadMany)
	// pending: the violation words of the command lists launched since the stream was last
	// waited for, which the next wait reads (checkViolations).
	pending []*violationWords
	failed  error
	closed  bool
	frozen  bool

	edgeFilter edgeFilter // tests only
}

// recording is a recorded command list: its prepared commands (for direct issue), the
// instantiated graph, and the violation words the session supplies to its dispatches (nil
// when none asked for one).
type recording struct {
	commands []preparedCommand
	exec     *native.GraphExec
	words    *violationWords
}

// Option configures the ModelSession that Open, OpenFor or WithCompiler makes (OnBackend,
// WithBudget, WithWorkerThreads). An InferenceSession is configured by LoadOptions instead.
type Option func(*options)

type options struct {
	backend native.Backend
	budget  uint64
	workers int
}

// OnBackend selects the backend whose device index Open opens: native.BackendHost (the
// default) or native.BackendCUDA, which makes Open(i, OnBackend(native.BackendCUDA)) open
// CUDA device i.
func OnBackend(b native.Backend) Option { return func(o *options) { o.backend = b } }

// WithBudget sets the allocation budget, in bytes, of the context Open makes (default
// Unlimited).
func WithBudget(bytes uint64) Option { return func(o *options) { o.budget = bytes } }

// WithWorkerThreads sets the host backend's worker threads (default: the hardware
// concurrency). Ignored by CUDA.
func WithWorkerThreads(n int) Option { return func(o *options) { o.workers = n } }

func collect(opts []Option) options {
	o := options{backend: native.BackendHost, budget: Unlimited}
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

// Open opens device index of the host backend (or of the backend chosen with OnBackend) in a
// context of its own, which the session closes with itself.
func Open(index int, opts ...Option) (*ModelSession, error) {
	return openSession("Open", index, "", opts)
}

// OpenFor is Open, refusing (ErrTargetMismatch) a device whose code target is not
// expectedTarget, for code compiled ahead of time for that target.
func OpenFor(index int, expectedTarget string, opts ...Option) (*ModelSession, error) {
	if expectedTarget == "" {
		return nil, tensor.NewError("OpenFor", tensor.ErrInvalidArgument, "empty expected target")
	}
	return openSession("OpenFor", index, expectedTarget, opts)
}

func openSession(op string, index int, expectedTarget string, opts []Option) (*ModelSession, error) {
	o := collect(opts)
	if o.budget == 0 {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "a budget of 0 bytes allows no allocation; use Unlimited for no limit")
	}
	dev, err := native.Open(o.backend, index, &native.OpenOptions{WorkerThreads: o.workers})
	if err != nil {
		return nil, tensor.WrapError(op, tensor.ErrDevice, err, "cannot open %s device %d", o.backend, index)
	}
	if expectedTarget != "" && dev.Target() != expectedTarget {
		target := dev.Target()
		dev.Close()
		return nil, tensor.NewError(op, tensor.ErrTargetMismatch, "%s device %d has target %s, not %s", o.backend, index, target, expectedTarget)
	}
	ctx := &ModelContext{dev: dev, ownsDevice: true, budget: o.budget}
	s, err := newSession(op, ctx, true)
	if err != nil {
		ctx.Close()
		return nil, err
	}
	return s, nil
}

// WithCompiler makes a session on dev (which stays the caller's) that compiles with compiler
// (also the caller's, to close after the session). It refuses a compiler whose target differs
// from the device's, before any code is compiled or loaded.
func WithCompiler(dev *native.Device, compiler Compiler, opts ...Option) (*ModelSession, error) {
	const op = "WithCompiler"
	if dev == nil {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "nil device")
	}
	o := collect(opts)
	ctx, err := NewContext(dev, o.budget)
	if err != nil {
		return nil, err
	}
	if err := ctx.setCompiler(op, compiler); err != nil {
		return nil, err
	}
	s, err := newSession(op, ctx, true)
	if err != nil {
		ctx.Close()
		return nil, err
	}
	return s, nil
}

// InContext makes a session in ctx, sharing its device, compiler and budget.
func InContext(ctx *ModelContext) (*ModelSession, error) {
	if ctx == nil {
		return nil, tensor.NewError("InContext", tensor.ErrInvalidArgument, "nil context")
	}
	return newSession("InContext", ctx, false)
}

func newSession(op string, ctx *ModelContext, ownsCtx bool) (*ModelSession, error) {
	return NewSessionWith(op, ctx, ownsCtx, native.StreamOptions{})
}

// newSessionWith is newSession with the session's stream made with opts (an inline stream
// for the InferenceSession's runs, which wait for every op anyway).
func NewSessionWith(op string, ctx *ModelContext, ownsCtx bool, opts native.StreamOptions) (*ModelSession, error) {
	if err := ctx.acquire(op); err != nil {
		return nil, err
	}
	stream, err := ctx.dev.NewStreamWith(opts)
	if err != nil {
		ctx.release()
		return nil, tensor.WrapError(op, tensor.ErrDevice, err, "cannot create the session's stream")
	}
	return &ModelSession{
		ctx: ctx, ownsCtx: ownsCtx, owner: newOwner(), stream: stream,
		recordings: make(map[string]*recording), moduleByKey: make(map[string]*native.Module),
	}, nil
}

// Target is the code target of the session's device.
func (s *ModelSession) Target() string { return s.ctx.Target() }

// Context is the context the session allocates and compiles in.
func (s *ModelSession) Context() *ModelContext { return s.ctx }

// usable fails once the session is closed, frozen or failed. The caller holds s.mu.
func (s *ModelSession) usable(op string) error {
	switch {
	case s.closed:
		return tensor.NewError(op, tensor.ErrClosed, "the session is closed")
	case s.frozen:
		return tensor.NewError(op, tensor.ErrClosed, "the session was frozen into a ModelDefinition")
	case s.failed != nil:
		return tensor.WrapError(op, tensor.ErrFailed, s.failed, "an earlier operation on the session's stream failed; the session accepts no more calls")
	}
	return nil
}

// latch marks the session failed after a stream operation failed.
func (s *ModelSession) latch(op string, err error) error {
	s.failed = err
	return tensor.WrapError(op, tensor.ErrFailed, err, "the session's stream failed; the session accepts no more calls")
}

// memory resolves regions and kernels of the session. The caller holds s.mu.
func (s *ModelSession) memory() *memoryMap {
	return &memoryMap{
		owner:   s.owner,
		alloc:   func(i int) *allocation { return s.allocs[i] },
		count:   len(s.allocs),
		kernels: s.kernels,
	}
}

// ---------------------------------------------------------------- memory

// Allocate allocates bytes of device-local memory.
func (s *ModelSession) Allocate(bytes uint64) (Region, error) {
	return s.allocate("ModelSession.Allocate", native.DeviceMemory, bytes, nil)
}

// AllocateShared allocates bytes of coherent, host-visible memory (pinned and mapped on
// CUDA): Read copies from it directly.
func (s *ModelSession) AllocateShared(bytes uint64) (Region, error) {
	return s.allocate("ModelSession.AllocateShared", native.SharedMemory, bytes, nil)
}

// Weight allocates len(data) bytes of device-local memory, enqueues the upload of data (which
// may be reused at once) and marks the allocation immutable: commands may read it but never
// write, fill or copy into it, and Upload refuses it.
func (s *ModelSession) Weight(data []byte) (Region, error) {
	return s.allocate("ModelSession.Weight", native.DeviceMemory, uint64(len(data)), data)
}

func (s *ModelSession) allocate(op string, kind native.MemoryKind, bytes uint64, weight []byte) (Region, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return Region{}, err
	}
	if bytes == 0 {
		return Region{}, tensor.NewError(op, tensor.ErrInvalidArgument, "an allocation needs at least 1 byte")
	}
	buf, err := s.ctx.alloc(op, kind, bytes)
	if err != nil {
		return Region{}, err
	}
	a := &allocation{index: len(s.allocs), buf: buf, bytes: bytes, kind: kind, weight: weight != nil}
	if weight != nil {
		if err := s.stream.Upload(buf, 0, weight); err != nil {
			s.ctx.free(buf)
			return Region{}, s.latch(op, err)
		}
	}
	s.allocs = append(s.allocs, a)
	return Region{owner: s.owner, alloc: a.index, bytes: bytes}, nil
}

// Upload enqueues writing data to the leading len(data) bytes of r, after the work enqueued
// before it. data may be reused at once. Longer data than r is an error, as is a weight.
func (s *ModelSession) Upload(r Region, data []byte) error {
	const op = "ModelSession.Upload"
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return err
	}
	a, err := s.memory().region(op, "the upload's region", r)
	if err != nil {
		return err
	}
	if a.weight {
		return tensor.NewError(op, tensor.ErrImmutable, "%s is a weight", r)
	}
	if uint64(len(data)) > r.bytes {
		return tensor.NewError(op, tensor.ErrInvalidArgument, "%d bytes do not fit in %s", len(data), r)
	}
	if len(data) == 0 {
		return nil
	}
	if err := s.stream.Upload(a.buf, r.offset, data); err != nil {
		return s.latch(op, err)
	}
	return nil
}

// Synchronize waits for everything enqueued so far.
func (s *ModelSession) Synchronize() error {
	const op = "ModelSession.Synchronize"
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return err
	}
	return s.synchronize(op)
}

// synchronize waits for the stream, then reports a bounds-check violation of the work it
// waited for (see Dispatch.Violation).
func (s *ModelSession) synchronize(op string) error {
	if err := s.stream.Synchronize(); err != nil {
		return s.latch(op, err)
	}
	if len(s.pending) > 0 {
		return s.checkViolations(op)
	}
	return nil
}

// readbackAlign keeps each region's staging in the readback buffer aligned for any element
// type and for the device's copy engines.
const readbackAlign = 256

// ReserveReadback grows the session's host-visible readback buffer to at least bytes now, so
// that ReadMany of device-local regions up to that size allocates nothing. The buffer only
// grows; it is charged to the context's budget.
func (s *ModelSession) ReserveReadback(bytes uint64) error {
	const op = "ModelSession.ReserveReadback"
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return err
	}
	if bytes == 0 {
		return tensor.NewError(op, tensor.ErrInvalidArgument, "cannot reserve 0 bytes")
	}
	return s.growReadback(op, bytes)
}

func (s *ModelSession) growReadback(op string, bytes uint64) error {
	if s.readback != nil && s.readback.Size() >= bytes {
		return nil
	}
	// The old buffer is idle: every ReadMany synchronizes before returning.
	if err := s.ctx.free(s.readback); err != nil {
		return tensor.WrapError(op, tensor.ErrDevice, err, "cannot release the old readback buffer")
	}
	s.readback = nil
	buf, err := s.ctx.alloc(op, native.SharedMemory, bytes)
	if err != nil {
		return err
	}
	s.readback = buf
	return nil
}

// ReadRequest asks ReadMany for the leading len(Dst) bytes of Region.
type ReadRequest struct {
	Region Region
	Dst    []byte
}

// Read waits for the work enqueued so far, then copies the leading len(dst) bytes of r into
// dst. A dst longer than r is an error. So is a bounds-check violation of the work it waited
// for (see Dispatch.Violation), which copies nothing.
func (s *ModelSession) Read(r Region, dst []byte) error {
	return s.readMany("ModelSession.Read", []ReadRequest{{Region: r, Dst: dst}})
}

// ReadMany reads several regions with one wait. Host-visible regions are copied out directly
// after the wait; device-local ones are first copied, on the device, into the session's
// grow-only host-visible readback buffer (see ReserveReadback), then out of it.
func (s *ModelSession) ReadMany(requests []ReadRequest) error {
	return s.readMany("ModelSession.ReadMany", requests)
}

func (s *ModelSession) readMany(op string, requests []ReadRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return err
	}
	m := s.memory()
	allocs := make([]*allocation, len(requests))
	staged := make([]uint64, len(requests)) // offset in the readback buffer
	var total uint64
	for i, rq := range requests {
		a, err := m.region(op, fmt.Sprintf("request %d", i), rq.Region)
		if err != nil {
			return err
		}
		if uint64(len(rq.Dst)) > rq.Region.bytes {
			return tensor.NewError(op, tensor.ErrInvalidArgument, "request %d: a %d-byte destination is longer than %s", i, len(rq.Dst), rq.Region)
		}
		allocs[i] = a
		if !a.hostVisible() && len(rq.Dst) > 0 {
			staged[i] = total
			total += (uint64(len(rq.Dst)) + readbackAlign - 1) / readbackAlign * readbackAlign
		}
	}
	if total > 0 {
		if err := s.growReadback(op, total); err != nil {
			return err
		}
		for i, rq := range requests {
			if allocs[i].hostVisible() || len(rq.Dst) == 0 {
				continue
			}
			if err := s.stream.Copy(s.readback, staged[i], allocs[i].buf, rq.Region.offset, uint64(len(rq.Dst))); err != nil {
				return s.latch(op, err)
			}
		}
	}
	if err := s.synchronize(op); err != nil {
		return err
	}
	for i, rq := range requests {
		n := uint64(len(rq.Dst))
		if allocs[i].hostVisible() {
			copy(rq.Dst, allocs[i].buf.Bytes()[rq.Region.offset:rq.Region.offset+n])
		} else if n > 0 {
			copy(rq.Dst, s.readback.Bytes()[staged[i]:staged[i]+n])
		}
	}
	return nil
}

// ---------------------------------------------------------------- kernels

// ImportKernel makes a kernel loaded outside the session (an ahead-of-time host module, say)
// dispatchable, described by sig. The kernel must be on the session's device. The session
// takes ownership of the kernel's module: it closes it with itself (or the definition frozen
// from it does), after its graphs and before its context, so the caller must not close it.
func (s *ModelSession) ImportKernel(k *native.Kernel, sig KernelSignature) (KernelID, error) {
	const op = "ModelSession.ImportKernel"
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return KernelID{}, err
	}
	if k == nil {
		return KernelID{}, tensor.NewError(op, tensor.ErrInvalidArgument, "nil kernel")
	}
	if k.Module().Device() != s.ctx.dev {
		return KernelID{}, tensor.NewError(op, tensor.ErrInvalidArgument, "kernel %q was loaded on %s, not on the session's %s", k.Name(), k.Module().Device(), s.ctx.dev)
	}
	sig, err := NormalizeSignature(sig, op)
	if err != nil {
		return KernelID{}, err
	}
	if !slices.Contains(s.modules, k.Module()) {
		s.modules = append(s.modules, k.Module())
	}
	return s.addKernel(k, sig), nil
}

func (s *ModelSession) addKernel(k *native.Kernel, sig KernelSignature) KernelID {
	s.kernels = append(s.kernels, &kernelEntry{kernel: k, sig: sig})
	return KernelID{owner: s.owner, index: len(s.kernels) - 1}
}

// Compile compiles Loom kernels with the context's compiler (concurrently), loads them on the
// device, and returns their ids in request order. Kernels compiled more than once share one
// module. On error nothing is added.
func (s *ModelSession) Compile(sources []KernelSource) ([]KernelID, error) {
	const op = "ModelSession.Compile"
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return nil, err
	}
	if len(sources) == 0 {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "no kernel sources")
	}
	comp, err := s.ctx.Compiler()
	if err != nil {
		return nil, err
	}
	if err := CheckTarget(comp, op, s.ctx.dev); err != nil {
		return nil, err
	}
	compiled, err := CompileKernel(comp, op, s.ctx.dev, sources)
	if err != nil {
		return nil, err
	}
	loaded := make(map[string]*native.Module) // by artifact key, this call's new modules
	fail := func(err error) ([]KernelID, error) {
		for _, m := range loaded {
			m.Close()
		}
		return nil, err
	}
	kernels := make([]*native.Kernel, len(compiled))
	for i, ck := range compiled {
		m := s.moduleByKey[ck.Artifact.Key]
		if m == nil {
			m = loaded[ck.Artifact.Key]
		}
		if m == nil {
			if m, err = LoadArtifact(op, s.ctx.dev, LoomCompiler(s.ctx), ck.Artifact); err != nil {
				return fail(err)
			}
			loaded[ck.Artifact.Key] = m
		}
		if kernels[i], err = m.Kernel(ck.Artifact.Entry); err != nil {
			return fail(tensor.WrapError(op, tensor.ErrDevice, err, "source %d: the compiled module has no kernel %s", i, ck.Artifact.Entry))
		}
	}
	for key, m := range loaded {
		s.moduleByKey[key] = m
		s.modules = append(s.modules, m)
	}
	ids := make([]KernelID, len(compiled))
	for i, ck := range compiled {
		ids[i] = s.addKernel(kernels[i], ck.Sig)
	}
	return ids, nil
}

// LaunchConfig evaluates kernel's launch program on a workload (the launch arguments as raw
// bits), as a Dispatch with that workload would be launched.
func (s *ModelSession) LaunchConfig(kernel KernelID, workload []uint64) (LaunchConfig, error) {
	const op = "ModelSession.LaunchConfig"
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return LaunchConfig{}, err
	}
	k, err := s.memory().kernel(op, "the kernel", kernel)
	if err != nil {
		return LaunchConfig{}, err
	}
	cfg, _, err := k.sig.launchConfig(op, workload)
	return cfg, err
}

// ---------------------------------------------------------------- recordings

// Record validates commands, infers their dependencies from the declared bindings (see
// Access), and builds and instantiates a graph with exactly those edges, under key. Nothing
// runs until Replay. A key can be recorded once.
func (s *ModelSession) Record(key string, commands []Command) error {
	const op = "ModelSession.Record"
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return err
	}
	if _, ok := s.recordings[key]; ok {
		return tensor.NewError(op, tensor.ErrInvalidArgument, "%q is already recorded", key)
	}
	if len(commands) == 0 {
		return tensor.NewError(op, tensor.ErrInvalidArgument, "recording %q has no commands", key)
	}
	prepared, err := s.memory().prepare(op, commands)
	if err != nil {
		return err
	}
	words, err := attachViolationWords(op, s.ctx, prepared, fmt.Sprintf("recording %q", key))
	if err != nil {
		return err
	}
	exec, err := buildGraph(s.ctx.dev, prepared, s.edgeFilter)
	if err != nil {
		err = tensor.WrapError(op, tensor.ErrDevice, err, "cannot build the graph of %q", key)
		if ferr := words.free(s.ctx); ferr != nil {
			return errors.Join(err, ferr)
		}
		return err
	}
	s.recordings[key] = &recording{commands: prepared, exec: exec, words: words}
	return nil
}

// IsRecorded reports whether key was recorded (false once the session is closed or frozen).
func (s *ModelSession) IsRecorded(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.recordings[key]
	return ok
}

// Replay enqueues the graph recorded under key, after the work enqueued before it. It does
// not wait: a bounds-check violation of the replay is reported by the next call that waits
// for it (Synchronize, Read, ReadMany, Freeze; see Dispatch.Violation).
func (s *ModelSession) Replay(key string) error {
	const op = "ModelSession.Replay"
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.recording(op, key)
	if err != nil {
		return err
	}
	return s.launch(op, rec)
}

// launch enqueues rec's graph on the session's stream. The caller holds s.mu.
func (s *ModelSession) launch(op string, rec *recording) error {
	s.launched(rec.words)
	if err := rec.exec.Launch(s.stream); err != nil {
		return s.latch(op, err)
	}
	return nil
}

func (s *ModelSession) recording(op, key string) (*recording, error) {
	if err := s.usable(op); err != nil {
		return nil, err
	}
	rec, ok := s.recordings[key]
	if !ok {
		return nil, tensor.NewError(op, tensor.ErrNotRecorded, "nothing is recorded under %q", key)
	}
	return rec, nil
}

// issueDirect enqueues a recording's commands one by one (what the graph replaces).
func (s *ModelSession) issueDirect(op string, rec *recording) error {
	s.launched(rec.words)
	for i := range rec.commands {
		if err := rec.commands[i].enqueue(s.stream); err != nil {
			return s.latch(op, err)
		}
	}
	return nil
}

// ---------------------------------------------------------------- closing

// Close waits for the session's work and releases its graphs, memory, modules and stream
// (and, for sessions made by Open, OpenFor or WithCompiler, their context). Idempotent. A
// failed session is released too; a frozen one has nothing left to release.
func (s *ModelSession) Close() error {
	const op = "ModelSession.Close"
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.frozen {
		return nil
	}
	var errs []error
	if s.failed == nil {
		// A failed stream has nothing to wait for; releasing it drains it anyway. (Closing
		// reads no violation words: nobody can read what the work wrote any more.)
		errs = append(errs, s.stream.Synchronize())
	}
	errs = append(errs, s.releaseDeviceState()...)
	errs = append(errs, s.stream.Close())
	s.ctx.release()
	if s.ownsCtx {
		errs = append(errs, s.ctx.Close())
	}
	return tensor.JoinErrors(op, errs)
}

// releaseDeviceState closes the recordings, the readback buffer, every allocation and the
// modules.
func (s *ModelSession) releaseDeviceState() []error {
	var errs []error
	errs = append(errs, s.closeRecordings()...)
	errs = append(errs, s.ctx.free(s.readback))
	s.readback = nil
	for _, a := range s.allocs {
		errs = append(errs, s.ctx.freeAllocation(a))
	}
	for _, m := range s.modules {
		errs = append(errs, m.Close())
	}
	s.modules, s.moduleByKey = nil, nil
	return errs
}

// closeRecordings closes every recording's graph and frees its violation words, and forgets
// the words launched but not read (the session is closing, freezing or resetting, with its
// stream idle or failed).
func (s *ModelSession) closeRecordings() []error {
	errs := s.dropPending()
	for key, rec := range s.recordings {
		errs = append(errs, rec.exec.Close(), rec.words.free(s.ctx))
		delete(s.recordings, key)
	}
	return errs
}
