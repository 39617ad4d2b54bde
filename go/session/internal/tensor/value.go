package tensor

import (
	"fmt"

	"github.com/loomrt/loom/go/graph"
)

// ValueKind says what a Value (or a graph input or output, see IOMeta) holds.
type ValueKind int

// The value kinds. ValueTensor is the zero kind, so the IOMeta of a tensor reads as before.
const (
	// ValueTensor is a dense tensor.
	ValueTensor ValueKind = iota
	// ValueSequence is an ONNX sequence: tensors of one element type, of any shapes.
	ValueSequence
	// ValueOptional is an ONNX optional: a tensor, a sequence, or nothing (none).
	ValueOptional
)

// String is "tensor", "sequence" or "optional".
func (k ValueKind) String() string {
	switch k {
	case ValueTensor:
		return "tensor"
	case ValueSequence:
		return "sequence"
	case ValueOptional:
		return "optional"
	}
	return fmt.Sprintf("ValueKind(%d)", int(k))
}

// composite is what a Tensor carries instead of elements when it stands for a sequence or an
// optional inside the interpreter. The tensors in elems are never modified (host functions
// do not modify their inputs), so sequences share them freely.
type composite struct {
	kind  ValueKind // ValueSequence or ValueOptional
	elems []Tensor  // a sequence's tensors; an optional's value (none when empty)
}

// describe renders the value's type as seq(tensor(float)) or optional(none).
func Describe(c *composite, dtype DType) string {
	if c.kind == ValueSequence {
		return fmt.Sprintf("seq(tensor(%s)) of %d", dtype, len(c.elems))
	}
	if len(c.elems) == 0 {
		return "optional(none)"
	}
	return "optional(" + c.elems[0].String() + ")"
}

// seqOf makes a sequence of dtype elements holding elems (the slice is not copied).
func SeqOf(dtype DType, elems []Tensor) Tensor {
	return Tensor{dtype: dtype, box: &composite{kind: ValueSequence, elems: elems}}
}

// optOf makes an optional holding v, or none when v is nil; dtype is the element type of the
// tensors it holds or would hold.
func OptOf(dtype DType, v *Tensor) Tensor {
	c := &composite{kind: ValueOptional}
	if v != nil {
		c.elems = []Tensor{*v}
		dtype = v.dtype
	}
	return Tensor{dtype: dtype, box: c}
}

// kind is t's value kind.
func (t Tensor) kind() ValueKind {
	if t.box == nil {
		return ValueTensor
	}
	return t.box.kind
}

func IsSeq(t Tensor) bool { return t.box != nil && t.box.kind == ValueSequence }

func IsOpt(t Tensor) bool { return t.box != nil && t.box.kind == ValueOptional }

// seqElems returns a sequence's tensors (shared, not to be modified).
func SeqElems(t Tensor) []Tensor { return t.box.elems }

// article names t's kind for messages: "a tensor", "a sequence", "an optional".
func Article(t Tensor) string {
	if t.kind() == ValueOptional {
		return "an optional"
	}
	return "a " + t.kind().String()
}

// Value is a graph input or output of any kind a session runs: a tensor, a sequence of
// tensors (all of one element type), or an optional that holds a tensor, a sequence or nothing.
// Like Tensor it is a small value whose copies share the elements. The zero Value is invalid.
type Value struct{ t Tensor }

// NamedValue is a value bound to a graph input name (see RunValues).
type NamedValue struct {
	Name  string
	Value Value
}

// TensorValue wraps a tensor.
func TensorValue(t Tensor) Value { return Value{t: t} }

// SequenceValue makes a sequence of tensors of element type dtype (the slice is copied, the
// tensors' elements are not). An empty sequence still has an element type. Errors are *Error
// matching ErrInvalidArgument.
func SequenceValue(dtype DType, elems ...Tensor) (Value, error) {
	const op = "SequenceValue"
	if _, err := MakeSlice(dtype, 0); err != nil {
		return Value{}, WrapError(op, ErrInvalidArgument, err, "sequence")
	}
	for i, e := range elems {
		if !e.IsValid() || e.box != nil {
			return Value{}, NewError(op, ErrInvalidArgument, "sequence element %d is not a tensor", i)
		}
		if e.dtype != dtype {
			return Value{}, NewError(op, ErrInvalidArgument, "sequence element %d has element type %s, the sequence holds %s", i, e.dtype, dtype)
		}
	}
	return Value{t: SeqOf(dtype, append([]Tensor{}, elems...))}, nil
}

// OptionalValue makes an optional holding v, a tensor or a sequence; an empty Value or an
// optional is an *Error matching ErrInvalidArgument.
func OptionalValue(v Value) (Value, error) {
	switch {
	case !v.IsValid():
		return Value{}, NewError("OptionalValue", ErrInvalidArgument, "optional of an empty Value")
	case IsOpt(v.t):
		return Value{}, NewError("OptionalValue", ErrInvalidArgument, "optional of an optional is not supported")
	}
	return Value{t: OptOf(v.t.dtype, &v.t)}, nil
}

// NoneValue makes an empty optional; dtype is the element type it would hold (Undefined when
// it does not matter).
func NoneValue(dtype DType) Value { return Value{t: OptOf(dtype, nil)} }

// IsValid reports whether v holds a value (the zero Value does not).
func (v Value) IsValid() bool { return v.t.IsValid() }

// Kind says whether v is a tensor, a sequence or an optional.
func (v Value) Kind() ValueKind { return v.t.kind() }

// IsNone reports whether v is an empty optional.
func (v Value) IsNone() bool { return IsOpt(v.t) && len(v.t.box.elems) == 0 }

// ElemType is the element type of the tensors v holds.
func (v Value) ElemType() DType { return v.t.dtype }

// Tensor returns v's tensor, or an *Error matching ErrInvalidArgument when v is empty, a
// sequence or an optional (see Element).
func (v Value) Tensor() (Tensor, error) {
	if !v.IsValid() {
		return Tensor{}, NewError("Value.Tensor", ErrInvalidArgument, "empty Value")
	}
	if v.t.box != nil {
		return Tensor{}, NewError("Value.Tensor", ErrInvalidArgument, "the value is %s, not a tensor", v.t)
	}
	return v.t, nil
}

// Sequence returns v's tensors (a new slice sharing their elements), or an *Error matching
// ErrInvalidArgument when v is not a sequence.
func (v Value) Sequence() ([]Tensor, error) {
	if !IsSeq(v.t) {
		if !v.IsValid() {
			return nil, NewError("Value.Sequence", ErrInvalidArgument, "empty Value")
		}
		return nil, NewError("Value.Sequence", ErrInvalidArgument, "the value is %s, not a sequence", v.t)
	}
	return append([]Tensor{}, v.t.box.elems...), nil
}

// Element returns what an optional holds; ok is false when v is none or not an optional.
func (v Value) Element() (elem Value, ok bool) {
	if !IsOpt(v.t) || len(v.t.box.elems) == 0 {
		return Value{}, false
	}
	return Value{t: v.t.box.elems[0]}, true
}

// String describes v's type: tensor(float)[2,3], seq(tensor(int64)) of 4, optional(none).
func (v Value) String() string { return v.t.String() }

// checkValueInputs refuses a sequence or an optional given to an operator that computes on
// tensors, naming the node and the input.
func CheckValueInputs(n *graph.Node, in []Tensor) error {
	if n.Traits().TakesValues {
		return nil
	}
	for i, t := range in {
		if t.box != nil {
			return NewNodeError("Run", ErrInvalidArgument, n, "input %d (%q) is %s (%s); the operator takes tensors only",
				i, n.Inputs[i], Article(t), t)
		}
	}
	return nil
}

// withElems is the sequence or optional t holding elems instead of its own.
func WithElems(t Tensor, elems []Tensor) Tensor {
	t.box = &composite{kind: t.box.kind, elems: elems}
	return t
}

// contents is the tensor, sequence or optional v holds.
func Contents(v Value) Tensor { return v.t }
