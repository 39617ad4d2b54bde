package types_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom/codegen"
	"github.com/loomrt/loom/go/loom/ir"
	"github.com/loomrt/loom/go/loom/parser"
	"github.com/loomrt/loom/go/loom/passes"
	"github.com/loomrt/loom/go/loom/scanner"
	"github.com/loomrt/loom/go/loom/types"
)

// FuzzCheck parses and checks arbitrary sources. Neither may panic, diagnostics must be sorted
// file:line:col errors, and every kernel that checks cleanly must also go through the IR
// builder, the passes and both code generators without an internal error.
func FuzzCheck(f *testing.F) {
	for _, pat := range []string{"../../../kernels/*.loom", "../testdata/kernels/*.loom", "testdata/*.loom", "../parser/testdata/*.loom"} {
		files, err := filepath.Glob(pat)
		require.NoError(f, err)
		for _, p := range files {
			data, err := os.ReadFile(p)
			require.NoError(f, err)
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		file, err := parser.ParseFile("fuzz.loom", src)
		if err != nil {
			return
		}
		if err := types.CheckAll(file); err != nil {
			var el scanner.ErrorList
			if !errors.As(err, &el) {
				t.Fatalf("error is not an ErrorList: %v", err)
			}
			for i := 1; i < len(el); i++ {
				if el[i].Pos.Pos.Before(el[i-1].Pos.Pos) {
					t.Fatalf("unsorted diagnostics: %v", el)
				}
			}
			return
		}
		for _, name := range types.Kernels(file) {
			k, err := types.Check(file, name, nil)
			if err != nil {
				continue // a redeclared kernel
			}
			compile(t, k)
		}
	})
}

// compile takes a checked kernel through the rest of the compiler; user errors (an unroll
// whose bounds did not fold) are fine, internal errors are not.
func compile(t *testing.T, k *types.Kernel) {
	fn, l, err := ir.Build(k)
	internal := func(err error) {
		if err != nil && strings.Contains(err.Error(), "internal error") {
			t.Fatalf("%s: %v", k.Name, err)
		}
	}
	internal(err)
	if err != nil {
		return
	}
	passes.OptimizeLaunch(l)
	if _, err := passes.Optimize(fn, nil); err != nil {
		internal(err)
		return
	}
	if _, err := ir.FlattenLaunch(l); err != nil {
		t.Fatalf("%s: launch program: %v", k.Name, err)
	}
	ck := &codegen.Kernel{Symbol: k.Name, Func: fn, Target: "host-x86_64-v3"}
	var scalars []*types.Basic
	for i, p := range k.Params {
		switch pt := p.Type.(type) {
		case *types.Buffer:
			ck.Buffers = append(ck.Buffers, codegen.Buffer{Name: p.Name, Elem: pt.Elem, Access: pt.Access, Binding: p.Binding, Value: fn.Params[i]})
		case *types.Basic:
			scalars = append(scalars, pt)
		}
	}
	offs, sb, _, _ := codegen.Layout(scalars, len(ck.Buffers), false)
	j := 0
	for i, p := range k.Params {
		if pt, ok := p.Type.(*types.Basic); ok {
			ck.Scalars = append(ck.Scalars, codegen.Scalar{Name: p.Name, Type: pt, Offset: offs[j], Value: fn.Params[i]})
			j++
		}
	}
	ck.ScalarBytes = sb
	for _, lang := range []*codegen.Language{codegen.Host, codegen.CUDA} {
		if _, err := codegen.Emit(ck, lang); err != nil {
			t.Fatalf("%s (%s): %v", k.Name, lang.Name, err)
		}
	}
}
