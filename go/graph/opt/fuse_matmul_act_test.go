package opt

import (
	"math"
	"testing"

	"github.com/loomrt/loom/go/graph"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// geluTanhConsts are the constants of the tanh GELU as exporters write them.
func geluTanhConsts() []*graph.Tensor {
	return []*graph.Tensor{scalarF32("three", 3), scalarF32("kappa", 0.044715), scalarF32("beta", float32(math.Sqrt(2/math.Pi))),
		scalarF32("one", 1), scalarF32("half", 0.5), scalarF32("two", 2), scalarF32("kappa_off", 0.05), scalarF32("beta_off", 0.7)}
}

// geluTanhForms are x·½·(1+tanh(√(2/π)·(x+0.044715·x³))) reading x and writing y.
func geluTanhForms() map[string][]*graph.Node {
	return map[string][]*graph.Node{
		// transformers' NewGELU, torch.pow(x, 3.0) and 0.5 * x first.
		"pow_half_first": {graph.NewNode("pow", "Pow", []string{"x", "three"}, []string{"c"}),
			graph.NewNode("k", "Mul", []string{"kappa", "c"}, []string{"kc"}), graph.NewNode("s", "Add", []string{"x", "kc"}, []string{"sum"}),
			graph.NewNode("b", "Mul", []string{"beta", "sum"}, []string{"t"}), graph.NewNode("tanh", "Tanh", []string{"t"}, []string{"th"}),
			graph.NewNode("a", "Add", []string{"one", "th"}, []string{"p"}), graph.NewNode("h", "Mul", []string{"half", "x"}, []string{"hx"}),
			graph.NewNode("m", "Mul", []string{"hx", "p"}, []string{"y"})},
		// torch.onnx's own gelu(approximate="tanh"): x·(x·x), the ½ last.
		"mul_cube_half_last": {graph.NewNode("sq", "Mul", []string{"x", "x"}, []string{"x2"}),
			graph.NewNode("cube", "Mul", []string{"x", "x2"}, []string{"c"}), graph.NewNode("k", "Mul", []string{"kappa", "c"}, []string{"kc"}),
			graph.NewNode("s", "Add", []string{"x", "kc"}, []string{"sum"}), graph.NewNode("b", "Mul", []string{"beta", "sum"}, []string{"t"}),
			graph.NewNode("tanh", "Tanh", []string{"t"}, []string{"th"}), graph.NewNode("a", "Add", []string{"one", "th"}, []string{"p"}),
			graph.NewNode("m", "Mul", []string{"x", "p"}, []string{"q"}), graph.NewNode("h", "Mul", []string{"half", "q"}, []string{"y"})},
		// (x·x)·x, constants on the right, the ½ applied to the tanh term.
		"cube_right_half_inner": {graph.NewNode("sq", "Mul", []string{"x", "x"}, []string{"x2"}),
			graph.NewNode("cube", "Mul", []string{"x2", "x"}, []string{"c"}), graph.NewNode("k", "Mul", []string{"c", "kappa"}, []string{"kc"}),
			graph.NewNode("s", "Add", []string{"kc", "x"}, []string{"sum"}), graph.NewNode("b", "Mul", []string{"sum", "beta"}, []string{"t"}),
			graph.NewNode("tanh", "Tanh", []string{"t"}, []string{"th"}), graph.NewNode("a", "Add", []string{"th", "one"}, []string{"p"}),
			graph.NewNode("h", "Mul", []string{"p", "half"}, []string{"q"}), graph.NewNode("m", "Mul", []string{"x", "q"}, []string{"y"})},
	}
}

func TestGeluTanhFusion(t *testing.T) {
	for name, nodes := range geluTanhForms() {
		for _, opset := range []int64{17, 20} {
			m := model(t, opset, []*graph.Value{graph.Input("x", f32(3, 7))}, []string{"y"}, nodes, geluTanhConsts()...)
			after := preserves(t, m, runPass("gelu_fusion"), nil)
			require.Equal(t, map[string]int{"Gelu": 1}, opCount(after), "%s, opset %d", name, opset)
			g := onlyNode(t, after, "Gelu")
			assert.Equal(t, "tanh", g.AttrString("approximate", ""), name)
			assert.Equal(t, []string{"x"}, g.Inputs, name)
			assert.Equal(t, []string{"y"}, g.Outputs, name)
			if opset < 20 {
				assert.Equal(t, graph.LoomDomain, g.Domain, name)
			} else {
				assert.Equal(t, "", g.Domain, name)
			}
		}
	}
}

func TestGeluTanhFusionDeclines(t *testing.T) {
	base := geluTanhForms()["pow_half_first"]
	edit := func(node string, inputs ...string) []*graph.Node {
		var out []*graph.Node
		for _, n := range base {
			c := *n
			if c.Name == node {
				c.Inputs = inputs
			}
			out = append(out, &c)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		nodes   []*graph.Node
		outputs []string
	}{
		{"wrong_kappa", edit("k", "kappa_off", "c"), []string{"y"}},
		{"wrong_sqrt_2_over_pi", edit("b", "beta_off", "sum"), []string{"y"}},
		{"square_not_cube", edit("pow", "x", "two"), []string{"y"}},
		{"cube_read_twice", base, []string{"y", "c"}},
		{"tanh_read_twice", base, []string{"y", "th"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := model(t, 20, []*graph.Value{graph.Input("x", f32(3, 7))}, tc.outputs, tc.nodes, geluTanhConsts()...)
			before := opCount(m)
			after := preserves(t, m, runPass("gelu_fusion"), nil)
			assert.Equal(t, before, opCount(after))
		})
	}
}

func TestMatMulAddGeluFusion(t *testing.T) {
	for _, approx := range []string{"", "none", "tanh"} {
		var attrs []*graph.Attribute
		if approx != "" {
			attrs = append(attrs, graph.StringAttr("approximate", approx))
		}
		m := model(t, 20, []*graph.Value{graph.Input("x", f32(2, 3, 4))}, []string{"y"},
			[]*graph.Node{
				graph.NewNode("mm", "MatMul", []string{"x", "B"}, []string{"p"}),
				graph.NewNode("add", "Add", []string{"p", "C"}, []string{"h"}),
				graph.NewNode("gelu", "Gelu", []string{"h"}, []string{"y"}, attrs...),
			}, randTensor("B", 4, 5), randTensor("C", 5))
		after := preserves(t, m, runPasses("matmul_add_fusion", "matmul_activation_fusion"), nil)
		require.Equal(t, map[string]int{"MatMulAdd": 1}, opCount(after), "approximate %q", approx)
		mma := onlyNode(t, after, "MatMulAdd")
		assert.Equal(t, "Gelu", mma.AttrString("activation", ""))
		if approx == "tanh" {
			assert.Equal(t, "tanh", mma.AttrString("approximate", ""))
		} else {
			assert.Nil(t, mma.Attr("approximate"), "approximate %q", approx)
		}
		assert.Equal(t, []string{"y"}, mma.Outputs, "the graph output keeps its name")
	}
}

func TestGemmGeluFusion(t *testing.T) {
	m := model(t, 20, []*graph.Value{graph.Input("x", f32(3, 4))}, []string{"y"},
		[]*graph.Node{
			graph.NewNode("gemm", "Gemm", []string{"x", "B", "C"}, []string{"h"}, graph.FloatAttr("alpha", 1), graph.IntAttr("transB", 0)),
			graph.NewNode("gelu", "Gelu", []string{"h"}, []string{"y"}, graph.StringAttr("approximate", "tanh")),
		}, randTensor("B", 4, 5), randTensor("C", 3, 5))
	after := preserves(t, m, runPass("matmul_activation_fusion"), nil)
	require.Equal(t, map[string]int{"MatMulAdd": 1}, opCount(after))
	mma := onlyNode(t, after, "MatMulAdd")
	assert.Equal(t, graph.LoomDomain, mma.Domain)
	assert.Equal(t, []string{"x", "B", "C"}, mma.Inputs)
	assert.Equal(t, "Gelu", mma.AttrString("activation", ""))
	assert.Equal(t, "tanh", mma.AttrString("approximate", ""))
	assert.Nil(t, mma.Attr("alpha"))
	assert.Contains(t, after.Opsets, graph.LoomDomain)
}

// Through the extended level: the spelled-out GELU after MatMul and Add, before opset 20 (so
// Loom's Gelu), ends as one MatMulAdd, 2-D (by way of Gemm) or batched.
func TestMatMulActivationFusionExtended(t *testing.T) {
	erf := func() []*graph.Node {
		return []*graph.Node{graph.NewNode("div", "Div", []string{"h", "sqrt2"}, []string{"a"}), graph.NewNode("erf", "Erf", []string{"a"}, []string{"e"}),
			graph.NewNode("add1", "Add", []string{"e", "one"}, []string{"p1"}), graph.NewNode("m1", "Mul", []string{"h", "p1"}, []string{"q"}),
			graph.NewNode("m2", "Mul", []string{"q", "half"}, []string{"y"})}
	}
	tanh := func() []*graph.Node {
		var out []*graph.Node
		for _, n := range geluTanhForms()["mul_cube_half_last"] {
			for i, in := range n.Inputs {
				if in == "x" {
					n.Inputs[i] = "h"
				}
			}
			out = append(out, n)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		x      graph.Type
		gelu   func() []*graph.Node
		approx string
	}{{"erf_2d", f32(3, 4), erf, ""}, {"erf_3d", f32(2, 3, 4), erf, ""}, {"tanh_2d", f32(3, 4), tanh, "tanh"}, {"tanh_3d", f32(2, 3, 4), tanh, "tanh"}} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := append([]*graph.Node{graph.NewNode("mm", "MatMul", []string{"x", "B"}, []string{"prod"}),
				graph.NewNode("add", "Add", []string{"prod", "C"}, []string{"h"})}, tc.gelu()...)
			m := model(t, 17, []*graph.Value{graph.Input("x", tc.x)}, []string{"y"}, nodes,
				append(geluTanhConsts(), randTensor("B", 4, 5), randTensor("C", 5), scalarF32("sqrt2", float32(math.Sqrt2)))...)
			after := preserves(t, m, extended, nil)
			require.Equal(t, map[string]int{"MatMulAdd": 1}, opCount(after))
			mma := onlyNode(t, after, "MatMulAdd")
			assert.Equal(t, "Gelu", mma.AttrString("activation", ""))
			assert.Equal(t, tc.approx, mma.AttrString("approximate", ""))
			assert.Equal(t, []string{"y"}, mma.Outputs)
		})
	}
}

func TestMatMulActivationFusionDeclines(t *testing.T) {
	mm := func() []*graph.Node {
		return []*graph.Node{graph.NewNode("mm", "MatMul", []string{"x", "B"}, []string{"p"}), graph.NewNode("add", "Add", []string{"p", "C"}, []string{"h"})}
	}
	gemm := func(attrs ...*graph.Attribute) []*graph.Node {
		return []*graph.Node{graph.NewNode("gemm", "Gemm", []string{"x", "B", "C"}, []string{"h"}, attrs...)}
	}
	gelu := graph.NewNode("gelu", "Gelu", []string{"h"}, []string{"y"})
	for _, tc := range []struct {
		name    string
		inputs  []*graph.Value
		outputs []string
		nodes   []*graph.Node
	}{
		{"product_read_twice", nil, []string{"y", "z"}, append(mm(), gelu, graph.NewNode("relu", "Relu", []string{"h"}, []string{"z"}))},
		{"product_is_graph_output", nil, []string{"y", "h"}, append(mm(), gelu)},
		{"gemm_read_twice", nil, []string{"y", "z"}, append(gemm(), gelu, graph.NewNode("neg", "Neg", []string{"h"}, []string{"z"}))},
		{"gemm_transB", nil, []string{"y"}, append(gemm(graph.IntAttr("transB", 1)), gelu)},
		{"gemm_alpha", nil, []string{"y"}, append(gemm(graph.FloatAttr("alpha", 0.5)), gelu)},
		{"gemm_beta", nil, []string{"y"}, append(gemm(graph.FloatAttr("beta", 2)), gelu)},
		{"gemm_bias_not_constant", []*graph.Value{graph.Input("C", f32(5))}, []string{"y"}, append(gemm(), gelu)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// transB reads B as [N, K]: a square B keeps every variant well formed.
			inputs := append([]*graph.Value{graph.Input("x", f32(3, 5))}, tc.inputs...)
			inits := []*graph.Tensor{randTensor("B", 5, 5)}
			if tc.inputs == nil {
				inits = append(inits, randTensor("C", 5))
			}
			m := model(t, 20, inputs, tc.outputs, tc.nodes, inits...)
			require.NoError(t, runPass("matmul_add_fusion")(m))
			before := opCount(m)
			after := preserves(t, m, runPass("matmul_activation_fusion"), nil)
			assert.Equal(t, before, opCount(after))
			for _, n := range after.Graph.Nodes {
				assert.Nil(t, n.Attr("activation"), n.Name)
			}
		})
	}
}
