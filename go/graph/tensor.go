package graph

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/loomrt/loom/go/graph/internal/modelmem"
)

// WeightRef says where an initializer's bytes live: inline in the model (Location empty) or a
// span of an external file, Location being relative to the model's directory.
type WeightRef struct {
	Location string
	Offset   int64
	Length   int64
}

// Inline reports whether the bytes were carried inside the model itself.
func (r WeightRef) Inline() bool { return r.Location == "" }

// Tensor is a constant: an initializer, a Constant node's value or a tensor attribute. Numeric,
// bool and sub-byte element types are held as Raw little-endian bytes in ONNX's packed layout
// whatever field the proto used; strings are held in Strings.
type Tensor struct {
	Name    string
	DType   DataType
	Dims    []int64
	Raw     []byte   // packed little-endian elements; may alias an mmapped external file or memory outside the Go heap, valid until the Model's Close (Model.Close)
	Strings [][]byte // elements of a string tensor
	Ref     WeightRef
	Doc     string

	// roomAt, rawLen and roomLen: Raw's first byte, its length and the length of the memory it
	// may grow into (RawRoom), when its loader allocated spare room behind it.
	roomAt          uintptr
	rawLen, roomLen int
	// store is the memory outside the Go heap that Raw lies in, when its loader put it there
	// (modelmem.Store): the tensor keeps it from being released.
	store *modelmem.Store
}

// setRoom records that room bytes of spare memory follow Raw in its allocation.
func (t *Tensor) setRoom(room int) {
	if len(t.Raw) == 0 || cap(t.Raw) < len(t.Raw)+room {
		return
	}
	t.roomAt, t.rawLen, t.roomLen = uintptr(unsafe.Pointer(unsafe.SliceData(t.Raw))), len(t.Raw), len(t.Raw)+room
}

// RawRoom is Raw extended over spare memory its loader allocated behind it (a large 2-D float
// initializer of a model file loaded by mapping: room for a runtime to lay the elements out
// again in place in a somewhat larger layout, such as the host's packed weight panels), or
// Raw itself when there is none or Raw has been replaced or resliced since. The bytes past
// len(Raw) belong to t alone; their contents are unspecified.
func (t *Tensor) RawRoom() []byte {
	if t.roomLen > len(t.Raw) && len(t.Raw) == t.rawLen && len(t.Raw) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(t.Raw))) == t.roomAt && cap(t.Raw) >= t.roomLen {
		return t.Raw[:t.roomLen]
	}
	return t.Raw
}

// NumElements is the product of Dims (1 for a scalar).
func (t *Tensor) NumElements() int64 {
	n, _ := checkedProduct(t.Dims)
	return n
}

// Shape returns the tensor's dimensions as a static Shape.
func (t *Tensor) Shape() Shape { return ShapeOf(t.Dims...) }

// Type returns the tensor's ranked type.
func (t *Tensor) Type() Type { return TensorType(t.DType, t.Shape()) }

// checkedProduct multiplies dims, failing on negative sizes and overflow past 2^62.
func checkedProduct(dims []int64) (int64, error) {
	n := int64(1)
	for _, d := range dims {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension %d", d)
		}
		if d != 0 && n > (1<<62)/d {
			return 0, fmt.Errorf("element count of %v overflows", dims)
		}
		n *= d
	}
	return n, nil
}

// NewTensor returns a tensor over packed little-endian bytes, checking that their length fits
// the element type and dims.
func NewTensor(name string, dtype DataType, dims []int64, raw []byte) (*Tensor, error) {
	if !dtype.Valid() || dtype == String {
		return nil, fmt.Errorf("tensor %q: element type %v cannot be held as raw bytes", name, dtype)
	}
	n, err := checkedProduct(dims)
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", name, err)
	}
	if want := dtype.ByteSize(n); int64(len(raw)) != want {
		return nil, fmt.Errorf("tensor %q: %d bytes of data for %d %v elements (want %d)", name, len(raw), n, dtype, want)
	}
	return &Tensor{Name: name, DType: dtype, Dims: append([]int64{}, dims...), Raw: raw}, nil
}

// TensorFromFloat32 returns a float tensor holding vals.
func TensorFromFloat32(name string, dims []int64, vals []float32) *Tensor {
	raw := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	return &Tensor{Name: name, DType: Float, Dims: append([]int64{}, dims...), Raw: raw}
}

// TensorFromFloat64 returns a double tensor holding vals.
func TensorFromFloat64(name string, dims []int64, vals []float64) *Tensor {
	raw := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(v))
	}
	return &Tensor{Name: name, DType: Double, Dims: append([]int64{}, dims...), Raw: raw}
}

// TensorFromInt64 returns an int64 tensor holding vals.
func TensorFromInt64(name string, dims []int64, vals []int64) *Tensor {
	raw := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(raw[8*i:], uint64(v))
	}
	return &Tensor{Name: name, DType: Int64, Dims: append([]int64{}, dims...), Raw: raw}
}

// TensorFromValues returns a tensor of dtype holding vals converted from float64 (integers
// truncate, bool is v != 0). It supports the types Float64s decodes, except strings.
func TensorFromValues(name string, dtype DataType, dims []int64, vals []float64) (*Tensor, error) {
	size := dtype.BitSize() / 8
	switch dtype {
	case Float, Double, Float16, BFloat16, Int8, Uint8, Bool, Int16, Uint16, Int32, Uint32, Int64, Uint64:
	default:
		// Strings, complex numbers, the float8 types and the sub-byte types.
		return nil, fmt.Errorf("tensor %q: cannot build %v from numbers", name, dtype)
	}
	raw := make([]byte, size*len(vals))
	le := binary.LittleEndian
	for i, v := range vals {
		b := raw[i*size:]
		switch dtype {
		case Float:
			le.PutUint32(b, math.Float32bits(float32(v)))
		case Double:
			le.PutUint64(b, math.Float64bits(v))
		case Float16:
			le.PutUint16(b, Float32ToFloat16(float32(v)))
		case BFloat16:
			le.PutUint16(b, Float32ToBFloat16(float32(v)))
		case Int8, Uint8:
			b[0] = byte(int64(v))
		case Bool:
			if v != 0 {
				b[0] = 1
			} else {
				b[0] = 0
			}
		case Int16, Uint16:
			le.PutUint16(b, uint16(int64(v)))
		case Int32:
			le.PutUint32(b, uint32(int32(int64(v))))
		case Uint32:
			le.PutUint32(b, uint32(int64(v)))
		case Int64:
			le.PutUint64(b, uint64(int64(v)))
		case Uint64:
			le.PutUint64(b, uint64(v))
		}
	}
	return &Tensor{Name: name, DType: dtype, Dims: append([]int64{}, dims...), Raw: raw}, nil
}

// Float64s decodes every element as float64 (bool as 0/1, float16, bfloat16, the float8, 4-bit
// and 2-bit types widened). Strings and complex numbers are refused.
func (t *Tensor) Float64s() ([]float64, error) {
	n := t.NumElements()
	if t.DType == String || t.DType == Complex64 || t.DType == Complex128 || !t.DType.Valid() {
		return nil, fmt.Errorf("tensor %q: %v elements are not real numbers", t.Name, t.DType)
	}
	if int64(len(t.Raw)) != t.DType.ByteSize(n) {
		return nil, fmt.Errorf("tensor %q: %d bytes for %d %v elements", t.Name, len(t.Raw), n, t.DType)
	}
	out := make([]float64, n)
	le := binary.LittleEndian
	r := t.Raw
	for i := range out {
		var v float64
		switch t.DType {
		case Float:
			v = float64(math.Float32frombits(le.Uint32(r[4*i:])))
		case Double:
			v = math.Float64frombits(le.Uint64(r[8*i:]))
		case Float16:
			v = float64(Float16ToFloat32(le.Uint16(r[2*i:])))
		case BFloat16:
			v = float64(BFloat16ToFloat32(le.Uint16(r[2*i:])))
		case Int8:
			v = float64(int8(r[i]))
		case Uint8:
			v = float64(r[i])
		case Bool:
			if r[i] != 0 {
				v = 1
			}
		case Int16:
			v = float64(int16(le.Uint16(r[2*i:])))
		case Uint16:
			v = float64(le.Uint16(r[2*i:]))
		case Int32:
			v = float64(int32(le.Uint32(r[4*i:])))
		case Uint32:
			v = float64(le.Uint32(r[4*i:]))
		case Int64:
			v = float64(int64(le.Uint64(r[8*i:])))
		case Uint64:
			v = float64(le.Uint64(r[8*i:]))
		case Float8E4M3FN, Float8E4M3FNUZ, Float8E5M2, Float8E5M2FNUZ, Float8E8M0:
			v = float64(Float8ToFloat32(t.DType, r[i]))
		case Uint4, Int4, Float4E2M1:
			nib := r[i/2] >> (4 * uint(i%2)) & 0xF
			switch t.DType {
			case Uint4:
				v = float64(nib)
			case Int4:
				v = float64(int8(nib<<4) >> 4)
			default:
				v = float64(float4E2M1ToFloat32(nib))
			}
		case Uint2, Int2:
			crumb := r[i/4] >> (2 * uint(i%4)) & 0x3
			if t.DType == Uint2 {
				v = float64(crumb)
			} else {
				v = float64(int8(crumb<<6) >> 6)
			}
		}
		out[i] = v
	}
	return out, nil
}

// Float32s decodes every element as float32 (see Float64s).
func (t *Tensor) Float32s() ([]float32, error) {
	if t.DType == Float && int64(len(t.Raw)) == 4*t.NumElements() {
		out := make([]float32, len(t.Raw)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Raw[4*i:]))
		}
		return out, nil
	}
	f, err := t.Float64s()
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(f))
	for i, v := range f {
		out[i] = float32(v)
	}
	return out, nil
}

// Int64s decodes integer and bool elements exactly as int64; float types are refused.
func (t *Tensor) Int64s() ([]int64, error) {
	if t.DType.IsFloat() {
		return nil, fmt.Errorf("tensor %q: %v elements are not integers", t.Name, t.DType)
	}
	if t.DType == Int64 || t.DType == Uint64 {
		n := t.NumElements()
		if int64(len(t.Raw)) != 8*n {
			return nil, fmt.Errorf("tensor %q: %d bytes for %d %v elements", t.Name, len(t.Raw), n, t.DType)
		}
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint64(t.Raw[8*i:]))
		}
		return out, nil
	}
	f, err := t.Float64s()
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(f))
	for i, v := range f {
		out[i] = int64(v)
	}
	return out, nil
}

// Float16ToFloat32 widens IEEE half precision bits.
func Float16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1F
	mant := uint32(h) & 0x3FF
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: value = mant * 2^-24
		f := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	case exp == 0x1F:
		return math.Float32frombits(sign | 0x7F800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// Float32ToFloat16 narrows to IEEE half precision with round-to-nearest-even.
func Float32ToFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xFF
	mant := b & 0x7FFFFF
	if exp == 0xFF {
		if mant != 0 {
			return sign | 0x7E00
		}
		return sign | 0x7C00
	}
	e := exp - 127 + 15
	if e >= 0x1F {
		return sign | 0x7C00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		r := mant >> shift
		rem := mant & (1<<shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	rem := mant & 0x1FFF
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++ // may carry into the exponent, which is the correct rounding
	}
	return sign | uint16(r)
}

// BFloat16ToFloat32 widens bfloat16 bits.
func BFloat16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Float32ToBFloat16 narrows to bfloat16 with round-to-nearest-even.
func Float32ToBFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x40
	}
	b += 0x7FFF + (b>>16)&1
	return uint16(b >> 16)
}

// Float8ToFloat32 widens one of the five ONNX float8 encodings.
func Float8ToFloat32(t DataType, v byte) float32 {
	var expBits, bias uint
	fnuz := false
	switch t {
	case Float8E8M0:
		// No sign and no mantissa: 2^(v-127); 0xFF is NaN.
		if v == 0xFF {
			return float32(math.NaN())
		}
		return float32(math.Ldexp(1, int(v)-127))
	case Float8E4M3FN:
		expBits, bias = 4, 7
	case Float8E4M3FNUZ:
		expBits, bias, fnuz = 4, 8, true
	case Float8E5M2:
		expBits, bias = 5, 15
	case Float8E5M2FNUZ:
		expBits, bias, fnuz = 5, 16, true
	default:
		return float32(math.NaN())
	}
	mantBits := 7 - expBits
	neg := v&0x80 != 0
	exp := uint(v>>mantBits) & (1<<expBits - 1)
	mant := uint(v) & (1<<mantBits - 1)
	if fnuz && v == 0x80 {
		return float32(math.NaN())
	}
	if t == Float8E4M3FN && exp == 15 && mant == 7 {
		return float32(math.NaN())
	}
	if t == Float8E5M2 && exp == 31 {
		if mant != 0 {
			return float32(math.NaN())
		}
		if neg {
			return float32(math.Inf(-1))
		}
		return float32(math.Inf(1))
	}
	var f float64
	if exp == 0 {
		f = math.Ldexp(float64(mant), 1-int(bias)-int(mantBits))
	} else {
		f = math.Ldexp(float64(mant|1<<mantBits), int(exp)-int(bias)-int(mantBits))
	}
	if neg {
		f = -f
	}
	return float32(f)
}

func float4E2M1ToFloat32(nib byte) float32 {
	mags := [8]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}
	f := mags[nib&7]
	if nib&8 != 0 {
		f = -f
	}
	return f
}
