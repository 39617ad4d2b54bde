package passes_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

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
		// A clamped index is one of its arms: proven by a case split on max and min.
		{"clamped index", p, "assume len(x) >= n && n >= 1\ni := block_id.x * 64 + thread_id.x\nx[max(min(i, n - 1), 0)] = 1.0", [][]uint8{{none}}},
		{"clamp of an empty range", p, "assume len(x) >= n\ni := block_id.x * 64 + thread_id.x\nx[max(min(i, n - 1), 0)] = 1.0", [][]uint8{{upper}}},
		{"min of two in range", p, "assume len(x) >= n && k >= 0\nfor i := range(n) { x[min(i, k)] = 1.0 }", [][]uint8{{none}}},
		{"min with a negative arm", p, "assume len(x) >= n\nfor i := range(n) { x[min(i, k)] = 1.0 }", [][]uint8{{lower}}},
		{"max with an arm past the end", p, "assume len(x) >= n\nfor i := range(n) { x[max(i, k)] = 1.0 }", [][]uint8{{upper}}},
		{"nested clamps", p, "assume len(x) >= n && n >= 1 && k >= 0\nfor i := range(n) { x[max(min(i + k, n - 1), min(i, k))] = 1.0 }", [][]uint8{{none}}},
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

// clampExpr is a random index expression over i, n, k and small constants with +, -, min and
// max, rendered as Loom and evaluated in Go.
type clampExpr struct {
	op   string // "i", "n", "k", "c", "+", "-", "min", "max"
	c    int64
	l, r *clampExpr
}

func randomClampExpr(rnd *rand.Rand, depth int) *clampExpr {
	if depth == 0 || rnd.IntN(3) == 0 {
		switch rnd.IntN(4) {
		case 0:
			return &clampExpr{op: "i"}
		case 1:
			return &clampExpr{op: "n"}
		case 2:
			return &clampExpr{op: "k"}
		}
		return &clampExpr{op: "c", c: rnd.Int64N(5) - 2}
	}
	ops := []string{"+", "-", "min", "max", "min", "max"}
	return &clampExpr{op: ops[rnd.IntN(len(ops))], l: randomClampExpr(rnd, depth-1), r: randomClampExpr(rnd, depth-1)}
}

func (e *clampExpr) String() string {
	switch e.op {
	case "i", "n", "k":
		return e.op
	case "c":
		if e.c < 0 {
			return fmt.Sprintf("(0 - %d)", -e.c)
		}
		return fmt.Sprint(e.c)
	case "min", "max":
		return e.op + "(" + e.l.String() + ", " + e.r.String() + ")"
	}
	return "(" + e.l.String() + " " + e.op + " " + e.r.String() + ")"
}

func (e *clampExpr) eval(i, n, k int64) int64 {
	switch e.op {
	case "i":
		return i
	case "n":
		return n
	case "k":
		return k
	case "c":
		return e.c
	case "+":
		return e.l.eval(i, n, k) + e.r.eval(i, n, k)
	case "-":
		return e.l.eval(i, n, k) - e.r.eval(i, n, k)
	case "min":
		return min(e.l.eval(i, n, k), e.r.eval(i, n, k))
	}
	return max(e.l.eval(i, n, k), e.r.eval(i, n, k))
}

// TestBoundsProofsAreSound checks the prover's claims, the case splits on min and max among
// them, by brute force: random index expressions of i (a loop over n), n and k under random
// assumptions, fresh each run; wherever a check was removed, the index must be in range
// (0 <= x < n, the least length the assumptions allow) at every point of a small domain that
// satisfies the assumptions. It also counts the proofs, so that it cannot pass by proving
// nothing.
func TestBoundsProofsAreSound(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rnd := rand.New(rand.NewPCG(seed, 1))
	t.Logf("seed %d", seed)
	facts := []struct {
		src  string
		hold func(n, k int64) bool
	}{
		{"n >= 1", func(n, k int64) bool { return n >= 1 }},
		{"k >= 0", func(n, k int64) bool { return k >= 0 }},
		{"k < n", func(n, k int64) bool { return k < n }},
		{"k >= 2", func(n, k int64) bool { return k >= 2 }},
	}
	proofs := 0
	for range 400 {
		e := randomClampExpr(rnd, 4)
		assume := "len(x) >= n"
		var hold []func(n, k int64) bool
		for _, f := range facts {
			if rnd.IntN(2) == 0 {
				assume += " && " + f.src
				hold = append(hold, f.hold)
			}
		}
		body := "assume " + assume + "\nfor i := range(n) { x[" + e.String() + "] = 1.0 }"
		checks := checksOf(t, "x buffer[f32] read_write, n index, k index", body)
		require.Len(t, checks, 1, body)
		c := checks[0][0]
		if c == both {
			continue
		}
		if c&lower == 0 {
			proofs++
		}
		if c&upper == 0 {
			proofs++
		}
		for n := int64(0); n <= 7; n++ {
			for k := int64(-4); k <= 8; k++ {
				ok := true
				for _, h := range hold {
					ok = ok && h(n, k)
				}
				if !ok {
					continue
				}
				for i := range n {
					v := e.eval(i, n, k)
					require.False(t, c&lower == 0 && v < 0, "%s: the lower check was removed, but at i=%d n=%d k=%d the index is %d", body, i, n, k, v)
					require.False(t, c&upper == 0 && v >= n, "%s: the upper check was removed, but at i=%d n=%d k=%d the index is %d (length %d)", body, i, n, k, v, n)
				}
			}
		}
	}
	t.Logf("%d checks proven away of 800", proofs)
	require.Greater(t, proofs, 100)
}
