package opt

import (
	"testing"

	"github.com/loomrt/loom/go/graph"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func scalarF32(name string, v float32, dims ...int64) *graph.Tensor {
	return graph.TensorFromFloat32(name, dims, []float32{v})
}

func runPasses(names ...string) func(*graph.Model) error {
	return func(m *graph.Model) error {
		for _, name := range names {
			if err := runPass(name)(m); err != nil {
				return err
			}
		}
		return nil
	}
}

func extended(m *graph.Model) error { return Optimize(m, LevelExtended) }

func onlyNode(t *testing.T, m *graph.Model, op string) *graph.Node {
	t.Helper()
	var found *graph.Node
	for _, n := range m.Graph.Nodes {
		if n.OpType == op {
			require.Nil(t, found, "two %s nodes", op)
			found = n
		}
	}
	require.NotNil(t, found, "no %s node", op)
	return found
}

func TestConvMulFusion(t *testing.T) {
	for _, scale := range []*graph.Tensor{randTensor("s", 4, 1, 1), randTensor("s", 1, 4, 1, 1), randTensor("s", 1), randTensor("s")} {
		for _, bias := range []bool{true, false} {
			for _, convFirst := range []bool{true, false} {
				convIn := []string{"x", "W"}
				if bias {
					convIn = append(convIn, "B")
				}
				mulIn := []string{"a", "s"}
				if !convFirst {
					mulIn = []string{"s", "a"}
				}
				m := model(t, 17, []*graph.Value{graph.Input("x", f32(2, 3, 6, 5))}, []string{"y"},
					[]*graph.Node{
						graph.NewNode("conv", "Conv", convIn, []string{"a"}, graph.IntsAttr("pads", 1, 1, 1, 1), graph.IntAttr("group", 1)),
						graph.NewNode("mul", "Mul", mulIn, []string{"y"}),
					}, randTensor("W", 4, 3, 3, 3), randTensor("B", 4), scale)
				after := preserves(t, m, runPass("conv_mul_fusion"), nil)
				assert.Equal(t, map[string]int{"Conv": 1}, opCount(after), "scale %v, bias %v", scale.Dims, bias)
				assert.Len(t, after.Graph.Nodes[0].Inputs, len(convIn), "a bias only where there was one")
			}
		}
	}
}

func TestConvMulAddCollapse(t *testing.T) {
	// Conv, then the per-channel scale and shift of an unfused BatchNormalization, in both
	// orders and with a second shift: all of it folds into the Conv.
	for _, chain := range [][]*graph.Node{
		{graph.NewNode("mul", "Mul", []string{"s", "a"}, []string{"b"}), graph.NewNode("add", "Add", []string{"b", "t"}, []string{"y"})},
		{graph.NewNode("add", "Add", []string{"a", "t"}, []string{"b"}), graph.NewNode("mul", "Mul", []string{"b", "s"}, []string{"c"}),
			graph.NewNode("add2", "Add", []string{"c", "t2"}, []string{"y"})},
	} {
		nodes := append([]*graph.Node{graph.NewNode("conv", "Conv", []string{"x", "W", "B"}, []string{"a"}, graph.IntsAttr("strides", 2, 2))}, chain...)
		m := model(t, 17, []*graph.Value{graph.Input("x", f32(1, 3, 9, 8))}, []string{"y"}, nodes,
			randTensor("W", 5, 3, 2, 2), randTensor("B", 5), randTensor("s", 1, 5, 1, 1), randTensor("t", 5, 1, 1), randTensor("t2", 1))
		after := preserves(t, m, extended, nil)
		assert.Equal(t, map[string]int{"Conv": 1}, opCount(after))
	}
}

func TestConvMulFusionDeclines(t *testing.T) {
	conv := graph.NewNode("conv", "Conv", []string{"x", "W", "B"}, []string{"a"})
	for _, tc := range []struct {
		name    string
		inputs  []*graph.Value
		outputs []string
		nodes   []*graph.Node
	}{
		// [4] broadcasts along the width, not the channels.
		{"not_per_channel", nil, []string{"y"}, []*graph.Node{graph.NewNode("mul", "Mul", []string{"a", "s4"}, []string{"y"})}},
		{"second_reader", nil, []string{"y", "z"}, []*graph.Node{graph.NewNode("mul", "Mul", []string{"a", "s"}, []string{"y"}),
			graph.NewNode("relu", "Relu", []string{"a"}, []string{"z"})}},
		{"graph_output_between", nil, []string{"y", "a"}, []*graph.Node{graph.NewNode("mul", "Mul", []string{"a", "s"}, []string{"y"})}},
		{"not_constant", []*graph.Value{graph.Input("v", f32(4, 1, 1))}, []string{"y"}, []*graph.Node{graph.NewNode("mul", "Mul", []string{"a", "v"}, []string{"y"})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := *conv
			inputs := append([]*graph.Value{graph.Input("x", f32(1, 3, 6, 6))}, tc.inputs...)
			m := model(t, 17, inputs, tc.outputs, append([]*graph.Node{&c}, tc.nodes...),
				randTensor("W", 4, 3, 3, 3), randTensor("B", 4), randTensor("s", 4, 1, 1), randTensor("s4", 4))
			before := opCount(m)
			after := preserves(t, m, runPass("conv_mul_fusion"), nil)
			assert.Equal(t, before, opCount(after))
		})
	}
}

// hardSwishForms are x·clip(x+3, 0, 6)/6 as exporters write it, reading x and writing y.
func hardSwishForms() map[string]struct {
	opset int64
	nodes []*graph.Node
} {
	clipIn := []string{"p", "zero", "six"}
	return map[string]struct {
		opset int64
		nodes []*graph.Node
	}{
		// paddle2onnx (PP-OCR): Clip bounds as attributes, the division last.
		"clip_attrs_div_last": {9, []*graph.Node{graph.NewNode("add", "Add", []string{"x", "three"}, []string{"p"}),
			graph.NewNode("clip", "Clip", []string{"p"}, []string{"c"}, graph.FloatAttr("min", 0), graph.FloatAttr("max", 6)),
			graph.NewNode("mul", "Mul", []string{"x", "c"}, []string{"q"}), graph.NewNode("div", "Div", []string{"q", "six"}, []string{"y"})}},
		"clip_inputs_mul_sixth_last": {13, []*graph.Node{graph.NewNode("add", "Add", []string{"three", "x"}, []string{"p"}),
			graph.NewNode("clip", "Clip", clipIn, []string{"c"}),
			graph.NewNode("mul", "Mul", []string{"c", "x"}, []string{"q"}), graph.NewNode("m6", "Mul", []string{"sixth", "q"}, []string{"y"})}},
		"div_on_clip": {17, []*graph.Node{graph.NewNode("add", "Add", []string{"x", "three"}, []string{"p"}),
			graph.NewNode("clip", "Clip", clipIn, []string{"c"}),
			graph.NewNode("div", "Div", []string{"c", "six"}, []string{"q"}), graph.NewNode("mul", "Mul", []string{"x", "q"}, []string{"y"})}},
		"mul_sixth_on_clip": {17, []*graph.Node{graph.NewNode("add", "Add", []string{"x", "three"}, []string{"p"}),
			graph.NewNode("clip", "Clip", clipIn, []string{"c"}),
			graph.NewNode("m6", "Mul", []string{"c", "sixth"}, []string{"q"}), graph.NewNode("mul", "Mul", []string{"q", "x"}, []string{"y"})}},
		// ONNX's own expansion of HardSwish.
		"hard_sigmoid": {17, []*graph.Node{graph.NewNode("hs", "HardSigmoid", []string{"x"}, []string{"h"},
			graph.FloatAttr("alpha", 1.0/6), graph.FloatAttr("beta", 0.5)), graph.NewNode("mul", "Mul", []string{"x", "h"}, []string{"y"})}},
	}
}

func hardSwishConstants() []*graph.Tensor {
	return []*graph.Tensor{scalarF32("three", 3), scalarF32("six", 6), scalarF32("zero", 0), scalarF32("sixth", 1.0/6, 1)}
}

func TestHardSwishFusion(t *testing.T) {
	for name, form := range hardSwishForms() {
		t.Run(name, func(t *testing.T) {
			// x spans hard swish's bends at ±3.
			nodes := append([]*graph.Node{graph.NewNode("scale", "Mul", []string{"in", "four"}, []string{"x"})}, form.nodes...)
			m := model(t, form.opset, []*graph.Value{graph.Input("in", f32(2, 3, 5))}, []string{"y"}, nodes,
				append(hardSwishConstants(), scalarF32("four", 4))...)
			after := preserves(t, m, runPass("hardswish_fusion"), nil)
			assert.Equal(t, map[string]int{"Mul": 1, "HardSwish": 1}, opCount(after))
			hs := onlyNode(t, after, "HardSwish")
			if form.opset < 14 {
				assert.Equal(t, graph.LoomDomain, hs.Domain)
			} else {
				assert.Equal(t, "", hs.Domain)
			}
			assert.Equal(t, []string{"y"}, hs.Outputs)
		})
	}
}

func TestHardSwishFusionDeclines(t *testing.T) {
	base := hardSwishForms()["div_on_clip"].nodes
	withOp := func(i int, n *graph.Node) []*graph.Node {
		nodes := append([]*graph.Node{}, base...)
		nodes[i] = n
		return nodes
	}
	for _, tc := range []struct {
		name    string
		nodes   []*graph.Node
		outputs []string
	}{
		{"clip_to_5", withOp(1, graph.NewNode("clip", "Clip", []string{"p", "zero", "five"}, []string{"c"})), []string{"y"}},
		{"add_2", withOp(0, graph.NewNode("add", "Add", []string{"x", "two"}, []string{"p"})), []string{"y"}},
		{"divide_by_5", withOp(2, graph.NewNode("div", "Div", []string{"c", "five"}, []string{"q"})), []string{"y"}},
		{"other_factor", withOp(3, graph.NewNode("mul", "Mul", []string{"z", "q"}, []string{"y"})), []string{"y"}},
		{"intermediate_is_output", base, []string{"y", "c"}},
		{"shifted_is_output", base, []string{"y", "p"}},
		{"hard_sigmoid_alpha", []*graph.Node{graph.NewNode("hs", "HardSigmoid", []string{"x"}, []string{"h"}),
			graph.NewNode("mul", "Mul", []string{"x", "h"}, []string{"y"})}, []string{"y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := model(t, 17, []*graph.Value{graph.Input("x", f32(2, 7)), graph.Input("z", f32(2, 7))}, tc.outputs, tc.nodes,
				append(hardSwishConstants(), scalarF32("two", 2), scalarF32("five", 5))...)
			before := opCount(m)
			after := preserves(t, m, runPass("hardswish_fusion"), nil)
			assert.Equal(t, before, opCount(after))
		})
	}
}

// convBlock is Conv (with a BatchNormalization left as a scalar Mul and Add, as
// paddle2onnx writes PP-OCR) followed by act's nodes reading "a" and writing "h".
func convBlockModel(t *testing.T, opset int64, outputs []string, act []*graph.Node, inits ...*graph.Tensor) *graph.Model {
	nodes := []*graph.Node{
		graph.NewNode("conv", "Conv", []string{"x", "W", "B"}, []string{"c0"}, graph.IntsAttr("pads", 1, 1, 1, 1)),
		graph.NewNode("bn_mul", "Mul", []string{"bn_s", "c0"}, []string{"c1"}),
		graph.NewNode("bn_add", "Add", []string{"c1", "bn_t"}, []string{"a"}),
	}
	inits = append(inits, randTensor("W", 6, 4, 3, 3), randTensor("B", 6), scalarF32("bn_s", 2.5, 1), scalarF32("bn_t", 0.3, 1))
	return model(t, opset, []*graph.Value{graph.Input("x", f32(1, 4, 7, 9))}, outputs, append(nodes, act...), inits...)
}

func TestConvHardSwishFusion(t *testing.T) {
	for name, form := range hardSwishForms() {
		t.Run(name, func(t *testing.T) {
			act := renamed(form.nodes, map[string]string{"x": "a", "y": "hout"})
			// The scalar scale and shift after the activation (paddle's learnable affine block).
			act = append(act, graph.NewNode("lab_mul", "Mul", []string{"lab_s", "hout"}, []string{"h1"}),
				graph.NewNode("lab_add", "Add", []string{"h1", "lab_t"}, []string{"y"}))
			m := convBlockModel(t, form.opset, []string{"y"}, act,
				append(hardSwishConstants(), scalarF32("lab_s", 0.4, 1), scalarF32("lab_t", -0.2, 1))...)
			after := preserves(t, m, extended, nil)
			require.Equal(t, map[string]int{"FusedConv": 1}, opCount(after))
			fc := onlyNode(t, after, "FusedConv")
			assert.Equal(t, "HardSwish", fc.AttrString("activation", ""))
			assert.InDelta(t, 0.4, fc.AttrFloat("output_scale", 1), 1e-7)
			assert.InDelta(t, -0.2, fc.AttrFloat("output_shift", 0), 1e-7)
		})
	}
}

// renamed copies nodes with their value names mapped.
func renamed(nodes []*graph.Node, names map[string]string) []*graph.Node {
	var out []*graph.Node
	for _, n := range nodes {
		c := *n
		c.Inputs, c.Outputs = append([]string{}, n.Inputs...), append([]string{}, n.Outputs...)
		for _, list := range [][]string{c.Inputs, c.Outputs} {
			for i, v := range list {
				if r, ok := names[v]; ok {
					list[i] = r
				}
			}
		}
		out = append(out, &c)
	}
	return out
}

func TestConvSwishFusion(t *testing.T) {
	for _, tc := range []struct {
		name   string
		act    []*graph.Node
		params []float32
	}{
		{"plain", []*graph.Node{graph.NewNode("sig", "Sigmoid", []string{"a"}, []string{"s"}), graph.NewNode("mul", "Mul", []string{"a", "s"}, []string{"y"})}, nil},
		// paddle2onnx's swish: x·sigmoid(1·x).
		{"beta_1", []*graph.Node{graph.NewNode("b", "Mul", []string{"a", "one"}, []string{"ab"}), graph.NewNode("sig", "Sigmoid", []string{"ab"}, []string{"s"}),
			graph.NewNode("mul", "Mul", []string{"a", "s"}, []string{"y"})}, nil},
		{"beta", []*graph.Node{graph.NewNode("b", "Mul", []string{"beta", "a"}, []string{"ab"}), graph.NewNode("sig", "Sigmoid", []string{"ab"}, []string{"s"}),
			graph.NewNode("mul", "Mul", []string{"s", "a"}, []string{"y"})}, []float32{1.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := convBlockModel(t, 17, []string{"y"}, tc.act, scalarF32("one", 1), scalarF32("beta", 1.5))
			after := preserves(t, m, extended, nil)
			require.Equal(t, map[string]int{"FusedConv": 1}, opCount(after))
			fc := onlyNode(t, after, "FusedConv")
			assert.Equal(t, "Swish", fc.AttrString("activation", ""))
			assert.Equal(t, tc.params, fc.AttrFloats("activation_params"))
		})
	}
}

func TestConvActivationFusionDeclines(t *testing.T) {
	swish := func(y string) []*graph.Node {
		return []*graph.Node{graph.NewNode("sig", "Sigmoid", []string{"a"}, []string{"s"}), graph.NewNode("mul", "Mul", []string{"a", "s"}, []string{y})}
	}
	hardSwish := []*graph.Node{graph.NewNode("hs", "HardSwish", []string{"a"}, []string{"y"})}
	for _, tc := range []struct {
		name    string
		act     []*graph.Node
		outputs []string
		// The activation fused instead, if any.
		fused string
	}{
		{"swish_third_reader", append(swish("y"), graph.NewNode("relu", "Relu", []string{"a"}, []string{"z"})), []string{"y", "z"}, ""},
		{"swish_conv_output", swish("y"), []string{"y", "a"}, ""},
		{"swish_sigmoid_output", swish("y"), []string{"y", "s"}, ""},
		// sigmoid(a)², not swish: the Sigmoid alone fuses.
		{"swish_other_factor", []*graph.Node{graph.NewNode("sig", "Sigmoid", []string{"a"}, []string{"s"}),
			graph.NewNode("mul", "Mul", []string{"s", "s"}, []string{"y"})}, []string{"y"}, "Sigmoid"},
		{"hardswish_conv_output", hardSwish, []string{"y", "a"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := convBlockModel(t, 17, tc.outputs, tc.act)
			after := preserves(t, m, extended, nil)
			ops := opCount(after)
			if tc.fused == "" {
				assert.Zero(t, ops["FusedConv"], "ops %v", ops)
				assert.Equal(t, 1, ops["Conv"], "ops %v", ops)
				return
			}
			assert.Equal(t, tc.fused, onlyNode(t, after, "FusedConv").AttrString("activation", ""))
		})
	}
}

func TestConvOutputAffineFusion(t *testing.T) {
	relu := graph.NewNode("relu", "Relu", []string{"a"}, []string{"r"})
	for _, tc := range []struct {
		name         string
		tail         []*graph.Node
		outputs      []string
		want         map[string]int
		scale, shift float64
	}{
		{"mul_add_sub_div", []*graph.Node{graph.NewNode("m", "Mul", []string{"r", "k2"}, []string{"t1"}), graph.NewNode("ad", "Add", []string{"k3", "t1"}, []string{"t2"}),
			graph.NewNode("sb", "Sub", []string{"t2", "k1"}, []string{"t3"}), graph.NewNode("dv", "Div", []string{"t3", "k4"}, []string{"y"})},
			[]string{"y"}, map[string]int{"FusedConv": 1}, 2.0 / 4, (3.0 - 1) / 4},
		// A per-channel scale is not a scalar: nothing folds.
		{"per_channel", []*graph.Node{graph.NewNode("m", "Mul", []string{"r", "kc"}, []string{"y"})},
			[]string{"y"}, map[string]int{"FusedConv": 1, "Mul": 1}, 1, 0},
		// The chain stops at a value with a second reader (a graph output here).
		{"output_in_the_middle", []*graph.Node{graph.NewNode("m", "Mul", []string{"r", "k2"}, []string{"t1"}), graph.NewNode("ad", "Add", []string{"t1", "k3"}, []string{"y"})},
			[]string{"y", "t1"}, map[string]int{"FusedConv": 1, "Add": 1}, 2, 0},
		{"second_reader", []*graph.Node{graph.NewNode("m", "Mul", []string{"r", "k2"}, []string{"y"}), graph.NewNode("neg", "Neg", []string{"r"}, []string{"z"})},
			[]string{"y", "z"}, map[string]int{"FusedConv": 1, "Mul": 1, "Neg": 1}, 1, 0},
		// c - y and c / y are not affine in y's scale and shift form the kernels take.
		{"constant_first_sub", []*graph.Node{graph.NewNode("sb", "Sub", []string{"k1", "r"}, []string{"y"})},
			[]string{"y"}, map[string]int{"FusedConv": 1, "Sub": 1}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := *relu
			m := convBlockModel(t, 17, tc.outputs, append([]*graph.Node{&r}, tc.tail...),
				scalarF32("k1", 1), scalarF32("k2", 2, 1), scalarF32("k3", 3, 1, 1), scalarF32("k4", 4), randTensor("kc", 6, 1, 1))
			after := preserves(t, m, extended, nil)
			require.Equal(t, tc.want, opCount(after))
			fc := onlyNode(t, after, "FusedConv")
			assert.InDelta(t, tc.scale, fc.AttrFloat("output_scale", 1), 1e-6)
			assert.InDelta(t, tc.shift, fc.AttrFloat("output_shift", 0), 1e-6)
		})
	}
}
