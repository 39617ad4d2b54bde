package session

import (
	"encoding/binary"
	"fmt"

	"github.com/loomrt/loom/go/native"
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
// workload.
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

// ScalarParam is a scalar parameter of a kernel's device function: its name and its size in
// bytes (1, 2, 4 or 8). Scalars are passed to the kernel in a blob, each at its natural
// alignment, in the host's byte order (loom.h).
type ScalarParam struct {
	Name  string
	Bytes int
}

// KernelSignature is what a session needs to know of a kernel to dispatch it: its buffer
// parameters with their access modes, its scalar parameters, and its launch rule.
type KernelSignature struct {
	Name    string
	Buffers []BufferParam
	Scalars []ScalarParam
	// Launch computes the launch configuration from a dispatch's workload (the launch
	// program's arguments as raw bits). It must be safe for concurrent use.
	Launch func(workload []uint64) (LaunchConfig, error)
}

func (sig *KernelSignature) check(op string) error {
	if sig.Launch == nil {
		return newError(op, ErrInvalidArgument, "kernel %q has no launch rule", sig.Name)
	}
	for i, b := range sig.Buffers {
		if !b.Access.valid() {
			return newError(op, ErrInvalidArgument, "buffer parameter %d (%s) of kernel %q has no valid access mode", i, b.Name, sig.Name)
		}
	}
	for i, s := range sig.Scalars {
		switch s.Bytes {
		case 1, 2, 4, 8:
		default:
			return newError(op, ErrInvalidArgument, "scalar parameter %d (%s) of kernel %q is %d bytes; want 1, 2, 4 or 8", i, s.Name, sig.Name, s.Bytes)
		}
	}
	return nil
}

// kernelEntry is a kernel a session can dispatch.
type kernelEntry struct {
	kernel *native.Kernel
	sig    KernelSignature
}

// packScalars lays args out as the kernel's scalar blob. Each argument is the raw bits of its
// value (math.Float32bits for f32, a two's complement integer, ...) and must fit its size.
func (sig *KernelSignature) packScalars(op string, args []uint64) ([]byte, error) {
	if len(args) != len(sig.Scalars) {
		return nil, newError(op, ErrInvalidArgument, "kernel %q takes %d scalar arguments, got %d", sig.Name, len(sig.Scalars), len(args))
	}
	var blob []byte
	for i, p := range sig.Scalars {
		v := args[i]
		if p.Bytes < 8 && v>>(8*p.Bytes) != 0 && v>>(8*p.Bytes-1) != (1<<(64-8*p.Bytes+1))-1 {
			return nil, newError(op, ErrInvalidArgument, "argument %d (%s) of kernel %q is %#x, which does not fit in %d bytes", i, p.Name, sig.Name, v, p.Bytes)
		}
		for len(blob)%p.Bytes != 0 {
			blob = append(blob, 0)
		}
		switch p.Bytes {
		case 1:
			blob = append(blob, byte(v))
		case 2:
			blob = binary.NativeEndian.AppendUint16(blob, uint16(v))
		case 4:
			blob = binary.NativeEndian.AppendUint32(blob, uint32(v))
		case 8:
			blob = binary.NativeEndian.AppendUint64(blob, v)
		}
	}
	return blob, nil
}

// launchConfig evaluates the launch rule and checks the shape is launchable at all (the shim
// checks the device's limits).
func (sig *KernelSignature) launchConfig(op string, workload []uint64) (LaunchConfig, error) {
	cfg, err := sig.Launch(workload)
	if err != nil {
		return LaunchConfig{}, wrapError(op, ErrInvalidArgument, err, "the launch program of kernel %q rejected workload %v", sig.Name, workload)
	}
	cfg.Grid, cfg.Block = normalized(cfg.Grid), normalized(cfg.Block)
	if cfg.Grid.X == 0 || cfg.Block.X == 0 {
		return LaunchConfig{}, newError(op, ErrInvalidArgument, "the launch program of kernel %q gave an empty launch (grid %v, block %v) for workload %v", sig.Name, cfg.Grid, cfg.Block, workload)
	}
	return cfg, nil
}

func normalized(d native.Dim3) native.Dim3 {
	if d.Y == 0 {
		d.Y = 1
	}
	if d.Z == 0 {
		d.Z = 1
	}
	return d
}

// KernelSource is one kernel to compile: Loom source text, the specialization of its
// constants (name to value text, as in the source's kernel header), and the kernel's name,
// which may be empty when the source declares exactly one kernel.
type KernelSource struct {
	Source         string
	Specialization map[string]string
	Name           string
}
