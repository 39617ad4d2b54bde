package epcontext

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/loomrt/loom/go/graph"
)

// The file helpers of EP context models: writing the context model and its blob file, and
// finding the blob file a context model names.

// SameFile reports whether a and b name the same existing file (or the same path).
func SameFile(a, b string) bool {
	if fa, err := os.Stat(a); err == nil {
		if fb, err := os.Stat(b); err == nil {
			return os.SameFile(fa, fb)
		}
	}
	aa, err1 := filepath.Abs(a)
	ab, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == ab
}

// WriteFileAtomic writes data to a temporary file beside path and renames it over path, so a
// reader never sees a half-written file.
func WriteFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// SameInterface checks that the context model declares the inputs (initializers aside) and
// outputs of the graph in its blob, in order.
func SameInterface(ctxGraph, g *graph.Graph) error {
	names := func(vs []*graph.Value, skipInit bool, inits map[string]*graph.Tensor) []string {
		var out []string
		for _, v := range vs {
			if skipInit && (v.Initializer != nil || inits[v.Name] != nil) {
				continue
			}
			out = append(out, v.Name)
		}
		return out
	}
	if a, b := names(ctxGraph.Inputs, true, ctxGraph.Initializers), names(g.Inputs, true, g.Initializers); !equalStrings(a, b) {
		return fmt.Errorf("the context model's inputs %v differ from its blob graph's %v", a, b)
	}
	if a, b := names(ctxGraph.Outputs, false, nil), names(g.Outputs, false, nil); !equalStrings(a, b) {
		return fmt.Errorf("the context model's outputs %v differ from its blob graph's %v", a, b)
	}
	return nil
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ResolveInside returns the path of name inside dir. As ONNX Runtime does for an EPContext
// blob file, an absolute name, one with ".." leading out of dir, or a symlink leading out of
// it is refused.
func ResolveInside(dir, name string) (string, error) {
	if name == "" {
		return "", errors.New("empty file name")
	}
	if strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("file name %q contains NUL", name)
	}
	if filepath.IsAbs(name) || strings.HasPrefix(name, "/") || strings.HasPrefix(name, `\`) {
		return "", fmt.Errorf("file name %q is absolute; it must be relative to the context model's directory", name)
	}
	clean := filepath.Clean(filepath.FromSlash(name))
	escapes := func(p string) bool { return p == ".." || strings.HasPrefix(p, ".."+string(filepath.Separator)) }
	if escapes(clean) || clean == "." {
		return "", fmt.Errorf("file name %q escapes the context model's directory %s", name, dir)
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("context model directory: %w", err)
	}
	full, err := filepath.EvalSymlinks(filepath.Join(root, clean))
	if err != nil {
		return "", fmt.Errorf("blob file %q: %w", name, err)
	}
	if rel, err := filepath.Rel(root, full); err != nil || escapes(rel) {
		return "", fmt.Errorf("file name %q escapes the context model's directory %s (through a symbolic link)", name, dir)
	}
	return full, nil
}
