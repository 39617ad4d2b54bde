package device

import (
	"encoding/binary"
	"fmt"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// KernelID names a kernel of a session (from Compile or ImportKernel). It stays valid in the
// ModelDefinition frozen from the session.
type KernelID struct {
	owner *owner
	index int
}

// String describes the id ("kernel 3").
func (k KernelID) String() string {
	if k.owner == nil {
		return "the zero KernelID"
	}
	return fmt.Sprintf("kernel %d", k.index)
}

// LaunchConfig is the shape of a dispatch: what a kernel's launch program computes from a
// workload. As in go/native, a zero Y or Z counts as 1; a zero grid X is an empty launch,
// which a recording keeps as a node that does nothing.
type LaunchConfig struct {
	Grid        native.Dim3
	Block       native.Dim3
	SharedBytes uint32
}

// BufferParam is a buffer parameter of a kernel: its name and the access the kernel declares.
type BufferParam struct {
	Name   string
	Access Access
}

// ScalarParam is a scalar parameter of a kernel's device function: its name, its size in
// bytes (1, 2, 4 or 8) and its byte offset in the scalar blob (see KernelSignature.BlobBytes).
type ScalarParam struct {
	Name   string
	Bytes  int
	Offset int
}

// KernelSignature is what a session needs to know of a kernel to dispatch it: its buffer
// parameters with their access modes, the layout of its scalar blob, and its launch rule.
// Compile derives it from the Loom artifact; ImportKernel takes it from the caller.
type KernelSignature struct {
	Name    string
	Buffers []BufferParam
	Scalars []ScalarParam
	// BlobBytes is the size of the scalar blob when the Offsets of Scalars are given; 0 lays
	// the scalars out in order, each at its natural alignment (loom.h's convention), ignoring
	// their Offsets.
	BlobBytes int
	// BindingSizeOffsets, when set, has one offset per buffer parameter at which the blob
	// carries the bound region's length as a u64 (Loom's CUDA kernels, which get no buffer
	// sizes from the ABI, read them there).
	BindingSizeOffsets []int
	// WorkloadScalars says, for each argument of the launch program, which scalar parameter
	// it is (a Loom launch program's parameters are device scalars of the same name). A
	// Dispatch without a Workload then takes it from its Args, and one with a Workload must
	// agree with them. Nil: the workload is independent of the scalars.
	WorkloadScalars []int
	// Launch computes the launch configuration from a dispatch's workload (the launch
	// program's arguments as raw bits). A grid with a zero dimension launches nothing. It must
	// be safe for concurrent use.
	Launch func(workload []uint64) (LaunchConfig, error)
}

// normalize checks the signature and returns it with an explicit scalar layout.
func NormalizeSignature(sig KernelSignature, op string) (KernelSignature, error) {
	if sig.Launch == nil {
		return sig, tensor.NewError(op, tensor.ErrInvalidArgument, "kernel %q has no launch rule", sig.Name)
	}
	for i, b := range sig.Buffers {
		if !b.Access.valid() {
			return sig, tensor.NewError(op, tensor.ErrInvalidArgument, "buffer parameter %d (%s) of kernel %q has no valid access mode", i, b.Name, sig.Name)
		}
	}
	sig.Scalars = append([]ScalarParam(nil), sig.Scalars...)
	natural := sig.BlobBytes == 0
	if natural && len(sig.BindingSizeOffsets) > 0 {
		return sig, tensor.NewError(op, tensor.ErrInvalidArgument, "kernel %q places binding sizes in its blob but gives no blob size", sig.Name)
	}
	end := 0
	for i := range sig.Scalars {
		p := &sig.Scalars[i]
		switch p.Bytes {
		case 1, 2, 4, 8:
		default:
			return sig, tensor.NewError(op, tensor.ErrInvalidArgument, "scalar parameter %d (%s) of kernel %q is %d bytes; want 1, 2, 4 or 8", i, p.Name, sig.Name, p.Bytes)
		}
		if natural {
			p.Offset = (end + p.Bytes - 1) / p.Bytes * p.Bytes
			end = p.Offset + p.Bytes
		}
	}
	if natural {
		sig.BlobBytes = end
	}
	for i, p := range sig.Scalars {
		if p.Offset < 0 || p.Offset%p.Bytes != 0 || p.Offset+p.Bytes > sig.BlobBytes {
			return sig, tensor.NewError(op, tensor.ErrInvalidArgument, "scalar parameter %d (%s) of kernel %q at offset %d does not fit, aligned, in a %d-byte blob", i, p.Name, sig.Name, p.Offset, sig.BlobBytes)
		}
	}
	if n := len(sig.BindingSizeOffsets); n > 0 {
		if n != len(sig.Buffers) {
			return sig, tensor.NewError(op, tensor.ErrInvalidArgument, "kernel %q has %d buffer parameters but %d binding size offsets", sig.Name, len(sig.Buffers), n)
		}
		for i, off := range sig.BindingSizeOffsets {
			if off < 0 || off%8 != 0 || off+8 > sig.BlobBytes {
				return sig, tensor.NewError(op, tensor.ErrInvalidArgument, "binding size %d of kernel %q at offset %d does not fit, aligned, in a %d-byte blob", i, sig.Name, off, sig.BlobBytes)
			}
		}
	}
	for i, s := range sig.WorkloadScalars {
		if s < 0 || s >= len(sig.Scalars) {
			return sig, tensor.NewError(op, tensor.ErrInvalidArgument, "launch argument %d of kernel %q names scalar %d of %d", i, sig.Name, s, len(sig.Scalars))
		}
	}
	return sig, nil
}

// kernelEntry is a kernel a session can dispatch.
type kernelEntry struct {
	kernel *native.Kernel
	sig    KernelSignature // normalized
}

// packScalars lays args out as the kernel's scalar blob, with the bound regions' lengths where
// the kernel wants them. Each argument is the raw bits of its value (math.Float32bits for f32,
// two's complement for signed integers) and must fit its size.
func (sig *KernelSignature) packScalars(op string, args []uint64, bindingBytes []uint64) ([]byte, error) {
	if len(args) != len(sig.Scalars) {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "kernel %q takes %d scalar arguments, got %d", sig.Name, len(sig.Scalars), len(args))
	}
	blob := make([]byte, sig.BlobBytes)
	for i, p := range sig.Scalars {
		v := args[i]
		if bits := 8 * p.Bytes; bits < 64 && v>>bits != 0 && v>>(bits-1) != 1<<(64-bits+1)-1 {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "argument %d (%s) of kernel %q is %#x, which does not fit in %d bytes", i, p.Name, sig.Name, v, p.Bytes)
		}
		switch p.Bytes {
		case 1:
			blob[p.Offset] = byte(v)
		case 2:
			binary.NativeEndian.PutUint16(blob[p.Offset:], uint16(v))
		case 4:
			binary.NativeEndian.PutUint32(blob[p.Offset:], uint32(v))
		case 8:
			binary.NativeEndian.PutUint64(blob[p.Offset:], v)
		}
	}
	for i, off := range sig.BindingSizeOffsets {
		binary.NativeEndian.PutUint64(blob[off:], bindingBytes[i])
	}
	return blob, nil
}

// workload returns the dispatch's launch arguments: given, or taken from its scalar arguments.
func (sig *KernelSignature) workload(op string, workload, args []uint64) ([]uint64, error) {
	if len(sig.WorkloadScalars) == 0 {
		return workload, nil
	}
	if workload == nil {
		out := make([]uint64, len(sig.WorkloadScalars))
		for i, s := range sig.WorkloadScalars {
			out[i] = args[s]
		}
		return out, nil
	}
	if len(workload) != len(sig.WorkloadScalars) {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "kernel %q takes %d launch arguments, got %d", sig.Name, len(sig.WorkloadScalars), len(workload))
	}
	for i, s := range sig.WorkloadScalars {
		if workload[i] != args[s] {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "launch argument %d of kernel %q is %d but its scalar %s is %d", i, sig.Name, workload[i], sig.Scalars[s].Name, args[s])
		}
	}
	return workload, nil
}

// launchConfig evaluates the launch rule. A zero grid dimension is an empty launch; block
// dimensions must be positive (the shim checks the device's limits).
func (sig *KernelSignature) launchConfig(op string, workload []uint64) (cfg LaunchConfig, empty bool, err error) {
	cfg, err = sig.Launch(workload)
	if err != nil {
		return LaunchConfig{}, false, tensor.WrapError(op, tensor.ErrInvalidArgument, err, "the launch program of kernel %q rejected workload %v", sig.Name, workload)
	}
	cfg.Grid, cfg.Block = normalized(cfg.Grid), normalized(cfg.Block)
	if cfg.Block.X == 0 {
		return LaunchConfig{}, false, tensor.NewError(op, tensor.ErrInvalidArgument, "the launch program of kernel %q gave an empty block %v for workload %v", sig.Name, cfg.Block, workload)
	}
	return cfg, cfg.Grid.X == 0, nil
}

// normalized spells out native's convention that a zero Y or Z counts as 1.
func normalized(d native.Dim3) native.Dim3 {
	if d.Y == 0 {
		d.Y = 1
	}
	if d.Z == 0 {
		d.Z = 1
	}
	return d
}

// KernelSource is one kernel to compile: Loom source text (Name is its file name, for
// messages) and its Specialization: the kernel's symbol (empty when the source declares one
// kernel) and the values of its specialization constants.
type KernelSource = loom.KernelSource
