package graph

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestInspect(t *testing.T) {
	m := buildModel(t, []*Value{Input("x", TensorType(Float, Shape{SymDim("N"), DimOf(4)}))}, []*Value{Output("y", TensorType(Float, Shape{SymDim("N"), DimOf(3)}))},
		[]*Node{NewNode("mm", "MatMul", []string{"x", "w"}, []string{"a"}), NewNode("r1", "Relu", []string{"a"}, []string{"b"}),
			NewNode("r2", "Relu", []string{"b"}, []string{"y"})},
		[]*Tensor{TensorFromFloat32("w", []int64{4, 3}, make([]float32, 12))})
	m.Passes = append(m.Passes, PassResult{Name: "dead_code_elimination", NodesBefore: 4, NodesAfter: 3, Changed: true})
	r := Inspect(m)
	assert.Equal(t, []IOInfo{{"x", "tensor(float)[N,4]"}}, r.Inputs)
	assert.Equal(t, []IOInfo{{"y", "tensor(float)[N,3]"}}, r.Outputs)
	assert.Equal(t, []OpCount{{"Relu", 2}, {"MatMul", 1}}, r.Ops)
	assert.Equal(t, int64(12), r.Parameters)
	assert.Equal(t, int64(48), r.ParameterBytes)
	assert.Equal(t, map[string]int64{"ai.onnx": 17}, r.Opsets)
	s := r.String()
	assert.Contains(t, s, "input     x: tensor(float)[N,4]")
	assert.Contains(t, s, "Relu×2, MatMul×1")
	assert.Contains(t, s, "dead_code_elimination")
	assert.Contains(t, s, "4 -> 3 nodes")
	assert.Contains(t, s, "12 parameters, 48 B")
}
