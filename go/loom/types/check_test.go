package types_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom/parser"
	"github.com/loomrt/loom/go/loom/scanner"
	"github.com/loomrt/loom/go/loom/types"
)

var errorComment = regexp.MustCompile(`ERROR "((?:[^"\\]|\\.)*)"`)

// expectations maps each line to the patterns of its `// ERROR "regexp"` comments.
func expectations(t *testing.T, src string) map[int][]*regexp.Regexp {
	out := map[int][]*regexp.Regexp{}
	for i, line := range strings.Split(src, "\n") {
		idx := strings.Index(line, "// ERROR")
		if idx < 0 {
			continue
		}
		for _, m := range errorComment.FindAllStringSubmatch(line[idx:], -1) {
			re, err := regexp.Compile(m[1])
			require.NoError(t, err, "line %d", i+1)
			out[i+1] = append(out[i+1], re)
		}
	}
	return out
}

// checkFile parses and checks a testdata file and matches every diagnostic against the ERROR
// comments of its line, in the manner of go/types' testdata.
func checkFile(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	want := expectations(t, string(data))
	f, perr := parser.ParseFile(path, data)
	var got scanner.ErrorList
	var el scanner.ErrorList
	if errors.As(perr, &el) {
		got = append(got, el...)
	}
	if cerr := types.CheckAll(f); errors.As(cerr, &el) {
		got = append(got, el...)
	}
	for _, e := range got {
		require.Equal(t, path, e.Pos.Filename)
		pats := want[e.Pos.Line]
		matched := -1
		for i, re := range pats {
			if re.MatchString(e.Msg) {
				matched = i
				break
			}
		}
		if matched < 0 {
			t.Errorf("%s: unexpected error: %s", e.Pos, e.Msg)
			continue
		}
		want[e.Pos.Line] = append(pats[:matched], pats[matched+1:]...)
	}
	for line, pats := range want {
		for _, re := range pats {
			t.Errorf("%s:%d: missing error matching %q", path, line, re)
		}
	}
}

func TestCheckTestdata(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.loom"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { checkFile(t, f) })
	}
}

func TestSpecialization(t *testing.T) {
	src := []byte(`kernel k[T type = f32, B index = 64, S f32 = 0.5, F i1 = false, W u8 = 3] {
	launch(n index) {
		grid = (ceil_div(n, B), 1, 1)
		block = (B, 1, 1)
	}
	device(x buffer[T] write, n index) {
	}
}`)
	f, err := parser.ParseFile("k.loom", src)
	require.NoError(t, err)
	k, err := types.Check(f, "k", map[string]string{"T": "bf16", "B": "0x80", "S": "1e-3", "F": "true"})
	require.NoError(t, err)
	got := map[string]string{}
	for _, s := range k.Spec {
		got[s.Name] = s.Text()
	}
	require.Equal(t, map[string]string{"T": "bf16", "B": "128", "S": "0.001", "F": "true", "W": "3"}, got)

	for _, tc := range []struct {
		symbol string
		config map[string]string
		msg    string
	}{
		{"nope", nil, `k.loom: no kernel named "nope" (kernels: k)`},
		{"k", map[string]string{"X": "1"}, `k.loom:1:8: unknown specialization key "X" for kernel k (constants: T, B, S, F, W)`},
		{"k", map[string]string{"B x": "1"}, `k.loom:1:8: specialization key "B x" of kernel k: keys may only hold letters, digits, '.', '_' and '-'`},
		{"k", map[string]string{"T": "f33"}, `k.loom:1:10: specialization T="f33": not a scalar type name`},
		{"k", map[string]string{"B": "1.5"}, `k.loom:1:24: specialization B="1.5": not an integer value of type index`},
		{"k", map[string]string{"W": "300"}, `k.loom:1:65: specialization W="300": value overflows u8`},
		{"k", map[string]string{"F": "yes"}, `k.loom:1:51: specialization F="yes": not an i1 value (true or false)`},
		{"k", map[string]string{"S": "x"}, `k.loom:1:38: specialization S="x": not a floating-point value of type f32`},
	} {
		_, err := types.Check(f, tc.symbol, tc.config)
		require.Error(t, err)
		require.Contains(t, err.Error(), tc.msg)
	}
}
