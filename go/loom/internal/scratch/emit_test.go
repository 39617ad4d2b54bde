package scratch

import (
	"os"
	"os/exec"
	"testing"

	"github.com/loomrt/loom/go/loom/codegen"
	"github.com/loomrt/loom/go/loom/ir"
	"github.com/loomrt/loom/go/loom/parser"
	"github.com/loomrt/loom/go/loom/passes"
	"github.com/loomrt/loom/go/loom/types"
)

func TestEmit(t *testing.T) {
	f, err := parser.ParseFile("x.loom", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fill", "sgemm"} {
		k, err := types.Check(f, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		fn, l, err := ir.Build(k)
		if err != nil {
			t.Fatal(err)
		}
		passes.OptimizeLaunch(l)
		st, err := passes.Optimize(fn, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %+v", name, st)
		if name == "fill" {
			t.Log(l.String())
			t.Log(fn.String())
		}
		ck := &codegen.Kernel{Symbol: name, Func: fn, Target: "host-x86_64-v4"}
		var sc []*types.Basic
		for i, p := range k.Params {
			if bt, ok := p.Type.(*types.Buffer); ok {
				ck.Buffers = append(ck.Buffers, codegen.Buffer{Name: p.Name, Elem: bt.Elem, Access: bt.Access, Binding: p.Binding, Value: fn.Params[i]})
			} else {
				sc = append(sc, p.Type.(*types.Basic))
			}
		}
		offs, sb, _, _ := codegen.Layout(sc, len(ck.Buffers), false)
		j := 0
		for i, p := range k.Params {
			if bt, ok := p.Type.(*types.Basic); ok {
				ck.Scalars = append(ck.Scalars, codegen.Scalar{Name: p.Name, Type: bt, Offset: offs[j], Value: fn.Params[i]})
				j++
			}
		}
		ck.ScalarBytes = sb
		c, err := codegen.Emit(ck, codegen.Host)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile("/tmp/scratch/"+name+".c", []byte(c), 0o644)
		out, err := exec.Command("gcc", "-O3", "-march=x86-64-v4", "-fPIC", "-shared", "-fwrapv", "-Wall", "-o", "/tmp/scratch/"+name+".so", "/tmp/scratch/"+name+".c", "-lm").CombinedOutput()
		if err != nil {
			t.Fatalf("%s\n%s", err, out)
		}
		t.Logf("%s", out)
	}
}
