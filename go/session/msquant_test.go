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
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// com.microsoft MatMulNBits and GatherBlockQuantized: the kernels of kernels/quant.loom
// against the host functions on fresh random codes, scales, zero points and inputs; hostile
// inputs; and the 4-bit weights held as they are stored. msquant_refs_test.go compares the
// ONNX Runtime-made models of testdata/msquant with ONNX Runtime's outputs.

func randomBytes(rnd *rand.Rand, n int) []uint8 {
	b := make([]uint8, n)
	for i := range b {
		b[i] = uint8(rnd.IntN(256))
	}
	return b
}

func positiveF32(rnd *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = 0.01 + rnd.Float32()*0.2
	}
	return v
}

// matMulNBitsInputs makes random inputs of a MatMulNBits of A [m, k] and N = n (the node's
// attributes are msNode's).
func matMulNBitsInputs(rnd *rand.Rand, m, k, n, bits, bs int64, zp, bias bool) []tensor.Tensor {
	kb := (k + bs - 1) / bs
	blob := bs * bits / 8
	in := []tensor.Tensor{
		tensor.MustTensor([]int64{m, k}, randomF32(rnd, int(m*k))),
		tensor.MustTensor([]int64{n, kb, blob}, randomBytes(rnd, int(n*kb*blob))),
		tensor.MustTensor([]int64{n * kb}, positiveF32(rnd, int(n*kb))),
		{}, {}, {},
	}
	if zp {
		zpb := (kb*bits + 7) / 8
		in[3] = tensor.MustTensor([]int64{n * zpb}, randomBytes(rnd, int(n*zpb)))
	}
	if bias {
		in[5] = tensor.MustTensor([]int64{n}, randomF32(rnd, int(n)))
	}
	return in
}

func msNode(name, op string, attrs ...*graph.Attribute) *graph.Node {
	n := graph.NewNode(name, op, nil, []string{"y"}, attrs...)
	n.Domain = graph.MSDomain
	return n
}

func matMulNBitsNode(k, n, bits, bs int64) *graph.Node {
	return msNode("mnb", "MatMulNBits", graph.IntAttr("K", k), graph.IntAttr("N", n), graph.IntAttr("bits", bits),
		graph.IntAttr("block_size", bs), graph.IntAttr("accuracy_level", 0))
}

// requireKernelMatchesHost runs the op's kernel run and its host function on in and compares
// them within tol·(1 + |want|), checking that the kernels ran (dispatches through the run's
// ModelSession).
func requireKernelMatchesHost(t *testing.T, rc *exec.RunCtx, key string, n *graph.Node, in []tensor.Tensor, tol float64, what string) {
	t.Helper()
	before := rc.Dispatches
	got, err := exec.KernelRuns[key](rc, n, in)
	require.NoError(t, err, what)
	require.Greater(t, rc.Dispatches, before, "%s: the kernels ran", what)
	want, err := ops.HostOps[key](rc, n, in)
	require.NoError(t, err, what)
	require.Equal(t, want[0].Dims(), got[0].Dims(), what)
	gv, wv := tensor.Float64s(got[0]), tensor.Float64s(want[0])
	for i := range wv {
		if math.Abs(gv[i]-wv[i]) > tol*(1+math.Abs(wv[i])) {
			require.Failf(t, "kernel and host differ", "%s: element %d is %v, the host says %v", what, i, gv[i], wv[i])
		}
	}
}

func msRunCtx(t *testing.T) *exec.RunCtx {
	rnd := inferRand()
	rc := testRunCtx(nil, 17)
	sess, err := FromGraph(mlpModel(t, randomF32(rnd, 2), randomF32(rnd, 1), 2, 1), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	t.Cleanup(func() { sess.Close() })
	rc.Eng = sess.eng
	t.Cleanup(rc.Close)
	return rc
}

// The matmul_nbits kernels (every tile: 1x4 for one row, 2x4, 4x2) match the host function
// on random 4- and 8-bit codes with and without zero points and bias, K a multiple of the
// block size or not.
func TestMatMulNBitsKernelMatchesHost(t *testing.T) {
	rnd := inferRand()
	rc := msRunCtx(t)
	for _, c := range []struct{ m, k, n, bits, bs int64 }{
		{1, 64, 48, 4, 32}, {1, 100, 40, 4, 16}, {1, 1000, 37, 4, 128}, {2, 200, 9, 4, 64}, {3, 33, 4, 4, 16},
		{5, 130, 20, 4, 32}, {17, 257, 66, 4, 256}, {1, 80, 24, 8, 32}, {6, 48, 16, 8, 16}, {4, 300, 5, 8, 128},
	} {
		for _, zp := range []bool{false, true} {
			for _, bias := range []bool{false, true} {
				what := fmt.Sprintf("m %d k %d n %d bits %d block %d zp %v bias %v", c.m, c.k, c.n, c.bits, c.bs, zp, bias)
				in := matMulNBitsInputs(rnd, c.m, c.k, c.n, c.bits, c.bs, zp, bias)
				requireKernelMatchesHost(t, rc, graph.MSDomain+":MatMulNBits", matMulNBitsNode(c.k, c.n, c.bits, c.bs), in, 1e-4, what)
			}
		}
	}
}

// The gather_bq kernel matches the host function (exactly: both round (code - zero
// point)·scale once to float32) on random codes, with negative indices.
func TestGatherBlockQuantizedKernelMatchesHost(t *testing.T) {
	rnd := inferRand()
	rc := msRunCtx(t)
	for _, c := range []struct{ rows, cols, bits, bs int64 }{{40, 64, 4, 32}, {30, 50, 4, 16}, {20, 48, 8, 16}, {7, 300, 4, 128}} {
		for _, zp := range []bool{false, true} {
			for _, it := range []graph.DataType{graph.Int64, graph.Int32} {
				what := fmt.Sprintf("rows %d cols %d bits %d block %d zp %v indices %s", c.rows, c.cols, c.bits, c.bs, zp, it)
				kb := (c.cols + c.bs - 1) / c.bs
				ids := make([]int64, 6)
				for i := range ids {
					ids[i] = rnd.Int64N(2*c.rows) - c.rows
				}
				idx := tensor.MustTensor([]int64{2, 3}, ids)
				if it == graph.Int32 {
					ids32 := make([]int32, len(ids))
					for i, v := range ids {
						ids32[i] = int32(v)
					}
					idx = tensor.MustTensor([]int64{2, 3}, ids32)
				}
				in := []tensor.Tensor{tensor.MustTensor([]int64{c.rows, c.cols * c.bits / 8}, randomBytes(rnd, int(c.rows*c.cols*c.bits/8))),
					idx, tensor.MustTensor([]int64{c.rows, kb}, randomF32(rnd, int(c.rows*kb))), {}}
				if zp {
					zpb := (kb*c.bits + 7) / 8
					in[3] = tensor.MustTensor([]int64{c.rows, zpb}, randomBytes(rnd, int(c.rows*zpb)))
				}
				n := msNode("gbq", "GatherBlockQuantized", graph.IntAttr("bits", c.bits), graph.IntAttr("block_size", c.bs),
					graph.IntAttr("gather_axis", 0), graph.IntAttr("quantize_axis", 1))
				requireKernelMatchesHost(t, rc, graph.MSDomain+":GatherBlockQuantized", n, in, 0, what)
			}
		}
	}
}

// msHostileSession is a session of the one com.microsoft node n whose inputs are graph inputs
// of in's types and ranks, every dimension unknown (so that bad shapes reach the node).
func msHostileSession(t *testing.T, executor string, n *graph.Node, in []tensor.Tensor) *InferenceSession {
	t.Helper()
	s, err := nodeSessionWith(t, executor, n, map[string]int64{"": 17, graph.MSDomain: 1}, in, func(v tensor.Tensor) graph.Type {
		shape := make(graph.Shape, len(v.Dims()))
		for i := range shape {
			shape[i] = graph.UnknownDim()
		}
		return graph.TensorType(v.DType(), shape)
	})
	require.NoError(t, err)
	return s
}

// Bad inputs of MatMulNBits and GatherBlockQuantized (a B of the wrong shape, scales or zero
// points of the wrong size, A's K not the attribute's, an index outside the table) are errors
// naming the node and the input, on both executors, and the session still runs good inputs.
func TestMSQuantHostileInputs(t *testing.T) {
	rnd := inferRand()
	good := matMulNBitsInputs(rnd, 2, 100, 8, 4, 32, true, true)
	with := func(i int, v tensor.Tensor) []tensor.Tensor {
		bad := append([]tensor.Tensor{}, good...)
		bad[i] = v
		return bad
	}
	mnb := matMulNBitsNode(100, 8, 4, 32)
	// Act-order weights: float zero points (one a block) and g_idx (the block of each of K's
	// columns; top, when given, puts one column past the last block).
	gidx := func(top int32) []int32 {
		g := make([]int32, 100)
		for e := range g {
			g[e] = int32(rnd.IntN(4))
		}
		g[rnd.IntN(100)] = top
		return g
	}
	gidxGood := append([]tensor.Tensor{}, good...)
	gidxGood[3] = tensor.MustTensor([]int64{32}, positiveF32(rnd, 32))
	gidxGood[4] = tensor.MustTensor([]int64{100}, gidx(3))
	withG := func(i int, v tensor.Tensor) []tensor.Tensor {
		bad := append([]tensor.Tensor{}, gidxGood...)
		bad[i] = v
		return bad
	}
	gbqGood := []tensor.Tensor{tensor.MustTensor([]int64{10, 32}, randomBytes(rnd, 320)), tensor.MustTensor([]int64{3}, []int64{0, -1, 9}),
		tensor.MustTensor([]int64{10, 2}, positiveF32(rnd, 20))}
	gbq := msNode("gbq", "GatherBlockQuantized", graph.IntAttr("bits", 4), graph.IntAttr("block_size", 32))
	cases := []hostileCase{
		{name: "B_shape", node: mnb, good: good, bad: with(1, tensor.MustTensor([]int64{8, 4, 8}, randomBytes(rnd, 256))),
			want: tensor.ErrInvalidArgument, says: []string{"input B has the shape [8 4 8]", "need [8 4 16]"}},
		{name: "scales_size", node: mnb, good: good, bad: with(2, tensor.MustTensor([]int64{31}, positiveF32(rnd, 31))),
			want: tensor.ErrInvalidArgument, says: []string{"input scales", "it needs N·⌈K/block_size⌉ = 32"}},
		{name: "zero_points_size", node: mnb, good: good, bad: with(3, tensor.MustTensor([]int64{3}, randomBytes(rnd, 3))),
			want: tensor.ErrInvalidArgument, says: []string{"input zero_points"}},
		{name: "A_not_K", node: mnb, good: good, bad: with(0, tensor.MustTensor([]int64{2, 99}, randomF32(rnd, 198))),
			want: tensor.ErrInvalidArgument, says: []string{"whose last axis is not K = 100"}},
		{name: "g_idx_out_of_range", node: mnb, good: gidxGood, bad: withG(4, tensor.MustTensor([]int64{100}, gidx(4))),
			want: tensor.ErrInvalidArgument, says: []string{"input g_idx[", "= 4, outside [0, 4)"}},
		{name: "float_zero_points_size", node: mnb, good: gidxGood, bad: withG(3, tensor.MustTensor([]int64{31}, positiveF32(rnd, 31))),
			want: tensor.ErrInvalidArgument, says: []string{"input zero_points is float[31]", "one a block, N·⌈K/block_size⌉ = 32"}},
		{name: "gather_index", node: gbq, good: gbqGood,
			bad:  []tensor.Tensor{gbqGood[0], tensor.MustTensor([]int64{2}, []int64{3, 10}), gbqGood[2]},
			want: tensor.ErrInvalidArgument, says: []string{"indices", "10"}},
		{name: "gather_scales", node: gbq, good: gbqGood,
			bad:  []tensor.Tensor{gbqGood[0], gbqGood[1], tensor.MustTensor([]int64{10, 3}, positiveF32(rnd, 30))},
			want: tensor.ErrInvalidArgument, says: []string{"input scales has the shape [10 3]", "[10 2]"}},
	}
	for _, c := range cases {
		for _, executor := range traceExecutors {
			t.Run(c.name+"/"+executor, func(t *testing.T) {
				checkHostileCase(t, msHostileSession(t, executor, c.node, c.good), c)
			})
		}
	}
}

// Attributes MatMulNBits cannot run (bits 3, a block size that is not a power of two of at
// least 16) fail at the first run or at load, naming the node and the attribute.
func TestMatMulNBitsBadAttributes(t *testing.T) {
	rnd := inferRand()
	for _, c := range []struct {
		bits, bs int64
		says     string
	}{{3, 32, "bits 3 is not supported"}, {4, 24, "block_size 24 must be a power of two"}, {4, 8, "block_size 8"}} {
		in := matMulNBitsInputs(rnd, 1, 64, 8, 4, 32, false, false)
		requireMNBRefused(t, matMulNBitsNode(64, 8, c.bits, c.bs), in, c.says)
	}
}

// requireMNBRefused loads node (MatMulNBits "mnb") over inputs in and runs them: the load or the
// run must fail with an *Error naming the node and saying says.
func requireMNBRefused(t *testing.T, node *graph.Node, in []tensor.Tensor, says string) {
	t.Helper()
	s, err := nodeSessionWith(t, exec.ExecutorPlan, node, map[string]int64{"": 17, graph.MSDomain: 1}, in,
		func(v tensor.Tensor) graph.Type { return graph.TensorType(v.DType(), graph.ShapeOf(v.Dims()...)) })
	if err == nil {
		_, err = s.Run(context.Background(), feedsOf(in))
	}
	require.Error(t, err)
	var e *tensor.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "mnb", e.Node, "%v", err)
	assert.Contains(t, err.Error(), says)
}

// g_idx with packed uint8 zero points is refused, naming the node (ONNX Runtime 1.30 reads that
// pair in a way matching no layout of them: tools/onnx/msquant_models.py keeps to float zero
// points or none with g_idx).
func TestMatMulNBitsGIdxWithPackedZeroPointsRefused(t *testing.T) {
	rnd := inferRand()
	in := matMulNBitsInputs(rnd, 1, 64, 8, 4, 32, true, false)
	g := make([]int32, 64)
	for e := range g {
		g[e] = int32(e % 2)
	}
	in[4] = tensor.MustTensor([]int64{64}, g)
	requireMNBRefused(t, matMulNBitsNode(64, 8, 4, 32), in, "g_idx with packed uint8 zero_points is not supported")
}

// A 4-bit MatMulNBits session holds its weights as stored: the weights its plans read on the
// device are the packed codes, scales and zero points (no float copy, no second copy), the
// plan's arena holds no float weights, and the Go heap does not grow by a float copy either.
func TestMatMulNBitsKeepsWeightsPacked(t *testing.T) {
	rnd := inferRand()
	const k, n, bs = 1024, 1024, 32
	in := matMulNBitsInputs(rnd, 1, k, n, 4, bs, true, false)
	g := &graph.Graph{Name: "mnb"}
	g.Inputs = []*graph.Value{graph.Input("a", graph.TensorType(graph.Float, graph.ShapeOf(1, k)))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	var stored int64
	for i, name := range []string{"", "B", "scales", "zp"} {
		if i == 0 {
			continue
		}
		raw, _ := ops.RawBytes(in[i])
		gt, err := graph.NewTensor(name, in[i].DType(), in[i].Dims(), append([]byte{}, raw...))
		require.NoError(t, err)
		g.AddInitializer(gt)
		stored += int64(len(raw))
	}
	node := matMulNBitsNode(k, n, 4, bs)
	node.Inputs, node.Outputs = []string{"a", "B", "scales", "zp"}, []string{"y"}
	g.Nodes = []*graph.Node{node}
	m, err := graph.FromGraph("mnb", g, map[string]int64{"": 17, graph.MSDomain: 1})
	require.NoError(t, err)
	floatWeights := int64(k * n * 4)
	s, err := FromGraph(m, WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	feeds := []tensor.NamedTensor{{Name: "a", Tensor: in[0]}}
	want, err := ops.HostOps[graph.MSDomain+":MatMulNBits"](nil, node, in)
	require.NoError(t, err)
	for range 2 {
		outs, err := s.Run(context.Background(), feeds)
		require.NoError(t, err)
		gv, wv := tensor.Float64s(outs[0]), tensor.Float64s(want[0])
		for i := range wv {
			require.InDelta(t, wv[i], gv[i], 1e-4*(1+math.Abs(wv[i])), "element %d", i)
		}
	}
	plans := s.ExecutionPlans()
	require.Len(t, plans, 1)
	require.True(t, plans[0].Planned, plans[0].Reason)
	assert.Empty(t, plans[0].HostSteps, "MatMulNBits runs as kernels")
	assert.Equal(t, 1, plans[0].KernelSteps)
	assert.Less(t, plans[0].ArenaBytes, floatWeights/8, "the arena holds no float weights")
	d := s.DeviceAllocationCounts()
	t.Logf("stored weights %d bytes (float %d); device weights %d bytes in %d allocations; arena %d bytes",
		stored, floatWeights, d.Weights.Bytes, d.Weights.Count, plans[0].ArenaBytes)
	assert.LessOrEqual(t, d.Weights.Bytes, stored, "the plans read the weights as stored, once")
	assert.Less(t, d.Weights.Bytes+d.Scratch.Bytes, floatWeights/4, "no float copy of the weights on the device")
}
