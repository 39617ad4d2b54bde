// Command modelextract writes out a model that a Go package embeds as a string literal: the
// ONNX bytes returned by a function such as `func GetMnist() []byte { return []byte("...") }`.
// tools/models/fetch.sh uses it for the MNIST model of github.com/owulveryck/onnx-go, which
// ships its model only as Go source.
//
//	modelextract -src FILE.go -func NAME -o OUT.onnx
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
)

func main() {
	src := flag.String("src", "", "the Go source file that holds the literal")
	fn := flag.String("func", "", "the function whose `return []byte(\"...\")` holds the bytes")
	out := flag.String("o", "", "the file to write the bytes to")
	flag.Parse()
	if *src == "" || *fn == "" || *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: modelextract -src FILE.go -func NAME -o OUT")
		os.Exit(2)
	}
	data, err := extract(*src, *fn)
	if err != nil {
		fmt.Fprintf(os.Stderr, "modelextract: %v\n", err)
		os.Exit(1)
	}
	// Write beside the target and rename, so that an interrupted run leaves no partial file.
	tmp := *out + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "modelextract: %v\n", err)
		os.Exit(1)
	}
	if err := os.Rename(tmp, *out); err != nil {
		os.Remove(tmp)
		fmt.Fprintf(os.Stderr, "modelextract: %v\n", err)
		os.Exit(1)
	}
}

// extract parses path and returns the bytes of the string literal that function name
// converts to []byte in its return statement.
func extract(path, name string) ([]byte, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Recv != nil || fd.Name.Name != name || fd.Body == nil {
			continue
		}
		for _, stmt := range fd.Body.List {
			ret, ok := stmt.(*ast.ReturnStmt)
			if !ok || len(ret.Results) != 1 {
				continue
			}
			call, ok := ret.Results[0].(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				continue
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				continue
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return nil, fmt.Errorf("%s: function %s: cannot unquote its literal: %v", path, name, err)
			}
			return []byte(s), nil
		}
		return nil, fmt.Errorf("%s: function %s does not return []byte(\"...\")", path, name)
	}
	return nil, fmt.Errorf("%s: no function %s", path, name)
}
