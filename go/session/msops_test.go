package session

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/kernelops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Hostile inputs of the com.microsoft transformer ops (and SimplifiedLayerNormalization):
// errors naming the node, on both executors, the session usable afterwards. Their values
// against ONNX Runtime are msops_refs_test.go's.

// msOpNode is a node of op in the com.microsoft domain (ai.onnx when ai is set).
func msOpNode(name, op string, outputs []string, attrs ...*graph.Attribute) *graph.Node {
	n := graph.NewNode(name, op, nil, outputs)
	n.Domain = graph.MSDomain
	n.Attrs = attrs
	return n
}

// msOpSession is a one-node session whose inputs are declared unranked, so that bad shapes
// reach the op at run time.
func msOpSession(t *testing.T, executor string, n *graph.Node, in []tensor.Tensor) (*InferenceSession, error) {
	t.Helper()
	return nodeSessionWith(t, executor, n, map[string]int64{"": 21, graph.MSDomain: 1}, in, func(v tensor.Tensor) graph.Type {
		return graph.UnrankedTensor(v.DType())
	})
}

func randT(r *rand.Rand, shape ...int64) tensor.Tensor {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = r.Float32()*2 - 1
	}
	return tensor.MustTensor(shape, v)
}

func TestMSOpsRefuseBadInputs(t *testing.T) {
	r := inferRand()
	inv := tensor.ErrInvalidArgument
	i64 := func(shape []int64, v ...int64) tensor.Tensor { return tensor.MustTensor(shape, v) }
	i32 := func(shape []int64, v ...int32) tensor.Tensor { return tensor.MustTensor(shape, v) }
	with := func(good []tensor.Tensor, i int, v tensor.Tensor) []tensor.Tensor {
		bad := append([]tensor.Tensor{}, good...)
		bad[i] = v
		return bad
	}
	skipGood := []tensor.Tensor{randT(r, 2, 3, 8), randT(r, 2, 3, 8), randT(r, 8), randT(r, 8)}
	skipLN := msOpNode("sln", "SkipLayerNormalization", []string{"y"})
	sslnGood := skipGood[:3]
	sSLN := msOpNode("ssln", "SkipSimplifiedLayerNormalization", []string{"y"})
	simp := graph.NewNode("simp", "SimplifiedLayerNormalization", nil, []string{"y"})
	simpGood := []tensor.Tensor{randT(r, 2, 3, 8), randT(r, 8)}
	gelu := msOpNode("fg", "FastGelu", []string{"y"})
	geluGood := []tensor.Tensor{randT(r, 2, 8), randT(r, 8)}
	biasGelu := msOpNode("bg", "BiasGelu", []string{"y"})
	rot := msOpNode("rot", "RotaryEmbedding", []string{"y"}, graph.IntAttr("num_heads", 4))
	rotGood := []tensor.Tensor{randT(r, 1, 3, 32), i64([]int64{1, 3}, 0, 1, 2), randT(r, 16, 4), randT(r, 16, 4)}
	mha := msOpNode("mha", "MultiHeadAttention", []string{"y"}, graph.IntAttr("num_heads", 2))
	mhaGood := []tensor.Tensor{randT(r, 2, 3, 16), randT(r, 2, 5, 16), randT(r, 2, 5, 16)}
	gqa := msOpNode("gqa", "GroupQueryAttention", []string{"y", "pk", "pv"}, graph.IntAttr("num_heads", 4), graph.IntAttr("kv_num_heads", 2))
	gqaGood := []tensor.Tensor{randT(r, 2, 1, 64), randT(r, 2, 1, 32), randT(r, 2, 1, 32), randT(r, 2, 2, 4, 16), randT(r, 2, 2, 4, 16),
		i32([]int64{2}, 4, 4), i32([]int64{}, 5)}
	cases := []hostileCase{
		{"skip_ln_gamma_size", skipLN, 21, skipGood, with(skipGood, 2, randT(r, 7)), inv, []string{"gamma (input 2) has shape [7]"}, nil},
		{"skip_ln_rank_4", skipLN, 21, skipGood, with(skipGood, 0, randT(r, 1, 2, 3, 8)), inv, []string{"want rank 3"}, nil},
		{"skip_ln_skip_shape", skipLN, 21, skipGood, with(skipGood, 1, randT(r, 3, 7)), inv, []string{"skip (input 1) has shape [3 7]"}, nil},
		{"skip_simplified_bias_size", sSLN, 21, append(append([]tensor.Tensor{}, sslnGood...), randT(r, 8)),
			append(append([]tensor.Tensor{}, sslnGood...), randT(r, 9)), inv, []string{"bias (input 3) has shape [9]"}, nil},
		{"simplified_ln_scale", simp, 21, simpGood, with(simpGood, 1, randT(r, 4)), inv, []string{"scale (input 1) has shape [4]"}, nil},
		{"fast_gelu_bias", gelu, 21, geluGood, with(geluGood, 1, randT(r, 3)), inv, []string{"bias (input 1) has shape [3]"}, nil},
		{"bias_gelu_bias", biasGelu, 21, geluGood, with(geluGood, 1, randT(r, 2, 8)), inv, []string{"bias (input 1) has shape [2 8]"}, nil},
		{"rotary_heads_not_dividing", rot, 21, rotGood, with(rotGood, 0, randT(r, 1, 3, 30)), inv, []string{"num_heads dividing", "num_heads=4"}, nil},
		{"rotary_position_out_of_range", rot, 21, rotGood, with(rotGood, 1, i64([]int64{1, 3}, 0, 16, 2)), inv, []string{"out of range"}, nil},
		{"rotary_cache_shape", rot, 21, rotGood, with(rotGood, 3, randT(r, 16, 3)), inv, []string{"cos_cache [16 4] and sin_cache [16 3]"}, nil},
		{"mha_heads_not_dividing", mha, 21, mhaGood, with(mhaGood, 0, randT(r, 2, 3, 15)), inv, []string{"query (input 0) has shape [2 3 15]", "2 heads"}, nil},
		{"mha_kv_disagree", mha, 21, mhaGood, with(mhaGood, 2, randT(r, 2, 4, 16)), inv, []string{"disagree"}, nil},
		{"gqa_seqlens_out_of_range", gqa, 21, gqaGood, with(gqaGood, 5, i32([]int64{2}, 9, 4)), inv, []string{"seqlens_k[0] = 9"}, nil},
		{"gqa_past_shape", gqa, 21, gqaGood, with(gqaGood, 3, randT(r, 2, 3, 4, 16)), inv, []string{"past_key [2 3 4 16]"}, nil},
		{"gqa_query_size", gqa, 21, gqaGood, with(gqaGood, 0, randT(r, 2, 1, 60)), inv, []string{"query [2 1 60]", "disagree for 4 heads and 2 kv heads"}, nil},
	}
	for _, c := range cases {
		for _, executor := range traceExecutors {
			t.Run(c.name+"/"+executor, func(t *testing.T) {
				s, err := msOpSession(t, executor, c.node, c.good)
				require.NoError(t, err)
				checkHostileCase(t, s, c)
			})
		}
	}
}

// Attributes and wiring that no input can make right are refused at load, naming the node.
func TestMSOpsRefuseBadAttributesAtLoad(t *testing.T) {
	r := inferRand()
	q := randT(r, 1, 2, 16)
	cases := []struct {
		name string
		node *graph.Node
		in   []tensor.Tensor
		says string
	}{
		{"gqa_heads_ratio", msOpNode("gqa", "GroupQueryAttention", []string{"y"}, graph.IntAttr("num_heads", 3), graph.IntAttr("kv_num_heads", 2)),
			[]tensor.Tensor{q, q, q}, "num_heads 3 must be a positive multiple of kv_num_heads 2"},
		{"mha_no_num_heads", msOpNode("mha", "MultiHeadAttention", []string{"y"}), []tensor.Tensor{q, q, q}, "num_heads must be positive"},
		{"mha_no_key", msOpNode("mha", "MultiHeadAttention", []string{"y"}, graph.IntAttr("num_heads", 2)), []tensor.Tensor{q}, "key and value (inputs 1 and 2) are required"},
		{"rotary_packed_batching", msOpNode("rot", "RotaryEmbedding", []string{"y"}, graph.IntAttr("is_packed_batching", 1)),
			[]tensor.Tensor{q, tensor.MustTensor([]int64{1}, []int64{0}), randT(r, 4, 4), randT(r, 4, 4)}, "is_packed_batching=1 is not supported"},
		{"skip_ln_rank", msOpNode("sln", "SkipLayerNormalization", []string{"y"}), []tensor.Tensor{randT(r, 8), randT(r, 8), randT(r, 8)}, "input (input 0) has rank 1; want 3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := nodeSessionWith(t, exec.ExecutorPlan, c.node, map[string]int64{"": 21, graph.MSDomain: 1}, c.in, func(v tensor.Tensor) graph.Type {
				return graph.TensorType(v.DType(), graph.ShapeOf(v.Dims()...))
			})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.node.Name)
			assert.Contains(t, err.Error(), c.says)
			assert.ErrorIs(t, err, tensor.ErrInvalidArgument)
		})
	}
}

// The kernel plans of the ops that have them compute what their host functions do (which
// msops_refs_test.go checks against ONNX Runtime), on fresh random inputs.
func TestMSOpsKernelsMatchHost(t *testing.T) {
	r := inferRand()
	s := kernelCheckSession(t)
	cases := []struct {
		node *graph.Node
		in   []tensor.Tensor
	}{
		{msOpNode("sln", "SkipLayerNormalization", []string{"y", "mean", "inv", "sum"}, graph.FloatAttr("epsilon", 1e-5)),
			[]tensor.Tensor{randT(r, 2, 7, 40), randT(r, 7, 40), randT(r, 40), randT(r, 40), randT(r, 40)}},
		{msOpNode("sln2", "SkipLayerNormalization", []string{"y", "", "", "sum"}), []tensor.Tensor{randT(r, 9, 24), randT(r, 9, 24), randT(r, 24)}},
		{msOpNode("sln3", "SkipLayerNormalization", []string{"y"}), []tensor.Tensor{randT(r, 2, 3, 1000), randT(r, 2, 3, 1000), randT(r, 1000), tensor.Tensor{}, randT(r, 1000)}},
		{msOpNode("ssln", "SkipSimplifiedLayerNormalization", []string{"y", "", "inv", "sum"}), []tensor.Tensor{randT(r, 3, 5, 33), randT(r, 3, 5, 33), randT(r, 33), randT(r, 33)}},
		{msOpNode("ssln2", "SkipSimplifiedLayerNormalization", []string{"y"}), []tensor.Tensor{randT(r, 1, 64), randT(r, 1, 64), randT(r, 64)}},
		{graph.NewNode("simp", "SimplifiedLayerNormalization", nil, []string{"y", "inv"}), []tensor.Tensor{randT(r, 4, 6, 20), randT(r, 20)}},
		{graph.NewNode("simp2", "SimplifiedLayerNormalization", nil, []string{"y"}), []tensor.Tensor{randT(r, 3, 2048), randT(r, 2048)}},
		{msOpNode("fg", "FastGelu", []string{"y"}), []tensor.Tensor{randT(r, 3, 5, 20), randT(r, 20)}},
		{msOpNode("fg1", "FastGelu", []string{"y"}), []tensor.Tensor{randT(r, 3, 17)}},
		{msOpNode("bg", "BiasGelu", []string{"y"}), []tensor.Tensor{randT(r, 3, 5, 20), randT(r, 20)}},
		{msOpNode("rot3", "RotaryEmbedding", []string{"y"}, graph.IntAttr("num_heads", 3)),
			[]tensor.Tensor{randT(r, 2, 5, 24), tensor.MustTensor([]int64{2, 5}, []int64{0, 3, 9, 1, 2, 7, 7, 0, 4, 5}), randT(r, 10, 4), randT(r, 10, 4)}},
		{msOpNode("rot3_interleaved_partial", "RotaryEmbedding", []string{"y"}, graph.IntAttr("num_heads", 2), graph.IntAttr("interleaved", 1), graph.IntAttr("rotary_embedding_dim", 6)),
			[]tensor.Tensor{randT(r, 1, 4, 20), tensor.MustTensor([]int64{1, 4}, []int32{5, 0, 2, 2}), randT(r, 6, 3), randT(r, 6, 3)}},
		{msOpNode("rot4_offset", "RotaryEmbedding", []string{"y"}),
			[]tensor.Tensor{randT(r, 2, 3, 4, 8), tensor.MustTensor([]int64{1}, []int64{2}), randT(r, 9, 4), randT(r, 9, 4)}},
		{msOpNode("rot4_interleaved", "RotaryEmbedding", []string{"y"}, graph.IntAttr("interleaved", 1)),
			[]tensor.Tensor{randT(r, 1, 2, 3, 4), tensor.MustTensor([]int64{1, 3}, []int64{1, 1, 0}), randT(r, 3, 2), randT(r, 3, 2)}},
		{msOpNode("mha", "MultiHeadAttention", []string{"y"}, graph.IntAttr("num_heads", 3)),
			[]tensor.Tensor{randT(r, 2, 5, 24), randT(r, 2, 7, 24), randT(r, 2, 7, 12)}},
		{msOpNode("mha_causal_bias", "MultiHeadAttention", []string{"y"}, graph.IntAttr("num_heads", 2), graph.IntAttr("unidirectional", 1), graph.FloatAttr("scale", 0.2)),
			[]tensor.Tensor{randT(r, 3, 6, 16), randT(r, 3, 6, 16), randT(r, 3, 6, 16), randT(r, 48), {}, randT(r, 3, 1, 6, 6)}},
		{msOpNode("mha_split_kv", "MultiHeadAttention", []string{"y"}, graph.IntAttr("num_heads", 2)),
			[]tensor.Tensor{randT(r, 1, 1, 16), randT(r, 1, 2, 9, 8), randT(r, 1, 2, 9, 5), {}, {}, randT(r, 1, 2, 1, 9)}},
		// Past KV, present outputs, key_padding_mask: the present buffers written by strided
		// copies, the masks summed.
		{msOpNode("mha_past_causal_present", "MultiHeadAttention", []string{"y", "pk", "pv"}, graph.IntAttr("num_heads", 2), graph.IntAttr("unidirectional", 1)),
			[]tensor.Tensor{randT(r, 2, 3, 16), randT(r, 2, 3, 16), randT(r, 2, 3, 16), randT(r, 48), {}, {}, randT(r, 2, 2, 4, 8), randT(r, 2, 2, 4, 8)}},
		{msOpNode("mha_decode_kpm_bias_past", "MultiHeadAttention", []string{"y"}, graph.IntAttr("num_heads", 3), graph.FloatAttr("mask_filter_value", -3000)),
			[]tensor.Tensor{randT(r, 2, 1, 24), randT(r, 2, 1, 24), randT(r, 2, 1, 12), {},
				tensor.MustTensor([]int64{2, 6}, []int32{1, 1, 0, 1, 2, 1, 0, -1, 1, 1, 0, 1}), randT(r, 2, 1, 1, 6), randT(r, 2, 3, 5, 8), randT(r, 2, 3, 5, 4)}},
		{msOpNode("mha_split_present_value", "MultiHeadAttention", []string{"y", "", "pv"}, graph.IntAttr("num_heads", 2)),
			[]tensor.Tensor{randT(r, 1, 2, 16), randT(r, 1, 2, 9, 8), randT(r, 1, 2, 9, 5)}},
		{msOpNode("mha_causal_kpm64", "MultiHeadAttention", []string{"y", "pk"}, graph.IntAttr("num_heads", 2), graph.IntAttr("unidirectional", 1)),
			[]tensor.Tensor{randT(r, 1, 4, 16), randT(r, 1, 4, 16), randT(r, 1, 4, 16), {}, tensor.MustTensor([]int64{1, 4}, []int64{1, 0, 1, 1})}},
		// key_padding_mask as lengths (batch), int32 and int64, with a past.
		{msOpNode("mha_lengths_past", "MultiHeadAttention", []string{"y", "pk", "pv"}, graph.IntAttr("num_heads", 2)),
			[]tensor.Tensor{randT(r, 3, 2, 16), randT(r, 3, 2, 16), randT(r, 3, 2, 16), {}, tensor.MustTensor([]int64{3}, []int32{7, 2, 5}), {}, randT(r, 3, 2, 5, 8), randT(r, 3, 2, 5, 8)}},
		{msOpNode("mha_lengths64_causal", "MultiHeadAttention", []string{"y"}, graph.IntAttr("num_heads", 2), graph.IntAttr("unidirectional", 1)),
			[]tensor.Tensor{randT(r, 2, 5, 16), randT(r, 2, 5, 16), randT(r, 2, 5, 16), {}, tensor.MustTensor([]int64{2}, []int64{3, 5})}},
	}
	for _, c := range cases {
		t.Run(c.node.Name, func(t *testing.T) {
			// Every input counts as known before the run (as a weight would), which the
			// attention's bias needs.
			p, reason, err := ops.KernelPlanners[ops.PlannerKey(c.node)](c.node, 21, ops.InfosOfStatic(c.in))
			require.NoError(t, err)
			require.NotNil(t, p, "the planner declined: %s", reason)
			rc := testRunCtx(s, 21)
			defer rc.Close()
			got, err := rc.RunKernelPlan(p, c.in)
			require.NoError(t, err)
			want, err := ops.HostOps[ops.PlannerKey(c.node)](rc, c.node, c.in)
			require.NoError(t, err)
			for i, name := range c.node.Outputs {
				if name == "" {
					continue
				}
				require.Equal(t, want[i].Dims(), got[i].Dims(), "output %d shape", i)
				w, g := tensor.Float64s(want[i]), tensor.Float64s(got[i])
				for j := range w {
					require.InDelta(t, w[j], g[j], 2e-5+2e-5*math.Abs(w[j]), "output %d element %d (%s)", i, j, ops.Variant(p))
				}
			}
		})
	}
}

// ones32 is an int32 tensor of ones of the given shape.
func ones32(shape ...int64) tensor.Tensor {
	v := make([]int32, ops.Numel(shape))
	for i := range v {
		v[i] = 1
	}
	return tensor.MustTensor(shape, v)
}

// BenchmarkMSOps times the com.microsoft ops with kernel planners at transformer sizes: the
// compiled plan's kernels (a session Run) against the host function.
//
//	cd go/session && go test -run '^$' -bench BenchmarkMSOps -benchtime 20x .
func BenchmarkMSOps(b *testing.B) {
	r := inferRand()
	pos := func(bs, s int64) tensor.Tensor {
		v := make([]int64, bs*s)
		for i := range v {
			v[i] = int64(i) % s
		}
		return tensor.MustTensor([]int64{bs, s}, v)
	}
	cases := []struct {
		name string
		node *graph.Node
		in   []tensor.Tensor
	}{
		{"skip_layer_norm_1x128x768", msOpNode("sln", "SkipLayerNormalization", []string{"y"}),
			[]tensor.Tensor{randT(r, 1, 128, 768), randT(r, 1, 128, 768), randT(r, 768), randT(r, 768), randT(r, 768)}},
		{"skip_simplified_layer_norm_1x128x2048", msOpNode("ssln", "SkipSimplifiedLayerNormalization", []string{"y"}),
			[]tensor.Tensor{randT(r, 1, 128, 2048), randT(r, 1, 128, 2048), randT(r, 2048)}},
		{"fast_gelu_1x128x3072", msOpNode("fg", "FastGelu", []string{"y"}), []tensor.Tensor{randT(r, 1, 128, 3072), randT(r, 3072)}},
		{"rotary_1x128x32x64", msOpNode("rot", "RotaryEmbedding", []string{"y"}, graph.IntAttr("num_heads", 32)),
			[]tensor.Tensor{randT(r, 1, 128, 2048), pos(1, 128), randT(r, 256, 32), randT(r, 256, 32)}},
		{"mha_causal_1x128x12x64", msOpNode("mha", "MultiHeadAttention", []string{"y"}, graph.IntAttr("num_heads", 12), graph.IntAttr("unidirectional", 1)),
			[]tensor.Tensor{randT(r, 1, 128, 768), randT(r, 1, 128, 768), randT(r, 1, 128, 768)}},
		// A decode step: one new token after 255, its (1, 256) key_padding_mask, the present
		// KV written.
		{"mha_decode_past255_kpm_1x1x12x64", msOpNode("mha", "MultiHeadAttention", []string{"y", "pk", "pv"}, graph.IntAttr("num_heads", 12), graph.IntAttr("unidirectional", 1)),
			[]tensor.Tensor{randT(r, 1, 1, 768), randT(r, 1, 1, 768), randT(r, 1, 1, 768), {}, ones32(1, 256), {}, randT(r, 1, 12, 255, 64), randT(r, 1, 12, 255, 64)}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			g := &graph.Graph{Name: "one_node"}
			node := *c.node
			node.Inputs = make([]string, len(c.in))
			for i, v := range c.in {
				if !v.IsValid() { // an omitted optional input
					continue
				}
				node.Inputs[i] = fmt.Sprintf("in%d", i)
				g.Inputs = append(g.Inputs, graph.Input(node.Inputs[i], graph.TensorType(v.DType(), graph.ShapeOf(v.Dims()...))))
			}
			for _, o := range node.Outputs {
				g.Outputs = append(g.Outputs, graph.Output(o, graph.Type{}))
			}
			g.Nodes = []*graph.Node{&node}
			m, err := graph.FromGraph(g.Name, g, map[string]int64{"": 21, graph.MSDomain: 1})
			require.NoError(b, err)
			s, err := FromGraph(m, WithExecutionProvider(ProviderHost), WithOption(OptionJIT, "sync")) // the exact kernels, not the stand-ins
			require.NoError(b, err)
			defer s.Close()
			feeds := feedsOf(c.in)
			_, err = s.Run(context.Background(), feeds) // plan and load outside the timing
			require.NoError(b, err)
			require.Positive(b, s.ExecutionPlans()[0].KernelSteps, "the op runs as kernels")
			b.Run("loom", func(b *testing.B) {
				for b.Loop() {
					if _, err := s.Run(context.Background(), feeds); err != nil {
						b.Fatal(err)
					}
				}
			})
			rc := testRunCtx(s, 21)
			defer rc.Close()
			host := ops.HostOps[ops.PlannerKey(c.node)]
			b.Run("host", func(b *testing.B) {
				for b.Loop() {
					if _, err := host(rc, c.node, c.in); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// attn_softmax (attention.loom) writes no subnormal probability: a masked score's exp is
// clamped at e^-87, and divided by its row's sum it would be subnormal, which costs the
// products reading P (bmm) a microcode assist per element on x86 (a causal 128-token
// MultiHeadAttention ran 5x slower). Rows of scores with a causal mask of mask_filter_value
// (and one of -inf), fresh each run: every probability is 0 or normal, masked ones exactly 0,
// the rest within 1e-6 of a float64 softmax.
func TestAttnSoftmaxWritesNoSubnormals(t *testing.T) {
	s := kernelCheckSession(t)
	rc := testRunCtx(s, 21)
	defer rc.Close()
	r := inferRand()
	const rows, lk = 24, 40
	scores := randT(r, 1, 1, rows, lk)
	mask := make([]float32, rows*lk)
	for i := 0; i < rows; i++ {
		for j := i + 1; j < lk; j++ {
			mask[i*lk+j] = -10000
			if i == 0 {
				mask[i*lk+j] = float32(math.Inf(-1))
			}
		}
	}
	maskT := tensor.MustTensor([]int64{rows, lk}, mask)
	shape := []int64{1, 1, rows, lk}
	cp, ok := kernelops.StridedCopyCall(graph.Float, shape, []int64{rows * lk, rows * lk, lk, 1}, []int64{rows * lk, rows * lk, lk, 1}, 0, 0, ops.InputOperand(0), ops.OutputOperand(0))
	require.True(t, ok)
	args := []uint64{rows, 1, 1, 1, lk, 0, 0, 0, lk, 1, uint64(math.Float32bits(0.125)), 0}
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: shape}}, Calls: []ops.KernelCall{cp,
		{File: "attention.loom", Symbol: "attn_softmax", Config: map[string]string{"MASK": "1"}, Args: args, Workload: args[:3],
			Bind: []ops.KernelBinding{ops.ReadWriteOf(ops.OutputOperand(0)), ops.ReadOf(ops.InputOperand(1)), ops.ReadOf(ops.InputOperand(0))}}}}
	out, err := rc.RunKernelPlan(p, []tensor.Tensor{scores, maskT})
	require.NoError(t, err)
	got := tensor.Float64s(out[0])
	sv := tensor.Float64s(scores)
	for i := 0; i < rows; i++ {
		mx := math.Inf(-1)
		for j := 0; j <= i; j++ {
			mx = math.Max(mx, sv[i*lk+j]*0.125)
		}
		sum := 0.0
		for j := 0; j <= i; j++ {
			sum += math.Exp(sv[i*lk+j]*0.125 - mx)
		}
		for j := 0; j < lk; j++ {
			g := got[i*lk+j]
			require.False(t, g != 0 && math.Abs(g) < 0x1p-126, "row %d key %d: subnormal %g", i, j, g)
			if j > i {
				require.Zero(t, g, "row %d key %d is masked", i, j)
				continue
			}
			require.InDelta(t, math.Exp(sv[i*lk+j]*0.125-mx)/sum, g, 1e-6, "row %d key %d", i, j)
		}
	}
}
