package session

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// GroupQueryAttention's kernels (kernels/gqa.loom, planned by mskernels) against its host
// function, which msops_refs_test.go checks against ONNX Runtime: on fresh random inputs and
// lengths, the planner seeing seqlens_k as a compiled plan does (not its values), and through
// compiled plans whose later runs bring other seqlens_k values or bad ones.

// gqaConfig is one GroupQueryAttention node and the shapes of its inputs.
type gqaConfig struct {
	name                    string
	batch, seq, nh, kvh, hs int
	past                    int // past_key's length; -1: no past inputs
	packed                  bool
	rotary                  int // rotary_dim (do_rotary when > 0)
	cacheRows               int
	interleaved, smooth     bool
	window                  int
	softcap, scale          float32
	total                   int
	i64                     bool     // int64 seqlens_k and total_sequence_length
	outs                    []string // default y, present_k, present_v
}

// node is c's GroupQueryAttention node (named gqa_ and c's name).
func (c gqaConfig) node() *graph.Node {
	attrs := []*graph.Attribute{graph.IntAttr("num_heads", int64(c.nh)), graph.IntAttr("kv_num_heads", int64(c.kvh))}
	if c.rotary > 0 {
		attrs = append(attrs, graph.IntAttr("do_rotary", 1))
		if c.interleaved {
			attrs = append(attrs, graph.IntAttr("rotary_interleaved", 1))
		}
	}
	if c.smooth {
		attrs = append(attrs, graph.IntAttr("smooth_softmax", 1))
	}
	if c.window != 0 {
		attrs = append(attrs, graph.IntAttr("local_window_size", int64(c.window)))
	}
	if c.softcap != 0 {
		attrs = append(attrs, graph.FloatAttr("softcap", c.softcap))
	}
	if c.scale != 0 {
		attrs = append(attrs, graph.FloatAttr("scale", c.scale))
	}
	outs := c.outs
	if outs == nil {
		outs = []string{"y", "present_k", "present_v"}
	}
	return msOpNode("gqa_"+c.name, "GroupQueryAttention", outs, attrs...)
}

// first says the run is a first prompt: every sequence starts at 0.
func (c gqaConfig) first() bool { return c.seq > 1 && c.seq == c.total }

// randomLens draws each sequence's total length: at most total and the present buffer, the
// new tokens after a past that fits past_key (on a first prompt, from 1 to seq).
func (c gqaConfig) randomLens(r *rand.Rand) []int {
	lens := make([]int, c.batch)
	for b := range lens {
		lo, hi := c.seq, min(c.total, max(c.past, 0)+c.seq)
		if c.first() {
			lo, hi = 1, c.seq
		}
		lens[b] = lo + r.IntN(hi-lo+1)
	}
	lens[r.IntN(c.batch)] = min(c.total, max(c.past, 0)+c.seq) // one sequence as long as the run allows
	if c.first() {
		lens[0] = c.seq
	}
	return lens
}

// lengths is seqlens_k for sequence lengths t (each t - 1) and total_sequence_length.
func (c gqaConfig) lengths(t []int) (tensor.Tensor, tensor.Tensor) {
	if c.i64 {
		v := make([]int64, len(t))
		for i, x := range t {
			v[i] = int64(x - 1)
		}
		return tensor.MustTensor([]int64{int64(len(t))}, v), tensor.MustTensor([]int64{}, []int64{int64(c.total)})
	}
	v := make([]int32, len(t))
	for i, x := range t {
		v[i] = int32(x - 1)
	}
	return tensor.MustTensor([]int64{int64(len(t))}, v), tensor.MustTensor([]int64{}, []int32{int32(c.total)})
}

// inputs draws the node's inputs, with sequence lengths t.
func (c gqaConfig) inputs(r *rand.Rand, t []int) []tensor.Tensor {
	B, S := int64(c.batch), int64(c.seq)
	in := make([]tensor.Tensor, 9)
	if c.packed {
		in[0] = randT(r, B, S, int64((c.nh+2*c.kvh)*c.hs))
	} else {
		in[0], in[1], in[2] = randT(r, B, S, int64(c.nh*c.hs)), randT(r, B, S, int64(c.kvh*c.hs)), randT(r, B, S, int64(c.kvh*c.hs))
	}
	if c.past >= 0 {
		in[3], in[4] = randT(r, B, int64(c.kvh), int64(c.past), int64(c.hs)), randT(r, B, int64(c.kvh), int64(c.past), int64(c.hs))
	}
	in[5], in[6] = c.lengths(t)
	if c.rotary > 0 {
		in[7], in[8] = randT(r, int64(c.cacheRows), int64(c.rotary/2)), randT(r, int64(c.cacheRows), int64(c.rotary/2))
	}
	for len(in) > 7 && !in[len(in)-1].IsValid() {
		in = in[:len(in)-1]
	}
	return in
}

// gqaConfigs cover the op's variants: first prompts (padded sequences among them) and decode
// steps, a present buffer shared with the past (past_key as long as the present) or grown by
// the new tokens, packed and separate QKV, rotary embedding in halves and interleaved (over
// the whole head and part of it), local windows, softcap, smooth softmax, a scale, head ratios
// of 1 to 4, head sizes that are not a multiple of the kernels' 16 lanes, more keys than one
// chunk of gqa_attn (256), int64 lengths, and present outputs the node leaves unnamed.
var gqaConfigs = []gqaConfig{
	{name: "prompt_rotary_padded", batch: 2, seq: 5, nh: 4, kvh: 2, hs: 16, past: -1, rotary: 16, cacheRows: 32, total: 5},
	{name: "decode_grown", batch: 2, seq: 1, nh: 4, kvh: 2, hs: 16, past: 7, rotary: 16, cacheRows: 32, total: 8},
	{name: "decode_shared_interleaved_partial", batch: 3, seq: 1, nh: 8, kvh: 2, hs: 32, past: 12, rotary: 8, cacheRows: 16, interleaved: true, total: 9},
	{name: "two_tokens_packed_softcap_window_smooth", batch: 2, seq: 2, nh: 6, kvh: 2, hs: 20, past: 9, packed: true, softcap: 1.5, window: 3, smooth: true, scale: 0.3, total: 11},
	{name: "prompt_in_shared_buffer", batch: 1, seq: 4, nh: 2, kvh: 2, hs: 24, past: 10, total: 4},
	{name: "prompt_packed_window", batch: 2, seq: 7, nh: 4, kvh: 1, hs: 16, past: -1, packed: true, window: 2, total: 7},
	{name: "decode_long", batch: 1, seq: 1, nh: 8, kvh: 2, hs: 64, past: 300, rotary: 32, cacheRows: 400, total: 301},
	{name: "decode_long_window", batch: 2, seq: 3, nh: 4, kvh: 4, hs: 40, past: 330, window: 100, smooth: true, total: 320},
	{name: "decode_i64_unnamed_presents", batch: 2, seq: 1, nh: 4, kvh: 2, hs: 8, past: 5, i64: true, total: 6, outs: []string{"y"}},
	{name: "prompt_rotary_halves_partial", batch: 1, seq: 6, nh: 3, kvh: 3, hs: 48, past: -1, rotary: 40, cacheRows: 6, total: 6},
}

// gqaInfos describes in as a compiled plan's planner sees it: total_sequence_length's value
// (the plan specializes on it) and nothing else's.
func gqaInfos(in []tensor.Tensor) []ops.ValueInfo {
	infos := ops.InfosOf(in)
	infos[6].Static = in[6]
	return infos
}

// requireGQAClose compares the kernels' outputs with the host function's.
func requireGQAClose(t *testing.T, n *graph.Node, want, got []tensor.Tensor, what string) {
	t.Helper()
	for i, name := range n.Outputs {
		if name == "" {
			continue
		}
		require.Equal(t, want[i].Dims(), got[i].Dims(), "%s: output %d shape", what, i)
		w, g := tensor.Float64s(want[i]), tensor.Float64s(got[i])
		for j := range w {
			if d := w[j] - g[j]; d > 1e-4 || d < -1e-4 {
				require.InDelta(t, w[j], g[j], 1e-4, "%s: output %d (%s) element %d", what, i, name, j)
			}
		}
	}
}

// TestGQAKernelsMatchHost runs every configuration's kernel plan, made as a compiled plan
// makes it, on fresh random inputs and lengths, and twice more with other lengths through the
// same plan, against the host function.
func TestGQAKernelsMatchHost(t *testing.T) {
	r := inferRand()
	s := kernelCheckSession(t)
	for _, c := range gqaConfigs {
		t.Run(c.name, func(t *testing.T) {
			n := c.node()
			in := c.inputs(r, c.randomLens(r))
			planner := ops.KernelPlanners[ops.PlannerKey(n)]
			p, reason, err := planner(n, 21, gqaInfos(in))
			require.NoError(t, err)
			require.NotNil(t, p, "the planner declined: %s", reason)
			rc := testRunCtx(s, 21)
			defer rc.Close()
			host := ops.HostOps[ops.PlannerKey(n)]
			for run := range 3 {
				if run > 0 {
					in[5], _ = c.lengths(c.randomLens(r))
				}
				got, err := rc.RunKernelPlanFor(n, p, in)
				require.NoError(t, err, ops.Variant(p))
				want, err := host(rc, n, in)
				require.NoError(t, err)
				requireGQAClose(t, n, want, got, fmt.Sprintf("run %d, seqlens_k %v", run, tensor.Int64s(in[5])))
			}
		})
	}
}

// The planner takes what the kernels cover and leaves the rest to the host function: no plan
// without total_sequence_length's value (it sets the present length), and none for seqlens_k
// values it sees are out of range (the host function reports them).
func TestGQAPlannerDeclines(t *testing.T) {
	r := inferRand()
	c := gqaConfigs[1]
	n := c.node()
	in := c.inputs(r, []int{8, 3})
	planner := ops.KernelPlanners[ops.PlannerKey(n)]
	p, reason, err := planner(n, 21, ops.InfosOf(in))
	require.NoError(t, err)
	assert.Nil(t, p)
	assert.Contains(t, reason, "total_sequence_length is not known")
	p, _, err = planner(n, 21, ops.InfosOfStatic(in))
	require.NoError(t, err)
	require.NotNil(t, p, "valid lengths the planner sees")
	for _, lens := range [][]int{{9, 3}, {0, 3}, {8, 0}} {
		bad := slices.Clone(in)
		bad[5], _ = c.lengths(lens)
		p, reason, err := planner(n, 21, ops.InfosOfStatic(bad))
		require.NoError(t, err)
		assert.Nil(t, p, "lengths %v", lens)
		assert.Contains(t, reason, "seqlens_k is out of range")
	}
}

// gqaSession is a one-node session of c's node whose inputs have their shapes declared (so
// that the first run already runs a plan built from shape inference).
func gqaSession(t testing.TB, c gqaConfig, in []tensor.Tensor, executor string) *InferenceSession {
	t.Helper()
	g := &graph.Graph{Name: "gqa"}
	node := *c.node()
	node.Inputs = make([]string, len(in))
	for i, v := range in {
		if v.IsValid() {
			node.Inputs[i] = fmt.Sprintf("in%d", i)
			g.Inputs = append(g.Inputs, graph.Input(node.Inputs[i], graph.TensorType(v.DType(), graph.ShapeOf(v.Dims()...))))
		}
	}
	for _, o := range node.Outputs {
		g.Outputs = append(g.Outputs, graph.Output(o, graph.Type{}))
	}
	g.Nodes = []*graph.Node{&node}
	m, err := graph.FromGraph(g.Name, g, map[string]int64{"": 21, graph.MSDomain: 1})
	require.NoError(t, err)
	s, err := FromGraph(m, tracedOptions(nil, executor)...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// A compiled plan specializes on total_sequence_length only: runs with other seqlens_k
// values reuse it, its kernels reading them at run time, and match the host function; a new
// total gets a plan of its own.
func TestGQAPlanRunsOtherLengths(t *testing.T) {
	r := inferRand()
	for _, c := range []gqaConfig{gqaConfigs[2], gqaConfigs[3], gqaConfigs[0]} {
		t.Run(c.name, func(t *testing.T) {
			in := c.inputs(r, c.randomLens(r))
			s := gqaSession(t, c, in, exec.ExecutorPlan)
			n := c.node()
			rc := testRunCtx(s, 21)
			defer rc.Close()
			for run := range 4 {
				if run > 0 {
					in[5], _ = c.lengths(c.randomLens(r))
				}
				got, err := s.Run(context.Background(), feedsOf(in))
				require.NoError(t, err)
				want, err := ops.HostOps[ops.PlannerKey(n)](rc, n, in)
				require.NoError(t, err)
				requireGQAClose(t, n, want, got, fmt.Sprintf("run %d, seqlens_k %v", run, tensor.Int64s(in[5])))
			}
			plans := s.ExecutionPlans()
			require.Len(t, plans, 1, "one plan for every seqlens_k")
			require.True(t, plans[0].Planned, plans[0].Reason)
			assert.Equal(t, 1, plans[0].KernelSteps, "GroupQueryAttention runs as kernels")
			assert.Equal(t, []string{"in6"}, plans[0].Specialized, "the plan takes total_sequence_length as fixed")
			assert.True(t, plans[0].FromShapes, "the first run ran the plan")
		})
	}
	// Another total: its own plan, correct too.
	c := gqaConfigs[1]
	in := c.inputs(r, c.randomLens(r))
	s := gqaSession(t, c, in, exec.ExecutorPlan)
	n := c.node()
	rc := testRunCtx(s, 21)
	defer rc.Close()
	for _, total := range []int{8, 5, 8} {
		c.total = total
		in[5], in[6] = c.lengths(c.randomLens(r))
		got, err := s.Run(context.Background(), feedsOf(in))
		require.NoError(t, err)
		want, err := ops.HostOps[ops.PlannerKey(n)](rc, n, in)
		require.NoError(t, err)
		requireGQAClose(t, n, want, got, fmt.Sprintf("total %d", total))
	}
	assert.Len(t, s.ExecutionPlans(), 2)
}

// seqlens_k out of range fed to a compiled plan fails the run naming the node and the value,
// in the host function's words, on both executors, as does a total_sequence_length of 0 (a
// plan of its own, where the planner leaves the node to the host function); the session runs
// good inputs afterwards.
// Computed inside the model (so the plan cannot run the node again on the run's inputs), the
// kernel's bounds check still fails the run, naming seqlens_k.
func TestGQAPlanRefusesBadLengths(t *testing.T) {
	r := inferRand()
	c := gqaConfigs[1] // past 7, total 8: lengths 1..8 are valid
	good := c.inputs(r, []int{8, 3})
	for _, bad := range []struct {
		lens  []int
		total int
		says  string
	}{
		{[]int{9, 3}, 8, "seqlens_k[0] = 8 is outside [0, total_sequence_length 8)"},
		{[]int{8, 0}, 8, "seqlens_k[1] = -1 is outside [0, total_sequence_length 8)"},
		{[]int{1, 1}, 0, "seqlens_k[0] = 0 is outside [0, total_sequence_length 0)"}, // a plan of its own, the node on the host
	} {
		for _, executor := range traceExecutors {
			t.Run(fmt.Sprintf("%v_%d/%s", bad.lens, bad.total, executor), func(t *testing.T) {
				in := slices.Clone(good)
				cb := c
				cb.total = bad.total
				in[5], in[6] = cb.lengths(bad.lens)
				s := gqaSession(t, c, good, executor)
				checkHostileCase(t, s, hostileCase{node: c.node(), good: good, bad: in, want: tensor.ErrInvalidArgument, says: []string{bad.says}})
				if executor == exec.ExecutorPlan && bad.total == c.total {
					plans := s.ExecutionPlans()
					require.Len(t, plans, 1)
					assert.Equal(t, 1, plans[0].KernelSteps, "the bad lengths ran through the plan's kernels")
				}
			})
		}
	}
	// seqlens_k computed in the model: Add(in5, zero).
	g := &graph.Graph{Name: "gqa_computed_lengths"}
	node := *c.node()
	node.Inputs = make([]string, len(good))
	for i := range good {
		node.Inputs[i] = fmt.Sprintf("in%d", i)
		if i == 5 {
			node.Inputs[i] = "lens"
			continue
		}
		g.Inputs = append(g.Inputs, graph.Input(node.Inputs[i], graph.TensorType(good[i].DType(), graph.ShapeOf(good[i].Dims()...))))
	}
	g.Inputs = append(g.Inputs, graph.Input("raw", graph.TensorType(graph.Int32, graph.ShapeOf(2))))
	zero, err := graph.TensorFromValues("zero", graph.Int32, []int64{2}, []float64{0, 0})
	require.NoError(t, err)
	g.AddInitializer(zero)
	g.Nodes = []*graph.Node{graph.NewNode("lens_add", "Add", []string{"raw", "zero"}, []string{"lens"}), &node}
	for _, o := range node.Outputs {
		g.Outputs = append(g.Outputs, graph.Output(o, graph.Type{}))
	}
	m, err := graph.FromGraph(g.Name, g, map[string]int64{"": 21, graph.MSDomain: 1})
	require.NoError(t, err)
	s, err := FromGraph(m, WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	feeds := func(lens []int) []tensor.NamedTensor {
		f := feedsOf(good)
		f = slices.DeleteFunc(f, func(nt tensor.NamedTensor) bool { return nt.Name == "in5" })
		l, _ := c.lengths(lens)
		return append(f, tensor.NamedTensor{Name: "raw", Tensor: l})
	}
	for range 2 {
		_, err = s.Run(context.Background(), feeds([]int{8, 3}))
		require.NoError(t, err)
	}
	_, err = s.Run(context.Background(), feeds([]int{8, 12}))
	require.Error(t, err)
	t.Logf("computed seqlens_k out of range: %v", err)
	var e *tensor.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, node.Name, e.Node, "%v", err)
	assert.ErrorIs(t, err, tensor.ErrInvalidArgument, "%v", err)
	assert.Contains(t, err.Error(), `input 5 ("lens")`)
	_, err = s.Run(context.Background(), feeds([]int{2, 8}))
	require.NoError(t, err, "the session still runs good inputs")
	plans := s.ExecutionPlans()
	require.Len(t, plans, 1)
	require.True(t, plans[0].Planned, plans[0].Reason)
}

// Any seqlens_k values fed to a compiled plan, in range or not, give the host function's
// outputs, or an error of kind ErrInvalidArgument naming the node where the host function
// refuses them too.
func TestGQAPlanArbitraryLengths(t *testing.T) {
	r := inferRand()
	for _, c := range []gqaConfig{gqaConfigs[1], gqaConfigs[0], gqaConfigs[3]} {
		t.Run(c.name, func(t *testing.T) {
			in := c.inputs(r, c.randomLens(r))
			s := gqaSession(t, c, in, exec.ExecutorPlan)
			n := c.node()
			rc := testRunCtx(s, 21)
			defer rc.Close()
			failed := 0
			for range 12 {
				lens := make([]int, c.batch)
				for b := range lens {
					lens[b] = r.IntN(c.total+c.seq+4) - 2 // seqlens_k from -3 to total + seq
				}
				in[5], _ = c.lengths(lens)
				want, herr := ops.HostOps[ops.PlannerKey(n)](rc, n, in)
				got, err := s.Run(context.Background(), feedsOf(in))
				if herr != nil {
					failed++
					require.Error(t, err, "lengths %v: the host function refuses them (%v)", lens, herr)
					var e *tensor.Error
					require.ErrorAs(t, err, &e)
					assert.Equal(t, n.Name, e.Node)
					assert.ErrorIs(t, err, tensor.ErrInvalidArgument)
					assert.Contains(t, err.Error(), herr.Error())
					continue
				}
				require.NoError(t, err, "lengths %v", lens)
				requireGQAClose(t, n, want, got, fmt.Sprintf("lengths %v", lens))
			}
			require.Len(t, s.ExecutionPlans(), 1)
			t.Logf("%d of 12 runs refused", failed)
		})
	}
}

// BenchmarkGQADecode times a decode step of GroupQueryAttention at an 8B-class LLM's layer
// size (batch 1, 32 query heads, 8 kv heads, head size 128, rotary over the whole head, 512
// past tokens) as the compiled plan's kernels (a session Run) and as the host function: the
// present buffer grown by the new token (past 512, present 513) and shared with the past (past
// buffer 1024).
//
//	cd go/session && go test -run '^$' -bench BenchmarkGQADecode -benchtime 20x .
func BenchmarkGQADecode(b *testing.B) {
	r := inferRand()
	for _, c := range []gqaConfig{
		{name: "grown_past512", batch: 1, seq: 1, nh: 32, kvh: 8, hs: 128, past: 512, rotary: 128, cacheRows: 1024, total: 513},
		{name: "shared_buffer1024_past512", batch: 1, seq: 1, nh: 32, kvh: 8, hs: 128, past: 1024, rotary: 128, cacheRows: 1024, total: 513},
	} {
		b.Run(c.name, func(b *testing.B) {
			in := c.inputs(r, []int{513})
			s := gqaSession(b, c, in, exec.ExecutorPlan)
			feeds := feedsOf(in)
			outs, err := s.Run(context.Background(), feeds)
			require.NoError(b, err)
			require.Equal(b, 1, s.ExecutionPlans()[0].KernelSteps, "the op runs as kernels")
			b.Run("loom", func(b *testing.B) {
				for b.Loop() {
					outs, err := s.Run(context.Background(), feeds)
					if err != nil {
						b.Fatal(err)
					}
					s.Recycle(outs...)
				}
			})
			s.Recycle(outs...)
			rc := testRunCtx(s, 21)
			defer rc.Close()
			n := c.node()
			host := ops.HostOps[ops.PlannerKey(n)]
			b.Run("host", func(b *testing.B) {
				for b.Loop() {
					if _, err := host(rc, n, in); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
