package graph

import "fmt"

// ConstantValue returns the tensor a Constant node produces, decoding the value_* attribute
// forms of opsets 12 and later.
func ConstantValue(n *Node) (*Tensor, error) {
	name := ""
	if len(n.Outputs) > 0 {
		name = n.Outputs[0]
	}
	for _, a := range n.Attrs {
		switch a.Name {
		case "value":
			if a.Tensor == nil {
				return nil, fmt.Errorf("value attribute holds no tensor")
			}
			t := *a.Tensor
			t.Name = name
			return &t, nil
		case "sparse_value":
			if a.Sparse == nil {
				return nil, fmt.Errorf("sparse_value attribute holds no sparse tensor")
			}
			t, err := densify(a.Sparse, DefaultLimits())
			if err != nil {
				return nil, err
			}
			t.Name = name
			return t, nil
		case "value_float":
			return TensorFromFloat32(name, nil, []float32{a.Float}), nil
		case "value_floats":
			return TensorFromFloat32(name, []int64{int64(len(a.Floats))}, a.Floats), nil
		case "value_int":
			return TensorFromInt64(name, nil, []int64{a.Int}), nil
		case "value_ints":
			return TensorFromInt64(name, []int64{int64(len(a.Ints))}, a.Ints), nil
		case "value_string":
			return &Tensor{Name: name, DType: String, Strings: [][]byte{a.String}}, nil
		case "value_strings":
			return &Tensor{Name: name, DType: String, Dims: []int64{int64(len(a.Strings))}, Strings: a.Strings}, nil
		}
	}
	return nil, fmt.Errorf("Constant has no value attribute")
}
