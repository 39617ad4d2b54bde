package scratch

import (
	"testing"

	"github.com/loomrt/loom/go/loom/parser"
	"github.com/loomrt/loom/go/loom/types"
)

const src = `
// fill writes value into out[0:n].
kernel fill[T type = f32, BLOCK index = 256] {
	launch(n index) {
		grid = (ceil_div(n, BLOCK), 1, 1)
		block = (BLOCK, 1, 1)
		shared = 0
	}
	device(out buffer[T] write, value T, n index) {
		i := block_id.x * BLOCK + thread_id.x
		if i < n {
			out[i] = value
		}
	}
}

kernel sgemm[MB index = 64, NB index = 256, KC index = 256, MR index = 8, VL index = 16, NV index = 2] {
	const NR = VL * NV
	launch(m index, n index, k index) {
		grid = (ceil_div(n, NB), ceil_div(m, MB), 1)
		block = (1, 1, 1)
		shared = KC * NB * sizeof(f32)
	}
	device(a buffer[f32] read, b buffer[f32] read, c buffer[f32] read_write, m index, n index, k index) {
		A := view(a, [m, k])
		B := view(b, [k, n])
		C := view(c, [m, n])
		P := shared(f32, [NB / NR, KC, NR])
		i0 := block_id.y * MB
		j0 := block_id.x * NB
		if i0 + MB <= m && j0 + NB <= n {
			for kk := range(0, k, KC) {
				kc := min(KC, k - kk)
				for p := range(kc) {
					for jp := range(NB / NR) {
						for v := unroll(NV) {
							P[jp, p, v*VL : v*VL + VL] = B[kk + p, j0 + jp*NR + v*VL : j0 + jp*NR + v*VL + VL]
						}
					}
				}
				for ir := range(0, MB, MR) {
					for jp := range(NB / NR) {
						var acc [MR][NV]vec[VL]f32
						for p := range(kc) {
							for r := unroll(MR) {
								av := A[i0 + ir + r, kk + p]
								for v := unroll(NV) {
									acc[r][v] = fma(av, P[jp, p, v*VL : v*VL+VL], acc[r][v])
								}
							}
						}
						for r := unroll(MR) {
							for v := unroll(NV) {
								j := j0 + jp*NR + v*VL
								if kk == 0 {
									C[i0 + ir + r, j : j + VL] = acc[r][v]
								} else {
									C[i0 + ir + r, j : j + VL] += acc[r][v]
								}
							}
						}
					}
				}
			}
		} else {
			for i := range(i0, min(i0 + MB, m)) {
				for j := range(j0, min(j0 + NB, n)) {
					var s f32
					for p := range(k) {
						s += A[i, p] * B[p, j]
					}
					C[i, j] = s
				}
			}
		}
	}
}
`

func TestScratch(t *testing.T) {
	f, err := parser.ParseFile("x.loom", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if err := types.CheckAll(f); err != nil {
		t.Fatal(err)
	}
	_, err = types.Check(f, "fill", map[string]string{"T": "f64", "BLOCK": "x", "Q": "1", "a b": "1"})
	t.Log(err)
	_, err = types.Check(f, "nope", nil)
	t.Log(err)
}
