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
	"strings"
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

// Entry is one shipped kernel as a generated package writes it: strings only, so a package's
// table is data laid out by the linker, with no code run and nothing allocated at start-up. (A
// Variant literal per kernel, each with its map, was 8.5 MB of init functions building 7,448
// maps: about 23 MB more resident memory in every process that linked the kernels, and 30-60 ms
// more start-up.) Lookup turns the entry it finds into a Variant, once.
type Entry struct {
	File   string
	Symbol string
	// Config is the specialization: KEY=value pairs joined by commas, sorted by key.
	Config string
	Target string
	Key    string
	Module string
	// Metadata is the loom.StaticMetadata of the variant, as JSON.
	Metadata string
	// Image is a CUDA variant's gzip-compressed cubin in its table's Images; empty for host
	// variants.
	Image string
}

// Table is one generated package's kernels.
type Table struct {
	Entries []Entry
	// HostEntries returns the loom_host_kernel_entry array of Entries[i] and its length (host
	// packages; nil in CUDA ones).
	HostEntries func(i int) (unsafe.Pointer, int)
	// Images holds a CUDA package's cubins, which Compiler built (nil and empty in host ones).
	Images   fs.FS
	Compiler string

	variants []*Variant // Entries' Variants, made on first use (under mu)
}

// variantLocked returns the Variant of t.Entries[i], made on first use. mu is held.
func (t *Table) variantLocked(i int) *Variant {
	if t.variants == nil {
		t.variants = make([]*Variant, len(t.Entries))
	}
	if v := t.variants[i]; v != nil {
		return v
	}
	e := &t.Entries[i]
	v := &Variant{File: e.File, Symbol: e.Symbol, Config: ParseConfig(e.Config), Target: e.Target,
		Key: e.Key, Module: e.Module, Metadata: e.Metadata}
	if t.HostEntries != nil {
		v.Entries = func() (unsafe.Pointer, int) { return t.HostEntries(i) }
	}
	if e.Image != "" {
		v.Image = GzipImage(t.Images, e.Image)
		v.Compiler = t.Compiler
	}
	t.variants[i] = v
	return v
}

// FormatConfig writes a specialization as an Entry's Config: KEY=value pairs sorted by key,
// joined by commas. Keys and values are the op library's identifiers and numbers.
func FormatConfig(cfg map[string]string) string {
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(cfg[k])
	}
	return b.String()
}

// ParseConfig reads an Entry's Config (FormatConfig's form) into a map; "" is the empty map.
func ParseConfig(s string) map[string]string {
	cfg := map[string]string{}
	for s != "" {
		var pair string
		pair, s, _ = strings.Cut(s, ",")
		k, v, _ := strings.Cut(pair, "=")
		cfg[k] = v
	}
	return cfg
}

// tableRef is the place of an entry: its table and index.
type tableRef struct {
	t *Table
	i int
}

var (
	mu     sync.Mutex
	tables []*Table            // RegisterTable's
	index  map[string]tableRef // the tables' entries by key; made on the first lookup
)

// RegisterTable adds a generated package's table; its init function calls it. Nothing is read
// until the first Lookup or Variants.
func RegisterTable(t *Table) {
	mu.Lock()
	defer mu.Unlock()
	tables = append(tables, t)
	index = nil
}

// indexLocked returns the tables' entries by key (a later table's entry over an earlier one's).
// mu is held.
func indexLocked() map[string]tableRef {
	if index == nil {
		n := 0
		for _, t := range tables {
			n += len(t.Entries)
		}
		index = make(map[string]tableRef, n)
		for _, t := range tables {
			for i := range t.Entries {
				index[t.Entries[i].Key] = tableRef{t, i}
			}
		}
	}
	return index
}

// Lookup returns the shipped variant with static key key. It returns the same *Variant for a
// key every time.
func Lookup(key string) (*Variant, bool) {
	mu.Lock()
	defer mu.Unlock()
	r, ok := indexLocked()[key]
	if !ok {
		return nil, false
	}
	return r.t.variantLocked(r.i), true
}

// Variants lists the shipped variants, by target, file, symbol and module.
func Variants() []*Variant {
	mu.Lock()
	out := make([]*Variant, 0, len(indexLocked()))
	for _, r := range indexLocked() {
		out = append(out, r.t.variantLocked(r.i))
	}
	mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Module < out[j].Module })
	return out
}
