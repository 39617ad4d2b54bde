package kernelops

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Relay packs a weight exactly as the host planners pack a constant B: MatMul's plans (Gemm's
// with transB for a transposed weight) of any height read the relaid weight's panels
// themselves (no copy, no DerivedConsts), the unpacked elements are the weight's, the panels
// reuse the weight's memory in place when they fit it, and weights the planners read as
// stored are refused. A transposed B is packed whatever its size: gemm_nt's dot products,
// which would read it as stored, are slower than gemm_nn's row tiles.
func TestRelayMatchesThePlanners(t *testing.T) {
	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for _, c := range []struct {
		k, n       int
		packs      bool
		inPlace    bool // the panels fit the weight exactly
		transposed bool // stored [n, k], read by Gemm with transB
	}{
		{k: 256, n: 1024, packs: true, inPlace: true},
		{k: 768, n: 3072, packs: true, inPlace: true},
		{k: 9000, n: 100, packs: true, inPlace: false},
		{k: 768, n: 768, packs: true, inPlace: true},
		{k: 200, n: 400, packs: false},  // k under packBLongK
		{k: 256, n: 33000, packs: true}, // 34 MB: streamed by short products, several panels at once
		{k: 32, n: 1024, packs: false},  // 128 KiB: small enough to stay in the caches
		{k: 64, n: 64, packs: true, inPlace: true, transposed: true},
		{k: 768, n: 768, packs: true, inPlace: true, transposed: true},
		{k: 100, n: 37, packs: true, transposed: true},
	} {
		w := make([]float32, c.k*c.n)
		for i := range w {
			w[i] = rnd.Float32()*2 - 1
		}
		orig := append([]float32{}, w...)
		var r Relayer
		stored := []int64{int64(c.k), int64(c.n)}
		if c.transposed {
			stored = []int64{int64(c.n), int64(c.k)}
		}
		rt, ok := r.Relay(tensor.MustTensor(stored, w), true, c.transposed)
		require.Equal(t, c.packs, ok, "%dx%d packs", c.k, c.n)
		if !ok {
			assert.Equal(t, orig, w, "%dx%d: a weight not relaid is left as it was", c.k, c.n)
			continue
		}
		rel := tensor.RelaidOf(rt)
		require.NotNil(t, rel)
		assert.Equal(t, orig, rt.Data().([]float32), "%dx%d: the relaid weight reads as stored", c.k, c.n)
		assert.Equal(t, c.k*c.n, rt.Len())
		assert.Equal(t, c.inPlace, unsafe.SliceData(rel.Packed) == unsafe.SliceData(w), "%dx%d: panels in the weight's memory", c.k, c.n)
		for _, m := range []int{1, 5, 128, 1000} {
			in := []ops.ValueInfo{
				{ValueType: ops.ValueType{Dtype: graph.Float, Shape: []int64{int64(m), int64(c.k)}}, Present: true},
				{ValueType: ops.ValueType{Dtype: graph.Float, Shape: stored}, Present: true, Static: rt},
			}
			var p *ops.KernelPlan
			var why string
			var err error
			if c.transposed {
				p, why, err = planGemm(graph.NewNode("gemm", "Gemm", []string{"a", "b"}, []string{"y"}, graph.IntAttr("transB", 1)), 13, in)
			} else {
				p, why, err = planMatMul(graph.NewNode("mm", "MatMul", []string{"a", "b"}, []string{"y"}), 13, in)
			}
			require.NoError(t, err)
			require.NotNil(t, p, why)
			found := false
			for _, call := range p.Calls {
				if call.Symbol != "gemm_nn" {
					continue
				}
				assert.Equal(t, "true", call.Config["PACKB"], "%dx%d m=%d: gemm_nn reads B packed", c.k, c.n, m)
				b := call.Bind[1].Operand
				require.Equal(t, ops.OperandConst, b.Kind)
				packed := p.Consts[b.Index].Data().([]float32)
				assert.Equal(t, unsafe.SliceData(rel.Packed), unsafe.SliceData(packed), "%dx%d m=%d: the relaid panels themselves", c.k, c.n, m)
				found = true
			}
			assert.True(t, found, "%dx%d m=%d: a gemm_nn call", c.k, c.n, m)
		}
	}
}

// A weight whose memory continues into spare room (graph.Tensor.RawRoom) is packed in place
// even when the panels outgrow it (n not a multiple of the panel width: the overlapping last
// panel), and the panels are exactly those the planners would pack from the weight as stored;
// without room such a weight gets new memory and keeps its own untouched.
func TestRelayInPlaceIntoRoom(t *testing.T) {
	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for _, c := range []struct{ k, n int }{{256, 1025}, {300, 2049}, {768, 1000}, {257, 4099}, {256, 1024}} {
		g := gemmSpec{m: packedForRows, k: c.k, n: c.n, nb0: 1, nb1: 1, bs: [4]int{0, 0, c.n, 1}}
		g.bStatic = tensor.MustTensor([]int64{int64(c.k), int64(c.n)}, make([]float32, c.k*c.n))
		nv, packs := g.packPays()
		require.True(t, packs, "%dx%d packs", c.k, c.n)
		nr := nv * vectorWidth(c.n)
		size := ceilDiv(c.n, nr) * c.k * nr
		room := make([]float32, size+rnd.IntN(3)) // room to spare, or just enough
		w := room[: c.k*c.n : c.k*c.n]
		for i := range w {
			w[i] = rnd.Float32()*2 - 1
		}
		orig := append([]float32{}, w...)
		want := make([]float32, size)
		g.packInto(want, orig, nr)
		// Rearranged where it lies (what Relay does past relayScratchMax), in a copy.
		inPlace := append(append([]float32{}, orig...), make([]float32, size-len(orig))...)
		g.packInPlace(inPlace, nr)
		require.Equal(t, want, inPlace, "%dx%d: packInPlace", c.k, c.n)

		var r Relayer
		rt, ok := r.RelayWithRoom(tensor.MustTensor([]int64{int64(c.k), int64(c.n)}, w), room, true, false)
		require.True(t, ok)
		rel := tensor.RelaidOf(rt)
		require.NotNil(t, rel)
		assert.Same(t, unsafe.SliceData(room), unsafe.SliceData(rel.Packed), "%dx%d: panels in the weight's memory", c.k, c.n)
		require.Equal(t, want, rel.Packed, "%dx%d: the planners' panels", c.k, c.n)
		assert.Equal(t, orig, rt.Data().([]float32), "%dx%d: the relaid weight reads as stored", c.k, c.n)

		if size > c.k*c.n {
			own := append([]float32{}, orig...)
			rt, ok := r.RelayWithRoom(tensor.MustTensor([]int64{int64(c.k), int64(c.n)}, own), nil, true, false)
			require.True(t, ok)
			assert.NotSame(t, unsafe.SliceData(own), unsafe.SliceData(tensor.RelaidOf(rt).Packed), "%dx%d: no room, new memory", c.k, c.n)
			assert.Equal(t, orig, own, "%dx%d: without room the weight is left as it was", c.k, c.n)
			assert.Equal(t, want, tensor.RelaidOf(rt).Packed)
		}
	}
}

// A short product (at most packStreamMaxRows rows) of a packed B that streams from memory
// reads several panels side by side (gemm_nn's PS), as many as its accumulators leave room
// for in the vector registers (AVX2: 16 of 32 bytes, AVX-512: 32 of 64), each tile as wide as
// PS panels; tall products, and B small enough to stay in the caches, read one at a time.
func TestShortProductsReadPanelsSideBySide(t *testing.T) {
	for _, c := range []struct {
		target    string
		m, k, n   int
		ps, nv    int // 0: no PS
		panelCols int
	}{
		{"host-x86_64-v3", 1, 768, 3072, 4, 4, 16},
		{"host-x86_64-v3", 1, 768, 50257, 4, 4, 16},
		{"host-x86_64-v3", 2, 768, 2304, 3, 3, 16}, // 2 rows x 3 vectors of 2 registers, and a broadcast
		{"host-x86_64-v3", 4, 768, 2304, 0, 1, 16},
		{"host-x86_64-v3", 128, 768, 3072, 0, 1, 16},
		{"host-x86_64-v4", 1, 768, 3072, 4, 12, 48},
		{"host-x86_64-v4", 4, 768, 3072, 2, 6, 48},
		{"host-x86_64-v3", 1, 256, 1000, 0, 1, 16}, // 1,000 KB: stays in the caches
	} {
		restore := SetVectorFile(loom.MustParseTarget(c.target))
		w := tensor.MustTensor([]int64{int64(c.k), int64(c.n)}, make([]float32, c.k*c.n))
		var r Relayer
		rt, ok := r.Relay(w, false, false)
		require.True(t, ok, "%+v: packed", c)
		in := []ops.ValueInfo{
			{ValueType: ops.ValueType{Dtype: graph.Float, Shape: []int64{int64(c.m), int64(c.k)}}, Present: true},
			{ValueType: ops.ValueType{Dtype: graph.Float, Shape: []int64{int64(c.k), int64(c.n)}}, Present: true, Static: rt},
		}
		p, why, err := planMatMul(graph.NewNode("mm", "MatMul", []string{"a", "b"}, []string{"y"}), 13, in)
		restore()
		require.NoError(t, err)
		require.NotNil(t, p, why)
		require.Len(t, p.Calls, 1)
		cfg := p.Calls[0].Config
		assert.Equal(t, "true", cfg["PACKB"], "%+v", c)
		if c.ps == 0 {
			assert.NotContains(t, cfg, "PS", "%+v", c)
		} else {
			assert.Equal(t, strconv.Itoa(c.ps), cfg["PS"], "%+v", c)
		}
		assert.Equal(t, strconv.Itoa(c.nv), cfg["NV"], "%+v", c)
		vl, _ := strconv.Atoi(cfg["VL"])
		assert.Equal(t, c.panelCols, c.nv/max(c.ps, 1)*vl, "%+v: the panels' width", c)
		assert.Equal(t, fmt.Sprintf("gemm_nn.PACKB k=%d n=%d strides=%d,1 nr=%d", c.k, c.n, c.n, c.panelCols), tensor.RelaidOf(rt).Layout, "%+v", c)
	}
}
