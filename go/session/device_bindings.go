package session

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/plan"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Persistent device bindings: buffers the session holds across runs, bound to a graph input
// and, optionally, aliased by a graph output (an in-place KV cache or recurrent state), or to
// an output alone. A decode loop feeds them with RunWithDeviceBindings, or captures a step with
// TryCaptureWithDeviceBindings and replays it with ReplayDeviceGraph (device_capture.go).
//
// Memory. A binding's buffer has its physical capacity; its value, of the logical shape, is
// stored packed (row-major, contiguous) at the buffer's start, so that the run reads it in
// place. A binding that an output aliases holds two such buffers: a step reads one and the
// compiled run plan's kernel writes the output into the other in place, after which they swap
// (no step copies the cache, none allocates); an output binding is double-buffered the same
// way, so that a step that fails leaves every binding's value as it was. The buffers are
// charged to the session's memory budget (WithMemoryBudget) before they are allocated, and
// credited back when the binding is reallocated or destroyed or the session closes: an
// allocation over the budget fails with ErrOverBudget and allocates nothing, and a physical
// shape beyond any memory is refused. On the host provider kernels read and write
// the bindings' memory itself; on the cuda provider (and its stand-in) the plan's arena is
// device memory and a binding's value crosses at the plan's input and output seams, as a fed
// input does (see docs/execution.md).

// DeviceBinding is a persistent buffer of an InferenceSession bound to a graph input and,
// optionally, aliased by a graph output; or, from AllocateDeviceOutputBinding, bound to an
// output alone. Its logical shape, at most its physical capacity in every dimension, is the
// shape of the value it holds. Its methods are safe for concurrent use with the session's runs
// (they wait for a run that uses the binding). Destroy it when done; Close of the session
// destroys every binding.
type DeviceBinding struct {
	s              *InferenceSession
	input, output  string
	inPos, outPos  int // the input's and output's index in the session's, -1 when absent
	dtype          DType
	physical       []int64
	logical        []int64
	capacity       int64     // bytes of each buffer
	charged        uint64    // bytes charged to the session's memory budget for bufs
	bufs           [2][]byte // the value is in bufs[front]; an aliased binding's output lands in the other
	front          int
	gen            uint64 // bumped by Reallocate and Destroy: a captured graph refuses a binding of another generation
	destroyed      bool
	lastLogical    []int64 // the logical shape of the last step that ran with the binding (growth detection)
	lastSignatureN int     // steps run since the logical shape last changed
}

// bindingState is an InferenceSession's bindings and captured device graph; mu serializes the
// steps that use bindings with the bindings' methods.
type bindingState struct {
	mu    sync.Mutex
	live  map[*DeviceBinding]bool
	graph *deviceGraph
	memo  DecodeMemoCounts
	// prevEntry is the plan entry of the step before the last (growth detection).
	prevEntry *plan.Entry
	views     DecodeViewPlanCounts
	latched   uint32
	captures  int
	declines  []CaptureDecline // the last capture's (CaptureSegmentation)
	// lastEntry is the plan entry of the last step with bindings (growth detection).
	lastEntry *plan.Entry
	closing   bool // the session is closing: no more steps
	// viewCounts caches each plan's count of view nodes (DecodeViewPlanCounts).
	viewCounts map[*plan.Template]uint64
}

// bindings is the session's binding state (made on first use).
func (s *InferenceSession) bindings() *bindingState {
	s.bindOnce.Do(func() {
		s.bind = &bindingState{live: map[*DeviceBinding]bool{}, viewCounts: map[*plan.Template]uint64{}}
	})
	return s.bind
}

// AllocateDeviceBinding makes a persistent buffer of dtype with capacity physicalShape bound
// to graph input inputName, holding a value of logicalShape (zeros; Upload sets it). When
// outputName is not empty, that graph output aliases the binding: each step with the binding
// writes the output into it (the output must then fit the capacity) and the binding holds
// that value, of the output's shape, as the input of the next step. The element type and the
// rank must be the input's (and the output's); a physical dimension the model fixes must be
// that size. Errors are *Error of kind ErrInvalidArgument naming the input or output,
// ErrOverBudget when the buffers do not fit the session's memory budget, or ErrClosed.
func (s *InferenceSession) AllocateDeviceBinding(inputName, outputName string, dtype DType, physicalShape, logicalShape []int64) (*DeviceBinding, error) {
	const op = "AllocateDeviceBinding"
	in := s.inputIndex(inputName)
	if in < 0 {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "no input named %q (the model's inputs: %s)", inputName, s.inputNames())
	}
	out := -1
	if outputName != "" {
		if out = s.outputIndex(outputName); out < 0 {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "no output named %q (the model's outputs: %s)", outputName, s.outputNames())
		}
	}
	return s.allocateBinding(op, in, out, dtype, physicalShape, logicalShape)
}

// AllocateDeviceOutputBinding makes a persistent buffer of dtype with capacity physicalShape
// that graph output outputName is written to by each step with the binding (which then
// returns no tensor for it: read it with Download). logicalShape is the shape it holds until
// the first step (zeros).
func (s *InferenceSession) AllocateDeviceOutputBinding(outputName string, dtype DType, physicalShape, logicalShape []int64) (*DeviceBinding, error) {
	const op = "AllocateDeviceOutputBinding"
	out := s.outputIndex(outputName)
	if out < 0 {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "no output named %q (the model's outputs: %s)", outputName, s.outputNames())
	}
	return s.allocateBinding(op, -1, out, dtype, physicalShape, logicalShape)
}

func (s *InferenceSession) allocateBinding(op string, in, out int, dtype DType, physical, logical []int64) (*DeviceBinding, error) {
	b := &DeviceBinding{s: s, inPos: in, outPos: out, dtype: dtype, physical: slices.Clone(physical), logical: slices.Clone(logical)}
	var metas []IOMeta
	if in >= 0 {
		b.input = s.inputs[in].Name
		metas = append(metas, s.inputs[in])
	}
	if out >= 0 {
		b.output = s.outputs[out].Name
		metas = append(metas, s.outputs[out])
	}
	name := b.describe()
	if dtype.ByteSize(1) <= 0 {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "%s: element type %s cannot be bound (numeric types only)", name, dtype)
	}
	for _, m := range metas {
		if err := checkFed(m, tensor.Raw(dtype, physical, nil)); err != nil {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "%s: the physical shape %v: %v", name, physical, err)
		}
	}
	if err := b.fits(logical); err != nil {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "%s: %v", name, err)
	}
	capacity, err := b.bytesFor(physical)
	if err != nil {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "%s: %v", name, err)
	}
	b.capacity = capacity
	st := s.bindings()
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	if err := b.charge(op, capacity); err != nil {
		return nil, err
	}
	b.allocate()
	st.live[b] = true
	return b, nil
}

// maxBindingBytes bounds one buffer of a binding (64 PiB) and its element count, so that the
// bytes of its buffers (a count times up to 64 bits, two buffers, their alignment) cannot
// overflow; the memory budget bounds them long before.
const maxBindingBytes = int64(1) << 56

// bytesFor is the bytes of one buffer of b's element type with capacity physical, or an error
// for a negative dimension or a size beyond any memory.
func (b *DeviceBinding) bytesFor(physical []int64) (int64, error) {
	n := int64(1)
	for i, d := range physical {
		if d < 0 {
			return 0, fmt.Errorf("the physical shape %v has the negative dimension %d", physical, i)
		}
		if d != 0 && n > maxBindingBytes/d {
			return 0, fmt.Errorf("the physical shape %v is too large to allocate", physical)
		}
		n *= d
	}
	bytes := tensor.StorageBytes(b.dtype, n)
	if bytes < 0 || bytes > maxBindingBytes {
		return 0, fmt.Errorf("the physical shape %v is too large to allocate (%d elements of %s)", physical, n, b.dtype)
	}
	return bytes, nil
}

// charge charges the buffers of capacity bytes each that b is about to allocate (one, or two
// when an output is written to it) to the session's memory budget, and credits what b's old
// buffers held: an *Error of kind ErrOverBudget naming the binding when they do not fit, which
// changes nothing. The old buffers count until the new ones are charged (Reallocate copies
// from them).
func (b *DeviceBinding) charge(op string, capacity int64) error {
	bytes := uint64(capacity)
	if b.output != "" {
		bytes *= 2
	}
	if err := b.s.eng.Mem.Charge(op, b.describe()+"'s buffers", bytes); err != nil {
		return err
	}
	b.s.eng.Mem.Credit(b.charged)
	b.charged = bytes
	return nil
}

// allocate gives b fresh zeroed buffers of its capacity: two when an output is written to it
// (a step writes the one not holding the value, and they swap once the step succeeded, so
// that a failed step leaves the value as it was).
func (b *DeviceBinding) allocate() {
	b.bufs[0], b.bufs[1], b.front = alignedBytes(b.capacity), nil, 0
	if b.output != "" {
		b.bufs[1] = alignedBytes(b.capacity)
	}
	b.gen++
}

// alignedBytes is n zeroed bytes starting at a multiple of plan.Align.
func alignedBytes(n int64) []byte {
	raw := make([]byte, n+plan.Align)
	off := (plan.Align - int(uintptr(unsafe.Pointer(&raw[0]))%plan.Align)) % plan.Align
	return raw[off : off+int(n) : off+int(n)]
}

// fits checks a logical shape against the capacity: the same rank, no dimension negative or
// larger than the physical one.
func (b *DeviceBinding) fits(shape []int64) error {
	if len(shape) != len(b.physical) {
		return fmt.Errorf("the logical shape %v has rank %d, the binding's physical shape %v rank %d", shape, len(shape), b.physical, len(b.physical))
	}
	for i, d := range shape {
		if d < 0 || d > b.physical[i] {
			return fmt.Errorf("the logical shape %v exceeds the physical shape %v in dimension %d", shape, b.physical, i)
		}
	}
	return nil
}

// describe names the binding in messages.
func (b *DeviceBinding) describe() string {
	switch {
	case b.input != "" && b.output != "":
		return fmt.Sprintf("the binding of input %q aliased by output %q", b.input, b.output)
	case b.input != "":
		return fmt.Sprintf("the binding of input %q", b.input)
	}
	return fmt.Sprintf("the binding of output %q", b.output)
}

// Input is the graph input the binding feeds ("" for an output binding).
func (b *DeviceBinding) Input() string { return b.input }

// Output is the graph output written into the binding ("" when none).
func (b *DeviceBinding) Output() string { return b.output }

// DType is the binding's element type.
func (b *DeviceBinding) DType() DType { return b.dtype }

// PhysicalShape is the binding's capacity.
func (b *DeviceBinding) PhysicalShape() []int64 { return slices.Clone(b.physical) }

// LogicalShape is the shape of the value the binding holds.
func (b *DeviceBinding) LogicalShape() []int64 {
	st := b.s.bindings()
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Clone(b.logical)
}

// usable refuses a destroyed binding or one of a closed session.
func (b *DeviceBinding) usable(op string) error {
	if b.destroyed {
		return tensor.NewError(op, tensor.ErrClosed, "%s was destroyed", b.describe())
	}
	return b.s.checkOpen(op)
}

// Upload sets the binding's value to t, a tensor of its element type that fits its capacity
// (t's shape becomes the logical shape).
func (b *DeviceBinding) Upload(t Tensor) error {
	const op = "DeviceBinding.Upload"
	st := b.s.bindings()
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := b.usable(op); err != nil {
		return err
	}
	src, ok := ops.RawBytes(t)
	if !t.IsValid() || !ok || tensor.Box(t) != nil {
		return tensor.NewError(op, tensor.ErrInvalidArgument, "%s: only a numeric tensor can be uploaded", b.describe())
	}
	if t.DType() != b.dtype {
		return tensor.NewError(op, tensor.ErrInvalidArgument, "%s: element type %s, the binding holds %s", b.describe(), t.DType(), b.dtype)
	}
	if err := b.fits(t.Dims()); err != nil {
		return tensor.NewError(op, tensor.ErrInvalidArgument, "%s: %v", b.describe(), err)
	}
	copy(b.bufs[b.front], src)
	b.logical = slices.Clone(t.Dims())
	return nil
}

// Download returns a copy of the binding's value (of its logical shape).
func (b *DeviceBinding) Download() (Tensor, error) {
	const op = "DeviceBinding.Download"
	st := b.s.bindings()
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := b.usable(op); err != nil {
		return Tensor{}, err
	}
	return tensor.CopyOut(b.view())
}

// SetLogicalShape changes the shape of the binding's value without moving its bytes (a
// rewind of a KV cache shrinks it; elements past the old value's are unspecified). It must
// fit the capacity.
func (b *DeviceBinding) SetLogicalShape(shape []int64) error {
	const op = "DeviceBinding.SetLogicalShape"
	st := b.s.bindings()
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := b.usable(op); err != nil {
		return err
	}
	if err := b.fits(shape); err != nil {
		return tensor.NewError(op, tensor.ErrInvalidArgument, "%s: %v", b.describe(), err)
	}
	b.logical = slices.Clone(shape)
	return nil
}

// Reallocate gives the binding new buffers of capacity physicalShape, keeping its value when
// it fits (else the logical shape must be set again: it becomes all zeros of the old shape
// clipped to the new capacity). A captured device graph that used the binding refuses to
// replay afterwards (ResetDeviceGraph and capture again).
func (b *DeviceBinding) Reallocate(physicalShape []int64) error {
	const op = "DeviceBinding.Reallocate"
	st := b.s.bindings()
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := b.usable(op); err != nil {
		return err
	}
	var metas []IOMeta
	if b.inPos >= 0 {
		metas = append(metas, b.s.inputs[b.inPos])
	}
	if b.outPos >= 0 {
		metas = append(metas, b.s.outputs[b.outPos])
	}
	for _, m := range metas {
		if err := checkFed(m, tensor.Raw(b.dtype, physicalShape, nil)); err != nil {
			return tensor.NewError(op, tensor.ErrInvalidArgument, "%s: the physical shape %v: %v", b.describe(), physicalShape, err)
		}
	}
	capacity, err := b.bytesFor(physicalShape)
	if err != nil {
		return tensor.NewError(op, tensor.ErrInvalidArgument, "%s: %v", b.describe(), err)
	}
	if err := b.charge(op, capacity); err != nil {
		return err
	}
	old := b.view()
	b.physical = slices.Clone(physicalShape)
	b.capacity = capacity
	keep := b.fits(b.logical) == nil
	if !keep {
		clipped := make([]int64, len(b.logical))
		for i := range b.logical {
			clipped[i] = min(b.logical[i], b.physical[i])
		}
		b.logical = clipped
	}
	src, _ := ops.RawBytes(old)
	b.allocate()
	if keep {
		copy(b.bufs[0], src)
	}
	return nil
}

// Destroy releases the binding's memory. A destroyed binding refuses every method (an *Error
// of kind ErrClosed) but Destroy, which is idempotent; a captured device graph that used it
// refuses to replay. Reset the device graph before destroying its bindings.
func (b *DeviceBinding) Destroy() error {
	st := b.s.bindings()
	st.mu.Lock()
	defer st.mu.Unlock()
	b.release()
	delete(st.live, b)
	return nil
}

func (b *DeviceBinding) release() {
	if b.destroyed {
		return
	}
	b.destroyed = true
	b.bufs = [2][]byte{}
	b.s.eng.Mem.Credit(b.charged)
	b.charged = 0
	b.gen++
}

// view is the binding's value as a tensor over its front buffer (not copied). Its shape is
// b.logical itself, which is replaced, never modified, when it changes.
func (b *DeviceBinding) view() Tensor {
	n := tensor.StorageBytes(b.dtype, int64(ops.Numel(b.logical)))
	return tensor.ViewBytes(b.dtype, b.logical, b.bufs[b.front][:n])
}

// back is the buffer a bound output is written to.
func (b *DeviceBinding) back() []byte { return b.bufs[1-b.front] }

// checkOpen refuses a closed session.
func (s *InferenceSession) checkOpen(op string) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return tensor.NewError(op, tensor.ErrClosed, "the session is closed")
	}
	return nil
}

func (s *InferenceSession) inputIndex(name string) int {
	for i, m := range s.inputs {
		if m.Name == name {
			return i
		}
	}
	return -1
}

func (s *InferenceSession) outputIndex(name string) int {
	for i, m := range s.outputs {
		if m.Name == name {
			return i
		}
	}
	return -1
}

// destroyBindings releases every binding and the captured graph (Close, before it takes the
// session's lock: steps with bindings take the bindings' lock, then the session's).
func (s *InferenceSession) destroyBindings() {
	st := s.bindings()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closing = true
	s.releaseGraphLocked(st)
	for b := range st.live {
		b.release()
	}
	clear(st.live)
}

// boundStep is one step's feeds with bindings: the inputs in the graph's order (fed tensors
// and the bindings' views), the bindings by output index, and the plan key of the inputs.
type boundStep struct {
	ins       []tensor.Tensor
	feeds     []tensor.NamedTensor
	byOutput  []*DeviceBinding
	key       string
	plannable bool
}

// prepareStep checks a step's inputs and bindings and gathers its feeds. The bindings' lock
// is held.
func (s *InferenceSession) prepareStep(op string, inputs []tensor.NamedTensor, bindings []*DeviceBinding) (*boundStep, error) {
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	if s.bind.closing {
		return nil, tensor.NewError(op, tensor.ErrClosed, "the session is closed")
	}
	st := &boundStep{ins: make([]tensor.Tensor, len(s.inputs)), byOutput: make([]*DeviceBinding, len(s.outputs))}
	for _, b := range bindings {
		if b == nil {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "a nil binding")
		}
		if b.s != s {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "%s belongs to another session", b.describe())
		}
		if err := b.usable(op); err != nil {
			return nil, err
		}
		if b.inPos >= 0 {
			if st.ins[b.inPos].IsValid() {
				return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "input %q is bound twice", b.input)
			}
			st.ins[b.inPos] = b.view()
		}
		if b.outPos >= 0 {
			if st.byOutput[b.outPos] != nil {
				return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "output %q is bound twice", b.output)
			}
			st.byOutput[b.outPos] = b
		}
	}
	for _, in := range inputs {
		i := s.inputIndex(in.Name)
		if i < 0 {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "no input named %q (the model's inputs: %s)", in.Name, s.inputNames())
		}
		if st.ins[i].IsValid() {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "input %q is fed and bound, or fed twice", in.Name)
		}
		if !in.Tensor.IsValid() {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "input %q: empty tensor (the zero Tensor)", in.Name)
		}
		st.ins[i] = in.Tensor
	}
	for i, t := range st.ins {
		if !t.IsValid() {
			continue // an optional input left out: the run's checks say what is missing
		}
		if err := checkFed(s.inputs[i], t); err != nil {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "input %q: %v", s.inputs[i].Name, err)
		}
		st.feeds = append(st.feeds, tensor.NamedTensor{Name: s.inputs[i].Name, Tensor: t})
	}
	if s.planning && len(st.feeds) == len(s.inputs) {
		var buf [256]byte
		key, ok := s.pe.AppendPlanKey(buf[:0], st.ins)
		st.key, st.plannable = string(key), ok
	}
	return st, nil
}

// RunWithDeviceBindings runs one step: inputs are fed as by Run, bound inputs read their
// binding's value in place, and each bound output is written into its binding (its logical
// shape becomes the output's; an output that does not fit the binding's capacity is an
// *Error naming it, and leaves the binding unchanged). It returns the graph outputs in order,
// the zero Tensor (IsValid false) for those that stay resident in a binding. Steps with
// bindings are serialized; a step of a shape signature seen before replays its compiled run
// plan (DecodeMemoCounts).
func (s *InferenceSession) RunWithDeviceBindings(ctx context.Context, inputs []tensor.NamedTensor, bindings []*DeviceBinding) (_ []tensor.Tensor, err error) {
	const op = "RunWithDeviceBindings"
	defer recoverRun(op, &err)
	if ctx == nil {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "nil context")
	}
	st := s.bindings()
	st.mu.Lock()
	defer st.mu.Unlock()
	step, err := s.prepareStep(op, inputs, bindings)
	if err != nil {
		return nil, err
	}
	return s.runStep(ctx, op, st, step, bindings)
}

// runStep runs a prepared step eagerly (the interpreter, or the signature's plan) and lands
// the bound outputs. The bindings' lock is held.
func (s *InferenceSession) runStep(ctx context.Context, op string, st *bindingState, step *boundStep, bindings []*DeviceBinding) ([]tensor.Tensor, error) {
	into := s.bindingOutputs(step)
	var e *plan.Entry
	if step.plannable {
		e = s.plans.Lookup(step.key)
	}
	outs, err := s.runTensors(ctx, op, step.feeds, into)
	if err != nil {
		return nil, err
	}
	s.noteMemo(st, step, e, bindings)
	return s.landOutputs(op, step, outs)
}

// noteMemo counts a step in DecodeMemoCounts: a new plan (primed for the first shape of the
// bindings, rebuilt when their logical shape changed since the last step), a plan's replay, or
// a step no plan runs (ineligible).
func (s *InferenceSession) noteMemo(st *bindingState, step *boundStep, before *plan.Entry, bindings []*DeviceBinding) {
	changed, seen := false, false
	for _, b := range bindings {
		if b.inPos < 0 {
			continue
		}
		dims := step.ins[b.inPos].Dims()
		if b.lastLogical != nil {
			seen = true
			changed = changed || !slices.Equal(b.lastLogical, dims)
		}
		if !slices.Equal(b.lastLogical, dims) || b.lastLogical == nil {
			b.lastLogical = slices.Clone(dims)
		}
	}
	if step.plannable {
		if e := s.plans.Lookup(step.key); e != st.lastEntry {
			st.prevEntry, st.lastEntry = st.lastEntry, e
		}
	}
	switch {
	case !step.plannable:
		st.memo.Ineligible++
	case before == nil:
		if after := s.plans.Lookup(step.key); after == nil || !s.planned(after) {
			st.memo.Ineligible++
		} else if seen && changed {
			st.memo.Rebuilt++
		} else {
			st.memo.Primed++
		}
	case s.planned(before):
		st.memo.Replayed++
		s.countViews(st, before)
	default:
		st.memo.Ineligible++
	}
}

// planned reports whether e has a plan.
func (s *InferenceSession) planned(e *plan.Entry) bool {
	s.plans.Mu.Lock()
	defer s.plans.Mu.Unlock()
	return e.Template != nil
}

// countViews counts the view nodes of e's plan a replay reused without dispatching them.
func (s *InferenceSession) countViews(st *bindingState, e *plan.Entry) {
	s.plans.Mu.Lock()
	t := e.Template
	s.plans.Mu.Unlock()
	if t == nil {
		return
	}
	n, ok := st.viewCounts[t]
	if !ok {
		n = t.Views()
		st.viewCounts[t] = n
	}
	st.views.ViewsReused += n
	st.views.DispatchElided += n
}

// bindingOutputs is the bound outputs of a step whose plan writes them in place: each
// binding's back buffer viewed with the plan's output shape, where the plan is built and the
// output fits (else nothing: landOutputs copies it in).
func (s *InferenceSession) bindingOutputs(step *boundStep) []tensor.Tensor {
	if !step.plannable {
		return nil
	}
	e := s.plans.Lookup(step.key)
	if e == nil {
		return nil
	}
	s.plans.Mu.Lock()
	t := e.Template
	s.plans.Mu.Unlock()
	if t == nil {
		return nil
	}
	var into []tensor.Tensor
	for j, b := range step.byOutput {
		if b == nil {
			continue
		}
		dt, shape, computed := t.OutputMeta(j)
		if !computed || dt != b.dtype || b.fits(shape) != nil {
			continue
		}
		if into == nil {
			into = make([]tensor.Tensor, len(s.outputs))
		}
		into[j] = tensor.ViewBytes(dt, shape, b.back()[:tensor.StorageBytes(dt, int64(ops.Numel(shape)))])
	}
	return into
}

// landOutputs makes each bound output its binding's value (copying it in unless the run wrote
// it there) and returns the outputs with the bound ones left out.
func (s *InferenceSession) landOutputs(op string, step *boundStep, outs []tensor.Tensor) ([]tensor.Tensor, error) {
	for j, b := range step.byOutput {
		if b == nil {
			continue
		}
		o := outs[j]
		if tensor.Box(o) != nil || o.DType() != b.dtype {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "output %q is %s, %s holds %s", b.output, exec.DescribeTensor(o), b.describe(), b.dtype)
		}
		if err := b.fits(o.Dims()); err != nil {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "output %q %s does not fit %s: %v", b.output, exec.DescribeTensor(o), b.describe(), err)
		}
	}
	for j, b := range step.byOutput {
		if b == nil {
			continue
		}
		o := outs[j]
		dst := b.back()
		if src, _ := ops.RawBytes(o); !plan.SameElements(o, dst[:len(src)]) {
			copy(dst, src)
		}
		b.front = 1 - b.front
		if !slices.Equal(b.logical, o.Dims()) {
			b.logical = slices.Clone(o.Dims())
		}
		outs[j] = tensor.Tensor{}
	}
	return outs, nil
}

// DecodeMemoCounts counts the steps with bindings by what ran them: Primed, a step that built
// the compiled run plan of its shape signature (traced from an interpreted run) for the
// bindings' first shape; Rebuilt, one that built a plan because a binding's logical shape
// changed since the last step (a KV length that grows each step rebuilds every step);
// Replayed, one that ran a plan built before (a replayed captured graph counts too);
// Ineligible, one that no plan runs (plans off, a signature that cannot be planned or whose
// plan a guard dropped, every instance busy).
type DecodeMemoCounts struct {
	Primed, Rebuilt, Replayed, Ineligible uint64
}

// DecodeMemoCounts returns the session's counts of steps with bindings, since it was made.
func (s *InferenceSession) DecodeMemoCounts() DecodeMemoCounts {
	st := s.bindings()
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.memo
}

// DecodeViewPlanCounts counts the pure view nodes (Reshape, Squeeze, Unsqueeze, Flatten, and
// a Slice, Split or Transpose whose outputs are contiguous ranges of its input) of replayed
// steps with bindings: ViewsReused, the zero-copy views of the plan's arena (or of a
// binding) a replay used as they were made when the plan was built; DispatchElided, the view
// nodes a replay did not dispatch. A plan makes every view node a view, so the two agree; a
// view node that is not pure (a Reshape whose shape input is data) is a step and counts in
// neither.
type DecodeViewPlanCounts struct {
	ViewsReused, DispatchElided uint64
}

// DecodeViewPlanCounts returns the session's counts of view nodes that replays elided.
func (s *InferenceSession) DecodeViewPlanCounts() DecodeViewPlanCounts {
	st := s.bindings()
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.views
}

// AllocationCount is a number of allocations and their bytes.
type AllocationCount struct {
	Count int
	Bytes int64
}

// DeviceAllocations is the memory a session holds on its device, by kind: Weights, the device
// copies of the weights its compiled run plans read (shared by all their instances);
// Scratch, the plans' arenas (one an instance, or for plans on shared arenas, see
// OptionSharedArenas, the slabs their runs share); Bindings, the persistent bindings' buffers;
// Graphs, the recorded segments of the plans' instances (their memory is the backend's own:
// Bytes is 0); Staging, the host-visible memory the plans' kernels report bounds violations in
// and, on a device arena, the buffers downloads land in.
type DeviceAllocations struct {
	Weights, Scratch, Bindings, Graphs, Staging AllocationCount
}

// DeviceAllocationCounts counts what the session holds now (all zero after Close).
func (s *InferenceSession) DeviceAllocationCounts() DeviceAllocations {
	var d DeviceAllocations
	if s.checkOpen("DeviceAllocationCounts") != nil {
		return d
	}
	d.Weights.Count, d.Weights.Bytes = s.pe.WeightAllocations()
	a := s.plans.Allocations(s.pe.Arenas)
	d.Scratch = AllocationCount{a.Arenas, a.ArenaBytes}
	d.Graphs = AllocationCount{Count: a.Graphs}
	d.Staging = AllocationCount{a.Staging, a.StagingBytes}
	st := s.bindings()
	st.mu.Lock()
	defer st.mu.Unlock()
	for b := range st.live {
		for _, buf := range b.bufs {
			if buf != nil {
				d.Bindings.Count++
				d.Bindings.Bytes += int64(len(buf))
			}
		}
	}
	return d
}
