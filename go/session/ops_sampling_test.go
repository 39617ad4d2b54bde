package session

import (
	"math"
	"testing"

	"github.com/loomrt/loom/go/graph"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// identityGrid is the (N, H, W, 2) grid whose samples land exactly on the input's pixels: pixel
// corners for align_corners=1, pixel centres otherwise.
func identityGrid(n, h, w int, alignCorners bool) Tensor {
	coord := func(i, size int) float32 {
		if alignCorners {
			if size == 1 {
				return 0
			}
			return float32(2*float64(i)/float64(size-1) - 1)
		}
		return float32((2*float64(i)+1)/float64(size) - 1)
	}
	g := make([]float32, 0, n*h*w*2)
	for b := 0; b < n; b++ {
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				g = append(g, coord(x, w), coord(y, h))
			}
		}
	}
	return MustTensor([]int64{int64(n), int64(h), int64(w), 2}, g)
}

func TestGridSampleIdentityGridReproducesInput(t *testing.T) {
	rnd := inferRand()
	rc := &runCtx{opset: 20}
	x := MustTensor([]int64{2, 3, 4, 5}, randomF32(rnd, 120))
	for _, mode := range []string{"linear", "bilinear", "nearest", "cubic", "bicubic"} {
		for _, padding := range []string{"zeros", "border", "reflection"} {
			for _, align := range []int64{0, 1} {
				n := graph.NewNode("g", "GridSample", nil, []string{"y"},
					graph.StringAttr("mode", mode), graph.StringAttr("padding_mode", padding), graph.IntAttr("align_corners", align))
				got, err := opGridSample(rc, n, []Tensor{x, identityGrid(2, 4, 5, align == 1)})
				require.NoError(t, err)
				require.Equal(t, x.Shape(), got[0].Shape())
				assert.InDeltaSlice(t, x.float64s(), got[0].float64s(), 1e-5, "%s %s align_corners=%d", mode, padding, align)
			}
		}
	}
}

// TestGridSampleBilinearMatchesDirectFormula checks random grids (some beyond [-1, 1]) against
// the textbook four-corner bilinear formula with zero padding.
func TestGridSampleBilinearMatchesDirectFormula(t *testing.T) {
	rnd := inferRand()
	const h, w, oh, ow = 4, 6, 3, 5
	x := MustTensor([]int64{1, 2, h, w}, randomF32(rnd, 2*h*w))
	gv := randomF32(rnd, oh*ow*2)
	for i := range gv {
		gv[i] *= 1.3
	}
	grid := MustTensor([]int64{1, oh, ow, 2}, gv)
	got, err := opGridSample(&runCtx{opset: 16}, graph.NewNode("g", "GridSample", nil, []string{"y"}, graph.StringAttr("mode", "bilinear")), []Tensor{x, grid})
	require.NoError(t, err)
	xv := x.float64s()
	pixel := func(c, y, xx int) float64 {
		if y < 0 || y >= h || xx < 0 || xx >= w {
			return 0
		}
		return xv[(c*h+y)*w+xx]
	}
	want := make([]float64, 0, 2*oh*ow)
	for c := 0; c < 2; c++ {
		for o := 0; o < oh*ow; o++ {
			fx := ((float64(gv[2*o])+1)*w - 1) / 2
			fy := ((float64(gv[2*o+1])+1)*h - 1) / 2
			x0, y0 := int(math.Floor(fx)), int(math.Floor(fy))
			ax, ay := fx-float64(x0), fy-float64(y0)
			want = append(want, (1-ay)*((1-ax)*pixel(c, y0, x0)+ax*pixel(c, y0, x0+1))+
				ay*((1-ax)*pixel(c, y0+1, x0)+ax*pixel(c, y0+1, x0+1)))
		}
	}
	assert.InDeltaSlice(t, want, got[0].float64s(), 1e-5)

	_, err = opGridSample(&runCtx{opset: 20}, graph.NewNode("g", "GridSample", nil, []string{"y"}, graph.StringAttr("mode", "area")), []Tensor{x, grid})
	assert.ErrorContains(t, err, "mode")
}

func TestRoiAlignWholeImageOfConstantImage(t *testing.T) {
	rnd := inferRand()
	const h, w = 5, 7
	value := rnd.Float32()*4 - 2
	img := make([]float32, 2*3*h*w)
	for i := range img {
		img[i] = value
	}
	x := MustTensor([]int64{2, 3, h, w}, img)
	rois := MustTensor([]int64{2, 4}, []float32{0, 0, w, h, 0, 0, w - 1, h - 1})
	batch := MustTensor([]int64{2}, []int64{1, 0})
	for _, ctm := range []string{"half_pixel", "output_half_pixel"} {
		oh, ow := 1+rnd.IntN(4), 1+rnd.IntN(4)
		n := graph.NewNode("r", "RoiAlign", nil, []string{"y"}, graph.StringAttr("coordinate_transformation_mode", ctm),
			graph.IntAttr("output_height", int64(oh)), graph.IntAttr("output_width", int64(ow)), graph.IntAttr("sampling_ratio", int64(rnd.IntN(3))))
		got, err := opRoiAlign(&runCtx{opset: 16}, n, []Tensor{x, rois, batch})
		require.NoError(t, err)
		require.Equal(t, []int64{2, 3, int64(oh), int64(ow)}, got[0].Shape())
		for i, v := range got[0].float64s() {
			assert.InDelta(t, float64(value), v, 1e-5, "%s element %d", ctm, i)
		}
	}
	_, err := opRoiAlign(&runCtx{opset: 16}, graph.NewNode("r", "RoiAlign", nil, []string{"y"}), []Tensor{x, rois, MustTensor([]int64{2}, []int64{0, 2})})
	assert.ErrorContains(t, err, "batch index 2")
}

// TestMaxUnpoolInvertsMaxPool pools a random input with indices, unpools it, and pools again:
// the maxima must come back unchanged and everything else must be zero. The input is positive
// so that the zeros MaxUnpool writes never win the second pooling.
func TestMaxUnpoolInvertsMaxPool(t *testing.T) {
	rnd := inferRand()
	positive := randomF32(rnd, 2*3*6*8)
	for i := range positive {
		positive[i] = positive[i] + 1.5
	}
	x := MustTensor([]int64{2, 3, 6, 8}, positive)
	attrs := []*graph.Attribute{graph.IntsAttr("kernel_shape", 2, 2), graph.IntsAttr("strides", 2, 2)}
	pooled, err := maxPoolWithIndices(graph.NewNode("p", "MaxPool", nil, []string{"y", "i"}, attrs...), x)
	require.NoError(t, err)
	un, err := opMaxUnpool(&runCtx{opset: 11}, graph.NewNode("u", "MaxUnpool", nil, []string{"y"}, attrs...), pooled[:2])
	require.NoError(t, err)
	require.Equal(t, x.Shape(), un[0].Shape())
	again, err := maxPoolWithIndices(graph.NewNode("p", "MaxPool", nil, []string{"y", "i"}, attrs...), un[0])
	require.NoError(t, err)
	assert.Equal(t, pooled[0].float64s(), again[0].float64s())
	nonzero := 0
	for _, v := range un[0].float64s() {
		if v != 0 {
			nonzero++
		}
	}
	assert.Equal(t, pooled[0].Len(), nonzero)
}

func TestBatchNormTrainingUpdatesRunningStats(t *testing.T) {
	rnd := inferRand()
	const n, c, inner = 3, 4, 5
	x := MustTensor([]int64{n, c, inner}, randomF32(rnd, n*c*inner))
	scale, bias := MustTensor([]int64{c}, randomF32(rnd, c)), MustTensor([]int64{c}, randomF32(rnd, c))
	mean, vr := MustTensor([]int64{c}, randomF32(rnd, c)), MustTensor([]int64{c}, randomF32(rnd, c))
	for i := range vr.Data().([]float32) {
		vr.Data().([]float32)[i] += 2
	}
	const momentum = 0.7
	node := graph.NewNode("b", "BatchNormalization", nil, []string{"y", "m", "v"},
		graph.IntAttr("training_mode", 1), graph.FloatAttr("momentum", momentum), graph.FloatAttr("epsilon", 1e-5))
	got, err := hostOps["BatchNormalization"](&runCtx{opset: 15}, node, []Tensor{x, scale, bias, mean, vr})
	require.NoError(t, err)
	require.Len(t, got, 3)
	xv, yv := x.float64s(), got[0].float64s()
	for ch := 0; ch < c; ch++ {
		var vals []float64
		for b := 0; b < n; b++ {
			vals = append(vals, xv[(b*c+ch)*inner:(b*c+ch+1)*inner]...)
		}
		bm, bv := meanVar(vals)
		assert.InDelta(t, momentum*mean.float64s()[ch]+(1-momentum)*bm, got[1].float64s()[ch], 1e-6)
		assert.InDelta(t, momentum*vr.float64s()[ch]+(1-momentum)*bv, got[2].float64s()[ch], 1e-6)
		for b := 0; b < n; b++ {
			for k := 0; k < inner; k++ {
				i := (b*c+ch)*inner + k
				want := scale.float64s()[ch]*(xv[i]-bm)/math.Sqrt(bv+1e-5) + bias.float64s()[ch]
				assert.InDelta(t, want, yv[i], 1e-5)
			}
		}
	}
}

// TestGridSamplePaddingModesMatchFoldedGrids checks border and reflection padding (with
// align_corners=1, whose bounds are the corner pixels) against sampling a grid already clamped
// or mirrored into [-1, 1].
func TestGridSamplePaddingModesMatchFoldedGrids(t *testing.T) {
	rnd := inferRand()
	rc := &runCtx{opset: 20}
	x := MustTensor([]int64{1, 2, 5, 4}, randomF32(rnd, 40))
	raw := randomF32(rnd, 3*4*2)
	clamped, mirrored := make([]float32, len(raw)), make([]float32, len(raw))
	for i := range raw {
		raw[i] *= 2.5 // in [-2.5, 2.5]: up to one reflection on either side
		clamped[i] = max(-1, min(1, raw[i]))
		switch m := raw[i]; {
		case m > 1 && m <= 3:
			mirrored[i] = 2 - m
		case m < -1 && m >= -3:
			mirrored[i] = -2 - m
		default:
			mirrored[i] = m
		}
	}
	sample := func(mode, padding string, g []float32) []float64 {
		n := graph.NewNode("g", "GridSample", nil, []string{"y"}, graph.StringAttr("mode", mode),
			graph.StringAttr("padding_mode", padding), graph.IntAttr("align_corners", 1))
		got, err := opGridSample(rc, n, []Tensor{x, MustTensor([]int64{1, 3, 4, 2}, g)})
		require.NoError(t, err)
		return got[0].float64s()
	}
	for _, mode := range []string{"linear", "cubic"} {
		assert.InDeltaSlice(t, sample(mode, "border", clamped), sample(mode, "border", raw), 1e-5, mode)
		assert.InDeltaSlice(t, sample(mode, "reflection", mirrored), sample(mode, "reflection", raw), 1e-5, mode)
	}
	assert.InDeltaSlice(t, sample("linear", "zeros", clamped), sample("linear", "border", clamped), 1e-5,
		"inside [-1, 1] with align_corners=1 padding never applies to linear sampling")
}
