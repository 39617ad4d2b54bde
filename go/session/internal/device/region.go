package device

import (
	"fmt"
	"sync/atomic"

	"github.com/loomrt/loom/go/session/internal/tensor"
)

// owner identifies the allocations and kernels of one session; a definition frozen from the
// session keeps it, so regions and kernel ids made by the session stay valid there.
type owner struct{ id uint64 }

var nextOwnerID atomic.Uint64

func newOwner() *owner { return &owner{id: nextOwnerID.Add(1)} }

// Region is a byte range of one allocation of a session: a small value, cheap to copy. Only
// the session's allocation methods make regions, and Slice narrows them; every method that
// takes a region checks that it belongs to that session and lies inside its allocation.
type Region struct {
	owner  *owner
	alloc  int
	offset uint64
	bytes  uint64
}

// Bytes is the region's length.
func (r Region) Bytes() uint64 { return r.bytes }

// Offset is where the region starts in its allocation.
func (r Region) Offset() uint64 { return r.offset }

// Slice returns the n bytes at off within r. It fails when they do not fit inside r.
func (r Region) Slice(off, n uint64) (Region, error) {
	const op = "Region.Slice"
	if r.owner == nil {
		return Region{}, tensor.NewError(op, tensor.ErrInvalidArgument, "the zero Region has no allocation")
	}
	if off > r.bytes || n > r.bytes-off {
		return Region{}, tensor.NewError(op, tensor.ErrInvalidArgument, "[%d, %d) does not fit in %s", off, off+n, r)
	}
	return Region{owner: r.owner, alloc: r.alloc, offset: r.offset + off, bytes: n}, nil
}

// Read binds the region for reading.
func (r Region) Read() Binding { return Binding{Region: r, Access: AccessRead} }

// Write binds the region for writing.
func (r Region) Write() Binding { return Binding{Region: r, Access: AccessWrite} }

// ReadWrite binds the region for reading and writing.
func (r Region) ReadWrite() Binding { return Binding{Region: r, Access: AccessReadWrite} }

// String describes the region ("bytes [0, 64) of allocation 2").
func (r Region) String() string {
	if r.owner == nil {
		return "the zero Region"
	}
	return fmt.Sprintf("bytes [%d, %d) of allocation %d", r.offset, r.offset+r.bytes, r.alloc)
}

// end is the region's end offset in its allocation.
func (r Region) end() uint64 { return r.offset + r.bytes }

// overlaps reports whether two regions share a byte.
func (r Region) overlaps(o Region) bool {
	return r.owner == o.owner && r.alloc == o.alloc && r.offset < o.end() && o.offset < r.end()
}

// Binding is a region bound to a kernel's buffer parameter with the access the dispatch
// declares. The declaration is what dependency inference uses, so it must cover what the
// kernel does: a kernel parameter declared write or read_write needs Write or ReadWrite.
type Binding struct {
	Region Region
	Access Access
}
