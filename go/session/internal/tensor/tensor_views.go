package tensor

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/loomrt/loom/go/graph"
)

// viewBytes is a tensor whose elements are b (not copied).
func ViewBytes(dtype DType, shape []int64, b []byte) Tensor {
	t := Tensor{dtype: dtype, shape: shape}
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	} else {
		p = unsafe.Pointer(&zeroElement)
	}
	n := int(dtype.ByteSize(1))
	count := 0
	if n > 0 {
		count = len(b) / n
	}
	if IsNarrow(dtype) {
		t.data = narrowSlice(dtype, unsafe.Slice((*byte)(p), count))
		return t
	}
	switch dtype {
	case graph.Float:
		t.data = unsafe.Slice((*float32)(p), count)
	case graph.Double:
		t.data = unsafe.Slice((*float64)(p), count)
	case graph.Float16:
		t.data = unsafe.Slice((*Float16)(p), count)
	case graph.BFloat16:
		t.data = unsafe.Slice((*BFloat16)(p), count)
	case graph.Int8:
		t.data = unsafe.Slice((*int8)(p), count)
	case graph.Int16:
		t.data = unsafe.Slice((*int16)(p), count)
	case graph.Int32:
		t.data = unsafe.Slice((*int32)(p), count)
	case graph.Int64:
		t.data = unsafe.Slice((*int64)(p), count)
	case graph.Uint8:
		t.data = unsafe.Slice((*uint8)(p), count)
	case graph.Uint16:
		t.data = unsafe.Slice((*uint16)(p), count)
	case graph.Uint32:
		t.data = unsafe.Slice((*uint32)(p), count)
	case graph.Uint64:
		t.data = unsafe.Slice((*uint64)(p), count)
	case graph.Bool:
		t.data = unsafe.Slice((*bool)(p), count)
	}
	return t
}

// zeroElement backs the views of empty slots (a non-nil, empty slice).
var zeroElement [8]byte

// copyOut is a caller-owned copy of a tensor.
func CopyOut(v Tensor) (Tensor, error) {
	if v.dtype == graph.String {
		return Tensor{dtype: v.dtype, shape: append([]int64{}, v.shape...), data: append([]string{}, v.data.([]string)...)}, nil
	}
	// Cloning (rather than zeroing a new slice and copying) writes each byte once.
	out := Tensor{dtype: v.dtype, shape: append([]int64{}, v.shape...)}
	if v.relaid != nil {
		out.data = v.relaid.Unpacked()
		return out, nil
	}
	if b, dt, ok := NarrowBytes(v.data); ok {
		out.data = narrowSlice(dt, slices.Clone(b))
		return out, nil
	}
	switch d := v.data.(type) {
	case []float32:
		out.data = slices.Clone(d)
	case []float64:
		out.data = slices.Clone(d)
	case []Float16:
		out.data = slices.Clone(d)
	case []BFloat16:
		out.data = slices.Clone(d)
	case []int8:
		out.data = slices.Clone(d)
	case []int16:
		out.data = slices.Clone(d)
	case []int32:
		out.data = slices.Clone(d)
	case []int64:
		out.data = slices.Clone(d)
	case []uint8:
		out.data = slices.Clone(d)
	case []uint16:
		out.data = slices.Clone(d)
	case []uint32:
		out.data = slices.Clone(d)
	case []uint64:
		out.data = slices.Clone(d)
	case []bool:
		out.data = slices.Clone(d)
	default:
		return Tensor{}, fmt.Errorf("cannot copy a %s tensor", v.dtype)
	}
	return out, nil
}

// raw is a tensor of dtype and shape over data, unchecked: the caller guarantees that data is a
// slice of dtype's Go type holding the shape's element count (or nil, for metadata only).
func Raw(dtype DType, shape []int64, data any) Tensor {
	return Tensor{dtype: dtype, shape: shape, data: data}
}

// meta is t without its elements: the element type, the shape and, for a sequence or an
// optional, its contents.
func Meta(t Tensor) Tensor { return Tensor{dtype: t.dtype, shape: t.shape, box: t.box} }

// Dims returns t's shape without copying it: the caller must not change it (Shape copies).
func (t Tensor) Dims() []int64 { return t.shape }

// Box is t's sequence or optional contents (nil for a plain tensor).
func Box(t Tensor) *composite { return t.box }

// RawBytes views the elements of a numeric or bool slice (one of Element's slice types but
// []string) as bytes, not copied; ok is false for strings and anything else.
func RawBytes(data any) (b []byte, ok bool) {
	if b, _, ok := NarrowBytes(data); ok {
		return b, true
	}
	return rawBytes(data)
}

func rawBytes(data any) ([]byte, bool) {
	switch d := data.(type) {
	case []float32:
		return sliceBytes(d), true
	case []float64:
		return sliceBytes(d), true
	case []Float16:
		return sliceBytes(d), true
	case []BFloat16:
		return sliceBytes(d), true
	case []int8:
		return sliceBytes(d), true
	case []int16:
		return sliceBytes(d), true
	case []int32:
		return sliceBytes(d), true
	case []int64:
		return sliceBytes(d), true
	case []uint8:
		return d, true
	case []uint16:
		return sliceBytes(d), true
	case []uint32:
		return sliceBytes(d), true
	case []uint64:
		return sliceBytes(d), true
	case []bool:
		return sliceBytes(d), true
	}
	return nil, false
}

func sliceBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return []byte{}
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(zero)))
}
