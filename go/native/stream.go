package native

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/loomrt/loom/go/native/internal/cabi"
)

// Stream is an ordered queue of device work. Its methods are safe for concurrent use (the
// shim orders concurrent enqueues in some order).
//
// Host memory never crosses into the shim asynchronously (cgo forbids C from keeping Go
// pointers after a call returns):
//
//   - Upload copies the source into C staging memory owned by the stream before returning; the
//     source may be reused at once. The staging memory is freed by a host callback on the
//     stream's timeline once the copy has run (or, on a failed stream, which skips callbacks,
//     by the next Synchronize or Close).
//   - Download enqueues the copy into C staging memory; the destination slice is written when
//     the stream is next synchronized (Synchronize), and must not be used until then. If that
//     synchronization fails, the destination is left unspecified.
//   - SharedMemory buffers need no copies at all: Buffer.Bytes is the memory itself.
type Stream struct {
	s   *streamCore
	dev *Device
}

// streamCore is the stream's state reachable from other handles' cores (which must not keep
// the public Stream alive).
type streamCore struct {
	c       *core
	h       cabi.Stream
	staging cabi.StagingList

	// captureMu orders BeginCapture/EndCapture with the synchronizations other handles' Close
	// performs, which would break a capture.
	captureMu sync.Mutex
	capturing atomic.Bool
	captured  []capturedRef // references of the operations recorded by the current capture

	dlMu      sync.Mutex
	downloads []pendingDownload
}

type capturedRef struct {
	c   *core
	ref any
}

type pendingDownload struct {
	staging cabi.Staging
	dst     []byte
}

// NewStream creates a stream on the device.
func (d *Device) NewStream() (*Stream, error) {
	return d.newStream("Device.NewStream", StreamOptions{})
}

// StreamOptions are the options of NewStreamWith.
type StreamOptions struct {
	// Inline runs each operation on the goroutine's thread that enqueues it, before the call
	// returns, instead of on the stream's own thread (host backend; ignored by backends whose
	// work runs on a device). For callers that wait for each piece of work anyway, it saves
	// the hand-off to the stream's thread and back, which dominates small kernels.
	Inline bool
	// MaxThreads bounds the threads, the caller's included, that run one kernel's blocks on
	// the host backend (0: the device's whole worker pool too).
	MaxThreads int
}

// NewStreamWith creates a stream with options.
func (d *Device) NewStreamWith(o StreamOptions) (*Stream, error) {
	return d.newStream("Device.NewStreamWith", o)
}

func (d *Device) newStream(op string, o StreamOptions) (*Stream, error) {
	if o.MaxThreads < 0 {
		return nil, newError(op, StatusInvalidArgument, "MaxThreads %d is negative", o.MaxThreads)
	}
	if err := d.c.pin(op); err != nil {
		return nil, err
	}
	defer d.c.unpin()
	staging := cabi.NewStagingList()
	if staging.IsNil() {
		return nil, newError(op, StatusOutOfMemory, "cannot allocate the stream's staging list")
	}
	var flags uint32
	if o.Inline {
		flags |= cabi.StreamInline
	}
	h, f := cabi.StreamCreateWith(d.h, flags, uint32(min(o.MaxThreads, math.MaxUint32)))
	if f != nil {
		cabi.StagingListFree(staging)
		return nil, fromFailure(op, f)
	}
	sc := &streamCore{h: h, staging: staging}
	c, err := d.newChild(op, "stream", sc.destroy)
	if err != nil {
		return nil, err
	}
	sc.c = c
	s := &Stream{s: sc, dev: d}
	guard(s, c)
	return s, nil
}

func (sc *streamCore) destroy() {
	cabi.StreamDestroy(sc.h) // drains the stream: every staging area is idle now
	cabi.StagingListFree(sc.staging)
	sc.dlMu.Lock()
	for _, d := range sc.downloads {
		cabi.StagingFinish(d.staging, nil)
	}
	sc.downloads = nil
	sc.dlMu.Unlock()
}

// drainForRelease waits for the work enqueued on the stream, on behalf of a handle being
// destroyed, unless the stream is closed (its destruction drained it) or capturing
// (BeginCapture drained it, and captured work does not run).
func (sc *streamCore) drainForRelease() {
	if sc.c.pin("drain") != nil {
		return
	}
	defer sc.c.unpin()
	sc.captureMu.Lock()
	defer sc.captureMu.Unlock()
	if !sc.capturing.Load() {
		// A failure is the stream's to report; what matters here is that nothing runs anymore.
		cabi.StreamSynchronize(sc.h, sc.staging)
	}
}

// Device is the device the stream belongs to.
func (s *Stream) Device() *Device { return s.dev }

// String names the stream ("stream #3").
func (s *Stream) String() string { return s.s.c.String() }

// Close waits for the stream's work, then destroys it. Idempotent. Downloads not yet completed
// by a Synchronize are dropped.
func (s *Stream) Close() error { return s.s.c.close("Stream.Close") }

// use pins a buffer for an operation on the stream and records the use.
func (s *Stream) use(op string, b *Buffer) error {
	if b == nil {
		return newError(op, StatusInvalidArgument, "nil buffer")
	}
	if err := s.dev.checkOwner(op, b.c, b.dev); err != nil {
		return err
	}
	if err := b.c.pin(op); err != nil {
		return err
	}
	if err := s.s.record(op, b.c, b); err != nil {
		b.c.unpin()
		return err
	}
	return nil
}

// record notes that an operation on the stream uses c (public object ref): the handle then
// waits for the stream before it is destroyed, and, while the stream is capturing, cannot be
// closed until the captured graph takes over the reference.
func (sc *streamCore) record(op string, c *core, ref any) error {
	c.usedOn(sc)
	if !sc.capturing.Load() {
		return nil
	}
	if err := sc.c.attach(op, c, ref); err != nil {
		return err
	}
	sc.dlMu.Lock()
	sc.captured = append(sc.captured, capturedRef{c, ref})
	sc.dlMu.Unlock()
	return nil
}

// Synchronize waits for everything enqueued so far and completes pending downloads. Once an
// operation failed it returns ErrDevice, from then on (the failure is sticky).
func (s *Stream) Synchronize() error {
	const op = "Stream.Synchronize"
	if err := s.s.c.pin(op); err != nil {
		return err
	}
	defer s.s.c.unpin()
	return s.s.synchronize(op)
}

func (sc *streamCore) synchronize(op string) error {
	sc.dlMu.Lock()
	done := sc.downloads
	sc.downloads = nil
	sc.dlMu.Unlock()
	f := cabi.StreamSynchronize(sc.h, sc.staging)
	for _, d := range done {
		if f != nil {
			cabi.StagingFinish(d.staging, nil)
		} else {
			cabi.StagingFinish(d.staging, d.dst)
		}
	}
	return fromFailure(op, f)
}

// Upload enqueues a copy of src into dst at offset. src is copied into staging memory before
// Upload returns and may be reused immediately.
func (s *Stream) Upload(dst *Buffer, offset uint64, src []byte) error {
	const op = "Stream.Upload"
	if err := s.s.c.pin(op); err != nil {
		return err
	}
	defer s.s.c.unpin()
	if err := s.use(op, dst); err != nil {
		return err
	}
	defer dst.c.unpin()
	return fromFailure(op, cabi.StreamUpload(s.s.h, s.s.staging, dst.h, offset, src))
}

// Download enqueues a copy of len(dst) bytes of src at offset into dst. dst is written by the
// next successful Synchronize of the stream and must not be touched before it.
func (s *Stream) Download(dst []byte, src *Buffer, offset uint64) error {
	const op = "Stream.Download"
	if err := s.s.c.pin(op); err != nil {
		return err
	}
	defer s.s.c.unpin()
	if err := s.use(op, src); err != nil {
		return err
	}
	defer src.c.unpin()
	st, f := cabi.StreamDownload(s.s.h, src.h, offset, uint64(len(dst)))
	if f != nil {
		return fromFailure(op, f)
	}
	s.s.dlMu.Lock()
	s.s.downloads = append(s.s.downloads, pendingDownload{st, dst})
	s.s.dlMu.Unlock()
	return nil
}

// Copy enqueues a device-to-device copy of bytes from src at srcOffset to dst at dstOffset.
func (s *Stream) Copy(dst *Buffer, dstOffset uint64, src *Buffer, srcOffset, bytes uint64) error {
	const op = "Stream.Copy"
	if err := s.s.c.pin(op); err != nil {
		return err
	}
	defer s.s.c.unpin()
	if err := s.use(op, dst); err != nil {
		return err
	}
	defer dst.c.unpin()
	if err := s.use(op, src); err != nil {
		return err
	}
	defer src.c.unpin()
	return fromFailure(op, cabi.StreamCopy(s.s.h, dst.h, dstOffset, src.h, srcOffset, bytes))
}

// Fill enqueues setting bytes of dst from offset to value.
func (s *Stream) Fill(dst *Buffer, offset, bytes uint64, value byte) error {
	const op = "Stream.Fill"
	if err := s.s.c.pin(op); err != nil {
		return err
	}
	defer s.s.c.unpin()
	if err := s.use(op, dst); err != nil {
		return err
	}
	defer dst.c.unpin()
	return fromFailure(op, cabi.StreamFill(s.s.h, dst.h, offset, bytes, value))
}

// Launch enqueues kernel k with parameters p.
func (s *Stream) Launch(k *Kernel, p LaunchParams) error {
	const op = "Stream.Launch"
	if k == nil {
		return newError(op, StatusInvalidArgument, "nil kernel")
	}
	if err := s.dev.checkOwner(op, k.m.c, k.m.dev); err != nil {
		return err
	}
	if err := p.check(op, s.dev); err != nil {
		return err
	}
	if err := s.s.c.pin(op); err != nil {
		return err
	}
	defer s.s.c.unpin()
	if err := k.m.c.pin(op); err != nil {
		return err
	}
	defer k.m.c.unpin()
	if err := p.pin(op); err != nil {
		return err
	}
	defer p.unpin()
	if err := s.s.record(op, k.m.c, k.m); err != nil {
		return err
	}
	for i := range p.Buffers {
		if err := s.s.record(op, p.Buffers[i].Buffer.c, p.Buffers[i].Buffer); err != nil {
			return err
		}
	}
	if p.Violation != nil {
		if err := s.s.record(op, p.Violation.c, p.Violation); err != nil {
			return err
		}
	}
	var bufs bindingBuffers
	var offs bindingOffsets
	l := p.toC(&bufs, &offs)
	return fromFailure(op, cabi.KernelLaunch(s.s.h, k.h, &l))
}

// Record marks in ev the point the stream has reached with the work enqueued so far.
func (s *Stream) Record(ev *Event) error {
	const op = "Stream.Record"
	return s.withEvent(op, ev, func() *cabi.Failure { return cabi.EventRecord(ev.h, s.s.h) })
}

// Wait makes work enqueued on the stream later wait until ev's recorded point is reached
// (ordering across streams without blocking the host).
func (s *Stream) Wait(ev *Event) error {
	const op = "Stream.Wait"
	return s.withEvent(op, ev, func() *cabi.Failure { return cabi.StreamWaitEvent(s.s.h, ev.h) })
}

func (s *Stream) withEvent(op string, ev *Event, call func() *cabi.Failure) error {
	if ev == nil {
		return newError(op, StatusInvalidArgument, "nil event")
	}
	if err := s.dev.checkOwner(op, ev.c, ev.dev); err != nil {
		return err
	}
	if err := s.s.c.pin(op); err != nil {
		return err
	}
	defer s.s.c.unpin()
	if err := ev.c.pin(op); err != nil {
		return err
	}
	defer ev.c.unpin()
	ev.c.usedOn(s.s)
	return fromFailure(op, call())
}

// InjectFault arms a test fault on the stream (loom_stream_inject_fault): FaultNextOperation
// makes the next enqueued operation fail on the device, FaultNextSynchronize makes the next
// synchronization report a device failure. For tests of failure handling only.
func (s *Stream) InjectFault(f Fault) error {
	const op = "Stream.InjectFault"
	if err := s.s.c.pin(op); err != nil {
		return err
	}
	defer s.s.c.unpin()
	return fromFailure(op, cabi.StreamInjectFault(s.s.h, int32(f)))
}

// Fault is a test fault for Stream.InjectFault.
type Fault int32

const (
	// FaultNone disarms an armed fault.
	FaultNone Fault = Fault(cabi.FaultNone)
	// FaultNextOperation fails the next operation enqueued on the stream, as a kernel fault
	// would: the stream is failed from then on.
	FaultNextOperation Fault = Fault(cabi.FaultNextOperation)
	// FaultNextSynchronize makes the next synchronization report a device failure.
	FaultNextSynchronize Fault = Fault(cabi.FaultNextSynchronize)
)

// BeginCapture starts recording the stream's kernel launches, device copies and fills into a
// graph instead of running them (each depends on the one before). It first waits for the work
// already enqueued, so that handles used by that work can still be closed during the capture
// (closing waits for streams, and a synchronization would break the capture). Host copies,
// host callbacks, synchronization and cross-stream waits fail during a capture with ErrCapture
// and invalidate it. Handles used by captured operations cannot be closed until EndCapture.
func (s *Stream) BeginCapture() error {
	const op = "Stream.BeginCapture"
	if err := s.s.c.pin(op); err != nil {
		return err
	}
	defer s.s.c.unpin()
	s.s.captureMu.Lock()
	defer s.s.captureMu.Unlock()
	if s.s.capturing.Load() {
		return newError(op, StatusCapture, "%s is already capturing", s.s.c)
	}
	if err := s.s.synchronize(op); err != nil {
		return err
	}
	if f := cabi.StreamBeginCapture(s.s.h); f != nil {
		return fromFailure(op, f)
	}
	s.s.capturing.Store(true)
	return nil
}

// EndCapture ends the capture and returns the recorded graph. If the capture was invalidated
// it returns ErrCapture with the reason; the stream is usable again either way.
func (s *Stream) EndCapture() (*Graph, error) {
	const op = "Stream.EndCapture"
	if err := s.s.c.pin(op); err != nil {
		return nil, err
	}
	defer s.s.c.unpin()
	s.s.captureMu.Lock()
	defer s.s.captureMu.Unlock()
	if !s.s.capturing.Load() {
		return nil, newError(op, StatusCapture, "%s is not capturing", s.s.c)
	}
	h, f := cabi.StreamEndCapture(s.s.h)
	s.s.capturing.Store(false)
	s.s.dlMu.Lock()
	refs := s.s.captured
	s.s.captured = nil
	s.s.dlMu.Unlock()
	defer func() {
		for _, r := range refs {
			s.s.c.detach(r.c)
		}
	}()
	if f != nil {
		return nil, fromFailure(op, f)
	}
	return s.dev.adoptGraph(op, h, refs)
}

// IsCapturing reports whether a capture is active (or invalidated and not yet ended).
func (s *Stream) IsCapturing() bool { return s.s.capturing.Load() }
