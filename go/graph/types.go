package graph

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// DataType is an ONNX tensor element type; the values are those of TensorProto.DataType.
type DataType int32

// The ONNX element types.
const (
	Undefined      DataType = 0
	Float          DataType = 1
	Uint8          DataType = 2
	Int8           DataType = 3
	Uint16         DataType = 4
	Int16          DataType = 5
	Int32          DataType = 6
	Int64          DataType = 7
	String         DataType = 8
	Bool           DataType = 9
	Float16        DataType = 10
	Double         DataType = 11
	Uint32         DataType = 12
	Uint64         DataType = 13
	Complex64      DataType = 14
	Complex128     DataType = 15
	BFloat16       DataType = 16
	Float8E4M3FN   DataType = 17
	Float8E4M3FNUZ DataType = 18
	Float8E5M2     DataType = 19
	Float8E5M2FNUZ DataType = 20
	Uint4          DataType = 21
	Int4           DataType = 22
	Float4E2M1     DataType = 23
	Float8E8M0     DataType = 24 // exponent only (MX scales): 2^(e-127), 0xFF is NaN
	Uint2          DataType = 25 // four to a byte, the first in the low bits
	Int2           DataType = 26
)

var dataTypeNames = map[DataType]string{
	Undefined: "undefined", Float: "float", Uint8: "uint8", Int8: "int8", Uint16: "uint16",
	Int16: "int16", Int32: "int32", Int64: "int64", String: "string", Bool: "bool",
	Float16: "float16", Double: "double", Uint32: "uint32", Uint64: "uint64",
	Complex64: "complex64", Complex128: "complex128", BFloat16: "bfloat16",
	Float8E4M3FN: "float8e4m3fn", Float8E4M3FNUZ: "float8e4m3fnuz", Float8E5M2: "float8e5m2",
	Float8E5M2FNUZ: "float8e5m2fnuz", Uint4: "uint4", Int4: "int4", Float4E2M1: "float4e2m1",
	Float8E8M0: "float8e8m0", Uint2: "uint2", Int2: "int2",
}

var dataTypeByName = func() map[string]DataType {
	m := map[string]DataType{}
	for t, n := range dataTypeNames {
		if t != Undefined {
			m[n] = t
		}
	}
	return m
}()

// String returns the ONNX spelling of the type ("float", "int64", ...).
func (t DataType) String() string {
	if n, ok := dataTypeNames[t]; ok {
		return n
	}
	return "DataType(" + strconv.Itoa(int(t)) + ")"
}

// Valid reports whether t is a defined ONNX element type.
func (t DataType) Valid() bool { _, ok := dataTypeNames[t]; return ok && t != Undefined }

// BitSize is the storage size of one element in bits; 0 for string and undefined.
func (t DataType) BitSize() int {
	switch t {
	case Uint2, Int2:
		return 2
	case Uint4, Int4, Float4E2M1:
		return 4
	case Uint8, Int8, Bool, Float8E4M3FN, Float8E4M3FNUZ, Float8E5M2, Float8E5M2FNUZ, Float8E8M0:
		return 8
	case Uint16, Int16, Float16, BFloat16:
		return 16
	case Float, Int32, Uint32:
		return 32
	case Int64, Double, Uint64, Complex64:
		return 64
	case Complex128:
		return 128
	}
	return 0
}

// IntRange is the range of values of an integer element type, as float64 (the 64-bit bounds
// rounded to the nearest float64); ok is false for the other types.
func (t DataType) IntRange() (lo, hi float64, ok bool) {
	switch t {
	case Int8:
		return math.MinInt8, math.MaxInt8, true
	case Uint8:
		return 0, math.MaxUint8, true
	case Int16:
		return math.MinInt16, math.MaxInt16, true
	case Uint16:
		return 0, math.MaxUint16, true
	case Int32:
		return math.MinInt32, math.MaxInt32, true
	case Uint32:
		return 0, math.MaxUint32, true
	case Int64:
		return math.MinInt64, math.MaxInt64, true
	case Uint64:
		return 0, math.MaxUint64, true
	}
	return 0, 0, false
}

// ByteSize returns the bytes that n packed elements occupy (sub-byte types round up); 0 for
// string.
func (t DataType) ByteSize(n int64) int64 { return (n*int64(t.BitSize()) + 7) / 8 }

// IsFloat reports whether t is a floating point type (any width).
func (t DataType) IsFloat() bool {
	switch t {
	case Float, Double, Float16, BFloat16, Float8E4M3FN, Float8E4M3FNUZ, Float8E5M2, Float8E5M2FNUZ, Float4E2M1,
		Float8E8M0:
		return true
	}
	return false
}

// IsInteger reports whether t is a signed or unsigned integer type.
func (t DataType) IsInteger() bool {
	switch t {
	case Uint8, Int8, Uint16, Int16, Int32, Int64, Uint32, Uint64, Uint4, Int4, Uint2, Int2:
		return true
	}
	return false
}

// Dim is one dimension of a shape: a known size (Value >= 0), a named symbolic size (Param set,
// Value -1) or unknown (Value -1, no Param).
type Dim struct {
	Value int64
	Param string
}

// DimOf returns a known dimension.
func DimOf(v int64) Dim { return Dim{Value: v} }

// SymDim returns a symbolic dimension.
func SymDim(name string) Dim { return Dim{Value: -1, Param: name} }

// UnknownDim returns a dimension nothing is known about.
func UnknownDim() Dim { return Dim{Value: -1} }

// Known reports whether the size is a number.
func (d Dim) Known() bool { return d.Value >= 0 }

// String renders a dimension as its size, its name or "?".
func (d Dim) String() string {
	if d.Known() {
		return strconv.FormatInt(d.Value, 10)
	}
	if d.Param != "" {
		return d.Param
	}
	return "?"
}

// Same reports whether two dimensions are known to be equal: the same number or the same name.
func (d Dim) Same(o Dim) bool {
	if d.Known() || o.Known() {
		return d.Value == o.Value
	}
	return d.Param != "" && d.Param == o.Param
}

// Shape lists the dimensions of a tensor, outermost first.
type Shape []Dim

// ShapeOf returns a fully known shape.
func ShapeOf(dims ...int64) Shape {
	s := make(Shape, len(dims))
	for i, d := range dims {
		s[i] = DimOf(d)
	}
	return s
}

// Static reports whether every dimension is a known number.
func (s Shape) Static() bool {
	for _, d := range s {
		if !d.Known() {
			return false
		}
	}
	return true
}

// Ints returns the sizes of a static shape; ok is false when a dimension is not a number.
func (s Shape) Ints() (dims []int64, ok bool) {
	dims = make([]int64, len(s))
	for i, d := range s {
		if !d.Known() {
			return nil, false
		}
		dims[i] = d.Value
	}
	return dims, true
}

// NumElements returns the element count of a static shape, or -1 when unknown or overflowing.
func (s Shape) NumElements() int64 {
	n := int64(1)
	for _, d := range s {
		if !d.Known() {
			return -1
		}
		if d.Value != 0 && n > (1<<62)/d.Value {
			return -1
		}
		n *= d.Value
	}
	return n
}

// Clone returns a copy that shares nothing with s.
func (s Shape) Clone() Shape {
	if s == nil {
		return nil
	}
	return append(Shape{}, s...)
}

// String renders a shape as [1,3,N,?].
func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// TypeKind says which ONNX type a Type is.
type TypeKind int

// The kinds of ONNX value types.
const (
	KindUnknown TypeKind = iota
	KindTensor
	KindSparseTensor
	KindSequence
	KindMap
	KindOptional
)

// Type is the type of a value: a tensor (element type and, when Ranked, a shape), a sparse
// tensor, or a sequence, map or optional of an inner type.
type Type struct {
	Kind   TypeKind
	Elem   DataType // tensor and sparse tensor elements; map keys use Key
	Ranked bool     // the rank is known: Shape has one Dim per axis
	Shape  Shape
	Key    DataType // map key type
	Inner  *Type    // sequence or optional element type, map value type
}

// TensorType returns a ranked tensor type.
func TensorType(elem DataType, shape Shape) Type {
	return Type{Kind: KindTensor, Elem: elem, Ranked: true, Shape: shape}
}

// UnrankedTensor returns a tensor type whose rank is not known.
func UnrankedTensor(elem DataType) Type { return Type{Kind: KindTensor, Elem: elem} }

// Clone returns a deep copy.
func (t Type) Clone() Type {
	c := t
	c.Shape = t.Shape.Clone()
	if t.Inner != nil {
		in := t.Inner.Clone()
		c.Inner = &in
	}
	return c
}

// IsTensor reports whether t is a dense tensor type.
func (t Type) IsTensor() bool { return t.Kind == KindTensor }

// String renders a type as tensor(float)[1,3,?], seq(tensor(int64)) and so on.
func (t Type) String() string {
	switch t.Kind {
	case KindTensor, KindSparseTensor:
		name := "tensor"
		if t.Kind == KindSparseTensor {
			name = "sparse_tensor"
		}
		s := name + "(" + t.Elem.String() + ")"
		if t.Ranked {
			s += t.Shape.String()
		}
		return s
	case KindSequence:
		return "seq(" + innerString(t.Inner) + ")"
	case KindOptional:
		return "optional(" + innerString(t.Inner) + ")"
	case KindMap:
		return fmt.Sprintf("map(%s,%s)", t.Key, innerString(t.Inner))
	}
	return "unknown"
}

func innerString(t *Type) string {
	if t == nil {
		return "unknown"
	}
	return t.String()
}
