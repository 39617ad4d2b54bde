package session

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/arith"
	"github.com/loomrt/loom/go/session/internal/ops/nn"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// TestAddedOpsMatchReferences checks the newer host ops against independent formulations
// on fresh random inputs.
func TestAddedOpsMatchReferences(t *testing.T) {
	rnd := inferRand()
	rc := testRunCtx(nil, 17)
	a, b := tensor.MustTensor([]int64{3, 4}, randomF32(rnd, 12)), tensor.MustTensor([]int64{4, 5}, randomF32(rnd, 20))

	// Einsum "ij,jk->ik" is MatMul.
	got, err := arith.OpEinsum(rc, graph.NewNode("e", "Einsum", nil, []string{"y"}, graph.StringAttr("equation", "ij,jk->ik")), []tensor.Tensor{a, b})
	require.NoError(t, err)
	want, err := ops.MatmulHost(a, b)
	require.NoError(t, err)
	assert.InDeltaSlice(t, tensor.Float64s(want), tensor.Float64s(got[0]), 1e-5)

	// ConvTranspose with stride 1 and no padding equals Conv of the fully padded input with
	// the flipped, channel-swapped kernel.
	x := tensor.MustTensor([]int64{1, 2, 4, 5}, randomF32(rnd, 40))
	w := tensor.MustTensor([]int64{2, 3, 3, 2}, randomF32(rnd, 36))
	ct, err := nn.OpConvTranspose(rc, graph.NewNode("ct", "ConvTranspose", nil, []string{"y"}), []tensor.Tensor{x, w, {}})
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
	p, err := ops.ConvParamsOf(cn, x.Dims(), []int64{3, 2, 3, 2})
	require.NoError(t, err)
	ref, err := ops.ConvHost(nil, x, tensor.MustTensor([]int64{3, 2, 3, 2}, flipped), tensor.Tensor{}, p)
	require.NoError(t, err)
	require.Equal(t, ref.Shape(), ct[0].Shape())
	assert.InDeltaSlice(t, tensor.Float64s(ref), tensor.Float64s(ct[0]), 1e-4)

	// DequantizeLinear(QuantizeLinear(v)) is within half a step of v inside the range.
	v := randomF32(rnd, 16)
	scale, zp := tensor.MustTensor([]int64{}, []float32{0.01}), tensor.MustTensor([]int64{}, []uint8{128})
	q, err := ops.HostOps["QuantizeLinear"](rc, graph.NewNode("q", "QuantizeLinear", nil, []string{"y"}), []tensor.Tensor{tensor.MustTensor([]int64{16}, v), scale, zp})
	require.NoError(t, err)
	dq, err := ops.HostOps["DequantizeLinear"](rc, graph.NewNode("d", "DequantizeLinear", nil, []string{"y"}), []tensor.Tensor{q[0], scale, zp})
	require.NoError(t, err)
	for i, e := range tensor.Float64s(dq[0]) {
		if math.Abs(float64(v[i])) < 1.2 {
			assert.InDelta(t, float64(v[i]), e, 0.005+1e-6, "element %d", i)
		}
	}

	// antialias changes downsampling only (the node suite checks it there): upsampling with it
	// is upsampling without it.
	up := []tensor.Tensor{x, {}, tensor.MustTensor([]int64{4}, []float32{1, 1, 2, 2})}
	aa, err := nn.OpResize(rc, graph.NewNode("r", "Resize", nil, []string{"y"}, graph.IntAttr("antialias", 1), graph.StringAttr("mode", "linear")), up)
	require.NoError(t, err)
	plain, err := nn.OpResize(rc, graph.NewNode("r", "Resize", nil, []string{"y"}, graph.StringAttr("mode", "linear")), up)
	require.NoError(t, err)
	assert.Equal(t, tensor.Float64s(plain[0]), tensor.Float64s(aa[0]))
}
