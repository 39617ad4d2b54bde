package native

import (
	"unsafe"

	"github.com/loomrt/loom/go/native/internal/cabi"
)

// hostView maps a shared buffer's C memory as a byte slice (the garbage collector ignores
// pointers outside the Go heap, so the slice keeps nothing alive and moves nothing).
func hostView(h cabi.Buffer, size uint64) []byte {
	p := cabi.BufferHostPointer(h)
	if p == nil || size == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(p), size)
}
