package device

import (
	"fmt"
	"sync"

	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// ModelDefinition is a frozen model: its weights and kernels, and the sizes of its other
// allocations, from which Prepare makes any number of independent copies (slots) that run
// concurrently. Make one with ModelSession.Freeze; regions and kernel ids of the frozen
// session stay valid in it.
type ModelDefinition struct {
	mu       sync.Mutex
	ctx      *ModelContext
	retired  []*ModelContext // contexts to close after the definition (the session's own)
	owner    *owner
	allocs   []*allocation // index-aligned with the session's: weights keep their buffer, scratch has none
	kernels  []*kernelEntry
	modules  []*native.Module
	prepared int // open Prepared sets
	closed   bool
}

// Freeze turns the session into a ModelDefinition in ctx (which must be on the session's
// device; pass s.Context() to stay in the same context). It synchronizes, destroys the
// recorded graphs, adopts the weights into ctx (charging them to ctx's budget once, and
// crediting the session's context, unless they are the same), turns every other allocation
// into scratch of the same size and kind (each prepared slot gets its own), and keeps the
// kernels. The session is closed afterwards (its Close is still safe to call).
func (s *ModelSession) Freeze(ctx *ModelContext) (*ModelDefinition, error) {
	const op = "ModelSession.Freeze"
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "nil context")
	}
	if ctx.dev != s.ctx.dev {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "the context is on %s, the session on %s; a definition stays on the session's device", ctx.dev, s.ctx.dev)
	}
	if err := s.synchronize(op); err != nil {
		return nil, err
	}
	for _, a := range s.allocs {
		if a.borrowed {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "the session reads shared weights it does not own (a compiled run plan's); it cannot be frozen")
		}
	}
	if err := ctx.acquire(op); err != nil {
		return nil, err
	}
	var weightBytes uint64
	for _, a := range s.allocs {
		if a.weight {
			weightBytes += a.bytes
		}
	}
	if ctx != s.ctx {
		if err := ctx.charge(op, weightBytes); err != nil {
			ctx.release()
			return nil, err
		}
	}
	d := &ModelDefinition{ctx: ctx, owner: s.owner, kernels: s.kernels, modules: s.modules}
	var errs []error
	errs = append(errs, s.closeRecordings()...)
	errs = append(errs, s.ctx.free(s.readback))
	s.readback = nil
	for _, a := range s.allocs {
		frozen := &allocation{index: a.index, bytes: a.bytes, kind: a.kind, weight: a.weight}
		if a.weight {
			frozen.buf = a.buf
		} else {
			errs = append(errs, s.ctx.free(a.buf))
		}
		a.buf = nil
		d.allocs = append(d.allocs, frozen)
	}
	if ctx != s.ctx {
		s.ctx.credit(weightBytes)
	}
	errs = append(errs, s.stream.Close())
	s.modules, s.kernels, s.moduleByKey = nil, nil, nil
	s.frozen = true
	s.ctx.release()
	if s.ownsCtx {
		// The session's own context (and the device it may own, where the weights and
		// modules live) now goes when the definition does.
		d.retired = append(d.retired, s.ctx)
	}
	if err := tensor.JoinErrors(op, errs); err != nil {
		// The session's state is gone either way; hand back what survived with the error.
		return d, err
	}
	return d, nil
}

// Context is the context the definition lives in.
func (d *ModelDefinition) Context() *ModelContext { return d.ctx }

// Target is the code target of the definition's device.
func (d *ModelDefinition) Target() string { return d.ctx.Target() }

func (d *ModelDefinition) usable(op string) error {
	if d.closed {
		return tensor.NewError(op, tensor.ErrClosed, "the definition is closed")
	}
	return nil
}

// definitionMap resolves regions against the definition's allocations (scratch without
// buffers), for validation.
func (d *ModelDefinition) definitionMap() *memoryMap {
	return &memoryMap{
		owner:   d.owner,
		alloc:   func(i int) *allocation { return d.allocs[i] },
		count:   len(d.allocs),
		kernels: d.kernels,
	}
}

// Fragment is a validated command list of a definition with the regions its callers write
// before each run (inputs) and read after it (outputs).
type Fragment struct {
	def      *ModelDefinition
	commands []Command
	inputs   []Region
	outputs  []Region
	scratch  []int // indices of the scratch allocations the fragment uses
}

// Fragment validates a command list (as Record does) and its inputs and outputs: neither may
// lie in a weight, and no command may write, fill or copy into a weight.
func (d *ModelDefinition) Fragment(commands []Command, inputs, outputs []Region) (*Fragment, error) {
	const op = "ModelDefinition.Fragment"
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(op); err != nil {
		return nil, err
	}
	if len(commands) == 0 {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "a fragment needs at least one command")
	}
	m := d.definitionMap()
	prepared, err := m.prepare(op, commands)
	if err != nil {
		return nil, err
	}
	used := make(map[int]bool)
	for _, p := range prepared {
		for _, u := range p.uses {
			used[u.alloc] = true
		}
	}
	for _, group := range []struct {
		name    string
		regions []Region
	}{{"input", inputs}, {"output", outputs}} {
		for i, r := range group.regions {
			a, err := m.region(op, fmt.Sprintf("%s %d", group.name, i), r)
			if err != nil {
				return nil, err
			}
			if a.weight {
				return nil, tensor.NewError(op, tensor.ErrImmutable, "%s %d (%s) aliases a weight", group.name, i, r)
			}
			used[a.index] = true
		}
	}
	f := &Fragment{
		def:      d,
		commands: append([]Command(nil), commands...),
		inputs:   append([]Region(nil), inputs...),
		outputs:  append([]Region(nil), outputs...),
	}
	for i, a := range d.allocs {
		if used[i] && !a.weight {
			f.scratch = append(f.scratch, i)
		}
	}
	return f, nil
}

// Prepared is a set of slots of one fragment.
type Prepared struct {
	def   *ModelDefinition
	slots []*Slot

	mu     sync.Mutex
	closed bool
}

// Slot is one copy of a fragment at fixed addresses: its own scratch (inputs and outputs
// included), graph and stream, sharing the definition's weights and kernels. Different slots
// run concurrently; one slot runs one Run at a time.
type Slot struct {
	mu      sync.Mutex
	ctx     *ModelContext
	stream  *native.Stream
	allocs  []*allocation // index-aligned; scratch private to the slot, weights shared
	exec    *native.GraphExec
	inputs  []Region
	outputs []Region
	staged  []uint64 // per input then output: offset in staging, for device-local ones
	staging *native.Buffer
	stageSz uint64
	words   *violationWords // the slot's violation words (see Dispatch.Violation); nil: none
	failed  error
	closed  bool
}

// Prepare makes capacity slots of the fragment. Their scratch is charged to the definition's
// context; the weights are not charged again.
func (f *Fragment) Prepare(capacity int) (*Prepared, error) {
	const op = "Fragment.Prepare"
	d := f.def
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(op); err != nil {
		return nil, err
	}
	if capacity < 1 {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "capacity %d; a prepared fragment needs at least one slot", capacity)
	}
	p := &Prepared{def: d}
	for range capacity {
		sl, err := f.newSlot(op)
		if err != nil {
			for _, made := range p.slots {
				made.release()
			}
			return nil, err
		}
		p.slots = append(p.slots, sl)
	}
	d.prepared++
	return p, nil
}

func (f *Fragment) newSlot(op string) (*Slot, error) {
	d := f.def
	sl := &Slot{ctx: d.ctx, allocs: make([]*allocation, len(d.allocs))}
	for i, a := range d.allocs {
		if a.weight {
			sl.allocs[i] = a
		}
	}
	fail := func(err error) (*Slot, error) {
		sl.release()
		return nil, err
	}
	for _, i := range f.scratch {
		spec := d.allocs[i]
		buf, err := d.ctx.alloc(op, spec.kind, spec.bytes)
		if err != nil {
			return fail(err)
		}
		sl.allocs[i] = &allocation{index: i, buf: buf, bytes: spec.bytes, kind: spec.kind}
	}
	stream, err := d.ctx.dev.NewStream()
	if err != nil {
		return fail(tensor.WrapError(op, tensor.ErrDevice, err, "cannot create the slot's stream"))
	}
	sl.stream = stream
	m := &memoryMap{owner: d.owner, alloc: func(i int) *allocation { return sl.allocs[i] }, count: len(sl.allocs), kernels: d.kernels}
	prepared, err := m.prepare(op, f.commands)
	if err != nil {
		return fail(err)
	}
	if sl.words, err = attachViolationWords(op, d.ctx, prepared, "the fragment"); err != nil {
		return fail(err)
	}
	exec, err := buildGraph(d.ctx.dev, prepared, nil)
	if err != nil {
		return fail(tensor.WrapError(op, tensor.ErrDevice, err, "cannot build the slot's graph"))
	}
	sl.exec = exec
	sl.inputs, sl.outputs = f.inputs, f.outputs
	for _, r := range append(append([]Region(nil), f.inputs...), f.outputs...) {
		sl.staged = append(sl.staged, sl.stageSz)
		if !sl.allocs[r.alloc].hostVisible() {
			sl.stageSz += (r.bytes + readbackAlign - 1) / readbackAlign * readbackAlign
		}
	}
	return sl, nil
}

// Len is the number of slots.
func (p *Prepared) Len() int { return len(p.slots) }

// Slot returns slot i.
func (p *Prepared) Slot(i int) (*Slot, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, tensor.NewError("Prepared.Slot", tensor.ErrClosed, "the prepared fragment is closed")
	}
	if i < 0 || i >= len(p.slots) {
		return nil, tensor.NewError("Prepared.Slot", tensor.ErrInvalidArgument, "slot %d of %d", i, len(p.slots))
	}
	return p.slots[i], nil
}

// Close waits for and releases every slot. Idempotent.
func (p *Prepared) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	var errs []error
	for _, sl := range p.slots {
		sl.mu.Lock()
		errs = append(errs, sl.release()...)
		sl.closed = true
		sl.mu.Unlock()
	}
	p.def.mu.Lock()
	p.def.prepared--
	p.def.mu.Unlock()
	return tensor.JoinErrors("Prepared.Close", errs)
}

// release frees what the slot made (its weights are the definition's).
func (sl *Slot) release() []error {
	var errs []error
	if sl.stream != nil {
		if sl.failed == nil {
			errs = append(errs, sl.stream.Synchronize())
		}
	}
	if sl.exec != nil {
		errs = append(errs, sl.exec.Close())
		sl.exec = nil
	}
	errs = append(errs, sl.ctx.free(sl.staging), sl.words.free(sl.ctx))
	sl.staging = nil
	for i, a := range sl.allocs {
		if a != nil && !a.weight {
			errs = append(errs, sl.ctx.free(a.buf))
		}
		sl.allocs[i] = nil
	}
	if sl.stream != nil {
		errs = append(errs, sl.stream.Close())
		sl.stream = nil
	}
	return errs
}

// Run writes inputs[i] to the leading bytes of input i, replays the fragment, and reads the
// leading len(outputs[i]) bytes of output i into outputs[i], waiting for the result. Inputs
// and outputs that live in device-local memory pass through a host-visible staging buffer the
// slot creates on first use. A stream failure latches the slot failed (ErrFailed). A dispatch
// that skipped an access at a bounds check, with no Violation word of its own and without
// IgnoreViolations, fails the Run (ErrInvalidArgument, naming the command and its kernel;
// outputs are not written) but not the slot.
func (sl *Slot) Run(inputs, outputs [][]byte) error {
	const op = "Slot.Run"
	sl.mu.Lock()
	defer sl.mu.Unlock()
	switch {
	case sl.closed:
		return tensor.NewError(op, tensor.ErrClosed, "the slot is closed")
	case sl.failed != nil:
		return tensor.WrapError(op, tensor.ErrFailed, sl.failed, "an earlier operation on the slot's stream failed")
	}
	if len(inputs) != len(sl.inputs) || len(outputs) != len(sl.outputs) {
		return tensor.NewError(op, tensor.ErrInvalidArgument, "the fragment has %d inputs and %d outputs; got %d and %d", len(sl.inputs), len(sl.outputs), len(inputs), len(outputs))
	}
	for i, in := range inputs {
		if uint64(len(in)) > sl.inputs[i].bytes {
			return tensor.NewError(op, tensor.ErrInvalidArgument, "input %d: %d bytes do not fit in %s", i, len(in), sl.inputs[i])
		}
	}
	for i, out := range outputs {
		if uint64(len(out)) > sl.outputs[i].bytes {
			return tensor.NewError(op, tensor.ErrInvalidArgument, "output %d: a %d-byte destination is longer than %s", i, len(out), sl.outputs[i])
		}
	}
	if sl.staging == nil && sl.stageSz > 0 {
		buf, err := sl.ctx.alloc(op, native.SharedMemory, sl.stageSz)
		if err != nil {
			return err
		}
		sl.staging = buf
	}
	latch := func(err error) error {
		sl.failed = err
		return tensor.WrapError(op, tensor.ErrFailed, err, "the slot's stream failed")
	}
	// The stream is idle here (every Run ends with a synchronize), so the host may write
	// host-visible memory directly.
	for i, in := range inputs {
		r, a := sl.inputs[i], sl.allocs[sl.inputs[i].alloc]
		if len(in) == 0 {
			continue
		}
		if a.hostVisible() {
			copy(a.buf.Bytes()[r.offset:], in)
			continue
		}
		copy(sl.staging.Bytes()[sl.staged[i]:], in)
		if err := sl.stream.Copy(a.buf, r.offset, sl.staging, sl.staged[i], uint64(len(in))); err != nil {
			return latch(err)
		}
	}
	if err := sl.exec.Launch(sl.stream); err != nil {
		return latch(err)
	}
	for i, out := range outputs {
		r, a := sl.outputs[i], sl.allocs[sl.outputs[i].alloc]
		if len(out) == 0 || a.hostVisible() {
			continue
		}
		at := sl.staged[len(sl.inputs)+i]
		if err := sl.stream.Copy(sl.staging, at, a.buf, r.offset, uint64(len(out))); err != nil {
			return latch(err)
		}
	}
	if err := sl.stream.Synchronize(); err != nil {
		return latch(err)
	}
	if err := sl.words.check(op); err != nil {
		return err
	}
	for i, out := range outputs {
		r, a := sl.outputs[i], sl.allocs[sl.outputs[i].alloc]
		if a.hostVisible() {
			copy(out, a.buf.Bytes()[r.offset:r.offset+uint64(len(out))])
		} else if len(out) > 0 {
			at := sl.staged[len(sl.inputs)+i]
			copy(out, sl.staging.Bytes()[at:at+uint64(len(out))])
		}
	}
	return nil
}

// Close releases the definition's weights and modules, and the contexts it took over from
// the frozen session. It refuses (ErrInUse) while prepared fragments are open. Idempotent.
func (d *ModelDefinition) Close() error {
	const op = "ModelDefinition.Close"
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	if d.prepared > 0 {
		return tensor.NewError(op, tensor.ErrInUse, "%d prepared fragments are open; close them first", d.prepared)
	}
	d.closed = true
	var errs []error
	for _, a := range d.allocs {
		if a.weight && a.buf != nil {
			errs = append(errs, d.ctx.free(a.buf))
			a.buf = nil
		}
	}
	for _, m := range d.modules {
		errs = append(errs, m.Close())
	}
	d.modules, d.kernels = nil, nil
	d.ctx.release()
	for _, c := range d.retired {
		errs = append(errs, c.Close())
	}
	return tensor.JoinErrors(op, errs)
}
