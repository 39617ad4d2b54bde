// Package kernels is Loom's op library: the .loom sources of every kernel that InferenceSession's
// planners launch, embedded in the binary, and the op codes those kernels branch on (generated
// from the sources' file constants into opcodes.go; see doc.go).
//
// The sources are the single home of the op library: go/session plans launches against them,
// the Bazel loom_kernel rules and the go.work build compile them ahead of time, and the JIT
// compiles shape-specialized variants of them at run time.
package kernels

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
)

//go:generate go run github.com/loomrt/loom/tools/cmd/kernelgen -dir .

//go:embed *.loom
var files embed.FS

// FS is the op library's sources, one .loom file per family of kernels, at the root.
var FS fs.FS = files

// Source returns the text of the library file name ("elementwise.loom").
func Source(name string) ([]byte, error) {
	b, err := files.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("kernels: no op library file %q", name)
	}
	return b, nil
}

// Files lists the library's files in sorted order.
func Files() []string {
	entries, _ := files.ReadDir(".")
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}
