package session

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

func randomF32(rnd *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = rnd.Float32()*2 - 1
	}
	return v
}

// testRunCtx is a run context for calling op functions directly, on s's engine (nil: none).
func testRunCtx(s *InferenceSession, opset int64) *exec.RunCtx {
	var e *exec.Engine
	if s != nil {
		e = s.eng
	}
	return exec.NewOpRunCtx(e, opset)
}

func inferRand() *rand.Rand { return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())) }

// mlpModel is y = softmax(relu(x·w + b)) for x [N, in] with a symbolic batch dimension.
func mlpModel(t *testing.T, w, b []float32, in, out int) *graph.Model {
	g := &graph.Graph{Name: "mlp"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("N"), graph.DimOf(int64(in))}))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.AddInitializer(graph.TensorFromFloat32("w", []int64{int64(in), int64(out)}, w))
	g.AddInitializer(graph.TensorFromFloat32("b", []int64{int64(out)}, b))
	g.Nodes = []*graph.Node{
		graph.NewNode("mm", "MatMul", []string{"x", "w"}, []string{"h"}),
		graph.NewNode("add", "Add", []string{"h", "b"}, []string{"hb"}),
		graph.NewNode("relu", "Relu", []string{"hb"}, []string{"r"}),
		graph.NewNode("sm", "Softmax", []string{"r"}, []string{"y"}, graph.IntAttr("axis", -1)),
	}
	m, err := graph.FromGraph("mlp", g, map[string]int64{"": 13})
	require.NoError(t, err)
	return m
}

func mlpReference(x, w, b []float32, rows, in, out int) []float32 {
	y := make([]float32, rows*out)
	for r := range rows {
		row := make([]float64, out)
		mx := math.Inf(-1)
		for c := range out {
			s := float64(0)
			for k := range in {
				s += float64(x[r*in+k]) * float64(w[k*out+c])
			}
			row[c] = math.Max(s+float64(b[c]), 0)
			mx = math.Max(mx, row[c])
		}
		sum := 0.0
		for c := range row {
			row[c] = math.Exp(row[c] - mx)
			sum += row[c]
		}
		for c := range row {
			y[r*out+c] = float32(row[c] / sum)
		}
	}
	return y
}

func TestTensorAccessors(t *testing.T) {
	data := []float32{1, 2, 3, 4, 5, 6}
	x, err := tensor.NewTensor([]int64{2, 3}, data)
	require.NoError(t, err)
	assert.Equal(t, graph.Float, x.DType())
	assert.Equal(t, []int64{2, 3}, x.Shape())
	got, err := tensor.TensorOf[float32](x)
	require.NoError(t, err)
	assert.Same(t, &data[0], &got[0], "NewTensor and TensorOf must not copy")
	_, err = tensor.TensorOf[int64](x)
	assert.ErrorContains(t, err, "float")
	_, err = tensor.NewTensor([]int64{4}, data)
	assert.ErrorContains(t, err, "needs 4 elements")
	_, err = tensor.NewTensor([]int64{-1}, []int64{})
	assert.ErrorContains(t, err, "negative")

	assert.Equal(t, graph.Float16, tensor.DTypeOf[tensor.Float16]())
	assert.Equal(t, graph.BFloat16, tensor.DTypeOf[tensor.BFloat16]())
	assert.Equal(t, graph.Uint16, tensor.DTypeOf[uint16]())
	assert.Equal(t, graph.String, tensor.DTypeOf[string]())
	assert.Equal(t, graph.Bool, tensor.DTypeOf[bool]())
	for _, dt := range []tensor.DType{graph.Float, graph.Double, graph.Float16, graph.BFloat16, graph.Int8, graph.Int16,
		graph.Int32, graph.Int64, graph.Uint8, graph.Uint16, graph.Uint32, graph.Uint64, graph.Bool, graph.String} {
		z, err := tensor.Zeros(dt, []int64{3})
		require.NoError(t, err, dt)
		assert.Equal(t, dt, z.DType())
		assert.Equal(t, 3, z.Len())
	}
	assert.InDelta(t, 1.5, float64(tensor.ToFloat16(1.5).Float32()), 0)
	assert.InDelta(t, 1.5, float64(tensor.ToBFloat16(1.5).Float32()), 0)
}

func TestInferenceSessionMLP(t *testing.T) {
	rnd := inferRand()
	const in, out, rows = 24, 10, 5
	w, b := randomF32(rnd, in*out), randomF32(rnd, out)
	s, err := FromGraph(mlpModel(t, w, b, in, out), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()

	ins := s.Inputs()
	require.Len(t, ins, 1)
	assert.Equal(t, "x", ins[0].Name)
	assert.Equal(t, graph.Float, ins[0].DType)
	assert.Equal(t, "N", ins[0].Shape[0].Param)
	assert.Equal(t, int64(in), ins[0].Shape[1].Value)
	require.Len(t, s.Outputs(), 1)
	assert.Equal(t, "y", s.Outputs()[0].Name)
	assert.Equal(t, "mlp", s.ModelMetadata().GraphName)
	assert.Empty(t, s.ExecutionProviderFallbackReport())

	x := randomF32(rnd, rows*in)
	res, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{rows, in}, x)}})
	require.NoError(t, err)
	require.Len(t, res, 1)
	assert.Equal(t, []int64{rows, out}, res[0].Shape())
	got, err := tensor.TensorOf[float32](res[0])
	require.NoError(t, err)
	want := mlpReference(x, w, b, rows, in, out)
	for i := range want {
		assert.InDelta(t, want[i], got[i], 1e-5, "element %d", i)
	}
}

func TestInferenceSessionInputErrors(t *testing.T) {
	rnd := inferRand()
	s, err := FromGraph(mlpModel(t, randomF32(rnd, 8*3), randomF32(rnd, 3), 8, 3), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	good := tensor.MustTensor([]int64{2, 8}, randomF32(rnd, 16))
	cases := []struct {
		name   string
		inputs []tensor.NamedTensor
		msg    string
	}{
		{"wrong name", []tensor.NamedTensor{{Name: "x", Tensor: good}, {Name: "z", Tensor: good}}, `no input named "z"`},
		{"missing", nil, `missing input "x"`},
		{"dtype", []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{2, 8}, make([]float64, 16))}}, `input "x": element type double`},
		{"rank", []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{16}, randomF32(rnd, 16))}}, `input "x": rank 1`},
		{"dim", []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{2, 4}, randomF32(rnd, 8))}}, `input "x": dimension 1 is 4`},
		{"twice", []tensor.NamedTensor{{Name: "x", Tensor: good}, {Name: "x", Tensor: good}}, `input "x" fed twice`},
	}
	for _, c := range cases {
		_, err := s.Run(context.Background(), c.inputs)
		assert.ErrorContains(t, err, c.msg, c.name)
	}
	_, err = s.Run(context.Background(), []tensor.NamedTensor{{Name: "x", Tensor: good}})
	assert.NoError(t, err, "a bad run must leave the session usable")
}

func TestInferenceSessionUnsupportedOp(t *testing.T) {
	g := &graph.Graph{Name: "g"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(1, 1, 4, 4))),
		graph.Input("rois", graph.TensorType(graph.Float, graph.ShapeOf(1, 5)))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.Nodes = []*graph.Node{graph.NewNode("odd_node", "MaxRoiPool", []string{"x", "rois"}, []string{"y"}, graph.IntsAttr("pooled_shape", 2, 2))}
	m, err := graph.FromGraph("g", g, map[string]int64{"": 17})
	require.NoError(t, err)
	_, err = FromGraph(m)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `node "odd_node": operator MaxRoiPool`)
}

func TestInferenceSessionOptions(t *testing.T) {
	rnd := inferRand()
	mk := func() *graph.Model { return mlpModel(t, randomF32(rnd, 4*2), randomF32(rnd, 2), 4, 2) }
	_, err := FromGraph(mk(), WithOption("ep.bogus", "1"))
	assert.ErrorContains(t, err, `unknown session option "ep.bogus"`)
	_, err = FromGraph(mk(), WithOption(OptionEPContextEnable, "yes"))
	assert.ErrorContains(t, err, "ep.context_enable must be 0 or 1")
	_, err = FromGraph(mk(), WithOption(OptionEPContextFilePath, " "))
	assert.ErrorContains(t, err, "ep.context_file_path")
	_, err = FromGraph(mk(), WithOption(OptionEPContextEmbedMode, "2"))
	assert.ErrorContains(t, err, "ep.context_embed_mode")
	_, err = FromGraph(mk(), WithExecutionProvider("tpu"))
	assert.ErrorContains(t, err, `"tpu"`)
	_, err = FromGraph(mk(), WithIntraOpThreads(-1))
	assert.ErrorContains(t, err, "intra-op threads")

	ctxPath := filepath.Join(t.TempDir(), "ctx.onnx")
	s, err := FromGraph(mk(), WithOption(OptionEPContextEnable, "1"), WithOption(OptionEPContextFilePath, ctxPath), WithOption(OptionEPContextEmbedMode, "0"), WithIntraOpThreads(2))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{OptionEPContextEnable: "1", OptionEPContextFilePath: ctxPath, OptionEPContextEmbedMode: "0"}, s.SessionOptions())
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")
	_, err = s.Run(context.Background(), nil)
	assert.ErrorIs(t, err, tensor.ErrClosed)
}

func TestInferenceSessionCUDAFallback(t *testing.T) {
	rnd := inferRand()
	s, err := FromGraph(mlpModel(t, randomF32(rnd, 4*2), randomF32(rnd, 2), 4, 2), WithExecutionProvider(ProviderCUDA))
	require.NoError(t, err)
	defer s.Close()
	if s.Provider() == ProviderCUDA {
		t.Skip("a CUDA device is present: nothing falls back")
	}
	report := s.ExecutionProviderFallbackReport()
	require.Len(t, report, len(s.Graph().Graph.Nodes), "every node of the optimized graph is reported")
	assert.Equal(t, "mm", report[0].Node)
	assert.Equal(t, ProviderHost, report[0].Provider)
	assert.Contains(t, report[0].Reason, "CUDA")
	_, err = s.Run(context.Background(), []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{1, 4}, randomF32(rnd, 4))}})
	assert.NoError(t, err)
}

// The cuda stand-in (OptionCUDAStandIn) places as CUDA does where it is available and runs on a
// discrete host device: the kernel nodes are CUDA's (nothing falls back), the results match.
func TestInferenceSessionCUDAStandIn(t *testing.T) {
	rnd := inferRand()
	const in, out = 6, 3
	w, b := randomF32(rnd, in*out), randomF32(rnd, out)
	s, err := FromGraph(mlpModel(t, w, b, in, out), WithExecutionProvider(ProviderCUDA), WithOption(OptionCUDAStandIn, "1"))
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, ProviderCUDA, s.Provider())
	assert.True(t, s.dev.Discrete(), "the stand-in's device memory is discrete")
	assert.Equal(t, native.BackendHost, s.dev.Backend())
	for _, e := range s.ExecutionProviderFallbackReport() {
		assert.NotEqual(t, "mm", e.Node, "MatMul has a kernel: it runs on the (stand-in) CUDA device")
	}
	for range 3 {
		rows := 1 + rnd.IntN(5)
		x := randomF32(rnd, rows*in)
		res, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{int64(rows), in}, x)}})
		require.NoError(t, err)
		got, err := tensor.TensorOf[float32](res[0])
		require.NoError(t, err)
		for i, v := range mlpReference(x, w, b, rows, in, out) {
			require.InDelta(t, v, got[i], 1e-5, "rows %d, element %d", rows, i)
		}
	}
	_, err = FromGraph(mlpModel(t, w, b, in, out), WithOption(OptionCUDAStandIn, "yes"))
	require.ErrorContains(t, err, OptionCUDAStandIn)
}

func TestInferenceSessionConcurrentRuns(t *testing.T) {
	rnd := inferRand()
	const in, out = 16, 6
	w, b := randomF32(rnd, in*out), randomF32(rnd, out)
	s, err := FromGraph(mlpModel(t, w, b, in, out), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for g := range errs {
		rows := g + 1
		x := randomF32(rnd, rows*in)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				res, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{int64(rows), in}, x)}})
				if err != nil {
					errs[g] = err
					return
				}
				got, _ := tensor.TensorOf[float32](res[0])
				for i, v := range mlpReference(x, w, b, rows, in, out) {
					if math.Abs(float64(v-got[i])) > 1e-5 {
						errs[g] = assert.AnError
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for g, err := range errs {
		assert.NoError(t, err, "goroutine %d", g)
	}
}

// TestKernelOpsMatchHost checks each Loom-backed op against its Go host function on random
// float32 inputs, including broadcasting.
func TestKernelOpsMatchHost(t *testing.T) {
	rnd := inferRand()
	type tc struct {
		op    string
		attrs []*graph.Attribute
		in    [][]int64
	}
	cases := []tc{
		{"Add", nil, [][]int64{{2, 3, 4}, {4}}},
		{"Sub", nil, [][]int64{{2, 1, 4}, {3, 1}}},
		{"Mul", nil, [][]int64{{1, 2, 3, 4}, {2, 1, 1}}},
		{"Div", nil, [][]int64{{5}, {5}}},
		{"Relu", nil, [][]int64{{7, 3}}},
		{"Sigmoid", nil, [][]int64{{9}}},
		{"Tanh", nil, [][]int64{{9}}},
		{"LeakyRelu", []*graph.Attribute{graph.FloatAttr("alpha", 0.3)}, [][]int64{{9}}},
		{"MatMul", nil, [][]int64{{5, 7}, {7, 3}}},
		{"Gemm", []*graph.Attribute{graph.IntAttr("transA", 1), graph.FloatAttr("alpha", 0.5)}, [][]int64{{7, 5}, {7, 3}, {3}}},
		{"Conv", []*graph.Attribute{graph.IntsAttr("pads", 1, 0, 1, 2), graph.IntsAttr("strides", 2, 1), graph.IntAttr("group", 2)}, [][]int64{{2, 4, 6, 5}, {6, 2, 3, 3}, {6}}},
		{"MaxPool", []*graph.Attribute{graph.IntsAttr("kernel_shape", 2, 3), graph.IntsAttr("pads", 0, 1, 0, 1)}, [][]int64{{1, 3, 5, 6}}},
		{"AveragePool", []*graph.Attribute{graph.IntsAttr("kernel_shape", 3, 3), graph.IntsAttr("pads", 1, 1, 1, 1)}, [][]int64{{2, 2, 4, 4}}},
		{"Softmax", []*graph.Attribute{graph.IntAttr("axis", -1)}, [][]int64{{3, 8}}},
		{"LogSoftmax", []*graph.Attribute{graph.IntAttr("axis", -1)}, [][]int64{{3, 8}}},
	}
	rc := testRunCtx(nil, 13)
	sess, err := FromGraph(mlpModel(t, randomF32(rnd, 2), randomF32(rnd, 1), 2, 1), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer sess.Close()
	rc.Eng = sess.eng
	defer rc.Close()
	for _, c := range cases {
		n := graph.NewNode("n", c.op, nil, []string{"y"}, c.attrs...)
		var in []tensor.Tensor
		for _, sh := range c.in {
			in = append(in, tensor.MustTensor(sh, randomF32(rnd, ops.Numel(sh))))
		}
		got, err := exec.KernelRuns[c.op](rc, n, in)
		require.NoError(t, err, c.op)
		want, err := ops.HostOps[c.op](rc, n, in)
		require.NoError(t, err, c.op)
		assert.Equal(t, want[0].Shape(), got[0].Shape(), c.op)
		gv, wv := tensor.Float64s(got[0]), tensor.Float64s(want[0])
		for i := range wv {
			assert.InDelta(t, wv[i], gv[i], 1e-5*(1+math.Abs(wv[i])), "%s element %d", c.op, i)
		}
	}
	assert.Positive(t, rc.Dispatches, "the kernels ran through the run's ModelSession")
}
