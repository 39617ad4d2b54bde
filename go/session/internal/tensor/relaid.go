package tensor

import (
	"github.com/loomrt/loom/go/graph"
)

// Relaid is a float32 constant the session holds in a layout of its own (a weight packed
// once into a kernel's panels), as its only copy: the kernels made for the layout read
// Packed, and every other reader of the tensor (Data, TensorOf, the host functions) sees the
// elements unpacked in row-major order, into a new slice at each read. So a weight is held
// once whatever reads it, at the cost of a copy for the rare reader that wants it as stored.
type Relaid struct {
	// Layout names the layout (what the kernels' planners derive it for: see
	// ops.DerivedConsts).
	Layout string
	// Packed is the elements in Layout; it must not be changed.
	Packed []float32
	// unpack writes the elements in row-major order into dst (of the tensor's length).
	unpack func(packed, dst []float32)
	n      int
}

// NewRelaid is a float32 tensor of shape whose elements are held in layout as packed;
// unpack(packed, dst) writes them in row-major order into dst.
func NewRelaid(shape []int64, layout string, packed []float32, unpack func(packed, dst []float32)) (Tensor, error) {
	n, err := ElementCount(shape)
	if err != nil {
		return Tensor{}, WrapError("NewRelaid", ErrInvalidArgument, err, "")
	}
	if unpack == nil || n == 0 {
		return Tensor{}, NewError("NewRelaid", ErrInvalidArgument, "a relaid tensor needs elements and an unpack function")
	}
	r := &Relaid{Layout: layout, Packed: packed, unpack: unpack, n: int(n)}
	return Tensor{dtype: graph.Float, shape: append([]int64{}, shape...), relaid: r}, nil
}

// RelaidOf returns t's relaid storage, or nil when t holds its elements as stored.
func RelaidOf(t Tensor) *Relaid { return t.relaid }

// Unpacked is the elements in row-major order (a new slice).
func (r *Relaid) Unpacked() []float32 {
	out := make([]float32, r.n)
	r.unpack(r.Packed, out)
	return out
}

// elems is t's element slice: data, or a relaid tensor's elements unpacked (a new slice).
func (t Tensor) elems() any {
	if t.relaid != nil {
		return t.relaid.Unpacked()
	}
	return t.data
}
