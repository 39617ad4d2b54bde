package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/native"
)

func init() {
	register("version", "print loom's version, its modules, Go, the kernel compiler and the backends found", versionMain)
}

// versionInfo is what `loom version` reports; the backend lines are probed on this machine.
type versionInfo struct {
	version  string            // the module version of the loom command, or "devel"
	revision string            // the VCS revision it was built from, when Go recorded one
	modules  map[string]string // Loom's other modules: path -> version (or "devel" when replaced)
}

// buildVersion reads the build information Go embeds in the binary (`go version -m loom`).
func buildVersion() versionInfo {
	v := versionInfo{version: "devel", modules: map[string]string{}}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v.version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.revision = s.Value
		case "vcs.modified":
			if s.Value == "true" && v.revision != "" {
				v.revision += " (modified)"
			}
		}
	}
	for _, d := range bi.Deps {
		if !strings.HasPrefix(d.Path, "github.com/loomrt/loom/") {
			continue
		}
		ver := d.Version
		if d.Replace != nil {
			ver = "devel (" + d.Replace.Path + ")"
			if d.Replace.Version != "" {
				ver = d.Replace.Version
			}
		}
		if ver == "" || ver == "(devel)" {
			ver = "devel"
		}
		v.modules[d.Path] = ver
	}
	return v
}

// versionMain implements `loom version`.
func versionMain(args []string, stdout, stderr io.Writer) int {
	c := newCommand("version", "version",
		"Prints loom's module version (\"devel\" when built from a work tree without one), the versions of\n"+
			"Loom's modules it was built with, Go's version, the Loom kernel compiler's version and host\n"+
			"target, and the backends the shim finds on this machine.", stdout, stderr)
	pos, rc := c.parse(args)
	if rc >= 0 {
		return rc
	}
	if len(pos) != 0 {
		return c.usageError("takes no arguments, got %q", pos)
	}
	v := buildVersion()
	line := "loom " + v.version
	if v.revision != "" {
		line += ", commit " + v.revision
	}
	fmt.Fprintln(stdout, line)
	for _, m := range sortedKeys(v.modules) {
		fmt.Fprintf(stdout, "module   %s %s\n", m, v.modules[m])
	}
	fmt.Fprintf(stdout, "go       %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(stdout, "compiler %s (Loom kernels), host target %s\n", loom.CompilerVersion, loom.HostTarget())
	for _, b := range []native.Backend{native.BackendHost, native.BackendCUDA} {
		n, err := native.Devices(b)
		if err != nil {
			fmt.Fprintf(stdout, "backend  %s: unavailable: %v\n", b, err)
			continue
		}
		fmt.Fprintf(stdout, "backend  %s: %d device(s)\n", b, n)
	}
	if nvrtc, err := native.CUDACompiler(); err == nil {
		fmt.Fprintf(stdout, "nvrtc    %s\n", nvrtc)
	} else {
		fmt.Fprintf(stdout, "nvrtc    unavailable: %v\n", err)
	}
	return exitOK
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
