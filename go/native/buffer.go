package native

import (
	"fmt"
	"runtime"

	"github.com/loomrt/loom/go/native/internal/cabi"
)

// MemoryKind says where a Buffer lives.
type MemoryKind int32

const (
	// DeviceMemory is device-local; the host reaches it only through copies.
	DeviceMemory MemoryKind = MemoryKind(cabi.MemoryDevice)
	// SharedMemory is coherent and host-visible (pinned and mapped on CUDA); Bytes views it.
	SharedMemory MemoryKind = MemoryKind(cabi.MemoryShared)
)

// String names the kind ("device", "shared").
func (k MemoryKind) String() string {
	switch k {
	case DeviceMemory:
		return "device"
	case SharedMemory:
		return "shared"
	}
	return fmt.Sprintf("memory kind %d", int32(k))
}

// Buffer is device memory. Close waits for the work enqueued on any stream that used the
// buffer, then frees it; it fails with ErrInUse while a graph or graph exec refers to it.
type Buffer struct {
	c    *core
	dev  *Device
	h    cabi.Buffer
	size uint64
	kind MemoryKind
	view []byte // shared memory only: the host mapping (C memory)
}

// Alloc allocates bytes of memory of the given kind on the device.
func (d *Device) Alloc(kind MemoryKind, bytes uint64) (*Buffer, error) {
	return d.alloc("Device.Alloc", kind, bytes, nil)
}

func (d *Device) alloc(op string, kind MemoryKind, bytes uint64, onFree func()) (*Buffer, error) {
	if kind != DeviceMemory && kind != SharedMemory {
		return nil, newError(op, StatusInvalidArgument, "unknown %s", kind)
	}
	if err := d.c.pin(op); err != nil {
		return nil, err
	}
	defer d.c.unpin()
	h, f := cabi.BufferCreate(d.h, int32(kind), bytes)
	if f != nil {
		return nil, fromFailure(op, f)
	}
	c, err := d.newChild(op, "buffer", func() { cabi.BufferDestroy(h) })
	if err != nil {
		return nil, err
	}
	if onFree != nil {
		c.finished = append(c.finished, onFree)
	}
	b := &Buffer{c: c, dev: d, h: h, size: bytes, kind: kind}
	if kind == SharedMemory {
		b.view = hostView(h, bytes)
	}
	guard(b, c)
	return b, nil
}

// WrapHost returns a SharedMemory buffer over b itself (host backend only; others fail
// with StatusNotSupported), so that kernels read data the program already holds, a model's
// weights, without a second copy. b is pinned (runtime.Pinner) until the buffer is closed;
// Bytes is b. The caller must not change b while device work may read it, and b must be
// aligned for the elements kernels read from it.
func (d *Device) WrapHost(b []byte) (*Buffer, error) {
	const op = "Device.WrapHost"
	if len(b) == 0 {
		return nil, newError(op, StatusInvalidArgument, "no memory to wrap")
	}
	if err := d.c.pin(op); err != nil {
		return nil, err
	}
	defer d.c.unpin()
	pinner := new(runtime.Pinner)
	pinner.Pin(&b[0])
	h, f := cabi.BufferWrapHost(d.h, b)
	if f != nil {
		pinner.Unpin()
		return nil, fromFailure(op, f)
	}
	c, err := d.newChild(op, "buffer", func() { cabi.BufferDestroy(h) }) // destroys h on failure
	if err != nil {
		pinner.Unpin()
		return nil, err
	}
	c.finished = append(c.finished, pinner.Unpin)
	buf := &Buffer{c: c, dev: d, h: h, size: uint64(len(b)), kind: SharedMemory, view: b[:len(b):len(b)]}
	guard(buf, c)
	return buf, nil
}

// Size is the buffer's length in bytes.
func (b *Buffer) Size() uint64 { return b.size }

// Kind is where the buffer lives.
func (b *Buffer) Kind() MemoryKind { return b.kind }

// Device is the device the buffer was allocated on.
func (b *Buffer) Device() *Device { return b.dev }

// Bytes is the host view of a SharedMemory buffer, nil for DeviceMemory or once Close began.
// The slice aliases the buffer: it is valid until Close, and reads of memory that enqueued
// work writes are only meaningful after synchronizing with that work. The slice does not keep
// the Buffer reachable: a Buffer dropped without Close is freed by the leak backstop, view or
// not.
func (b *Buffer) Bytes() []byte {
	if b.c.isClosed() {
		return nil
	}
	return b.view
}

// String names the buffer ("buffer #7 (4096 bytes, shared)").
func (b *Buffer) String() string { return fmt.Sprintf("%s (%d bytes, %s)", b.c, b.size, b.kind) }

// Close frees the buffer after the streams that used it have finished their work.
// Idempotent; ErrInUse while a graph or graph exec refers to it.
func (b *Buffer) Close() error { return b.c.close("Buffer.Close") }
