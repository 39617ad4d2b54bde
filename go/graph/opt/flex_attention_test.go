package opt

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/infer"
	"github.com/loomrt/loom/go/graph/refeval"
)

// flexModel is Y = FlexAttention(Q, K, V) (ai.onnx.preview) with a score_mod that adds a
// bias of its own (a subgraph initializer, (L, S)) and multiplies by the main graph's
// initializer "gain", and a prob_mod that doubles the probabilities; Q, K and V of the types
// given (static or symbolic shapes).
func flexModel(t *testing.T, opset int64, q, k, v graph.Type, L, S int64, attrs ...*graph.Attribute) *graph.Model {
	t.Helper()
	sm := &graph.Graph{Name: "score_mod",
		Inputs:  []*graph.Value{graph.Input("s", graph.TensorType(graph.Float, graph.Shape{}))},
		Outputs: []*graph.Value{graph.Output("s_out", graph.Type{})},
		Nodes: []*graph.Node{
			graph.NewNode("add_bias", "Add", []string{"s", "bias"}, []string{"biased"}),
			graph.NewNode("scale_gain", "Mul", []string{"biased", "gain"}, []string{"s_out"}),
		}}
	sm.Inputs[0].Type = graph.UnrankedTensor(graph.Float)
	sm.AddInitializer(randTensor("bias", L, S))
	pm := &graph.Graph{Name: "prob_mod",
		Inputs:  []*graph.Value{graph.Input("p", graph.UnrankedTensor(graph.Float))},
		Outputs: []*graph.Value{graph.Output("p_out", graph.Type{})},
		Nodes:   []*graph.Node{graph.NewNode("double", "Mul", []string{"p", "two"}, []string{"p_out"})}}
	pm.AddInitializer(graph.TensorFromFloat32("two", []int64{}, []float32{2}))
	n := graph.NewNode("flex", "FlexAttention", []string{"Q", "K", "V"}, []string{"Y"}, append([]*graph.Attribute{
		{Name: "score_mod", Type: graph.AttrGraph, Graph: sm},
		{Name: "prob_mod", Type: graph.AttrGraph, Graph: pm},
	}, attrs...)...)
	n.Domain = "ai.onnx.preview"
	g := &graph.Graph{Name: "g", Inputs: []*graph.Value{graph.Input("Q", q), graph.Input("K", k), graph.Input("V", v)},
		Outputs: []*graph.Value{graph.Output("Y", graph.Type{})}, Nodes: []*graph.Node{n}}
	g.AddInitializer(graph.TensorFromFloat32("gain", []int64{}, []float32{0.7}))
	m, err := graph.FromGraph("flex", g, map[string]int64{"": opset, "ai.onnx.preview": 1})
	require.NoError(t, err)
	require.NoError(t, m.Check())
	require.NoError(t, infer.Shapes(m))
	return m
}

// flexReference computes flexModel's Y in float64: query head h reads key/value head
// h / (Hq/Hkv); scores (Q·Kᵀ)·scale + bias, times gain; softmax over the keys; doubled.
func flexReference(m *graph.Model, in map[string]*refeval.Value, scale float64) []float64 {
	q, k, v := in["Q"], in["K"], in["V"]
	B, Hq, L, E := int(q.Dims[0]), int(q.Dims[1]), int(q.Dims[2]), int(q.Dims[3])
	Hkv, S, Ev := int(k.Dims[1]), int(k.Dims[2]), int(v.Dims[3])
	bias, _ := m.Graph.Nodes[0].Attr("score_mod").Graph.Initializers["bias"].Float32s()
	y := make([]float64, B*Hq*L*Ev)
	s := make([]float64, S)
	for b := 0; b < B; b++ {
		for h := 0; h < Hq; h++ {
			kh := h / (Hq / Hkv)
			for i := 0; i < L; i++ {
				mx := math.Inf(-1)
				for j := 0; j < S; j++ {
					d := 0.0
					for e := 0; e < E; e++ {
						d += q.Data[((b*Hq+h)*L+i)*E+e] * k.Data[((b*Hkv+kh)*S+j)*E+e]
					}
					s[j] = (d*scale + float64(bias[i*S+j])) * 0.7
					mx = math.Max(mx, s[j])
				}
				sum := 0.0
				for j := range s {
					s[j] = math.Exp(s[j] - mx)
					sum += s[j]
				}
				for j := range s {
					p := 2 * s[j] / sum
					for e := 0; e < Ev; e++ {
						y[((b*Hq+h)*L+i)*Ev+e] += p * v.Data[((b*Hkv+kh)*S+j)*Ev+e]
					}
				}
			}
		}
	}
	return y
}

// FlexAttention is lowered at every optimization level, with shapes known (the scale a
// constant, no head repeat when the head counts match) or symbolic (both computed), and the
// result matches the definition on fresh random inputs.
func TestFlexAttentionExpansion(t *testing.T) {
	sym := func(names ...string) graph.Type {
		var s graph.Shape
		for _, n := range names {
			s = append(s, graph.SymDim(n))
		}
		return graph.TensorType(graph.Float, s)
	}
	dims := map[string]int64{"b": 2, "hq": 4, "l": 3, "e": 5, "hkv": 2, "s": 6, "ev": 7}
	cases := []struct {
		name    string
		q, k, v graph.Type
		scale   float64
		attrs   []*graph.Attribute
		repeat  bool
	}{
		{"static_gqa", f32(2, 4, 3, 5), f32(2, 2, 6, 5), f32(2, 2, 6, 7), 1 / math.Sqrt(5), nil, true},
		{"static_mha_scaled", f32(2, 2, 3, 5), f32(2, 2, 6, 5), f32(2, 2, 6, 7), 0.3, []*graph.Attribute{graph.FloatAttr("scale", 0.3)}, false},
		{"symbolic_gqa", sym("b", "hq", "l", "e"), sym("b", "hkv", "s", "e"), sym("b", "hkv", "s", "ev"), 1 / math.Sqrt(5), nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, level := range []Level{LevelDisabled, LevelAll} {
				m := flexModel(t, 26, c.q, c.k, c.v, 3, 6, c.attrs...)
				before := clone(t, m)
				require.NoError(t, Optimize(m, level))
				ops := opCount(m)
				assert.Zero(t, ops["FlexAttention"], "%v", ops)
				assert.Equal(t, 1, ops["Softmax"], "%v", ops)
				assert.Equal(t, c.repeat, ops["Expand"] == 2, "%v", ops)
				require.NoError(t, m.Check())
				for trial := 0; trial < 2; trial++ {
					in := randomInputs(t, m, dims)
					got, err := refeval.Run(m, in)
					require.NoError(t, err)
					want := flexReference(before, in, c.scale)
					y := got["Y"]
					require.Equal(t, len(want), len(y.Data))
					for i := range want {
						require.InDelta(t, want[i], y.Data[i], 1e-5*(1+math.Abs(want[i])), "Y[%d] at %s", i, level)
					}
				}
			}
		})
	}
}

// What FlexAttention's lowering refuses, with the node's name in the error: head counts that do
// not divide, a modifier with a subgraph of its own, an ai.onnx opset before 13.
func TestFlexAttentionExpansionRefuses(t *testing.T) {
	m := flexModel(t, 26, f32(1, 3, 2, 4), f32(1, 2, 5, 4), f32(1, 2, 5, 4), 2, 5)
	err := Optimize(m, LevelDisabled)
	require.ErrorContains(t, err, "q_num_heads 3 is not a multiple of kv_num_heads 2")
	require.ErrorContains(t, err, "flex")

	m = flexModel(t, 26, f32(1, 2, 2, 4), f32(1, 2, 5, 4), f32(1, 2, 5, 4), 2, 5)
	branch := func(name string) *graph.Graph {
		return &graph.Graph{Name: name, Outputs: []*graph.Value{graph.Output("s", graph.Type{})}}
	}
	sm := m.Graph.Nodes[0].Attr("score_mod").Graph
	sm.Nodes = append(sm.Nodes, graph.NewNode("branchy", "If", []string{"cond"}, []string{"unused"},
		&graph.Attribute{Name: "then_branch", Type: graph.AttrGraph, Graph: branch("then")},
		&graph.Attribute{Name: "else_branch", Type: graph.AttrGraph, Graph: branch("else")}))
	_, err = ExpandFlexAttention(m)
	require.ErrorContains(t, err, `score_mod's node "branchy" holds a subgraph`)

	m = flexModel(t, 12, f32(1, 2, 2, 4), f32(1, 2, 5, 4), f32(1, 2, 5, 4), 2, 5)
	_, err = ExpandFlexAttention(m)
	require.ErrorContains(t, err, "opset 13 or newer; the model imports ai.onnx 12")
}
