package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"go/format"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/kernels/aot"
)

// The shipped kernels (-aot). The variants are the union of two lists in kernels/aot:
//
//   - manifest.txt, declared: each line "FILE SYMBOL [K=V,...]" where a value may enumerate
//     alternatives, {a,b,c} or {0..13}, so one line names every op code, dtype, boolean or mode
//     a planner may pick, with the tile choices it makes;
//   - corpus.txt, recorded: the exact variants the planners picked for the tests' real models
//     and the demo (LOOM_RECORD_KERNELS=FILE makes a session append every kernel it loads;
//     see docs/loom.md for the command), one "FILE SYMBOL [K=V,...]" line each.
//
// Each variant is emitted with loom.EmitStatic for every shipped target into one cgo package
// per (file, target), kernels/aot/gen/STEM_LEVEL, compiled by the go command with the target's
// loom.StaticCFlags (no LOOM_LIBMVEC: shipped code does not link libmvec); the package
// registers its variants with kernels/aot by static key. kernels/aot/all imports them all, and
// kernels/aot/variants.bzl lists them for Bazel's loom_kernel rules.

// aotTargets are the targets every variant ships for: a v4 machine runs the v4 code, other
// x86-64 machines (v3 and up) the v3 code.
var aotTargets = []string{"host-x86_64-v3", "host-x86_64-v4"}

const aotModulePath = "github.com/loomrt/loom/kernels/aot"

type aotVariant struct {
	file, symbol string
	config       map[string]string
}

func (v aotVariant) configString() string {
	keys := make([]string, 0, len(v.config))
	for k := range v.config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + v.config[k]
	}
	return strings.Join(parts, ",")
}

func (v aotVariant) id() string { return v.file + " " + v.symbol + " " + v.configString() }

var braceRange = regexp.MustCompile(`^(-?\d+)\.\.(-?\d+)$`)

// expandValue returns the alternatives a manifest value names.
func expandValue(v string) ([]string, error) {
	if !strings.HasPrefix(v, "{") {
		return []string{v}, nil
	}
	if !strings.HasSuffix(v, "}") {
		return nil, fmt.Errorf("unterminated alternatives %q", v)
	}
	inner := v[1 : len(v)-1]
	if m := braceRange.FindStringSubmatch(inner); m != nil {
		lo, _ := strconv.Atoi(m[1])
		hi, _ := strconv.Atoi(m[2])
		if hi < lo || hi-lo > 256 {
			return nil, fmt.Errorf("bad range %q", v)
		}
		var out []string
		for i := lo; i <= hi; i++ {
			out = append(out, strconv.Itoa(i))
		}
		return out, nil
	}
	return strings.Split(inner, ","), nil
}

// parseVariantList reads manifest or corpus lines, expanding alternatives.
func parseVariantList(path string, r io.Reader) ([]aotVariant, error) {
	var out []aotVariant
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if i := strings.Index(text, "#"); i >= 0 {
			text = text[:i]
		}
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		if len(fields) > 3 || len(fields) < 2 {
			return nil, fmt.Errorf("%s:%d: want FILE SYMBOL [K=V,...]", path, line)
		}
		base := []aotVariant{{file: fields[0], symbol: fields[1], config: map[string]string{}}}
		if len(fields) == 3 {
			// Split on commas outside braces.
			var pairs []string
			depth, start := 0, 0
			s := fields[2]
			for i := 0; i < len(s); i++ {
				switch s[i] {
				case '{':
					depth++
				case '}':
					depth--
				case ',':
					if depth == 0 {
						pairs = append(pairs, s[start:i])
						start = i + 1
					}
				}
			}
			pairs = append(pairs, s[start:])
			for _, kv := range pairs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return nil, fmt.Errorf("%s:%d: %q is not K=V", path, line, kv)
				}
				alts, err := expandValue(v)
				if err != nil {
					return nil, fmt.Errorf("%s:%d: %v", path, line, err)
				}
				var next []aotVariant
				for _, b := range base {
					for _, a := range alts {
						c := make(map[string]string, len(b.config)+1)
						for kk, vv := range b.config {
							c[kk] = vv
						}
						c[k] = a
						next = append(next, aotVariant{file: b.file, symbol: b.symbol, config: c})
					}
				}
				base = next
			}
		}
		out = append(out, base...)
	}
	return out, sc.Err()
}

// aotVariants reads dir/aot's lists, deduplicated and sorted.
func aotVariants(dir string) ([]aotVariant, error) {
	seen := map[string]bool{}
	var out []aotVariant
	for _, name := range []string{"manifest.txt", "corpus.txt"} {
		path := filepath.Join(dir, "aot", name)
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		vs, err := parseVariantList(path, f)
		f.Close()
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			if !seen[v.id()] {
				seen[v.id()] = true
				out = append(out, v)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id() < out[j].id() })
	return out, nil
}

type emitted struct {
	v       aotVariant
	target  string
	pkg     string // package directory name under gen/
	key     string
	module  string
	entries string // C entries function
	cfile   string
	c       string
	// bodyFile (under gen/src) and body: the kernel's code, shared by the targets.
	bodyFile string
	body     string
	meta     string
}

var entriesDefine = regexp.MustCompile(`#define loom_host_module_entries (\w+)`)

// generateAOT renders every generated file, by path relative to dir. rebuild compiles every
// CUDA variant with NVRTC instead of reusing the shipped cubins of unchanged variants.
// cacheNote says how many NVRTC compilations the check cache answered ("" when none was
// looked up).
func generateAOT(dir string, rebuild bool) (files map[string][]byte, cacheNote string, err error) {
	variants, err := aotVariants(dir)
	if err != nil {
		return nil, "", err
	}
	type job struct {
		v      aotVariant
		target string
	}
	var jobs []job
	for _, t := range aotTargets {
		for _, v := range variants {
			jobs = append(jobs, job{v, t})
		}
	}
	var cudaJobs []job
	for _, t := range aotCUDATargets {
		for _, v := range variants {
			cudaJobs = append(cudaJobs, job{v, t})
		}
	}
	compiler, compileAll, nvrtcErr := cudaPlan(dir, rebuild)
	if rebuild && nvrtcErr != nil {
		return nil, "", nvrtcErr
	}
	var cache *nvrtcCache
	if nvrtcErr == nil {
		cache = openNVRTCCache()
	}
	sources := map[string][]byte{}
	for _, v := range variants {
		if _, ok := sources[v.file]; !ok {
			b, err := os.ReadFile(filepath.Join(dir, v.file))
			if err != nil {
				return nil, "", fmt.Errorf("variant %s: %w", v.id(), err)
			}
			sources[v.file] = b
		}
	}
	results := make([]emitted, len(jobs))
	cudaResults := make([]cudaEmitted, len(cudaJobs))
	errs := make([]error, len(jobs)+len(cudaJobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i], errs[i] = emitVariant(j.v, j.target, sources[j.v.file])
		}()
	}
	for i, j := range cudaJobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			e, err := emitCUDAVariant(j.v, j.target, sources[j.v.file])
			if err == nil {
				err = fillCUDAImage(dir, &e, compileAll, nvrtcErr, cache)
			}
			cudaResults[i], errs[len(jobs)+i] = e, err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, "", err
		}
	}
	byPkg := map[string][]emitted{}
	for _, e := range results {
		byPkg[e.pkg] = append(byPkg[e.pkg], e)
	}
	out := map[string][]byte{}
	for _, e := range results {
		out[filepath.Join("aot", "gen", "src", e.bodyFile)] = []byte(e.body)
	}
	pkgs := make([]string, 0, len(byPkg))
	for p := range byPkg {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		es := byPkg[p]
		sort.Slice(es, func(i, j int) bool { return es[i].module < es[j].module })
		files, err := renderPackage(p, es)
		if err != nil {
			return nil, "", err
		}
		for name, b := range files {
			out[filepath.Join("aot", "gen", p, name)] = b
		}
	}
	for _, p := range pkgs {
		out[filepath.Join("aot", "gen", p, "BUILD.bazel")] = renderPackageBuild(p)
	}
	byCUDA := map[string][]cudaEmitted{}
	for _, e := range cudaResults {
		byCUDA[e.pkg] = append(byCUDA[e.pkg], e)
	}
	var cudaPkgs []string
	for _, t := range aotCUDATargets {
		p := cudaPackage(t)
		es := byCUDA[p]
		if len(es) == 0 {
			continue
		}
		sort.Slice(es, func(i, j int) bool { return es[i].module < es[j].module })
		files, err := renderCUDAPackage(p, compiler, es)
		if err != nil {
			return nil, "", err
		}
		for name, b := range files {
			out[filepath.Join("aot", "gen", p, name)] = b
		}
		cudaPkgs = append(cudaPkgs, p)
	}
	out[filepath.Join("aot", "all", "BUILD.bazel")] = renderAllBuild(pkgs, cudaPkgs)
	all, err := renderAll(pkgs)
	if err != nil {
		return nil, "", err
	}
	out[filepath.Join("aot", "all", "imports_linux_amd64.go")] = all
	allCUDA, err := renderAllCUDA(cudaPkgs)
	if err != nil {
		return nil, "", err
	}
	out[filepath.Join("aot", "all", "imports_cuda.go")] = allCUDA
	out[filepath.Join("aot", "variants.bzl")] = renderBzl(results)
	return out, cache.note(), nil
}

// emitStatic emits variant v for target with loom.EmitStatic under the module name
// loom.aot.LABEL.STEM.SYMBOL.KEY12, checking that its key is loom.StaticKey's.
func emitStatic(v aotVariant, target, label string, text []byte) (key, module string, sk *loom.StaticKernel, err error) {
	t, err := loom.ParseTarget(target)
	if err != nil {
		return "", "", nil, err
	}
	src := loom.KernelSource{Name: v.file, Source: text, Specialization: loom.Specialization{Symbol: v.symbol, Config: v.config}}
	if key, err = loom.StaticKey(src, t); err != nil {
		return "", "", nil, fmt.Errorf("variant %s: %w", v.id(), err)
	}
	module = fmt.Sprintf("loom.aot.%s.%s.%s.%s", label, strings.TrimSuffix(v.file, ".loom"), v.symbol, key[:12])
	if sk, err = loom.EmitStatic(src, t, module); err != nil {
		return "", "", nil, fmt.Errorf("variant %s for %s: %w", v.id(), target, err)
	}
	if sk.Metadata.Artifact.Key != key {
		return "", "", nil, fmt.Errorf("variant %s: EmitStatic's key %s is not StaticKey's %s", v.id(), sk.Metadata.Artifact.Key, key)
	}
	return key, module, sk, nil
}

func emitVariant(v aotVariant, target string, text []byte) (emitted, error) {
	t, err := loom.ParseTarget(target)
	if err != nil {
		return emitted{}, err
	}
	stem := strings.TrimSuffix(v.file, ".loom")
	level := target[strings.LastIndex(target, "-")+1:]
	key, module, sk, err := emitStatic(v, target, level, text)
	if err != nil {
		return emitted{}, err
	}
	e := emitted{v: v, target: target, pkg: stem + "_" + level, key: key, module: module}
	// Keep the kernel code (between the entries function's renaming and its #undef); the
	// registration goes through Go (native.RegisterHostModule) when a session first needs the
	// variant, so the constructor that would call into the shim before it is initialized is
	// left out. The code is the same for every target (the -march flag differs), so it is
	// written once, by content hash, under gen/src/STEM, and each target's C includes it.
	c := sk.C
	m := entriesDefine.FindStringSubmatchIndex(c)
	cut := strings.Index(c, "#undef loom_host_module_entries\n")
	if m == nil || cut < m[1] {
		return emitted{}, fmt.Errorf("variant %s: unexpected EmitStatic output", v.id())
	}
	e.entries = c[m[2]:m[3]]
	body := strings.TrimPrefix(c[m[1]:cut], "\n")
	body = strings.ReplaceAll(body, strconv.Quote(target), "LOOM_AOT_TARGET")
	body = strings.ReplaceAll(body, target, "LOOM_AOT_TARGET")
	sum := sha256.Sum256([]byte(body))
	e.bodyFile = fmt.Sprintf("%s/%s_%x.h", stem, v.symbol, sum[:6])
	e.body = "/* Code generated by tools/cmd/kernelgen -aot from kernels/" + v.file + "; DO NOT EDIT. */\n" +
		"/* Kernel " + v.symbol + " [" + v.configString() + "], included by the shipped packages' C for each target. */\n" + body
	var opts []string
	// GCCOnlyFlags too: GCC builds the shipped C as the JIT's GCC builds it, and other
	// compilers ignore the pragma.
	for _, f := range append(loom.StaticCFlags(t), loom.GCCOnlyFlags()...) {
		if strings.HasPrefix(f, "-f") {
			opts = append(opts, strconv.Quote(f[2:]))
		}
	}
	e.cfile = fmt.Sprintf("%s_%s.c", v.symbol, key[:12])
	var w strings.Builder
	fmt.Fprintf(&w, "// Code generated by tools/cmd/kernelgen -aot from kernels/%s; DO NOT EDIT.\n\n//go:build linux && amd64 && cgo\n\n", v.file)
	fmt.Fprintf(&w, "/* Kernel %s [%s] for %s (module %q). */\n", v.symbol, v.configString(), target, e.module)
	if len(opts) > 0 {
		// The JIT's code-generation flags that cgo directives do not accept.
		fmt.Fprintf(&w, "#pragma GCC optimize (%s)\n", strings.Join(opts, ", "))
	}
	push, pop := vectorWidthPragma(t)
	fmt.Fprintf(&w, "#include \"loom/loom.h\"\n\n#define LOOM_AOT_TARGET %q\n#define loom_host_module_entries %s\n%s#include \"../src/%s\"\n%s#undef loom_host_module_entries\n", target, e.entries, push, e.bodyFile, pop)
	e.c = w.String()
	meta, err := json.Marshal(sk.Metadata)
	if err != nil {
		return emitted{}, err
	}
	e.meta = string(meta)
	return e, nil
}

const aotHeader = "// Code generated by tools/cmd/kernelgen -aot; DO NOT EDIT.\n\n"

func renderPackage(pkg string, es []emitted) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, e := range es {
		files[e.cfile] = []byte(e.c)
	}
	accessor := "loom_aot_" + pkg + "_entries"
	var t bytes.Buffer
	t.WriteString(aotHeader + "//go:build linux && amd64 && cgo\n\n#include <stdint.h>\n\n#include \"loom/loom.h\"\n\n")
	for _, e := range es {
		fmt.Fprintf(&t, "const loom_host_kernel_entry* %s(uint32_t* count, const char** target);\n", e.entries)
	}
	t.WriteString("\ntypedef const loom_host_kernel_entry* (*loom_aot_entries_fn)(uint32_t*, const char**);\n\n")
	t.WriteString("static const loom_aot_entries_fn loom_aot_table[] = {\n")
	for _, e := range es {
		fmt.Fprintf(&t, "    %s,\n", e.entries)
	}
	t.WriteString("};\n\n")
	fmt.Fprintf(&t, "const loom_host_kernel_entry* %s(int i, uint32_t* count) {\n", accessor)
	fmt.Fprintf(&t, "  const char* target = 0;\n  if (i < 0 || i >= (int)(sizeof loom_aot_table / sizeof loom_aot_table[0])) { *count = 0; return 0; }\n")
	t.WriteString("  return loom_aot_table[i](count, &target);\n}\n")
	files["table.c"] = t.Bytes()

	tgt, _ := loom.ParseTarget(es[0].target)
	var g bytes.Buffer
	g.WriteString(aotHeader + "//go:build linux && amd64 && cgo\n\n")
	fmt.Fprintf(&g, "package %s\n\n", pkg)
	g.WriteString("/*\n#cgo CPPFLAGS: -I${SRCDIR}/../../../../shim/include\n")
	// The flags cgo accepts (the others are a #pragma in each file); -g0: no debug information; -Wno-psabi: the vector ABI notes GCC prints for -march=x86-64-v3 code
	// for the generated code.
	var flags []string
	for _, f := range loom.StaticCFlags(tgt) {
		// cgo refuses -mprefer-vector-width: each file has its effect in a pragma for clang
		// (see vectorWidthPragma), and GCC needs none.
		if !strings.HasPrefix(f, "-f") && !strings.HasPrefix(f, "-mprefer-vector-width=") {
			flags = append(flags, f)
		}
	}
	fmt.Fprintf(&g, "#cgo CFLAGS: %s -g0 -Wno-psabi\n\n", strings.Join(flags, " "))
	fmt.Fprintf(&g, "#include <stdint.h>\n\n#include \"loom/loom.h\"\n\nconst loom_host_kernel_entry* %s(int i, uint32_t* count);\n*/\nimport \"C\"\n\n", accessor)
	fmt.Fprintf(&g, "import (\n\t\"unsafe\"\n\n\t%q\n)\n\n", aotModulePath)
	// The table is strings only, which the linker lays out as data (aot.Entry): no code runs
	// for it at start-up.
	g.WriteString("// hostEntries returns the loom_host_kernel_entry array of table.Entries[i] and its length.\n")
	g.WriteString("func hostEntries(i int) (unsafe.Pointer, int) {\n\tvar n C.uint32_t\n")
	fmt.Fprintf(&g, "\tp := C.%s(C.int(i), &n)\n\treturn unsafe.Pointer(p), int(n)\n}\n\n", accessor)
	g.WriteString("func init() { aot.RegisterTable(&table) }\n\n")
	g.WriteString("var table = aot.Table{HostEntries: hostEntries, Entries: []aot.Entry{\n")
	for _, e := range es {
		fmt.Fprintf(&g, "\t{File: %q, Symbol: %q, Config: %q, Target: %q,\n\t\tKey: %q, Module: %q,\n\t\tMetadata: %s},\n",
			e.v.file, e.v.symbol, aot.FormatConfig(e.v.config), e.target, e.key, e.module, strconv.Quote(e.meta))
	}
	g.WriteString("}}\n")
	src, err := format.Source(g.Bytes())
	if err != nil {
		return nil, fmt.Errorf("package %s: %v", pkg, err)
	}
	files["variants.go"] = src
	files["doc.go"] = []byte(aotHeader + fmt.Sprintf("// Package %s holds the op library's shipped kernels of one file for one target (see\n// package aot).\npackage %s\n", pkg, pkg))
	return files, nil
}

func renderAll(pkgs []string) ([]byte, error) {
	return renderImports("//go:build cgo\n\npackage all\n\nimport (\n", pkgs)
}

// renderImports is a Go file of package all: head (up to "import (") and a blank import of
// each generated package.
func renderImports(head string, pkgs []string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(aotHeader + head)
	for _, p := range pkgs {
		fmt.Fprintf(&b, "\t_ %q\n", aotModulePath+"/gen/"+p)
	}
	b.WriteString(")\n")
	return format.Source(b.Bytes())
}

func renderBzl(es []emitted) []byte {
	sorted := append([]emitted(nil), es...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].module < sorted[j].module })
	var b bytes.Buffer
	b.WriteString("# Code generated by tools/cmd/kernelgen -aot; DO NOT EDIT.\n\n")
	b.WriteString("# The op library's shipped kernel variants (kernels/aot/manifest.txt and corpus.txt), for\n# loom_aot_kernels in //tools:defs.bzl.\n")
	b.WriteString("LOOM_AOT_VARIANTS = [\n")
	for _, e := range sorted {
		cfg := goMapBody(e.v.config)
		fmt.Fprintf(&b, "    struct(name = %q, src = %q, symbol = %q, config = {%s}, target = %q, module = %q, package = %q),\n",
			strings.TrimSuffix(e.cfile, ".c")+"_"+e.target[strings.LastIndex(e.target, "-")+1:], e.v.file, e.v.symbol, cfg, e.target, e.module, e.pkg)
	}
	b.WriteString("]\n")
	return b.Bytes()
}

// runAOT writes (or, with check, compares) the generated files of the shipped kernels.
func runAOT(dir string, check, rebuild bool, stdout io.Writer) error {
	files, cacheNote, err := generateAOT(dir, rebuild)
	if err != nil {
		return err
	}
	if cacheNote != "" {
		fmt.Fprintf(stdout, "kernelgen: NVRTC: %s\n", cacheNote)
	}
	const regen = "run `go generate ./kernels/...` (or `go run ./tools/cmd/kernelgen -aot -dir kernels`)"
	gen := filepath.Join(dir, "aot", "gen")
	if check {
		var stale []string
		for rel, want := range files {
			have, err := os.ReadFile(filepath.Join(dir, rel))
			if err != nil || !bytes.Equal(have, want) {
				stale = append(stale, rel)
			}
		}
		filepath.WalkDir(gen, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(dir, path)
				if _, ok := files[rel]; !ok {
					stale = append(stale, rel+" (not generated)")
				}
			}
			return nil
		})
		if len(stale) > 0 {
			sort.Strings(stale)
			if len(stale) > 10 {
				stale = append(stale[:10], fmt.Sprintf("and %d more", len(stale)-10))
			}
			return fmt.Errorf("the shipped kernels are not current (%s): %s", strings.Join(stale, ", "), regen)
		}
		fmt.Fprintf(stdout, "kernelgen: the shipped kernels are current (%d files)\n", len(files))
		return nil
	}
	if err := os.RemoveAll(gen); err != nil {
		return err
	}
	for rel, b := range files {
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// renderPackageBuild is a generated package's BUILD.bazel: the variants through loom_kernel
// (loom_aot_kernels) and the cgo go_library of its registration (table.c and variants.go; the
// go.work build's C files are not used by Bazel).
func renderPackageBuild(pkg string) []byte {
	return []byte(fmt.Sprintf(`# Code generated by tools/cmd/kernelgen -aot; DO NOT EDIT.

load("//tools:defs.bzl", "go_library", "loom_aot_kernels")

loom_aot_kernels(
    name = "kernels",
    package = %q,
)

go_library(
    name = %q,
    srcs = [
        "doc.go",
        "table.c",
        "variants.go",
    ],
    cdeps = [
        ":kernels",
        "//shim:loom_abi",
    ],
    cgo = True,
    importpath = %q,
    visibility = ["//kernels/aot/all:__pkg__"],
    deps = ["//kernels/aot"],
)
`, pkg, pkg, aotModulePath+"/gen/"+pkg))
}

func renderAllBuild(pkgs, cudaPkgs []string) []byte {
	var b bytes.Buffer
	b.WriteString("# Code generated by tools/cmd/kernelgen -aot; DO NOT EDIT.\n\n")
	b.WriteString("load(\"//tools:defs.bzl\", \"go_library\")\n\n")
	b.WriteString("go_library(\n    name = \"all\",\n    srcs = [\n        \"all.go\",\n        \"imports_cuda.go\",\n        \"imports_linux_amd64.go\",\n    ],\n    cgo = True,\n")
	fmt.Fprintf(&b, "    importpath = %q,\n    visibility = [\"//visibility:public\"],\n    deps = [\n", aotModulePath+"/all")
	for _, p := range append(append([]string(nil), cudaPkgs...), pkgs...) {
		fmt.Fprintf(&b, "        \"//kernels/aot/gen/%s\",\n", p)
	}
	b.WriteString("    ],\n)\n")
	return b.Bytes()
}

// goMapBody spells a configuration as the body of a Go (or Starlark) map literal, keys sorted:
// "K": "v", "L": "w".
func goMapBody(config map[string]string) string {
	keys := make([]string, 0, len(config))
	for k := range config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for j, k := range keys {
		if j > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q: %q", k, config[k])
	}
	return b.String()
}

// vectorWidthPragma returns the lines around a shipped kernel's body that give clang the
// effect of the target's -mprefer-vector-width=N (loom.StaticCFlags), which cgo's CFLAGS
// refuse: every function's minimum legal vector width is N bits, so that clang keeps the
// kernels' N-bit vectors whole (GCC ignores the pragma and needs none). Empty for targets
// without that flag.
func vectorWidthPragma(t loom.Target) (push, pop string) {
	for _, f := range loom.StaticCFlags(t) {
		if w, ok := strings.CutPrefix(f, "-mprefer-vector-width="); ok {
			return "#if defined(__clang__)\n#pragma clang attribute push (__attribute__((min_vector_width(" + w + "))), apply_to = function)\n#endif\n",
				"#if defined(__clang__)\n#pragma clang attribute pop\n#endif\n"
		}
	}
	return "", ""
}
