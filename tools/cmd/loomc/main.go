// Command loomc compiles a Loom kernel ahead of time, for build systems (the loom_kernel rule in
// //tools:defs.bzl):
//
//	loomc --src FILE.loom --symbol NAME --target host-x86_64-v3 [--spec k=v]... --module MODULE \
//	      --out_c OUT.c [--out_meta OUT.json]
//	loomc --src FILE.loom --symbol NAME --target sm_90 [--spec k=v]... --module MODULE \
//	      --out_cuda OUT.cu [--out_meta OUT.json]
//
// For a host target it writes C to link statically: the code the JIT path compiles, with its
// exported symbol renamed after the module and a constructor that registers the module with the
// shim (loom_host_module_register), so a binary runs the kernel with LOOM_MODULE_HOST_STATIC
// and needs no C compiler at run time. For an sm_XX target it writes the CUDA C the JIT path
// hands to NVRTC. The metadata (loom.StaticMetadata as JSON) describes the bindings with their
// access modes, the scalar blob and the launch program, so a runtime can dispatch the kernel
// without the compiler. Compile the C with the flags the metadata's target implies (see
// loom.StaticCFlags).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/loomrt/loom/go/loom"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loomc:", err)
		os.Exit(1)
	}
}

// specFlags collects repeated --spec k=v flags.
type specFlags []string

func (s *specFlags) String() string     { return fmt.Sprint(*s) }
func (s *specFlags) Set(v string) error { *s = append(*s, v); return nil }

// run parses args and writes the requested outputs.
func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("loomc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		src     = fs.String("src", "", "the .loom source file")
		symbol  = fs.String("symbol", "", "the kernel to compile (empty: the file's only kernel)")
		target  = fs.String("target", "", "code target: host-x86_64-v3, host-x86_64-v4, host-aarch64-v8 or sm_XX")
		module  = fs.String("module", "", "module name the kernel registers under (letters, digits, _./-)")
		outC    = fs.String("out_c", "", "host targets: the C file to write")
		outCUDA = fs.String("out_cuda", "", "sm_XX targets: the CUDA C file to write")
		outMeta = fs.String("out_meta", "", "the metadata JSON file to write (optional)")
		spec    specFlags
	)
	fs.Var(&spec, "spec", "specialization key=value (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, req := range []struct{ name, value string }{{"--src", *src}, {"--target", *target}, {"--module", *module}} {
		if req.value == "" {
			return fmt.Errorf("%s is required", req.name)
		}
	}
	t, err := loom.ParseTarget(*target)
	if err != nil {
		return err
	}
	switch {
	case t.Kind == loom.TargetHost && *outC == "":
		return fmt.Errorf("--out_c is required for the host target %s", t)
	case t.Kind == loom.TargetHost && *outCUDA != "":
		return fmt.Errorf("--out_cuda needs an sm_XX target, not %s", t)
	case t.Kind == loom.TargetCUDA && *outCUDA == "":
		return fmt.Errorf("--out_cuda is required for the CUDA target %s", t)
	case t.Kind == loom.TargetCUDA && *outC != "":
		return fmt.Errorf("--out_c needs a host target, not %s", t)
	}
	config, err := loom.ParseSpec(spec)
	if err != nil {
		return err
	}
	ks, err := loom.ReadSource(*src, *symbol, config)
	if err != nil {
		return err
	}
	sk, err := loom.EmitStatic(ks, t, *module)
	if err != nil {
		return err
	}
	if *outC != "" {
		if err := writeFile(*outC, []byte(sk.C)); err != nil {
			return err
		}
	}
	if *outCUDA != "" {
		if err := writeFile(*outCUDA, []byte(sk.CUDA)); err != nil {
			return err
		}
	}
	if *outMeta != "" {
		meta, err := json.MarshalIndent(sk.Metadata, "", "  ")
		if err != nil {
			return err
		}
		if err := writeFile(*outMeta, append(meta, '\n')); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes data to path through a temporary file, so a failed run leaves no partial
// output for a build system to mistake for a result.
func writeFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".loomc-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(f.Name(), 0o644)
	}
	if werr == nil {
		werr = os.Rename(f.Name(), path)
	}
	if werr != nil {
		return errors.Join(werr, os.Remove(f.Name()))
	}
	return nil
}
