package session

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// mlpIfPath is an overhead-bound MLP ending in a data-dependent If: three Gemm + LayerNorm +
// Relu layers (x [N, 64] -> h3 [N, 128]), a score Sigmoid(Gemm(h3)) [N, 1] averaged over the
// batch, and If(mean score > 0.5) { Softmax(Gemm(h3, wa)) } else { Sigmoid(Gemm(h3, wb)) }
// giving y [N, 10]; fixed random weights. The plan holds both branches as steps (see
// go/session/internal/plan/branches.go); `tools/bench/vs_ort.sh` times it against ONNX
// Runtime (case mlp_if). TestWriteMLPIfModel writes it.
const mlpIfPath = "testdata/models/mlp_if.onnx"

// mlpIfModel builds mlpIfPath's model from a seeded generator.
func mlpIfModel(t *testing.T) *graph.Model {
	rnd := rand.New(rand.NewPCG(20261205, 2))
	w := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32((rnd.Float64()*2 - 1) * scale)
		}
		return v
	}
	g := &graph.Graph{Name: "mlp_if"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("N"), graph.DimOf(64)}))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("N"), graph.DimOf(10)}))}
	in := "x"
	for l, width := range []int{64, 128, 128} {
		p := func(s string) string { return s + string(rune('1'+l)) }
		g.AddInitializer(graph.TensorFromFloat32(p("w"), []int64{int64(width), 128}, w(width*128, 1/math.Sqrt(float64(width)))))
		g.AddInitializer(graph.TensorFromFloat32(p("b"), []int64{128}, w(128, 0.1)))
		g.AddInitializer(graph.TensorFromFloat32(p("g"), []int64{128}, w(128, 1)))
		g.AddInitializer(graph.TensorFromFloat32(p("be"), []int64{128}, w(128, 0.1)))
		g.Nodes = append(g.Nodes,
			graph.NewNode(p("gemm"), "Gemm", []string{in, p("w"), p("b")}, []string{p("m")}),
			graph.NewNode(p("ln"), "LayerNormalization", []string{p("m"), p("g"), p("be")}, []string{p("n")}, graph.IntAttr("axis", -1)),
			graph.NewNode(p("relu"), "Relu", []string{p("n")}, []string{p("h")}))
		in = p("h")
	}
	// A score weight of mean zero centres the score on the threshold, whatever the layers make.
	ws := w(128, 4/math.Sqrt(128))
	mean := float32(0)
	for _, v := range ws {
		mean += v / 128
	}
	for i := range ws {
		ws[i] -= mean
	}
	g.AddInitializer(graph.TensorFromFloat32("ws", []int64{128, 1}, ws))
	g.AddInitializer(graph.TensorFromFloat32("bs", []int64{1}, []float32{0}))
	g.AddInitializer(graph.TensorFromFloat32("half", []int64{}, []float32{0.5}))
	g.Nodes = append(g.Nodes,
		graph.NewNode("score", "Gemm", []string{in, "ws", "bs"}, []string{"s"}),
		graph.NewNode("sigmoid", "Sigmoid", []string{"s"}, []string{"p"}),
		graph.NewNode("mean", "ReduceMean", []string{"p"}, []string{"pm"}, graph.IntAttr("keepdims", 0)),
		graph.NewNode("threshold", "Greater", []string{"pm", "half"}, []string{"c"}))
	head := func(name, act string) *graph.Graph {
		b := &graph.Graph{Name: name}
		b.AddInitializer(graph.TensorFromFloat32(name+"_w", []int64{128, 10}, w(1280, 1/math.Sqrt(128))))
		b.AddInitializer(graph.TensorFromFloat32(name+"_b", []int64{10}, w(10, 0.1)))
		b.Outputs = []*graph.Value{graph.Output(name+"_y", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("N"), graph.DimOf(10)}))}
		var attrs []*graph.Attribute
		if act == "Softmax" {
			attrs = append(attrs, graph.IntAttr("axis", -1))
		}
		b.Nodes = []*graph.Node{
			graph.NewNode(name+"_gemm", "Gemm", []string{in, name + "_w", name + "_b"}, []string{name + "_l"}),
			graph.NewNode(name+"_act", act, []string{name + "_l"}, []string{name + "_y"}, attrs...),
		}
		return b
	}
	g.Nodes = append(g.Nodes, graph.NewNode("branch", "If", []string{"c"}, []string{"y"},
		&graph.Attribute{Name: "then_branch", Type: graph.AttrGraph, Graph: head("then", "Softmax")},
		&graph.Attribute{Name: "else_branch", Type: graph.AttrGraph, Graph: head("else", "Sigmoid")}))
	m, err := graph.FromGraph("mlp_if", g, map[string]int64{"": 17})
	require.NoError(t, err)
	return m
}

// TestWriteMLPIfModel rewrites mlpIfPath when LOOM_WRITE_TESTDATA=1; otherwise it checks that
// the committed file is what mlpIfModel builds.
func TestWriteMLPIfModel(t *testing.T) { requireCommittedModel(t, mlpIfPath, mlpIfModel(t)) }

// thenTaken says which branch of mlp_if made y: the then-branch's Softmax rows sum to 1.
func thenTaken(y []float64, rows int) bool {
	sum := 0.0
	for _, v := range y[:10] {
		sum += v
	}
	return math.Abs(sum-1) < 1e-4 && rows > 0
}

// The MLP's If runs as plan steps: both branches are in the plan, each run takes the one its
// condition picks, and every run matches the interpreter; the report shows one branched If,
// its test the only step outside the kernels.
func TestMLPIfBranchesRunPlanned(t *testing.T) {
	planned, interpreted := planPair(t, func(opts ...LoadOption) (*InferenceSession, error) {
		return Load(filepath.FromSlash(mlpIfPath), opts...)
	})
	rnd := inferRand()
	seen := map[bool]int{}
	for run := range 40 {
		rows := 1 + run%3
		x := randomF32(rnd, rows*64)
		// The input's scale moves the score around the threshold: both branches are taken.
		scale := float32(math.Exp(rnd.Float64()*6 - 3))
		for i := range x {
			x[i] *= scale
			if run%2 == 0 {
				x[i] -= scale / 2
			}
		}
		feeds := []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{int64(rows), 64}, x)}}
		want, err := interpreted.Run(context.Background(), feeds)
		require.NoError(t, err)
		got, err := planned.Run(context.Background(), feeds)
		require.NoError(t, err)
		wv, gv := tensor.Float64s(want[0]), tensor.Float64s(got[0])
		require.Len(t, gv, rows*10)
		for j := range wv {
			require.InDelta(t, wv[j], gv[j], 1e-5, "run %d element %d", run, j)
		}
		seen[thenTaken(wv, rows)]++
	}
	require.Positive(t, seen[true], "no run took the then_branch")
	require.Positive(t, seen[false], "no run took the else_branch")
	plans := planned.ExecutionPlans()
	require.NotEmpty(t, plans)
	for _, p := range plans {
		require.True(t, p.Planned, p.Reason)
		assert.Equal(t, 1, p.Branched, "the If's branches are plan steps")
		require.Len(t, p.HostSteps, 1, "only the If's condition is read on the host: %+v", p.HostSteps)
		assert.Equal(t, "branch", p.HostSteps[0].Node)
		assert.Equal(t, 3*3+4+2*2, p.KernelSteps, "every other node runs as kernels")
		var kinds []string
		for _, n := range p.Nodes {
			if n.OpType == "If" {
				kinds = append(kinds, string(n.Step))
			}
		}
		assert.Equal(t, []string{"branched"}, kinds)
		assert.GreaterOrEqual(t, len(p.Segments), 3, "the layers, then each branch, replay as segments")
	}
}

// ifCopyModel: s = ReduceSum(x) and If(s > 0) { x, k, x·x } else { -x, x + x, k2 } with
// y0 = Relu(If.0), y1 = If.1 and y2 = If.2: branch outputs that are outer values and
// constants are copied into the If's outputs, the others written in place, on either branch.
func ifCopyModel(t *testing.T, n int64) *graph.Model {
	g := &graph.Graph{Name: "if_copy"}
	vec := graph.TensorType(graph.Float, graph.Shape{graph.DimOf(n)})
	g.Inputs = []*graph.Value{graph.Input("x", vec)}
	g.Outputs = []*graph.Value{graph.Output("y0", vec), graph.Output("y1", vec), graph.Output("y2", vec)}
	g.AddInitializer(graph.TensorFromFloat32("zero", []int64{}, []float32{0}))
	k := make([]float32, n)
	k2 := make([]float32, n)
	for i := range k {
		k[i], k2[i] = float32(i)+0.5, -float32(i)
	}
	then := &graph.Graph{Name: "then"}
	then.AddInitializer(graph.TensorFromFloat32("k", []int64{n}, k))
	then.Outputs = []*graph.Value{graph.Output("x", vec), graph.Output("k", vec), graph.Output("sq", vec)}
	then.Nodes = []*graph.Node{graph.NewNode("t_sq", "Mul", []string{"x", "x"}, []string{"sq"})}
	els := &graph.Graph{Name: "else"}
	els.AddInitializer(graph.TensorFromFloat32("k2", []int64{n}, k2))
	// The else-branch's x + x has the name of the then-branch's x·x: each branch is a scope.
	els.Outputs = []*graph.Value{graph.Output("neg", vec), graph.Output("sq", vec), graph.Output("k2", vec)}
	els.Nodes = []*graph.Node{
		graph.NewNode("e_neg", "Neg", []string{"x"}, []string{"neg"}),
		graph.NewNode("e_dbl", "Add", []string{"x", "x"}, []string{"sq"}),
	}
	g.Nodes = []*graph.Node{
		graph.NewNode("sum", "ReduceSum", []string{"x"}, []string{"s"}, graph.IntAttr("keepdims", 0)),
		graph.NewNode("gt", "Greater", []string{"s", "zero"}, []string{"c"}),
		graph.NewNode("if", "If", []string{"c"}, []string{"o0", "y1", "y2"},
			&graph.Attribute{Name: "then_branch", Type: graph.AttrGraph, Graph: then},
			&graph.Attribute{Name: "else_branch", Type: graph.AttrGraph, Graph: els}),
		graph.NewNode("relu", "Relu", []string{"o0"}, []string{"y0"}),
	}
	m, err := graph.FromGraph("if_copy", g, map[string]int64{"": 13})
	require.NoError(t, err)
	return m
}

// Branch outputs that no branch step makes for the If alone (an outer value, a constant) are
// copied into its outputs, on the host and on the cuda stand-in's device arena, whichever
// branch the first (traced) run took.
func TestIfBranchOutputsCopiedWhereNeeded(t *testing.T) {
	const n = 6
	for _, provider := range []string{"host", "standin"} {
		for _, firstThen := range []bool{true, false} {
			opts := []LoadOption{WithExecutionProvider(ProviderHost)}
			if provider == "standin" {
				opts = []LoadOption{WithExecutionProvider(ProviderCUDA), WithOption(OptionCUDAStandIn, "1")}
			}
			s, err := FromGraph(ifCopyModel(t, n), opts...)
			require.NoError(t, err)
			rnd := inferRand()
			for run := range 12 {
				x := randomF32(rnd, n)
				pos := run%2 == 0 == firstThen
				sum := float32(0)
				for _, v := range x {
					sum += v
				}
				if sum > 0 != pos {
					for i := range x {
						x[i] = -x[i]
					}
				}
				outs, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{n}, x)}})
				require.NoError(t, err, "%s run %d", provider, run)
				y0, y1, y2 := tensor.Float64s(outs[0]), tensor.Float64s(outs[1]), tensor.Float64s(outs[2])
				for i, v := range x {
					xv := float64(v)
					if pos {
						require.InDelta(t, max(xv, 0), y0[i], 1e-6, "%s run %d y0[%d]", provider, run, i)
						require.InDelta(t, float64(i)+0.5, y1[i], 0, "%s run %d y1[%d]", provider, run, i)
						require.InDelta(t, xv*xv, y2[i], 1e-6, "%s run %d y2[%d]", provider, run, i)
					} else {
						require.InDelta(t, max(-xv, 0), y0[i], 1e-6, "%s run %d y0[%d]", provider, run, i)
						require.InDelta(t, 2*xv, y1[i], 1e-6, "%s run %d y1[%d]", provider, run, i)
						require.InDelta(t, -float64(i), y2[i], 0, "%s run %d y2[%d]", provider, run, i)
					}
				}
			}
			plans := s.ExecutionPlans()
			require.Len(t, plans, 1)
			p := plans[0]
			require.True(t, p.Planned, p.Reason)
			assert.Equal(t, 1, p.Branched)
			var copies []string
			for _, h := range p.HostSteps {
				if strings.Contains(h.Reason, "copies") {
					copies = append(copies, h.Node)
				}
			}
			assert.ElementsMatch(t, []string{"if/then_branch/output 0", "if/then_branch/output 1", "if/else_branch/output 2"}, copies,
				"%s: an outer value and the constants are copied; Mul, Neg and Add write the If's outputs", provider)
			require.NoError(t, s.Close())
		}
	}
}

// Branches whose outputs differ in shape cannot share the If's slots: the If stays a host
// step, saying why, and runs of either branch are still right.
func TestIfBranchesOfOtherShapesStayHostSteps(t *testing.T) {
	vec := func(n int64) graph.Type { return graph.TensorType(graph.Float, graph.Shape{graph.DimOf(n)}) }
	g := &graph.Graph{Name: "if_shapes"}
	g.Inputs = []*graph.Value{graph.Input("x", vec(4))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.AddInitializer(graph.TensorFromFloat32("zero", []int64{}, []float32{0}))
	then := &graph.Graph{Name: "then", Outputs: []*graph.Value{graph.Output("t", vec(4))}}
	then.Nodes = []*graph.Node{graph.NewNode("t_neg", "Neg", []string{"x"}, []string{"t"})}
	els := &graph.Graph{Name: "else", Outputs: []*graph.Value{graph.Output("e", vec(8))}}
	els.Nodes = []*graph.Node{graph.NewNode("e_cat", "Concat", []string{"x", "x"}, []string{"e"}, graph.IntAttr("axis", 0))}
	g.Nodes = []*graph.Node{
		graph.NewNode("sum", "ReduceSum", []string{"x"}, []string{"s"}, graph.IntAttr("keepdims", 0)),
		graph.NewNode("gt", "Greater", []string{"s", "zero"}, []string{"c"}),
		graph.NewNode("if", "If", []string{"c"}, []string{"y"},
			&graph.Attribute{Name: "then_branch", Type: graph.AttrGraph, Graph: then},
			&graph.Attribute{Name: "else_branch", Type: graph.AttrGraph, Graph: els}),
	}
	m, err := graph.FromGraph("if_shapes", g, map[string]int64{"": 13})
	require.NoError(t, err)
	s, err := FromGraph(m, WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	for run, x := range [][]float32{{1, 2, 3, 4}, {1, 2, 3, 5}, {-1, -2, -3, -4}, {2, 2, 2, 2}} {
		if run == 2 {
			// Planned after the first run, with the If as a host step (the else_branch's
			// output is [8]).
			p := s.ExecutionPlans()[0]
			require.True(t, p.Planned, p.Reason)
			require.Zero(t, p.Branched)
			require.Len(t, p.HostSteps, 1)
			assert.Equal(t, "if", p.HostSteps[0].Node)
			assert.Contains(t, p.HostSteps[0].Reason, "its branches are not plan steps: the else_branch's output 0 is float[8] where the traced run's is float[4]")
		}
		outs, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{4}, x)}})
		require.NoError(t, err)
		y := tensor.Float64s(outs[0])
		if x[0] > 0 {
			require.Equal(t, []float64{-float64(x[0]), -float64(x[1]), -float64(x[2]), -float64(x[3])}, y, "run %d", run)
		} else {
			require.Len(t, y, 8, "run %d", run)
		}
	}
}

// mlpThenModel is mlpIfModel with its If replaced by the then-branch's nodes and the
// condition an output of its own (so that the score's nodes still run): the same work without the branch, for BenchmarkMLPIf's comparison.
func mlpThenModel(t testing.TB) *graph.Model {
	gm, err := graph.Load(filepath.FromSlash(mlpIfPath))
	require.NoError(t, err)
	g := gm.Graph
	last := g.Nodes[len(g.Nodes)-1]
	then := last.Attr("then_branch").Graph
	g.Nodes = g.Nodes[:len(g.Nodes)-1]
	for _, w := range then.Initializers {
		g.AddInitializer(w)
	}
	g.Nodes = append(g.Nodes, then.Nodes...)
	g.Nodes = append(g.Nodes, graph.NewNode("out", "Identity", []string{then.Outputs[0].Name}, []string{"y"}))
	// The condition stays an output, so that the score's nodes still run.
	g.Outputs = append(g.Outputs, graph.Output("c", graph.TensorType(graph.Bool, graph.Shape{})))
	out, err := graph.FromGraph("mlp_then", g, map[string]int64{"": 17})
	require.NoError(t, err)
	return out
}

// BenchmarkMLPIf times mlp_if (batch 1, one thread) against the same MLP with its then-branch
// inlined in place of the If: the difference is what the If costs as plan steps (reading
// the condition, the jump, the extra segment).
func BenchmarkMLPIf(b *testing.B) {
	for _, c := range []struct {
		name string
		load func() (*InferenceSession, error)
	}{
		{"if", func() (*InferenceSession, error) {
			return Load(filepath.FromSlash(mlpIfPath), WithExecutionProvider(ProviderHost), WithIntraOpThreads(1))
		}},
		{"inlined", func() (*InferenceSession, error) {
			return FromGraph(mlpThenModel(b), WithExecutionProvider(ProviderHost), WithIntraOpThreads(1))
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, err := c.load()
			require.NoError(b, err)
			defer s.Close()
			rnd := inferRand()
			feeds := []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{1, 64}, randomF32(rnd, 64))}}
			for range 20 {
				outs, err := s.Run(context.Background(), feeds)
				require.NoError(b, err)
				s.Recycle(outs...)
			}
			b.ResetTimer()
			for range b.N {
				outs, err := s.Run(context.Background(), feeds)
				if err != nil {
					b.Fatal(err)
				}
				s.Recycle(outs...)
			}
		})
	}
}

// A traced planned run has one span for the If, saying which branch's steps ran, and spans
// for that branch's nodes only; the untaken branch the first (traced) run evaluates for the
// plan leaves no spans.
func TestIfBranchSpans(t *testing.T) {
	const n = 6
	tp, rec := recordingProvider(t)
	s, err := FromGraph(ifCopyModel(t, n), WithExecutionProvider(ProviderHost), WithTracerProvider(tp))
	require.NoError(t, err)
	defer s.Close()
	tctx, _ := parentContext(t, tp)
	for _, sign := range []float32{1, -1, 1} {
		x := []float32{1, 2, 3, 4, 5, 6}
		for i := range x {
			x[i] *= sign
		}
		_, err := s.Run(tctx, []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{n}, x)}})
		require.NoError(t, err)
	}
	ifs := spansNamed(rec.Ended(), "If")
	require.Len(t, ifs, 3)
	assert.Equal(t, "interpreter", attrOf(ifs[0], exec.AttrExecutor).AsString())
	for i, want := range []string{"", "else_branch", "then_branch"} {
		if i == 0 {
			continue
		}
		assert.Equal(t, "plan", attrOf(ifs[i], exec.AttrExecutor).AsString(), "run %d", i)
		assert.Contains(t, attrOf(ifs[i], exec.AttrReason).AsString(), "runs the "+want+"'s plan steps", "run %d", i)
	}
	assert.Len(t, spansNamed(rec.Ended(), "Neg"), 1, "the else_branch ran once")
	assert.Len(t, spansNamed(rec.Ended(), "Mul"), 2, "the then_branch ran twice")
}
