package session

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/tensor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// weightProductModel is y = x·W (+ bias) with W [k, n] an initializer: MatMul for x [..., k]
// (symbolic leading dimensions), or Gemm with transB (W stored [n, k]) and a bias for x [M, k].
func weightProductModel(t *testing.T, w, bias []float32, k, n int, gemm bool, rank int) *graph.Model {
	g := &graph.Graph{Name: "weights"}
	dims := graph.Shape{}
	for i := range rank - 1 {
		dims = append(dims, graph.SymDim(fmt.Sprintf("d%d", i)))
	}
	dims = append(dims, graph.DimOf(int64(k)))
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, dims))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	if gemm {
		g.AddInitializer(graph.TensorFromFloat32("w", []int64{int64(n), int64(k)}, w))
		g.AddInitializer(graph.TensorFromFloat32("b", []int64{int64(n)}, bias))
		g.Nodes = []*graph.Node{graph.NewNode("gemm", "Gemm", []string{"x", "w", "b"}, []string{"y"}, graph.IntAttr("transB", 1))}
	} else {
		g.AddInitializer(graph.TensorFromFloat32("w", []int64{int64(k), int64(n)}, w))
		g.AddInitializer(graph.TensorFromFloat32("b", []int64{int64(n)}, bias))
		g.Nodes = []*graph.Node{
			graph.NewNode("mm", "MatMul", []string{"x", "w"}, []string{"h"}),
			graph.NewNode("add", "Add", []string{"h", "b"}, []string{"y"}),
		}
	}
	m, err := graph.FromGraph("weights", g, map[string]int64{"": 13})
	require.NoError(t, err)
	return m
}

// A large constant B is packed once into gemm_nn's column panels where its layout costs (see
// packsB in internal/ops/kernelops): the products of every
// input shape (one plan each) match a float64 reference on fresh random inputs, in the
// plan and in the interpreter, for widths that are and are not a multiple of the panel, for
// MatMul (+ Add, fused) and Gemm with transB (whose B is packed whatever its size); the plans
// of all shapes share one packed copy, which is the session's only copy of the weight
// (relayWeights: the session keeps it in place of the weight as stored, and derives nothing),
// and a closed session keeps none.
func TestPackedWeightsMatchAndAreSharedAcrossShapes(t *testing.T) {
	rnd := inferRand()
	cases := []struct {
		k, n   int
		gemm   bool
		rank   int
		ms     [][]int64 // x's leading dimensions, one plan each
		packed int       // packed copies: rows 4 KiB apart, long panels, or k >= 256
	}{
		{k: 768, n: 1024, rank: 2, ms: [][]int64{{1}, {5}, {128}}, packed: 1},
		{k: 300, n: 2048, rank: 3, ms: [][]int64{{1, 1}, {2, 37}}, packed: 1},
		{k: 9000, n: 100, rank: 2, ms: [][]int64{{3}, {64}}, packed: 1},
		{k: 3000, n: 520, gemm: true, rank: 2, ms: [][]int64{{1}, {17}}, packed: 1},
		{k: 768, n: 768, rank: 2, ms: [][]int64{{1}, {40}}, packed: 1},
		{k: 200, n: 300, rank: 2, ms: [][]int64{{1}, {64}}, packed: 0},  // short k, small B
		{k: 256, n: 33000, rank: 2, ms: [][]int64{{1}, {9}}, packed: 1}, // 34 MB: a vocabulary's
		// Gemm's transposed B, packed whatever its size (gemm_nt's dot products are slower).
		{k: 64, n: 64, gemm: true, rank: 2, ms: [][]int64{{1}, {512}}, packed: 1},
		{k: 768, n: 768, gemm: true, rank: 2, ms: [][]int64{{3}}, packed: 1},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("k%d_n%d_gemm%v", c.k, c.n, c.gemm), func(t *testing.T) {
			w, bias := randomF32(rnd, c.k*c.n), randomF32(rnd, c.n)
			model := weightProductModel(t, w, bias, c.k, c.n, c.gemm, c.rank)
			planned, interpreted := planPair(t, func(opts ...LoadOption) (*InferenceSession, error) { return FromGraph(model, opts...) })
			unpacked, err := FromGraph(model, WithExecutionProvider(ProviderHost), WithOption(OptionPackWeights, "0"))
			require.NoError(t, err)
			defer unpacked.Close()
			for _, lead := range c.ms {
				rows := 1
				for _, d := range lead {
					rows *= int(d)
				}
				x := randomF32(rnd, rows*c.k)
				// want and the size of its terms (float32 sums of k terms err by about
				// √k·ε of it).
				want, scale := make([]float64, rows*c.n), make([]float64, rows*c.n)
				for r := range rows {
					for j := range c.n {
						s, a := float64(bias[j]), math.Abs(float64(bias[j]))
						for p := range c.k {
							wv := w[p*c.n+j]
							if c.gemm {
								wv = w[j*c.k+p]
							}
							s += float64(x[r*c.k+p]) * float64(wv)
							a += math.Abs(float64(x[r*c.k+p]) * float64(wv))
						}
						want[r*c.n+j], scale[r*c.n+j] = s, a
					}
				}
				feeds := []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor(append(append([]int64{}, lead...), int64(c.k)), x)}}
				for name, s := range map[string]*InferenceSession{"interpreted": interpreted, "planned": planned, "planned unpacked": unpacked} {
					for run := range 2 { // a signature's first run builds its plan, the second runs it
						outs, err := s.Run(context.Background(), feeds)
						require.NoError(t, err)
						got := outs[0].Data().([]float32)
						require.Len(t, got, len(want))
						worst := 0.0
						for i := range got {
							worst = max(worst, math.Abs(float64(got[i])-want[i])/(1+scale[i])/math.Sqrt(float64(c.k)))
						}
						assert.Less(t, worst, 1e-6, "%s run %d, x %v: largest error over √k·(1 + Σ|terms|)", name, run, lead)
					}
				}
			}
			assert.Len(t, planned.ExecutionPlans(), len(c.ms))
			// The packed B replaces the weight as stored (Gemm's transposed one too).
			relaid := c.packed
			assert.Equal(t, relaid, relaidWeights(planned), "B held packed alone, where packing pays")
			assert.Equal(t, c.packed-relaid, planned.pe.Derived.Len(), "one packed B for the plans of every shape, where packing pays")
			assert.Equal(t, relaid, relaidWeights(interpreted), "the interpreter reads the packed weights too")
			assert.Zero(t, interpreted.pe.Derived.Len(), "the interpreter packs nothing")
			assert.Zero(t, unpacked.pe.Derived.Len()+relaidWeights(unpacked), "OptionPackWeights 0 packs nothing")
			require.NoError(t, planned.Close())
			assert.Zero(t, planned.pe.Derived.Len(), "a closed session keeps no packed weight")
		})
	}
}

// Loom's MatMulAdd with a Gelu activation (exact and tanh) matches a float64 reference on the
// host (interpreted, planned: the GELU runs in the product's epilogue) and on the cuda
// stand-in (gemm_tiled, then the activation kernel), over inputs whose products reach far
// into both tails; unknown activations are refused naming the node.
func TestMatMulAddGeluEpilogue(t *testing.T) {
	rnd := inferRand()
	const k, n = 40, 37
	w, bias := randomF32(rnd, k*n), randomF32(rnd, n)
	for i := range w {
		w[i] *= 2
	}
	model := func(t *testing.T, act, approximate string) *graph.Model {
		g := &graph.Graph{Name: "mmgelu"}
		g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("b"), graph.SymDim("m"), graph.DimOf(k)}))}
		g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
		g.AddInitializer(graph.TensorFromFloat32("w", []int64{k, n}, w))
		g.AddInitializer(graph.TensorFromFloat32("b", []int64{n}, bias))
		nd := graph.NewNode("mm", "MatMulAdd", []string{"x", "w", "b"}, []string{"y"}, graph.StringAttr("activation", act))
		if approximate != "" {
			nd.Attrs = append(nd.Attrs, graph.StringAttr("approximate", approximate))
		}
		nd.Domain = graph.LoomDomain
		g.Nodes = []*graph.Node{nd}
		m, err := graph.FromGraph("mmgelu", g, map[string]int64{"": 17, graph.LoomDomain: 1})
		require.NoError(t, err)
		return m
	}
	for _, approximate := range []string{"none", "tanh"} {
		gelu := func(v float64) float64 { return 0.5 * v * (1 + math.Erf(v/math.Sqrt2)) }
		if approximate == "tanh" {
			gelu = func(v float64) float64 { return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v))) }
		}
		sessions := map[string][]LoadOption{
			"interpreted":   {WithExecutionProvider(ProviderHost), WithOption(OptionRunPlan, "0")},
			"planned":       {WithExecutionProvider(ProviderHost)},
			"cuda stand-in": {WithExecutionProvider(ProviderCUDA), WithOption(OptionCUDAStandIn, "1")},
		}
		for name, opts := range sessions {
			s, err := FromGraph(model(t, "Gelu", approximate), opts...)
			require.NoError(t, err)
			for run := range 3 {
				b, m := 1+rnd.IntN(2), 1+rnd.IntN(9)
				x := randomF32(rnd, b*m*k)
				outs, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{int64(b), int64(m), k}, x)}})
				require.NoError(t, err)
				got := outs[0].Data().([]float32)
				for r := range b * m {
					for j := range n {
						v := float64(bias[j])
						for p := range k {
							v += float64(x[r*k+p]) * float64(w[p*n+j])
						}
						require.InDelta(t, gelu(v), float64(got[r*n+j]), 2e-6*(1+math.Abs(v)), "%s %s run %d: row %d col %d, product %g", approximate, name, run, r, j, v)
					}
				}
			}
			require.NoError(t, s.Close())
		}
	}
	s, err := FromGraph(model(t, "Relu6", ""), WithExecutionProvider(ProviderHost))
	if err == nil { // refused at load, or at the first run
		_, err = s.Run(context.Background(), []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{1, 1, k}, randomF32(rnd, k))}})
		require.NoError(t, s.Close())
	}
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown activation "Relu6"`)
	assert.Contains(t, err.Error(), `"mm"`)
}

// BenchmarkWeightProducts times y = x·W + b for GPT-2-small's and BERT-base's weight shapes
// (one decode token, m = 1, and 128 tokens; GPT-2's vocabulary projection for one), and 1024³ (compare with BenchmarkGEMM1024's FMA
// peak in go/loom), on one thread, with the weights packed
// (OptionPackWeights, the default) and as stored, with the exact kernels compiled before the
// first run (OptionJIT sync: without it, the runs timed were those of the shape-generic kernels
// that serve while the exact ones compile in the background), reporting GFLOP/s and the weights' bytes
// read per second (for m = 1 the product streams W once: compare with the machine's memory
// bandwidth). `go test -run '^$' -bench WeightProducts ./go/session`
func BenchmarkWeightProducts(b *testing.B) {
	rnd := inferRand()
	for _, c := range []struct{ m, k, n int }{{1, 512, 512}, {1, 512, 1536}, {1, 512, 2048}, {1, 2048, 512}, {1, 512, 8192}, {1, 768, 768}, {1, 768, 2304}, {1, 768, 3072}, {1, 3072, 768}, {1, 768, 50257}, {128, 768, 768}, {128, 768, 2304}, {128, 768, 3072}, {128, 3072, 768}, {1024, 1024, 1024}} {
		w, bias := randomF32(rnd, c.k*c.n), randomF32(rnd, c.n)
		for _, pack := range []string{"1", "0"} {
			for _, threads := range []int{1, 2} {
				b.Run(fmt.Sprintf("m%d_k%d_n%d/pack%s/t%d", c.m, c.k, c.n, pack, threads), func(b *testing.B) {
					s, err := FromGraph(weightProductModel(&testing.T{}, w, bias, c.k, c.n, false, 2),
						WithExecutionProvider(ProviderHost), WithIntraOpThreads(threads), WithOption(OptionPackWeights, pack), WithOption(OptionJIT, "sync"))
					require.NoError(b, err)
					defer s.Close()
					feeds := []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{int64(c.m), int64(c.k)}, randomF32(rnd, c.m*c.k))}}
					for range 3 { // the plan is built, then warm
						_, err := s.Run(context.Background(), feeds)
						require.NoError(b, err)
					}
					for b.Loop() {
						if _, err := s.Run(context.Background(), feeds); err != nil {
							b.Fatal(err)
						}
					}
					sec := b.Elapsed().Seconds() / float64(b.N)
					b.ReportMetric(float64(2*c.m*c.k*c.n)/sec/1e9, "GFLOP/s")
					b.ReportMetric(float64(4*c.k*c.n)/sec/1e9, "weightGB/s")
				})
			}
		}
	}
}
