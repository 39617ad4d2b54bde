package main

import (
	"context"
	"fmt"
	"io"
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
func compileKernel(args []string, stdout, stderr io.Writer) int {
	c := newCommand("compile", "compile FILE.loom [--target T] [--symbol NAME] [--spec k=v]... [--emit c|cuda|ir] [--build]",
		"Compiles one kernel of a .loom file (docs/loom.md) and prints the host C, the CUDA C or the IR;\ncompile errors print as file:line:col: message (exit 1).", stdout, stderr)
	target := c.String("target", loom.HostTarget().String(), "code target: host-<arch>-<level> or sm_XX")
	symbol := c.String("symbol", "", "kernel to compile (needed when the file declares several)")
	emit := c.String("emit", "", "what to print: c, cuda or ir (default: the target's code)")
	build := c.Bool("build", false, "also build the artifact through the cache and print its summary")
	var spec specList
	c.Var(&spec, "spec", "specialization constant key=value (repeatable)")
	pos, rc := c.parse(args)
	if rc >= 0 {
		return rc
	}
	if len(pos) != 1 {
		return c.usageError("want one FILE.loom, got %d arguments", len(pos))
	}
	t, err := loom.ParseTarget(*target)
	if err != nil {
		return c.badArgument("%v", err)
	}
	if err := checkFile("kernel source", pos[0]); err != nil {
		return c.badArgument("%v", err)
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
			fmt.Fprintln(stderr, err)
			return exitFailure
		}
		if len(names) != 1 {
			return c.badArgument("%s declares %d kernels (%s): choose one with --symbol",
				pos[0], len(names), strings.Join(names, ", "))
		}
		*symbol = names[0]
	}
	comp := loom.NewCompiler(loom.Config{})
	defer comp.Close()
	text, _, err := comp.CompileFile(context.Background(), pos[0], *symbol, *target, spec, kind)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitFailure
	}
	fmt.Fprint(stdout, text)
	if *build {
		_, art, err := comp.CompileFile(context.Background(), pos[0], *symbol, *target, spec, "")
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitFailure
		}
		st := comp.Stats()
		fmt.Fprintf(stderr, "built %s for %s (cache %s: %d hits, %d misses)\n",
			art.Kernel, art.Target, comp.CacheDir(), st.Hits, st.Misses)
	}
	return exitOK
}

// kernelsIn lists the kernels a file declares.
func kernelsIn(path string) ([]string, error) {
	src, err := loom.ReadSource(path, "", nil)
	if err != nil {
		return nil, err
	}
	return loom.Kernels(src)
}
