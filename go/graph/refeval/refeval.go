// Package refeval is a small, slow reference evaluator for ONNX graphs. It checks that graph
// rewrites preserve results (go/graph/opt folds constants with it and its tests compare graphs
// before and after each pass) and gives the run-path fuzzers of go/session an independent answer
// to compare the executors with. It computes in float64 and rounds to float32 after every op on
// float tensors, so that it follows float32 models closely; integers are exact up to 2^53. It
// covers the operators the optimization passes create or touch and those of the reference
// transformer models; anything else, and any value over 2^24 elements, is an error, never a
// guess.
package refeval

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
)

// Value is a dense tensor: element type, dims and row-major elements.
type Value struct {
	DType graph.DataType
	Dims  []int64
	Data  []float64
}

// Numel is the element count.
func (v *Value) Numel() int { return numel(v.Dims) }

func numel(d []int64) int {
	n := 1
	for _, x := range d {
		n *= int(x)
	}
	return n
}

// FromTensor decodes a graph tensor.
func FromTensor(t *graph.Tensor) (*Value, error) {
	data, err := t.Float64s()
	if err != nil {
		return nil, err
	}
	return &Value{DType: t.DType, Dims: append([]int64{}, t.Dims...), Data: data}, nil
}

// ToTensor encodes a value as a graph tensor.
func (v *Value) ToTensor(name string) (*graph.Tensor, error) {
	return graph.TensorFromValues(name, v.DType, v.Dims, v.Data)
}

// maxElements bounds every intermediate so that a bad model cannot exhaust memory.
const maxElements = 1 << 24

// tooLarge is raised by newValue and turned into an error by Eval.
type tooLarge struct{ dims []int64 }

// Run evaluates the main graph of m on the given inputs and returns every graph output.
func Run(m *graph.Model, inputs map[string]*Value) (map[string]*Value, error) {
	env := map[string]*Value{}
	g := m.Graph
	for _, name := range g.InitOrder {
		v, err := FromTensor(g.Initializers[name])
		if err != nil {
			return nil, fmt.Errorf("initializer %q: %w", name, err)
		}
		env[name] = v
	}
	for _, in := range g.Inputs {
		if v, ok := inputs[in.Name]; ok {
			env[in.Name] = v
		} else if _, ok := env[in.Name]; !ok {
			return nil, fmt.Errorf("input %q not given", in.Name)
		}
	}
	for _, n := range g.Nodes {
		args := make([]*Value, len(n.Inputs))
		for i, name := range n.Inputs {
			if name == "" {
				continue
			}
			v, ok := env[name]
			if !ok {
				return nil, fmt.Errorf("node %q (%s): input %q has no value", n.Name, n.OpType, name)
			}
			args[i] = v
		}
		opset := m.Opset(n.Domain)
		outs, err := Eval(n, opset, args)
		if err != nil {
			return nil, fmt.Errorf("node %q (%s): %w", n.Name, n.OpType, err)
		}
		for i, o := range n.Outputs {
			if o != "" && i < len(outs) {
				if outs[i].Numel() > maxElements {
					return nil, fmt.Errorf("node %q: output of %d elements too large", n.Name, outs[i].Numel())
				}
				env[o] = outs[i]
			}
		}
	}
	res := map[string]*Value{}
	for _, o := range g.Outputs {
		v, ok := env[o.Name]
		if !ok {
			return nil, fmt.Errorf("output %q not computed", o.Name)
		}
		res[o.Name] = v
	}
	return res, nil
}

// round applies the storage precision of the element type.
func round(dt graph.DataType, x float64) float64 {
	switch dt {
	case graph.Float:
		return float64(float32(x))
	case graph.Float16:
		return float64(graph.Float16ToFloat32(graph.Float32ToFloat16(float32(x))))
	case graph.BFloat16:
		return float64(graph.BFloat16ToFloat32(graph.Float32ToBFloat16(float32(x))))
	case graph.Bool:
		if x != 0 {
			return 1
		}
		return 0
	case graph.Int8, graph.Int16, graph.Int32, graph.Int64, graph.Uint8, graph.Uint16, graph.Uint32, graph.Uint64:
		return math.Trunc(x)
	}
	return x
}

func newValue(dt graph.DataType, dims []int64) *Value {
	n := int64(1)
	for _, d := range dims {
		if d < 0 || (d > 0 && n > maxElements/d) {
			panic(tooLarge{dims})
		}
		n *= d
	}
	return &Value{DType: dt, Dims: dims, Data: make([]float64, n)}
}

func (v *Value) finish() *Value {
	for i, x := range v.Data {
		v.Data[i] = round(v.DType, x)
	}
	return v
}

// strides returns row-major strides.
func strides(dims []int64) []int {
	s := make([]int, len(dims))
	acc := 1
	for i := len(dims) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= int(dims[i])
	}
	return s
}

func broadcastDims(shapes ...[]int64) ([]int64, error) {
	rank := 0
	for _, s := range shapes {
		rank = max(rank, len(s))
	}
	out := make([]int64, rank)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		off := rank - len(s)
		for i, d := range s {
			switch {
			case out[off+i] == 1:
				out[off+i] = d
			case d != 1 && d != out[off+i]:
				return nil, fmt.Errorf("cannot broadcast %v", shapes)
			}
		}
	}
	return out, nil
}

// broadcastIndex maps a flat index of the output to a flat index of an input of dims in.
func broadcastIndex(idx int, out []int64, outStrides []int, in []int64, inStrides []int) int {
	off := len(out) - len(in)
	j := 0
	for d := range out {
		c := (idx / outStrides[d]) % int(out[d])
		if d >= off && in[d-off] != 1 {
			j += c * inStrides[d-off]
		}
	}
	return j
}

func elementwise(dt graph.DataType, args []*Value, fn func(x []float64) float64) (*Value, error) {
	var shapes [][]int64
	for _, a := range args {
		shapes = append(shapes, a.Dims)
	}
	dims, err := broadcastDims(shapes...)
	if err != nil {
		return nil, err
	}
	out := newValue(dt, dims)
	os := strides(dims)
	ins := make([][]int, len(args))
	same := true
	for i, a := range args {
		ins[i] = strides(a.Dims)
		if numel(a.Dims) != len(out.Data) || len(a.Dims) != len(dims) {
			same = false
		}
	}
	x := make([]float64, len(args))
	for i := range out.Data {
		for k, a := range args {
			if same {
				x[k] = a.Data[i]
			} else {
				x[k] = a.Data[broadcastIndex(i, dims, os, a.Dims, ins[k])]
			}
		}
		out.Data[i] = fn(x)
	}
	return out.finish(), nil
}

func unary(v *Value, fn func(float64) float64) *Value {
	out := newValue(v.DType, append([]int64{}, v.Dims...))
	for i, x := range v.Data {
		out.Data[i] = fn(x)
	}
	return out.finish()
}

func normAxis(a int64, rank int) (int, error) {
	if a < -int64(rank) || a >= int64(rank) {
		return 0, fmt.Errorf("axis %d out of range for rank %d", a, rank)
	}
	if a < 0 {
		a += int64(rank)
	}
	return int(a), nil
}

func ints(v *Value) []int64 {
	out := make([]int64, len(v.Data))
	for i, x := range v.Data {
		out[i] = int64(x)
	}
	return out
}

func scalar(v *Value) float64 { return v.Data[0] }
