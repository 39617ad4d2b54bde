package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/loomrt/loom/go/loom"
)

func init() {
	register("compile", "compile a .loom kernel; print the generated code, the IR or the errors", compileKernel)
}

// specList collects repeated --spec k=v flags.
type specList []string

func (s *specList) String() string     { return strings.Join(*s, ",") }
func (s *specList) Set(v string) error { *s = append(*s, v); return nil }

// compileKernel implements `loom compile FILE.loom --target T [--spec k=v]... [--symbol NAME]
// [--emit c|cuda|ir]`. Without --emit it prints the code for the target's backend (host C or
// CUDA C); compile errors are printed one per line as file:line:col: message.
func compileKernel(args []string) int {
	fs := flag.NewFlagSet("compile", flag.ContinueOnError)
	target := fs.String("target", loom.HostTarget().String(), "code target: host-<arch>-<level> or sm_XX")
	symbol := fs.String("symbol", "", "kernel to compile (needed when the file declares several)")
	emit := fs.String("emit", "", "what to print: c, cuda or ir (default: the target's code)")
	build := fs.Bool("build", false, "also build the artifact through the cache and print its summary")
	var spec specList
	fs.Var(&spec, "spec", "specialization constant key=value (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: loom compile FILE.loom [--target T] [--symbol NAME] [--spec k=v]... [--emit c|cuda|ir] [--build]")
		fs.PrintDefaults()
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 1 {
		fs.Usage()
		return 2
	}
	t, err := loom.ParseTarget(*target)
	if err != nil {
		fmt.Fprintf(os.Stderr, "loom compile: %v\n", err)
		return 2
	}
	kind := loom.EmitKind(*emit)
	if kind == "" {
		kind = loom.EmitC
		if t.Kind == loom.TargetCUDA {
			kind = loom.EmitCUDA
		}
	}
	if *symbol == "" {
		names, err := kernelsIn(pos[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if len(names) != 1 {
			fmt.Fprintf(os.Stderr, "loom compile: %s declares %d kernels (%s): choose one with --symbol\n",
				pos[0], len(names), strings.Join(names, ", "))
			return 2
		}
		*symbol = names[0]
	}
	c := loom.NewCompiler(loom.Config{})
	defer c.Close()
	text, _, err := c.CompileFile(context.Background(), pos[0], *symbol, *target, spec, kind)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Print(text)
	if *build {
		_, art, err := c.CompileFile(context.Background(), pos[0], *symbol, *target, spec, "")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		st := c.Stats()
		fmt.Fprintf(os.Stderr, "built %s for %s (cache %s: %d hits, %d misses)\n",
			art.Kernel, art.Target, c.CacheDir(), st.Hits, st.Misses)
	}
	return 0
}

// kernelsIn lists the kernels a file declares.
func kernelsIn(path string) ([]string, error) {
	src, err := loom.ReadSource(path, "", nil)
	if err != nil {
		return nil, err
	}
	return loom.Kernels(src)
}
