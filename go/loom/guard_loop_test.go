package loom_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom/internal/hostrun"
)

// guardSrc writes y[i] = 2·x[i] + 1 for the threads its guard G admits and leaves the other
// elements of y alone. The host emitter turns each of these guards into the bounds of the x
// thread loop (so that C compilers vectorize it); G 6 loads before its guard, which keeps the
// per-thread test.
const guardSrc = `
kernel guarded[G index = 0, BLOCK index = 64] {
	launch(n index) {
		grid = (ceil_div(n, BLOCK), 1, 1)
		block = (BLOCK, 1, 1)
	}
	device(x buffer[f32] read, y buffer[f32] read_write, n index, lo index, flag index) {
		assume len(x) >= n && len(y) >= n && lo >= 0
		i := block_id.x * BLOCK + thread_id.x
		if G == 0 {
			if i < n {
				y[i] = 2.0 * x[i] + 1.0
			}
		} else if G == 1 {
			if i <= n - 1 {
				y[i] = 2.0 * x[i] + 1.0
			}
		} else if G == 2 {
			if n > i && i >= lo {
				y[i] = 2.0 * x[i] + 1.0
			}
		} else if G == 3 {
			if i > lo && i < n && flag > 0 {
				y[i] = 2.0 * x[i] + 1.0
			}
		} else if G == 4 {
			if thread_id.x < 40 && i < n {
				y[i] = 2.0 * x[i] + 1.0
			}
		} else if G == 5 {
			if lo <= i && i < n {
				var v f32
				v = x[i]
				y[i] = 2.0 * v + 1.0
			}
		} else {
			v := x[min(i, n - 1)]
			if i < n && i >= lo {
				y[i] = 2.0 * v + 1.0
			}
		}
	}
}
`

func TestGuardBecomesLoopBounds(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	admit := map[string]func(i, n, lo, flag, block int) bool{
		"0": func(i, n, lo, flag, block int) bool { return i < n },
		"1": func(i, n, lo, flag, block int) bool { return i <= n-1 },
		"2": func(i, n, lo, flag, block int) bool { return i < n && i >= lo },
		"3": func(i, n, lo, flag, block int) bool { return i > lo && i < n && flag > 0 },
		"4": func(i, n, lo, flag, block int) bool { return i%block < 40 && i < n },
		"5": func(i, n, lo, flag, block int) bool { return lo <= i && i < n },
		"6": func(i, n, lo, flag, block int) bool { return i < n && i >= lo },
	}
	for g, ok := range admit {
		a := compileInline(t, c, guardSrc, "guarded", map[string]string{"G": g})
		if g == "6" {
			require.NotContains(t, a.Source, "loom_xhi", "G=%s", g)
		} else {
			require.Contains(t, a.Source, "loom_xhi", "G=%s", g)
		}
		for _, flag := range []int{0, 1} {
			n := 1 + r.IntN(300)
			lo := r.IntN(n + 10)
			x := randF32(r, n+7)
			y := randF32(r, n+7)
			res := launch(t, a, [][]byte{hostrun.F32(x), hostrun.F32(y)}, 2, int64(n), int64(lo), int64(flag))
			require.Zero(t, res.Violation)
			got := hostrun.ToF32(res.Buffers[1])
			blocks := (n + 63) / 64 * 64
			for i := range y {
				want := y[i]
				if i < blocks && ok(i, n, lo, flag, 64) {
					want = 2*x[i] + 1
				}
				require.Equal(t, want, got[i], "G=%s n=%d lo=%d flag=%d i=%d", g, n, lo, flag, i)
			}
		}
	}
}

// TestGuardBounds2D checks a two-dimensional guard: the y condition guards the whole x loop.
func TestGuardBounds2D(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	const src = `
kernel add2d {
	launch(h index, w index) {
		grid = (ceil_div(w, 16), ceil_div(h, 4), 1)
		block = (16, 4, 1)
	}
	device(x buffer[f32] read, y buffer[f32] write, h index, w index) {
		assume len(x) >= h * w && len(y) >= h * w
		col := block_id.x * 16 + thread_id.x
		row := block_id.y * 4 + thread_id.y
		if row < h && col < w {
			y[row * w + col] = x[row * w + col] * 3.0
		}
	}
}
`
	a := compileInline(t, c, src, "add2d", nil)
	require.Contains(t, a.Source, "loom_xhi")
	h, w := 1+r.IntN(20), 1+r.IntN(50)
	x := randF32(r, h*w)
	res := launch(t, a, [][]byte{hostrun.F32(x), make([]byte, 4*h*w)}, 2, int64(h), int64(w))
	require.Zero(t, res.Violation)
	got := hostrun.ToF32(res.Buffers[1])
	for i := range x {
		require.Equal(t, x[i]*3, got[i], "h=%d w=%d i=%d", h, w, i)
	}
}
