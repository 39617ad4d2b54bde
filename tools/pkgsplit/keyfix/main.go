// Command keyfix keys the unkeyed two-field literals (NamedValue, NamedTensor, ValueType) of the
// files named: after a split moves those types to another package, go vet wants them keyed.
package main

import (
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"sort"
)

var keys = map[string][2]string{"NamedValue": {"Name: ", "Value: "}, "NamedTensor": {"Name: ", "Tensor: "}, "ValueType": {"Dtype: ", "Shape: "}}

func name(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.ArrayType:
		return "[]" + name(e.Elt)
	}
	return ""
}

func main() {
	for _, fn := range os.Args[1:] {
		src, _ := os.ReadFile(fn)
		fs := token.NewFileSet()
		f, err := parser.ParseFile(fs, fn, src, parser.ParseComments)
		if err != nil {
			panic(err)
		}
		type ins struct {
			off  int
			text string
		}
		var is []ins
		var visit func(n ast.Node, elem string)
		fix := func(cl *ast.CompositeLit, t string) {
			if k, ok := keys[t]; ok && len(cl.Elts) == 2 {
				if _, kv := cl.Elts[0].(*ast.KeyValueExpr); !kv {
					is = append(is, ins{fs.Position(cl.Elts[0].Pos()).Offset, k[0]}, ins{fs.Position(cl.Elts[1].Pos()).Offset, k[1]})
				}
			}
		}
		visit = func(n ast.Node, elem string) {}
		_ = visit
		ast.Inspect(f, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			t := name(cl.Type)
			fix(cl, t)
			if len(t) > 2 && t[:2] == "[]" {
				for _, e := range cl.Elts {
					if c, ok := e.(*ast.CompositeLit); ok && c.Type == nil {
						fix(c, t[2:])
					}
				}
			}
			return true
		})
		sort.Slice(is, func(i, j int) bool { return is[i].off > is[j].off })
		for _, x := range is {
			src = append(src[:x.off], append([]byte(x.text), src[x.off:]...)...)
		}
		out, err := format.Source(src)
		if err != nil {
			panic(err)
		}
		os.WriteFile(fn, out, 0o644)
	}
}
