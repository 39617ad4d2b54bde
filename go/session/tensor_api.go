package session

import (
	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// BFloat16 is a bfloat16 number (the upper half of a float32), stored as its bits.
type BFloat16 = tensor.BFloat16

// DType is an ONNX tensor element type (the values of TensorProto.DataType).
type DType = tensor.DType

// DTypeOf returns the element type that Go type T stands for.
func DTypeOf[T tensor.Element]() tensor.DType { return tensor.DTypeOf[T]() }

// Element is the set of Go types a Tensor can hold, one per ONNX element type.
type Element = tensor.Element

// ErrClosed: the session, context, definition or slot was closed (or frozen).
var ErrClosed = tensor.ErrClosed

// ErrCompile: a Loom kernel did not compile; the cause is the compiler's message.
var ErrCompile = tensor.ErrCompile

// ErrDevice: the device or go/native refused or failed an operation that is not otherwise
// classified (out of device memory, a failed Close); the cause says which.
var ErrDevice = tensor.ErrDevice

// ErrFailed: a stream operation of the session failed earlier; the session is latched
// failed and refuses every call (Close still releases it).
var ErrFailed = tensor.ErrFailed

// ErrImmutable: a write, fill, copy or upload targets a weight.
var ErrImmutable = tensor.ErrImmutable

// ErrInUse: Close refused because sessions, definitions or slots still depend on it.
var ErrInUse = tensor.ErrInUse

// ErrInternal: an operator panicked (a bug in Loom that the model or the inputs reached); the
// run's *Error names the node and its Cause is a *PanicError. The session stays usable.
var ErrInternal = tensor.ErrInternal

// ErrInvalidArgument: a bad size, region, kernel id, command or option.
var ErrInvalidArgument = tensor.ErrInvalidArgument

// ErrNotRecorded: no recording has that key.
var ErrNotRecorded = tensor.ErrNotRecorded

// ErrOverBudget: an allocation would exceed its context's budget, or a tensor a run would
// make has more elements than the session's limit (WithLimits).
var ErrOverBudget = tensor.ErrOverBudget

// ErrTargetMismatch: code or a compiler for another target than the device's.
var ErrTargetMismatch = tensor.ErrTargetMismatch

// Error is a failed call: which method (Op), what kind of failure (Kind, one of the sentinels
// above, or context.Canceled or context.DeadlineExceeded for a run its context stopped), the
// node at fault when the failure belongs to one (Node and OpType), a message naming what is at
// fault, and the underlying error if any (for example the *native.Error of a failed stream
// operation, or the cause of a context cancelled with context.WithCancelCause).
//
// errors.Is matches both the Kind and the Cause, and errors.As finds the Error:
//
//	var e *session.Error
//	if errors.As(err, &e) && e.Node != "" {
//		log.Printf("node %s (%s) failed: %v", e.Node, e.OpType, err)
//	}
type Error = tensor.Error

// Float16 is an IEEE 754 half-precision number, stored as its bits.
type Float16 = tensor.Float16

// FromGraphTensor decodes a constant of a model (an initializer or a Constant's value) into a
// Tensor, copying its elements; a malformed constant is an *Error matching ErrInvalidArgument.
func FromGraphTensor(gt *graph.Tensor) (tensor.Tensor, error) { return tensor.FromGraphTensor(gt) }

// MustTensor is NewTensor that panics (with NewTensor's *Error) on a shape mismatch; for
// literals in tests and examples.
func MustTensor[T tensor.Element](shape []int64, data []T) tensor.Tensor {
	return tensor.MustTensor[T](shape, data)
}

// NamedTensor is a tensor bound to a graph input name (or, for RunInto, an output name).
type NamedTensor = tensor.NamedTensor

// NamedValue is a value bound to a graph input name (see RunValues).
type NamedValue = tensor.NamedValue

// NewTensor wraps data (not copied) as a tensor of the given shape. The element count must
// match the shape and no dimension may be negative; otherwise the error is an *Error matching
// ErrInvalidArgument.
func NewTensor[T tensor.Element](shape []int64, data []T) (tensor.Tensor, error) {
	return tensor.NewTensor[T](shape, data)
}

// NoneValue makes an empty optional; dtype is the element type it would hold (Undefined when
// it does not matter).
func NoneValue(dtype tensor.DType) tensor.Value { return tensor.NoneValue(dtype) }

// OptionalValue makes an optional holding v, a tensor or a sequence; an empty Value or an
// optional is an *Error matching ErrInvalidArgument.
func OptionalValue(v tensor.Value) (tensor.Value, error) { return tensor.OptionalValue(v) }

// PanicError is the Cause of a run's *Error of kind ErrInternal: the value an operator
// panicked with and the stack at the panic.
type PanicError = tensor.PanicError

// SequenceValue makes a sequence of tensors of element type dtype (the slice is copied, the
// tensors' elements are not). An empty sequence still has an element type. Errors are *Error
// matching ErrInvalidArgument.
func SequenceValue(dtype tensor.DType, elems ...tensor.Tensor) (tensor.Value, error) {
	return tensor.SequenceValue(dtype, elems...)
}

// Tensor is a dense, row-major tensor: an element type, a shape and a Go slice of elements.
// It is a small value; copies share the elements. Tensors returned by Run belong to the
// caller; tensors passed to Run are only read.
type Tensor = tensor.Tensor

// TensorOf returns the elements of t without copying, or an *Error matching
// ErrInvalidArgument when T is not t's element type.
func TensorOf[T tensor.Element](t tensor.Tensor) ([]T, error) { return tensor.TensorOf[T](t) }

// TensorValue wraps a tensor.
func TensorValue(t tensor.Tensor) tensor.Value { return tensor.TensorValue(t) }

// ToBFloat16 rounds f to the nearest bfloat16 number.
func ToBFloat16(f float32) tensor.BFloat16 { return tensor.ToBFloat16(f) }

// ToFloat16 rounds f to the nearest half-precision number.
func ToFloat16(f float32) tensor.Float16 { return tensor.ToFloat16(f) }

// Value is a graph input or output of any kind a session runs: a tensor, a sequence of
// tensors (all of one element type), or an optional that holds a tensor, a sequence or nothing.
// Like Tensor it is a small value whose copies share the elements. The zero Value is invalid.
type Value = tensor.Value

// ValueKind says what a Value (or a graph input or output, see IOMeta) holds.
type ValueKind = tensor.ValueKind

// ValueOptional is an ONNX optional: a tensor, a sequence, or nothing (none).
const ValueOptional = tensor.ValueOptional

// ValueSequence is an ONNX sequence: tensors of one element type, of any shapes.
const ValueSequence = tensor.ValueSequence

// ValueTensor is a dense tensor.
const ValueTensor = tensor.ValueTensor

// Zeros returns a tensor of zero values (false, "") of the given type and shape; a negative
// dimension or an unsupported type is an *Error matching ErrInvalidArgument.
func Zeros(dtype tensor.DType, shape []int64) (tensor.Tensor, error) {
	return tensor.Zeros(dtype, shape)
}

// Float8E4M3FN is a float8 with 4 exponent bits and 3 mantissa bits, no infinities and one
// NaN pattern per sign (ONNX FLOAT8E4M3FN), stored as its bits.
type Float8E4M3FN = tensor.Float8E4M3FN

// Float8E4M3FNUZ is FLOAT8E4M3FNUZ: exponent bias 8, no infinities, no negative zero, NaN
// as 0x80; stored as its bits.
type Float8E4M3FNUZ = tensor.Float8E4M3FNUZ

// Float8E5M2 is a float8 with 5 exponent bits and 2 mantissa bits (ONNX FLOAT8E5M2, with
// infinities), stored as its bits.
type Float8E5M2 = tensor.Float8E5M2

// Float8E5M2FNUZ is FLOAT8E5M2FNUZ: exponent bias 16, no infinities, no negative zero, NaN
// as 0x80; stored as its bits.
type Float8E5M2FNUZ = tensor.Float8E5M2FNUZ

// Float8E8M0 is FLOAT8E8M0, the exponent-only scale type of the microscaling (MX) formats:
// 2^(bits-127), 0xFF is NaN; stored as its bits.
type Float8E8M0 = tensor.Float8E8M0

// Float4E2M1 is FLOAT4E2M1 (±0, 0.5, 1, 1.5, 2, 3, 4, 6), stored as its 4 bits in the low
// half of a byte: a tensor of them holds one element per byte in memory.
type Float4E2M1 = tensor.Float4E2M1

// Int4 is a signed 4-bit integer (-8..7), stored as its two's-complement bits in the low
// half of a byte (one element per byte in memory); see ToInt4 and Int4.Int.
type Int4 = tensor.Int4

// Uint4 is an unsigned 4-bit integer (0..15), one per byte in memory.
type Uint4 = tensor.Uint4

// Int2 is a signed 2-bit integer (-2..1), stored as its two's-complement bits in the low two
// bits of a byte (one element per byte in memory).
type Int2 = tensor.Int2

// Uint2 is an unsigned 2-bit integer (0..3), one per byte in memory.
type Uint2 = tensor.Uint2

// ToInt4 keeps the low 4 bits of v's two's complement (8 becomes -8), as Cast does.
func ToInt4(v int) Int4 { return tensor.ToInt4(v) }

// ToUint4 keeps the low 4 bits of v.
func ToUint4(v int) Uint4 { return tensor.ToUint4(v) }

// ToInt2 keeps the low 2 bits of v's two's complement (2 becomes -2), as Cast does.
func ToInt2(v int) Int2 { return tensor.ToInt2(v) }

// ToUint2 keeps the low 2 bits of v.
func ToUint2(v int) Uint2 { return tensor.ToUint2(v) }

// ToFloat8E4M3FN rounds f to the nearest FLOAT8E4M3FN (ties to even), saturating values
// beyond ±448 and infinities to ±448, as Cast does by default.
func ToFloat8E4M3FN(f float32) Float8E4M3FN { return tensor.ToFloat8E4M3FN(f) }

// ToFloat8E5M2 rounds f to the nearest FLOAT8E5M2 (ties to even), saturating to ±57344.
func ToFloat8E5M2(f float32) Float8E5M2 { return tensor.ToFloat8E5M2(f) }

// ToFloat4E2M1 rounds f to the nearest FLOAT4E2M1 (ties to even), saturating to ±6.
func ToFloat4E2M1(f float32) Float4E2M1 { return tensor.ToFloat4E2M1(f) }

// ToGraphTensor encodes t (a numeric or bool tensor) as a model constant named name: raw
// little-endian data, the 4-bit and 2-bit types packed as TensorProto stores them. It is
// FromGraphTensor's inverse.
func ToGraphTensor(name string, t Tensor) (*graph.Tensor, error) {
	return tensor.ToGraphTensor(name, t)
}

// IsNarrow reports whether dt is one of the float8, float4, 4-bit or 2-bit types, which a
// Tensor holds one element per byte (see Int4).
func IsNarrow(dt DType) bool { return tensor.IsNarrow(dt) }

// NarrowCast says how a value converts to a float8 type when it is out of range (Cast's
// saturate attribute) and how float8e8m0 rounds (its round_mode).
type NarrowCast = tensor.NarrowCast

// EncodeNarrow converts v to the bit pattern of dt, a narrow type (IsNarrow), as ONNX's Cast
// does: float types round to nearest, ties to even, with Cast's rules for NaN, infinities
// and values out of range; the integer types truncate and keep the low bits.
func EncodeNarrow(dt DType, v float64, c NarrowCast) byte { return tensor.EncodeNarrow(dt, v, c) }
