package parser_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom/ast"
	"github.com/loomrt/loom/go/loom/parser"
	"github.com/loomrt/loom/go/loom/scanner"
	"github.com/loomrt/loom/go/loom/token"
)

var errorComment = regexp.MustCompile(`ERROR "((?:[^"\\]|\\.)*)"`)

// TestSyntaxErrors matches parse errors against the `// ERROR "regexp"` comments of their lines.
func TestSyntaxErrors(t *testing.T) {
	path := filepath.Join("testdata", "syntax.loom")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	want := map[int][]*regexp.Regexp{}
	for i, line := range strings.Split(string(data), "\n") {
		if idx := strings.Index(line, "// ERROR"); idx >= 0 {
			for _, m := range errorComment.FindAllStringSubmatch(line[idx:], -1) {
				want[i+1] = append(want[i+1], regexp.MustCompile(m[1]))
			}
		}
	}
	_, perr := parser.ParseFile(path, data)
	var el scanner.ErrorList
	require.True(t, errors.As(perr, &el))
	for _, e := range el {
		pats := want[e.Pos.Line]
		found := -1
		for i, re := range pats {
			if re.MatchString(e.Msg) {
				found = i
				break
			}
		}
		if found < 0 {
			t.Errorf("%s: unexpected error %q", e.Pos, e.Msg)
			continue
		}
		want[e.Pos.Line] = append(pats[:found], pats[found+1:]...)
	}
	for line, pats := range want {
		for _, re := range pats {
			t.Errorf("%s:%d: missing error matching %q", path, line, re)
		}
	}
}

func TestErrorsAreSortedWithPositions(t *testing.T) {
	_, err := parser.ParseFile("x.loom", []byte("kernel k {\n  launch( {\n}\nkernel ( \n"))
	require.Error(t, err)
	var el scanner.ErrorList
	require.True(t, errors.As(err, &el))
	for i := 1; i < len(el); i++ {
		require.False(t, el[i].Pos.Before(el[i-1].Pos.Pos), "sorted")
	}
	require.Regexp(t, `^x\.loom:\d+:\d+: `, el[0].Error())
}

func TestParseStructure(t *testing.T) {
	src := `const C = 2
// k does things.
kernel k[T type = f32, N index = 4] {
	const M = N * C
	launch(n index) {
		grid = (ceil_div(n, N), 1, 1)
		block = (N, 1, 1); shared = 0
	}
	device(x buffer[T] read_write, n index) {
		var acc [M]vec[4]f32
		for i := unroll(0, M, 1) {
			acc[i] += vec[4]f32(1.0)
		}
		if n > 0 && -n < 0 { x[0:4] = acc[0] } else if n == 0 { barrier() } else {}
		assume len(x) >= n
	}
}
`
	f, err := parser.ParseFile("k.loom", []byte(src))
	require.NoError(t, err)
	require.Len(t, f.Consts, 1)
	require.Len(t, f.Kernels, 1)
	k := f.Kernels[0]
	require.Equal(t, "k", k.Name.Name)
	require.Equal(t, token.Pos{Line: 3, Col: 8}, k.Name.Pos())
	require.Len(t, k.Spec, 2)
	require.True(t, k.Spec[0].IsType)
	require.Len(t, k.Decls, 3)
	launch := k.Decls[1].(*ast.LaunchDecl)
	require.Len(t, launch.Body.List, 3)
	dev := k.Decls[2].(*ast.DeviceDecl)
	require.Equal(t, "read_write", dev.Params[0].Access.Name)
	require.Len(t, dev.Body.List, 4)
	loop := dev.Body.List[1].(*ast.ForStmt)
	require.Equal(t, "i", loop.Key.Name)
	ifs := dev.Body.List[2].(*ast.IfStmt)
	require.IsType(t, &ast.IfStmt{}, ifs.Else)
	cond := ifs.Cond.(*ast.BinaryExpr)
	require.Equal(t, token.LAND, cond.Op)
	store := ifs.Body.List[0].(*ast.AssignStmt)
	require.IsType(t, &ast.SliceExpr{}, store.Lhs.(*ast.IndexExpr).Indices[0])
}

func TestNestingLimit(t *testing.T) {
	deep := "kernel k { device() { x := " + strings.Repeat("(", 10000) + "1" + strings.Repeat(")", 10000) + " } }"
	_, err := parser.ParseFile("deep.loom", []byte(deep))
	require.ErrorContains(t, err, "nesting too deep")
	blocks := "kernel k { device() { " + strings.Repeat("{ ", 5000) + strings.Repeat("} ", 5000) + " } }"
	_, err = parser.ParseFile("blocks.loom", []byte(blocks))
	require.ErrorContains(t, err, "nesting too deep")
}

// FuzzParse feeds arbitrary bytes to the parser: it must not panic, and every diagnostic must
// carry a position inside the file.
func FuzzParse(f *testing.F) {
	for _, p := range seedFiles(f) {
		data, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		file, err := parser.ParseFile("fuzz.loom", src)
		if file == nil {
			t.Fatal("nil file")
		}
		if err == nil {
			return
		}
		var el scanner.ErrorList
		if !errors.As(err, &el) {
			t.Fatalf("error is not an ErrorList: %v", err)
		}
		lines := strings.Count(string(src), "\n") + 1
		for _, e := range el {
			if e.Pos.Line < 1 || e.Pos.Line > lines || e.Pos.Col < 1 {
				t.Fatalf("diagnostic outside the file: %v", e)
			}
		}
	})
}

func seedFiles(f *testing.F) []string {
	var files []string
	for _, pat := range []string{"../../../kernels/*.loom", "../testdata/kernels/*.loom", "testdata/*.loom", "../types/testdata/*.loom"} {
		m, err := filepath.Glob(pat)
		require.NoError(f, err)
		files = append(files, m...)
	}
	return files
}
