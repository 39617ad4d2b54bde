// Package aot is the registry of the op library's kernels compiled ahead of time: the variants
// the manifest (manifest.txt, and corpus.txt recorded from the tests' models) names, for
// host-x86_64-v3 and host-x86_64-v4, emitted by `go generate ./kernels/...` (tools/cmd/kernelgen
// -aot) as C into the cgo packages under kernels/aot/gen and compiled by the go command into
// every binary that imports package all (go/session does). A runtime looks a request up by its
// static content key (loom.StaticKey: compiler version, source hash, symbol, target and
// configuration), so a shipped variant is used only for exactly the code the JIT would build.
//
// The shipped C is compiled with loom.StaticCFlags for its target but without LOOM_LIBMVEC: it
// does not link glibc's libmvec, so a binary needs no libmvec at run time (the generated code
// then calls the scalar math functions where JIT code on a libmvec machine calls vector ones).
package aot

//go:generate go run github.com/loomrt/loom/tools/cmd/kernelgen -aot -dir ..

import (
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
	Target string // "host-x86_64-v3", "host-x86_64-v4"
	// Key is loom.StaticKey of the variant's source and target.
	Key string
	// Module is the name the variant registers under (native.RegisterHostModule).
	Module string
	// Metadata is the loom.StaticMetadata of the variant, as JSON.
	Metadata string
	// Entries returns the module's loom_host_kernel_entry array (C memory valid for the life
	// of the process) and its length.
	Entries func() (unsafe.Pointer, int)
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
