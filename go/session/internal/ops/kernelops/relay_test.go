package kernelops

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
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
		{k: 200, n: 400, packs: false},   // k under packBLongK
		{k: 256, n: 33000, packs: false}, // over packBLongMaxBytes
		{k: 32, n: 1024, packs: false},   // 128 KiB: small enough to stay in the caches
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
