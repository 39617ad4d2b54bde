// Package cabi is go/native's only cgo package: a thin, allocation-free mapping of the shim's
// flat C ABI (shim/include/loom/loom.h) onto Go functions over opaque handle values.
//
// It owns nothing and checks nothing beyond what C needs: lifetimes, locking and argument
// validation live in package native above it. Each function is one cgo crossing into a static
// inline wrapper (wrappers.h) that also copies the failing handle's last error message into a
// stack buffer, so a failure is reported with its message without a second crossing.
//
// Under `go build`/`go test` the shim itself is compiled into this package from source by
// shim_amalgamation.cc; under Bazel that file is left out of srcs and the shim comes from cdeps.
package cabi

/*
#cgo CPPFLAGS: -I${SRCDIR}/../../../../shim/include -I${SRCDIR}/../../../../shim/src
#cgo CXXFLAGS: -std=c++17 -O2
#cgo LDFLAGS: -lstdc++ -ldl -lpthread

#cgo noescape w_device_count
#cgo noescape w_code_compile
#cgo nocallback w_code_compile
#cgo noescape w_code_compiler
#cgo nocallback w_code_compiler
#cgo nocallback w_device_count
#cgo noescape w_device_open
#cgo nocallback w_device_open
#cgo noescape w_device_get_props
#cgo nocallback w_device_get_props
#cgo noescape w_buffer_create
#cgo nocallback w_buffer_create
#cgo noescape w_stream_create
#cgo nocallback w_stream_create
#cgo noescape w_stream_create_with
#cgo nocallback w_stream_create_with
#cgo noescape w_stream_synchronize_staged
#cgo nocallback w_stream_synchronize_staged
#cgo nocallback w_staging_list_new
#cgo nocallback w_staging_list_free
#cgo noescape w_stream_upload
#cgo nocallback w_stream_upload
#cgo noescape w_stream_download
#cgo nocallback w_stream_download
#cgo noescape w_staging_finish
#cgo nocallback w_staging_finish
#cgo noescape w_stream_copy_d2d
#cgo nocallback w_stream_copy_d2d
#cgo noescape w_stream_fill
#cgo nocallback w_stream_fill
#cgo noescape w_stream_begin_capture
#cgo nocallback w_stream_begin_capture
#cgo noescape w_stream_end_capture
#cgo nocallback w_stream_end_capture
#cgo noescape w_stream_inject_fault
#cgo nocallback w_stream_inject_fault
#cgo noescape w_event_create
#cgo nocallback w_event_create
#cgo noescape w_event_record
#cgo nocallback w_event_record
#cgo noescape w_stream_wait_event
#cgo nocallback w_stream_wait_event
#cgo noescape w_event_synchronize
#cgo nocallback w_event_synchronize
#cgo noescape w_event_query
#cgo nocallback w_event_query
#cgo noescape w_event_elapsed_ms
#cgo nocallback w_event_elapsed_ms
#cgo noescape w_module_load
#cgo nocallback w_module_load
#cgo noescape w_module_get_kernel
#cgo nocallback w_module_get_kernel
#cgo noescape w_host_module_register
#cgo nocallback w_host_module_register
#cgo noescape w_kernel_launch
#cgo nocallback w_kernel_launch
#cgo noescape w_graph_create
#cgo nocallback w_graph_create
#cgo noescape w_graph_add_kernel_node
#cgo nocallback w_graph_add_kernel_node
#cgo noescape w_graph_add_copy_node
#cgo nocallback w_graph_add_copy_node
#cgo noescape w_graph_add_fill_node
#cgo nocallback w_graph_add_fill_node
#cgo noescape w_graph_add_empty_node
#cgo nocallback w_graph_add_empty_node
#cgo noescape w_graph_instantiate
#cgo nocallback w_graph_instantiate
#cgo noescape w_graph_exec_launch
#cgo nocallback w_graph_exec_launch
#cgo noescape w_graph_exec_run
#cgo nocallback w_graph_exec_run
#cgo nocallback w_buffer_wrap_host
#cgo noescape w_graph_exec_run_bound
#cgo nocallback w_graph_exec_run_bound
#cgo noescape w_graph_exec_update_kernel_node
#cgo nocallback w_graph_exec_update_kernel_node
#cgo nocallback loom_abi_version
#cgo nocallback loom_device_destroy
#cgo nocallback loom_buffer_destroy
#cgo nocallback loom_stream_destroy
#cgo nocallback loom_event_destroy
#cgo nocallback loom_module_destroy
#cgo nocallback loom_graph_destroy
#cgo nocallback loom_graph_exec_destroy
#cgo nocallback loom_graph_node_count
#cgo nocallback loom_buffer_host_pointer
#cgo nocallback loom_stream_is_capturing

#include "wrappers.h"
*/
import "C"

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"
	"unsafe"
)

// HeaderABIVersion is the LOOM_ABI_VERSION this package was compiled against.
const HeaderABIVersion = uint32(C.LOOM_ABI_VERSION)

// ErrorCapacity is the largest message, in bytes with its NUL, a handle keeps.
const ErrorCapacity = int(C.LOOM_ERROR_CAPACITY)

// Status codes of the ABI (loom_status), for package native's switch over them.
const (
	StatusOK              = int32(C.LOOM_OK)
	StatusInvalidArgument = int32(C.LOOM_ERR_INVALID_ARGUMENT)
	StatusOutOfMemory     = int32(C.LOOM_ERR_OUT_OF_MEMORY)
	StatusNoDriver        = int32(C.LOOM_ERR_NO_DRIVER)
	StatusNoDevice        = int32(C.LOOM_ERR_NO_DEVICE)
	StatusNotSupported    = int32(C.LOOM_ERR_NOT_SUPPORTED)
	StatusTargetMismatch  = int32(C.LOOM_ERR_TARGET_MISMATCH)
	StatusNotFound        = int32(C.LOOM_ERR_NOT_FOUND)
	StatusDevice          = int32(C.LOOM_ERR_DEVICE)
	StatusCapture         = int32(C.LOOM_ERR_CAPTURE)
	StatusCompile         = int32(C.LOOM_ERR_COMPILE)
	StatusInternal        = int32(C.LOOM_ERR_INTERNAL)
)

// Backends (loom_backend).
const (
	BackendHost = int32(C.LOOM_BACKEND_HOST)
	BackendCUDA = int32(C.LOOM_BACKEND_CUDA)
)

// Memory kinds (loom_memory_kind).
const (
	MemoryDevice = int32(C.LOOM_MEMORY_DEVICE)
	MemoryShared = int32(C.LOOM_MEMORY_SHARED)
)

// Module formats (loom_module_format).
const (
	FormatHostSharedObject = int32(C.LOOM_MODULE_HOST_SHARED_OBJECT)
	FormatHostStatic       = int32(C.LOOM_MODULE_HOST_STATIC)
	FormatCUDASource       = int32(C.LOOM_MODULE_CUDA_SOURCE)
	FormatCUDAPTX          = int32(C.LOOM_MODULE_CUDA_PTX)
	FormatCUDACubin        = int32(C.LOOM_MODULE_CUDA_CUBIN)
)

// Faults for InjectFault (loom_fault).
const (
	FaultNone            = int32(C.LOOM_FAULT_NONE)
	FaultNextOperation   = int32(C.LOOM_FAULT_NEXT_OPERATION)
	FaultNextSynchronize = int32(C.LOOM_FAULT_NEXT_SYNCHRONIZE)
)

// Failure is a failed ABI call: its status and the message the shim filed for it.
type Failure struct {
	Status  int32
	Message string
}

type errBuf [C.LOOM_ERROR_CAPACITY]C.char

func failed(st C.loom_status, e *errBuf) *Failure {
	if st == C.LOOM_OK {
		return nil
	}
	return &Failure{Status: int32(st), Message: e.String()}
}

// String is the NUL-terminated message in the buffer. (C.GoString would do, but the escape
// analysis cannot see through it and would move every call's buffer to the heap.)
func (e *errBuf) String() string {
	b := unsafe.Slice((*byte)(unsafe.Pointer(&e[0])), len(e))
	if n := bytes.IndexByte(b, 0); n >= 0 {
		b = b[:n]
	}
	return string(b)
}

// Handles. Each wraps the C pointer; the zero value is the NULL handle.
type (
	Device    struct{ p *C.loom_device }
	Stream    struct{ p *C.loom_stream }
	Event     struct{ p *C.loom_event }
	Buffer    struct{ p *C.loom_buffer }
	Module    struct{ p *C.loom_module }
	Kernel    struct{ p *C.loom_kernel }
	Graph     struct{ p *C.loom_graph }
	GraphExec struct{ p *C.loom_graph_exec }
	// Staging is malloc'd host memory holding an in-flight download.
	Staging struct{ p unsafe.Pointer }
	// StagingList owns a stream's upload staging blocks (C memory).
	StagingList struct{ p *C.w_staging_list }
)

// IsNil reports whether the handle is NULL.
func (d Device) IsNil() bool { return d.p == nil }

// IsNil reports whether the handle is NULL.
func (b Buffer) IsNil() bool { return b.p == nil }

// ABIVersion is the version the linked shim reports (loom_abi_version).
func ABIVersion() uint32 { return uint32(C.loom_abi_version()) }

// StatusString is the shim's name for a status (loom_status_string).
func StatusString(st int32) string { return C.GoString(C.loom_status_string(C.loom_status(st))) }

// DeviceCount is loom_device_count.
func DeviceCount(backend int32) (int, *Failure) {
	var e errBuf
	var n C.int32_t
	if f := failed(C.w_device_count(C.int32_t(backend), &n, &e[0]), &e); f != nil {
		return 0, f
	}
	return int(n), nil
}

// DeviceDiscrete is LOOM_DEVICE_DISCRETE.
const DeviceDiscrete = uint32(C.LOOM_DEVICE_DISCRETE)

// DeviceOpen is loom_device_open.
func DeviceOpen(backend int32, index int32, workers, flags uint32) (Device, *Failure) {
	var e errBuf
	var d *C.loom_device
	f := failed(C.w_device_open(C.int32_t(backend), C.int32_t(index), C.uint32_t(workers), C.uint32_t(flags), &d, &e[0]), &e)
	return Device{d}, f
}

// DeviceDestroy is loom_device_destroy.
func DeviceDestroy(d Device) { C.loom_device_destroy(d.p) }

// DeviceProps are loom_device_props in Go types.
type DeviceProps struct {
	Backend                 int32
	Index                   int32
	Name                    string
	Target                  string
	TotalMemory             uint64
	ComputeUnits            uint32
	MaxThreadsPerBlock      uint32
	MaxBlockDim             [3]uint32
	MaxGridDim              [3]uint32
	MaxSharedMemoryPerBlock uint32
	WarpSize                uint32
	// MaxSharedMemoryPerBlockOptin is max_shared_memory_per_block_optin.
	MaxSharedMemoryPerBlockOptin uint32
	DriverVersion                uint32
}

// DeviceGetProps is loom_device_get_props.
func DeviceGetProps(d Device) (DeviceProps, *Failure) {
	var e errBuf
	var p C.loom_device_props
	if f := failed(C.w_device_get_props(d.p, &p, &e[0]), &e); f != nil {
		return DeviceProps{}, f
	}
	p.name[len(p.name)-1] = 0
	p.target[len(p.target)-1] = 0
	out := DeviceProps{
		Backend:                 int32(p.backend),
		Index:                   int32(p.index),
		Name:                    C.GoString(&p.name[0]),
		Target:                  C.GoString(&p.target[0]),
		TotalMemory:             uint64(p.total_memory),
		ComputeUnits:            uint32(p.compute_units),
		MaxThreadsPerBlock:      uint32(p.max_threads_per_block),
		MaxSharedMemoryPerBlock: uint32(p.max_shared_memory_per_block),
		WarpSize:                uint32(p.warp_size),

		MaxSharedMemoryPerBlockOptin: uint32(p.max_shared_memory_per_block_optin),
		DriverVersion:                uint32(p.driver_version),
	}
	for i := 0; i < 3; i++ {
		out.MaxBlockDim[i] = uint32(p.max_block_dim[i])
		out.MaxGridDim[i] = uint32(p.max_grid_dim[i])
	}
	return out, nil
}

// BufferCreate is loom_buffer_create.
func BufferCreate(d Device, kind int32, bytes uint64) (Buffer, *Failure) {
	var e errBuf
	var b *C.loom_buffer
	f := failed(C.w_buffer_create(d.p, C.int32_t(kind), C.uint64_t(bytes), &b, &e[0]), &e)
	return Buffer{b}, f
}

// BufferWrapHost is loom_buffer_wrap_host over b, which the caller has pinned
// (runtime.Pinner) and keeps pinned until the buffer is destroyed: the shim keeps its address.
func BufferWrapHost(d Device, b []byte) (Buffer, *Failure) {
	var e errBuf
	var out *C.loom_buffer
	f := failed(C.w_buffer_wrap_host(d.p, unsafe.Pointer(&b[0]), C.uint64_t(len(b)), &out, &e[0]), &e)
	return Buffer{out}, f
}

// BufferDestroy is loom_buffer_destroy.
func BufferDestroy(b Buffer) { C.loom_buffer_destroy(b.p) }

// BufferHostPointer is loom_buffer_host_pointer: C memory, nil for device-local buffers.
func BufferHostPointer(b Buffer) unsafe.Pointer { return C.loom_buffer_host_pointer(b.p) }

// StreamInline is LOOM_STREAM_INLINE.
const StreamInline = uint32(C.LOOM_STREAM_INLINE)

// StreamCreateWith is loom_stream_create_with.
func StreamCreateWith(d Device, flags, maxThreads uint32) (Stream, *Failure) {
	var e errBuf
	var s *C.loom_stream
	f := failed(C.w_stream_create_with(d.p, C.uint32_t(flags), C.uint32_t(maxThreads), &s, &e[0]), &e)
	return Stream{s}, f
}

// StreamCreate is loom_stream_create.
func StreamCreate(d Device) (Stream, *Failure) {
	var e errBuf
	var s *C.loom_stream
	f := failed(C.w_stream_create(d.p, &s, &e[0]), &e)
	return Stream{s}, f
}

// StreamDestroy is loom_stream_destroy (drains the stream first).
func StreamDestroy(s Stream) { C.loom_stream_destroy(s.p) }

// NewStagingList allocates a stream's upload staging list (nil if out of memory).
func NewStagingList() StagingList { return StagingList{C.w_staging_list_new()} }

// IsNil reports whether the list failed to allocate.
func (l StagingList) IsNil() bool { return l.p == nil }

// StagingListFree frees the list and its blocks; the stream must be destroyed (drained) first.
func StagingListFree(l StagingList) { C.w_staging_list_free(l.p) }

// StreamSynchronize is loom_stream_synchronize; afterwards it frees the upload staging blocks
// listed before it began.
func StreamSynchronize(s Stream, l StagingList) *Failure {
	var e errBuf
	return failed(C.w_stream_synchronize_staged(s.p, l.p, &e[0]), &e)
}

// StreamUpload copies src into C staging memory and enqueues its host-to-device copy; the
// staging memory is freed by a host callback once the stream has passed the copy, or by a
// later StreamSynchronize if the stream skipped the callback (failed streams do).
func StreamUpload(s Stream, l StagingList, dst Buffer, dstOffset uint64, src []byte) *Failure {
	var e errBuf
	return failed(C.w_stream_upload(s.p, l.p, dst.p, C.uint64_t(dstOffset), bytesPointer(src), C.uint64_t(len(src)), &e[0]), &e)
}

// StreamDownload enqueues a device-to-host copy into new C staging memory, returned; finish it
// with StagingFinish once the stream has passed the copy.
func StreamDownload(s Stream, src Buffer, srcOffset uint64, bytes uint64) (Staging, *Failure) {
	var e errBuf
	var p unsafe.Pointer
	f := failed(C.w_stream_download(s.p, src.p, C.uint64_t(srcOffset), C.uint64_t(bytes), &p, &e[0]), &e)
	return Staging{p}, f
}

// StagingFinish copies a completed download into dst (nil: discards it) and frees the staging.
func StagingFinish(st Staging, dst []byte) {
	C.w_staging_finish(st.p, bytesPointer(dst), C.uint64_t(len(dst)))
}

// StreamCopy is loom_stream_copy_d2d.
func StreamCopy(s Stream, dst Buffer, dstOffset uint64, src Buffer, srcOffset, bytes uint64) *Failure {
	var e errBuf
	return failed(C.w_stream_copy_d2d(s.p, dst.p, C.uint64_t(dstOffset), src.p, C.uint64_t(srcOffset), C.uint64_t(bytes), &e[0]), &e)
}

// StreamFill is loom_stream_fill.
func StreamFill(s Stream, dst Buffer, offset, bytes uint64, value byte) *Failure {
	var e errBuf
	return failed(C.w_stream_fill(s.p, dst.p, C.uint64_t(offset), C.uint64_t(bytes), C.uint8_t(value), &e[0]), &e)
}

// StreamBeginCapture is loom_stream_begin_capture.
func StreamBeginCapture(s Stream) *Failure {
	var e errBuf
	return failed(C.w_stream_begin_capture(s.p, &e[0]), &e)
}

// StreamEndCapture is loom_stream_end_capture.
func StreamEndCapture(s Stream) (Graph, *Failure) {
	var e errBuf
	var g *C.loom_graph
	f := failed(C.w_stream_end_capture(s.p, &g, &e[0]), &e)
	return Graph{g}, f
}

// StreamIsCapturing is loom_stream_is_capturing.
func StreamIsCapturing(s Stream) bool { return C.loom_stream_is_capturing(s.p) != 0 }

// StreamInjectFault is loom_stream_inject_fault.
func StreamInjectFault(s Stream, fault int32) *Failure {
	var e errBuf
	return failed(C.w_stream_inject_fault(s.p, C.int32_t(fault), &e[0]), &e)
}

// EventCreate is loom_event_create.
func EventCreate(d Device) (Event, *Failure) {
	var e errBuf
	var ev *C.loom_event
	f := failed(C.w_event_create(d.p, &ev, &e[0]), &e)
	return Event{ev}, f
}

// EventDestroy is loom_event_destroy.
func EventDestroy(ev Event) { C.loom_event_destroy(ev.p) }

// EventRecord is loom_event_record.
func EventRecord(ev Event, s Stream) *Failure {
	var e errBuf
	return failed(C.w_event_record(ev.p, s.p, &e[0]), &e)
}

// StreamWaitEvent is loom_stream_wait_event.
func StreamWaitEvent(s Stream, ev Event) *Failure {
	var e errBuf
	return failed(C.w_stream_wait_event(s.p, ev.p, &e[0]), &e)
}

// EventSynchronize is loom_event_synchronize; d is the event's device (its error holder).
func EventSynchronize(ev Event, d Device) *Failure {
	var e errBuf
	return failed(C.w_event_synchronize(ev.p, d.p, &e[0]), &e)
}

// EventQuery is loom_event_query.
func EventQuery(ev Event, d Device) (bool, *Failure) {
	var e errBuf
	var done C.int32_t
	f := failed(C.w_event_query(ev.p, d.p, &done, &e[0]), &e)
	return done != 0, f
}

// EventElapsedMS is loom_event_elapsed_ms.
func EventElapsedMS(start, end Event, d Device) (float32, *Failure) {
	var e errBuf
	var ms C.float
	f := failed(C.w_event_elapsed_ms(start.p, end.p, d.p, &ms, &e[0]), &e)
	return float32(ms), f
}

// CodeCompile is loom_code_compile: the image, copied to Go memory, and the compiler's log.
// A compilation the compiler rejected fails with the whole log as the message (the error buffer
// holds only its start).
func CodeCompile(backend, format int32, target, name string, source []byte) ([]byte, string, *Failure) {
	var e errBuf
	var code *C.loom_code
	t, n := cString(target), cString(name)
	f := failed(C.w_code_compile(C.int32_t(backend), C.int32_t(format), bytesChar(t), bytesChar(n),
		bytesPointer(source), C.uint64_t(len(source)), &code, &e[0]), &e)
	if code == nil {
		return nil, "", f
	}
	defer C.loom_code_destroy(code)
	log := C.GoString(C.loom_code_log(code))
	if f != nil {
		head, _, _ := strings.Cut(f.Message, "\n")
		f.Message = head + "\n" + log
		return nil, log, f
	}
	image := C.GoBytes(C.loom_code_data(code), C.int(C.loom_code_size(code)))
	return image, log, nil
}

// CodeCompiler is loom_code_compiler.
func CodeCompiler(backend int32) (string, *Failure) {
	var e errBuf
	var out [256]C.char
	if f := failed(C.w_code_compiler(C.int32_t(backend), &out[0], C.size_t(len(out)), &e[0]), &e); f != nil {
		return "", f
	}
	return C.GoString(&out[0]), nil
}

// ModuleLoad is loom_module_load. Strings are passed NUL-terminated; empty means NULL.
func ModuleLoad(d Device, format int32, target, path, name string, data []byte) (Module, *Failure) {
	var e errBuf
	var m *C.loom_module
	t, p, n := cString(target), cString(path), cString(name)
	f := failed(C.w_module_load(d.p, C.int32_t(format), bytesChar(t), bytesChar(p), bytesChar(n),
		bytesPointer(data), C.uint64_t(len(data)), &m, &e[0]), &e)
	return Module{m}, f
}

// ModuleDestroy is loom_module_destroy.
func ModuleDestroy(m Module) { C.loom_module_destroy(m.p) }

// ModuleGetKernel is loom_module_get_kernel.
func ModuleGetKernel(m Module, d Device, name string) (Kernel, *Failure) {
	var e errBuf
	var k *C.loom_kernel
	n := cString(name)
	f := failed(C.w_module_get_kernel(m.p, d.p, bytesChar(n), &k, &e[0]), &e)
	return Kernel{k}, f
}

// HostModuleRegister is loom_host_module_register. entries points to count
// loom_host_kernel_entry values in C memory that stays valid for the life of the process.
func HostModuleRegister(name, target string, entries unsafe.Pointer, count uint32) *Failure {
	n, t := cString(name), cString(target)
	st := C.w_host_module_register(bytesChar(n), bytesChar(t), entries, C.uint32_t(count))
	if st == C.LOOM_OK {
		return nil
	}
	return &Failure{Status: int32(st), Message: "cannot register host module " + strconv.Quote(name) +
		" for target " + strconv.Quote(target)}
}

// Launch is a kernel launch's parameters in C-ready form. Buffers and Offsets have equal length.
type Launch struct {
	// Dims holds grid x, y, z, block x, y, z and the shared bytes per block.
	Dims            [7]uint32
	Buffers         []Buffer
	Offsets         []uint64
	Scalars         []byte
	Violation       Buffer
	ViolationOffset uint64
}

// KernelLaunch is loom_kernel_launch.
func KernelLaunch(s Stream, k Kernel, l *Launch) *Failure {
	var e errBuf
	return failed(C.w_kernel_launch(s.p, k.p, (*C.uint32_t)(&l.Dims[0]), buffersPointer(l.Buffers),
		offsetsPointer(l.Offsets), C.uint32_t(len(l.Buffers)), bytesPointer(l.Scalars), C.uint32_t(len(l.Scalars)),
		l.Violation.p, C.uint64_t(l.ViolationOffset), &e[0]), &e)
}

// GraphCreate is loom_graph_create.
func GraphCreate(d Device) (Graph, *Failure) {
	var e errBuf
	var g *C.loom_graph
	f := failed(C.w_graph_create(d.p, &g, &e[0]), &e)
	return Graph{g}, f
}

// GraphDestroy is loom_graph_destroy.
func GraphDestroy(g Graph) { C.loom_graph_destroy(g.p) }

// GraphNodeCount is loom_graph_node_count.
func GraphNodeCount(g Graph) uint32 { return uint32(C.loom_graph_node_count(g.p)) }

// GraphAddKernelNode is loom_graph_add_kernel_node.
func GraphAddKernelNode(g Graph, d Device, k Kernel, l *Launch, deps []uint32) (uint32, *Failure) {
	var e errBuf
	var node C.uint32_t
	f := failed(C.w_graph_add_kernel_node(g.p, d.p, k.p, (*C.uint32_t)(&l.Dims[0]), buffersPointer(l.Buffers),
		offsetsPointer(l.Offsets), C.uint32_t(len(l.Buffers)), bytesPointer(l.Scalars), C.uint32_t(len(l.Scalars)),
		l.Violation.p, C.uint64_t(l.ViolationOffset), depsPointer(deps), C.uint32_t(len(deps)), &node, &e[0]), &e)
	return uint32(node), f
}

// GraphAddCopyNode is loom_graph_add_copy_node.
func GraphAddCopyNode(g Graph, d Device, dst Buffer, dstOffset uint64, src Buffer, srcOffset, bytes uint64, deps []uint32) (uint32, *Failure) {
	var e errBuf
	var node C.uint32_t
	f := failed(C.w_graph_add_copy_node(g.p, d.p, dst.p, C.uint64_t(dstOffset), src.p, C.uint64_t(srcOffset),
		C.uint64_t(bytes), depsPointer(deps), C.uint32_t(len(deps)), &node, &e[0]), &e)
	return uint32(node), f
}

// GraphAddFillNode is loom_graph_add_fill_node.
func GraphAddFillNode(g Graph, d Device, dst Buffer, offset, bytes uint64, value byte, deps []uint32) (uint32, *Failure) {
	var e errBuf
	var node C.uint32_t
	f := failed(C.w_graph_add_fill_node(g.p, d.p, dst.p, C.uint64_t(offset), C.uint64_t(bytes), C.uint8_t(value),
		depsPointer(deps), C.uint32_t(len(deps)), &node, &e[0]), &e)
	return uint32(node), f
}

// GraphAddEmptyNode is loom_graph_add_empty_node.
func GraphAddEmptyNode(g Graph, d Device, deps []uint32) (uint32, *Failure) {
	var e errBuf
	var node C.uint32_t
	f := failed(C.w_graph_add_empty_node(g.p, d.p, depsPointer(deps), C.uint32_t(len(deps)), &node, &e[0]), &e)
	return uint32(node), f
}

// GraphInstantiate is loom_graph_instantiate.
func GraphInstantiate(g Graph, d Device) (GraphExec, *Failure) {
	var e errBuf
	var x *C.loom_graph_exec
	f := failed(C.w_graph_instantiate(g.p, d.p, &x, &e[0]), &e)
	return GraphExec{x}, f
}

// GraphExecDestroy is loom_graph_exec_destroy.
func GraphExecDestroy(x GraphExec) { C.loom_graph_exec_destroy(x.p) }

// GraphExecLaunch is loom_graph_exec_launch.
func GraphExecLaunch(x GraphExec, s Stream) *Failure {
	var e errBuf
	return failed(C.w_graph_exec_launch(x.p, s.p, &e[0]), &e)
}

// GraphExecRun is loom_graph_exec_run (the host backend runs kernels on the calling thread:
// C code that never calls back into Go).
func GraphExecRun(x GraphExec, s Stream, maxThreads uint32) *Failure {
	var e errBuf
	return failed(C.w_graph_exec_run(x.p, s.p, C.uint32_t(maxThreads), &e[0]), &e)
}

// BindSite is one rebinding of GraphExecRunBound: kernel node Node's buffer binding Index
// uses memory Arg (an index into the run's memory list) from byte Offset, Bytes long. Its
// layout is C's w_bind_site.
type BindSite struct {
	Node, Index, Arg, reserved uint32
	Offset, Bytes              uint64
}

// BindSite and w_bind_site agree in size and field offsets (compile-time checks).
var (
	_ [unsafe.Sizeof(BindSite{}) - unsafe.Sizeof(C.w_bind_site{})]byte
	_ [unsafe.Sizeof(C.w_bind_site{}) - unsafe.Sizeof(BindSite{})]byte
	_ [unsafe.Offsetof(BindSite{}.Offset) - unsafe.Offsetof(C.w_bind_site{}.offset)]byte
	_ [unsafe.Offsetof(C.w_bind_site{}.offset) - unsafe.Offsetof(BindSite{}.Offset)]byte
)

// DirectMemories is how many of a bound run's memories pass as direct arguments (valid for
// the call by cgo's rules); the others are pinned for the call (runtime.Pinner) and pass as
// addresses.
const DirectMemories = 8

// GraphExecRunBound is loom_graph_exec_run with the sites whose memory is not empty rebound to
// it for this run. The caller has checked that each site's Arg indexes mem and that its range
// lies within that memory. The shim keeps no reference to the memories after the call.
func GraphExecRunBound(x GraphExec, s Stream, maxThreads uint32, sites []BindSite, mem [][]byte) *Failure {
	var e errBuf
	var sp *C.w_bind_site
	if len(sites) > 0 {
		sp = (*C.w_bind_site)(unsafe.Pointer(&sites[0]))
	}
	var direct [DirectMemories][]byte
	copy(direct[:], mem)
	// The memories beyond the direct ones: pinned, their addresses in a list on the stack for
	// the usual few (the call does not keep the list: noescape).
	var local [56]C.uint64_t
	var extra []C.uint64_t
	var pin runtime.Pinner
	if len(mem) > DirectMemories {
		rest := mem[DirectMemories:]
		extra = local[:0]
		if len(rest) > len(local) {
			extra = make([]C.uint64_t, 0, len(rest))
		}
		for _, m := range rest {
			var a C.uint64_t
			if len(m) > 0 {
				pin.Pin(&m[0])
				a = C.uint64_t(uintptr(unsafe.Pointer(&m[0])))
			}
			extra = append(extra, a)
		}
		defer pin.Unpin()
	}
	var ep *C.uint64_t
	if len(extra) > 0 {
		ep = &extra[0]
	}
	return failed(C.w_graph_exec_run_bound(x.p, s.p, C.uint32_t(maxThreads), sp, C.uint32_t(len(sites)),
		memPointer(direct[0]), memPointer(direct[1]), memPointer(direct[2]), memPointer(direct[3]),
		memPointer(direct[4]), memPointer(direct[5]), memPointer(direct[6]), memPointer(direct[7]),
		ep, C.uint32_t(len(extra)), &e[0]), &e)
}

// memPointer is b's first byte, or nil for an empty b (an unbound memory).
func memPointer(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// GraphExecUpdateKernelNode is loom_graph_exec_update_kernel_node.
func GraphExecUpdateKernelNode(x GraphExec, d Device, node uint32, l *Launch) *Failure {
	var e errBuf
	return failed(C.w_graph_exec_update_kernel_node(x.p, d.p, C.uint32_t(node), (*C.uint32_t)(&l.Dims[0]),
		buffersPointer(l.Buffers), offsetsPointer(l.Offsets), C.uint32_t(len(l.Buffers)), bytesPointer(l.Scalars),
		C.uint32_t(len(l.Scalars)), l.Violation.p, C.uint64_t(l.ViolationOffset), &e[0]), &e)
}

// cString returns s NUL-terminated, or nil for the empty string (passed as NULL).
func cString(s string) []byte {
	if s == "" {
		return nil
	}
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}

func bytesChar(b []byte) *C.char {
	if len(b) == 0 {
		return nil
	}
	return (*C.char)(unsafe.Pointer(&b[0]))
}

func bytesPointer(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// buffersPointer passes a []Buffer as loom_buffer* const*: Buffer is a struct holding only the
// C pointer, so the layouts agree; the slice holds C pointers only, as cgo's rules require.
func buffersPointer(b []Buffer) **C.loom_buffer {
	if len(b) == 0 {
		return nil
	}
	return (**C.loom_buffer)(unsafe.Pointer(&b[0]))
}

func offsetsPointer(o []uint64) *C.uint64_t {
	if len(o) == 0 {
		return nil
	}
	return (*C.uint64_t)(unsafe.Pointer(&o[0]))
}

func depsPointer(d []uint32) *C.uint32_t {
	if len(d) == 0 {
		return nil
	}
	return (*C.uint32_t)(unsafe.Pointer(&d[0]))
}
