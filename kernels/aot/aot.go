// Package aot is the registry of the op library's kernels compiled ahead of time: the variants
// the manifest (manifest.txt, and corpus.txt recorded from the tests' models) names, for
// host-x86_64-v3 and host-x86_64-v4, emitted by `go generate ./kernels/...` (tools/cmd/kernelgen
// -aot) as C into the cgo packages under kernels/aot/gen and compiled by the go command into
// every binary that imports package all (go/session does); and the same variants for sm_80 and
// sm_90, compiled by NVRTC to cubins that the packages gen/cuda_sm80 and gen/cuda_sm90 embed, so
// that a GPU machine with the driver but no NVRTC runs them. A runtime looks a request up by its
// static content key (loom.StaticKey: compiler version, source hash, symbol, target and
// configuration), so a shipped variant is used only for exactly the code the JIT would build.
//
// The shipped C is compiled with loom.StaticCFlags for its target but without LOOM_LIBMVEC: it
// does not link glibc's libmvec, so a binary needs no libmvec at run time (the generated code
// then calls the scalar math functions where JIT code on a libmvec machine calls vector ones).
package aot

//go:generate go run github.com/loomrt/loom/tools/cmd/kernelgen -aot -dir ..

import (
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"sync"
	"unsafe"
)

// Variant is one shipped kernel: a (file, symbol, configuration) of the op library compiled
// for one target.
type Variant struct {
	File   string
	Symbol string
	Config map[string]string
	Target string // "host-x86_64-v3", "host-x86_64-v4", "sm_80", "sm_90"
	// Key is loom.StaticKey of the variant's source and target.
	Key string
	// Module is the name the variant registers under (native.RegisterHostModule), and a CUDA
	// variant's module name in messages.
	Module string
	// Metadata is the loom.StaticMetadata of the variant, as JSON.
	Metadata string
	// Entries returns a host variant's loom_host_kernel_entry array (C memory valid for the
	// life of the process) and its length; nil for CUDA variants.
	Entries func() (unsafe.Pointer, int)
	// Image returns a CUDA variant's cubin for Target (built ahead of time by NVRTC, see
	// Compiler), which native.Device.LoadCUDACubin loads without NVRTC; nil for host variants.
	Image func() ([]byte, error)
	// Compiler is the compiler that built Image ("NVRTC 12.9"); empty for host variants.
	Compiler string
}

// GzipImage returns an Image function reading the gzip-compressed file name of fsys (the
// generated CUDA packages embed their cubins so).
func GzipImage(fsys fs.FS, name string) func() ([]byte, error) {
	return func() ([]byte, error) {
		f, err := fsys.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		z, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("shipped image %s: %w", name, err)
		}
		b, err := io.ReadAll(z)
		if err != nil {
			return nil, fmt.Errorf("shipped image %s: %w", name, err)
		}
		return b, nil
	}
}

var (
	mu    sync.RWMutex
	byKey = map[string]*Variant{}
)

// Register adds variants; generated packages call it from init.
func Register(vs []Variant) {
	mu.Lock()
	defer mu.Unlock()
	for i := range vs {
		byKey[vs[i].Key] = &vs[i]
	}
}

// Lookup returns the shipped variant with static key key.
func Lookup(key string) (*Variant, bool) {
	mu.RLock()
	defer mu.RUnlock()
	v, ok := byKey[key]
	return v, ok
}

// Variants lists the shipped variants, by target, file, symbol and module.
func Variants() []*Variant {
	mu.RLock()
	out := make([]*Variant, 0, len(byKey))
	for _, v := range byKey {
		out = append(out, v)
	}
	mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Module < out[j].Module })
	return out
}
