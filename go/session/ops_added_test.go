package session

import (
	"math"
	"testing"

	"github.com/loomrt/loom/go/graph"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAddedOpsMatchReferences checks the newer host ops against independent formulations
// on fresh random inputs.
func TestAddedOpsMatchReferences(t *testing.T) {
	rnd := inferRand()
	rc := &runCtx{opset: 17}
	a, b := MustTensor([]int64{3, 4}, randomF32(rnd, 12)), MustTensor([]int64{4, 5}, randomF32(rnd, 20))

	// Einsum "ij,jk->ik" is MatMul.
	got, err := opEinsum(rc, graph.NewNode("e", "Einsum", nil, []string{"y"}, graph.StringAttr("equation", "ij,jk->ik")), []Tensor{a, b})
	require.NoError(t, err)
	want, err := matmulHost(a, b)
	require.NoError(t, err)
	assert.InDeltaSlice(t, want.float64s(), got[0].float64s(), 1e-5)

	// ConvTranspose with stride 1 and no padding equals Conv of the fully padded input with
	// the flipped, channel-swapped kernel.
	x := MustTensor([]int64{1, 2, 4, 5}, randomF32(rnd, 40))
	w := MustTensor([]int64{2, 3, 3, 2}, randomF32(rnd, 36))
	ct, err := opConvTranspose(rc, graph.NewNode("ct", "ConvTranspose", nil, []string{"y"}), []Tensor{x, w, {}})
	require.NoError(t, err)
	flipped := make([]float32, 36)
	wv := w.Data().([]float32)
	for ic := 0; ic < 2; ic++ {
		for oc := 0; oc < 3; oc++ {
			for i := 0; i < 3; i++ {
				for j := 0; j < 2; j++ {
					flipped[((oc*2+ic)*3+i)*2+j] = wv[((ic*3+oc)*3+(2-i))*2+(1-j)]
				}
			}
		}
	}
	cn := graph.NewNode("c", "Conv", nil, []string{"y"}, graph.IntsAttr("pads", 2, 1, 2, 1))
	p, err := convParamsOf(cn, x.shape, []int64{3, 2, 3, 2})
	require.NoError(t, err)
	ref, err := convHost(x, MustTensor([]int64{3, 2, 3, 2}, flipped), Tensor{}, p)
	require.NoError(t, err)
	require.Equal(t, ref.Shape(), ct[0].Shape())
	assert.InDeltaSlice(t, ref.float64s(), ct[0].float64s(), 1e-4)

	// DequantizeLinear(QuantizeLinear(v)) is within half a step of v inside the range.
	v := randomF32(rnd, 16)
	scale, zp := MustTensor([]int64{}, []float32{0.01}), MustTensor([]int64{}, []uint8{128})
	q, err := hostOps["QuantizeLinear"](rc, graph.NewNode("q", "QuantizeLinear", nil, []string{"y"}), []Tensor{MustTensor([]int64{16}, v), scale, zp})
	require.NoError(t, err)
	dq, err := hostOps["DequantizeLinear"](rc, graph.NewNode("d", "DequantizeLinear", nil, []string{"y"}), []Tensor{q[0], scale, zp})
	require.NoError(t, err)
	for i, e := range dq[0].float64s() {
		if math.Abs(float64(v[i])) < 1.2 {
			assert.InDelta(t, float64(v[i]), e, 0.005+1e-6, "element %d", i)
		}
	}

	// Unsupported attribute combinations are refused with a reason.
	_, err = opResize(rc, graph.NewNode("r", "Resize", nil, []string{"y"}, graph.IntAttr("antialias", 1)), []Tensor{x, {}, MustTensor([]int64{4}, []float32{1, 1, 2, 2})})
	assert.ErrorContains(t, err, "antialias")
}
