package session

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/nn"
	"github.com/loomrt/loom/go/session/internal/sessiontest"
)

// TestGPUPlannersMatchTheHostGemm runs the matrix products' GPU planners (gemm_tiled: a block
// of 256 threads a 64x64 or 128x128 tile, k in slices through shared memory between barriers)
// on the host backend against the ops' host functions, on fresh random inputs: sizes that are
// no multiple of the tiles, k of 0 and 1, Gemm with every transposition and every broadcast of
// C, batched MatMul with broadcast batch axes, MatMulAdd, and the convolutions that are matrix
// products, with every FusedConv epilogue. The tolerance grows with k.
func TestGPUPlannersMatchTheHostGemm(t *testing.T) {
	s := kernelCheckSession(t)
	gc := newGeomChecker(t, s)
	r := sessiontest.NewRand(t)
	tol := func(k int64) float64 { return 2e-6 * float64(k+8) }
	var cases []geomCase
	add := func(name string, c geomCase) {
		c.name = name
		cases = append(cases, c)
	}
	// MatMul over sizes around the tiles (m, n, k).
	for _, d := range [][3]int64{{1, 1, 1}, {3, 5, 7}, {65, 130, 17}, {200, 64, 300}, {64, 64, 16}, {129, 63, 33},
		{1, 300, 40}, {300, 1, 40}, {7, 9, 0}, {70, 3, 1}} {
		m, n, k := d[0], d[1], d[2]
		add(fmt.Sprintf("MatMul [%d %d] x [%d %d]", m, k, k, n), geomCase{node: node("MatMul"), opset: 13, in: []geomInput{fin(m, k), fin(k, n)}, tol: tol(k)})
	}
	for range 4 {
		m, n, k := int64(1+r.IntN(150)), int64(1+r.IntN(150)), int64(1+r.IntN(100))
		add(fmt.Sprintf("MatMul random [%d %d] x [%d %d]", m, k, k, n), geomCase{node: node("MatMul"), opset: 13, in: []geomInput{fin(m, k), fin(k, n)}, tol: tol(k)})
	}
	// Vectors and batches: broadcast batch axes (strides 0), A's batch folded into rows, three
	// batch axes that merge into two.
	for _, sh := range [][2][]int64{
		{{19}, {19, 5}}, {{6, 19}, {19}}, {{2, 3, 10, 9}, {3, 9, 70}}, {{1, 3, 33, 8}, {2, 1, 8, 17}},
		{{20, 9}, {4, 9, 66}}, {{4, 5, 9}, {9, 12}}, {{2, 3, 4, 5, 6}, {2, 3, 4, 6, 7}},
	} {
		k := sh[0][len(sh[0])-1]
		add(fmt.Sprintf("MatMul %v x %v", sh[0], sh[1]), geomCase{node: node("MatMul"), opset: 13, in: []geomInput{fin(sh[0]...), fin(sh[1]...)}, tol: tol(k)})
	}
	// The 128x128 tile: at least 264 blocks of it.
	add("MatMul [2 1536 8] x [2 8 1536] (128x128 tiles)", geomCase{node: node("MatMul"), opset: 13, in: []geomInput{fin(2, 1536, 8), fin(2, 8, 1536)}, tol: tol(8)})
	// Gemm: every transposition, alpha and beta, and C absent or broadcast in every way.
	for _, d := range [][3]int64{{3, 5, 7}, {65, 130, 17}, {70, 66, 1}, {5, 4, 0}} {
		m, n, k := d[0], d[1], d[2]
		for _, cs := range [][]int64{nil, {m, n}, {n}, {1, n}, {m, 1}, {1, 1}, {1}, {}} {
			ta, tb := r.IntN(2), r.IntN(2)
			a, b := []int64{m, k}, []int64{k, n}
			if ta == 1 {
				a = []int64{k, m}
			}
			if tb == 1 {
				b = []int64{n, k}
			}
			in := []geomInput{fin(a...), fin(b...)}
			if cs != nil {
				in = append(in, fin(cs...))
			}
			nd := node("Gemm", graph.IntAttr("transA", int64(ta)), graph.IntAttr("transB", int64(tb)),
				graph.FloatAttr("alpha", float32(r.Float64()*2-1)), graph.FloatAttr("beta", float32(r.Float64()*2-1)))
			add(fmt.Sprintf("Gemm transA=%d transB=%d [%d %d %d] C %v", ta, tb, m, n, k, cs), geomCase{node: nd, opset: 13, in: in, tol: tol(k)})
		}
	}
	// MatMulAdd: a bias per column or per element, A's batch folded into rows.
	mma := node("MatMulAdd")
	mma.Domain = graph.LoomDomain
	for _, sh := range [][3][]int64{{{65, 17}, {17, 130}, {130}}, {{65, 17}, {17, 130}, {65, 130}}, {{3, 21, 40}, {40, 70}, {1, 70}},
		{{9, 1}, {1, 5}, {9, 1}}, {{4, 6}, {6, 7}, {1}}} {
		k := sh[1][0]
		add(fmt.Sprintf("MatMulAdd %v x %v + %v", sh[0], sh[1], sh[2]), geomCase{node: mma, opset: 13,
			in: []geomInput{fin(sh[0]...), fin(sh[1]...), fin(sh[2]...)}, host: matMulAddRef, tol: tol(k)})
	}
	// Convolutions as matrix products: 1x1 (grouped, with and without bias), few output
	// positions (im2col and windows of x), and FusedConv with every epilogue.
	convs := []struct {
		name  string
		in    []geomInput
		attrs []*graph.Attribute
	}{
		{"1x1", []geomInput{fin(2, 8, 5, 7), fin(6, 8, 1, 1), fin(6)}, nil},
		{"1x1 grouped, no bias", []geomInput{fin(3, 12, 9, 11), fin(70, 6, 1, 1)}, []*graph.Attribute{groupAttr(2)}},
		{"few positions", []geomInput{fin(2, 16, 4, 4), fin(5, 16, 3, 3), fin(5)}, nil},
		{"windows of x", []geomInput{fin(1, 1, 400), fin(8, 1, 64)}, []*graph.Attribute{stridesAttr(64)}},
	}
	for _, cv := range convs {
		k := satProd(cv.in[1].shape[1:])
		add("Conv "+cv.name+" "+describeGeomInputs(cv.in), geomCase{node: convNode(cv.attrs...), opset: 18, in: cv.in, tol: tol(k)})
	}
	for i, a := range fusedActivations {
		cv := convs[i%2]
		if i%3 == 2 {
			cv = convs[2]
		}
		n := fusedConvNode(a.name, a.params, i%2 == 0, cv.attrs...)
		k := satProd(cv.in[1].shape[1:])
		add(fmt.Sprintf("FusedConv %s%v affine=%v %s", a.name, a.params, i%2 == 0, cv.name), geomCase{node: n, opset: 18, in: cv.in, host: epilogueRef, tol: tol(k)})
	}
	tiles := map[string]int{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			planner, ok := ops.PlannerFor(ops.PlanGPU, ops.PlannerKey(c.node))
			require.True(t, ok)
			p, reason, err := planner(c.node, c.opset, c.infos())
			require.NoError(t, err)
			require.NotNil(t, p, reason)
			if len(p.Calls) > 0 {
				i := slices.IndexFunc(p.Calls, func(k ops.KernelCall) bool { return k.Symbol == "gemm_tiled" })
				require.GreaterOrEqual(t, i, 0, "the GPU plan launches no gemm_tiled: %s", ops.Variant(p))
				tiles[p.Calls[i].Config["BM"]+"x"+p.Calls[i].Config["BN"]]++
			}
			require.True(t, runGeomCaseFor(t, s, gc, r, c, true, ops.PlanGPU))
		})
	}
	require.Positive(t, tiles["64x64"])
	require.Positive(t, tiles["128x128"])
	// The GPU planners decline where the host planners do: batch axes that do not fold into
	// two keep bmm.
	c := geomCase{name: "MatMul [2 3 4 5 6] x [1 3 1 6 7] (bmm)", node: node("MatMul"), opset: 13, in: []geomInput{fin(2, 3, 4, 5, 6), fin(1, 3, 1, 6, 7)}, tol: tol(6)}
	require.True(t, runGeomCaseFor(t, s, gc, r, c, true, ops.PlanGPU))
	// Random matrix products of every family, as the property test draws them.
	for _, f := range []string{"matmul", "gemm", "matmul_add", "conv", "fused_conv"} {
		for i := range 6 {
			c := geomGenerators[f](&geomGen{r: r, budget: geomRunBudget})
			c.name = fmt.Sprintf("%s #%d: %s%s %s (GPU planner)", f, i, c.node.OpType, describeAttrs(c.node), describeGeomInputs(c.in))
			if c.host == nil && c.node.OpType == "FusedConv" {
				c.host = nn.FusedConvHost
			}
			runGeomCaseFor(t, s, gc, r, c, true, ops.PlanGPU)
		}
	}
}
