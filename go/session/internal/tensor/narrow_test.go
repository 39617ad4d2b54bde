package tensor

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
)

var narrowFloats = []DType{graph.Float8E4M3FN, graph.Float8E4M3FNUZ, graph.Float8E5M2, graph.Float8E5M2FNUZ, graph.Float4E2M1}

// nearestNarrow is an independent reference for EncodeNarrow on a float8 or float4 type: it
// searches every finite pattern of the type (decoded by go/graph) for the nearest value to v,
// ties going to the even pattern, with one more candidate past the largest finite value (the
// next value the format would have), which means "out of range".
func nearestNarrow(dt DType, v float64) (pattern byte, over bool) {
	signBit := byte(0x80)
	if dt == graph.Float4E2M1 {
		signBit = 0x8
	}
	a := math.Abs(v)
	best, bestPat, bestDist := 0.0, byte(0), math.Inf(1)
	maxVal, maxPat := 0.0, byte(0)
	for p := range int(signBit) {
		x := narrowValue(dt, byte(p))
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		if x > maxVal {
			maxVal, maxPat = x, byte(p)
		}
		d := math.Abs(a - x)
		if d < bestDist || d == bestDist && p%2 == 0 {
			best, bestPat, bestDist = x, byte(p), d
		}
	}
	// The next value after the largest: one step of the largest value's spacing further.
	below := 0.0
	for p := range int(signBit) {
		if x := narrowValue(dt, byte(p)); x < maxVal && x > below {
			below = x
		}
	}
	next := maxVal + (maxVal - below)
	if d := math.Abs(a - next); d < bestDist || d == bestDist && (maxPat+1)%2 == 0 {
		return 0, true
	}
	_ = best
	if math.Signbit(v) {
		fnuz := dt == graph.Float8E4M3FNUZ || dt == graph.Float8E5M2FNUZ
		if bestPat == 0 && fnuz {
			return 0, false // no negative zero
		}
		bestPat |= signBit
	}
	return bestPat, false
}

func TestEncodeNarrowRoundsToNearestEven(t *testing.T) {
	seed := rand.Uint64()
	rnd := rand.New(rand.NewPCG(seed, 7))
	t.Logf("seed %d", seed)
	for _, dt := range narrowFloats {
		for _, sat := range []bool{true, false} {
			c := NarrowCast{Saturate: sat}
			check := func(v float64) {
				got := EncodeNarrow(dt, v, c)
				want, over := nearestNarrow(dt, v)
				if !over {
					require.Equal(t, want, got, "%s(%v), saturate %v", dt, v, sat)
					return
				}
				gv := narrowValue(dt, got)
				switch {
				case sat || dt == graph.Float4E2M1:
					require.False(t, math.IsNaN(gv) || math.IsInf(gv, 0), "%s(%v) saturates, got %v", dt, v, gv)
					require.Greater(t, math.Abs(gv), 1.0, "%s(%v) saturates to the largest value", dt, v)
					_, overMax := nearestNarrow(dt, gv)
					require.False(t, overMax)
					require.Equal(t, math.Signbit(v), math.Signbit(gv))
				case dt == graph.Float8E5M2:
					require.True(t, math.IsInf(gv, 0) && math.Signbit(gv) == math.Signbit(v), "%s(%v) is infinite, got %v", dt, v, gv)
				default:
					require.True(t, math.IsNaN(gv), "%s(%v) is NaN without saturation, got %v", dt, v, gv)
				}
			}
			// Every representable value and the midpoints between neighbours (the ties).
			var vals []float64
			for p := range 256 {
				if x := narrowValue(dt, byte(p)); !math.IsNaN(x) && !math.IsInf(x, 0) {
					vals = append(vals, x)
				}
			}
			for i, x := range vals {
				check(x)
				for _, y := range vals[i+1:] {
					check((x + y) / 2)
				}
			}
			for range 20000 {
				// Log-uniform magnitudes across and beyond the type's range, either sign.
				v := math.Ldexp(1+rnd.Float64(), rnd.IntN(44)-26)
				if rnd.IntN(2) == 0 {
					v = -v
				}
				check(v)
				check(float64(float32(v)))
			}
		}
	}
}

// ONNX Cast's tables for NaN, infinities and zeros.
func TestEncodeNarrowSpecialValues(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	for _, tc := range []struct {
		dt   DType
		sat  bool
		v    float64
		want float64 // NaN for NaN
	}{
		{graph.Float8E4M3FN, true, inf, 448}, {graph.Float8E4M3FN, true, -inf, -448}, {graph.Float8E4M3FN, false, inf, nan},
		{graph.Float8E4M3FN, false, 1e6, nan}, {graph.Float8E4M3FN, true, nan, nan}, {graph.Float8E4M3FN, true, 464, 448},
		{graph.Float8E4M3FN, false, 470, nan},
		{graph.Float8E4M3FNUZ, true, inf, 240}, {graph.Float8E4M3FNUZ, false, -inf, nan}, {graph.Float8E4M3FNUZ, true, nan, nan},
		{graph.Float8E5M2, true, inf, 57344}, {graph.Float8E5M2, false, inf, inf}, {graph.Float8E5M2, false, -1e6, -inf},
		{graph.Float8E5M2FNUZ, true, -inf, -57344}, {graph.Float8E5M2FNUZ, false, inf, nan},
		{graph.Float4E2M1, false, inf, 6}, {graph.Float4E2M1, true, -100, -6}, {graph.Float4E2M1, true, 0.25, 0},
		{graph.Float4E2M1, true, 0.2500001, 0.5}, {graph.Float4E2M1, true, 5, 4}, {graph.Float4E2M1, true, 7, 6},
	} {
		got := narrowValue(tc.dt, EncodeNarrow(tc.dt, tc.v, NarrowCast{Saturate: tc.sat}))
		if math.IsNaN(tc.want) {
			assert.True(t, math.IsNaN(got), "%s(%v) saturate %v = %v, want NaN", tc.dt, tc.v, tc.sat, got)
		} else {
			assert.Equal(t, tc.want, got, "%s(%v) saturate %v", tc.dt, tc.v, tc.sat)
		}
	}
	// Negative zero: kept where the type has one, +0 in the FNUZ types.
	assert.Equal(t, byte(0x80), EncodeNarrow(graph.Float8E4M3FN, math.Copysign(0, -1), NarrowCast{Saturate: true}))
	assert.Equal(t, byte(0x00), EncodeNarrow(graph.Float8E4M3FNUZ, math.Copysign(0, -1), NarrowCast{Saturate: true}))
	assert.Equal(t, byte(0x00), EncodeNarrow(graph.Float8E5M2FNUZ, -1e-9, NarrowCast{Saturate: true}))
	assert.Equal(t, byte(0x80), EncodeNarrow(graph.Float8E5M2, -1e-9, NarrowCast{Saturate: true}))
}

func TestEncodeE8M0(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		mode string
		sat  bool
		want byte
	}{
		{0, "up", true, 0x00}, {0.124, "up", true, 0x7C}, {0.25, "up", true, 0x7D}, {1.1, "up", true, 0x80},
		{1.1, "down", true, 0x7F}, {1.1, "nearest", true, 0x7F}, {1.5, "nearest", true, 0x80}, {1.4, "nearest", true, 0x7F},
		{8, "", true, 0x82}, {math.Inf(1), "up", true, 0xFE}, {math.Inf(1), "up", false, 0xFF}, {math.NaN(), "up", true, 0xFF},
		{1.5 * math.Ldexp(1, 127), "up", true, 0xFE}, {1.5 * math.Ldexp(1, 127), "up", false, 0xFF}, {1e300, "down", true, 0xFE},
	} {
		assert.Equal(t, tc.want, EncodeNarrow(graph.Float8E8M0, tc.v, NarrowCast{Saturate: tc.sat, RoundMode: tc.mode}), "%v %s saturate %v", tc.v, tc.mode, tc.sat)
	}
	for p := range 255 { // every finite pattern round-trips (2^-127 is a float32 subnormal: "up" takes it to 2^-126)
		for _, mode := range []string{"up", "down", "nearest"} {
			want := byte(p)
			if p == 0 && mode == "up" {
				want = 1
			}
			assert.Equal(t, want, EncodeNarrow(graph.Float8E8M0, narrowValue(graph.Float8E8M0, byte(p)), NarrowCast{Saturate: true, RoundMode: mode}), "%#x %s", p, mode)
		}
	}
	require.Error(t, CheckRoundMode("sideways"))
}

func TestNarrowIntegersWrap(t *testing.T) {
	for v := -20; v <= 20; v++ {
		assert.Equal(t, (v+8)&15-8, ToInt4(v).Int(), "int4 %d", v)
		assert.Equal(t, v&15, ToUint4(v).Int(), "uint4 %d", v)
		assert.Equal(t, (v+2)&3-2, ToInt2(v).Int(), "int2 %d", v)
		assert.Equal(t, v&3, ToUint2(v).Int(), "uint2 %d", v)
		assert.Equal(t, float64(ToInt4(v).Int()), narrowValue(graph.Int4, EncodeNarrow(graph.Int4, float64(v)+0.75*float64(sign(v)), NarrowCast{})), "int4 truncates %d.75", v)
	}
	assert.Equal(t, byte(0), EncodeNarrow(graph.Int4, math.NaN(), NarrowCast{}))
	assert.Equal(t, byte(0), EncodeNarrow(graph.Uint2, math.Inf(-1), NarrowCast{}))
}

func sign(v int) int {
	if v < 0 {
		return -1
	}
	return 1
}

// Packing into TensorProto raw data and back keeps every element, and go/graph's own decoder
// of the packed data reads the values the tensor holds.
func TestNarrowGraphTensorRoundTrip(t *testing.T) {
	seed := rand.Uint64()
	rnd := rand.New(rand.NewPCG(seed, 11))
	for _, dt := range []DType{graph.Int4, graph.Uint4, graph.Int2, graph.Uint2, graph.Float4E2M1, graph.Float8E4M3FN,
		graph.Float8E4M3FNUZ, graph.Float8E5M2, graph.Float8E5M2FNUZ, graph.Float8E8M0} {
		for _, n := range []int{0, 1, 2, 3, 5, 8, 13} {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rnd.IntN(1 << narrowBits(dt)))
			}
			x := Tensor{dtype: dt, shape: []int64{int64(n)}, data: narrowSlice(dt, b)}
			gt, err := ToGraphTensor("x", x)
			require.NoError(t, err)
			require.Len(t, gt.Raw, int(dt.ByteSize(int64(n))), "%s x %d (seed %d)", dt, n, seed)
			back, err := FromGraphTensor(gt)
			require.NoError(t, err)
			got, _, ok := NarrowBytes(back.Data())
			require.True(t, ok)
			require.Equal(t, b, got, "%s x %d (seed %d)", dt, n, seed)
			want, err := gt.Float64s()
			require.NoError(t, err)
			gotv := Float64s(back)
			for i := range want {
				if !(math.IsNaN(want[i]) && math.IsNaN(gotv[i])) {
					require.Equal(t, want[i], gotv[i], "%s element %d", dt, i)
				}
			}
			assert.Equal(t, dt, back.DType())
			assert.Equal(t, int64(n), StorageBytes(dt, int64(n)))
		}
	}
	// Odd element counts carry a half-used last byte; a raw length that does not fit is refused.
	_, err := FromGraphTensor(&graph.Tensor{Name: "w", DType: graph.Int4, Dims: []int64{3}, Raw: []byte{1}})
	require.ErrorContains(t, err, `constant "w": 1 bytes for 3 elements of int4`)
}
