package graph

import "fmt"

// NormAxis maps a possibly negative axis into [0, rank), the ONNX convention for axis
// attributes and inputs; an axis outside [-rank, rank) is an error.
func NormAxis(axis int64, rank int) (int, error) {
	if axis < -int64(rank) || axis >= int64(rank) {
		return 0, fmt.Errorf("axis %d out of range for rank %d", axis, rank)
	}
	if axis < 0 {
		axis += int64(rank)
	}
	return int(axis), nil
}

// ClampSliceIndex is Slice's rule for a start or end index v on an axis of size dim: a
// negative v counts from the end, and the result is clamped to [0, dim] for a positive step and
// to [-1, dim-1] for a negative one.
func ClampSliceIndex(v, dim, step int64) int64 {
	if v < 0 {
		v += dim
	}
	if step > 0 {
		if v < 0 {
			v = 0
		}
		if v > dim {
			v = dim
		}
	} else {
		if v < -1 {
			v = -1
		}
		if v > dim-1 {
			v = dim - 1
		}
	}
	return v
}
