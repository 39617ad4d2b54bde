package native

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
)

// Lane is one of a Runtime's three streams.
type Lane int

const (
	// Compute runs kernels, graphs, device copies and fills; sessions reserve it for a stage.
	Compute Lane = iota
	// Upload carries host-to-device copies.
	Upload
	// Download carries device-to-host copies.
	Download
	laneCount
)

// String names the lane.
func (l Lane) String() string {
	switch l {
	case Compute:
		return "compute"
	case Upload:
		return "upload"
	case Download:
		return "download"
	}
	return "lane(" + strconv.Itoa(int(l)) + ")"
}

// RuntimeOptions tune NewRuntime; nil means the defaults.
type RuntimeOptions struct {
	// Capacity bounds the compute submissions (stages and plain launches) admitted or waiting
	// for admission at once; beyond it submissions fail with ErrBusy instead of queueing.
	// 0 means 64.
	Capacity int
	// MemoryLimit bounds the bytes of Runtime.Alloc buffers open at once (ErrOutOfMemory
	// beyond it); 0 means no limit.
	MemoryLimit uint64
}

// Runtime drives one device through three lanes (streams): Compute, Upload (host to device)
// and Download (device to host).
//
// Hazards across lanes are resolved for the caller: the Runtime remembers, per buffer, the
// last operation on each lane that read it and the last that wrote it, and before an
// operation on one lane touches a buffer last used on another, makes its lane wait for an
// event recorded on the other (read after write, write after read, write after write).
// Kernels and graphs count as reading and writing every buffer they bind. Work enqueued
// directly on the lanes' streams (Runtime.Stream) bypasses this tracking.
//
// Compute work is admitted first in, first out: a stage (NativeSession's Run) waits for the
// submissions before it and, once admitted, first drains the compute lane, so it starts on an
// idle lane; submissions after a waiting stage queue behind it. At most Capacity submissions
// are admitted or waiting; more fail with ErrBusy rather than queue without bound.
//
// A Runtime is safe for concurrent use.
type Runtime struct {
	dev         *Device
	capacity    uint64
	memoryLimit uint64
	charged     atomic.Uint64

	// admission of compute work: tickets served in order
	admMu      sync.Mutex
	admCond    sync.Cond
	nextTicket uint64
	serving    uint64
	holder     int64 // goroutine running the admitted stage, 0 if none
	admClosed  bool

	// submissions: lanes and hazard tracking
	mu          sync.Mutex
	lanes       [laneCount]laneState
	uses        map[*core]*bufferUse
	pruneAt     int
	closed      bool
	lost        error // set when the compute lane could not be replaced
	quarantined int
}

type laneState struct {
	stream   *Stream
	event    *Event // re-recorded on this lane when another lane must wait for it
	seq      uint64 // operations enqueued
	eventSeq uint64 // operations covered by the event's last record
	doneSeq  uint64 // operations known to have finished
}

// bufferUse is the last access of a buffer on each lane, as lane sequence numbers (0: none).
type bufferUse struct {
	writeLane Lane
	writeSeq  uint64
	readSeq   [laneCount]uint64
}

type access struct {
	b     *Buffer
	write bool
}

// NewRuntime creates a Runtime on dev with its three lanes. dev stays owned by the caller and
// must outlive the Runtime.
func NewRuntime(dev *Device, opts *RuntimeOptions) (*Runtime, error) {
	const op = "NewRuntime"
	if dev == nil {
		return nil, newError(op, StatusInvalidArgument, "nil device")
	}
	rt := &Runtime{dev: dev, capacity: 64, uses: make(map[*core]*bufferUse), pruneAt: 256}
	if opts != nil {
		if opts.Capacity < 0 {
			return nil, newError(op, StatusInvalidArgument, "negative capacity %d", opts.Capacity)
		}
		if opts.Capacity > 0 {
			rt.capacity = uint64(opts.Capacity)
		}
		rt.memoryLimit = opts.MemoryLimit
	}
	rt.admCond.L = &rt.admMu
	for l := range rt.lanes {
		ls, err := newLane(dev)
		if err != nil {
			rt.closeLanes()
			return nil, err
		}
		rt.lanes[l] = ls
	}
	return rt, nil
}

func newLane(dev *Device) (laneState, error) {
	s, err := dev.NewStream()
	if err != nil {
		return laneState{}, err
	}
	ev, err := dev.NewEvent()
	if err != nil {
		s.Close()
		return laneState{}, err
	}
	return laneState{stream: s, event: ev}, nil
}

func (rt *Runtime) closeLanes() error {
	var errs []error
	for l := range rt.lanes {
		ls := &rt.lanes[l]
		if ls.stream != nil {
			errs = append(errs, ls.stream.Synchronize(), ls.stream.Close())
		}
		if ls.event != nil {
			errs = append(errs, ls.event.Close())
		}
		*ls = laneState{}
	}
	return errors.Join(errs...)
}

// Device is the Runtime's device.
func (rt *Runtime) Device() *Device { return rt.dev }

// Stream is the stream currently behind lane l, for synchronizing it directly or injecting
// test faults. Work enqueued on it directly bypasses hazard tracking and admission. The
// compute stream is replaced when a session is quarantined.
func (rt *Runtime) Stream(l Lane) *Stream {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if l < 0 || l >= laneCount {
		return nil
	}
	return rt.lanes[l].stream
}

// Charged is the bytes of Runtime.Alloc buffers not yet freed (including those a quarantined
// session retains forever).
func (rt *Runtime) Charged() uint64 { return rt.charged.Load() }

// Quarantined is how many sessions of the Runtime were quarantined.
func (rt *Runtime) Quarantined() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.quarantined
}

// Queued is the number of compute submissions admitted or waiting for admission (at most the
// capacity), counting a running stage.
func (rt *Runtime) Queued() int {
	rt.admMu.Lock()
	defer rt.admMu.Unlock()
	return int(rt.nextTicket - rt.serving)
}

// Alloc allocates a buffer on the Runtime's device and charges it to the Runtime's memory
// limit until it is closed.
func (rt *Runtime) Alloc(kind MemoryKind, bytes uint64) (*Buffer, error) {
	const op = "Runtime.Alloc"
	for {
		cur := rt.charged.Load()
		if rt.memoryLimit > 0 && (bytes > rt.memoryLimit || cur > rt.memoryLimit-bytes) {
			return nil, newError(op, StatusOutOfMemory, "%d bytes would exceed the runtime's memory limit of %d bytes (%d charged)", bytes, rt.memoryLimit, cur)
		}
		if rt.charged.CompareAndSwap(cur, cur+bytes) {
			break
		}
	}
	b, err := rt.dev.alloc(op, kind, bytes, func() { rt.charged.Add(-bytes) })
	if err != nil {
		rt.charged.Add(-bytes)
		return nil, err
	}
	return b, nil
}

// ---------------------------------------------------------------- admission

// ticket is an admitted compute submission; release it when done.
type ticket struct {
	rt     *Runtime
	held   bool // false: a submission from the running stage itself, which holds the lane
	stage  bool
	reason string
}

// admit waits for the compute lane. A stage gets it exclusively; a plain submission from the
// goroutine running the admitted stage passes through (it is that stage's own work), while
// one from elsewhere waits its turn like a stage.
func (rt *Runtime) admit(op string, stage bool) (ticket, error) {
	rt.admMu.Lock()
	defer rt.admMu.Unlock()
	if rt.admClosed {
		return ticket{}, newError(op, StatusClosed, "the runtime is closed")
	}
	var me int64
	if rt.holder != 0 || stage {
		me = goroutineID()
	}
	if rt.holder != 0 && rt.holder == me {
		if stage {
			return ticket{}, newError(op, StatusBusy, "a stage is already running on this goroutine: nested Run on the same runtime would wait for itself")
		}
		return ticket{rt: rt}, nil
	}
	if rt.nextTicket-rt.serving >= rt.capacity {
		return ticket{}, newError(op, StatusBusy, "%d compute submissions are admitted or waiting (the runtime's capacity)", rt.capacity)
	}
	t := rt.nextTicket
	rt.nextTicket++
	for rt.serving != t {
		rt.admCond.Wait()
	}
	if rt.admClosed {
		rt.serving++
		rt.admCond.Broadcast()
		return ticket{}, newError(op, StatusClosed, "the runtime is closed")
	}
	if stage {
		rt.holder = me
	}
	return ticket{rt: rt, held: true, stage: stage}, nil
}

func (t ticket) release() {
	if !t.held {
		return
	}
	rt := t.rt
	rt.admMu.Lock()
	if t.stage {
		rt.holder = 0
	}
	rt.serving++
	rt.admCond.Broadcast()
	rt.admMu.Unlock()
}

// admitStage admits a stage and drains the compute lane, so the stage starts on an idle lane
// and a failing fence can only be the stage's doing. If the drain fails, earlier work failed
// the lane: it is replaced and the error returned (the stage does not run).
func (rt *Runtime) admitStage(op string) (ticket, error) {
	t, err := rt.admit(op, true)
	if err != nil {
		return t, err
	}
	if err := rt.SynchronizeLane(Compute); err != nil {
		rt.replaceCompute()
		t.release()
		return ticket{}, &Error{Op: op, Status: StatusDevice, Message: "earlier compute work failed before the stage was admitted; the compute lane was replaced", Cause: err}
	}
	return t, nil
}

// ---------------------------------------------------------------- submissions

// submit enqueues one operation on lane l after making l wait for the other lanes' conflicting
// accesses, then records the accesses. Compute submissions pass admission first.
func (rt *Runtime) submit(op string, l Lane, accesses []access, enqueue func(s *Stream) error) error {
	if l == Compute {
		t, err := rt.admit(op, false)
		if err != nil {
			return err
		}
		defer t.release()
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return newError(op, StatusClosed, "the runtime is closed")
	}
	if rt.lost != nil {
		return &Error{Op: op, Status: StatusDeviceLost, Message: "the runtime lost its compute lane", Cause: rt.lost}
	}
	ls := &rt.lanes[l]
	var need [laneCount]uint64
	for _, a := range accesses {
		u := rt.uses[a.b.c]
		if u == nil {
			continue
		}
		if u.writeSeq > 0 && u.writeLane != l {
			need[u.writeLane] = max(need[u.writeLane], u.writeSeq)
		}
		if a.write {
			for m := range laneCount {
				if m != l && u.readSeq[m] > 0 {
					need[m] = max(need[m], u.readSeq[m])
				}
			}
		}
	}
	for m := range laneCount {
		other := &rt.lanes[m]
		if need[m] == 0 || need[m] <= other.doneSeq {
			continue
		}
		if other.eventSeq < need[m] {
			if err := other.stream.Record(other.event); err != nil {
				return err
			}
			other.eventSeq = other.seq
		}
		if err := ls.stream.Wait(other.event); err != nil {
			return err
		}
	}
	if err := enqueue(ls.stream); err != nil {
		return err
	}
	ls.seq++
	for _, a := range accesses {
		u := rt.uses[a.b.c]
		if u == nil {
			rt.pruneUses()
			u = &bufferUse{}
			rt.uses[a.b.c] = u
		}
		if a.write {
			// Earlier reads on other lanes are ordered before this write (it waited for them),
			// so anything that waits for this write waits for them too.
			*u = bufferUse{writeLane: l, writeSeq: ls.seq}
		} else {
			u.readSeq[l] = ls.seq
		}
	}
	return nil
}

// pruneUses forgets closed buffers once the table doubled since the last pruning.
func (rt *Runtime) pruneUses() {
	if len(rt.uses) < rt.pruneAt {
		return
	}
	for c := range rt.uses {
		if c.isClosed() {
			delete(rt.uses, c)
		}
	}
	rt.pruneAt = max(256, 2*len(rt.uses))
}

// Upload copies src into dst at offset on the Upload lane (src may be reused at once).
func (rt *Runtime) Upload(dst *Buffer, offset uint64, src []byte) error {
	const op = "Runtime.Upload"
	if dst == nil {
		return newError(op, StatusInvalidArgument, "nil buffer")
	}
	return rt.submit(op, Upload, []access{{dst, true}}, func(s *Stream) error { return s.Upload(dst, offset, src) })
}

// Download copies len(dst) bytes of src at offset into dst on the Download lane. dst is
// written by the next successful Synchronize (or SynchronizeLane(Download)) of the Runtime and
// must not be touched before.
func (rt *Runtime) Download(dst []byte, src *Buffer, offset uint64) error {
	const op = "Runtime.Download"
	if src == nil {
		return newError(op, StatusInvalidArgument, "nil buffer")
	}
	return rt.submit(op, Download, []access{{src, false}}, func(s *Stream) error { return s.Download(dst, src, offset) })
}

// Launch enqueues kernel k on the Compute lane; every bound buffer counts as read and written.
func (rt *Runtime) Launch(k *Kernel, p LaunchParams) error {
	const op = "Runtime.Launch"
	acc := make([]access, 0, len(p.Buffers)+1)
	for _, b := range p.Buffers {
		if b.Buffer == nil {
			return newError(op, StatusInvalidArgument, "a binding has no buffer")
		}
		acc = append(acc, access{b.Buffer, true})
	}
	if p.Violation != nil {
		acc = append(acc, access{p.Violation, true})
	}
	return rt.submit(op, Compute, acc, func(s *Stream) error { return s.Launch(k, p) })
}

// LaunchGraph enqueues x on the Compute lane; every buffer it uses counts as read and written.
func (rt *Runtime) LaunchGraph(x *GraphExec) error {
	const op = "Runtime.LaunchGraph"
	if x == nil {
		return newError(op, StatusInvalidArgument, "nil graph exec")
	}
	bufs := x.bufferList()
	acc := make([]access, len(bufs))
	for i, b := range bufs {
		acc[i] = access{b, true}
	}
	return rt.submit(op, Compute, acc, func(s *Stream) error { return x.Launch(s) })
}

// Copy enqueues a device copy on the Compute lane.
func (rt *Runtime) Copy(dst *Buffer, dstOffset uint64, src *Buffer, srcOffset, bytes uint64) error {
	const op = "Runtime.Copy"
	if dst == nil || src == nil {
		return newError(op, StatusInvalidArgument, "nil buffer")
	}
	return rt.submit(op, Compute, []access{{dst, true}, {src, false}}, func(s *Stream) error {
		return s.Copy(dst, dstOffset, src, srcOffset, bytes)
	})
}

// Fill enqueues a fill on the Compute lane.
func (rt *Runtime) Fill(dst *Buffer, offset, bytes uint64, value byte) error {
	const op = "Runtime.Fill"
	if dst == nil {
		return newError(op, StatusInvalidArgument, "nil buffer")
	}
	return rt.submit(op, Compute, []access{{dst, true}}, func(s *Stream) error { return s.Fill(dst, offset, bytes, value) })
}

// SynchronizeLane waits for the work enqueued on lane l so far (completing its downloads).
func (rt *Runtime) SynchronizeLane(l Lane) error {
	if l < 0 || l >= laneCount {
		return newError("Runtime.SynchronizeLane", StatusInvalidArgument, "no %s", l)
	}
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		return newError("Runtime.SynchronizeLane", StatusClosed, "the runtime is closed")
	}
	s, seq := rt.lanes[l].stream, rt.lanes[l].seq
	rt.mu.Unlock()
	if err := s.Synchronize(); err != nil {
		return err
	}
	rt.mu.Lock()
	if rt.lanes[l].stream == s {
		rt.lanes[l].doneSeq = max(rt.lanes[l].doneSeq, seq)
	}
	rt.mu.Unlock()
	return nil
}

// Synchronize waits for all three lanes and completes pending downloads.
func (rt *Runtime) Synchronize() error {
	var errs []error
	for l := range laneCount {
		errs = append(errs, rt.SynchronizeLane(l))
	}
	return errors.Join(errs...)
}

// replaceCompute retires the compute lane's stream and event after a failure: they are
// retained, never destroyed (work on them may still be in flight), and a fresh pair takes
// over so the Runtime's other users keep working. Hazards on the old lane are forgotten.
func (rt *Runtime) replaceCompute() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return
	}
	old := rt.lanes[Compute]
	retain(old.stream, old.event)
	fresh, err := newLane(rt.dev)
	if err != nil {
		rt.lost = err
		rt.lanes[Compute] = laneState{stream: old.stream, event: old.event}
		return
	}
	rt.lanes[Compute] = fresh
	for _, u := range rt.uses {
		if u.writeLane == Compute {
			u.writeSeq = 0
		}
		u.readSeq[Compute] = 0
	}
}

// Close waits for admitted work, synchronizes and destroys the lanes. Idempotent. Buffers
// allocated through the Runtime stay open (they are the caller's); a quarantined session's
// retained state and compute stream stay open for the life of the process, and with them the
// device.
func (rt *Runtime) Close() error {
	const op = "Runtime.Close"
	t, err := rt.admit(op, true)
	if err != nil {
		if errorsIsClosed(err) {
			return nil
		}
		return err
	}
	rt.admMu.Lock()
	rt.admClosed = true
	rt.admMu.Unlock()
	defer t.release()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return nil
	}
	rt.closed = true
	if rt.lost != nil {
		// The compute lane is the retained one; do not touch it.
		rt.lanes[Compute] = laneState{}
	}
	return rt.closeLanes()
}

func errorsIsClosed(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == StatusClosed
}

// retained holds what quarantine keeps forever: reachable, so never collected or destroyed.
var retained struct {
	sync.Mutex
	items []any
}

func retain(items ...any) {
	retained.Lock()
	retained.items = append(retained.items, items...)
	retained.Unlock()
}

// goroutineID is the current goroutine's id, parsed from the header line runtime.Stack
// writes ("goroutine 42 [running]:"). It is needed only to tell a nested Run (same goroutine:
// fail) from a concurrent one (wait), and costs about a microsecond, paid once per Run and
// per plain compute submission while a stage is running.
func goroutineID() int64 {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	line := bytes.TrimPrefix(buf[:n], []byte("goroutine "))
	if i := bytes.IndexByte(line, ' '); i > 0 {
		if id, err := strconv.ParseInt(string(line[:i]), 10, 64); err == nil {
			return id
		}
	}
	panic(fmt.Sprintf("native: cannot parse the goroutine id from %q", buf[:n]))
}
