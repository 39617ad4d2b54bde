package session

import (
	"context"
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

// identityGrid is the (N, H, W, 2) grid whose samples land exactly on the input's pixels: pixel
// corners for align_corners=1, pixel centres otherwise.
func identityGrid(n, h, w int, alignCorners bool) tensor.Tensor {
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
	return tensor.MustTensor([]int64{int64(n), int64(h), int64(w), 2}, g)
}

func TestGridSampleIdentityGridReproducesInput(t *testing.T) {
	rnd := inferRand()
	rc := testRunCtx(nil, 20)
	x := tensor.MustTensor([]int64{2, 3, 4, 5}, randomF32(rnd, 120))
	for _, mode := range []string{"linear", "bilinear", "nearest", "cubic", "bicubic"} {
		for _, padding := range []string{"zeros", "border", "reflection"} {
			for _, align := range []int64{0, 1} {
				n := graph.NewNode("g", "GridSample", nil, []string{"y"},
					graph.StringAttr("mode", mode), graph.StringAttr("padding_mode", padding), graph.IntAttr("align_corners", align))
				got, err := nn.OpGridSample(rc, n, []tensor.Tensor{x, identityGrid(2, 4, 5, align == 1)})
				require.NoError(t, err)
				require.Equal(t, x.Shape(), got[0].Shape())
				assert.InDeltaSlice(t, tensor.Float64s(x), tensor.Float64s(got[0]), 1e-5, "%s %s align_corners=%d", mode, padding, align)
			}
		}
	}
}

// TestGridSampleBilinearMatchesDirectFormula checks random grids (some beyond [-1, 1]) against
// the textbook four-corner bilinear formula with zero padding.
func TestGridSampleBilinearMatchesDirectFormula(t *testing.T) {
	rnd := inferRand()
	const h, w, oh, ow = 4, 6, 3, 5
	x := tensor.MustTensor([]int64{1, 2, h, w}, randomF32(rnd, 2*h*w))
	gv := randomF32(rnd, oh*ow*2)
	for i := range gv {
		gv[i] *= 1.3
	}
	grid := tensor.MustTensor([]int64{1, oh, ow, 2}, gv)
	got, err := nn.OpGridSample(testRunCtx(nil, 16), graph.NewNode("g", "GridSample", nil, []string{"y"}, graph.StringAttr("mode", "bilinear")), []tensor.Tensor{x, grid})
	require.NoError(t, err)
	xv := tensor.Float64s(x)
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
	assert.InDeltaSlice(t, want, tensor.Float64s(got[0]), 1e-5)

	_, err = nn.OpGridSample(testRunCtx(nil, 20), graph.NewNode("g", "GridSample", nil, []string{"y"}, graph.StringAttr("mode", "area")), []tensor.Tensor{x, grid})
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
	x := tensor.MustTensor([]int64{2, 3, h, w}, img)
	rois := tensor.MustTensor([]int64{2, 4}, []float32{0, 0, w, h, 0, 0, w - 1, h - 1})
	batch := tensor.MustTensor([]int64{2}, []int64{1, 0})
	for _, ctm := range []string{"half_pixel", "output_half_pixel"} {
		oh, ow := 1+rnd.IntN(4), 1+rnd.IntN(4)
		n := graph.NewNode("r", "RoiAlign", nil, []string{"y"}, graph.StringAttr("coordinate_transformation_mode", ctm),
			graph.IntAttr("output_height", int64(oh)), graph.IntAttr("output_width", int64(ow)), graph.IntAttr("sampling_ratio", int64(rnd.IntN(3))))
		got, err := nn.OpRoiAlign(testRunCtx(nil, 16), n, []tensor.Tensor{x, rois, batch})
		require.NoError(t, err)
		require.Equal(t, []int64{2, 3, int64(oh), int64(ow)}, got[0].Shape())
		for i, v := range tensor.Float64s(got[0]) {
			assert.InDelta(t, float64(value), v, 1e-5, "%s element %d", ctm, i)
		}
	}
	_, err := nn.OpRoiAlign(testRunCtx(nil, 16), graph.NewNode("r", "RoiAlign", nil, []string{"y"}), []tensor.Tensor{x, rois, tensor.MustTensor([]int64{2}, []int64{0, 2})})
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
	x := tensor.MustTensor([]int64{2, 3, 6, 8}, positive)
	attrs := []*graph.Attribute{graph.IntsAttr("kernel_shape", 2, 2), graph.IntsAttr("strides", 2, 2)}
	pooled, err := nn.MaxPoolWithIndices(nil, graph.NewNode("p", "MaxPool", nil, []string{"y", "i"}, attrs...), x)
	require.NoError(t, err)
	un, err := nn.OpMaxUnpool(testRunCtx(nil, 11), graph.NewNode("u", "MaxUnpool", nil, []string{"y"}, attrs...), pooled[:2])
	require.NoError(t, err)
	require.Equal(t, x.Shape(), un[0].Shape())
	again, err := nn.MaxPoolWithIndices(nil, graph.NewNode("p", "MaxPool", nil, []string{"y", "i"}, attrs...), un[0])
	require.NoError(t, err)
	assert.Equal(t, tensor.Float64s(pooled[0]), tensor.Float64s(again[0]))
	nonzero := 0
	for _, v := range tensor.Float64s(un[0]) {
		if v != 0 {
			nonzero++
		}
	}
	assert.Equal(t, pooled[0].Len(), nonzero)
}

func TestBatchNormTrainingUpdatesRunningStats(t *testing.T) {
	rnd := inferRand()
	const n, c, inner = 3, 4, 5
	x := tensor.MustTensor([]int64{n, c, inner}, randomF32(rnd, n*c*inner))
	scale, bias := tensor.MustTensor([]int64{c}, randomF32(rnd, c)), tensor.MustTensor([]int64{c}, randomF32(rnd, c))
	mean, vr := tensor.MustTensor([]int64{c}, randomF32(rnd, c)), tensor.MustTensor([]int64{c}, randomF32(rnd, c))
	for i := range vr.Data().([]float32) {
		vr.Data().([]float32)[i] += 2
	}
	const momentum = 0.7
	node := graph.NewNode("b", "BatchNormalization", nil, []string{"y", "m", "v"},
		graph.IntAttr("training_mode", 1), graph.FloatAttr("momentum", momentum), graph.FloatAttr("epsilon", 1e-5))
	got, err := ops.HostOps["BatchNormalization"](testRunCtx(nil, 15), node, []tensor.Tensor{x, scale, bias, mean, vr})
	require.NoError(t, err)
	require.Len(t, got, 3)
	xv, yv := tensor.Float64s(x), tensor.Float64s(got[0])
	for ch := 0; ch < c; ch++ {
		var vals []float64
		for b := 0; b < n; b++ {
			vals = append(vals, xv[(b*c+ch)*inner:(b*c+ch+1)*inner]...)
		}
		bm, bv := nn.MeanVar(vals)
		assert.InDelta(t, momentum*tensor.Float64s(mean)[ch]+(1-momentum)*bm, tensor.Float64s(got[1])[ch], 1e-6)
		assert.InDelta(t, momentum*tensor.Float64s(vr)[ch]+(1-momentum)*bv, tensor.Float64s(got[2])[ch], 1e-6)
		for b := 0; b < n; b++ {
			for k := 0; k < inner; k++ {
				i := (b*c+ch)*inner + k
				want := tensor.Float64s(scale)[ch]*(xv[i]-bm)/math.Sqrt(bv+1e-5) + tensor.Float64s(bias)[ch]
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
	rc := testRunCtx(nil, 20)
	x := tensor.MustTensor([]int64{1, 2, 5, 4}, randomF32(rnd, 40))
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
		got, err := nn.OpGridSample(rc, n, []tensor.Tensor{x, tensor.MustTensor([]int64{1, 3, 4, 2}, g)})
		require.NoError(t, err)
		return tensor.Float64s(got[0])
	}
	for _, mode := range []string{"linear", "cubic"} {
		assert.InDeltaSlice(t, sample(mode, "border", clamped), sample(mode, "border", raw), 1e-5, mode)
		assert.InDeltaSlice(t, sample(mode, "reflection", mirrored), sample(mode, "reflection", raw), 1e-5, mode)
	}
	assert.InDeltaSlice(t, sample("linear", "zeros", clamped), sample("linear", "border", clamped), 1e-5,
		"inside [-1, 1] with align_corners=1 padding never applies to linear sampling")
}

// randomTestDelta bounds the probability that one statistical assertion below fails a correct
// generator.
const randomTestDelta = 1e-9

// bernsteinDeviation is the t with P(|S - E S| >= t) <= delta for a sum of independent terms
// within 1 of their means whose variances sum to variance.
func bernsteinDeviation(variance, delta float64) float64 {
	l := math.Log(2 / delta)
	return l/3 + math.Sqrt(l*l/9+2*l*variance)
}

// relativeSpacing is the spacing of dt's values at 1, which bounds its relative rounding error.
func relativeSpacing(dt tensor.DType) float64 {
	switch dt {
	case graph.Float16:
		return 0x1p-10
	case graph.BFloat16:
		return 0x1p-7
	case graph.Float:
		return 0x1p-23
	}
	return 0x1p-52
}

func TestRandomUniformDistributionAndTypes(t *testing.T) {
	rnd := inferRand()
	rc := testRunCtx(nil, 22)
	for _, dt := range []tensor.DType{graph.Float16, graph.BFloat16, graph.Float, graph.Double} {
		low := float32(rnd.Float64()*4 - 3)
		high := low + 0.5 + float32(rnd.Float64()*4)
		n := graph.NewNode("u", "RandomUniform", nil, []string{"y"}, graph.IntsAttr("shape", 64, 64),
			graph.IntAttr("dtype", int64(dt)), graph.FloatAttr("low", low), graph.FloatAttr("high", high))
		got, err := arith.OpRandomUniform(rc, n, nil)
		require.NoError(t, err)
		require.Equal(t, dt, got[0].DType())
		require.Equal(t, []int64{64, 64}, got[0].Shape())
		v := tensor.Float64s(got[0])
		lo, hi := float64(low), float64(high)
		for i, x := range v {
			require.True(t, x >= lo && x < hi, "%s element %d is %v, outside [%v, %v)", dt, i, x, lo, hi)
		}
		// Hoeffding for the mean and the variance about the centre, widened by the rounding.
		mean, variance := nn.MeanVar(v)
		spread := math.Sqrt(math.Log(2/randomTestDelta) / (2 * float64(len(v))))
		rounding := relativeSpacing(dt) * math.Max(math.Abs(lo), math.Abs(hi))
		assert.InDelta(t, (lo+hi)/2, mean, (hi-lo)*spread+rounding, "%s mean", dt)
		assert.InDelta(t, (hi-lo)*(hi-lo)/12, variance+(mean-(lo+hi)/2)*(mean-(lo+hi)/2), (hi-lo)*(hi-lo)/4*spread+rounding*(hi-lo), "%s variance", dt)
	}
	// The *Like form takes the input's shape, and its type unless dtype says otherwise.
	x := tensor.MustTensor([]int64{5, 7}, make([]tensor.Float16, 35))
	like := graph.NewNode("u", "RandomUniformLike", []string{"x"}, []string{"y"})
	got, err := arith.OpRandomUniform(rc, like, []tensor.Tensor{x})
	require.NoError(t, err)
	assert.Equal(t, graph.Float16, got[0].DType())
	assert.Equal(t, []int64{5, 7}, got[0].Shape())
	like.SetAttr(graph.IntAttr("dtype", int64(graph.Double)))
	got, err = arith.OpRandomUniform(rc, like, []tensor.Tensor{x})
	require.NoError(t, err)
	assert.Equal(t, graph.Double, got[0].DType())
	_, err = arith.OpRandomUniform(rc, graph.NewNode("u", "RandomUniformLike", []string{"x"}, []string{"y"}), []tensor.Tensor{ops.I64Tensor([]int64{3}, []int64{1, 2, 3})})
	assert.ErrorContains(t, err, "int64 (the input's type) is not supported")
	_, err = arith.OpRandomUniform(rc, graph.NewNode("u", "RandomUniform", nil, []string{"y"}, graph.IntsAttr("shape", 2),
		graph.FloatAttr("low", 2), graph.FloatAttr("high", 1)), nil)
	assert.ErrorContains(t, err, "low <= high")
	_, err = arith.OpRandomUniform(rc, graph.NewNode("u", "RandomUniform", nil, []string{"y"}), nil)
	assert.ErrorContains(t, err, "attribute shape is required")
}

func TestRandomNormalDistributionAndTypes(t *testing.T) {
	rnd := inferRand()
	rc := testRunCtx(nil, 22)
	for _, dt := range []tensor.DType{graph.Float16, graph.BFloat16, graph.Float, graph.Double} {
		mean, scale := float32(rnd.Float64()*4-2), float32(0.25+rnd.Float64()*2)
		n := graph.NewNode("n", "RandomNormal", nil, []string{"y"}, graph.IntsAttr("shape", 4096),
			graph.IntAttr("dtype", int64(dt)), graph.FloatAttr("mean", mean), graph.FloatAttr("scale", scale))
		got, err := arith.OpRandomNormal(rc, n, nil)
		require.NoError(t, err)
		require.Equal(t, dt, got[0].DType())
		v := tensor.Float64s(got[0])
		mu, sigma := float64(mean), float64(scale)
		rounding := relativeSpacing(dt) * (math.Abs(mu) + 7*sigma)
		// The sample mean is normal with deviation sigma/sqrt(n); the sum of squared deviations
		// from the mean over sigma² is chi-square(n) (Laurent-Massart bounds).
		z := math.Sqrt2 * math.Erfcinv(randomTestDelta)
		m, _ := nn.MeanVar(v)
		assert.InDelta(t, mu, m, z*sigma/math.Sqrt(float64(len(v)))+rounding, "%s mean", dt)
		q := 0.0
		for _, x := range v {
			require.Less(t, math.Abs(x-mu), 7*sigma+rounding, "%s value %v", dt, x)
			q += (x - mu) * (x - mu) / (sigma * sigma)
		}
		nf, xl := float64(len(v)), math.Log(2/randomTestDelta)
		slack := 2 * rounding / sigma * math.Sqrt(q*nf) // rounding moves each |x - mu| by at most rounding
		assert.Less(t, q, nf+2*math.Sqrt(nf*xl)+2*xl+slack, "%s variance", dt)
		assert.Greater(t, q, nf-2*math.Sqrt(nf*xl)-slack, "%s variance", dt)
	}
	like := graph.NewNode("n", "RandomNormalLike", []string{"x"}, []string{"y"})
	got, err := arith.OpRandomNormal(rc, like, []tensor.Tensor{tensor.MustTensor([]int64{2, 3}, make([]float64, 6))})
	require.NoError(t, err)
	assert.Equal(t, graph.Double, got[0].DType())
	assert.Equal(t, []int64{2, 3}, got[0].Shape())
	_, err = arith.OpRandomNormal(rc, graph.NewNode("n", "RandomNormal", nil, []string{"y"}, graph.IntsAttr("shape", 2),
		graph.IntAttr("dtype", int64(graph.Int32))), nil)
	assert.ErrorContains(t, err, "int32 (attribute dtype) is not supported")
}

// The random generators reserve their output from the run's memory budget before allocating
// it: a shape attribute of 2^40 elements is an error, not an out-of-memory crash (the fuzzer
// found RandomNormal allocating terabytes).
func TestRandomGeneratorsRefuseHostileShapes(t *testing.T) {
	rc := testRunCtx(nil, 22)
	huge := graph.IntsAttr("shape", 1<<20, 1<<20)
	_, err := arith.OpRandomNormal(rc, graph.NewNode("n", "RandomNormal", nil, []string{"y"}, huge), nil)
	require.Error(t, err)
	_, err = arith.OpRandomUniform(rc, graph.NewNode("u", "RandomUniform", nil, []string{"y"}, huge), nil)
	require.Error(t, err)
	x := tensor.MustTensor([]int64{1, 2}, []float32{0.5, 0.5})
	_, err = arith.OpMultinomial(rc, graph.NewNode("m", "Multinomial", []string{"x"}, []string{"y"}, graph.IntAttr("sample_size", 1<<40)), []tensor.Tensor{x})
	require.Error(t, err)
}

func TestBernoulliFrequenciesAndTypes(t *testing.T) {
	rnd := inferRand()
	rc := testRunCtx(nil, 22)
	// Four groups of 5000 elements with fresh probabilities, plus the exact ends 0 and 1.
	const group = 5000
	probs := []float64{rnd.Float64() * 0.3, 0.3 + rnd.Float64()*0.4, 0.7 + rnd.Float64()*0.3, rnd.Float64(), 0, 1}
	p := make([]float64, group*len(probs))
	for i := range p {
		p[i] = probs[i/group]
	}
	x := tensor.MustTensor([]int64{int64(len(probs)), group}, p)
	got, err := arith.OpBernoulli(rc, graph.NewNode("b", "Bernoulli", []string{"x"}, []string{"y"}), []tensor.Tensor{x})
	require.NoError(t, err)
	require.Equal(t, graph.Double, got[0].DType(), "the input's type without dtype")
	require.Equal(t, x.Shape(), got[0].Shape())
	v := tensor.Float64s(got[0])
	for g, q := range probs {
		ones := 0.0
		for _, b := range v[g*group : (g+1)*group] {
			require.True(t, b == 0 || b == 1, "value %v", b)
			ones += b
		}
		assert.InDelta(t, group*q, ones, bernsteinDeviation(group*q*(1-q), randomTestDelta), "group %d, p = %v", g, q)
	}
	for _, dt := range []tensor.DType{graph.Bool, graph.Int32, graph.Float16} {
		got, err := arith.OpBernoulli(rc, graph.NewNode("b", "Bernoulli", []string{"x"}, []string{"y"}, graph.IntAttr("dtype", int64(dt))),
			[]tensor.Tensor{tensor.MustTensor([]int64{3}, []float32{0, 1, 1})})
		require.NoError(t, err)
		assert.Equal(t, dt, got[0].DType())
		assert.Equal(t, []float64{0, 1, 1}, tensor.Float64s(got[0]))
	}
	_, err = arith.OpBernoulli(rc, graph.NewNode("b", "Bernoulli", []string{"x"}, []string{"y"}), []tensor.Tensor{tensor.MustTensor([]int64{2}, []float32{0.5, 1.5})})
	assert.ErrorContains(t, err, "probability 1.5 at element 1")
	_, err = arith.OpBernoulli(rc, graph.NewNode("b", "Bernoulli", []string{"x"}, []string{"y"}), []tensor.Tensor{ops.I64Tensor([]int64{1}, []int64{1})})
	assert.ErrorContains(t, err, "not a float type")
}

func TestMultinomialFrequenciesAndTypes(t *testing.T) {
	rnd := inferRand()
	rc := testRunCtx(nil, 22)
	const classes, samples = 5, 4000
	logits := make([]float32, 2*classes)
	for i := range logits {
		logits[i] = rnd.Float32()*4 - 2
	}
	logits[classes+2] = float32(math.Inf(-1)) // a class that must never be drawn
	n := graph.NewNode("m", "Multinomial", []string{"x"}, []string{"y"}, graph.IntAttr("sample_size", samples))
	got, err := arith.OpMultinomial(rc, n, []tensor.Tensor{tensor.MustTensor([]int64{2, classes}, logits)})
	require.NoError(t, err)
	require.Equal(t, graph.Int32, got[0].DType(), "dtype defaults to int32")
	require.Equal(t, []int64{2, samples}, got[0].Shape())
	v := tensor.Float64s(got[0])
	for b := 0; b < 2; b++ {
		row := logits[b*classes : (b+1)*classes]
		total := 0.0
		for _, l := range row {
			total += math.Exp(float64(l))
		}
		counts := make([]float64, classes)
		for _, k := range v[b*samples : (b+1)*samples] {
			require.True(t, k >= 0 && k < classes, "index %v", k)
			counts[int(k)]++
		}
		for k, c := range counts {
			q := math.Exp(float64(row[k])) / total
			assert.InDelta(t, samples*q, c, bernsteinDeviation(samples*q*(1-q), randomTestDelta/classes), "row %d class %d", b, k)
		}
		if b == 1 {
			assert.Zero(t, counts[2], "class of probability 0")
		}
	}
	n.SetAttr(graph.IntAttr("dtype", int64(graph.Int64)))
	got, err = arith.OpMultinomial(rc, n, []tensor.Tensor{tensor.MustTensor([]int64{2, classes}, logits)})
	require.NoError(t, err)
	assert.Equal(t, graph.Int64, got[0].DType())
	n.SetAttr(graph.IntAttr("dtype", int64(graph.Float)))
	_, err = arith.OpMultinomial(rc, n, []tensor.Tensor{tensor.MustTensor([]int64{2, classes}, logits)})
	assert.ErrorContains(t, err, "float (attribute dtype) is not supported")
	_, err = arith.OpMultinomial(rc, graph.NewNode("m", "Multinomial", []string{"x"}, []string{"y"}), []tensor.Tensor{tensor.MustTensor([]int64{4}, logits[:4])})
	assert.ErrorContains(t, err, "(batch, classes)")
}

// TestRandomSeedAttribute: with a seed every call draws the same values (and another seed other
// values); without one every call draws afresh.
func TestRandomSeedAttribute(t *testing.T) {
	rnd := inferRand()
	rc := testRunCtx(nil, 22)
	x := tensor.MustTensor([]int64{4, 16}, randomF32(rnd, 64))
	p := tensor.MustTensor([]int64{4, 16}, make([]float32, 64))
	for i := range p.Data().([]float32) {
		p.Data().([]float32)[i] = 0.5
	}
	cases := []struct {
		op string
		f  ops.OpFunc
		in []tensor.Tensor
	}{
		{"RandomUniform", arith.OpRandomUniform, nil},
		{"RandomUniformLike", arith.OpRandomUniform, []tensor.Tensor{x}},
		{"RandomNormal", arith.OpRandomNormal, nil},
		{"RandomNormalLike", arith.OpRandomNormal, []tensor.Tensor{x}},
		{"Bernoulli", arith.OpBernoulli, []tensor.Tensor{p}},
		{"Multinomial", arith.OpMultinomial, []tensor.Tensor{x}},
	}
	seed := float32(rnd.IntN(1000))
	for _, c := range cases {
		draw := func(attrs ...*graph.Attribute) []float64 {
			attrs = append(attrs, graph.IntsAttr("shape", 64), graph.IntAttr("sample_size", 64))
			got, err := c.f(rc, graph.NewNode("r", c.op, []string{"x"}, []string{"y"}, attrs...), c.in)
			require.NoError(t, err, c.op)
			return tensor.Float64s(got[0])
		}
		assert.Equal(t, draw(graph.FloatAttr("seed", seed)), draw(graph.FloatAttr("seed", seed)), "%s with a seed", c.op)
		// 64 draws (each 1 bit at least) agree by chance with probability 2^-64 at most.
		assert.NotEqual(t, draw(graph.FloatAttr("seed", seed)), draw(graph.FloatAttr("seed", seed+1)), "%s with another seed", c.op)
		assert.NotEqual(t, draw(), draw(), "%s without a seed", c.op)
	}
}

// TestRandomOpsAcrossSessionRuns: a seeded generator repeats across runs of a session, an
// unseeded one does not, and the session reports the dtype attribute's type.
func TestRandomOpsAcrossSessionRuns(t *testing.T) {
	g := &graph.Graph{Name: "random"}
	g.Outputs = []*graph.Value{graph.Output("seeded", graph.Type{}), graph.Output("fresh", graph.Type{})}
	g.Nodes = []*graph.Node{
		graph.NewNode("u", "RandomUniform", nil, []string{"seeded"}, graph.IntsAttr("shape", 4, 8), graph.FloatAttr("seed", 7)),
		graph.NewNode("n", "RandomNormal", nil, []string{"fresh"}, graph.IntsAttr("shape", 32), graph.IntAttr("dtype", int64(graph.Double))),
	}
	m, err := graph.FromGraph("random", g, map[string]int64{"": 15})
	require.NoError(t, err)
	defer m.Close()
	s, err := FromGraph(m, WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	first, err := s.Run(context.Background(), nil)
	require.NoError(t, err)
	second, err := s.Run(context.Background(), nil)
	require.NoError(t, err)
	assert.Equal(t, graph.Float, first[0].DType())
	assert.Equal(t, []int64{4, 8}, first[0].Shape())
	assert.Equal(t, graph.Double, first[1].DType())
	assert.Equal(t, tensor.Float64s(first[0]), tensor.Float64s(second[0]), "seeded")
	assert.NotEqual(t, tensor.Float64s(first[1]), tensor.Float64s(second[1]), "unseeded")
}

// TestRandomDropoutTrainingMode: training-mode Dropout keeps each element with probability
// 1 - ratio, scaled by 1/(1 - ratio), and its mask says which; with training_mode false it is
// the identity; an int seed repeats the draw.
func TestRandomDropoutTrainingMode(t *testing.T) {
	rnd := inferRand()
	rc := testRunCtx(nil, 13)
	x := tensor.MustTensor([]int64{64, 64}, randomF32(rnd, 4096))
	for i, v := range x.Data().([]float32) {
		if v == 0 {
			x.Data().([]float32)[i] = 0.5
		}
	}
	ratio := float32(0.1 + rnd.Float64()*0.7)
	on, off := tensor.MustTensor(nil, []bool{true}), tensor.MustTensor(nil, []bool{false})
	node := graph.NewNode("d", "Dropout", []string{"x", "r", "t"}, []string{"y", "m"})
	got, err := ops.HostOps["Dropout"](rc, node, []tensor.Tensor{x, tensor.MustTensor(nil, []float32{ratio}), on})
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, graph.Float, got[0].DType())
	require.Equal(t, graph.Bool, got[1].DType())
	scale := 1 / (1 - float64(ratio))
	xv, yv, mask := tensor.Float64s(x), tensor.Float64s(got[0]), got[1].Data().([]bool)
	kept := 0.0
	for i := range xv {
		if mask[i] {
			kept++
			require.InDelta(t, xv[i]*scale, yv[i], 1e-6*math.Abs(xv[i]*scale), "element %d", i)
		} else {
			require.Zero(t, yv[i], "element %d", i)
		}
	}
	keep := 1 - float64(ratio)
	n := float64(len(xv))
	assert.InDelta(t, n*keep, kept, bernsteinDeviation(n*keep*(1-keep), randomTestDelta), "kept, ratio %v", ratio)

	got, err = ops.HostOps["Dropout"](rc, node, []tensor.Tensor{x, tensor.MustTensor(nil, []float32{ratio}), off})
	require.NoError(t, err)
	assert.Equal(t, xv, tensor.Float64s(got[0]), "training_mode false")
	assert.NotContains(t, got[1].Data().([]bool), false)
	_, err = ops.HostOps["Dropout"](rc, node, []tensor.Tensor{x, tensor.MustTensor(nil, []float32{1}), on})
	assert.ErrorContains(t, err, "ratio 1 is outside [0, 1)")

	seeded := graph.NewNode("d", "Dropout", []string{"x", "r", "t"}, []string{"y", "m"}, graph.IntAttr("seed", int64(rnd.IntN(100))))
	a, err := ops.HostOps["Dropout"](rc, seeded, []tensor.Tensor{x, tensor.MustTensor(nil, []float32{0.5}), on})
	require.NoError(t, err)
	b, err := ops.HostOps["Dropout"](rc, seeded, []tensor.Tensor{x, tensor.MustTensor(nil, []float32{0.5}), on})
	require.NoError(t, err)
	assert.Equal(t, a[1].Data(), b[1].Data(), "seeded masks")
}
