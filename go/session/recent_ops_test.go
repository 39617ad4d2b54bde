package session

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// The ONNX 1.22 operators added as host functions (TensorScatter, CenterCropPad, Col2Im,
// AffineGrid) refuse bad values with an
// error naming the node and the input, and the session keeps running good inputs. Their
// results are checked by the ONNX 1.22 node suite (TestNodeConformanceONNX122).
func TestRecentOpsRefuseBadValues(t *testing.T) {
	f32 := func(shape []int64) tensor.Tensor {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(i%7) - 3
		}
		return tensor.MustTensor(shape, v)
	}
	i64 := func(v ...int64) tensor.Tensor { return tensor.MustTensor([]int64{int64(len(v))}, v) }
	// TensorScatter: a cache of 4 rows a batch takes 2 new rows at write_indices.
	scatter := func(at int64) []tensor.Tensor {
		return []tensor.Tensor{f32([]int64{2, 4, 3}), f32([]int64{2, 2, 3}), i64(1, at)}
	}
	// CenterCropPad to the sizes given.
	crop := func(h, w int64) []tensor.Tensor { return []tensor.Tensor{f32([]int64{5, 6}), i64(h, w)} }
	// Col2Im: 1 channel of 2x2 blocks over a 3x3 image: 4 blocks.
	col2im := func(bh int64) []tensor.Tensor {
		return []tensor.Tensor{f32([]int64{1, 4, 4}), i64(3, 3), i64(bh, 2)}
	}
	// AffineGrid of one 2-D theta to the size given.
	affine := func(h int64) []tensor.Tensor { return []tensor.Tensor{f32([]int64{1, 2, 3}), i64(1, 1, h, 4)} }
	scatterNode := graph.NewNode("scatter", "TensorScatter", nil, []string{"y"})
	cropNode := graph.NewNode("crop", "CenterCropPad", nil, []string{"y"})
	col2imNode := graph.NewNode("col2im", "Col2Im", nil, []string{"y"})
	affineNode := graph.NewNode("grid", "AffineGrid", nil, []string{"y"})
	inv := tensor.ErrInvalidArgument
	runHostileCases(t, []hostileCase{
		{"tensorscatter_index_past_the_cache", scatterNode, 24, scatter(2), scatter(3), inv, []string{"write_indices[1] = 3", "want [0, 2]"}, nil},
		{"tensorscatter_negative_index", scatterNode, 24, scatter(0), scatter(-1), inv, []string{"write_indices[1] = -1"}, nil},
		{"centercroppad_negative_size", cropNode, 18, crop(3, 8), crop(-2, 8), inv, []string{"negative size"}, nil},
		{"col2im_block_past_the_image", col2imNode, 18, col2im(2), col2im(4), inv, []string{"block"}, nil},
		{"affinegrid_negative_size", affineNode, 20, affine(3), affine(-3), inv, []string{"negative value"}, nil},
	})
}

// AffineGrid's size (input 1) decides its output's shape: a compiled plan is keyed by its value,
// so a second run with another size gets a grid of that size.
func TestAffineGridSizeKeysThePlan(t *testing.T) {
	theta := tensor.MustTensor([]int64{1, 2, 3}, []float32{1, 0, 0, 0, 1, 0})
	size := func(h int64) tensor.Tensor { return tensor.MustTensor([]int64{4}, []int64{1, 1, h, 4}) }
	for _, executor := range traceExecutors {
		// AffineGrid, then a Relu (a kernel step planned for the grid's shape).
		g := &graph.Graph{Name: "grid_relu",
			Inputs: []*graph.Value{graph.Input("theta", graph.TensorType(graph.Float, graph.ShapeOf(1, 2, 3))),
				graph.Input("size", graph.TensorType(graph.Int64, graph.ShapeOf(4)))},
			Outputs: []*graph.Value{graph.Output("y", graph.Type{})},
			Nodes: []*graph.Node{graph.NewNode("grid", "AffineGrid", []string{"theta", "size"}, []string{"g"}),
				graph.NewNode("relu", "Relu", []string{"g"}, []string{"y"})}}
		m, err := graph.FromGraph(g.Name, g, map[string]int64{"": 20})
		require.NoError(t, err)
		s, err := FromGraph(m, tracedOptions(nil, executor)...)
		require.NoError(t, err)
		defer s.Close()
		for _, h := range []int64{3, 5, 3, 2} {
			outs, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "theta", Tensor: theta}, {Name: "size", Tensor: size(h)}})
			require.NoError(t, err)
			require.Equal(t, []int64{1, h, 4, 2}, outs[0].Shape(), "%s, size %d", executor, h)
		}
	}
}

// LinearAttention and CausalConvWithState (opset 27) refuse inputs of shapes or types that do
// not fit, and attributes out of their range, with an error naming the input or attribute;
// their results are checked by the ONNX 1.22 node suite (TestNodeConformanceONNX122).
func TestOpset27RecurrentOpsRefuseBadInputs(t *testing.T) {
	s := kernelCheckSession(t)
	rc := testRunCtx(s, 27)
	defer rc.Close()
	r := inferRand()
	f32 := func(shape ...int64) tensor.Tensor { return randT(r, shape...) }
	lin := func(kvHeads int64, attrs ...*graph.Attribute) *graph.Node {
		n := graph.NewNode("linattn", "LinearAttention", nil, []string{"y", "state"})
		n.Attrs = append([]*graph.Attribute{graph.IntAttr("q_num_heads", 2), graph.IntAttr("kv_num_heads", kvHeads)}, attrs...)
		return n
	}
	conv := func(act string) *graph.Node {
		n := graph.NewNode("conv", "CausalConvWithState", nil, []string{"y", "state"})
		n.Attrs = []*graph.Attribute{graph.StringAttr("activation", act)}
		return n
	}
	// Good: gated_delta, 2 query heads over 1 kv head, key size 4, value size 6.
	q, k, v, past, decay, beta := f32(1, 3, 8), f32(1, 3, 4), f32(1, 3, 6), f32(1, 1, 4, 6), f32(1, 3, 1), f32(1, 3, 1)
	x, w, b, cpast := f32(1, 2, 5), f32(2, 1, 3), f32(2), f32(1, 2, 2)
	cases := []struct {
		name string
		node *graph.Node
		in   []tensor.Tensor
		says string
	}{
		{"linear_ok", lin(1), []tensor.Tensor{q, k, v, past, decay, beta}, ""},
		{"linear_state_size", lin(1), []tensor.Tensor{q, k, v, f32(1, 1, 4, 5), decay, beta}, "past_state (input 3) is float[1 1 4 5]; want a float tensor of shape [1 1 4 6]"},
		{"linear_decay_width", lin(1), []tensor.Tensor{q, k, v, past, f32(1, 3, 3), beta}, "the decay's last axis (input 4, shape [1 3 3]) must be kv_num_heads 1 or kv_num_heads·head size 4"},
		{"linear_decay_missing", lin(1), []tensor.Tensor{q, k, v, past, {}, beta}, "update_rule gated_delta needs the decay (input 4)"},
		{"linear_beta_forbidden", lin(1, graph.StringAttr("update_rule", "gated")), []tensor.Tensor{q, k, v, past, decay, beta}, "update_rule gated takes no beta (input 5)"},
		{"linear_heads", lin(3), []tensor.Tensor{q, k, v}, "q_num_heads 2 must be a positive multiple of kv_num_heads 3"},
		{"linear_rule", lin(1, graph.StringAttr("update_rule", "softmax")), []tensor.Tensor{q, k, v}, `update_rule "softmax"`},
		{"linear_key_size", lin(1, graph.StringAttr("update_rule", "linear")), []tensor.Tensor{q, f32(1, 3, 5), v}, "disagree"},
		{"linear_rank", lin(1, graph.StringAttr("update_rule", "linear")), []tensor.Tensor{f32(3, 8), k, v}, "must be rank 3"},
		{"linear_types", lin(1, graph.StringAttr("update_rule", "linear")), []tensor.Tensor{q, tensor.MustTensor([]int64{1, 3, 4}, make([]float64, 12)), v}, "want one float type"},
		{"conv_ok", conv("silu"), []tensor.Tensor{x, w, b, cpast}, ""},
		{"conv_state_length", conv("none"), []tensor.Tensor{x, w, b, f32(1, 2, 3)}, "past_state (input 3) is float[1 2 3]; want float [1 2 2]"},
		{"conv_not_depthwise", conv("none"), []tensor.Tensor{x, f32(2, 2, 3)}, "the weight (input 1, shape [2 2 3]) must be (channels 2, 1, kernel size >= 1)"},
		{"conv_empty_kernel", conv("none"), []tensor.Tensor{x, f32(2, 1, 0)}, "kernel size >= 1"},
		{"conv_bias", conv("none"), []tensor.Tensor{x, w, f32(3)}, "the bias (input 2) is float[3]; want float [2]"},
		{"conv_activation", conv("gelu"), []tensor.Tensor{x, w}, `activation "gelu"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := ops.HostOps[c.node.OpType](rc, c.node, c.in)
			if c.says == "" {
				require.NoError(t, err)
				require.Len(t, out, 2)
				return
			}
			require.ErrorContains(t, err, c.says)
		})
	}
}

// CausalConvWithState over a sequence cut in two, the state carried, equals one run over the
// whole sequence; so does LinearAttention's (its decode steps are the recurrence itself).
func TestOpset27RecurrentOpsCarryTheirState(t *testing.T) {
	s := kernelCheckSession(t)
	rc := testRunCtx(s, 27)
	defer rc.Close()
	r := inferRand()
	run := func(n *graph.Node, in ...tensor.Tensor) []tensor.Tensor {
		out, err := ops.HostOps[n.OpType](rc, n, in)
		require.NoError(t, err)
		return out
	}
	split := func(x tensor.Tensor, axis int, at int64) (tensor.Tensor, tensor.Tensor) {
		d := x.Dims()
		n := graph.NewNode("split", "Slice", nil, []string{"y"})
		first, err := ops.HostOps["Slice"](rc, n, []tensor.Tensor{x, tensor.MustTensor([]int64{1}, []int64{0}), tensor.MustTensor([]int64{1}, []int64{at}), tensor.MustTensor([]int64{1}, []int64{int64(axis)})})
		require.NoError(t, err)
		second, err := ops.HostOps["Slice"](rc, n, []tensor.Tensor{x, tensor.MustTensor([]int64{1}, []int64{at}), tensor.MustTensor([]int64{1}, []int64{d[axis]}), tensor.MustTensor([]int64{1}, []int64{int64(axis)})})
		require.NoError(t, err)
		return first[0], second[0]
	}
	closeTo := func(want, got tensor.Tensor, what string) {
		require.Equal(t, want.Dims(), got.Dims(), what)
		w, g := tensor.Float64s(want), tensor.Float64s(got)
		for i := range w {
			require.InDelta(t, w[i], g[i], 1e-4+1e-4*math.Abs(w[i]), "%s element %d", what, i)
		}
	}
	conv := graph.NewNode("conv", "CausalConvWithState", nil, []string{"y", "state"})
	conv.Attrs = []*graph.Attribute{graph.StringAttr("activation", "silu")}
	x, w, b, past := randT(r, 2, 3, 9), randT(r, 3, 1, 4), randT(r, 3), randT(r, 2, 3, 3)
	whole := run(conv, x, w, b, past)
	x1, x2 := split(x, 2, 5)
	first := run(conv, x1, w, b, past)
	second := run(conv, x2, w, b, first[1])
	closeTo(whole[1], second[1], "conv state")
	y1, y2 := split(whole[0], 2, 5)
	closeTo(y1, first[0], "conv first part")
	closeTo(y2, second[0], "conv second part")

	for _, rule := range []string{"linear", "gated", "delta", "gated_delta"} {
		lin := graph.NewNode("lin", "LinearAttention", nil, []string{"y", "state"})
		lin.Attrs = []*graph.Attribute{graph.IntAttr("q_num_heads", 4), graph.IntAttr("kv_num_heads", 2), graph.StringAttr("update_rule", rule)}
		q, k, v := randT(r, 2, 7, 4*5), randT(r, 2, 7, 2*5), randT(r, 2, 7, 2*3)
		// Small decays and rates keep the state bounded.
		decay, beta := scaleT(randT(r, 2, 7, 2*5), -0.1), scaleT(randT(r, 2, 7, 2), 0.2)
		in := func(q, k, v, state, decay, beta tensor.Tensor) []tensor.Tensor {
			ins := []tensor.Tensor{q, k, v, state, {}, {}}
			if rule == "gated" || rule == "gated_delta" {
				ins[4] = decay
			}
			if rule == "delta" || rule == "gated_delta" {
				ins[5] = beta
			}
			return ins
		}
		whole := run(lin, in(q, k, v, tensor.Tensor{}, decay, beta)...)
		q1, q2 := split(q, 1, 3)
		k1, k2 := split(k, 1, 3)
		v1, v2 := split(v, 1, 3)
		d1, d2 := split(decay, 1, 3)
		b1, b2 := split(beta, 1, 3)
		first := run(lin, in(q1, k1, v1, tensor.Tensor{}, d1, b1)...)
		second := run(lin, in(q2, k2, v2, first[1], d2, b2)...)
		closeTo(whole[1], second[1], rule+" state")
		y1, y2 := split(whole[0], 1, 3)
		closeTo(y1, first[0], rule+" first part")
		closeTo(y2, second[0], rule+" second part")
	}
}

// scaleT is x times f (float32).
func scaleT(x tensor.Tensor, f float64) tensor.Tensor {
	v := tensor.Float64s(x)
	for i := range v {
		v[i] *= f
	}
	t, err := tensor.FromFloat64s(x.DType(), x.Dims(), v)
	if err != nil {
		panic(err)
	}
	return t
}
