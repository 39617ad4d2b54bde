package tensor

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/loomrt/loom/go/graph"
)

// The narrow element types of ONNX: the float8 encodings (opset 19 and 24), the sub-byte
// integers int4, uint4 (opset 21), int2, uint2 (opset 25) and float4e2m1 (opset 23).
//
// In memory a narrow tensor holds one byte per element, the element's bit pattern in the
// byte's low bits (4 for int4, uint4 and float4e2m1, 2 for int2 and uint2, all 8 for the
// float8 types); the upper bits are zero when Loom writes them and ignored when it reads
// them. Models and TensorProto files pack the sub-byte types two or four to a byte:
// FromGraphTensor unpacks them and ToGraphTensor packs them again. Arithmetic on them goes
// through Float64s, which decodes the bit patterns exactly.

// Float8E4M3FN is a float8 with 4 exponent bits and 3 mantissa bits, no infinities and one
// NaN pattern per sign (ONNX FLOAT8E4M3FN), stored as its bits.
type Float8E4M3FN uint8

// Float8E4M3FNUZ is FLOAT8E4M3FNUZ: exponent bias 8, no infinities, no negative zero, NaN
// as 0x80; stored as its bits.
type Float8E4M3FNUZ uint8

// Float8E5M2 is a float8 with 5 exponent bits and 2 mantissa bits (ONNX FLOAT8E5M2, with
// infinities), stored as its bits.
type Float8E5M2 uint8

// Float8E5M2FNUZ is FLOAT8E5M2FNUZ: exponent bias 16, no infinities, no negative zero, NaN
// as 0x80; stored as its bits.
type Float8E5M2FNUZ uint8

// Float8E8M0 is FLOAT8E8M0, the exponent-only scale type of the microscaling (MX)
// formats: 2^(bits-127), 0xFF is NaN; stored as its bits.
type Float8E8M0 uint8

// Float4E2M1 is FLOAT4E2M1 (2 exponent bits, 1 mantissa bit: ±0, 0.5, 1, 1.5, 2, 3, 4, 6),
// stored as its 4 bits in the low half of a byte.
type Float4E2M1 uint8

// Int4 is a signed 4-bit integer (-8..7), stored as its two's-complement bits in the low
// half of a byte; see ToInt4 and Int.
type Int4 uint8

// Uint4 is an unsigned 4-bit integer (0..15), stored in the low half of a byte.
type Uint4 uint8

// Int2 is a signed 2-bit integer (-2..1), stored as its two's-complement bits in the low two
// bits of a byte; see ToInt2 and Int.
type Int2 uint8

// Uint2 is an unsigned 2-bit integer (0..3), stored in the low two bits of a byte.
type Uint2 uint8

// Float32 widens f.
func (f Float8E4M3FN) Float32() float32 { return float32(narrowValue(graph.Float8E4M3FN, byte(f))) }

// Float32 widens f.
func (f Float8E4M3FNUZ) Float32() float32 {
	return float32(narrowValue(graph.Float8E4M3FNUZ, byte(f)))
}

// Float32 widens f.
func (f Float8E5M2) Float32() float32 { return float32(narrowValue(graph.Float8E5M2, byte(f))) }

// Float32 widens f.
func (f Float8E5M2FNUZ) Float32() float32 {
	return float32(narrowValue(graph.Float8E5M2FNUZ, byte(f)))
}

// Float32 widens f (2^-127 is a float32 subnormal, kept exactly).
func (f Float8E8M0) Float32() float32 { return float32(narrowValue(graph.Float8E8M0, byte(f))) }

// Float32 widens f.
func (f Float4E2M1) Float32() float32 { return float32(narrowValue(graph.Float4E2M1, byte(f))) }

// Int is v's value, -8..7.
func (v Int4) Int() int { return int(narrowValue(graph.Int4, byte(v))) }

// Int is v's value, 0..15.
func (v Uint4) Int() int { return int(v & 0xF) }

// Int is v's value, -2..1.
func (v Int2) Int() int { return int(narrowValue(graph.Int2, byte(v))) }

// Int is v's value, 0..3.
func (v Uint2) Int() int { return int(v & 3) }

// ToInt4 keeps the low 4 bits of v's two's complement (8 becomes -8), as Cast does.
func ToInt4(v int) Int4 { return Int4(v & 0xF) }

// ToUint4 keeps the low 4 bits of v.
func ToUint4(v int) Uint4 { return Uint4(v & 0xF) }

// ToInt2 keeps the low 2 bits of v's two's complement (2 becomes -2), as Cast does.
func ToInt2(v int) Int2 { return Int2(v & 3) }

// ToUint2 keeps the low 2 bits of v.
func ToUint2(v int) Uint2 { return Uint2(v & 3) }

// ToFloat8E4M3FN rounds f to the nearest FLOAT8E4M3FN (ties to even), saturating values
// beyond ±448 and infinities to ±448, as Cast does by default.
func ToFloat8E4M3FN(f float32) Float8E4M3FN {
	return Float8E4M3FN(EncodeNarrow(graph.Float8E4M3FN, float64(f), NarrowCast{Saturate: true}))
}

// ToFloat8E5M2 rounds f to the nearest FLOAT8E5M2 (ties to even), saturating to ±57344.
func ToFloat8E5M2(f float32) Float8E5M2 {
	return Float8E5M2(EncodeNarrow(graph.Float8E5M2, float64(f), NarrowCast{Saturate: true}))
}

// ToFloat4E2M1 rounds f to the nearest FLOAT4E2M1 (ties to even), saturating to ±6.
func ToFloat4E2M1(f float32) Float4E2M1 {
	return Float4E2M1(EncodeNarrow(graph.Float4E2M1, float64(f), NarrowCast{Saturate: true}))
}

// IsNarrow reports whether dt is one of the narrow types above (one byte per element in
// memory, a bit pattern of 8 bits or fewer).
func IsNarrow(dt DType) bool {
	switch dt {
	case graph.Float8E4M3FN, graph.Float8E4M3FNUZ, graph.Float8E5M2, graph.Float8E5M2FNUZ, graph.Float8E8M0,
		graph.Float4E2M1, graph.Int4, graph.Uint4, graph.Int2, graph.Uint2:
		return true
	}
	return false
}

// StorageBytes is the memory n elements of dt take in a Tensor, an arena slot or a device
// buffer: dt.ByteSize(n) but for the sub-byte types, which take a byte each (see above);
// strings have no fixed size (0).
func StorageBytes(dt DType, n int64) int64 {
	if IsNarrow(dt) {
		return n
	}
	if dt == graph.String {
		return 0
	}
	return dt.ByteSize(n)
}

// narrowBits is the width of dt's bit pattern.
func narrowBits(dt DType) uint {
	switch dt {
	case graph.Int4, graph.Uint4, graph.Float4E2M1:
		return 4
	case graph.Int2, graph.Uint2:
		return 2
	}
	return 8
}

// narrowTables holds every narrow type's 256 byte values decoded (upper bits ignored).
var narrowTables = func() map[DType]*[256]float64 {
	m := map[DType]*[256]float64{}
	for _, dt := range []DType{graph.Float8E4M3FN, graph.Float8E4M3FNUZ, graph.Float8E5M2, graph.Float8E5M2FNUZ,
		graph.Float8E8M0, graph.Float4E2M1, graph.Int4, graph.Uint4, graph.Int2, graph.Uint2} {
		var tab [256]float64
		bits := narrowBits(dt)
		for b := range 256 {
			v := byte(b) & byte(1<<bits-1)
			switch dt {
			case graph.Int4:
				tab[b] = float64(int8(v<<4) >> 4)
			case graph.Int2:
				tab[b] = float64(int8(v<<6) >> 6)
			case graph.Uint4, graph.Uint2:
				tab[b] = float64(v)
			case graph.Float4E2M1:
				mag := [8]float64{0, 0.5, 1, 1.5, 2, 3, 4, 6}[v&7]
				if v&8 != 0 {
					mag = -mag
				}
				tab[b] = mag
			case graph.Float8E8M0:
				if v == 0xFF {
					tab[b] = math.NaN()
				} else {
					tab[b] = math.Ldexp(1, int(v)-127)
				}
			default:
				tab[b] = float64(graph.Float8ToFloat32(dt, v))
			}
		}
		m[dt] = &tab
	}
	return m
}()

// narrowValue decodes one element of a narrow type.
func narrowValue(dt DType, b byte) float64 { return narrowTables[dt][b] }

// NarrowCast says how a value that does not fit a narrow float type converts (Cast's
// saturate and round_mode attributes).
type NarrowCast struct {
	// Saturate clamps finite values beyond the type's range, and infinities, to its largest
	// finite value; otherwise they become NaN (or infinity for float8e5m2). Sub-byte and
	// integer types ignore it.
	Saturate bool
	// RoundMode is float8e8m0's rounding: "up" (the default, ""), "down" or "nearest".
	RoundMode string
}

// float8Format describes a float8 encoding with a sign, expBits exponent bits and 7-expBits
// mantissa bits.
type float8Format struct {
	expBits, bias int
	fnuz          bool    // no negative zero, no infinities, NaN is 0x80
	max           float64 // the largest finite value
}

var float8Formats = map[DType]float8Format{
	graph.Float8E4M3FN:   {expBits: 4, bias: 7, max: 448},
	graph.Float8E4M3FNUZ: {expBits: 4, bias: 8, fnuz: true, max: 240},
	graph.Float8E5M2:     {expBits: 5, bias: 15, max: 57344},
	graph.Float8E5M2FNUZ: {expBits: 5, bias: 16, fnuz: true, max: 57344},
	graph.Float4E2M1:     {expBits: 2, bias: 1, max: 6}, // 3 bits of magnitude below the sign
}

// EncodeNarrow converts v to dt's bit pattern, as ONNX's Cast defines it: float types round
// to nearest, ties to even, with the float8 rules for NaN, infinities and values out of range
// (ONNX Cast's tables; float4e2m1, which has neither NaN nor infinity, always saturates and
// takes NaN to a zero, as ONNX's reference implementation does); float8e8m0 rounds as
// c.RoundMode says; the integer types truncate toward zero and keep the low bits of the two's
// complement (an integer out of range wraps, as for the other integer types).
func EncodeNarrow(dt DType, v float64, c NarrowCast) byte {
	switch dt {
	case graph.Int4, graph.Uint4, graph.Int2, graph.Uint2:
		mask := byte(1<<narrowBits(dt) - 1)
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) >= 1<<62 {
			return 0
		}
		return byte(int64(v)) & mask
	case graph.Float8E8M0:
		return encodeE8M0(v, c)
	}
	f, ok := float8Formats[dt]
	if !ok {
		return 0
	}
	var signBit byte = 0x80
	mantBits := 7 - f.expBits
	if dt == graph.Float4E2M1 {
		signBit, mantBits = 0x8, 1
	}
	neg := math.Signbit(v)
	sign := byte(0)
	if neg {
		sign = signBit
	}
	nan := func() byte {
		switch {
		case f.fnuz:
			return 0x80
		case dt == graph.Float8E5M2:
			return sign | 0x7E
		}
		return sign | 0x7F
	}
	over := func() byte { // a value beyond the largest finite one
		switch {
		case c.Saturate || dt == graph.Float4E2M1:
			return sign | encodeMagnitude(f.max, f, mantBits)
		case dt == graph.Float8E5M2:
			return sign | 0x7C
		}
		return nan()
	}
	switch {
	case math.IsNaN(v):
		if dt == graph.Float4E2M1 {
			return signBit ^ sign // ONNX's reference (ml_dtypes) turns NaN into a zero of the other sign
		}
		return nan()
	case math.IsInf(v, 0):
		return over()
	}
	a := math.Abs(v)
	emin := 1 - f.bias
	_, e := math.Frexp(a) // a = frac * 2^e, frac in [0.5, 1)
	e--                   // a = 1.x * 2^e
	if a == 0 || e < emin {
		e = emin
	}
	q := math.Ldexp(1, e-mantBits) // the spacing of representable values at a's exponent
	r := math.RoundToEven(a/q) * q
	if r > f.max {
		return over()
	}
	if r == 0 {
		if f.fnuz {
			return 0
		}
		return sign
	}
	return sign | encodeMagnitude(r, f, mantBits)
}

// encodeMagnitude is the bit pattern of a positive value r representable in f.
func encodeMagnitude(r float64, f float8Format, mantBits int) byte {
	emin := 1 - f.bias
	frac, e := math.Frexp(r)
	e--
	if e < emin { // subnormal: exponent field 0
		return byte(math.Ldexp(r, mantBits-emin))
	}
	mant := int(math.Ldexp(frac*2-1, mantBits))
	return byte((e+f.bias)<<mantBits | mant)
}

// encodeE8M0 converts v to float8e8m0 as ONNX's Cast does: from v's float32 exponent, rounded
// up (any fraction moves to the next power of two), down (dropped) or to nearest; with
// saturation the largest exponent (0xFE) does not round up to NaN, and infinities become
// 0xFE; without it they are NaN. The sign is ignored (the spec leaves negative values
// undefined); zero and values below 2^-127 become 2^-127 (0x00), or round up from it.
func encodeE8M0(v float64, c NarrowCast) byte {
	if math.IsNaN(v) {
		return 0xFF
	}
	if math.IsInf(v, 0) {
		if c.Saturate {
			return 0xFE
		}
		return 0xFF
	}
	b := math.Float32bits(float32(v))
	exp := b >> 23 & 0xFF
	if exp == 0xFF { // finite in float64, infinite in float32
		if c.Saturate {
			return 0xFE
		}
		return 0xFF
	}
	up := false
	switch c.RoundMode {
	case "", "up":
		up = b&0x7FFFFF != 0
	case "nearest":
		g, r, s := b&0x400000 != 0, b&0x200000 != 0, b&0x1FFFFF != 0
		up = g && (r || s || exp > 0)
	}
	if up && !(c.Saturate && exp == 0xFE) {
		exp++
	}
	return byte(exp)
}

// CheckRoundMode validates Cast's round_mode attribute.
func CheckRoundMode(mode string) error {
	switch mode {
	case "", "up", "down", "nearest":
		return nil
	}
	return fmt.Errorf("round_mode %q is not one of up, down, nearest", mode)
}

// narrowSlice wraps b (not copied) as the Go slice type of dt, a narrow type.
func narrowSlice(dt DType, b []byte) any {
	p := unsafe.SliceData(b)
	switch dt {
	case graph.Float8E4M3FN:
		return unsafe.Slice((*Float8E4M3FN)(p), len(b))
	case graph.Float8E4M3FNUZ:
		return unsafe.Slice((*Float8E4M3FNUZ)(p), len(b))
	case graph.Float8E5M2:
		return unsafe.Slice((*Float8E5M2)(p), len(b))
	case graph.Float8E5M2FNUZ:
		return unsafe.Slice((*Float8E5M2FNUZ)(p), len(b))
	case graph.Float8E8M0:
		return unsafe.Slice((*Float8E8M0)(p), len(b))
	case graph.Float4E2M1:
		return unsafe.Slice((*Float4E2M1)(p), len(b))
	case graph.Int4:
		return unsafe.Slice((*Int4)(p), len(b))
	case graph.Uint4:
		return unsafe.Slice((*Uint4)(p), len(b))
	case graph.Int2:
		return unsafe.Slice((*Int2)(p), len(b))
	case graph.Uint2:
		return unsafe.Slice((*Uint2)(p), len(b))
	}
	return nil
}

// NarrowBytes views the elements of a narrow slice (one of the types above) as bytes, not
// copied; ok is false for any other slice.
func NarrowBytes(data any) (b []byte, dt DType, ok bool) {
	switch v := data.(type) {
	case []Float8E4M3FN:
		return unsafe.Slice((*byte)(unsafe.SliceData(v)), len(v)), graph.Float8E4M3FN, true
	case []Float8E4M3FNUZ:
		return unsafe.Slice((*byte)(unsafe.SliceData(v)), len(v)), graph.Float8E4M3FNUZ, true
	case []Float8E5M2:
		return unsafe.Slice((*byte)(unsafe.SliceData(v)), len(v)), graph.Float8E5M2, true
	case []Float8E5M2FNUZ:
		return unsafe.Slice((*byte)(unsafe.SliceData(v)), len(v)), graph.Float8E5M2FNUZ, true
	case []Float8E8M0:
		return unsafe.Slice((*byte)(unsafe.SliceData(v)), len(v)), graph.Float8E8M0, true
	case []Float4E2M1:
		return unsafe.Slice((*byte)(unsafe.SliceData(v)), len(v)), graph.Float4E2M1, true
	case []Int4:
		return unsafe.Slice((*byte)(unsafe.SliceData(v)), len(v)), graph.Int4, true
	case []Uint4:
		return unsafe.Slice((*byte)(unsafe.SliceData(v)), len(v)), graph.Uint4, true
	case []Int2:
		return unsafe.Slice((*byte)(unsafe.SliceData(v)), len(v)), graph.Int2, true
	case []Uint2:
		return unsafe.Slice((*byte)(unsafe.SliceData(v)), len(v)), graph.Uint2, true
	}
	return nil, graph.Undefined, false
}

// unpackNarrow decodes the packed little-endian raw data of n elements of dt (low bits
// first, as TensorProto stores int4, uint4, float4e2m1, int2 and uint2) into one byte each.
func unpackNarrow(dt DType, raw []byte, n int) []byte {
	out := make([]byte, n)
	bits := narrowBits(dt)
	if bits == 8 {
		copy(out, raw)
		return out
	}
	per, mask := int(8/bits), byte(1<<bits-1)
	for i := range out {
		out[i] = raw[i/per] >> (bits * uint(i%per)) & mask
	}
	return out
}

// packNarrow is unpackNarrow's inverse: TensorProto's raw data for the elements b of dt.
func packNarrow(dt DType, b []byte) []byte {
	bits := narrowBits(dt)
	if bits == 8 {
		return append([]byte{}, b...)
	}
	out := make([]byte, dt.ByteSize(int64(len(b))))
	per, mask := int(8/bits), byte(1<<bits-1)
	for i, v := range b {
		out[i/per] |= (v & mask) << (bits * uint(i%per))
	}
	return out
}

// ToGraphTensor encodes t (a numeric or bool tensor, not a string, sequence or optional) as a
// model constant named name, its raw data little-endian and the sub-byte types packed.
func ToGraphTensor(name string, t Tensor) (*graph.Tensor, error) {
	if t.box != nil || t.dtype == graph.String || !t.IsValid() {
		return nil, fmt.Errorf("tensor %q: %s cannot be held as raw bytes", name, t)
	}
	var raw []byte
	if b, _, ok := NarrowBytes(t.elems()); ok {
		raw = packNarrow(t.dtype, b)
	} else {
		b, ok := rawBytes(t.elems())
		if !ok {
			return nil, fmt.Errorf("tensor %q: %s cannot be held as raw bytes", name, t)
		}
		raw = append([]byte{}, b...)
		if !nativeLittleEndian {
			return nil, fmt.Errorf("tensor %q: this machine is not little-endian", name)
		}
	}
	return graph.NewTensor(name, t.dtype, t.Shape(), raw)
}

// FromFloat64sNarrow builds a tensor of dtype, a narrow type, from float64 values converted
// as c says (see EncodeNarrow).
func FromFloat64sNarrow(dtype DType, shape []int64, vals []float64, c NarrowCast) (Tensor, error) {
	if n, err := ElementCount(shape); err != nil || n != int64(len(vals)) {
		return Tensor{}, NewError("FromFloat64s", ErrInvalidArgument, "tensor(%s) of shape %v needs %d elements, got %d", dtype, shape, n, len(vals))
	}
	if !IsNarrow(dtype) {
		return Tensor{}, fmt.Errorf("element type %s is not a narrow type", dtype)
	}
	b := make([]byte, len(vals))
	for i, x := range vals {
		b[i] = EncodeNarrow(dtype, x, c)
	}
	return Tensor{dtype: dtype, shape: append([]int64{}, shape...), data: narrowSlice(dtype, b)}, nil
}
