package session

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/nn"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// genericCase is one op over shapes the corpus did not record.
type genericCase struct {
	name   string
	node   *graph.Node
	opset  int64
	in     []tensor.Tensor
	static []int
	host   ops.OpFunc
}

// notShippedHere says whether the planner's own choice for c is a kernel this binary does not
// ship (so that the case exercises the shape-generic re-plan).
func notShippedHere(t *testing.T, s *InferenceSession, c genericCase) bool {
	infos := ops.InfosOf(c.in)
	for _, i := range c.static {
		infos[i].Static = c.in[i]
	}
	p, reason, err := ops.KernelPlanners[ops.PlannerKey(c.node)](c.node, c.opset, infos)
	require.NoError(t, err)
	require.NotNil(t, p, reason)
	comp, err := s.eng.Ctx.Compiler()
	require.NoError(t, err)
	for _, call := range p.Calls {
		src, err := exec.SourceOf(call.File, call.Symbol, call.Config)
		require.NoError(t, err)
		if exec.LookupShipped(src, comp.Target) == nil && exec.LookupShippedBelow(src, comp.Target) == nil {
			return true
		}
	}
	return false
}

// TestShapeGenericKernelsWithoutACompiler runs matrix products over random shapes the corpus
// did not record with no C compiler: each runs as Loom kernels (the shape-generic shipped
// variants, in the interpreter and in the compiled run plan), never as its host function, and
// matches the host function on fresh random inputs.
func TestShapeGenericKernelsWithoutACompiler(t *testing.T) {
	t.Setenv("CC", filepath.Join(t.TempDir(), "no-cc"))
	t.Setenv("LOOM_CACHE_DIR", t.TempDir())
	rnd := inferRand()
	f32 := func(shape ...int64) tensor.Tensor {
		return tensor.MustTensor(shape, randomF32(rnd, ops.Numel(shape)))
	}
	dim := func(lo, hi int) int64 { return int64(lo + rand.IntN(hi-lo+1)) }
	var cases []genericCase
	matmul := graph.NewNode("n", "MatMul", nil, []string{"y"})
	cases = append(cases,
		genericCase{"matmul_37x53x29", matmul, 18, []tensor.Tensor{f32(37, 53), f32(53, 29)}, nil, ops.HostOps["MatMul"]},
		genericCase{"matmul_3x5x1", matmul, 18, []tensor.Tensor{f32(3, 5), f32(5, 1)}, nil, ops.HostOps["MatMul"]},
		genericCase{"matmul_static_b_67x71x13", matmul, 18, []tensor.Tensor{f32(67, 71), f32(71, 13)}, []int{1}, ops.HostOps["MatMul"]},
	)
	for i := range 4 {
		m, k, n := dim(1, 70), dim(1, 90), dim(1, 70)
		cases = append(cases,
			genericCase{fmt.Sprintf("matmul_%dx%dx%d", m, k, n), matmul, 18, []tensor.Tensor{f32(m, k), f32(k, n)}, nil, ops.HostOps["MatMul"]},
			genericCase{fmt.Sprintf("matmul_batched_%d_%dx%dx%d", i+2, m, k, n), matmul, 18, []tensor.Tensor{f32(int64(i+2), m, k), f32(k, n)}, nil, ops.HostOps["MatMul"]},
			genericCase{fmt.Sprintf("matmul_bmm_%d_%dx%dx%d", i+2, m, k, n), matmul, 18, []tensor.Tensor{f32(int64(i+2), m, k), f32(int64(i+2), k, n)}, nil, ops.HostOps["MatMul"]},
		)
		for _, tr := range [][2]int64{{0, 0}, {0, 1}, {1, 0}, {1, 1}} {
			gemm := graph.NewNode("n", "Gemm", nil, []string{"y"}, graph.IntAttr("transA", tr[0]), graph.IntAttr("transB", tr[1]),
				graph.FloatAttr("alpha", 0.7), graph.FloatAttr("beta", 1.3))
			as, bs := []int64{m, k}, []int64{k, n}
			if tr[0] == 1 {
				as = []int64{k, m}
			}
			if tr[1] == 1 {
				bs = []int64{n, k}
			}
			cs := [][]int64{{m, n}, {n}, {m, 1}}[i%3]
			cases = append(cases, genericCase{fmt.Sprintf("gemm_t%d%d_%dx%dx%d_c%v", tr[0], tr[1], m, k, n, cs), gemm, 13,
				[]tensor.Tensor{f32(as...), f32(bs...), f32(cs...)}, nil, ops.HostOps["Gemm"]})
		}
	}
	// 1x1 convolutions are matrix products (with weights known to the plan: a packed A).
	conv := graph.NewNode("n", "Conv", nil, []string{"y"})
	cases = append(cases,
		genericCase{"conv1x1_static_w_2x70x9x11_to_31", conv, 17, []tensor.Tensor{f32(2, 70, 9, 11), f32(31, 70, 1, 1), f32(31)}, []int{1, 2}, ops.HostOps["Conv"]},
		genericCase{"conv1x1_3x13x7x5_to_6", conv, 17, []tensor.Tensor{f32(3, 13, 7, 5), f32(6, 13, 1, 1)}, nil, ops.HostOps["Conv"]},
	)
	fused := graph.NewNode("n", "FusedConv", nil, []string{"y"}, graph.StringAttr("activation", "Relu"))
	fused.Domain = graph.LoomDomain
	cases = append(cases, genericCase{"fusedconv1x1_relu_1x75x6x13_to_19", fused, 17, []tensor.Tensor{f32(1, 75, 6, 13), f32(19, 75, 1, 1), f32(19)}, []int{1, 2}, nn.FusedConvHost})

	// Convolutions with odd extents, strides, dilations, padding and groups.
	for i := range 4 {
		kh, kw := dim(1, 4), dim(2, 5)
		sh, sw := dim(1, 2), dim(1, 3)
		dh, dw := dim(1, 2), dim(1, 2)
		g := []int64{1, 1, 3, 2}[i]
		cin, cout := g*dim(1, 5), g*dim(1, 6)
		h, w := dim(int(kh*dh), int(kh*dh)+13), dim(int(kw*dw), int(kw*dw)+17)
		node := graph.NewNode("n", "Conv", nil, []string{"y"}, graph.IntsAttr("kernel_shape", kh, kw), graph.IntsAttr("strides", sh, sw),
			graph.IntsAttr("dilations", dh, dw), graph.IntsAttr("pads", int64(i%2), dim(0, 2), dim(0, 1), int64(i%3)), graph.IntAttr("group", g))
		in := []tensor.Tensor{f32(dim(1, 2), cin, h, w), f32(cout, cin/g, kh, kw)}
		if i%2 == 0 {
			in = append(in, f32(cout))
		}
		cases = append(cases, genericCase{fmt.Sprintf("conv_k%dx%d_s%dx%d_d%dx%d_g%d_%v", kh, kw, sh, sw, dh, dw, g, in[0].Dims()), node, 17, in, []int{1}, ops.HostOps["Conv"]})
	}
	conv1d := graph.NewNode("n", "Conv", nil, []string{"y"}, graph.IntsAttr("strides", 3), graph.IntsAttr("pads", 2, 1))
	cases = append(cases, genericCase{"conv1d_k7_s3_2x5x61", conv1d, 17, []tensor.Tensor{f32(2, 5, 61), f32(7, 5, 7), f32(7)}, nil, ops.HostOps["Conv"]})
	// Every epilogue (gemm_nn's ACT) the generic tiles ship, against the host function.
	for _, act := range genericActivations {
		fusedK := graph.NewNode("n", "FusedConv", nil, []string{"y"}, graph.StringAttr("activation", act),
			&graph.Attribute{Name: "activation_params", Type: graph.AttrFloats, Floats: []float32{0.3, 0.4}}, graph.IntsAttr("pads", 1, 1, 1, 1))
		fusedK.Domain = graph.LoomDomain
		cases = append(cases, genericCase{"fusedconv_" + act + "_3x3_1x6x11x13_to_5", fusedK, 17, []tensor.Tensor{f32(1, 6, 11, 13), f32(5, 6, 3, 3), f32(5)}, []int{1, 2}, nn.FusedConvHost})
	}
	// Pow by a tensor exponent (elementwise.loom's binary, OP 6), broadcast; positive bases.
	pos := func(shape ...int64) tensor.Tensor {
		v := randomF32(rnd, ops.Numel(shape))
		for i := range v {
			v[i] = float32(math.Abs(float64(v[i]))) + 0.1
		}
		return tensor.MustTensor(shape, v)
	}
	pow := graph.NewNode("n", "Pow", nil, []string{"y"})
	cases = append(cases, genericCase{"pow_tensor_3x1x7_by_5x1", pow, 15, []tensor.Tensor{pos(3, 1, 7), f32(5, 1)}, nil, ops.HostOps["Pow"]})

	unshipped := runWithoutACompiler(t, rnd, cases)
	require.Positive(t, unshipped, "no case picked a variant the corpus lacks")
	t.Logf("%d of %d cases re-planned with shape-generic kernels", unshipped, len(cases))
}

// runWithoutACompiler runs each case as a one-node session (the caller has made the JIT
// unavailable): three runs (the interpreter, then the compiled run plan), the later ones on
// fresh random inputs, each compared with the host function; the node must run as Loom
// kernels throughout. It returns how many cases' planners picked a variant this binary does
// not ship.
func runWithoutACompiler(t *testing.T, rnd *rand.Rand, cases []genericCase) int {
	unshipped := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, feeds := oneNodeSession(t, c.node, c.opset, c.in, c.static...)
			if notShippedHere(t, s, c) {
				unshipped++
			}
			for run := range 3 { // the interpreter, then the compiled run plan
				if run > 0 { // fresh random values for the graph's inputs (positive ones stay positive)
					for i := range feeds {
						feeds[i].Tensor = freshLike(rnd, feeds[i].Tensor)
					}
				}
				in := append([]tensor.Tensor(nil), c.in...)
				for _, f := range feeds {
					var idx int
					_, err := fmt.Sscanf(f.Name, "in%d", &idx)
					require.NoError(t, err)
					in[idx] = f.Tensor
				}
				got, err := s.Run(context.Background(), feeds)
				require.NoError(t, err)
				rc := testRunCtx(s, c.opset)
				want, err := c.host(rc, c.node, in)
				rc.Close()
				require.NoError(t, err)
				require.Equal(t, want[0].Dims(), got[0].Dims())
				w, g := tensor.Float64s(want[0]), tensor.Float64s(got[0])
				for i := range w {
					require.InDelta(t, w[i], g[i], 1e-4+1e-4*math.Abs(w[i]), "run %d element %d", run, i)
				}
			}
			plans := s.ExecutionPlans()
			require.Len(t, plans, 1)
			require.True(t, plans[0].Planned, plans[0].Reason)
			require.Empty(t, plans[0].HostSteps, "the node ran on the host")
			require.Equal(t, 1, plans[0].KernelSteps)
			st := s.CacheStats()
			require.NotEmpty(t, st.JITUnavailable)
			require.Zero(t, st.NotShipped, "an op ran as its host function")
			require.Zero(t, st.Run.Compiles+st.Warmup.Compiles)
		})
	}
	return unshipped
}

// freshLike is a tensor of t's type and shape with new random values (positive where t's
// are all positive; small integers for integer types).
func freshLike(rnd *rand.Rand, t tensor.Tensor) tensor.Tensor {
	v := randomF32(rnd, ops.Numel(t.Dims()))
	switch old := t.Data().(type) {
	case []float32:
		if len(old) > 0 && slices.Min(old) > 0 {
			for j := range v {
				v[j] = float32(math.Abs(float64(v[j]))) + 0.1
			}
		}
		return tensor.MustTensor(t.Dims(), v)
	case []float64:
		d := make([]float64, len(v))
		for j := range v {
			d[j] = float64(v[j])
		}
		return tensor.MustTensor(t.Dims(), d)
	case []int32:
		d := make([]int32, len(v))
		for j := range v {
			d[j] = int32(math.Round(float64(v[j]) * 3))
		}
		return tensor.MustTensor(t.Dims(), d)
	case []int64:
		d := make([]int64, len(v))
		for j := range v {
			d[j] = int64(math.Round(float64(v[j]) * 3))
		}
		return tensor.MustTensor(t.Dims(), d)
	}
	return t
}

// genericActivations are FusedConv's activations, one per gemm epilogue (ACT 1..8).
var genericActivations = []string{"Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "Clip", "HardSwish", "Swish"}

// TestFusedConvHostWithoutACompiler checks FusedConv's host function with no C compiler against
// a convolution done on the host and the activation applied once. The host function runs Conv's
// kernel op on the FusedConv node; without the JIT that plan is re-planned with shape-generic
// kernels, and the re-plan must be Conv's (keyed by the planner that made the plan): FusedConv's
// generic planner fuses the activation, which the host function then applied a second time (the
// idempotent Relu and Clip hid it). This host function is the reference the shape-generic tests
// compare the shipped epilogues with.
func TestFusedConvHostWithoutACompiler(t *testing.T) {
	t.Setenv("CC", filepath.Join(t.TempDir(), "no-cc"))
	t.Setenv("LOOM_CACHE_DIR", t.TempDir())
	rnd := inferRand()
	f32 := func(shape ...int64) tensor.Tensor {
		return tensor.MustTensor(shape, randomF32(rnd, ops.Numel(shape)))
	}
	const p0, p1 = 0.3, 0.4
	once := map[string]func(float64) float64{
		"Relu":        func(v float64) float64 { return math.Max(v, 0) },
		"Sigmoid":     func(v float64) float64 { return 1 / (1 + math.Exp(-v)) },
		"Tanh":        math.Tanh,
		"LeakyRelu":   func(v float64) float64 { return ops.MathSelect(v < 0, p0*v, v) },
		"HardSigmoid": func(v float64) float64 { return math.Max(0, math.Min(1, p0*v+p1)) },
		"Clip":        func(v float64) float64 { return math.Min(math.Max(v, p0), p1) },
		"HardSwish":   func(v float64) float64 { return v * math.Max(0, math.Min(1, v/6+0.5)) },
		"Swish":       func(v float64) float64 { return v / (1 + math.Exp(-p0*v)) },
	}
	for _, act := range genericActivations {
		t.Run(act, func(t *testing.T) {
			node := graph.NewNode("n", "FusedConv", nil, []string{"y"}, graph.StringAttr("activation", act),
				&graph.Attribute{Name: "activation_params", Type: graph.AttrFloats, Floats: []float32{float32(p0), float32(p1)}}, graph.IntsAttr("pads", 1, 1, 1, 1))
			node.Domain = graph.LoomDomain
			in := []tensor.Tensor{f32(1, 6, 11, 13), f32(5, 6, 3, 3), f32(5)}
			s, _ := oneNodeSession(t, node, 17, in, 1, 2)
			rc := testRunCtx(s, 17)
			defer rc.Close()
			got, err := nn.FusedConvHost(rc, node, in)
			require.NoError(t, err)
			conv := graph.NewNode("n", "Conv", nil, []string{"y"}, graph.IntsAttr("pads", 1, 1, 1, 1))
			raw, err := ops.HostOps["Conv"](rc, conv, in)
			require.NoError(t, err)
			f := once[act]
			w, g := tensor.Float64s(raw[0]), tensor.Float64s(got[0])
			require.Len(t, g, len(w))
			for i := range w {
				want := float64(float32(f(w[i])))
				require.InDelta(t, want, g[i], 1e-4+1e-4*math.Abs(want), "element %d", i)
			}
		})
	}
}
