package loom_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/loom/scanner"
)

var docPath = filepath.Join("..", "..", "docs", "loom.md")

type docBlock struct {
	lang string
	line int // line of the opening fence
	text string
}

func docBlocks(t *testing.T) []docBlock {
	data, err := os.ReadFile(docPath)
	require.NoError(t, err)
	var blocks []docBlock
	var cur *docBlock
	for i, line := range strings.Split(string(data), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```") && len(line) > 3:
			cur = &docBlock{lang: line[3:], line: i + 1}
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	require.Nil(t, cur, "unterminated code block")
	return blocks
}

// TestDocExamplesCompile compiles every `loom` example of docs/loom.md for the host (with the C
// compiler) and for CUDA, and checks that every `loom-error` example fails with exactly the
// errors its ERROR comments announce.
func TestDocExamplesCompile(t *testing.T) {
	c := newCompiler(t)
	n, nerr := 0, 0
	for _, b := range docBlocks(t) {
		name := fmt.Sprintf("loom.md@%d", b.line)
		switch b.lang {
		case "loom":
			n++
			src := loom.KernelSource{Name: name, Source: []byte(b.text)}
			kernels, err := loom.Kernels(src)
			require.NoError(t, err, name)
			require.NotEmpty(t, kernels, name)
			for _, k := range kernels {
				src.Specialization.Symbol = k
				_, err := c.Compile(src, loom.HostTarget())
				require.NoError(t, err, "%s kernel %s", name, k)
				_, err = loom.Emit(src, sm90, loom.EmitCUDA)
				require.NoError(t, err, "%s kernel %s (CUDA)", name, k)
			}
		case "loom-error":
			nerr++
			checkDocErrors(t, name, b.text)
		}
	}
	require.GreaterOrEqual(t, n, 10)
	require.GreaterOrEqual(t, nerr, 4)
}

func checkDocErrors(t *testing.T, name, text string) {
	re := regexp.MustCompile(`ERROR "((?:[^"\\]|\\.)*)"`)
	want := map[int][]*regexp.Regexp{}
	for i, line := range strings.Split(text, "\n") {
		if idx := strings.Index(line, "// ERROR"); idx >= 0 {
			for _, m := range re.FindAllStringSubmatch(line[idx:], -1) {
				want[i+1] = append(want[i+1], regexp.MustCompile(m[1]))
			}
		}
	}
	require.NotEmpty(t, want, name)
	src := loom.KernelSource{Name: name, Source: []byte(text)}
	kernels, err := loom.Kernels(src)
	require.NoError(t, err)
	var got scanner.ErrorList
	for _, k := range kernels {
		src.Specialization.Symbol = k
		_, err := loom.Emit(src, loom.HostTarget(), loom.EmitC)
		require.Error(t, err, "%s kernel %s must not compile", name, k)
		var el scanner.ErrorList
		require.True(t, errors.As(err, &el), "%s: %v", name, err)
		got = append(got, el...)
	}
	for _, e := range got {
		pats := want[e.Pos.Line]
		found := -1
		for i, r := range pats {
			if r.MatchString(e.Msg) {
				found = i
				break
			}
		}
		if found < 0 {
			t.Errorf("%s: unexpected error %s", name, e)
			continue
		}
		want[e.Pos.Line] = append(pats[:found], pats[found+1:]...)
	}
	for line, pats := range want {
		for _, r := range pats {
			t.Errorf("%s:%d: missing error matching %q", name, line, r)
		}
	}
}

// TestDocQuotesRealOutput checks the diagnostics and IR the document quotes against the
// compiler's actual output.
func TestDocQuotesRealOutput(t *testing.T) {
	data, err := os.ReadFile(docPath)
	require.NoError(t, err)
	doc := string(data)
	c := newCompiler(t)
	for _, tc := range []struct {
		file, symbol string
		spec         map[string]string
	}{
		{"gemm.loom", "sgemm", map[string]string{"MX": "1"}},
		{"fill.loom", "fill", map[string]string{"BLOCK": "x"}},
		{"fill.loom", "fil", nil},
	} {
		src, err := loom.ReadSource(filepath.Join(kernelsDir, tc.file), tc.symbol, tc.spec)
		require.NoError(t, err)
		src.Name = tc.file
		_, err = c.Compile(src, loom.HostTarget())
		require.Error(t, err)
		require.Contains(t, doc, "    "+err.Error()+"\n")
	}
	src, err := loom.ReadSource(filepath.Join(kernelsDir, "fill.loom"), "fill", map[string]string{"BLOCK": "64"})
	require.NoError(t, err)
	ir, err := loom.Emit(src, loom.HostTarget(), loom.EmitIR)
	require.NoError(t, err)
	start := strings.Index(doc, "    kernel.launch(%n.1: index) {")
	require.Positive(t, start)
	end := strings.Index(doc[start:], "\n\n")
	for _, line := range strings.Split(doc[start:start+end], "\n") {
		line = strings.TrimPrefix(line, "    ")
		if strings.TrimSpace(line) == "..." {
			continue
		}
		require.Contains(t, ir, line+"\n", "the IR quoted in docs/loom.md")
	}
}
