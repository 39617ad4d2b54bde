package opt

import (
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/infer"
	"github.com/loomrt/loom/go/graph/refeval"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var rng = rand.New(rand.NewSource(rand.Int63()))

func f32(dims ...int64) graph.Type { return graph.TensorType(graph.Float, graph.ShapeOf(dims...)) }

func randTensor(name string, dims ...int64) *graph.Tensor {
	n := graph.ShapeOf(dims...).NumElements()
	v := make([]float32, n)
	for i := range v {
		v[i] = rng.Float32()*2 - 1
	}
	return graph.TensorFromFloat32(name, dims, v)
}

func positive(name string, dims ...int64) *graph.Tensor {
	t := randTensor(name, dims...)
	v, _ := t.Float32s()
	for i := range v {
		v[i] = float32(math.Abs(float64(v[i]))) + 0.5
	}
	return graph.TensorFromFloat32(name, dims, v)
}

func model(t *testing.T, opset int64, inputs []*graph.Value, outputs []string, nodes []*graph.Node, inits ...*graph.Tensor) *graph.Model {
	t.Helper()
	g := &graph.Graph{Name: "g", Inputs: inputs, Nodes: nodes}
	for _, o := range outputs {
		g.Outputs = append(g.Outputs, graph.Output(o, graph.Type{}))
	}
	for _, in := range inits {
		g.AddInitializer(in)
	}
	m, err := graph.FromGraph("t", g, map[string]int64{"": opset})
	require.NoError(t, err)
	require.NoError(t, m.Check())
	require.NoError(t, infer.Shapes(m))
	return m
}

// clone deep-copies a model through serialization.
func clone(t *testing.T, m *graph.Model) *graph.Model {
	data, err := m.Marshal()
	require.NoError(t, err)
	c, err := graph.LoadBytes(data)
	require.NoError(t, err)
	require.NoError(t, infer.Shapes(c))
	return c
}

// randomInputs draws fresh values for every graph input, of its static shape with symbolic
// dims bound from dims.
func randomInputs(t *testing.T, m *graph.Model, dims map[string]int64) map[string]*refeval.Value {
	in := map[string]*refeval.Value{}
	for _, v := range m.Graph.Inputs {
		if v.Initializer != nil {
			continue
		}
		var shape []int64
		for _, d := range v.Type.Shape {
			if d.Known() {
				shape = append(shape, d.Value)
			} else {
				size, ok := dims[d.Param]
				require.True(t, ok, "no size for dim %q of %s", d.Param, v.Name)
				shape = append(shape, size)
			}
		}
		n := graph.ShapeOf(shape...).NumElements()
		val := &refeval.Value{DType: v.Type.Elem, Dims: shape, Data: make([]float64, n)}
		for i := range val.Data {
			switch v.Type.Elem {
			case graph.Float, graph.Double:
				val.Data[i] = float64(float32(rng.NormFloat64()))
			case graph.Bool:
				val.Data[i] = float64(rng.Intn(2))
			default:
				val.Data[i] = float64(rng.Intn(int(dims["int_max"])))
			}
		}
		in[v.Name] = val
	}
	return in
}

func assertClose(t *testing.T, want, got map[string]*refeval.Value, tol float64) {
	t.Helper()
	require.Equal(t, len(want), len(got))
	for name, w := range want {
		g := got[name]
		require.NotNil(t, g, name)
		require.Equal(t, w.Dims, g.Dims, name)
		for i := range w.Data {
			if math.IsInf(w.Data[i], 0) || math.IsNaN(w.Data[i]) {
				require.Equal(t, math.IsNaN(w.Data[i]), math.IsNaN(g.Data[i]), "%s[%d]", name, i)
				continue
			}
			require.InDelta(t, w.Data[i], g.Data[i], tol*(1+math.Abs(w.Data[i])), "%s[%d]", name, i)
		}
	}
}

// preserves applies fn to a copy of m and checks results on fresh random inputs, returning
// the rewritten model.
func preserves(t *testing.T, m *graph.Model, fn func(*graph.Model) error, dims map[string]int64) *graph.Model {
	t.Helper()
	after := clone(t, m)
	require.NoError(t, fn(after))
	require.NoError(t, after.Check())
	for trial := 0; trial < 3; trial++ {
		in := randomInputs(t, m, dims)
		want, err := refeval.Run(m, in)
		require.NoError(t, err)
		got, err := refeval.Run(after, in)
		require.NoError(t, err)
		assertClose(t, want, got, 1e-4)
	}
	return after
}

func runPass(name string) func(*graph.Model) error {
	return func(m *graph.Model) error {
		for _, p := range Passes() {
			if p.Name == name {
				return Run(m, p)
			}
		}
		panic("no pass " + name)
	}
}

func opCount(m *graph.Model) map[string]int {
	c := map[string]int{}
	m.Graph.Walk(func(g *graph.Graph) {
		for _, n := range g.Nodes {
			c[n.OpType]++
		}
	})
	return c
}

func TestParseLevel(t *testing.T) {
	for _, l := range []Level{LevelDisabled, LevelBasic, LevelExtended, LevelAll} {
		got, err := ParseLevel(l.String())
		require.NoError(t, err)
		assert.Equal(t, l, got)
	}
	_, err := ParseLevel("max")
	assert.Error(t, err)
}

func TestConstantsAndShapeChainFolding(t *testing.T) {
	nodes := []*graph.Node{
		{Name: "c0", OpType: "Constant", Outputs: []string{"idx"}, Attrs: []*graph.Attribute{graph.TensorAttr("value", graph.TensorFromInt64("", nil, []int64{0}))}},
		{Name: "c1", OpType: "Constant", Outputs: []string{"axes"}, Attrs: []*graph.Attribute{graph.TensorAttr("value", graph.TensorFromInt64("", []int64{1}, []int64{0}))}},
		{Name: "c2", OpType: "Constant", Outputs: []string{"minus1"}, Attrs: []*graph.Attribute{graph.TensorAttr("value", graph.TensorFromInt64("", []int64{1}, []int64{-1}))}},
		graph.NewNode("shape", "Shape", []string{"x"}, []string{"s"}),
		graph.NewNode("gather", "Gather", []string{"s", "idx"}, []string{"b"}),
		graph.NewNode("unsq", "Unsqueeze", []string{"b", "axes"}, []string{"b1"}),
		graph.NewNode("cat", "Concat", []string{"b1", "minus1"}, []string{"target"}, graph.IntAttr("axis", 0)),
		graph.NewNode("reshape", "Reshape", []string{"x", "target"}, []string{"y"}),
	}
	m := model(t, 17, []*graph.Value{graph.Input("x", f32(2, 3, 4))}, []string{"y"}, nodes)
	after := preserves(t, m, func(m *graph.Model) error {
		for _, name := range []string{"constant_to_initializer", "constant_folding", "dead_code_elimination"} {
			if err := runPass(name)(m); err != nil {
				return err
			}
		}
		return nil
	}, nil)
	assert.Equal(t, map[string]int{"Reshape": 1}, opCount(after))
	target := after.Graph.Initializers[after.Graph.Nodes[0].Inputs[1]]
	require.NotNil(t, target)
	v, err := target.Int64s()
	require.NoError(t, err)
	assert.Equal(t, []int64{2, -1}, v)
	assert.Equal(t, "tensor(float)[2,12]", after.Graph.Outputs[0].Type.String())
}

func TestIdentityDropoutRemoval(t *testing.T) {
	nodes := []*graph.Node{
		graph.NewNode("id1", "Identity", []string{"x"}, []string{"a"}),
		graph.NewNode("drop", "Dropout", []string{"a"}, []string{"b"}),
		graph.NewNode("relu", "Relu", []string{"b"}, []string{"c"}),
		graph.NewNode("id2", "Identity", []string{"c"}, []string{"y"}),
	}
	m := model(t, 17, []*graph.Value{graph.Input("x", f32(3, 5))}, []string{"y"}, nodes)
	after := preserves(t, m, runPass("identity_elimination"), nil)
	assert.Equal(t, map[string]int{"Relu": 1}, opCount(after))
	assert.Equal(t, "y", after.Graph.Nodes[0].Outputs[0], "the graph output keeps its name")
}

func TestCSEAndDCE(t *testing.T) {
	nodes := []*graph.Node{
		graph.NewNode("r1", "Relu", []string{"x"}, []string{"a"}),
		graph.NewNode("r2", "Relu", []string{"x"}, []string{"b"}),
		graph.NewNode("add", "Add", []string{"a", "b"}, []string{"y"}),
		graph.NewNode("unused", "Neg", []string{"x"}, []string{"dead"}),
	}
	m := model(t, 17, []*graph.Value{graph.Input("x", f32(4))}, []string{"y"}, nodes, randTensor("unused_weight", 3))
	after := preserves(t, m, func(m *graph.Model) error {
		if err := runPass("common_subexpression_elimination")(m); err != nil {
			return err
		}
		return runPass("dead_code_elimination")(m)
	}, nil)
	assert.Equal(t, map[string]int{"Relu": 1, "Add": 1}, opCount(after))
	assert.Empty(t, after.Graph.Initializers)
}

func TestMatMulAddFusion(t *testing.T) {
	m := model(t, 17, []*graph.Value{graph.Input("x", f32(3, 4)), graph.Input("z", f32(2, 3, 4))}, []string{"y", "w"},
		[]*graph.Node{
			graph.NewNode("mm", "MatMul", []string{"x", "B"}, []string{"p"}),
			graph.NewNode("add", "Add", []string{"p", "C"}, []string{"y"}),
			graph.NewNode("mm3", "MatMul", []string{"z", "B"}, []string{"q"}),
			graph.NewNode("add3", "Add", []string{"C", "q"}, []string{"w"}),
		}, randTensor("B", 4, 5), randTensor("C", 5))
	after := preserves(t, m, runPass("matmul_add_fusion"), nil)
	assert.Equal(t, map[string]int{"Gemm": 1, "MatMulAdd": 1}, opCount(after))
}

func TestConvBatchNormAndActivationFusion(t *testing.T) {
	for _, act := range []*graph.Node{
		graph.NewNode("act", "Relu", []string{"bn"}, []string{"y"}),
		graph.NewNode("act", "LeakyRelu", []string{"bn"}, []string{"y"}, graph.FloatAttr("alpha", 0.2)),
		graph.NewNode("act", "Clip", []string{"bn", "lo", "hi"}, []string{"y"}),
		graph.NewNode("act", "HardSigmoid", []string{"bn"}, []string{"y"}),
		graph.NewNode("act", "Sigmoid", []string{"bn"}, []string{"y"}),
	} {
		t.Run(act.OpType, func(t *testing.T) {
			m := model(t, 17, []*graph.Value{graph.Input("x", f32(2, 3, 7, 6))}, []string{"y"},
				[]*graph.Node{
					graph.NewNode("conv", "Conv", []string{"x", "W", "B"}, []string{"c"}, graph.IntsAttr("pads", 1, 0, 1, 2), graph.IntsAttr("strides", 2, 1)),
					graph.NewNode("bnorm", "BatchNormalization", []string{"c", "scale", "bias", "mean", "var"}, []string{"bn"}),
					act,
				}, randTensor("W", 4, 3, 3, 3), randTensor("B", 4), randTensor("scale", 4), randTensor("bias", 4),
				randTensor("mean", 4), positive("var", 4), graph.TensorFromFloat32("lo", nil, []float32{-0.3}), graph.TensorFromFloat32("hi", nil, []float32{0.4}))
			after := preserves(t, m, func(m *graph.Model) error {
				if err := runPass("conv_batchnorm_fusion")(m); err != nil {
					return err
				}
				return runPass("conv_activation_fusion")(m)
			}, nil)
			assert.Equal(t, map[string]int{"FusedConv": 1}, opCount(after))
		})
	}
}

func layerNormNodes(withAffine bool, opset int64) []*graph.Node {
	axes := []*graph.Attribute{graph.IntsAttr("axes", -1)}
	meanIn, varIn := []string{"x"}, []string{"sq"}
	if opset >= 18 {
		axes = nil
		meanIn, varIn = []string{"x", "axes"}, []string{"sq", "axes"}
	}
	nodes := []*graph.Node{
		graph.NewNode("mean", "ReduceMean", meanIn, []string{"mu"}, axes...),
		graph.NewNode("sub", "Sub", []string{"x", "mu"}, []string{"d"}),
		graph.NewNode("pow", "Pow", []string{"d", "two"}, []string{"sq"}),
		graph.NewNode("var", "ReduceMean", varIn, []string{"v"}, axes...),
		graph.NewNode("addeps", "Add", []string{"v", "eps"}, []string{"ve"}),
		graph.NewNode("sqrt", "Sqrt", []string{"ve"}, []string{"sd"}),
		graph.NewNode("div", "Div", []string{"d", "sd"}, []string{"n"}),
	}
	if withAffine {
		nodes = append(nodes, graph.NewNode("mul", "Mul", []string{"n", "gamma"}, []string{"ng"}),
			graph.NewNode("addb", "Add", []string{"ng", "beta"}, []string{"y"}))
	} else {
		nodes = append(nodes, graph.NewNode("id", "Neg", []string{"n"}, []string{"y"}))
	}
	return nodes
}

func TestLayerNormFusion(t *testing.T) {
	for _, tc := range []struct {
		opset  int64
		affine bool
		domain string
	}{{17, true, ""}, {13, true, graph.LoomDomain}, {18, false, ""}} {
		m := model(t, tc.opset, []*graph.Value{graph.Input("x", f32(2, 5, 8))}, []string{"y"}, layerNormNodes(tc.affine, tc.opset),
			graph.TensorFromFloat32("two", nil, []float32{2}), graph.TensorFromFloat32("eps", nil, []float32{1e-5}),
			randTensor("gamma", 8), randTensor("beta", 8), graph.TensorFromInt64("axes", []int64{1}, []int64{-1}))
		after := preserves(t, m, runPass("layernorm_fusion"), nil)
		var ln *graph.Node
		for _, n := range after.Graph.Nodes {
			if n.OpType == "LayerNormalization" {
				ln = n
			}
		}
		require.NotNil(t, ln, "opset %d", tc.opset)
		assert.Equal(t, tc.domain, ln.Domain)
		want := 1
		if !tc.affine {
			want = 2
		}
		assert.Len(t, after.Graph.Nodes, want)
	}
}

func TestGeluFusion(t *testing.T) {
	forms := [][]*graph.Node{
		{graph.NewNode("div", "Div", []string{"x", "sqrt2"}, []string{"a"}), graph.NewNode("erf", "Erf", []string{"a"}, []string{"e"}),
			graph.NewNode("add", "Add", []string{"e", "one"}, []string{"p"}), graph.NewNode("m1", "Mul", []string{"x", "p"}, []string{"q"}),
			graph.NewNode("m2", "Mul", []string{"q", "half"}, []string{"y"})},
		{graph.NewNode("mul", "Mul", []string{"x", "invsqrt2"}, []string{"a"}), graph.NewNode("erf", "Erf", []string{"a"}, []string{"e"}),
			graph.NewNode("add", "Add", []string{"one", "e"}, []string{"p"}), graph.NewNode("h", "Mul", []string{"x", "half"}, []string{"hx"}),
			graph.NewNode("m1", "Mul", []string{"hx", "p"}, []string{"y"})},
		{graph.NewNode("div", "Div", []string{"x", "sqrt2"}, []string{"a"}), graph.NewNode("erf", "Erf", []string{"a"}, []string{"e"}),
			graph.NewNode("add", "Add", []string{"e", "one"}, []string{"p"}), graph.NewNode("m1", "Mul", []string{"p", "half"}, []string{"q"}),
			graph.NewNode("m2", "Mul", []string{"x", "q"}, []string{"y"})},
	}
	for i, nodes := range forms {
		m := model(t, 17, []*graph.Value{graph.Input("x", f32(3, 7))}, []string{"y"}, nodes,
			graph.TensorFromFloat32("sqrt2", nil, []float32{float32(math.Sqrt2)}), graph.TensorFromFloat32("invsqrt2", nil, []float32{float32(1 / math.Sqrt2)}),
			graph.TensorFromFloat32("one", nil, []float32{1}), graph.TensorFromFloat32("half", nil, []float32{0.5}))
		after := preserves(t, m, runPass("gelu_fusion"), nil)
		assert.Equal(t, map[string]int{"Gelu": 1}, opCount(after), "form %d", i)
	}
}

func TestAttentionFusion(t *testing.T) {
	base := func(maskNode *graph.Node, maskOut string) []*graph.Node {
		nodes := []*graph.Node{
			graph.NewNode("kt", "Transpose", []string{"k"}, []string{"kt"}, graph.IntsAttr("perm", 0, 1, 3, 2)),
			graph.NewNode("qk", "MatMul", []string{"q", "kt"}, []string{"s"}),
			graph.NewNode("scale", "Div", []string{"s", "dk"}, []string{"ss"}),
		}
		smIn := "ss"
		if maskNode != nil {
			nodes = append(nodes, maskNode)
			smIn = maskOut
		}
		return append(nodes, graph.NewNode("sm", "Softmax", []string{smIn}, []string{"p"}, graph.IntAttr("axis", -1)),
			graph.NewNode("pv", "MatMul", []string{"p", "v"}, []string{"y"}))
	}
	inputs := func() []*graph.Value {
		return []*graph.Value{graph.Input("q", f32(2, 4, 5, 8)), graph.Input("k", f32(2, 4, 6, 8)), graph.Input("v", f32(2, 4, 6, 8)),
			graph.Input("bias", f32(1, 1, 5, 6)), graph.Input("keep", graph.TensorType(graph.Bool, graph.ShapeOf(5, 6)))}
	}
	for _, tc := range []struct {
		name string
		mask *graph.Node
		out  string
	}{
		{"nomask", nil, ""},
		{"additive", graph.NewNode("mask", "Add", []string{"ss", "bias"}, []string{"ms"}), "ms"},
		{"where-fill", graph.NewNode("mask", "Where", []string{"keep", "neginf", "ss"}, []string{"ms"}), "ms"},
		{"where-keep", graph.NewNode("mask", "Where", []string{"keep", "ss", "neginf"}, []string{"ms"}), "ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := model(t, 17, inputs(), []string{"y"}, base(tc.mask, tc.out),
				graph.TensorFromFloat32("dk", nil, []float32{float32(math.Sqrt(8))}), graph.TensorFromFloat32("neginf", nil, []float32{-1e9}))
			after := preserves(t, m, runPass("attention_fusion"), nil)
			assert.Equal(t, map[string]int{"Attention": 1}, opCount(after), "the Attention reads K, not a transposed copy")
			assert.Equal(t, int64(0), after.Graph.Nodes[0].AttrInt("k_transposed", -1))
		})
	}
	// A Transpose that is not a swap of the last two axes, or that something else reads too,
	// stays, and the Attention reads its output as Kᵀ.
	for _, tc := range []struct {
		name    string
		perm    []int64
		outputs []string
	}{
		{"other perm", []int64{1, 0, 3, 2}, []string{"y"}},
		{"read twice", []int64{0, 1, 3, 2}, []string{"y", "kt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := base(nil, "")
			nodes[0] = graph.NewNode("kt", "Transpose", []string{"k"}, []string{"kt"}, graph.IntsAttr("perm", tc.perm...))
			in := inputs()
			if tc.perm[0] == 1 { // q [4, 2, 5, 8] against kᵀ [4, 2, 8, 6]
				in[0] = graph.Input("q", f32(4, 2, 5, 8))
				in[2] = graph.Input("v", f32(4, 2, 6, 8))
			}
			m := model(t, 17, in, tc.outputs, nodes, graph.TensorFromFloat32("dk", nil, []float32{float32(math.Sqrt(8))}))
			after := preserves(t, m, runPass("attention_fusion"), nil)
			assert.Equal(t, map[string]int{"Transpose": 1, "Attention": 1}, opCount(after))
			for _, n := range after.Graph.Nodes {
				if n.OpType == "Attention" {
					assert.Equal(t, int64(1), n.AttrInt("k_transposed", -1))
				}
			}
		})
	}
}

func TestLevelsSelectPasses(t *testing.T) {
	build := func() *graph.Model {
		return model(t, 17, []*graph.Value{graph.Input("x", f32(3, 4))}, []string{"y"},
			[]*graph.Node{graph.NewNode("mm", "MatMul", []string{"x", "B"}, []string{"p"}), graph.NewNode("add", "Add", []string{"p", "C"}, []string{"y"})},
			randTensor("B", 4, 5), randTensor("C", 5))
	}
	m := build()
	require.NoError(t, Optimize(m, LevelBasic))
	assert.Equal(t, map[string]int{"MatMul": 1, "Add": 1}, opCount(m))
	for _, p := range m.Passes {
		assert.NotEqual(t, "matmul_add_fusion", p.Name)
	}
	m = build()
	require.NoError(t, Optimize(m, LevelExtended))
	assert.Equal(t, map[string]int{"Gemm": 1}, opCount(m))
	m = build()
	require.NoError(t, Optimize(m, LevelDisabled))
	// Only the lowerings run at LevelDisabled, and they change nothing here.
	require.Len(t, m.Passes, 1)
	assert.Equal(t, graph.PassResult{Name: "flex_attention_expansion", NodesBefore: 2, NodesAfter: 2}, m.Passes[0])
}

// referenceModel loads a model from shared/models when present.
func referenceModel(t *testing.T, name string) *graph.Model {
	// The small generated models are committed in go/session/testdata/models; the real ones are
	// fetched by tools/models/fetch.sh into $LOOM_MODELS_DIR (default ~/.cache/loom-models).
	fetched := os.Getenv("LOOM_MODELS_DIR")
	if home, err := os.UserHomeDir(); fetched == "" && err == nil {
		fetched = filepath.Join(home, ".cache", "loom-models")
	}
	file := name
	if name == "mnist.onnx" {
		file = filepath.Join("mnist", "model.onnx")
	}
	for _, dir := range []string{"../../session/testdata/models", fetched, os.Getenv("LOOM_ONNX_MODELS")} {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, file)
		if _, err := os.Stat(p); err == nil {
			m, err := graph.Load(p)
			require.NoError(t, err)
			t.Cleanup(func() { m.Close() })
			require.NoError(t, infer.Shapes(m))
			return m
		}
	}
	t.Skipf("%s not found (go/session/testdata/models, tools/models/fetch.sh, or LOOM_ONNX_MODELS)", name)
	return nil
}

func TestOptimizeReferenceModels(t *testing.T) {
	for _, tc := range []struct {
		file string
		dims map[string]int64
		want []string
		// absent: ops the passes must leave none of.
		absent []string
	}{
		{"tiny_encoder.onnx", map[string]int64{"B": 2, "T": 5}, []string{"LayerNormalization", "Attention", "MatMulAdd"}, nil},
		// GELU fused, then moved into the MLP's matrix product.
		{"tiny_gpt_kv.onnx", map[string]int64{"B": 1, "T": 3, "S": 2, "int_max": 512}, []string{"LayerNormalization", "MatMulAdd", "Attention"}, []string{"Gelu", "Erf", "Tanh"}},
		// GELU in tanh form (GPT-2's) and erf form (BERT's), both moved into a MatMulAdd.
		{"tiny_gpt2_step.onnx", map[string]int64{"past_len": 3, "int_max": 8}, []string{"LayerNormalization", "MatMulAdd"}, []string{"Gelu", "Tanh", "Pow"}},
		{"tiny_bert.onnx", map[string]int64{"seq": 5, "int_max": 8}, []string{"LayerNormalization", "MatMulAdd"}, []string{"Gelu", "Erf"}},
		// CNNs, used when LOOM_ONNX_MODELS holds them (see shared/notes/data.md for the packages).
		{"mnist.onnx", nil, []string{"FusedConv", "Gemm"}, nil},
		{"ch_PP-OCRv4_rec_infer.onnx", map[string]int64{"p2o.DynamicDimension.0": 1, "p2o.DynamicDimension.1": 16},
			[]string{"FusedConv", "LayerNormalization", "MatMulAdd"},
			// Conv, a scalar scale and shift, hard swish, another scale and shift: one FusedConv.
			[]string{"Clip", "Div", "HardSwish", "BatchNormalization"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m := referenceModel(t, tc.file)
			before := m.Graph.NodeCount()
			after := preserves(t, m, func(m *graph.Model) error { return Optimize(m, LevelAll) }, tc.dims)
			ops := opCount(after)
			for _, op := range tc.want {
				assert.Positive(t, ops[op], "%s not fused; ops %v", op, ops)
			}
			for _, op := range tc.absent {
				assert.Zero(t, ops[op], "%s left; ops %v", op, ops)
			}
			t.Logf("%s: %d nodes before, %d after; ops %v", tc.file, before, after.Graph.NodeCount(), ops)
		})
	}
}

func TestConvAddFusion(t *testing.T) {
	for _, bias := range []*graph.Tensor{randTensor("c", 4, 1, 1), randTensor("c", 1, 4, 1, 1), randTensor("c", 1)} {
		m := model(t, 17, []*graph.Value{graph.Input("x", f32(1, 3, 5, 5))}, []string{"y"},
			[]*graph.Node{
				graph.NewNode("conv", "Conv", []string{"x", "W", "B"}, []string{"a"}, graph.StringAttr("auto_pad", "SAME_UPPER"), graph.IntsAttr("strides", 2, 2)),
				graph.NewNode("add", "Add", []string{"c", "a"}, []string{"y"}),
			}, randTensor("W", 4, 3, 2, 2), randTensor("B", 4), bias)
		after := preserves(t, m, runPass("conv_add_fusion"), nil)
		assert.Equal(t, map[string]int{"Conv": 1}, opCount(after), "bias dims %v", bias.Dims)
	}
	// A bias along the last axis would change the result's layout: no fusion.
	m := model(t, 17, []*graph.Value{graph.Input("x", f32(1, 3, 4, 4))}, []string{"y"},
		[]*graph.Node{graph.NewNode("conv", "Conv", []string{"x", "W"}, []string{"a"}), graph.NewNode("add", "Add", []string{"a", "c"}, []string{"y"})},
		randTensor("W", 4, 3, 1, 1), randTensor("c", 4))
	after := preserves(t, m, runPass("conv_add_fusion"), nil)
	assert.Equal(t, map[string]int{"Conv": 1, "Add": 1}, opCount(after))
}
