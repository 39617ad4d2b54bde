// Package native is Loom's cgo layer over the shim's flat C ABI (shim/include/loom/loom.h):
// devices, memory, streams, events, modules and kernels, graphs, and above them a Runtime of
// three lanes and the NativeSession that runs a client's stages on it.
//
// # Layers
//
// Like cudarc, three layers, each safe to use on its own terms:
//
//   - internal/cabi is the only package that imports "C". Every ABI call is one crossing into a
//     static inline C wrapper that also copies the failing handle's error message into a stack
//     buffer, so errors carry the shim's message without a second call. It owns nothing.
//     Plain `go build`/`go test` compile the shim into it from source (shim_amalgamation.cc);
//     Bazel links //shim instead.
//   - This package's owning types: Device, Stream, Event, Buffer, Module (with its Kernels),
//     Graph and GraphExec. Each has an explicit, idempotent Close that is safe to call
//     concurrently with the handle's other methods (calls in flight finish first; later ones
//     fail with ErrClosed).
//   - Runtime (lanes, hazards, admission) and NativeSession (stages, fences, quarantine).
//
// # Ownership
//
// A handle cannot be closed while handles that depend on it are open: a Device while any of
// its streams, events, buffers, modules, graphs or execs are; a Buffer or Module while a Graph
// or GraphExec refers to it. Close then fails with ErrInUse and names them, rather than
// closing them behind the back of code that may still use them. Buffers, modules, events and
// graph execs remember the streams they were used on and wait for those streams before they
// are freed, so closing never pulls memory out from under queued work.
//
// Every handle also has a runtime.AddCleanup backstop: if it becomes unreachable unclosed, the
// hook installed with SetLeakHook is called with its kind, and it is released as Close would.
//
// # Host memory
//
// The shim never keeps a Go pointer after a call returns (cgo's rule). Stream.Upload copies
// its source into C staging memory at once; Stream.Download writes its destination at the
// stream's next Synchronize; SharedMemory buffers are host-visible and Buffer.Bytes is a view
// of them. See Stream for the details.
//
// # Errors
//
// Failures are *Error values carrying the operation, a Status and the message. Statuses are
// errors themselves, so errors.Is(err, ErrDevice), errors.Is(err, ErrNoDriver) and so on
// classify them. The shim's ABI version is checked on first use (ErrABIMismatch).
package native
