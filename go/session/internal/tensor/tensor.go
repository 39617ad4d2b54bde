package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/loomrt/loom/go/graph"
)

// DType is an ONNX tensor element type (the values of TensorProto.DataType).
type DType = graph.DataType

// Float16 is an IEEE 754 half-precision number, stored as its bits.
type Float16 uint16

// BFloat16 is a bfloat16 number (the upper half of a float32), stored as its bits.
type BFloat16 uint16

// Float32 widens h to float32.
func (h Float16) Float32() float32 { return graph.Float16ToFloat32(uint16(h)) }

// Float32 widens h to float32.
func (h BFloat16) Float32() float32 { return graph.BFloat16ToFloat32(uint16(h)) }

// ToFloat16 rounds f to the nearest half-precision number.
func ToFloat16(f float32) Float16 { return Float16(graph.Float32ToFloat16(f)) }

// ToBFloat16 rounds f to the nearest bfloat16 number.
func ToBFloat16(f float32) BFloat16 { return BFloat16(graph.Float32ToBFloat16(f)) }

// Element is the set of Go types a Tensor can hold, one per ONNX element type.
type Element interface {
	float32 | float64 | Float16 | BFloat16 | int8 | int16 | int32 | int64 |
		uint8 | uint16 | uint32 | uint64 | bool | string |
		Float8E4M3FN | Float8E4M3FNUZ | Float8E5M2 | Float8E5M2FNUZ | Float8E8M0 | Float4E2M1 |
		Int4 | Uint4 | Int2 | Uint2
}

// Tensor is a dense, row-major tensor: an element type, a shape and a Go slice of elements.
// It is a small value; copies share the elements. Tensors returned by Run belong to the
// caller; tensors passed to Run are only read.
type Tensor struct {
	dtype DType
	shape []int64
	data  any // one of the slice types of Element
	// box, when set, makes this a sequence or an optional flowing through the interpreter
	// (dtype is then the element type of the tensors inside, shape and data are unset); see
	// Value. Only the ops with the TakesValues trait (graph.OpTraits) accept one, so every other op sees plain tensors.
	box *composite
	// relaid, when set, holds a float32 constant's elements in a layout of its own (data is
	// then nil; see Relaid).
	relaid *Relaid
}

// NamedTensor is a tensor bound to a graph input name (or, for RunInto, an output name).
type NamedTensor struct {
	Name   string
	Tensor Tensor
}

// DTypeOf returns the element type that Go type T stands for.
func DTypeOf[T Element]() DType {
	return dtypeOfSlice([]T(nil))
}

func dtypeOfSlice(s any) DType {
	if _, dt, ok := NarrowBytes(s); ok {
		return dt
	}
	switch s.(type) {
	case []float32:
		return graph.Float
	case []float64:
		return graph.Double
	case []Float16:
		return graph.Float16
	case []BFloat16:
		return graph.BFloat16
	case []int8:
		return graph.Int8
	case []int16:
		return graph.Int16
	case []int32:
		return graph.Int32
	case []int64:
		return graph.Int64
	case []uint8:
		return graph.Uint8
	case []uint16:
		return graph.Uint16
	case []uint32:
		return graph.Uint32
	case []uint64:
		return graph.Uint64
	case []bool:
		return graph.Bool
	case []string:
		return graph.String
	}
	return graph.Undefined
}

// NewTensor wraps data (not copied) as a tensor of the given shape. The element count must
// match the shape and no dimension may be negative; otherwise the error is an *Error matching
// ErrInvalidArgument.
func NewTensor[T Element](shape []int64, data []T) (Tensor, error) {
	n, err := ElementCount(shape)
	if err != nil {
		return Tensor{}, WrapError("NewTensor", ErrInvalidArgument, err, "")
	}
	if int64(len(data)) != n {
		return Tensor{}, NewError("NewTensor", ErrInvalidArgument, "tensor of shape %v needs %d elements, got %d", shape, n, len(data))
	}
	if data == nil {
		data = []T{}
	}
	return Tensor{dtype: DTypeOf[T](), shape: append([]int64{}, shape...), data: data}, nil
}

// MustTensor is NewTensor that panics (with NewTensor's *Error) on a shape mismatch; for
// literals in tests and examples.
func MustTensor[T Element](shape []int64, data []T) Tensor {
	t, err := NewTensor(shape, data)
	if err != nil {
		panic(err)
	}
	return t
}

// TensorOf returns the elements of t without copying, or an *Error matching
// ErrInvalidArgument when T is not t's element type.
func TensorOf[T Element](t Tensor) ([]T, error) {
	s, ok := t.elems().([]T)
	if !ok {
		if !t.IsValid() {
			return nil, NewError("TensorOf", ErrInvalidArgument, "empty tensor (the zero Tensor)")
		}
		if t.box != nil {
			return nil, NewError("TensorOf", ErrInvalidArgument, "the value is %s, not a tensor", t)
		}
		return nil, NewError("TensorOf", ErrInvalidArgument, "tensor holds %s elements, not %s", t.dtype, DTypeOf[T]())
	}
	return s, nil
}

// Zeros returns a tensor of zero values (false, "") of the given type and shape; a negative
// dimension or an unsupported type is an *Error matching ErrInvalidArgument.
func Zeros(dtype DType, shape []int64) (Tensor, error) {
	n, err := ElementCount(shape)
	if err != nil {
		return Tensor{}, WrapError("Zeros", ErrInvalidArgument, err, "")
	}
	data, err := MakeSlice(dtype, int(n))
	if err != nil {
		return Tensor{}, WrapError("Zeros", ErrInvalidArgument, err, "")
	}
	return Tensor{dtype: dtype, shape: append([]int64{}, shape...), data: data}, nil
}

// DType is the element type.
func (t Tensor) DType() DType { return t.dtype }

// Shape is the tensor's shape (a copy).
func (t Tensor) Shape() []int64 { return append([]int64{}, t.shape...) }

// Rank is the number of dimensions.
func (t Tensor) Rank() int { return len(t.shape) }

// Len is the number of elements.
func (t Tensor) Len() int {
	if t.relaid != nil {
		return t.relaid.n
	}
	return sliceLen(t.data)
}

// Data is the element slice as an any ([]float32, []int64, ...), not copied (except for a
// weight the session holds in a layout of its own, unpacked into a new slice: see Relaid).
func (t Tensor) Data() any { return t.elems() }

// Float64s returns a copy of t's elements widened to float64 (bool as 0 and 1, the narrow
// types decoded from their bits); nil for strings, sequences, optionals and the zero Tensor.
func (t Tensor) Float64s() []float64 {
	if !t.IsValid() || t.box != nil || t.dtype == graph.String {
		return nil
	}
	return Float64s(t)
}

// IsValid reports whether t holds elements (the zero Tensor does not).
func (t Tensor) IsValid() bool { return t.data != nil || t.box != nil || t.relaid != nil }

// String describes the type and shape, as tensor(float)[2,3].
func (t Tensor) String() string {
	if t.box != nil {
		return Describe(t.box, t.dtype)
	}
	return fmt.Sprintf("tensor(%s)%v", t.dtype, t.shape)
}

func ElementCount(shape []int64) (int64, error) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension %d in shape %v", d, shape)
		}
		if d != 0 && n > math.MaxInt32*int64(64)/d {
			return 0, fmt.Errorf("shape %v has too many elements", shape)
		}
		n *= d
	}
	return n, nil
}

func MakeSlice(dtype DType, n int) (any, error) {
	if IsNarrow(dtype) {
		return narrowSlice(dtype, make([]byte, n)), nil
	}
	switch dtype {
	case graph.Float:
		return make([]float32, n), nil
	case graph.Double:
		return make([]float64, n), nil
	case graph.Float16:
		return make([]Float16, n), nil
	case graph.BFloat16:
		return make([]BFloat16, n), nil
	case graph.Int8:
		return make([]int8, n), nil
	case graph.Int16:
		return make([]int16, n), nil
	case graph.Int32:
		return make([]int32, n), nil
	case graph.Int64:
		return make([]int64, n), nil
	case graph.Uint8:
		return make([]uint8, n), nil
	case graph.Uint16:
		return make([]uint16, n), nil
	case graph.Uint32:
		return make([]uint32, n), nil
	case graph.Uint64:
		return make([]uint64, n), nil
	case graph.Bool:
		return make([]bool, n), nil
	case graph.String:
		return make([]string, n), nil
	}
	return nil, fmt.Errorf("element type %s is not supported", dtype)
}

func sliceLen(s any) int {
	if b, _, ok := NarrowBytes(s); ok {
		return len(b)
	}
	switch v := s.(type) {
	case []float32:
		return len(v)
	case []float64:
		return len(v)
	case []Float16:
		return len(v)
	case []BFloat16:
		return len(v)
	case []int8:
		return len(v)
	case []int16:
		return len(v)
	case []int32:
		return len(v)
	case []int64:
		return len(v)
	case []uint8:
		return len(v)
	case []uint16:
		return len(v)
	case []uint32:
		return len(v)
	case []uint64:
		return len(v)
	case []bool:
		return len(v)
	case []string:
		return len(v)
	}
	return 0
}

// weightTensor is FromGraphTensor without the copy where it can: a numeric constant whose
// packed little-endian bytes the model carries inline (in the Go heap, or in the memory its
// file's loader keeps outside it, graph's weight store; not an mmapped external file), aligned
// for its element type, is viewed in place, so that the session's weights and
// its model's initializers are one copy rather than two (on a 10 MB model, 10 MB of peak
// memory). Only for a model the session owns: nothing writes either side (host functions
// never modify their inputs; kernels read uploaded copies or bound weights, which they never
// write), and the model lives as long as the session. Outputs that are weights are copied out.
func WeightTensor(gt *graph.Tensor) (Tensor, error) {
	if !ViewableConstant(gt) {
		return FromGraphTensor(gt)
	}
	return ViewBytes(gt.DType, append([]int64{}, gt.Dims...), gt.Raw), nil
}

// nativeLittleEndian says whether this machine stores numbers as ONNX's raw data does.
var nativeLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// viewableConstant reports whether gt's raw bytes can back a Tensor as they are.
func ViewableConstant(gt *graph.Tensor) bool {
	switch gt.DType {
	case graph.Float, graph.Double, graph.Float16, graph.BFloat16, graph.Int8, graph.Int16, graph.Int32,
		graph.Int64, graph.Uint8, graph.Uint16, graph.Uint32, graph.Uint64:
	default:
		return false // bool bytes may hold values other than 0 and 1; strings and others are decoded
	}
	size := int64(gt.DType.BitSize() / 8)
	n := gt.NumElements()
	return nativeLittleEndian && gt.Ref.Inline() && n > 0 && int64(len(gt.Raw)) == n*size &&
		uintptr(unsafe.Pointer(&gt.Raw[0]))%uintptr(size) == 0
}

// FromGraphTensor decodes a constant of a model (an initializer or a Constant's value) into a
// Tensor, copying its elements; a malformed constant is an *Error matching ErrInvalidArgument.
func FromGraphTensor(gt *graph.Tensor) (Tensor, error) {
	n := gt.NumElements()
	shape := append([]int64{}, gt.Dims...)
	if gt.DType == graph.String {
		s := make([]string, len(gt.Strings))
		for i, b := range gt.Strings {
			s[i] = string(b)
		}
		if int64(len(s)) != n {
			return Tensor{}, NewError("FromGraphTensor", ErrInvalidArgument, "constant %q: %d strings for shape %v", gt.Name, len(s), shape)
		}
		return Tensor{dtype: graph.String, shape: shape, data: s}, nil
	}
	if IsNarrow(gt.DType) {
		if int64(len(gt.Raw)) != gt.DType.ByteSize(n) {
			return Tensor{}, NewError("FromGraphTensor", ErrInvalidArgument, "constant %q: %d bytes for %d elements of %s", gt.Name, len(gt.Raw), n, gt.DType)
		}
		return Tensor{dtype: gt.DType, shape: shape, data: narrowSlice(gt.DType, unpackNarrow(gt.DType, gt.Raw, int(n)))}, nil
	}
	data, err := MakeSlice(gt.DType, int(n))
	if err != nil {
		return Tensor{}, WrapError("FromGraphTensor", ErrInvalidArgument, err, "constant %q", gt.Name)
	}
	size := gt.DType.BitSize() / 8
	if int64(len(gt.Raw)) != n*int64(size) {
		return Tensor{}, NewError("FromGraphTensor", ErrInvalidArgument, "constant %q: %d bytes for %d elements of %s", gt.Name, len(gt.Raw), n, gt.DType)
	}
	raw, le := gt.Raw, binary.LittleEndian
	switch v := data.(type) {
	case []float32:
		for i := range v {
			v[i] = math.Float32frombits(le.Uint32(raw[4*i:]))
		}
	case []float64:
		for i := range v {
			v[i] = math.Float64frombits(le.Uint64(raw[8*i:]))
		}
	case []Float16:
		for i := range v {
			v[i] = Float16(le.Uint16(raw[2*i:]))
		}
	case []BFloat16:
		for i := range v {
			v[i] = BFloat16(le.Uint16(raw[2*i:]))
		}
	case []int8:
		for i := range v {
			v[i] = int8(raw[i])
		}
	case []int16:
		for i := range v {
			v[i] = int16(le.Uint16(raw[2*i:]))
		}
	case []int32:
		for i := range v {
			v[i] = int32(le.Uint32(raw[4*i:]))
		}
	case []int64:
		for i := range v {
			v[i] = int64(le.Uint64(raw[8*i:]))
		}
	case []uint8:
		copy(v, raw)
	case []uint16:
		for i := range v {
			v[i] = le.Uint16(raw[2*i:])
		}
	case []uint32:
		for i := range v {
			v[i] = le.Uint32(raw[4*i:])
		}
	case []uint64:
		for i := range v {
			v[i] = le.Uint64(raw[8*i:])
		}
	case []bool:
		for i := range v {
			v[i] = raw[i] != 0
		}
	}
	return Tensor{dtype: gt.DType, shape: shape, data: data}, nil
}

// float64s widens every element to float64 (bool as 0/1); strings are refused by callers.
func Float64s(t Tensor) []float64 {
	out := make([]float64, t.Len())
	if b, dt, ok := NarrowBytes(t.elems()); ok {
		tab := narrowTables[dt]
		for i, x := range b {
			out[i] = tab[x]
		}
		return out
	}
	switch v := t.elems().(type) {
	case []float32:
		for i, x := range v {
			out[i] = float64(x)
		}
	case []float64:
		copy(out, v)
	case []Float16:
		for i, x := range v {
			out[i] = float64(x.Float32())
		}
	case []BFloat16:
		for i, x := range v {
			out[i] = float64(x.Float32())
		}
	case []int8:
		for i, x := range v {
			out[i] = float64(x)
		}
	case []int16:
		for i, x := range v {
			out[i] = float64(x)
		}
	case []int32:
		for i, x := range v {
			out[i] = float64(x)
		}
	case []int64:
		for i, x := range v {
			out[i] = float64(x)
		}
	case []uint8:
		for i, x := range v {
			out[i] = float64(x)
		}
	case []uint16:
		for i, x := range v {
			out[i] = float64(x)
		}
	case []uint32:
		for i, x := range v {
			out[i] = float64(x)
		}
	case []uint64:
		for i, x := range v {
			out[i] = float64(x)
		}
	case []bool:
		for i, x := range v {
			if x {
				out[i] = 1
			}
		}
	}
	return out
}

// int64s returns integer or bool elements exactly as int64 (floats truncated).
func Int64s(t Tensor) []int64 {
	if v, ok := t.data.([]int64); ok {
		return v
	}
	out := make([]int64, t.Len())
	switch v := t.elems().(type) {
	case []int32:
		for i, x := range v {
			out[i] = int64(x)
		}
	case []uint64:
		for i, x := range v {
			out[i] = int64(x)
		}
	default:
		for i, x := range Float64s(t) {
			out[i] = int64(x)
		}
	}
	return out
}

// fromFloat64s builds a tensor of dtype from float64 values: floats round, integers convert
// with Go's truncation and wrap-around (saturating NaN to 0), bool is v != 0. As NewTensor,
// it refuses values whose count does not match the shape.
func FromFloat64s(dtype DType, shape []int64, vals []float64) (Tensor, error) {
	if n, err := ElementCount(shape); err != nil || n != int64(len(vals)) {
		return Tensor{}, NewError("FromFloat64s", ErrInvalidArgument, "tensor(%s) of shape %v needs %d elements, got %d", dtype, shape, n, len(vals))
	}
	if IsNarrow(dtype) {
		return FromFloat64sNarrow(dtype, shape, vals, NarrowCast{Saturate: true})
	}
	data, err := MakeSlice(dtype, len(vals))
	if err != nil {
		return Tensor{}, err
	}
	switch v := data.(type) {
	case []float32:
		for i, x := range vals {
			v[i] = float32(x)
		}
	case []float64:
		copy(v, vals)
	case []Float16:
		for i, x := range vals {
			v[i] = ToFloat16(float32(x))
		}
	case []BFloat16:
		for i, x := range vals {
			v[i] = ToBFloat16(float32(x))
		}
	case []int8:
		for i, x := range vals {
			v[i] = int8(toInt(x))
		}
	case []int16:
		for i, x := range vals {
			v[i] = int16(toInt(x))
		}
	case []int32:
		for i, x := range vals {
			v[i] = int32(toInt(x))
		}
	case []int64:
		for i, x := range vals {
			v[i] = toInt(x)
		}
	case []uint8:
		for i, x := range vals {
			v[i] = uint8(toInt(x))
		}
	case []uint16:
		for i, x := range vals {
			v[i] = uint16(toInt(x))
		}
	case []uint32:
		for i, x := range vals {
			v[i] = uint32(toInt(x))
		}
	case []uint64:
		for i, x := range vals {
			if x >= 1<<63 {
				v[i] = uint64(x)
			} else {
				v[i] = uint64(toInt(x))
			}
		}
	case []bool:
		for i, x := range vals {
			v[i] = x != 0
		}
	case []string:
		return Tensor{}, fmt.Errorf("cannot compute string elements numerically")
	}
	return Tensor{dtype: dtype, shape: append([]int64{}, shape...), data: data}, nil
}

func toInt(x float64) int64 {
	if math.IsNaN(x) {
		return 0
	}
	if x >= math.MaxInt64 {
		return math.MaxInt64
	}
	if x <= math.MinInt64 {
		return math.MinInt64
	}
	return int64(x)
}

// take builds a tensor of t's type whose i-th element is t's element idx[i].
func Take(t Tensor, shape []int64, idx []int) Tensor {
	out := Tensor{dtype: t.dtype, shape: append([]int64{}, shape...)}
	if b, dt, ok := NarrowBytes(t.elems()); ok {
		out.data = narrowSlice(dt, takeSlice(b, idx))
		return out
	}
	switch v := t.elems().(type) {
	case []float32:
		out.data = takeSlice(v, idx)
	case []float64:
		out.data = takeSlice(v, idx)
	case []Float16:
		out.data = takeSlice(v, idx)
	case []BFloat16:
		out.data = takeSlice(v, idx)
	case []int8:
		out.data = takeSlice(v, idx)
	case []int16:
		out.data = takeSlice(v, idx)
	case []int32:
		out.data = takeSlice(v, idx)
	case []int64:
		out.data = takeSlice(v, idx)
	case []uint8:
		out.data = takeSlice(v, idx)
	case []uint16:
		out.data = takeSlice(v, idx)
	case []uint32:
		out.data = takeSlice(v, idx)
	case []uint64:
		out.data = takeSlice(v, idx)
	case []bool:
		out.data = takeSlice(v, idx)
	case []string:
		out.data = takeSlice(v, idx)
	}
	return out
}

func takeSlice[T any](s []T, idx []int) []T {
	out := make([]T, len(idx))
	for i, j := range idx {
		out[i] = s[j]
	}
	return out
}

// reshaped returns t viewed with another shape of the same element count (elements shared).
func Reshaped(t Tensor, shape []int64) Tensor {
	return Tensor{dtype: t.dtype, shape: append([]int64{}, shape...), data: t.elems()}
}

// elemString formats element i (for messages and tests).
func (t Tensor) elemString(i int) string {
	switch v := t.elems().(type) {
	case []string:
		return v[i]
	case []bool:
		return fmt.Sprint(v[i])
	}
	return fmt.Sprint(Float64s(t)[i])
}

// Reshaped returns t with another shape of the same element count, sharing the elements.
func (t Tensor) Reshaped(shape ...int64) Tensor {
	if n, err := ElementCount(shape); err != nil || int(n) != t.Len() {
		panic("session: Reshaped changes the element count")
	}
	return Reshaped(t, shape)
}
