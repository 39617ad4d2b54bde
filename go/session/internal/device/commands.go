package device

import (
	"errors"
	"fmt"

	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Command is one step of a recording: a Dispatch, a Fill or a Copy.
type Command interface{ command() }

// Dispatch launches a kernel. Args are the device function's scalar arguments as raw bits
// (math.Float32bits for f32, two's complement for signed integers), one per scalar parameter;
// Workload is the launch program's arguments, also as bits, from which LaunchConfig computes
// the shape; Bindings bind the kernel's buffer parameters, in order, to regions with the
// access the dispatch declares.
type Dispatch struct {
	Kernel   KernelID
	Args     []uint64
	Workload []uint64
	Bindings []Binding
	// Violation, when set, is a 4-byte region into which the kernel ORs its bounds-check
	// violation bits (docs/loom.md, "Bounds and the violation word"). The caller reads and
	// clears it: the session does not look at it, so a violation there is no error of the
	// session's.
	//
	// Left zero, the session supplies a word of its own to the dispatch (one per dispatch,
	// in host-visible memory it allocates with the recording, slot or command list), reads
	// it once the work has completed and zeroes it again, and a nonzero word is an error
	// (ErrInvalidArgument) naming the command, its kernel and the bits: a kernel that skipped
	// an access at a bounds check left its output incomplete. A ModelSession reports it from
	// the next call that waits for the replay (Synchronize, Read, ReadMany, Freeze); a Slot
	// from the Run. The error does not fail the session.
	Violation Region
	// IgnoreViolations, with a zero Violation, opts the dispatch out of the session's word:
	// the kernel's violation bits are discarded and a skipped access is no error. It may not
	// be combined with a Violation region.
	IgnoreViolations bool
}

// Fill sets every byte of Region to Byte.
type Fill struct {
	Region Region
	Byte   byte
}

// Copy copies Src to Dst, which must have the same length and must not overlap.
type Copy struct {
	Src, Dst Region
}

func (Dispatch) command() {}
func (Fill) command()     {}
func (Copy) command()     {}

// allocation is one buffer of a session (or of a prepared slot, which mirrors the session's
// allocations at the same indices).
type allocation struct {
	index  int
	buf    *native.Buffer
	bytes  uint64
	kind   native.MemoryKind
	weight bool // immutable: written once by Weight, never by commands
	// borrowed: a weight another owner holds (a plan's shared weights, sharedWeights); the
	// session reads it and never frees it.
	borrowed bool
	// released: its memory was given back early (release); regions of it are refused.
	released bool
	// wrapped: buf wraps memory the caller holds (WrapHost): freeing it closes the wrapper
	// and credits nothing, since nothing was charged.
	wrapped bool
}

func (a *allocation) hostVisible() bool { return a.kind == native.SharedMemory }

type commandKind uint8

const (
	dispatchCommand commandKind = iota
	fillCommand
	copyCommand
	emptyCommand // a dispatch whose grid is empty
)

// preparedCommand is a validated command with every address resolved: what a graph node and
// a direct submission are built from.
type preparedCommand struct {
	kind   commandKind
	desc   string
	kernel *native.Kernel
	params native.LaunchParams
	dst    *native.Buffer
	src    *native.Buffer
	dstOff uint64
	srcOff uint64
	bytes  uint64
	value  byte
	uses   []byteUse
	// sessionWord, for a dispatch that binds no violation word and does not ignore its
	// violations, describes it for the word its owner supplies (attachViolationWords).
	sessionWord *violationSite
}

// memoryMap resolves regions and kernel ids for one owner: a session, or a slot of a prepared
// definition (whose allocation i is its private copy of the session's allocation i).
type memoryMap struct {
	owner   *owner
	alloc   func(i int) *allocation
	count   int
	kernels []*kernelEntry
}

// region checks that r belongs to the map's owner and lies inside its allocation.
// validRegion is r's allocation when region would accept r (no error to spell out).
func (m *memoryMap) validRegion(r Region) (*allocation, bool) {
	if r.owner == nil || r.owner != m.owner || r.alloc < 0 || r.alloc >= m.count {
		return nil, false
	}
	a := m.alloc(r.alloc)
	if a == nil || a.released || r.offset > a.bytes || r.bytes > a.bytes-r.offset {
		return nil, false
	}
	return a, true
}

func (m *memoryMap) region(op, what string, r Region) (*allocation, error) {
	if r.owner == nil {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "%s is the zero Region", what)
	}
	if r.owner != m.owner {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "%s (%s) belongs to another session", what, r)
	}
	if r.alloc < 0 || r.alloc >= m.count {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "%s (%s) names no allocation of this session", what, r)
	}
	a := m.alloc(r.alloc)
	if a == nil {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "%s (%s) is not available here", what, r)
	}
	if a.released {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "%s (%s) was released", what, r)
	}
	if r.offset > a.bytes || r.bytes > a.bytes-r.offset {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "%s (%s) lies outside its allocation of %d bytes", what, r, a.bytes)
	}
	return a, nil
}

func (m *memoryMap) kernel(op, what string, id KernelID) (*kernelEntry, error) {
	if id.owner == nil {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "%s is the zero KernelID", what)
	}
	if id.owner != m.owner || id.index < 0 || id.index >= len(m.kernels) {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "%s (%s) belongs to another session", what, id)
	}
	return m.kernels[id.index], nil
}

func reads(a Access) bool { return a == AccessRead || a == AccessReadWrite }

// prepare validates commands and resolves them against m.
func (m *memoryMap) prepare(op string, commands []Command) ([]preparedCommand, error) {
	out := make([]preparedCommand, len(commands))
	for i, c := range commands {
		p, err := m.prepareOne(op, c)
		if err != nil {
			var e *tensor.Error
			if errors.As(err, &e) {
				e.Message = fmt.Sprintf("command %d: %s", i, e.Message)
				return nil, e
			}
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

func (m *memoryMap) prepareOne(op string, c Command) (preparedCommand, error) {
	switch c := c.(type) {
	case Dispatch:
		return m.prepareDispatch(op, c)
	case *Dispatch:
		if c == nil {
			return preparedCommand{}, tensor.NewError(op, tensor.ErrInvalidArgument, "nil *Dispatch")
		}
		return m.prepareDispatch(op, *c)
	case Fill:
		return m.prepareFill(op, c)
	case *Fill:
		if c == nil {
			return preparedCommand{}, tensor.NewError(op, tensor.ErrInvalidArgument, "nil *Fill")
		}
		return m.prepareFill(op, *c)
	case Copy:
		return m.prepareCopy(op, c)
	case *Copy:
		if c == nil {
			return preparedCommand{}, tensor.NewError(op, tensor.ErrInvalidArgument, "nil *Copy")
		}
		return m.prepareCopy(op, *c)
	case nil:
		return preparedCommand{}, tensor.NewError(op, tensor.ErrInvalidArgument, "nil command")
	}
	return preparedCommand{}, tensor.NewError(op, tensor.ErrInvalidArgument, "unknown command type %T", c)
}

func (m *memoryMap) prepareDispatch(op string, d Dispatch) (preparedCommand, error) {
	k, err := m.kernel(op, "the dispatch's kernel", d.Kernel)
	if err != nil {
		return preparedCommand{}, err
	}
	sig := &k.sig
	p := preparedCommand{kind: dispatchCommand, kernel: k.kernel, desc: "dispatch of " + sig.Name, uses: make([]byteUse, 0, len(d.Bindings))}
	if d.IgnoreViolations && d.Violation.owner != nil {
		return p, tensor.NewError(op, tensor.ErrInvalidArgument, "the dispatch of kernel %q binds a violation word (%s) and ignores violations; set one or the other", sig.Name, d.Violation)
	}
	if len(d.Bindings) != len(sig.Buffers) {
		return p, tensor.NewError(op, tensor.ErrInvalidArgument, "kernel %q has %d buffer parameters, the dispatch binds %d", sig.Name, len(sig.Buffers), len(d.Bindings))
	}
	buffers := make([]native.Binding, len(d.Bindings))
	sizes := make([]uint64, len(d.Bindings))
	for i, b := range d.Bindings {
		param := sig.Buffers[i]
		if a, ok := m.validRegion(b.Region); ok && b.Access.valid() && b.Region.bytes > 0 &&
			(!reads(param.Access) || reads(b.Access)) && (!AccessWrites(param.Access) || AccessWrites(b.Access)) &&
			(!AccessWrites(b.Access) || !a.weight) {
			// The common case, checked without spelling out the binding for an error.
			buffers[i] = native.Binding{Buffer: a.buf, Offset: b.Region.offset}
			sizes[i] = b.Region.bytes
			p.uses = append(p.uses, byteUse{alloc: a.index, start: b.Region.offset, end: b.Region.end(), access: b.Access})
			continue
		}
		what := fmt.Sprintf("binding %d (%s) of kernel %q", i, param.Name, sig.Name)
		if !b.Access.valid() {
			return p, tensor.NewError(op, tensor.ErrInvalidArgument, "%s has no valid access; use Region.Read, Write or ReadWrite", what)
		}
		if (reads(param.Access) && !reads(b.Access)) || (AccessWrites(param.Access) && !AccessWrites(b.Access)) {
			return p, tensor.NewError(op, tensor.ErrInvalidArgument, "%s is declared %s by the kernel but bound for %s", what, param.Access, b.Access)
		}
		a, err := m.region(op, what, b.Region)
		if err != nil {
			return p, err
		}
		if b.Region.bytes == 0 {
			return p, tensor.NewError(op, tensor.ErrInvalidArgument, "%s is bound to an empty region", what)
		}
		if AccessWrites(b.Access) && a.weight {
			return p, tensor.NewError(op, tensor.ErrImmutable, "%s writes %s, which is a weight", what, b.Region)
		}
		buffers[i] = native.Binding{Buffer: a.buf, Offset: b.Region.offset}
		sizes[i] = b.Region.bytes
		p.uses = append(p.uses, byteUse{alloc: a.index, start: b.Region.offset, end: b.Region.end(), access: b.Access})
	}
	scalars, err := sig.packScalars(op, d.Args, sizes)
	if err != nil {
		return p, err
	}
	workload, err := sig.workload(op, d.Workload, d.Args)
	if err != nil {
		return p, err
	}
	cfg, empty, err := sig.launchConfig(op, workload)
	if err != nil {
		return p, err
	}
	if empty {
		// Nothing runs, so nothing is read or written: a node without edges.
		return preparedCommand{kind: emptyCommand, desc: "empty dispatch of " + sig.Name}, nil
	}
	p.params = native.LaunchParams{
		Grid:        cfg.Grid,
		Block:       cfg.Block,
		SharedBytes: cfg.SharedBytes,
		Buffers:     buffers,
		Scalars:     scalars,
	}
	if d.Violation.owner == nil && !d.IgnoreViolations {
		p.sessionWord = &violationSite{kernel: sig.Name, buffers: sig.Buffers}
		if k.kernel != nil {
			p.sessionWord.symbol = k.kernel.Name()
		}
	}
	if d.Violation.owner != nil {
		what := fmt.Sprintf("the violation word of kernel %q", sig.Name)
		a, err := m.region(op, what, d.Violation)
		if err != nil {
			return p, err
		}
		if d.Violation.bytes != 4 || d.Violation.offset%4 != 0 {
			return p, tensor.NewError(op, tensor.ErrInvalidArgument, "%s (%s) must be 4 aligned bytes", what, d.Violation)
		}
		if a.weight {
			return p, tensor.NewError(op, tensor.ErrImmutable, "%s (%s) is a weight", what, d.Violation)
		}
		p.params.Violation, p.params.ViolationOffset = a.buf, d.Violation.offset
		p.uses = append(p.uses, byteUse{alloc: a.index, start: d.Violation.offset, end: d.Violation.end(), access: AccessReadWrite})
	}
	return p, nil
}

func (m *memoryMap) prepareFill(op string, f Fill) (preparedCommand, error) {
	a, err := m.region(op, "the fill's region", f.Region)
	if err != nil {
		return preparedCommand{}, err
	}
	if a.weight {
		return preparedCommand{}, tensor.NewError(op, tensor.ErrImmutable, "the fill's region (%s) is a weight", f.Region)
	}
	return preparedCommand{
		kind: fillCommand, desc: fmt.Sprintf("fill of %s", f.Region),
		dst: a.buf, dstOff: f.Region.offset, bytes: f.Region.bytes, value: f.Byte,
		uses: []byteUse{{alloc: a.index, start: f.Region.offset, end: f.Region.end(), access: AccessWrite}},
	}, nil
}

func (m *memoryMap) prepareCopy(op string, c Copy) (preparedCommand, error) {
	src, err := m.region(op, "the copy's source", c.Src)
	if err != nil {
		return preparedCommand{}, err
	}
	dst, err := m.region(op, "the copy's destination", c.Dst)
	if err != nil {
		return preparedCommand{}, err
	}
	if c.Src.bytes != c.Dst.bytes {
		return preparedCommand{}, tensor.NewError(op, tensor.ErrInvalidArgument, "the copy's source (%s) and destination (%s) differ in length", c.Src, c.Dst)
	}
	if c.Src.overlaps(c.Dst) {
		return preparedCommand{}, tensor.NewError(op, tensor.ErrInvalidArgument, "the copy's source (%s) and destination (%s) overlap", c.Src, c.Dst)
	}
	if dst.weight {
		return preparedCommand{}, tensor.NewError(op, tensor.ErrImmutable, "the copy's destination (%s) is a weight", c.Dst)
	}
	return preparedCommand{
		kind: copyCommand, desc: fmt.Sprintf("copy of %s to %s", c.Src, c.Dst),
		dst: dst.buf, dstOff: c.Dst.offset, src: src.buf, srcOff: c.Src.offset, bytes: c.Src.bytes,
		uses: []byteUse{
			{alloc: src.index, start: c.Src.offset, end: c.Src.end(), access: AccessRead},
			{alloc: dst.index, start: c.Dst.offset, end: c.Dst.end(), access: AccessWrite},
		},
	}, nil
}

// enqueue submits the command on s.
func (p *preparedCommand) enqueue(s *native.Stream) error {
	switch p.kind {
	case dispatchCommand:
		return s.Launch(p.kernel, p.params)
	case fillCommand:
		return s.Fill(p.dst, p.dstOff, p.bytes, p.value)
	case copyCommand:
		return s.Copy(p.dst, p.dstOff, p.src, p.srcOff, p.bytes)
	}
	return nil
}

// addNode adds the command to g after deps.
func (p *preparedCommand) addNode(g *native.Graph, deps []native.GraphNode) (native.GraphNode, error) {
	switch p.kind {
	case dispatchCommand:
		return g.AddKernel(p.kernel, p.params, deps...)
	case fillCommand:
		return g.AddFill(p.dst, p.dstOff, p.bytes, p.value, deps...)
	case copyCommand:
		return g.AddCopy(p.dst, p.dstOff, p.src, p.srcOff, p.bytes, deps...)
	}
	return g.AddEmpty(deps...)
}

// edgeFilter, when a test sets one, may change a node's inferred edges before the graph is
// built: the property tests drop edges with it to show that a missing edge is caught.
type edgeFilter func(node int, deps []int) []int

// buildGraph builds and instantiates the graph of commands with the edges inferred from their
// declared uses (filtered by filter when not nil).
func buildGraph(dev *native.Device, commands []preparedCommand, filter edgeFilter) (*native.GraphExec, error) {
	tracker := newDependencyTracker()
	g, err := dev.NewGraph()
	if err != nil {
		return nil, err
	}
	defer g.Close()
	var deps []native.GraphNode
	for i := range commands {
		edges := tracker.add(i, commands[i].uses)
		if filter != nil {
			edges = filter(i, edges)
		}
		deps = deps[:0]
		for _, e := range edges {
			deps = append(deps, native.GraphNode(e))
		}
		n, err := commands[i].addNode(g, deps)
		if err != nil {
			return nil, fmt.Errorf("command %d (%s): %w", i, commands[i].desc, err)
		}
		if int(n) != i {
			return nil, fmt.Errorf("graph node %d was created for command %d", n, i)
		}
	}
	return g.Instantiate()
}
