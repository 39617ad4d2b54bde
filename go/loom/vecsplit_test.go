package loom_test

import (
	"encoding/binary"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
)

// wideVecSrc is vecSrc with W-lane vectors, and an FMA and a conversion of a whole f32 vector
// to f64 (whose parts do not line up: 8 f32 lanes to a register, 4 f64 lanes) besides.
const wideVecSrc = `
kernel widevec {
	launch(n index) {
		grid = (ceil_div(n, 8), 1, 1)
		block = (8, 1, 1)
	}
	device(x buffer[i32] read, y buffer[i32] read, out buffer[i32] write, d buffer[f64] read_write, f buffer[f32] read_write, n index) {
		assume len(x) >= n * W && len(y) >= n * W && len(out) >= n * W && len(d) >= n * W && len(f) >= n * W
		i := (block_id.x * 8 + thread_id.x) * W
		if i < n * W {
			a := x[i : i + W]
			b := y[i : i + W]
			q := a / b + (a % b) * 3
			s := (a << b) ^ (a >> 3) | ^b
			m := min(a, b) - max(a, 7)
			c := select(reduce_max(a) > reduce_min(b), q, s)
			out[i : i + W] = c + m + vec[W]i32(i32(b[0])) - abs(a)
			g := d[i : i + W]
			h := f[i : i + W]
			d[i : i + W] = sqrt(abs(g)) * g + vec[W]f64(f64(reduce_add(a))) - floor(g) + vec[W]f64(h)
			var half vec[W]f32 = vec[W]f32(0.5)
			var lo vec[W]f32 = vec[W]f32(-1.0)
			f[i : i + W] = fma(h, h, half) - abs(h) * max(h, lo)
		}
	}
}
`

// hostLevels are the host targets this machine runs: on x86-64 every level up to its own
// (v2, v3, v4), elsewhere the host target.
func hostLevels() []loom.Target {
	host := loom.HostTarget()
	if host.Arch != "x86_64" {
		return []loom.Target{host}
	}
	var targets []loom.Target
	for _, lv := range []string{"v2", "v3", "v4"} {
		targets = append(targets, loom.MustParseTarget("host-x86_64-"+lv))
		if lv == host.Level {
			break
		}
	}
	return targets
}

// TestVectorsWiderThanRegisters runs vector code on every host level this machine runs, with
// vectors as wide as the level's registers and wider (a vec[16]f32 is four SSE registers, two
// AVX2 ones, one AVX-512 one; a vec[16]f64 eight, four, two): the emitter renders a vector
// wider than the target's registers as a struct of register-wide parts (GCC would keep it in
// memory), and every level must compute the same lanes as the reference.
func TestVectorsWiderThanRegisters(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	targets := hostLevels()
	for _, w := range []int{4, 16} {
		src := strings.ReplaceAll(wideVecSrc, "W", strconv.Itoa(w))
		n := 37
		x, y := make([]int32, w*n), make([]int32, w*n)
		d := make([]float64, w*n)
		f := make([]float32, w*n)
		for i := range x {
			x[i], y[i] = interestingI32(r), interestingI32(r)
			d[i] = r.NormFloat64() * 100
			f[i] = float32(r.NormFloat64() * 4)
		}
		db := make([]byte, 8*len(d))
		for i, v := range d {
			binary.LittleEndian.PutUint64(db[8*i:], math.Float64bits(v))
		}
		fb := make([]byte, 4*len(f))
		for i, v := range f {
			binary.LittleEndian.PutUint32(fb[4*i:], math.Float32bits(v))
		}
		for _, tg := range targets {
			t.Run(strconv.Itoa(w)+"/"+tg.String(), func(t *testing.T) {
				a, err := c.Compile(loom.KernelSource{Name: "inline.loom", Source: []byte(src),
					Specialization: loom.Specialization{Symbol: "widevec"}}, tg)
				require.NoError(t, err)
				if k := w * 8 / tg.VectorBytes(); k > 1 {
					require.Contains(t, a.Source, "typedef struct { loom_f64x"+strconv.Itoa(tg.VectorBytes()/8)+" p["+strconv.Itoa(k)+"]; } loom_f64x"+strconv.Itoa(w)+";",
						"a vector wider than the target's registers is a struct of register-wide parts")
				}
				res := launch(t, a, [][]byte{i32s(x...), i32s(y...), make([]byte, 4*w*n), append([]byte(nil), db...), append([]byte(nil), fb...)}, 1, int64(n))
				require.Zero(t, res.Violation)
				out := i32Slice(res.Buffers[2])
				for v := 0; v < n; v++ {
					i := w * v
					ints, sumA := vecopsWant(x, y, i, w)
					for l := 0; l < w; l++ {
						require.Equal(t, ints[l], out[i+l], "lane %d of vector %d", l, v)
						g := d[i+l]
						want := math.Sqrt(math.Abs(g))*g + float64(sumA) - math.Floor(g) + float64(f[i+l])
						got := math.Float64frombits(binary.LittleEndian.Uint64(res.Buffers[3][8*(i+l):]))
						require.InDelta(t, want, got, 1e-9*math.Max(1, math.Abs(want)), "lane %d of vector %d", l, v)
						h := float64(f[i+l])
						wantF := h*h + 0.5 - math.Abs(h)*math.Max(h, -1)
						gotF := float64(math.Float32frombits(binary.LittleEndian.Uint32(res.Buffers[4][4*(i+l):])))
						// float32 rounds h·h + 0.5 and |h|·max(h, -1) before they cancel (to 0.5
						// for h >= 0): the error scales with those terms, not with the result
						// (h = 10: 1.3e-5 off 0.5 is three roundings of about 100).
						terms := h*h + 0.5 + math.Abs(h*math.Max(h, -1))
						require.InDelta(t, wantF, gotF, 1e-6*math.Max(1, terms), "lane %d of vector %d (h %g)", l, v, h)
					}
				}
			})
		}
	}
}

// minMaxSrc takes max and min of two W-lane float vectors of type T lane by lane.
const minMaxSrc = `
kernel minmax {
	launch(n index) {
		grid = (ceil_div(n, 8), 1, 1)
		block = (8, 1, 1)
	}
	device(x buffer[T] read, y buffer[T] read, hi buffer[T] write, lo buffer[T] write, n index) {
		assume len(x) >= n * W && len(y) >= n * W && len(hi) >= n * W && len(lo) >= n * W
		i := (block_id.x * 8 + thread_id.x) * W
		if i < n * W {
			hi[i : i + W] = max(x[i : i + W], y[i : i + W])
			lo[i : i + W] = min(x[i : i + W], y[i : i + W])
		}
	}
}
`

// TestFloatVectorMinMaxKeepTheScalarRule checks vector max and min of f32 and f64 lanes, as
// wide as a level's registers and wider, on every host level this machine runs, against
// Loom's scalar rule lane by lane, bit for bit: max(x, y) is y where y > x and x elsewhere
// (so a NaN in either lane gives x, and of +0 and -0 the first), min likewise with <. The
// host renders them as a compare and a blend.
func TestFloatVectorMinMaxKeepTheScalarRule(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	targets := hostLevels()
	specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 1, -1}
	pick := func() float64 {
		if r.IntN(3) == 0 {
			return specials[r.IntN(len(specials))]
		}
		return r.NormFloat64() * 10
	}
	for _, elem := range []string{"f32", "f64"} {
		size := map[string]int{"f32": 4, "f64": 8}[elem]
		for _, w := range []int{4, 16} {
			n := 29
			x, y := make([]float64, w*n), make([]float64, w*n)
			for i := range x {
				x[i], y[i] = pick(), pick()
			}
			enc := func(v []float64) []byte {
				b := make([]byte, size*len(v))
				for i, f := range v {
					if size == 4 {
						binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(f)))
					} else {
						binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(f))
					}
				}
				return b
			}
			bitsAt := func(b []byte, i int) uint64 {
				if size == 4 {
					return uint64(binary.LittleEndian.Uint32(b[4*i:]))
				}
				return binary.LittleEndian.Uint64(b[8*i:])
			}
			src := strings.NewReplacer("W", strconv.Itoa(w), "T", elem).Replace(minMaxSrc)
			for _, tg := range targets {
				t.Run(elem+"x"+strconv.Itoa(w)+"/"+tg.String(), func(t *testing.T) {
					a, err := c.Compile(loom.KernelSource{Name: "inline.loom", Source: []byte(src),
						Specialization: loom.Specialization{Symbol: "minmax"}}, tg)
					require.NoError(t, err)
					xb, yb := enc(x), enc(y)
					res := launch(t, a, [][]byte{xb, yb, make([]byte, size*w*n), make([]byte, size*w*n)}, 1, int64(n))
					require.Zero(t, res.Violation)
					for i := range x {
						// The rule on the values as stored (f32 rounds the random ones).
						xs := bitsAt(xb, i)
						ys := bitsAt(yb, i)
						xv, yv := math.Float64frombits(xs), math.Float64frombits(ys)
						if size == 4 {
							xv, yv = float64(math.Float32frombits(uint32(xs))), float64(math.Float32frombits(uint32(ys)))
						}
						wantHi, wantLo := xs, xs
						if yv > xv {
							wantHi = ys
						}
						if yv < xv {
							wantLo = ys
						}
						require.Equal(t, wantHi, bitsAt(res.Buffers[2], i), "max lane %d: x %v y %v", i, xv, yv)
						require.Equal(t, wantLo, bitsAt(res.Buffers[3], i), "min lane %d: x %v y %v", i, xv, yv)
					}
				})
			}
		}
	}
}

// stride2Src loads W-lane vectors of type T from a view whose last stride is 2 (the even
// elements of each row) and stores them contiguous; the rows end exactly where the last
// vector's last element lies, so that a load past it would leave the buffer.
const stride2Src = `
kernel evens {
	launch(n index) {
		grid = (n, 1, 1)
		block = (1, 1, 1)
	}
	device(x buffer[T] read, y buffer[T] write, n index) {
		X := view(x, [n, W], [2 * W - 1, 2])
		Y := view(y, [n, W])
		r := block_id.x
		Y[r, 0 : W] = X[r, 0 : W]
	}
}
`

// TestStride2VectorLoads checks vector loads from a view whose last stride is 2 (a pooling's
// or a convolution's taps along a row with column stride 2), which the host renders as two
// loads and a shuffle where the vector is one register: f32, f64 and i32 lanes, 4 to 16 wide,
// on every host level this machine runs, bit for bit; the buffer ends at the last element
// read (no load past it), rows of 2W - 1 elements.
func TestStride2VectorLoads(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	for _, elem := range []string{"f32", "f64", "i32"} {
		size := map[string]int{"f32": 4, "f64": 8, "i32": 4}[elem]
		for _, w := range []int{4, 8, 16} {
			const n = 5
			x := make([]byte, size*(n*(2*w-1)))
			for i := range x {
				x[i] = byte(r.IntN(256))
			}
			src := strings.NewReplacer("W", strconv.Itoa(w), "T", elem).Replace(stride2Src)
			for _, tg := range hostLevels() {
				t.Run(elem+"x"+strconv.Itoa(w)+"/"+tg.String(), func(t *testing.T) {
					a, err := c.Compile(loom.KernelSource{Name: "inline.loom", Source: []byte(src),
						Specialization: loom.Specialization{Symbol: "evens"}}, tg)
					require.NoError(t, err)
					res := launch(t, a, [][]byte{x, make([]byte, size*n*w)}, 1, int64(n))
					require.Zero(t, res.Violation)
					for row := range n {
						for j := range w {
							at := size * (row*(2*w-1) + 2*j)
							require.Equal(t, x[at:at+size], res.Buffers[1][size*(row*w+j):size*(row*w+j+1)], "row %d lane %d", row, j)
						}
					}
				})
			}
		}
	}
}
