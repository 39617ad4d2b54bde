package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/kernels/aot"
	"github.com/loomrt/loom/tools/internal/checkcache"
)

// The shipped CUDA kernels (-aot): every variant of the manifest and the corpus, emitted with
// loom.EmitStatic for each of aotCUDATargets as CUDA C and compiled by NVRTC (through the shim's
// device-free loom_code_compile) to a cubin, gzip-compressed into
// kernels/aot/gen/cuda_smXX/cubin/KEY.gz and embedded by that package, which registers the
// variants with kernels/aot. A binary then runs them on a GPU machine whose driver has no NVRTC
// beside it.
//
// NVRTC is needed only for variants whose cubin is not there yet: a file is named by the
// variant's static key (compiler version, source hash, symbol, configuration, target), so an
// unchanged variant keeps its cubin, and `go generate` without NVRTC works as long as no kernel
// changed. A different NVRTC than the one the package records (Compiler) rebuilds them all, so
// a package is always one compiler's output. -cuda-rebuild compiles every variant afresh (with
// -check: and compares the cubins byte for byte with the shipped ones; CI runs that, so every
// shipped kernel is proven to compile with the real compiler, for every target).

// aotCUDATargets are the CUDA targets every variant ships a cubin for.
var aotCUDATargets = []string{"sm_80", "sm_90"}

// cudaEmitted is one variant's CUDA code for one target.
type cudaEmitted struct {
	v      aotVariant
	target string
	pkg    string // cuda_sm90
	key    string
	module string
	meta   string
	source []byte // the CUDA C
	file   string // the cubin's file in the package: cubin/KEY.gz
	image  []byte // the gzip-compressed cubin, once compiled or reused
}

func cudaPackage(target string) string { return "cuda_" + strings.ReplaceAll(target, "_", "") }

func emitCUDAVariant(v aotVariant, target string, text []byte) (cudaEmitted, error) {
	key, module, sk, err := emitStatic(v, target, target, text)
	if err != nil {
		return cudaEmitted{}, err
	}
	e := cudaEmitted{v: v, target: target, pkg: cudaPackage(target), key: key, module: module}
	if sk.CUDA == "" {
		return cudaEmitted{}, fmt.Errorf("variant %s for %s: EmitStatic returned no CUDA C", v.id(), target)
	}
	meta, err := json.Marshal(sk.Metadata)
	if err != nil {
		return cudaEmitted{}, err
	}
	e.meta = string(meta)
	e.source = []byte(sk.CUDA)
	e.file = "cubin/" + key[:24] + ".gz"
	return e, nil
}

// nvrtcName is the NVRTC that CompileCUDA would use, without its library path ("NVRTC 12.9"),
// or "" and why not when there is none.
func nvrtcName() (string, error) {
	v, err := native.CUDACompiler()
	if err != nil {
		return "", err
	}
	if i := strings.Index(v, " ("); i >= 0 {
		v = v[:i]
	}
	return v, nil
}

var recordedCompiler = regexp.MustCompile(`(?m)^const Compiler = "([^"]*)"$`)

// shippedCompiler is the compiler a generated CUDA package records, or "".
func shippedCompiler(dir, pkg string) string {
	b, err := os.ReadFile(filepath.Join(dir, "aot", "gen", pkg, "variants.go"))
	if err != nil {
		return ""
	}
	if m := recordedCompiler.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return ""
}

// gzipImage compresses a cubin reproducibly (no name, no time in the header).
func gzipImage(image []byte) ([]byte, error) {
	var b bytes.Buffer
	z, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := z.Write(image); err != nil {
		return nil, err
	}
	if err := z.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// cudaPlan decides, per CUDA package, whether its cubins are reused or compiled: it returns
// the compiler the packages will record, and whether every image must be compiled.
func cudaPlan(dir string, rebuild bool) (compiler string, compileAll bool, nvrtcErr error) {
	have, err := nvrtcName()
	recorded := ""
	for _, t := range aotCUDATargets {
		if c := shippedCompiler(dir, cudaPackage(t)); c != "" && (recorded == "" || c == recorded) {
			recorded = c
		} else if c != "" {
			recorded = "" // the packages disagree: rebuild
			break
		}
	}
	switch {
	case err != nil && rebuild:
		return "", false, fmt.Errorf("-cuda-rebuild needs NVRTC: %w (tools/cuda/fetch_nvrtc.sh installs it; LOOM_NVRTC_LIBRARY names it)", err)
	case err != nil:
		return recorded, false, err // reuse what is there; a missing cubin is an error then
	case rebuild || have != recorded:
		return have, true, nil
	}
	return have, false, nil
}

// fillCUDAImage sets e.image: the shipped file when reuse allows and it exists, else NVRTC's
// cubin, compressed. A compilation that cache has seen with the same compiler, shim, name,
// target and source, and whose result is the shipped file, is not done again: the shipped file
// is what NVRTC built from them.
func fillCUDAImage(dir string, e *cudaEmitted, compileAll bool, nvrtcErr error, cache *nvrtcCache) error {
	shipped := filepath.Join(dir, "aot", "gen", e.pkg, e.file)
	if !compileAll {
		if b, err := os.ReadFile(shipped); err == nil {
			e.image = b
			return nil
		}
		if nvrtcErr != nil {
			return fmt.Errorf("variant %s for %s has no cubin yet (%s) and NVRTC is unavailable: %v (tools/cuda/fetch_nvrtc.sh installs it; LOOM_NVRTC_LIBRARY names it)",
				e.v.id(), e.target, e.file, nvrtcErr)
		}
	}
	name := e.v.file + " " + e.v.symbol + " [" + e.v.configString() + "]"
	key := cache.key(name, e.target, e.source)
	if want, ok := cache.Get(key); ok {
		if b, err := os.ReadFile(shipped); err == nil && sha256Hex(b) == string(want) {
			e.image = b
			return nil
		}
	}
	image, _, err := native.CompileCUDA(name, e.source, e.target, native.Cubin)
	if err != nil {
		return fmt.Errorf("variant %s for %s: %w", e.v.id(), e.target, err)
	}
	if e.image, err = gzipImage(image); err != nil {
		return err
	}
	cache.Put(key, []byte(sha256Hex(e.image)))
	return nil
}

// nvrtcCache remembers, by the compiler's and the shim's identity, the name, target and CUDA C,
// the SHA-256 of the compressed cubin NVRTC made of them (checkcache). The nil *nvrtcCache
// remembers nothing.
type nvrtcCache struct {
	*checkcache.Cache
	id []byte // the compiler (its version and the library's SHA-256) and the shim's sources
}

// openNVRTCCache is the cache for the NVRTC that CompileCUDA uses, or nil when that library's
// file cannot be read (a name the dynamic linker resolves): a cache keyed by a version string
// alone could answer for another build of the compiler.
func openNVRTCCache() *nvrtcCache {
	v, err := native.CUDACompiler()
	if err != nil {
		return nil
	}
	i, j := strings.LastIndex(v, "("), strings.LastIndex(v, ")")
	if i < 0 || j < i || !strings.Contains(v[i+1:j], "/") {
		return nil
	}
	sum, err := checkcache.FileHash(v[i+1 : j])
	if err != nil {
		return nil
	}
	c := checkcache.Open("kernelgen-nvrtc")
	if c == nil {
		return nil
	}
	return &nvrtcCache{Cache: c, id: []byte(v + "\x00" + sum + "\x00" + native.ShimSourcesHash())}
}

func (c *nvrtcCache) key(name, target string, source []byte) string {
	if c == nil {
		return ""
	}
	return checkcache.Key(c.id, []byte(name), []byte(target), source)
}

// Get and Put are the check cache's, on a nil *nvrtcCache too.
func (c *nvrtcCache) Get(key string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	return c.Cache.Get(key)
}

func (c *nvrtcCache) Put(key string, value []byte) {
	if c != nil {
		c.Cache.Put(key, value)
	}
}

// note is the cache's count of compilations it answered, or "" when none was looked up.
func (c *nvrtcCache) note() string {
	if c == nil {
		return ""
	}
	if n, _ := c.Lookups(); n == 0 {
		return ""
	}
	return c.Stats()
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// renderCUDAPackage renders a CUDA package: its cubins, the registration and the doc.
func renderCUDAPackage(pkg, compiler string, es []cudaEmitted) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, e := range es {
		files[e.file] = e.image
	}
	var g bytes.Buffer
	g.WriteString(aotHeader)
	fmt.Fprintf(&g, "package %s\n\nimport (\n\t\"embed\"\n\n\t%q\n)\n\n", pkg, aotModulePath)
	g.WriteString("// Compiler is the compiler that built the cubins (kernelgen rebuilds them all when another\n// one generates the package).\n")
	fmt.Fprintf(&g, "const Compiler = %q\n\n", compiler)
	g.WriteString("//go:embed cubin\nvar images embed.FS\n\n")
	// The table is strings only, which the linker lays out as data (aot.Entry).
	g.WriteString("func init() {\n\ttable.Images = images\n\taot.RegisterTable(&table)\n}\n\n")
	g.WriteString("var table = aot.Table{Compiler: Compiler, Entries: []aot.Entry{\n")
	for _, e := range es {
		fmt.Fprintf(&g, "\t{File: %q, Symbol: %q, Config: %q, Target: %q,\n\t\tKey: %q, Module: %q,\n\t\tImage: %q,\n\t\tMetadata: %s},\n",
			e.v.file, e.v.symbol, aot.FormatConfig(e.v.config), e.target, e.key, e.module, e.file, strconv.Quote(e.meta))
	}
	g.WriteString("}}\n")
	src, err := format.Source(g.Bytes())
	if err != nil {
		return nil, fmt.Errorf("package %s: %v", pkg, err)
	}
	files["variants.go"] = src
	target := es[0].target
	files["doc.go"] = []byte(aotHeader + fmt.Sprintf("// Package %s holds the op library's shipped kernels for %s: cubins built by NVRTC ahead of\n// time (see package aot), embedded gzip-compressed.\npackage %s\n", pkg, target, pkg))
	files["BUILD.bazel"] = []byte(fmt.Sprintf(`# Code generated by tools/cmd/kernelgen -aot; DO NOT EDIT.

load("//tools:defs.bzl", "go_library")

# The cubins are the go.work build's (NVRTC is not a Bazel toolchain here); the shipped-kernels
# check compares them with what NVRTC builds from the .loom sources.
go_library(
    name = %q,
    srcs = [
        "doc.go",
        "variants.go",
    ],
    embedsrcs = glob(["cubin/*.gz"]),
    importpath = %q,
    visibility = [
        "//kernels/aot/all:__pkg__",
        "//tools/cmd/cudareport:__pkg__",
    ],
    deps = ["//kernels/aot"],
)
`, pkg, aotModulePath+"/gen/"+pkg))
	return files, nil
}

func renderAllCUDA(pkgs []string) ([]byte, error) {
	return renderImports("package all\n\n// The CUDA packages are Go only (embedded cubins): every platform links them.\nimport (\n", pkgs)
}
