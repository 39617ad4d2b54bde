package native

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/native/internal/cabi"
)

// Backend selects the shim's implementation of devices.
type Backend int32

const (
	// BackendHost runs kernels on CPU worker threads; it always has device 0.
	BackendHost Backend = Backend(cabi.BackendHost)
	// BackendCUDA drives NVIDIA GPUs through the driver API and NVRTC, loaded at run time.
	BackendCUDA Backend = Backend(cabi.BackendCUDA)
)

// String names the backend ("host", "cuda").
func (b Backend) String() string {
	switch b {
	case BackendHost:
		return "host"
	case BackendCUDA:
		return "cuda"
	}
	return fmt.Sprintf("backend(%d)", int32(b))
}

// Props describes an open device (loom_device_props).
type Props struct {
	Backend Backend
	Index   int
	Name    string
	// Target is the code target kernels must be compiled for: "host-x86_64-v3",
	// "host-x86_64-v4", "host-aarch64-v8", or "sm_90" style for CUDA.
	Target       string
	TotalMemory  uint64
	ComputeUnits uint32 // host: worker threads; CUDA: multiprocessors
	// Launch limits.
	MaxThreadsPerBlock uint32
	MaxBlockDim        [3]uint32
	MaxGridDim         [3]uint32
	// MaxSharedMemoryPerBlock is the shared memory a block gets without asking (CUDA:
	// 48 KiB); MaxSharedMemoryPerBlockOptin what a launch may ask for (CUDA's opt-in limit:
	// 227 KiB on sm_90, 163 KiB on sm_80), which the shim opts a kernel in to when a launch
	// asks for more than the first. Both are 1 MiB on the host backend.
	MaxSharedMemoryPerBlock      uint32
	MaxSharedMemoryPerBlockOptin uint32
	WarpSize                     uint32 // 1 on the host backend
	// DriverVersion is the CUDA driver's version as cuDriverGetVersion reports it (12080 for
	// 12.8); 0 on the host backend.
	DriverVersion uint32
}

// OpenOptions tune Open; nil means the defaults.
type OpenOptions struct {
	// WorkerThreads is the host backend's thread count for grids and graph nodes; 0 uses the
	// hardware concurrency. Ignored by CUDA.
	WorkerThreads int
	// Discrete opens a host device whose memory behaves as a discrete GPU's
	// (LOOM_DEVICE_DISCRETE), so that code tested on the host fails where it would on a GPU:
	// DeviceMemory buffers are reachable only through copies (as always), WrapHost and
	// GraphExec.RunBound with caller memory fail with StatusNotSupported, and fresh
	// DeviceMemory buffers hold 0xFF bytes rather than zeros. CUDA devices are discrete
	// already (Device.Discrete is true for them either way).
	Discrete bool
}

// Devices reports how many devices backend has. The CUDA backend without a driver fails with
// ErrNoDriver and the message "no CUDA driver: tried libcuda.so.1, libcuda.so".
func Devices(backend Backend) (int, error) {
	const op = "Devices"
	if err := abiCheck(); err != nil {
		return 0, err
	}
	n, f := cabi.DeviceCount(int32(backend))
	if f != nil {
		return 0, fromFailure(op, f)
	}
	return n, nil
}

// Device is an open device: the parent of every other handle. Its methods are safe for
// concurrent use. Close refuses (ErrInUse, naming them) while streams, events, buffers,
// modules, graphs or graph execs of the device are still open: the caller owns them and knows
// in which order they can go, where closing them here could pull memory out from under work
// another goroutine is still submitting.
type Device struct {
	c     *core
	h     cabi.Device
	props Props
	// discrete: the host cannot address the device's memory in place (CUDA, or a host device
	// opened with OpenOptions.Discrete).
	discrete bool
}

// Open opens device index of backend.
func Open(backend Backend, index int, opts *OpenOptions) (*Device, error) {
	const op = "Open"
	if err := abiCheck(); err != nil {
		return nil, err
	}
	workers, flags := 0, uint32(0)
	if opts != nil {
		workers = opts.WorkerThreads
		if opts.Discrete {
			flags |= cabi.DeviceDiscrete
		}
	}
	if workers < 0 || workers > math.MaxUint32 {
		return nil, newError(op, StatusInvalidArgument, "worker thread count %d is out of range", workers)
	}
	if index < math.MinInt32 || index > math.MaxInt32 {
		return nil, newError(op, StatusNoDevice, "no %s device with index %d", backend, index)
	}
	h, f := cabi.DeviceOpen(int32(backend), int32(index), uint32(workers), flags)
	if f != nil {
		return nil, fromFailure(op, f)
	}
	p, f := cabi.DeviceGetProps(h)
	if f != nil {
		cabi.DeviceDestroy(h)
		return nil, fromFailure(op, f)
	}
	d := &Device{h: h, props: Props{
		Backend:                 Backend(p.Backend),
		Index:                   int(p.Index),
		Name:                    p.Name,
		Target:                  p.Target,
		TotalMemory:             p.TotalMemory,
		ComputeUnits:            p.ComputeUnits,
		MaxThreadsPerBlock:      p.MaxThreadsPerBlock,
		MaxBlockDim:             p.MaxBlockDim,
		MaxGridDim:              p.MaxGridDim,
		MaxSharedMemoryPerBlock: p.MaxSharedMemoryPerBlock,
		WarpSize:                p.WarpSize,

		MaxSharedMemoryPerBlockOptin: p.MaxSharedMemoryPerBlockOptin,
		DriverVersion:                p.DriverVersion,
	}, discrete: backend != BackendHost || flags&cabi.DeviceDiscrete != 0}
	d.c = newCore("device", func() { cabi.DeviceDestroy(h) })
	guard(d, d.c)
	return d, nil
}

// Discrete reports whether the device's memory is its own, reached from the host only through
// copies: true on CUDA and on a host device opened with OpenOptions.Discrete. On such a device
// WrapHost and RunBound with caller memory fail; data crosses by Upload and Download.
func (d *Device) Discrete() bool { return d.discrete }

// Props returns the device's properties, read once at Open.
func (d *Device) Props() Props { return d.props }

// Target is Props().Target, the code target modules must be built for.
func (d *Device) Target() string { return d.props.Target }

// Backend is the device's backend.
func (d *Device) Backend() Backend { return d.props.Backend }

// String names the device for messages ("device #1 (host 0: ...)").
func (d *Device) String() string {
	return fmt.Sprintf("%s (%s %d: %s, %s)", d.c, d.props.Backend, d.props.Index, d.props.Name, d.props.Target)
}

// Close destroys the device. It is idempotent and fails with ErrInUse while any handle
// created from the device is still open.
func (d *Device) Close() error { return d.c.close("Device.Close") }

// newChild finishes creating a handle of the device: it attaches the child's core to the
// device (failing if the device started closing meanwhile, in which case the C handle is
// destroyed again). The caller holds a pin on the device.
func (d *Device) newChild(op, kind string, destroy func()) (*core, error) {
	c := newCore(kind, destroy)
	if err := c.attach(op, d.c, d); err != nil {
		destroy()
		return nil, err
	}
	return c, nil
}

// checkOwner fails when a handle of another device is passed.
func (d *Device) checkOwner(op string, what *core, owner *Device) error {
	if owner != d {
		return newError(op, StatusInvalidArgument, "%s belongs to %s, not %s", what, owner.c, d.c)
	}
	return nil
}
