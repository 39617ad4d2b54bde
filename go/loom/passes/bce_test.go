package passes_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom/ir"
	"github.com/loomrt/loom/go/loom/parser"
	"github.com/loomrt/loom/go/loom/passes"
	"github.com/loomrt/loom/go/loom/types"
)

// checksOf compiles a device body and returns, for each load/store of binding x in source order,
// its remaining checks.
func checksOf(t *testing.T, params, body string) [][]uint8 {
	t.Helper()
	src := "kernel k {\n\tlaunch(n index) {\n\t\tgrid = (ceil_div(n, 64), 1, 1)\n\t\tblock = (64, 1, 1)\n\t}\n\tdevice(" + params + ") {\n" + body + "\n\t}\n}\n"
	f, err := parser.ParseFile("k.loom", []byte(src))
	require.NoError(t, err)
	k, err := types.Check(f, "k", nil)
	require.NoError(t, err)
	fn, _, err := ir.Build(k)
	require.NoError(t, err)
	_, err = passes.Optimize(fn, nil)
	require.NoError(t, err)
	var out [][]uint8
	ir.Walk(fn.Body, func(op *ir.Op) {
		if (op.Code == ir.OpLoad || op.Code == ir.OpStore) && len(op.Checks) > 0 {
			if v := op.Args[0]; v.Name == "x" || v.Name == "view" {
				out = append(out, append([]uint8(nil), op.Checks...))
			}
		}
	})
	return out
}

const (
	none  = uint8(0)
	lower = ir.CheckLower
	upper = ir.CheckUpper
	both  = ir.CheckLower | ir.CheckUpper
)

func TestBoundsProofs(t *testing.T) {
	p := "x buffer[f32] read_write, n index, k index, idx buffer[index] read"
	for _, tc := range []struct {
		name, params, body string
		want               [][]uint8
	}{
		{"loop without facts", p, "for i := range(n) { x[i] = 1.0 }", [][]uint8{{upper}}},
		{"assume length", p, "assume len(x) >= n\nfor i := range(n) { x[i] = 1.0 }", [][]uint8{{none}}},
		{"off by one", p, "assume len(x) >= n\nfor i := range(n) { x[i + 1] = 1.0 }", [][]uint8{{upper}}},
		{"negative offset", p, "assume len(x) >= n\nfor i := range(n) { x[i - 1] = 1.0 }", [][]uint8{{lower}}},
		{"guarded by if", p, "assume len(x) >= n\ni := block_id.x * 64 + thread_id.x\nif i < n { x[i] = 1.0 } else { x[i] = 2.0 }", [][]uint8{{none}, {upper}}},
		{"else branch fact", p, "assume len(x) >= 10\nfor i := range(20) { if i >= 10 { } else { x[i] = 1.0 } }", [][]uint8{{none}}},
		{"geometry", p, "assume len(x) >= ceil_div(n, 64) * 64\nx[block_id.x * 64 + thread_id.x] = 1.0", [][]uint8{{none}}},
		{"min bound", p, "assume len(x) >= n\nfor i := range(min(k, n)) { x[i] = 1.0 }", [][]uint8{{none}}},
		{"step tightening", "x buffer[f32] read_write, n index", "X := view(x, [16])\nfor i := range(0, 16, 4) { for r := unroll(4) { X[i + r] = 1.0 } }", [][]uint8{{none}, {none}, {none}, {none}}},
		{"step overshoot", "x buffer[f32] read_write, n index", "X := view(x, [15])\nfor i := range(0, 15, 4) { for r := unroll(4) { X[i + r] = 1.0 } }", [][]uint8{{none}, {none}, {none}, {upper}}},
		{"vector width", p, "assume len(x) >= n\nfor i := range(0, n, 8) { x[i : i + 8] = vec[8]f32(0.0) }", [][]uint8{{upper}}},
		{"vector width proven", p, "assume len(x) >= n\nfor i := range(0, n, 8) { if i + 8 <= n { x[i : i + 8] = vec[8]f32(0.0) } }", [][]uint8{{none}}},
		// A loaded index could be near 2^63: idx + 1 < n says nothing about idx when it wraps.
		{"no proof through wrapping", p, "assume len(x) >= n\nj := idx[0]\nif j + 1 < n && j >= 0 { x[j] = 1.0 }", [][]uint8{{upper}}},
		// A 32-bit loaded index cannot wrap in 64-bit arithmetic: the same shape is provable.
		{"narrow loads do not wrap", "x buffer[f32] read_write, n index, idx buffer[i32] read", "assume len(x) >= n\nj := index(idx[0])\nif j + 1 < n && j >= 0 { x[j] = 1.0 }", [][]uint8{{none}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, checksOf(t, tc.params, tc.body))
		})
	}
}
