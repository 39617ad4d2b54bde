package session

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/opt"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops/nn"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// fusedVsUnfused builds a graph twice with build, runs it unoptimized and fully optimized on
// the same fresh random inputs, requires that the optimizer made the fused op (of
// graph.LoomDomain) and that both agree.
func fusedVsUnfused(t *testing.T, fusedOp string, build func() *graph.Model, feeds []tensor.NamedTensor) {
	t.Helper()
	var outs [2][]tensor.Tensor
	for i, level := range []opt.Level{opt.LevelDisabled, opt.LevelAll} {
		s, err := FromGraph(build(), WithExecutionProvider(ProviderHost), WithOptimizationLevel(level))
		require.NoError(t, err)
		defer func() { require.NoError(t, s.Close()) }()
		if level == opt.LevelAll {
			found := false
			for _, n := range s.Graph().Graph.Nodes {
				found = found || (n.Domain == graph.LoomDomain && n.OpType == fusedOp)
			}
			require.True(t, found, "the optimizer made no %s", fusedOp)
		}
		outs[i], err = s.Run(context.Background(), feeds)
		require.NoError(t, err)
	}
	want, got := tensor.Float64s(outs[0][0]), tensor.Float64s(outs[1][0])
	require.Equal(t, outs[0][0].Shape(), outs[1][0].Shape())
	for i := range want {
		assert.InDelta(t, want[i], got[i], 1e-5*(1+math.Abs(want[i])), "element %d", i)
	}
}

func TestFusedConvActivations(t *testing.T) {
	rnd := inferRand()
	scalar := func(name string, v float32) *graph.Tensor {
		return graph.TensorFromFloat32(name, []int64{}, []float32{v})
	}
	cases := []struct {
		act   string
		attrs []*graph.Attribute
		extra []string // further inputs of the activation (Clip's min and max)
	}{
		{act: "Relu"},
		{act: "Sigmoid"},
		{act: "Tanh"},
		{act: "LeakyRelu", attrs: []*graph.Attribute{graph.FloatAttr("alpha", 0.2)}},
		{act: "HardSigmoid", attrs: []*graph.Attribute{graph.FloatAttr("alpha", 0.3), graph.FloatAttr("beta", 0.4)}},
		{act: "Clip", extra: []string{"lo", "hi"}},
	}
	w, b := randomF32(rnd, 4*3*3*3), randomF32(rnd, 4)
	x := tensor.MustTensor([]int64{2, 3, 7, 6}, randomF32(rnd, 2*3*7*6))
	for _, c := range cases {
		t.Run(c.act, func(t *testing.T) {
			build := func() *graph.Model {
				g := &graph.Graph{Name: "conv_" + c.act}
				g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(2, 3, 7, 6)))}
				g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
				g.AddInitializer(graph.TensorFromFloat32("w", []int64{4, 3, 3, 3}, w))
				g.AddInitializer(graph.TensorFromFloat32("b", []int64{4}, b))
				g.AddInitializer(scalar("lo", -0.25))
				g.AddInitializer(scalar("hi", 0.5))
				g.Nodes = []*graph.Node{
					graph.NewNode("conv", "Conv", []string{"x", "w", "b"}, []string{"c"}, graph.IntsAttr("pads", 1, 0, 1, 2)),
					graph.NewNode("act", c.act, append([]string{"c"}, c.extra...), []string{"y"}, c.attrs...),
				}
				m, err := graph.FromGraph(g.Name, g, map[string]int64{"": 13})
				require.NoError(t, err)
				return m
			}
			fusedVsUnfused(t, "FusedConv", build, []tensor.NamedTensor{{Name: "x", Tensor: x}})
		})
	}
}

func TestLoomAttentionMaskModes(t *testing.T) {
	rnd := inferRand()
	const b, h, tq, tk, d, dv = 2, 3, 5, 6, 8, 4
	q := tensor.MustTensor([]int64{b, h, tq, d}, randomF32(rnd, b*h*tq*d))
	k := tensor.MustTensor([]int64{b, h, d, tk}, randomF32(rnd, b*h*d*tk))
	v := tensor.MustTensor([]int64{b, h, tk, dv}, randomF32(rnd, b*h*tk*dv))
	addMask := tensor.MustTensor([]int64{1, 1, tq, tk}, randomF32(rnd, tq*tk))
	cond := make([]bool, tq*tk)
	for i := range cond {
		cond[i] = rnd.IntN(3) != 0
	}
	boolMask := tensor.MustTensor([]int64{tq, tk}, cond)
	for _, mode := range []string{"none", "add", "keep_where_true", "fill_where_true"} {
		t.Run(mode, func(t *testing.T) {
			feeds := []tensor.NamedTensor{{Name: "q", Tensor: q}, {Name: "k", Tensor: k}, {Name: "v", Tensor: v}}
			build := func() *graph.Model {
				g := &graph.Graph{Name: "attention_" + mode}
				g.Inputs = []*graph.Value{
					graph.Input("q", graph.TensorType(graph.Float, graph.ShapeOf(b, h, tq, d))),
					graph.Input("k", graph.TensorType(graph.Float, graph.ShapeOf(b, h, d, tk))),
					graph.Input("v", graph.TensorType(graph.Float, graph.ShapeOf(b, h, tk, dv))),
				}
				g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
				g.AddInitializer(graph.TensorFromFloat32("root_d", []int64{}, []float32{float32(math.Sqrt(d))}))
				g.AddInitializer(graph.TensorFromFloat32("fill", []int64{}, []float32{-1e4}))
				g.Nodes = []*graph.Node{
					graph.NewNode("qk", "MatMul", []string{"q", "k"}, []string{"s"}),
					graph.NewNode("scale", "Div", []string{"s", "root_d"}, []string{"ss"}),
				}
				scores := "ss"
				switch mode {
				case "add":
					g.Inputs = append(g.Inputs, graph.Input("mask", graph.TensorType(graph.Float, graph.ShapeOf(1, 1, tq, tk))))
					g.Nodes = append(g.Nodes, graph.NewNode("mask", "Add", []string{"ss", "mask"}, []string{"sm"}))
					scores = "sm"
				case "keep_where_true", "fill_where_true":
					g.Inputs = append(g.Inputs, graph.Input("mask", graph.TensorType(graph.Bool, graph.ShapeOf(tq, tk))))
					args := []string{"mask", "ss", "fill"}
					if mode == "fill_where_true" {
						args = []string{"mask", "fill", "ss"}
					}
					g.Nodes = append(g.Nodes, graph.NewNode("mask", "Where", args, []string{"sm"}))
					scores = "sm"
				}
				g.Nodes = append(g.Nodes,
					graph.NewNode("softmax", "Softmax", []string{scores}, []string{"p"}, graph.IntAttr("axis", -1)),
					graph.NewNode("pv", "MatMul", []string{"p", "v"}, []string{"y"}))
				m, err := graph.FromGraph(g.Name, g, map[string]int64{"": 13})
				require.NoError(t, err)
				return m
			}
			switch mode {
			case "add":
				feeds = append(feeds, tensor.NamedTensor{Name: "mask", Tensor: addMask})
			case "keep_where_true", "fill_where_true":
				feeds = append(feeds, tensor.NamedTensor{Name: "mask", Tensor: boolMask})
			}
			fusedVsUnfused(t, "Attention", build, feeds)
		})
	}
}

func TestGeluApproximations(t *testing.T) {
	// Gelu is a kernel op (ops_kernels_norm.go): the run needs a session for its device.
	rc := testRunCtx(kernelCheckSession(t), 20)
	defer rc.Close()
	x := tensor.MustTensor([]int64{5}, []float32{-3, -0.5, 0, 0.7, 2.5})
	for _, c := range []struct {
		approximate string
		f           func(float64) float64
	}{
		{"none", func(v float64) float64 { return v * 0.5 * math.Erfc(-v/math.Sqrt2) }},
		{"tanh", func(v float64) float64 {
			return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*math.Pow(v, 3))))
		}},
	} {
		n := graph.NewNode("g", "Gelu", []string{"x"}, []string{"y"}, graph.StringAttr("approximate", c.approximate))
		out, err := exec.KernelRuns[graph.LoomDomain+":Gelu"](rc, n, []tensor.Tensor{x})
		require.NoError(t, err)
		got := tensor.Float64s(out[0])
		for i, v := range tensor.Float64s(x) {
			assert.InDelta(t, c.f(v), got[i], 1e-6, fmt.Sprintf("%s at %v", c.approximate, v))
		}
	}
	_, err := exec.KernelRuns[graph.LoomDomain+":Gelu"](rc, graph.NewNode("g", "Gelu", []string{"x"}, []string{"y"}, graph.StringAttr("approximate", "cubic")), []tensor.Tensor{x})
	require.ErrorContains(t, err, "cubic")
}

// A FusedConv without an activation (only an output scale and shift, as the output affine
// fusion can leave one) runs on the host as Conv, then scale·y + shift.
func TestFusedConvHostWithoutActivation(t *testing.T) {
	rnd := inferRand()
	x := tensor.MustTensor([]int64{1, 2, 5, 5}, randomF32(rnd, 50))
	w := tensor.MustTensor([]int64{3, 2, 3, 3}, randomF32(rnd, 54))
	b := tensor.MustTensor([]int64{3}, randomF32(rnd, 3))
	conv := graph.NewNode("c", "Conv", []string{"x", "w", "b"}, []string{"y"}, graph.IntsAttr("pads", 1, 1, 1, 1))
	fused := graph.NewNode("c", "FusedConv", []string{"x", "w", "b"}, []string{"y"}, graph.IntsAttr("pads", 1, 1, 1, 1),
		graph.FloatAttr("output_scale", 0.5), graph.FloatAttr("output_shift", -2))
	fused.Domain = graph.LoomDomain
	rc := testRunCtx(kernelCheckSession(t), 13)
	defer rc.Close()
	want, err := exec.KernelRuns["Conv"](rc, conv, []tensor.Tensor{x, w, b})
	require.NoError(t, err)
	got, err := nn.FusedConvHost(rc, fused, []tensor.Tensor{x, w, b})
	require.NoError(t, err)
	for i, v := range want[0].Data().([]float32) {
		require.InDelta(t, 0.5*v-2, got[0].Data().([]float32)[i], 1e-5, "element %d", i)
	}
}
