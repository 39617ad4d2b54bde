package graph

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/go/graph/internal/onnxpb"
)

// Tests of the expansion of model-local functions at load (functions.go).

func fnOpset(domain string, v int64) *onnxpb.OperatorSetIdProto {
	return &onnxpb.OperatorSetIdProto{Domain: proto.String(domain), Version: proto.Int64(v)}
}

func fnNode(name, op, domain string, in, out []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{Name: proto.String(name), OpType: proto.String(op), Domain: proto.String(domain), Input: in, Output: out, Attribute: attrs}
}

func refAttr(name, ref string, typ onnxpb.AttributeProto_AttributeType) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), RefAttrName: proto.String(ref), Type: typ.Enum()}
}

func floatAttrProto(name string, v float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), F: proto.Float32(v), Type: onnxpb.AttributeProto_FLOAT.Enum()}
}

// fnModel is a model over float x [2,3] whose graph is nodes, with the given functions, giving
// the outputs named.
func fnModel(nodes []*onnxpb.NodeProto, funcs []*onnxpb.FunctionProto, outputs ...string) *onnxpb.ModelProto {
	g := &onnxpb.GraphProto{Name: proto.String("main"),
		Input: []*onnxpb.ValueInfoProto{{Name: proto.String("x"), Type: typeProto(f32(2, 3))}},
		Node:  nodes}
	for _, o := range outputs {
		g.Output = append(g.Output, &onnxpb.ValueInfoProto{Name: proto.String(o)})
	}
	return &onnxpb.ModelProto{IrVersion: proto.Int64(10), OpsetImport: []*onnxpb.OperatorSetIdProto{fnOpset("", 18), fnOpset("custom", 1)}, Graph: g, Functions: funcs}
}

func loadFn(t *testing.T, mp *onnxpb.ModelProto) (*Model, error) {
	t.Helper()
	data, err := proto.Marshal(mp)
	require.NoError(t, err)
	return LoadBytesWithOptions(data, LoadOptions{Name: "fn.onnx"})
}

// scaledAdd: Z = LeakyRelu(X*Y + X, alpha=@alpha) with alpha defaulting to 0.5, and a second
// output T = X*Y.
func scaledAdd() *onnxpb.FunctionProto {
	return &onnxpb.FunctionProto{Name: proto.String("ScaledAdd"), Domain: proto.String("custom"),
		Input: []string{"X", "Y"}, Output: []string{"Z", "T"},
		AttributeProto: []*onnxpb.AttributeProto{floatAttrProto("alpha", 0.5)},
		OpsetImport:    []*onnxpb.OperatorSetIdProto{fnOpset("", 18)},
		Node: []*onnxpb.NodeProto{
			fnNode("mul", "Mul", "", []string{"X", "Y"}, []string{"T"}),
			fnNode("add", "Add", "", []string{"T", "X"}, []string{"s"}),
			fnNode("act", "LeakyRelu", "", []string{"s"}, []string{"Z"}, refAttr("alpha", "alpha", onnxpb.AttributeProto_FLOAT)),
		}}
}

func TestFunctionsExpandAtLoad(t *testing.T) {
	mp := fnModel([]*onnxpb.NodeProto{
		fnNode("call1", "ScaledAdd", "custom", []string{"x", "x"}, []string{"y1"}, floatAttrProto("alpha", 0.25)),
		fnNode("call2", "ScaledAdd", "custom", []string{"y1", "x"}, []string{"y2", "t2"}),
	}, []*onnxpb.FunctionProto{scaledAdd()}, "y2", "t2")
	m, err := loadFn(t, mp)
	require.NoError(t, err)
	require.Len(t, m.Graph.Nodes, 6, "two calls of a three-node body")
	outs := map[string]bool{}
	names := map[string]bool{}
	alphas := []float32{}
	for _, n := range m.Graph.Nodes {
		assert.NotEqual(t, "ScaledAdd", n.OpType, "a call survived")
		assert.False(t, names[n.Name], "node name %q twice", n.Name)
		names[n.Name] = true
		for _, o := range n.Outputs {
			assert.False(t, outs[o], "value %q defined twice", o)
			outs[o] = true
		}
		if n.OpType == "LeakyRelu" {
			alphas = append(alphas, n.AttrFloat("alpha", -1))
			assert.Empty(t, n.Attr("alpha").RefAttrName)
		}
	}
	assert.Equal(t, []float32{0.25, 0.5}, alphas, "the caller's alpha, then the function's default")
	assert.True(t, outs["y1"] && outs["y2"] && outs["t2"], "formal outputs bound to the call's outputs: %v", outs)
	assert.True(t, strings.HasPrefix(m.Graph.Nodes[0].Name, "call1/"), m.Graph.Nodes[0].Name)
	require.NoError(t, m.Check())
	assert.Len(t, m.Functions, 1, "the function stays listed")
}

func TestFunctionsNestedAndSubgraphs(t *testing.T) {
	// Outer calls Inner twice and holds an If whose branches read Outer's input and call Inner.
	inner := &onnxpb.FunctionProto{Name: proto.String("Inner"), Domain: proto.String("custom"),
		Input: []string{"A"}, Output: []string{"B"}, OpsetImport: []*onnxpb.OperatorSetIdProto{fnOpset("", 18)},
		Node: []*onnxpb.NodeProto{fnNode("neg", "Neg", "", []string{"A"}, []string{"B"})}}
	branch := func(name string) *onnxpb.AttributeProto {
		return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_GRAPH.Enum(), G: &onnxpb.GraphProto{Name: proto.String(name),
			Node:   []*onnxpb.NodeProto{fnNode("in_branch", "Inner", "custom", []string{"P"}, []string{"r"})},
			Output: []*onnxpb.ValueInfoProto{{Name: proto.String("r")}}}}
	}
	outer := &onnxpb.FunctionProto{Name: proto.String("Outer"), Domain: proto.String("custom"),
		Input: []string{"P", "C"}, Output: []string{"Q"}, OpsetImport: []*onnxpb.OperatorSetIdProto{fnOpset("", 18), fnOpset("custom", 1)},
		Node: []*onnxpb.NodeProto{
			fnNode("i1", "Inner", "custom", []string{"P"}, []string{"u"}),
			fnNode("if", "If", "", []string{"C"}, []string{"v"}, branch("then_branch"), branch("else_branch")),
			fnNode("sum", "Add", "", []string{"u", "v"}, []string{"Q"}),
		}}
	mp := fnModel([]*onnxpb.NodeProto{
		fnNode("c", "Constant", "", nil, []string{"cond"}, &onnxpb.AttributeProto{Name: proto.String("value"), Type: onnxpb.AttributeProto_TENSOR.Enum(),
			T: &onnxpb.TensorProto{DataType: proto.Int32(int32(Bool)), Int32Data: []int32{1}}}),
		fnNode("o1", "Outer", "custom", []string{"x", "cond"}, []string{"y1"}),
		fnNode("o2", "Outer", "custom", []string{"y1", "cond"}, []string{"y2"}),
	}, []*onnxpb.FunctionProto{outer, inner}, "y2")
	m, err := loadFn(t, mp)
	require.NoError(t, err)
	defined := map[string]int{}
	m.Graph.Walk(func(g *Graph) {
		for _, n := range g.Nodes {
			assert.NotContains(t, []string{"Inner", "Outer"}, n.OpType, "a call survived in %s", g.Name)
			for _, o := range n.Outputs {
				defined[o]++
			}
		}
	})
	for name, k := range defined {
		assert.Equal(t, 1, k, "%q defined %d times in the model", name, k)
	}
	// The If's branches read the calls' inputs (x, then y1) from the enclosing scope.
	var ifs []*Node
	for _, n := range m.Graph.Nodes {
		if n.OpType == "If" {
			ifs = append(ifs, n)
		}
	}
	require.Len(t, ifs, 2)
	assert.Equal(t, []string{"x"}, ifs[0].ImplicitInputs())
	assert.Equal(t, []string{"y1"}, ifs[1].ImplicitInputs())
	require.NoError(t, m.Check())
}

func TestFunctionsCallInsideSubgraph(t *testing.T) {
	inner := &onnxpb.FunctionProto{Name: proto.String("Inner"), Domain: proto.String("custom"),
		Input: []string{"A"}, Output: []string{"B"}, OpsetImport: []*onnxpb.OperatorSetIdProto{fnOpset("", 18)},
		Node: []*onnxpb.NodeProto{fnNode("neg", "Neg", "", []string{"A"}, []string{"B"})}}
	then := &onnxpb.AttributeProto{Name: proto.String("then_branch"), Type: onnxpb.AttributeProto_GRAPH.Enum(), G: &onnxpb.GraphProto{Name: proto.String("then"),
		Node:   []*onnxpb.NodeProto{fnNode("call", "Inner", "custom", []string{"x"}, []string{"r"})},
		Output: []*onnxpb.ValueInfoProto{{Name: proto.String("r")}}}}
	els := &onnxpb.AttributeProto{Name: proto.String("else_branch"), Type: onnxpb.AttributeProto_GRAPH.Enum(), G: &onnxpb.GraphProto{Name: proto.String("else"),
		Node:   []*onnxpb.NodeProto{fnNode("id", "Identity", "", []string{"x"}, []string{"r2"})},
		Output: []*onnxpb.ValueInfoProto{{Name: proto.String("r2")}}}}
	mp := fnModel([]*onnxpb.NodeProto{
		fnNode("c", "Constant", "", nil, []string{"cond"}, &onnxpb.AttributeProto{Name: proto.String("value"), Type: onnxpb.AttributeProto_TENSOR.Enum(),
			T: &onnxpb.TensorProto{DataType: proto.Int32(int32(Bool)), Int32Data: []int32{1}}}),
		fnNode("if", "If", "", []string{"cond"}, []string{"y"}, then, els),
	}, []*onnxpb.FunctionProto{inner}, "y")
	m, err := loadFn(t, mp)
	require.NoError(t, err)
	body := m.Graph.Nodes[1].Attr("then_branch").Graph
	require.Len(t, body.Nodes, 1)
	assert.Equal(t, "Neg", body.Nodes[0].OpType)
	assert.Equal(t, []string{"x"}, body.Nodes[0].Inputs)
	assert.Equal(t, []string{"r"}, body.Nodes[0].Outputs)
}

func TestFunctionsOptionalInputsAndOutputs(t *testing.T) {
	// Clip's min and max come from optional formal inputs; the call omits the second output.
	f := &onnxpb.FunctionProto{Name: proto.String("Clamp"), Domain: proto.String("custom"),
		Input: []string{"X", "Lo", "Hi"}, Output: []string{"Y", "Extra"}, OpsetImport: []*onnxpb.OperatorSetIdProto{fnOpset("", 18)},
		Node: []*onnxpb.NodeProto{
			fnNode("clip", "Clip", "", []string{"X", "Lo", "Hi"}, []string{"Y"}),
			fnNode("extra", "Identity", "", []string{"X"}, []string{"Extra"}),
		}}
	mp := fnModel([]*onnxpb.NodeProto{fnNode("call", "Clamp", "custom", []string{"x"}, []string{"y"})}, []*onnxpb.FunctionProto{f}, "y")
	m, err := loadFn(t, mp)
	require.NoError(t, err)
	require.Len(t, m.Graph.Nodes, 2)
	assert.Equal(t, []string{"x", "", ""}, m.Graph.Nodes[0].Inputs, "missing optional inputs stay missing")
	extra := m.Graph.Nodes[1].Outputs[0]
	assert.NotEmpty(t, extra)
	assert.NotEqual(t, "Extra", extra, "an unbound output gets a fresh name")
}

func TestFunctionsAddImportedDomains(t *testing.T) {
	// The function imports ai.onnx.ml, which the model does not: expansion imports it.
	f := &onnxpb.FunctionProto{Name: proto.String("Bin"), Domain: proto.String("custom"),
		Input: []string{"X"}, Output: []string{"Y"}, OpsetImport: []*onnxpb.OperatorSetIdProto{fnOpset("ai.onnx.ml", 1)},
		Node: []*onnxpb.NodeProto{fnNode("b", "Binarizer", "ai.onnx.ml", []string{"X"}, []string{"Y"})}}
	m, err := loadFn(t, fnModel([]*onnxpb.NodeProto{fnNode("call", "Bin", "custom", []string{"x"}, []string{"y"})}, []*onnxpb.FunctionProto{f}, "y"))
	require.NoError(t, err)
	assert.Equal(t, int64(1), m.Opsets["ai.onnx.ml"])
	require.NoError(t, m.Check())
}

func TestFunctionsErrors(t *testing.T) {
	self := &onnxpb.FunctionProto{Name: proto.String("Loop1"), Domain: proto.String("custom"), Input: []string{"X"}, Output: []string{"Y"},
		OpsetImport: []*onnxpb.OperatorSetIdProto{fnOpset("custom", 1)},
		Node:        []*onnxpb.NodeProto{fnNode("again", "Loop2", "custom", []string{"X"}, []string{"Y"})}}
	other := &onnxpb.FunctionProto{Name: proto.String("Loop2"), Domain: proto.String("custom"), Input: []string{"X"}, Output: []string{"Y"},
		OpsetImport: []*onnxpb.OperatorSetIdProto{fnOpset("custom", 1)},
		Node:        []*onnxpb.NodeProto{fnNode("back", "Loop1", "custom", []string{"X"}, []string{"Y"})}}
	undeclaredRef := &onnxpb.FunctionProto{Name: proto.String("BadRef"), Domain: proto.String("custom"), Input: []string{"X"}, Output: []string{"Y"},
		OpsetImport: []*onnxpb.OperatorSetIdProto{fnOpset("", 18)},
		Node:        []*onnxpb.NodeProto{fnNode("act", "LeakyRelu", "", []string{"X"}, []string{"Y"}, refAttr("alpha", "slope", onnxpb.AttributeProto_FLOAT))}}
	outsider := &onnxpb.FunctionProto{Name: proto.String("Outsider"), Domain: proto.String("custom"), Input: []string{"X"}, Output: []string{"Y"},
		OpsetImport: []*onnxpb.OperatorSetIdProto{fnOpset("", 18)},
		Node:        []*onnxpb.NodeProto{fnNode("add", "Add", "", []string{"X", "x"}, []string{"Y"})}}
	// ReduceSum changed at opset 13 (axes became an input): the function's 11 and the model's
	// 18 disagree about it.
	oldOpset := &onnxpb.FunctionProto{Name: proto.String("Old"), Domain: proto.String("custom"), Input: []string{"X"}, Output: []string{"Y"},
		OpsetImport: []*onnxpb.OperatorSetIdProto{fnOpset("", 11)},
		Node:        []*onnxpb.NodeProto{fnNode("rs", "ReduceSum", "", []string{"X"}, []string{"Y"})}}
	// Cast requires its "to": a call that neither gives dtype nor has a default cannot expand.
	needsTo := &onnxpb.FunctionProto{Name: proto.String("ToType"), Domain: proto.String("custom"), Input: []string{"X"}, Output: []string{"Y"},
		Attribute:   []string{"dtype"},
		OpsetImport: []*onnxpb.OperatorSetIdProto{fnOpset("", 18)},
		Node:        []*onnxpb.NodeProto{fnNode("cast", "Cast", "", []string{"X"}, []string{"Y"}, refAttr("to", "dtype", onnxpb.AttributeProto_INT))}}
	cases := []struct {
		name  string
		node  *onnxpb.NodeProto
		funcs []*onnxpb.FunctionProto
		want  []string
	}{
		{"recursion", fnNode("start", "Loop1", "custom", []string{"x"}, []string{"y"}), []*onnxpb.FunctionProto{self, other},
			[]string{"start", "calls itself", "custom.Loop1 -> custom.Loop2 -> custom.Loop1"}},
		{"undeclared attribute", fnNode("call", "ScaledAdd", "custom", []string{"x", "x"}, []string{"y"}, floatAttrProto("beta", 1)), []*onnxpb.FunctionProto{scaledAdd()},
			[]string{"call", "function custom.ScaledAdd", `attribute "beta" is not an attribute of the function (it declares alpha)`}},
		{"reference to an undeclared attribute", fnNode("call", "BadRef", "custom", []string{"x"}, []string{"y"}), []*onnxpb.FunctionProto{undeclaredRef},
			[]string{"call", "function custom.BadRef", `refers to "slope", which the function does not declare`}},
		{"wrong attribute type", fnNode("call", "ScaledAdd", "custom", []string{"x", "x"}, []string{"y"}, &onnxpb.AttributeProto{Name: proto.String("alpha"), I: proto.Int64(2), Type: onnxpb.AttributeProto_INT.Enum()}), []*onnxpb.FunctionProto{scaledAdd()},
			[]string{"call", `attribute "alpha" is INT`}},
		{"body reads an outer name", fnNode("call", "Outsider", "custom", []string{"x"}, []string{"y"}), []*onnxpb.FunctionProto{outsider},
			[]string{"call", "function custom.Outsider", `reads "x", which is neither an input of the function nor an output of a body node`}},
		{"too many inputs", fnNode("call", "ScaledAdd", "custom", []string{"x", "x", "x"}, []string{"y"}), []*onnxpb.FunctionProto{scaledAdd()},
			[]string{"call", "the node has 3 inputs, the function takes 2"}},
		{"opsets disagree", fnNode("call", "Old", "custom", []string{"x"}, []string{"y"}), []*onnxpb.FunctionProto{oldOpset},
			[]string{"call", "imports ai.onnx opset 11 and the model 18", "ReduceSum resolves to different versions (11 and 13)"}},
		{"required attribute missing", fnNode("call", "ToType", "custom", []string{"x"}, []string{"y"}), []*onnxpb.FunctionProto{needsTo},
			[]string{"call", "function custom.ToType", `attribute "dtype" is not given and has no default, but body node cast (Cast) requires it as "to"`}},
		{"defined twice", fnNode("call", "ScaledAdd", "custom", []string{"x", "x"}, []string{"y"}), []*onnxpb.FunctionProto{scaledAdd(), scaledAdd()},
			[]string{"function custom.ScaledAdd is defined twice"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadFn(t, fnModel([]*onnxpb.NodeProto{c.node}, c.funcs, "y"))
			require.Error(t, err)
			var ge *Error
			require.True(t, errors.As(err, &ge), "%T %v", err, err)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestFunctionsNodeLimit(t *testing.T) {
	// F_k calls F_{k-1} twice: 2^20 nodes from 21 small functions, over a limit of 1000.
	var funcs []*onnxpb.FunctionProto
	funcs = append(funcs, &onnxpb.FunctionProto{Name: proto.String("F0"), Domain: proto.String("custom"), Input: []string{"X"}, Output: []string{"Y"},
		OpsetImport: []*onnxpb.OperatorSetIdProto{fnOpset("", 18)}, Node: []*onnxpb.NodeProto{fnNode("n", "Neg", "", []string{"X"}, []string{"Y"})}})
	name := func(k int) string { return "F" + strings.Repeat("I", k) }
	funcs[0].Name = proto.String(name(0))
	for k := 1; k <= 20; k++ {
		funcs = append(funcs, &onnxpb.FunctionProto{Name: proto.String(name(k)), Domain: proto.String("custom"), Input: []string{"X"}, Output: []string{"Y"},
			OpsetImport: []*onnxpb.OperatorSetIdProto{fnOpset("custom", 1)},
			Node: []*onnxpb.NodeProto{
				fnNode("a", name(k-1), "custom", []string{"X"}, []string{"m"}),
				fnNode("b", name(k-1), "custom", []string{"m"}, []string{"Y"}),
			}})
	}
	data, err := proto.Marshal(fnModel([]*onnxpb.NodeProto{fnNode("top", name(20), "custom", []string{"x"}, []string{"y"})}, funcs, "y"))
	require.NoError(t, err)
	_, err = LoadBytesWithOptions(data, LoadOptions{Name: "fn.onnx", Limits: Limits{MaxNodes: 1000}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "more than 1000 nodes")
}
