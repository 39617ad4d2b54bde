package session

import (
	"errors"

	"github.com/loomrt/loom/go/native"
)

// Compiler compiles Loom kernels for one code target. A ModelContext creates one for its
// device on first use (see ModelContext.Compiler); WithCompiler takes one from the caller.
type Compiler interface {
	// Target is the code target the compiler emits ("host-x86_64-v3", "sm_90", ...).
	Target() string
	// CompileKernel compiles one kernel to loadable code with its signature.
	CompileKernel(src KernelSource) (*CompiledKernel, error)
}

// CodeFormat says how a CompiledKernel's code is loaded.
type CodeFormat int

const (
	// HostSharedObject: Path is a shared object exporting loom_host_module_entries.
	HostSharedObject CodeFormat = iota + 1
	// CUDASource: Code is CUDA C, compiled by NVRTC when loaded.
	CUDASource
	// CUDAPTX: Code is PTX text.
	CUDAPTX
)

// CompiledKernel is a compiled kernel: its code, the entry point's name in it, the target it
// was compiled for, and the signature a session dispatches it by.
type CompiledKernel struct {
	Signature KernelSignature
	Target    string
	Format    CodeFormat
	Path      string // HostSharedObject
	Code      []byte // CUDA formats
	Entry     string // the kernel's name in the loaded module
}

// newDefaultCompiler creates the Loom compiler a context uses when none was supplied.
var newDefaultCompiler = func(target string) (Compiler, error) {
	return nil, errors.New("no Loom compiler is linked into go/session yet")
}

// loadModule loads compiled code on dev, checking its target first.
func loadModule(op string, dev *native.Device, ck *CompiledKernel) (*native.Module, error) {
	if ck.Target != dev.Target() {
		return nil, newError(op, ErrTargetMismatch, "kernel %q was compiled for %s but %s needs %s", ck.Signature.Name, ck.Target, dev, dev.Target())
	}
	var (
		m   *native.Module
		err error
	)
	switch ck.Format {
	case HostSharedObject:
		m, err = dev.LoadHostSharedObject(ck.Path, ck.Target)
	case CUDASource:
		m, err = dev.LoadCUDASource(ck.Signature.Name, ck.Code, ck.Target)
	case CUDAPTX:
		m, err = dev.LoadCUDAPTX(ck.Signature.Name, ck.Code, ck.Target)
	default:
		return nil, newError(op, ErrInvalidArgument, "kernel %q has unknown code format %d", ck.Signature.Name, ck.Format)
	}
	if err != nil {
		kind := ErrDevice
		if errors.Is(err, native.ErrTargetMismatch) {
			kind = ErrTargetMismatch
		}
		return nil, wrapError(op, kind, err, "cannot load kernel %q", ck.Signature.Name)
	}
	return m, nil
}
