package native

import (
	"encoding/binary"
	"math"

	"github.com/loomrt/loom/go/native/internal/cabi"
)

// Dim3 is a grid or block shape. A zero Y or Z counts as 1, so Dim3{X: n} is one-dimensional.
type Dim3 struct{ X, Y, Z uint32 }

func (d Dim3) normalized() Dim3 {
	if d.Y == 0 {
		d.Y = 1
	}
	if d.Z == 0 {
		d.Z = 1
	}
	return d
}

// Binding binds a kernel's buffer parameter to Buffer, starting Offset bytes into it.
type Binding struct {
	Buffer *Buffer
	Offset uint64
}

// LaunchParams describe one kernel launch: the shape, the buffer bindings in parameter order,
// the scalar blob (build it with Scalars), and an optional violation word.
type LaunchParams struct {
	Grid        Dim3
	Block       Dim3
	SharedBytes uint32 // block-private scratch per block
	Buffers     []Binding
	// Scalars is the kernel's scalar arguments, each at its natural alignment (see Scalars).
	// It is copied when the launch is enqueued.
	Scalars []byte
	// Violation, when set, is a buffer holding a 4-byte word at ViolationOffset into which
	// kernels OR a bit for every guarded access they skipped. Nil discards the bits.
	Violation       *Buffer
	ViolationOffset uint64
}

// maxStackBindings is how many bindings a launch converts without allocating.
const maxStackBindings = 8

// check rejects bindings the shim cannot be given: nil or foreign buffers.
func (p *LaunchParams) check(op string, dev *Device) error {
	for i := range p.Buffers {
		b := p.Buffers[i].Buffer
		if b == nil {
			return newError(op, StatusInvalidArgument, "binding %d has no buffer", i)
		}
		if err := dev.checkOwner(op, b.c, b.dev); err != nil {
			return err
		}
	}
	if p.Violation != nil {
		if err := dev.checkOwner(op, p.Violation.c, p.Violation.dev); err != nil {
			return err
		}
	}
	return nil
}

// pin pins every buffer of the launch; on failure none stays pinned.
func (p *LaunchParams) pin(op string) error {
	for i := range p.Buffers {
		if err := p.Buffers[i].Buffer.c.pin(op); err != nil {
			for j := 0; j < i; j++ {
				p.Buffers[j].Buffer.c.unpin()
			}
			return err
		}
	}
	if p.Violation != nil {
		if err := p.Violation.c.pin(op); err != nil {
			p.unpinBindings()
			return err
		}
	}
	return nil
}

func (p *LaunchParams) unpinBindings() {
	for i := range p.Buffers {
		p.Buffers[i].Buffer.c.unpin()
	}
}

func (p *LaunchParams) unpin() {
	p.unpinBindings()
	if p.Violation != nil {
		p.Violation.c.unpin()
	}
}

// bindingArrays hold the converted bindings of a launch with few of them, so that converting
// allocates nothing. They must be variables of their own, not fields next to the cabi.Launch
// that points at them: cgo's pointer check inspects the whole allocation behind a pointer
// passed to C, and that allocation must not contain Go pointers.
type (
	bindingBuffers [maxStackBindings]cabi.Buffer
	bindingOffsets [maxStackBindings]uint64
)

// toC converts p, using bufs and offs for the bindings when they fit.
func (p *LaunchParams) toC(bufs *bindingBuffers, offs *bindingOffsets) cabi.Launch {
	g, b := p.Grid.normalized(), p.Block.normalized()
	l := cabi.Launch{
		Dims:            [7]uint32{g.X, g.Y, g.Z, b.X, b.Y, b.Z, p.SharedBytes},
		Scalars:         p.Scalars,
		ViolationOffset: p.ViolationOffset,
	}
	n := len(p.Buffers)
	if n <= maxStackBindings {
		l.Buffers, l.Offsets = bufs[:n], offs[:n]
	} else {
		l.Buffers, l.Offsets = make([]cabi.Buffer, n), make([]uint64, n)
	}
	for i := range p.Buffers {
		l.Buffers[i] = p.Buffers[i].Buffer.h
		l.Offsets[i] = p.Buffers[i].Offset
	}
	if p.Violation != nil {
		l.Violation = p.Violation.h
	}
	return l
}

// Scalars builds a launch's scalar blob: each value is appended at its natural alignment, in
// the host's byte order, which is how both backends' kernels read their scalar parameters.
// The zero value is empty and ready to use; methods chain.
type Scalars struct{ blob []byte }

func (s *Scalars) align(n int) {
	for len(s.blob)%n != 0 {
		s.blob = append(s.blob, 0)
	}
}

// Uint32 appends a 4-byte unsigned integer.
func (s *Scalars) Uint32(v uint32) *Scalars {
	s.align(4)
	s.blob = binary.NativeEndian.AppendUint32(s.blob, v)
	return s
}

// Int32 appends a 4-byte signed integer.
func (s *Scalars) Int32(v int32) *Scalars { return s.Uint32(uint32(v)) }

// Uint64 appends an 8-byte unsigned integer.
func (s *Scalars) Uint64(v uint64) *Scalars {
	s.align(8)
	s.blob = binary.NativeEndian.AppendUint64(s.blob, v)
	return s
}

// Int64 appends an 8-byte signed integer.
func (s *Scalars) Int64(v int64) *Scalars { return s.Uint64(uint64(v)) }

// Float32 appends a 4-byte IEEE float.
func (s *Scalars) Float32(v float32) *Scalars { return s.Uint32(math.Float32bits(v)) }

// Float64 appends an 8-byte IEEE float.
func (s *Scalars) Float64(v float64) *Scalars { return s.Uint64(math.Float64bits(v)) }

// Bytes is the blob built so far.
func (s *Scalars) Bytes() []byte { return s.blob }
