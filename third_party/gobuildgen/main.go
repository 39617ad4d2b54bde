// Command gobuildgen writes Bazel BUILD files for the packages of one
// external Go module, in the gazelle style (one go_library per package, named
// after its directory, with go_default_library aliases), for
// //third_party:go_module.bzl to copy into the module's repository.
//
// It lists the module's packages with `go list -json` in a scratch module that
// requires module@version, so the module comes from the Go module proxy like
// any other dependency. Sources are every .go file of a package except tests,
// whatever their build constraints (rules_go applies those at build time),
// and deps are the imports of all those files. A package importing a module
// not named with -dep, or depending on such a package, gets no BUILD file;
// MANIFEST lists the skipped packages with the reason. A -dep module nested
// in the module's path (go.opentelemetry.io/otel/trace in
// go.opentelemetry.io/otel) is another repository: its packages get its labels.
//
// Run from the repository root, for example:
//
//	GOWORK=off go run third_party/gobuildgen/main.go \
//	    -module google.golang.org/protobuf -version v1.36.12 \
//	    -out third_party/go_modules/org_golang_google_protobuf
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// listedPackage holds the fields of `go list -json` output that are used.
type listedPackage struct {
	Dir               string
	ImportPath        string
	Name              string
	GoFiles           []string
	CgoFiles          []string
	IgnoredGoFiles    []string
	CFiles            []string
	CXXFiles          []string
	SFiles            []string
	HFiles            []string
	IgnoredOtherFiles []string
	EmbedFiles        []string
	Module            *struct{ Path string }
}

// target is one package's BUILD file content before rendering.
type target struct {
	dir        string // relative to the module root, "." for the root
	importPath string
	name       string
	isCommand  bool
	srcs       []string
	embedSrcs  []string
	cgo        bool
	imports    []string // non-standard imports
	skipReason string
}

func main() {
	module := flag.String("module", "", "module path, e.g. google.golang.org/protobuf")
	version := flag.String("version", "", "module version, e.g. v1.36.12")
	out := flag.String("out", "", "directory to write MANIFEST and the BUILD.in files into")
	var deps depFlag
	flag.Var(&deps, "dep", "module=repository: another module's packages become @repository//dir labels (repeatable)")
	flag.Parse()
	if *module == "" || *version == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: gobuildgen -module PATH -version VERSION -out DIR [-dep MODULE=REPO]...")
		os.Exit(2)
	}
	if err := run(*module, *version, *out, deps); err != nil {
		fmt.Fprintln(os.Stderr, "gobuildgen:", err)
		os.Exit(1)
	}
}

// depFlag maps module paths to the names of their Bazel repositories.
type depFlag map[string]string

func (d *depFlag) String() string { return fmt.Sprint(map[string]string(*d)) }

func (d *depFlag) Set(value string) error {
	module, repo, ok := strings.Cut(value, "=")
	if !ok || module == "" || repo == "" {
		return fmt.Errorf("-dep %q: want MODULE=REPOSITORY", value)
	}
	if *d == nil {
		*d = map[string]string{}
	}
	(*d)[module] = repo
	return nil
}

func run(module, version, out string, deps depFlag) error {
	packages, err := listPackages(module, version)
	if err != nil {
		return err
	}
	targets := map[string]*target{}
	for _, pkg := range packages {
		t, err := newTarget(module, pkg)
		if err != nil {
			return err
		}
		if t != nil {
			targets[t.importPath] = t
		}
	}
	markUnbuildable(module, targets, deps)
	return writeOutput(module, version, out, targets, deps)
}

// listPackages runs `go list -json module/...` in a scratch module.
func listPackages(module, version string) ([]listedPackage, error) {
	scratch, err := os.MkdirTemp("", "gobuildgen-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	goMod := fmt.Sprintf("module gobuildgen.invalid/scratch\n\ngo 1.21\n\nrequire %s %s\n", module, version)
	if err := os.WriteFile(filepath.Join(scratch, "go.mod"), []byte(goMod), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command("go", "list", "-e", "-json", module+"/...")
	cmd.Dir = scratch
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go list %s@%s: %v\n%s", module, version, err, stderr.String())
	}
	var packages []listedPackage
	decoder := json.NewDecoder(&stdout)
	for {
		var pkg listedPackage
		if err := decoder.Decode(&pkg); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decoding go list output: %v", err)
		}
		if pkg.Module != nil && pkg.Module.Path == module {
			packages = append(packages, pkg)
		}
	}
	if len(packages) == 0 {
		return nil, fmt.Errorf("go list found no packages in %s@%s", module, version)
	}
	return packages, nil
}

// newTarget collects a package's sources and imports; it returns nil for a
// directory with no non-test Go files.
func newTarget(module string, pkg listedPackage) (*target, error) {
	dir := strings.TrimPrefix(strings.TrimPrefix(pkg.ImportPath, module), "/")
	if dir == "" {
		dir = "."
	}
	t := &target{dir: dir, importPath: pkg.ImportPath, name: targetName(pkg.ImportPath)}
	imports := map[string]bool{}
	var candidates []string
	candidates = append(candidates, pkg.GoFiles...)
	candidates = append(candidates, pkg.CgoFiles...)
	candidates = append(candidates, pkg.IgnoredGoFiles...)
	// Files the go command leaves out on this host (other operating systems) stay in srcs, as
	// rules_go filters by build constraint, but their imports do not become deps: only Linux is
	// supported, and packages such as x/sys/windows have no BUILD file here.
	hostFiles := map[string]bool{}
	for _, name := range append(append([]string{}, pkg.GoFiles...), pkg.CgoFiles...) {
		hostFiles[name] = true
	}
	packageName := ""
	for _, name := range candidates {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(pkg.Dir, name), nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %v", pkg.ImportPath+"/"+name, err)
		}
		if isIgnored(file.Comments, file.Package) {
			continue
		}
		if packageName == "" {
			packageName = file.Name.Name
		} else if file.Name.Name != packageName {
			// A generator or example in the same directory.
			continue
		}
		t.srcs = append(t.srcs, name)
		if !hostFiles[name] {
			continue
		}
		for _, spec := range file.Imports {
			importPath, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return nil, err
			}
			if importPath == "C" {
				t.cgo = true
				continue
			}
			if !isStandard(importPath) {
				imports[importPath] = true
			}
		}
	}
	if len(t.srcs) == 0 {
		return nil, nil
	}
	t.isCommand = packageName == "main"
	// Non-Go sources for every platform, like the Go files: rules_go picks
	// the ones for the target by file name and build constraint. C and C++
	// files count only in cgo packages (in others they are for gccgo), and
	// rules_go rejects them without cgo.
	for _, files := range [][]string{pkg.CFiles, pkg.CXXFiles, pkg.SFiles, pkg.HFiles, pkg.IgnoredOtherFiles} {
		for _, name := range files {
			ext := path.Ext(name)
			if isSourceExtension(ext) && (t.cgo || ext == ".s" || ext == ".S" || ext == ".h") {
				t.srcs = append(t.srcs, name)
			}
		}
	}
	sort.Strings(t.srcs)
	t.embedSrcs = append(t.embedSrcs, pkg.EmbedFiles...)
	sort.Strings(t.embedSrcs)
	for importPath := range imports {
		t.imports = append(t.imports, importPath)
	}
	sort.Strings(t.imports)
	return t, nil
}

// isIgnored reports whether a file's build constraint (in the comments before
// its package clause) uses the "ignore" tag, which marks files that are never
// part of the package, such as generators.
func isIgnored(comments []*ast.CommentGroup, packagePos token.Pos) bool {
	for _, group := range comments {
		if group.Pos() >= packagePos {
			break
		}
		for _, comment := range group.List {
			if !constraint.IsGoBuild(comment.Text) && !constraint.IsPlusBuild(comment.Text) {
				continue
			}
			expr, err := constraint.Parse(comment.Text)
			if err != nil {
				continue
			}
			mentionsIgnore := false
			expr.Eval(func(tag string) bool {
				if tag == "ignore" {
					mentionsIgnore = true
				}
				return false
			})
			if mentionsIgnore {
				return true
			}
		}
	}
	return false
}

// isSourceExtension reports whether a non-Go file with this extension belongs
// in a go_library's srcs.
func isSourceExtension(ext string) bool {
	switch ext {
	case ".s", ".S", ".h", ".c", ".cc", ".cpp", ".cxx", ".hh", ".hpp", ".hxx":
		return true
	}
	return false
}

// isStandard reports whether importPath belongs to the standard library: its
// first element has no dot.
func isStandard(importPath string) bool {
	first, _, _ := strings.Cut(importPath, "/")
	return !strings.Contains(first, ".")
}

// targetName is gazelle's name for a package: its last path element, with
// characters that labels dislike turned into underscores (gopkg.in/yaml.v3
// becomes yaml_v3).
func targetName(importPath string) string {
	name := path.Base(importPath)
	return strings.NewReplacer(".", "_", "-", "_").Replace(name)
}

// markUnbuildable sets skipReason on targets importing modules that have no
// repository, and then on everything that depends on a skipped target.
func markUnbuildable(module string, targets map[string]*target, deps depFlag) {
	for _, t := range targets {
		for _, importPath := range t.imports {
			if ownPackage(importPath, module, deps) {
				if targets[importPath] == nil {
					t.skipReason = "imports " + importPath + ", which has no buildable files"
				}
				continue
			}
			if _, ok := externalModule(importPath, deps); !ok {
				t.skipReason = "imports " + importPath + " from a module with no repository (-dep)"
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for _, t := range targets {
			if t.skipReason != "" {
				continue
			}
			for _, importPath := range t.imports {
				if dep := targets[importPath]; dep != nil && dep.skipReason != "" {
					t.skipReason = "depends on " + importPath + ", which is skipped"
					changed = true
					break
				}
			}
		}
	}
}

func isInModule(importPath, module string) bool {
	return importPath == module || strings.HasPrefix(importPath, module+"/")
}

// ownPackage reports whether importPath is a package of module itself rather than of a
// module nested inside it (go.opentelemetry.io/otel/trace inside go.opentelemetry.io/otel),
// which a longer -dep names.
func ownPackage(importPath, module string, deps depFlag) bool {
	if !isInModule(importPath, module) {
		return false
	}
	other, ok := externalModule(importPath, deps)
	return !ok || len(other) <= len(module)
}

// externalModule returns the longest -dep module that contains importPath.
func externalModule(importPath string, deps depFlag) (string, bool) {
	best := ""
	for module := range deps {
		if isInModule(importPath, module) && len(module) > len(best) {
			best = module
		}
	}
	return best, best != ""
}

// label returns the gazelle-style label of an imported package.
func label(importPath, module string, deps depFlag) string {
	repo := ""
	if !ownPackage(importPath, module, deps) {
		module, _ = externalModule(importPath, deps)
		repo = "@" + deps[module]
	}
	dir := strings.TrimPrefix(strings.TrimPrefix(importPath, module), "/")
	name := targetName(importPath)
	if dir == "" {
		return repo + "//:" + name
	}
	if path.Base(dir) == name {
		return repo + "//" + dir
	}
	return repo + "//" + dir + ":" + name
}

// visibility follows Go's internal-package rule, as gazelle does. The packages allowed to
// import an internal package include those of -dep modules nested below its parent
// (go.opentelemetry.io/otel/sdk may import go.opentelemetry.io/otel/internal/global), whose
// repositories are listed too.
func visibility(module, dir string, deps depFlag) []string {
	elements := strings.Split(dir, "/")
	for i := len(elements) - 1; i >= 0; i-- {
		if elements[i] == "internal" {
			parent := strings.Join(elements[:i], "/")
			out := []string{"//" + parent + ":__subpackages__"}
			parentPath := module
			if parent != "" {
				parentPath += "/" + parent
			}
			var nested []string
			for other, repo := range deps {
				if other != module && isInModule(other, parentPath) {
					nested = append(nested, "@"+repo+"//:__subpackages__")
				}
			}
			sort.Strings(nested)
			return append(out, nested...)
		}
	}
	return []string{"//visibility:public"}
}

func writeOutput(module, version, out string, targets map[string]*target, deps depFlag) error {
	// Start from an empty tree so that packages the module dropped vanish.
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	var built, skipped []*target
	for _, t := range targets {
		if t.skipReason != "" {
			skipped = append(skipped, t)
		} else {
			built = append(built, t)
		}
	}
	sort.Slice(built, func(i, j int) bool { return built[i].dir < built[j].dir })
	sort.Slice(skipped, func(i, j int) bool { return skipped[i].dir < skipped[j].dir })

	var manifest strings.Builder
	fmt.Fprintf(&manifest, "# Code generated by third_party/gobuildgen for %s %s; DO NOT EDIT.\n", module, version)
	manifest.WriteString("# Package directories with a BUILD.in, one a line.\n")
	for _, t := range skipped {
		fmt.Fprintf(&manifest, "# skipped %s: %s\n", t.dir, t.skipReason)
	}
	for _, t := range built {
		manifest.WriteString(t.dir + "\n")
		dir := filepath.Join(out, filepath.FromSlash(t.dir))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		content := renderBuild(module, version, t, deps)
		if err := os.WriteFile(filepath.Join(dir, "BUILD.in"), []byte(content), 0o644); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "MANIFEST"), []byte(manifest.String()), 0o644)
}

func renderBuild(module, version string, t *target, deps depFlag) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Code generated by third_party/gobuildgen for %s %s; DO NOT EDIT.\n", module, version)
	kind := "go_library"
	if t.isCommand {
		kind = "go_binary"
	}
	fmt.Fprintf(&b, "load(\"@io_bazel_rules_go//go:def.bzl\", %q)\n\n", kind)
	fmt.Fprintf(&b, "%s(\n", kind)
	fmt.Fprintf(&b, "    name = %q,\n", t.name)
	writeList(&b, "srcs", t.srcs)
	if t.cgo {
		b.WriteString("    cgo = True,\n")
	}
	writeList(&b, "embedsrcs", t.embedSrcs)
	if !t.isCommand {
		fmt.Fprintf(&b, "    importpath = %q,\n", t.importPath)
	}
	writeList(&b, "visibility", visibility(module, t.dir, deps))
	var labels []string
	for _, importPath := range t.imports {
		labels = append(labels, label(importPath, module, deps))
	}
	sort.Strings(labels)
	writeList(&b, "deps", labels)
	b.WriteString(")\n")
	if !t.isCommand {
		fmt.Fprintf(&b, "\nalias(\n    name = \"go_default_library\",\n    actual = \":%s\",\n", t.name)
		writeList(&b, "visibility", visibility(module, t.dir, deps))
		b.WriteString(")\n")
	}
	return b.String()
}

func writeList(b *strings.Builder, attr string, values []string) {
	switch len(values) {
	case 0:
	case 1:
		fmt.Fprintf(b, "    %s = [%q],\n", attr, values[0])
	default:
		fmt.Fprintf(b, "    %s = [\n", attr)
		for _, v := range values {
			fmt.Fprintf(b, "        %q,\n", v)
		}
		b.WriteString("    ],\n")
	}
}
