package native

import (
	"fmt"
	"regexp"

	"github.com/loomrt/loom/go/native/internal/cabi"
)

// CUDAImage is what CompileCUDA produces.
type CUDAImage int32

const (
	// Cubin is machine code for one sm_XX target (the driver loads it without compiling).
	Cubin CUDAImage = CUDAImage(cabi.FormatCUDACubin)
	// PTX is code for the target's virtual architecture (compute_XX), which the driver
	// compiles when it loads it: it runs on that architecture and every later one.
	PTX CUDAImage = CUDAImage(cabi.FormatCUDAPTX)
)

func (k CUDAImage) String() string {
	switch k {
	case Cubin:
		return "cubin"
	case PTX:
		return "PTX"
	}
	return fmt.Sprintf("CUDAImage(%d)", int32(k))
}

var smTarget = regexp.MustCompile(`^sm_[0-9]{2,3}$`)

// CompileCUDA compiles CUDA C for target ("sm_90") with NVRTC, without a driver or a device,
// into a cubin or PTX that Device.LoadCUDACubin or Device.LoadCUDAPTX take as they are. Build
// tools use it to ship kernels ahead of time; CI uses it to check every kernel against the real
// compiler on machines without a GPU. warnings is NVRTC's log of a successful compilation. A
// rejected source fails with ErrCompile and NVRTC's whole log as the message; no NVRTC library
// (LOOM_NVRTC_LIBRARY names one to try first) fails with ErrNoDriver. name appears in messages
// and in the log's line references.
func CompileCUDA(name string, source []byte, target string, kind CUDAImage) (image []byte, warnings string, err error) {
	const op = "CompileCUDA"
	if err := abiCheck(); err != nil {
		return nil, "", err
	}
	if !smTarget.MatchString(target) {
		return nil, "", newError(op, StatusInvalidArgument, "%s: target %q is not sm_XX", name, target)
	}
	if kind != Cubin && kind != PTX {
		return nil, "", newError(op, StatusInvalidArgument, "%s: %v is neither Cubin nor PTX", name, kind)
	}
	if len(source) == 0 {
		return nil, "", newError(op, StatusInvalidArgument, "%s: the source is empty", name)
	}
	image, log, f := cabi.CodeCompile(cabi.BackendCUDA, int32(kind), target, name, source)
	if f != nil {
		return nil, "", fromFailure(op, f)
	}
	return image, log, nil
}

// CUDACompiler names the NVRTC library CompileCUDA and Device.LoadCUDASource use, with its
// version ("NVRTC 12.9 (libnvrtc.so.12)"); ErrNoDriver when none loads.
func CUDACompiler() (string, error) {
	if err := abiCheck(); err != nil {
		return "", err
	}
	v, f := cabi.CodeCompiler(cabi.BackendCUDA)
	if f != nil {
		return "", fromFailure("CUDACompiler", f)
	}
	return v, nil
}

// ShimSourcesHash is the SHA-256 of the shim's sources compiled into this binary (its headers
// and sources under shim/). What CompileCUDA produces depends on them (the options the shim
// gives NVRTC) as well as on the compiler, so tools that keep its results key them by both.
func ShimSourcesHash() string { return cabi.ShimSourcesHash }
