package ep

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/loomrt/loom/go/loom"
)

// The save and restore steps of the providers, for EP context models (docs/epcontext.md): a
// kernel a provider compiled is saved as its module image, the code the device loads, and
// restored from it without compiling. The host's image is the shared object (and so is the
// CUDA stand-in's, whose kernels are host builds); CUDA's is the CUDA C source, which the
// device compiles with NVRTC as it loads it, as any Loom CUDA kernel.

// saveSharedObject reads a host artifact's shared object and checks it against its digest.
func saveSharedObject(a *loom.Artifact) ([]byte, error) {
	image, err := a.SharedObjectBytes()
	if err != nil {
		return nil, err
	}
	if got := sha256.Sum256(image); hex.EncodeToString(got[:]) != a.SOSHA256 {
		return nil, fmt.Errorf("the shared object %s changed since it was loaded (SHA-256 %x, want %s)", a.SharedObject, got[:], a.SOSHA256)
	}
	return image, nil
}

// restoreSharedObject writes image, checked against the artifact's digest, into dir as the
// artifact's shared object.
func restoreSharedObject(a loom.Artifact, image []byte, dir string) (*loom.Artifact, error) {
	if got := sha256.Sum256(image); hex.EncodeToString(got[:]) != a.SOSHA256 {
		return nil, fmt.Errorf("the shared object's SHA-256 is %x, the artifact says %q", got[:], a.SOSHA256)
	}
	if dir == "" {
		return nil, fmt.Errorf("no directory for the shared object")
	}
	a.Source, a.IR = "", ""
	a.SharedObject = filepath.Join(dir, a.Key+".so")
	if err := os.WriteFile(a.SharedObject, image, 0o700); err != nil {
		return nil, err
	}
	return &a, nil
}

// SaveKernel is the host's save step: the kernel's shared object.
func (HostProvider) SaveKernel(a *loom.Artifact) ([]byte, error) { return saveSharedObject(a) }

// RestoreKernel is the host's restore step: the shared object written into dir.
func (HostProvider) RestoreKernel(a loom.Artifact, image []byte, dir string) (*loom.Artifact, error) {
	return restoreSharedObject(a, image, dir)
}

// NeedsDir is true: the host loads shared objects from files.
func (HostProvider) NeedsDir() bool { return true }

// SaveKernel is CUDA's save step: the kernel's CUDA C source.
func (CUDAProvider) SaveKernel(a *loom.Artifact) ([]byte, error) {
	if a.Source == "" {
		return nil, fmt.Errorf("the CUDA artifact for %s has no source", a.Target)
	}
	return []byte(a.Source), nil
}

// RestoreKernel is CUDA's restore step: the source put back in the artifact (dir is unused).
func (CUDAProvider) RestoreKernel(a loom.Artifact, image []byte, _ string) (*loom.Artifact, error) {
	if len(image) == 0 {
		return nil, fmt.Errorf("empty CUDA source")
	}
	a.Source, a.IR, a.SharedObject = string(image), "", ""
	return &a, nil
}

// NeedsDir is false: CUDA sources load from memory.
func (CUDAProvider) NeedsDir() bool { return false }

// SaveKernel is the host's: the stand-in's kernels are host shared objects.
func (CUDAStandIn) SaveKernel(a *loom.Artifact) ([]byte, error) { return saveSharedObject(a) }

// RestoreKernel is the host's.
func (CUDAStandIn) RestoreKernel(a loom.Artifact, image []byte, dir string) (*loom.Artifact, error) {
	return restoreSharedObject(a, image, dir)
}

// NeedsDir is true, as the host's.
func (CUDAStandIn) NeedsDir() bool { return true }
