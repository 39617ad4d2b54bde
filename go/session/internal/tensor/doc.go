// Package tensor is the bottom of go/session: the Tensor value (an element type, a shape and a
// Go slice of elements), sequences and optionals (Value), element types, the conversions
// between them and ONNX initializers, and the session's error type (*Error with its kinds).
// Package session re-exports its public names (session.Tensor is tensor.Tensor); the packages
// of go/session build on it and it imports none of them.
package tensor
