package infer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
)

func TestInferenceContradictsDeclared(t *testing.T) {
	m := buildModel(t, []*graph.Value{graph.Input("a", f32(2, 3)), graph.Input("b", f32(3, 4))}, []*graph.Value{graph.Output("y", f32(2, 5))},
		[]*graph.Node{graph.NewNode("mm", "MatMul", []string{"a", "b"}, []string{"y"})}, nil)
	err := Shapes(m)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `node "mm" (MatMul) value "y": declared type tensor(float)[2,5] contradicts inferred type tensor(float)[2,4]`)
}

func TestSignatureValueSelectsIfBranch(t *testing.T) {
	wide := &graph.Graph{Name: "wide", Outputs: []*graph.Value{graph.Output("w", graph.Type{})}, Nodes: []*graph.Node{graph.NewNode("cat", "Concat", []string{"x", "x"}, []string{"w"}, graph.IntAttr("axis", 1))}}
	narrow := &graph.Graph{Name: "narrow", Outputs: []*graph.Value{graph.Output("n", graph.Type{})}, Nodes: []*graph.Node{graph.NewNode("neg", "Neg", []string{"x"}, []string{"n"})}}
	m := buildModel(t, []*graph.Value{graph.Input("x", f32(2, 3)), graph.Input("sr", graph.TensorType(graph.Int64, graph.Shape{}))}, []*graph.Value{graph.Output("y", graph.Type{})},
		[]*graph.Node{
			graph.NewNode("eq", "Equal", []string{"sr", "k"}, []string{"c"}),
			graph.NewNode("if", "If", []string{"c"}, []string{"y"}, &graph.Attribute{Name: "then_branch", Type: graph.AttrGraph, Graph: wide}, &graph.Attribute{Name: "else_branch", Type: graph.AttrGraph, Graph: narrow}),
		}, []*graph.Tensor{graph.TensorFromInt64("k", nil, []int64{16000})})
	require.NoError(t, Shapes(m))
	assert.Equal(t, "tensor(float)[2,?]", m.Graph.Outputs[0].Type.String())
	require.NoError(t, ShapesFor(m, Signature{Values: map[string]*graph.Tensor{"sr": graph.TensorFromInt64("sr", nil, []int64{16000})}}))
	assert.Equal(t, "tensor(float)[2,6]", m.Graph.Outputs[0].Type.String())
	require.NoError(t, ShapesFor(m, Signature{Values: map[string]*graph.Tensor{"sr": graph.TensorFromInt64("sr", nil, []int64{8000})}}))
	assert.Equal(t, "tensor(float)[2,3]", m.Graph.Outputs[0].Type.String())
	err := ShapesFor(m, Signature{Values: map[string]*graph.Tensor{"sr": graph.TensorFromFloat32("sr", nil, []float32{1})}})
	require.Error(t, err)
	err = ShapesFor(m, Signature{Shapes: map[string]graph.Shape{"nope": graph.ShapeOf(1)}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no graph input")
}

// TestSubgraphOuterReferenceShapes infers through an If whose branches read a value of the
// enclosing graph that a later node in the list produces (go/graph sorts it first).
func TestSubgraphOuterReferenceShapes(t *testing.T) {
	then := &graph.Graph{Name: "then", Outputs: []*graph.Value{graph.Output("t_out", graph.Type{})},
		Nodes: []*graph.Node{graph.NewNode("t", "Neg", []string{"outer"}, []string{"t_out"})}}
	els := &graph.Graph{Name: "else", Outputs: []*graph.Value{graph.Output("e_out", graph.Type{})},
		Nodes: []*graph.Node{graph.NewNode("e", "Relu", []string{"outer"}, []string{"e_out"})}}
	ifNode := graph.NewNode("if", "If", []string{"cond"}, []string{"y"},
		&graph.Attribute{Name: "then_branch", Type: graph.AttrGraph, Graph: then}, &graph.Attribute{Name: "else_branch", Type: graph.AttrGraph, Graph: els})
	m := buildModel(t, []*graph.Value{graph.Input("x", f32(4, 2)), graph.Input("cond", graph.TensorType(graph.Bool, graph.Shape{}))}, []*graph.Value{graph.Output("y", graph.Type{})},
		[]*graph.Node{ifNode, graph.NewNode("mk", "Abs", []string{"x"}, []string{"outer"})}, nil)
	require.NoError(t, Shapes(m))
	assert.Equal(t, "tensor(float)[4,2]", m.Graph.Outputs[0].Type.String())

	back := roundTrip(t, m)
	require.NoError(t, Shapes(back))
	assert.Equal(t, "tensor(float)[4,2]", back.Graph.Outputs[0].Type.String())
}

// TestRoundTripShapes infers a reloaded model's output from a symbolic input.
func TestRoundTripShapes(t *testing.T) {
	m := buildModel(t, []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("N"), graph.DimOf(3)}))}, []*graph.Value{graph.Output("y", graph.Type{})},
		[]*graph.Node{graph.NewNode("r", "Relu", []string{"x"}, []string{"y"})}, nil, 21)
	back := roundTrip(t, m)
	require.NoError(t, Shapes(back))
	assert.Equal(t, "tensor(float)[N,3]", back.Graph.Outputs[0].Type.String())
}

// An empty axes list of Squeeze (the opset-11 attribute, or an empty opset-13 axes input)
// squeezes every dimension of size 1, as the session's Squeeze does: a plan built from these
// shapes once disagreed with the interpreter (FuzzRunOneOp).
func TestSqueezeEmptyAxesSqueezesAllOnes(t *testing.T) {
	for _, tc := range []struct {
		opset int64
		node  *graph.Node
		inits []*graph.Tensor
	}{
		{11, graph.NewNode("sq", "Squeeze", []string{"x"}, []string{"y"}, graph.IntsAttr("axes")), nil},
		{13, graph.NewNode("sq", "Squeeze", []string{"x", "axes"}, []string{"y"}), []*graph.Tensor{graph.TensorFromInt64("axes", []int64{0}, nil)}},
		{11, graph.NewNode("sq", "Squeeze", []string{"x"}, []string{"y"}), nil},
	} {
		m := buildModel(t, []*graph.Value{graph.Input("x", f32(0, 1, 3, 1))}, []*graph.Value{graph.Output("y", graph.Type{})},
			[]*graph.Node{tc.node}, tc.inits, tc.opset)
		require.NoError(t, Shapes(m))
		assert.Equal(t, "tensor(float)[0,3]", m.Graph.Outputs[0].Type.String(), "opset %d, inputs %v", tc.opset, tc.node.Inputs)
	}
}
