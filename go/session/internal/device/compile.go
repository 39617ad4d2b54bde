package device

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Compiler is a Loom compiler paired with the code target it compiles for.
type Compiler struct {
	Loom   *loom.Compiler
	Target loom.Target
}

// defaultCompiler is the compiler a context makes for its device on first use: Loom's default
// configuration (the on-disk cache under $LOOM_CACHE_DIR or the user cache directory, $CC or
// gcc for host code).
func defaultCompiler(op string, dev *native.Device) (Compiler, error) {
	target, err := loom.ParseTarget(dev.Target())
	if err != nil {
		return Compiler{}, tensor.WrapError(op, tensor.ErrTargetMismatch, err, "Loom cannot compile for %s", dev)
	}
	return Compiler{Loom: loom.NewCompiler(loom.Config{}), Target: target}, nil
}

// checkFor refuses a compiler that cannot produce code for dev.
func CheckTarget(c Compiler, op string, dev *native.Device) error {
	if c.Loom == nil {
		return tensor.NewError(op, tensor.ErrInvalidArgument, "the compiler has no Loom compiler")
	}
	if c.Target.String() != dev.Target() {
		return tensor.NewError(op, tensor.ErrTargetMismatch, "the compiler targets %s but %s needs %s", c.Target, dev, dev.Target())
	}
	return nil
}

// compiledKernel is a compiled kernel ready to load.
type CompiledKernel struct {
	Artifact *loom.Artifact
	Sig      KernelSignature
}

// compile compiles sources (concurrently, as Loom's CompileBatch does) and derives each
// kernel's signature, in request order.
func CompileKernel(c Compiler, op string, dev *native.Device, sources []KernelSource) ([]CompiledKernel, error) {
	requests := make([]loom.Request, len(sources))
	for i, src := range sources {
		// The session loads and runs what it compiles: a host artifact from the disk cache
		// need not bring its C source and IR text along.
		requests[i] = loom.Request{Source: src, Target: c.Target, RunOnly: true}
	}
	results := c.Loom.CompileBatch(context.Background(), requests)
	out := make([]CompiledKernel, len(results))
	for i, r := range results {
		if r.Err != nil {
			return nil, tensor.WrapError(op, tensor.ErrCompile, r.Err, "source %d (%s) does not compile", i, DescribeSource(sources[i]))
		}
		if err := loom.CheckTarget(r.Artifact, c.Target); err != nil {
			return nil, tensor.WrapError(op, tensor.ErrTargetMismatch, err, "source %d", i)
		}
		sig, err := SignatureOf(r.Artifact, dev.Props())
		if err != nil {
			return nil, tensor.WrapError(op, tensor.ErrCompile, err, "source %d (%s)", i, DescribeSource(sources[i]))
		}
		if sig, err = NormalizeSignature(sig, op); err != nil {
			return nil, err
		}
		out[i] = CompiledKernel{Artifact: r.Artifact, Sig: sig}
	}
	return out, nil
}

func DescribeSource(src KernelSource) string {
	name := src.Name
	if name == "" {
		name = "unnamed source"
	}
	if src.Specialization.Symbol != "" {
		return fmt.Sprintf("kernel %s of %s", src.Specialization.Symbol, name)
	}
	return name
}

// signatureOf derives a session signature from a Loom artifact's metadata.
func SignatureOf(a *loom.Artifact, props native.Props) (KernelSignature, error) {
	sig := KernelSignature{Name: a.Kernel, BlobBytes: a.BlobBytes, BindingSizeOffsets: slices.Clone(a.HiddenOffsets)}
	buffers := a.Buffers()
	slices.SortFunc(buffers, func(x, y loom.Param) int { return x.Binding - y.Binding })
	for i, p := range buffers {
		if p.Binding != i {
			return sig, fmt.Errorf("kernel %s: buffer %s has binding %d, want %d", a.Kernel, p.Name, p.Binding, i)
		}
		var access Access
		switch p.Access {
		case "read":
			access = AccessRead
		case "write":
			access = AccessWrite
		case "read_write":
			access = AccessReadWrite
		default:
			return sig, fmt.Errorf("kernel %s: buffer %s has unknown access %q", a.Kernel, p.Name, p.Access)
		}
		sig.Buffers = append(sig.Buffers, BufferParam{Name: p.Name, Access: access})
	}
	scalars := a.Scalars()
	for _, p := range scalars {
		sig.Scalars = append(sig.Scalars, ScalarParam{Name: p.Name, Bytes: p.Size, Offset: p.Offset})
	}
	for _, w := range a.Workload {
		if w.Param < 0 || w.Param >= len(a.Params) {
			return sig, fmt.Errorf("kernel %s: launch parameter %s names parameter %d of %d", a.Kernel, w.Name, w.Param, len(a.Params))
		}
		name := a.Params[w.Param].Name
		index := slices.IndexFunc(scalars, func(p loom.Param) bool { return p.Name == name })
		if index < 0 {
			return sig, fmt.Errorf("kernel %s: launch parameter %s is not a device scalar", a.Kernel, w.Name)
		}
		sig.WorkloadScalars = append(sig.WorkloadScalars, index)
	}
	limits := loom.Limits{
		MaxThreadsPerBlock: props.MaxThreadsPerBlock,
		MaxBlockDim:        props.MaxBlockDim,
		MaxGridDim:         props.MaxGridDim,
		// What a launch may ask for: the shim opts a kernel in above the default 48 KiB.
		MaxSharedMemoryPerBlock: max(props.MaxSharedMemoryPerBlockOptin, props.MaxSharedMemoryPerBlock),
	}
	// The closure keeps what LaunchConfig reads, not the artifact: its C text and IR are
	// megabytes across a model's kernels, and loading the kernel needs them no longer.
	launch := &loom.Artifact{Kernel: a.Kernel, Launch: a.Launch}
	sig.Launch = func(workload []uint64) (LaunchConfig, error) {
		g, err := launch.LaunchConfig(workload, limits)
		if err != nil {
			return LaunchConfig{}, err
		}
		cfg := LaunchConfig{
			Grid:        native.Dim3{X: g.Grid[0], Y: g.Grid[1], Z: g.Grid[2]},
			Block:       native.Dim3{X: g.Block[0], Y: g.Block[1], Z: g.Block[2]},
			SharedBytes: g.SharedBytes,
		}
		if g.Empty() {
			cfg.Grid = native.Dim3{} // grid X of 0: nothing to launch
		}
		return cfg, nil
	}
	return sig, nil
}

// LoadArtifact loads a compiled kernel's module on dev. On CUDA the artifact's CUDA C becomes a
// cubin through lc's on-disk image cache (CUDAImage) when lc is not nil; without a compiler the
// shim compiles the source with NVRTC at load time, every time.
func LoadArtifact(op string, dev *native.Device, lc *loom.Compiler, a *loom.Artifact) (*native.Module, error) {
	if a.Target != dev.Target() {
		return nil, tensor.NewError(op, tensor.ErrTargetMismatch, "kernel %s was compiled for %s but %s needs %s", a.Kernel, a.Target, dev, dev.Target())
	}
	var (
		m   *native.Module
		err error
	)
	if dev.Backend() == native.BackendCUDA && lc != nil {
		var image []byte
		if image, err = CUDAImage(lc, a, dev.Props().DriverVersion); err != nil {
			return nil, tensor.WrapError(op, tensor.ErrCompile, err, "cannot compile kernel %s for %s", a.Kernel, a.Target)
		}
		m, err = dev.LoadCUDACubin(a.Kernel, image, a.Target)
	} else if dev.Backend() == native.BackendCUDA {
		m, err = dev.LoadCUDASource(a.Kernel, []byte(a.Source), a.Target)
	} else {
		m, err = dev.LoadHostSharedObject(a.SharedObject, a.Target)
	}
	if err != nil {
		kind := tensor.ErrDevice
		if errors.Is(err, native.ErrTargetMismatch) {
			kind = tensor.ErrTargetMismatch
		}
		return nil, tensor.WrapError(op, kind, err, "cannot load kernel %s", a.Kernel)
	}
	return m, nil
}

// CUDAImage is the cubin of a CUDA artifact: from lc's on-disk image cache (loom.CachedImage)
// under a key of the artifact, its target, NVRTC's version and the driver's (driverVersion,
// cuDriverGetVersion's number), or compiled by NVRTC without a device (native.CompileCUDA) and
// cached. A session's kernels that are not shipped in the binary are compiled once per machine
// and toolchain, not at every start; NVRTC is needed only for images not cached yet.
func CUDAImage(lc *loom.Compiler, a *loom.Artifact, driverVersion uint32) ([]byte, error) {
	if a.Source == "" {
		return nil, fmt.Errorf("kernel %s: the artifact has no CUDA source", a.Kernel)
	}
	compiler, err := native.CUDACompiler()
	if err != nil {
		return nil, err
	}
	// "NVRTC 12.9 (/path/libnvrtc.so.12)": the version, not where the library lies.
	compiler, _, _ = strings.Cut(compiler, " (")
	key := loom.ImageKey{Artifact: a.Key, Target: a.Target, Kind: "cubin", Compiler: compiler,
		Driver: fmt.Sprintf("CUDA driver %d", driverVersion)}
	image, _, err := lc.CachedImage(key, func() ([]byte, error) {
		image, _, err := native.CompileCUDA(a.Kernel, []byte(a.Source), a.Target, native.Cubin)
		return image, err
	})
	return image, err
}
