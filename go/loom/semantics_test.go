package loom_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom/internal/hostrun"
	"github.com/loomrt/loom/go/loom/ir"
)

// intOps lists i32 operations with their Go reference, following docs/loom.md: wrapping
// arithmetic, x/0 == 0, x%0 == x, shift counts masked to the width, arithmetic >>.
var intOps = []struct {
	expr string
	ref  func(a, b int32) int32
}{
	{"a + b", func(a, b int32) int32 { return a + b }},
	{"a - b", func(a, b int32) int32 { return a - b }},
	{"a * b", func(a, b int32) int32 { return a * b }},
	{"a / b", func(a, b int32) int32 {
		switch b {
		case 0:
			return 0
		case -1:
			return -a
		}
		return a / b
	}},
	{"a % b", func(a, b int32) int32 {
		switch b {
		case 0:
			return a
		case -1:
			return 0
		}
		return a % b
	}},
	{"a << b", func(a, b int32) int32 { return a << (uint32(b) & 31) }},
	{"a >> b", func(a, b int32) int32 { return a >> (uint32(b) & 31) }},
	{"a & b | ^a ^ b", func(a, b int32) int32 { return a&b | ^a ^ b }},
	{"min(a, b) - max(a, b)", func(a, b int32) int32 { return min(a, b) - max(a, b) }},
	{"abs(a) + -b", func(a, b int32) int32 {
		if a < 0 {
			a = -a
		}
		return a - b
	}},
	{"select(a < b, a, b * 3)", func(a, b int32) int32 {
		if a < b {
			return a
		}
		return b * 3
	}},
	{"ceil_div(a, b)", func(a, b int32) int32 {
		if b <= 0 {
			return 0
		}
		q := a / b
		if a%b > 0 {
			q++
		}
		return q
	}},
	{"i32(i8(a)) + i32(u8(b))", func(a, b int32) int32 { return int32(int8(a)) + int32(uint8(b)) }},
	{"i32(u16(a) * u16(b))", func(a, b int32) int32 { return int32(uint16(a) * uint16(b)) }},
	{"i32(u32(a) / u32(b))", func(a, b int32) int32 {
		if b == 0 {
			return 0
		}
		return int32(uint32(a) / uint32(b))
	}},
	{"i32(u32(a) >> b)", func(a, b int32) int32 { return int32(uint32(a) >> (uint32(b) & 31)) }},
	{"i32(i64(a) * i64(b) >> 16)", func(a, b int32) int32 { return int32(int64(a) * int64(b) >> 16) }},
}

func intKernel() string {
	var b strings.Builder
	b.WriteString("kernel ints[A i32 = 0, B i32 = 0] {\n\tlaunch(n index) {\n\t\tgrid = (ceil_div(n, 32), 1, 1)\n\t\tblock = (32, 1, 1)\n\t}\n")
	fmt.Fprintf(&b, "\tdevice(x buffer[i32] read, y buffer[i32] read, out buffer[i32] write, folded buffer[i32] write, n index) {\n")
	fmt.Fprintf(&b, "\t\tassume len(x) >= n && len(y) >= n && len(out) >= n * %d && len(folded) >= %d\n", len(intOps), len(intOps))
	b.WriteString("\t\ti := block_id.x * 32 + thread_id.x\n\t\tif i < n {\n\t\t\ta := x[i]\n\t\t\tb := y[i]\n")
	for k, op := range intOps {
		fmt.Fprintf(&b, "\t\t\tout[i * %d + %d] = %s\n", len(intOps), k, op.expr)
	}
	b.WriteString("\t\t}\n\t\tif i == 0 {\n\t\t\ta := A\n\t\t\tb := B\n")
	for k, op := range intOps {
		// Here a and b are specialization constants: the compiler folds every expression.
		fmt.Fprintf(&b, "\t\t\tfolded[%d] = %s\n", k, op.expr)
	}
	b.WriteString("\t\t}\n\t}\n}\n")
	return b.String()
}

func i32Slice(b []byte) []int32 {
	out := make([]int32, len(b)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func interestingI32(r *rand.Rand) int32 {
	switch r.IntN(6) {
	case 0:
		return []int32{0, 1, -1, math.MaxInt32, math.MinInt32, 31, 32, 33, -32}[r.IntN(9)]
	case 1:
		return int32(r.IntN(64)) - 32
	}
	return int32(r.Uint32())
}

func TestIntegerSemantics(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	src := intKernel()
	n := 300
	x, y := make([]int32, n), make([]int32, n)
	for i := range x {
		x[i], y[i] = interestingI32(r), interestingI32(r)
	}
	for trial := 0; trial < 3; trial++ {
		A, B := interestingI32(r), interestingI32(r)
		a := compileInline(t, c, src, "ints", map[string]string{"A": fmt.Sprint(A), "B": fmt.Sprint(B)})
		require.Equal(t, 0, generatedGuards(a.Source))
		res := launch(t, a, [][]byte{i32s(x...), i32s(y...), make([]byte, 4*n*len(intOps)), make([]byte, 4*len(intOps))}, 2, int64(n))
		require.Zero(t, res.Violation)
		out, folded := i32Slice(res.Buffers[2]), i32Slice(res.Buffers[3])
		for i := 0; i < n; i++ {
			for k, op := range intOps {
				require.Equal(t, op.ref(x[i], y[i]), out[i*len(intOps)+k], "%s with a=%d b=%d", op.expr, x[i], y[i])
			}
		}
		for k, op := range intOps {
			require.Equal(t, op.ref(A, B), folded[k], "folded %s with a=%d b=%d", op.expr, A, B)
		}
	}
}

const convSrc = `
kernel conv {
	launch(n index) {
		grid = (ceil_div(n, 16), 1, 1)
		block = (16, 1, 1)
	}
	device(x buffer[f32] read, i8s buffer[i8] write, u8s buffer[u8] write, i64s buffer[i64] write,
		halves buffer[f16] write, bhalves buffer[bf16] write, sums buffer[f16] write, vecs buffer[f32] write, n index) {
		assume len(x) >= n && len(i8s) >= n && len(u8s) >= n && len(i64s) >= n && len(halves) >= n && len(bhalves) >= n && len(sums) >= n && len(vecs) >= n
		i := block_id.x * 16 + thread_id.x
		if i < n {
			v := x[i]
			i8s[i] = i8(v)
			u8s[i] = u8(v)
			i64s[i] = i64(v)
			h := f16(v)
			halves[i] = h
			bhalves[i] = bf16(v)
			sums[i] = h * h + h
			w := vec[4]f32(v) * vec[4]f32(1.5) + 0.25
			lanes := vec[4]i32(w)
			vecs[i] = f32(reduce_add(lanes)) + w[3] - reduce_min(w)
		}
	}
}
`

// satInt converts like Loom: truncate toward zero, clamp to [lo, hi], NaN gives 0.
func satInt(f float32, lo, hi int64) int64 {
	v := math.Trunc(float64(f))
	switch {
	case math.IsNaN(v):
		return 0
	case v >= float64(hi):
		return hi
	case v <= float64(lo):
		return lo
	}
	return int64(v)
}

func TestConversionSemantics(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	a := compileInline(t, c, convSrc, "conv", nil)
	n := 200
	x := make([]float32, n)
	for i := range x {
		switch r.IntN(5) {
		case 0:
			x[i] = []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1e30, -1e30, 127.9, -128.9, 255.5, 65519, 65520}[r.IntN(10)]
		case 1:
			x[i] = float32(r.NormFloat64() * 1000)
		default:
			x[i] = float32(r.NormFloat64() * 10)
		}
	}
	bufs := [][]byte{hostrun.F32(x), make([]byte, n), make([]byte, n), make([]byte, 8*n), make([]byte, 2*n), make([]byte, 2*n), make([]byte, 2*n), make([]byte, 4*n)}
	res := launch(t, a, bufs, 2, int64(n))
	require.Zero(t, res.Violation)
	vecs := hostrun.ToF32(res.Buffers[7])
	for i, v := range x {
		require.Equal(t, int8(satInt(v, -128, 127)), int8(res.Buffers[1][i]), "i8(%v)", v)
		require.Equal(t, uint8(satInt(v, 0, 255)), res.Buffers[2][i], "u8(%v)", v)
		require.Equal(t, satInt(v, math.MinInt64, math.MaxInt64), int64(binary.LittleEndian.Uint64(res.Buffers[3][8*i:])), "i64(%v)", v)
		h := ir.F32ToF16(v)
		if !math.IsNaN(float64(v)) {
			require.Equal(t, h, binary.LittleEndian.Uint16(res.Buffers[4][2*i:]), "f16(%v)", v)
			require.Equal(t, ir.F32ToBF16(v), binary.LittleEndian.Uint16(res.Buffers[5][2*i:]), "bf16(%v)", v)
			hv := ir.F16ToF32(h)
			sq := ir.F16ToF32(ir.F32ToF16(hv * hv))
			want := ir.F32ToF16(sq + hv)
			require.Equal(t, want, binary.LittleEndian.Uint16(res.Buffers[6][2*i:]), "f16 arithmetic on %v", v)
		}
		// Kernels compile with -ffp-contract=fast, so v*1.5 + 0.25 may be one fused
		// multiply-add (rounded once): either rounding is correct.
		var wants []float32
		for _, w := range []float32{v*1.5 + 0.25, float32(math.FMA(float64(v), 1.5, 0.25))} {
			lane := int32(satInt(w, math.MinInt32, math.MaxInt32))
			if !math.IsNaN(float64(w)) && !math.IsInf(float64(w), 0) {
				wants = append(wants, float32(4*int64(lane))+w-w)
			}
		}
		if len(wants) > 0 {
			require.Contains(t, wants, vecs[i], "vector ops on %v", v)
		}
	}
}

const vecSrc = `
kernel vecops {
	launch(n index) {
		grid = (ceil_div(n, 8), 1, 1)
		block = (8, 1, 1)
	}
	device(x buffer[i32] read, y buffer[i32] read, out buffer[i32] write, d buffer[f64] read_write, n index) {
		assume len(x) >= n * 4 && len(y) >= n * 4 && len(out) >= n * 4 && len(d) >= n * 4
		i := (block_id.x * 8 + thread_id.x) * 4
		if i < n * 4 {
			a := x[i : i + 4]
			b := y[i : i + 4]
			q := a / b + (a % b) * 3
			s := (a << b) ^ (a >> 3) | ^b
			m := min(a, b) - max(a, 7)
			c := select(reduce_max(a) > reduce_min(b), q, s)
			out[i : i + 4] = c + m + vec[4]i32(i32(b[0])) - abs(a)
			f := d[i : i + 4]
			d[i : i + 4] = sqrt(abs(f)) * f + vec[4]f64(f64(reduce_add(a))) - floor(f)
		}
	}
}
`

func TestVectorSemantics(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	a := compileInline(t, c, vecSrc, "vecops", nil)
	require.Equal(t, 0, generatedGuards(a.Source))
	n := 50
	x, y := make([]int32, 4*n), make([]int32, 4*n)
	d := make([]float64, 4*n)
	for i := range x {
		x[i], y[i] = interestingI32(r), interestingI32(r)
		d[i] = r.NormFloat64() * 100
	}
	db := make([]byte, 8*len(d))
	for i, v := range d {
		binary.LittleEndian.PutUint64(db[8*i:], math.Float64bits(v))
	}
	res := launch(t, a, [][]byte{i32s(x...), i32s(y...), make([]byte, 16*n), db}, 1, int64(n))
	require.Zero(t, res.Violation)
	out := i32Slice(res.Buffers[2])
	for v := 0; v < n; v++ {
		i := 4 * v
		ints, sumA := vecopsWant(x, y, i, 4)
		for l := 0; l < 4; l++ {
			require.Equal(t, ints[l], out[i+l], "lane %d of vector %d", l, v)
			f := d[i+l]
			want := math.Sqrt(math.Abs(f))*f + float64(sumA) - math.Floor(f)
			got := math.Float64frombits(binary.LittleEndian.Uint64(res.Buffers[3][8*(i+l):]))
			require.InDelta(t, want, got, 1e-9*math.Max(1, math.Abs(want)))
		}
	}
}

// vecopsWant is the reference of vecSrc's integer lanes for the w-lane vectors of x and y at i
// (out[i : i+w]), and the sum of x's lanes there.
func vecopsWant(x, y []int32, i, w int) ([]int32, int32) {
	div, rem := intOps[3].ref, intOps[4].ref
	maxA, minB := x[i], y[i]
	var sumA int32
	for l := 0; l < w; l++ {
		maxA, minB = max(maxA, x[i+l]), min(minB, y[i+l])
		sumA += x[i+l]
	}
	out := make([]int32, w)
	for l := range out {
		av, bv := x[i+l], y[i+l]
		q := div(av, bv) + rem(av, bv)*3
		s := (av << (uint32(bv) & 31)) ^ (av >> 3) | ^bv
		m := min(av, bv) - max(av, 7)
		cv := s
		if maxA > minB {
			cv = q
		}
		absA := av
		if absA < 0 {
			absA = -absA
		}
		out[l] = cv + m + y[i] - absA
	}
	return out, sumA
}
