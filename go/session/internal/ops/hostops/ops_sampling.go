package hostops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for sampling-style ops: GridSample, RoiAlign, MaxUnpool, MelWeightMatrix,
// BatchNormalization's training mode (batch statistics plus updated running mean/var), the
// random generators Bernoulli, RandomUniform(Like), RandomNormal(Like) and Multinomial, and
// Dropout's training mode.

func init() {
	ops.HostOps["Bernoulli"] = OpBernoulli
	ops.HostOps["RandomUniform"] = OpRandomUniform
	ops.HostOps["RandomUniformLike"] = OpRandomUniform
	ops.HostOps["RandomNormal"] = OpRandomNormal
	ops.HostOps["RandomNormalLike"] = OpRandomNormal
	ops.HostOps["Multinomial"] = OpMultinomial
	inferenceDropout := ops.HostOps["Dropout"]
	ops.HostOps["Dropout"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		if t := ops.Optional(in, 2); rc.OpsetVersion() >= 12 && t.IsValid() && t.Len() == 1 && tensor.Float64s(t)[0] != 0 {
			return dropoutTraining(n, in)
		}
		return inferenceDropout(rc, n, in)
	}
	ops.HostOps["GridSample"] = OpGridSample
	ops.HostOps["RoiAlign"] = OpRoiAlign
	ops.HostOps["MaxUnpool"] = OpMaxUnpool
	ops.HostOps["MelWeightMatrix"] = opMelWeightMatrix
	inference := ops.HostOps["BatchNormalization"]
	ops.HostOps["BatchNormalization"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		if n.AttrInt("training_mode", 0) != 0 {
			return batchNormTraining(n, in)
		}
		return inference(rc, n, in)
	}
}

// gridTap is one input index along a spatial axis with its interpolation weight; index -1 reads
// zero (zeros padding outside the input).
type gridTap struct {
	index  int
	weight float64
}

// gridSampler maps normalized grid coordinates to weighted input taps along one axis.
type gridSampler struct {
	mode, padding string
	alignCorners  bool
}

// denormalize maps a grid coordinate in [-1, 1] to an input coordinate on an axis of size n.
func (g gridSampler) denormalize(v float64, n int) float64 {
	if g.alignCorners {
		return (v + 1) / 2 * float64(n-1)
	}
	return ((v+1)*float64(n) - 1) / 2
}

// bounds is the coordinate range reflection padding mirrors about.
func (g gridSampler) bounds(n int) (float64, float64) {
	if g.alignCorners {
		return 0, float64(n - 1)
	}
	return -0.5, float64(n) - 0.5
}

// reflect mirrors v into [lo, hi] as many times as needed.
func reflect(v, lo, hi float64) float64 {
	span := hi - lo
	if span <= 0 {
		return lo
	}
	switch {
	case v < lo:
		d := lo - v
		k := math.Floor(d / span)
		r := d - k*span
		if int64(k)%2 == 0 {
			return lo + r
		}
		return hi - r
	case v > hi:
		d := v - hi
		k := math.Floor(d / span)
		r := d - k*span
		if int64(k)%2 == 0 {
			return hi - r
		}
		return lo + r
	}
	return v
}

// index resolves integer position i on an axis of size n per padding mode (-1: reads zero).
func (g gridSampler) index(i, n int) int {
	if i >= 0 && i < n {
		return i
	}
	switch g.padding {
	case "border":
		return max(0, min(n-1, i))
	case "reflection":
		lo, hi := g.bounds(n)
		return max(0, min(n-1, int(reflect(float64(i), lo, hi))))
	}
	return -1
}

// cubicWeights are the A=-0.75 cubic convolution weights for taps at floor-1 .. floor+2.
func cubicWeights(t float64) [4]float64 {
	const a = -0.75
	near := func(x float64) float64 { return ((a+2)*x-(a+3))*x*x + 1 }
	far := func(x float64) float64 { return ((a*x-5*a)*x+8*a)*x - 4*a }
	return [4]float64{far(t + 1), near(t), near(1 - t), far(2 - t)}
}

// taps lists the weighted input indices for grid coordinate v on an axis of size n.
func (g gridSampler) taps(v float64, n int) []gridTap {
	x := g.denormalize(v, n)
	switch g.padding {
	case "border":
		x = math.Max(0, math.Min(float64(n-1), x))
	case "reflection":
		lo, hi := g.bounds(n)
		x = reflect(x, lo, hi)
	}
	switch g.mode {
	case "nearest":
		return []gridTap{{g.index(int(math.RoundToEven(x)), n), 1}}
	case "cubic":
		f := math.Floor(x)
		w := cubicWeights(x - f)
		out := make([]gridTap, 4)
		for k := range out {
			out[k] = gridTap{g.index(int(f)-1+k, n), w[k]}
		}
		return out
	}
	f := math.Floor(x)
	t := x - f
	return []gridTap{{g.index(int(f), n), 1 - t}, {g.index(int(f)+1, n), t}}
}

func OpGridSample(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x, grid := in[0], in[1]
	r := len(x.Dims())
	spatial := r - 2
	if spatial < 1 || len(grid.Dims()) != r || grid.Dims()[0] != x.Dims()[0] || grid.Dims()[r-1] != int64(spatial) {
		return nil, fmt.Errorf("GridSample: X %v and grid %v must be (N, C, D1..Dk) and (N, O1..Ok, k)", x.Dims(), grid.Dims())
	}
	g := gridSampler{
		mode:         n.AttrString("mode", "linear"),
		padding:      n.AttrString("padding_mode", "zeros"),
		alignCorners: n.AttrInt("align_corners", 0) != 0,
	}
	switch g.mode { // opset 16 names, renamed in opset 20
	case "bilinear":
		g.mode = "linear"
	case "bicubic":
		g.mode = "cubic"
	case "linear", "cubic", "nearest":
	default:
		return nil, fmt.Errorf("GridSample: mode %q is not supported (want linear, nearest or cubic)", g.mode)
	}
	if g.padding != "zeros" && g.padding != "border" && g.padding != "reflection" {
		return nil, fmt.Errorf("GridSample: padding_mode %q is not supported (want zeros, border or reflection)", g.padding)
	}
	batch, channels := int(x.Dims()[0]), int(x.Dims()[1])
	inDims := x.Dims()[2:]
	inStrides := ops.StridesOf(inDims)
	inSize, outSize := ops.Numel(inDims), ops.Numel(grid.Dims()[1:r-1])
	xv, gv := tensor.Float64s(x), tensor.Float64s(grid)
	out := make([]float64, batch*channels*outSize)
	perAxis := make([][]gridTap, spatial)
	for b := 0; b < batch; b++ {
		for o := 0; o < outSize; o++ {
			coords := gv[(b*outSize+o)*spatial : (b*outSize+o+1)*spatial]
			for d := 0; d < spatial; d++ {
				// The grid's last axis lists coordinates innermost spatial axis first (x, y, ...).
				perAxis[d] = g.taps(coords[spatial-1-d], int(inDims[d]))
			}
			for c := 0; c < channels; c++ {
				plane := xv[(b*channels+c)*inSize : (b*channels+c+1)*inSize]
				out[(b*channels+c)*outSize+o] = gatherTaps(plane, perAxis, inStrides, 0, 0, 1)
			}
		}
	}
	shape := append([]int64{x.Dims()[0], x.Dims()[1]}, grid.Dims()[1:r-1]...)
	return floatResult(x.DType(), shape, out)
}

// gatherTaps sums the tensor product of per-axis taps from axis d on, flat offset and weight so
// far; a tap outside the input (index -1) contributes zero.
func gatherTaps(plane []float64, perAxis [][]gridTap, strides []int, d, offset int, weight float64) float64 {
	if d == len(perAxis) {
		return weight * plane[offset]
	}
	sum := 0.0
	for _, t := range perAxis[d] {
		if t.index < 0 || t.weight == 0 {
			continue
		}
		sum += gatherTaps(plane, perAxis, strides, d+1, offset+t.index*strides[d], weight*t.weight)
	}
	return sum
}

// roiBilinear is one RoiAlign sample: four input offsets with their weights (all zero when the
// sample lies beyond the one-pixel margin around the feature map).
type roiBilinear struct {
	idx [4]int
	w   [4]float64
}

func roiSample(y, x float64, h, w int) roiBilinear {
	var s roiBilinear
	if y < -1 || y > float64(h) || x < -1 || x > float64(w) {
		return s
	}
	y, x = math.Max(y, 0), math.Max(x, 0)
	yl, xl := int(y), int(x)
	yh, xh := yl+1, xl+1
	if yl >= h-1 {
		yl, yh, y = h-1, h-1, float64(h-1)
	}
	if xl >= w-1 {
		xl, xh, x = w-1, w-1, float64(w-1)
	}
	ly, lx := y-float64(yl), x-float64(xl)
	hy, hx := 1-ly, 1-lx
	s.idx = [4]int{yl*w + xl, yl*w + xh, yh*w + xl, yh*w + xh}
	s.w = [4]float64{hy * hx, hy * lx, ly * hx, ly * lx}
	return s
}

func OpRoiAlign(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x, rois, bidx := in[0], in[1], in[2]
	if len(x.Dims()) != 4 || len(rois.Dims()) != 2 || rois.Dims()[1] != 4 || len(bidx.Dims()) != 1 || bidx.Dims()[0] != rois.Dims()[0] {
		return nil, fmt.Errorf("RoiAlign: X %v, rois %v and batch_indices %v must be (N, C, H, W), (R, 4) and (R)", x.Dims(), rois.Dims(), bidx.Dims())
	}
	mode := n.AttrString("mode", "avg")
	if mode != "avg" && mode != "max" {
		return nil, fmt.Errorf("RoiAlign: mode %q is not supported (want avg or max)", mode)
	}
	// Opset 16 added coordinate_transformation_mode with default half_pixel; opset 10 had none
	// and behaved as output_half_pixel.
	ctm := "output_half_pixel"
	if rc.OpsetVersion() >= 16 {
		ctm = n.AttrString("coordinate_transformation_mode", "half_pixel")
	}
	if ctm != "half_pixel" && ctm != "output_half_pixel" {
		return nil, fmt.Errorf("RoiAlign: coordinate_transformation_mode %q is not supported", ctm)
	}
	ph, pw := int(n.AttrInt("output_height", 1)), int(n.AttrInt("output_width", 1))
	ratio := int(n.AttrInt("sampling_ratio", 0))
	scale := float64(n.AttrFloat("spatial_scale", 1))
	if ph < 1 || pw < 1 || ratio < 0 || ratio > 1<<10 || ph > 1<<12 || pw > 1<<12 {
		return nil, fmt.Errorf("RoiAlign: output %dx%d and sampling_ratio %d out of range", ph, pw, ratio)
	}
	nb, channels, h, w := int(x.Dims()[0]), int(x.Dims()[1]), int(x.Dims()[2]), int(x.Dims()[3])
	xv, rv, bv := tensor.Float64s(x), tensor.Float64s(rois), tensor.Int64s(bidx)
	numRois := int(rois.Dims()[0])
	offset := 0.0
	if ctm == "half_pixel" {
		offset = 0.5
	}
	out := make([]float64, numRois*channels*ph*pw)
	for r := 0; r < numRois; r++ {
		b := int(bv[r])
		if b < 0 || b >= nb {
			return nil, fmt.Errorf("RoiAlign: batch index %d of roi %d outside [0, %d)", b, r, nb)
		}
		x0, y0 := rv[r*4]*scale-offset, rv[r*4+1]*scale-offset
		rw, rh := rv[r*4+2]*scale-offset-x0, rv[r*4+3]*scale-offset-y0
		if ctm == "output_half_pixel" { // legacy behaviour forces at least one pixel
			rw, rh = math.Max(rw, 1), math.Max(rh, 1)
		}
		binH, binW := rh/float64(ph), rw/float64(pw)
		gh, gw := ratio, ratio
		if ratio == 0 {
			// Adaptive sampling: about one sample per input pixel of the bin; an empty or
			// inverted roi takes none.
			fh, fw := math.Ceil(rh/float64(ph)), math.Ceil(rw/float64(pw))
			if math.IsNaN(fh) || math.IsNaN(fw) || fh*fw > 1<<20 {
				return nil, fmt.Errorf("RoiAlign: roi %d %v needs too many samples per bin", r, rv[r*4:r*4+4])
			}
			gh, gw = max(int(fh), 0), max(int(fw), 0)
		}
		count := float64(max(gh*gw, 1))
		for i := 0; i < ph; i++ {
			for j := 0; j < pw; j++ {
				samples := make([]roiBilinear, 0, gh*gw)
				for iy := 0; iy < gh; iy++ {
					y := y0 + float64(i)*binH + (float64(iy)+0.5)*binH/float64(gh)
					for ix := 0; ix < gw; ix++ {
						xx := x0 + float64(j)*binW + (float64(ix)+0.5)*binW/float64(gw)
						samples = append(samples, roiSample(y, xx, h, w))
					}
				}
				for c := 0; c < channels; c++ {
					plane := xv[(b*channels+c)*h*w : (b*channels+c+1)*h*w]
					acc := 0.0
					for k, s := range samples {
						if mode == "avg" {
							for q := 0; q < 4; q++ {
								acc += s.w[q] * plane[s.idx[q]]
							}
							continue
						}
						// Max mode takes the largest weighted corner, as the reference does.
						m := s.w[0] * plane[s.idx[0]]
						for q := 1; q < 4; q++ {
							m = math.Max(m, s.w[q]*plane[s.idx[q]])
						}
						if k == 0 || m > acc {
							acc = m
						}
					}
					if mode == "avg" {
						acc /= count
					}
					out[((r*channels+c)*ph+i)*pw+j] = acc
				}
			}
		}
	}
	return floatResult(x.DType(), []int64{int64(numRois), int64(channels), int64(ph), int64(pw)}, out)
}

func OpMaxUnpool(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x, ind := in[0], in[1]
	if len(x.Dims()) < 3 || len(ind.Dims()) != len(x.Dims()) || ops.Numel(ind.Dims()) != ops.Numel(x.Dims()) {
		return nil, fmt.Errorf("MaxUnpool: X %v and I %v must have the same (N, C, D1..Dk) shape", x.Dims(), ind.Dims())
	}
	spatial := len(x.Dims()) - 2
	kernel := n.AttrInts("kernel_shape")
	if len(kernel) != spatial {
		return nil, fmt.Errorf("MaxUnpool: kernel_shape %v must have %d entries", kernel, spatial)
	}
	strides, pads := n.AttrInts("strides"), n.AttrInts("pads")
	shape := append([]int64{}, x.Dims()...)
	for d := 0; d < spatial; d++ {
		s, pb, pe := int64(1), int64(0), int64(0)
		if len(strides) == spatial {
			s = strides[d]
		}
		if len(pads) == 2*spatial {
			pb, pe = pads[d], pads[d+spatial]
		}
		shape[d+2] = (x.Dims()[d+2]-1)*s + kernel[d] - pb - pe
	}
	if t := ops.Optional(in, 2); t.IsValid() {
		want := tensor.Int64s(t)
		if len(want) != len(shape) {
			return nil, fmt.Errorf("MaxUnpool: output_shape %v must have rank %d", want, len(shape))
		}
		for d, v := range want {
			if v < shape[d] || (d < 2 && v != shape[d]) {
				return nil, fmt.Errorf("MaxUnpool: output_shape %v is smaller than the default %v", want, shape)
			}
		}
		shape = append([]int64{}, want...)
	}
	for d, v := range shape {
		if v < 1 {
			return nil, fmt.Errorf("MaxUnpool: output dimension %d is %d (shape %v)", d, v, shape)
		}
	}
	if _, err := tensor.ElementCount(shape); err != nil {
		return nil, fmt.Errorf("MaxUnpool: output shape %v: %w", shape, err)
	}
	total := ops.Numel(shape)
	out := make([]float64, total)
	xv, iv := tensor.Float64s(x), tensor.Int64s(ind)
	for k, i := range iv {
		if i < 0 || i >= int64(total) {
			return nil, fmt.Errorf("MaxUnpool: index %d outside the output's %d elements", i, total)
		}
		out[i] = xv[k]
	}
	return floatResult(x.DType(), shape, out)
}

func opMelWeightMatrix(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	for i, name := range []string{"num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"} {
		if in[i].Len() != 1 {
			return nil, fmt.Errorf("MelWeightMatrix: %s must be a scalar, got shape %v", name, in[i].Dims())
		}
	}
	bins, dft, rate := tensor.Int64s(in[0])[0], tensor.Int64s(in[1])[0], tensor.Int64s(in[2])[0]
	lower, upper := tensor.Float64s(in[3])[0], tensor.Float64s(in[4])[0]
	if bins < 1 || bins > 1<<16 || dft < 1 || dft > 1<<24 || rate < 1 {
		return nil, fmt.Errorf("MelWeightMatrix: num_mel_bins %d, dft_length %d and sample_rate %d out of range", bins, dft, rate)
	}
	if lower < 0 || upper <= lower {
		return nil, fmt.Errorf("MelWeightMatrix: edges %g..%g must satisfy 0 <= lower < upper", lower, upper)
	}
	spectrum := int(dft/2 + 1)
	mel := func(hz float64) float64 { return 2595 * math.Log10(1+hz/700) }
	lowMel, highMel := mel(lower), mel(upper)
	// The spec spaces num_mel_bins+2 points by (high-low)/(num_mel_bins+2) and floors each
	// frequency to a DFT bin.
	points := make([]int, bins+2)
	step := (highMel - lowMel) / float64(len(points))
	for i := range points {
		hz := 700 * (math.Pow(10, (float64(i)*step+lowMel)/2595) - 1)
		points[i] = int(math.Floor(float64(dft+1) * hz / float64(rate)))
	}
	out := make([]float64, spectrum*int(bins))
	set := func(j, i int, v float64) {
		if j >= 0 && j < spectrum {
			out[j*int(bins)+i] = v
		}
	}
	for i := 0; i < int(bins); i++ {
		lo, center, hi := points[i], points[i+1], points[i+2]
		// Loops stay inside the spectrum however far the edges reach beyond it.
		if center == lo {
			set(center, i, 1)
		} else {
			for j := max(lo, 0); j <= min(center, spectrum-1); j++ {
				set(j, i, float64(j-lo)/float64(center-lo))
			}
		}
		for j := max(center, 0); j < min(hi, spectrum); j++ {
			set(j, i, float64(hi-j)/float64(hi-center))
		}
	}
	return floatResult(tensor.DType(n.AttrInt("output_datatype", int64(graph.Float))), []int64{int64(spectrum), bins}, out)
}

// batchNormTraining normalizes with the batch's own per-channel mean and (population) variance
// and returns the running statistics blended with them by momentum.
func batchNormTraining(n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	if len(x.Dims()) < 2 {
		return nil, fmt.Errorf("BatchNormalization: X %v must be (N, C, ...)", x.Dims())
	}
	eps := float64(n.AttrFloat("epsilon", 1e-5))
	momentum := float64(n.AttrFloat("momentum", 0.9))
	c, inner := int(x.Dims()[1]), ops.Numel(x.Dims()[2:])
	sc, bi, runMean, runVar := tensor.Float64s(in[1]), tensor.Float64s(in[2]), tensor.Float64s(in[3]), tensor.Float64s(in[4])
	for i, v := range [][]float64{sc, bi, runMean, runVar} {
		if len(v) != c {
			return nil, fmt.Errorf("BatchNormalization: input %d has %d elements, want %d channels", i+1, len(v), c)
		}
	}
	v := tensor.Float64s(x)
	count := float64(len(v) / max(c, 1))
	mean, variance := make([]float64, c), make([]float64, c)
	for i, e := range v {
		mean[(i/inner)%c] += e
	}
	for ch := range mean {
		mean[ch] /= count
	}
	for i, e := range v {
		d := e - mean[(i/inner)%c]
		variance[(i/inner)%c] += d * d
	}
	for ch := range variance {
		variance[ch] /= count
	}
	for i := range v {
		ch := (i / inner) % c
		v[i] = sc[ch]*(v[i]-mean[ch])/math.Sqrt(variance[ch]+eps) + bi[ch]
	}
	y, err := tensor.FromFloat64s(x.DType(), x.Dims(), v)
	if err != nil {
		return nil, err
	}
	newMean, newVar := make([]float64, c), make([]float64, c)
	for ch := 0; ch < c; ch++ {
		newMean[ch] = runMean[ch]*momentum + mean[ch]*(1-momentum)
		newVar[ch] = runVar[ch]*momentum + variance[ch]*(1-momentum)
	}
	m, err := tensor.FromFloat64s(in[3].DType(), in[3].Dims(), newMean)
	if err != nil {
		return nil, err
	}
	vr, err := tensor.FromFloat64s(in[4].DType(), in[4].Dims(), newVar)
	if err != nil {
		return nil, err
	}
	return []tensor.Tensor{y, m, vr}, nil
}

// randomSource is the generator one random node draws from in one run. With the node's seed
// attribute (a float for the generators, an int for Dropout) it is seeded from the seed, so
// every run (and every session) of that node draws the same values; without one it is freshly
// seeded each run, as the spec's "if not specified we will auto generate one" asks.
func randomSource(n *graph.Node) *rand.Rand {
	if a := n.Attr("seed"); a != nil && (a.Type == graph.AttrFloat || a.Type == graph.AttrInt) {
		bits := uint64(math.Float32bits(a.Float))
		if a.Type == graph.AttrInt {
			bits = uint64(a.Int) ^ 1<<63 // apart from the float seeds' bit patterns
		}
		return rand.New(rand.NewPCG(bits, bits^0x9e3779b97f4a7c15))
	}
	return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
}

// randomOutputType is the element type of a generator's output: the dtype attribute when given,
// else def (the input's type for the *Like ops and Bernoulli, float for the others). allowed
// lists the types the op's schema accepts.
func randomOutputType(n *graph.Node, def tensor.DType, allowed func(tensor.DType) bool) (tensor.DType, error) {
	dt := def
	if a := n.Attr("dtype"); a != nil {
		dt = tensor.DType(a.Int)
	}
	if !allowed(dt) {
		how := "the input's type"
		if n.Attr("dtype") != nil {
			how = "attribute dtype"
		} else if n.OpType == "RandomUniform" || n.OpType == "RandomNormal" {
			how = "the default type"
		}
		return 0, fmt.Errorf("%s: output element type %s (%s) is not supported", n.OpType, dt, how)
	}
	return dt, nil
}

// isRandomFloat reports whether dt is one of the float types the generators produce.
func isRandomFloat(dt tensor.DType) bool {
	return dt == graph.Float || dt == graph.Double || dt == graph.Float16 || dt == graph.BFloat16
}

// roundTo rounds v to the nearest value of the float type dt.
func roundTo(dt tensor.DType, v float64) float64 {
	switch dt {
	case graph.Float:
		return float64(float32(v))
	case graph.Float16:
		return float64(tensor.ToFloat16(float32(v)).Float32())
	case graph.BFloat16:
		return float64(tensor.ToBFloat16(float32(v)).Float32())
	}
	return v
}

// randomShape is the generator's output shape: the shape attribute for RandomUniform and
// RandomNormal, the input's shape for the *Like ops.
func randomShape(n *graph.Node, in []tensor.Tensor) ([]int64, error) {
	if n.OpType == "RandomUniformLike" || n.OpType == "RandomNormalLike" {
		if len(in) == 0 || !in[0].IsValid() {
			return nil, fmt.Errorf("%s: input is missing", n.OpType)
		}
		return append([]int64{}, in[0].Dims()...), nil
	}
	a := n.Attr("shape")
	if a == nil || a.Type != graph.AttrInts {
		return nil, fmt.Errorf("%s: attribute shape is required", n.OpType)
	}
	if _, err := tensor.ElementCount(a.Ints); err != nil {
		return nil, fmt.Errorf("%s: shape: %w", n.OpType, err)
	}
	return append([]int64{}, a.Ints...), nil
}

// randomFloatType resolves a generator's output type: dtype, else the input's type for the
// *Like ops, else float.
func randomFloatType(n *graph.Node, in []tensor.Tensor) (tensor.DType, error) {
	def := tensor.DType(graph.Float)
	if len(in) > 0 && in[0].IsValid() {
		def = in[0].DType()
	}
	return randomOutputType(n, def, isRandomFloat)
}

// opRandomUniform draws from the uniform distribution on [low, high). A draw that rounds to
// high (or below low) in the output type is drawn again, so the bounds hold after rounding too.
func OpRandomUniform(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	shape, err := randomShape(n, in)
	if err != nil {
		return nil, err
	}
	dt, err := randomFloatType(n, in)
	if err != nil {
		return nil, err
	}
	low, high := float64(n.AttrFloat("low", 0)), float64(n.AttrFloat("high", 1))
	if !(low <= high) || math.IsInf(low, 0) || math.IsInf(high, 0) {
		return nil, fmt.Errorf("%s: low %g and high %g must be finite with low <= high", n.OpType, low, high)
	}
	r := randomSource(n)
	out := make([]float64, ops.Numel(shape))
	for i := range out {
		if low == high {
			out[i] = low
			continue
		}
		const attempts = 64
		for k := 0; ; k++ {
			v := roundTo(dt, low+(high-low)*r.Float64())
			if v >= low && v < high {
				out[i] = v
				break
			}
			if k == attempts {
				return nil, fmt.Errorf("%s: [%g, %g) holds (almost) no %s value", n.OpType, low, high, dt)
			}
		}
	}
	return floatResult(dt, shape, out)
}

// opRandomNormal draws from the normal distribution with the mean and scale (standard
// deviation) attributes.
func OpRandomNormal(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	shape, err := randomShape(n, in)
	if err != nil {
		return nil, err
	}
	dt, err := randomFloatType(n, in)
	if err != nil {
		return nil, err
	}
	mean, scale := float64(n.AttrFloat("mean", 0)), float64(n.AttrFloat("scale", 1))
	if math.IsNaN(mean) || math.IsInf(mean, 0) || !(scale >= 0) || math.IsInf(scale, 0) {
		return nil, fmt.Errorf("%s: mean %g must be finite and scale %g finite and not negative", n.OpType, mean, scale)
	}
	r := randomSource(n)
	out := make([]float64, ops.Numel(shape))
	for i := range out {
		out[i] = mean + scale*r.NormFloat64()
	}
	return floatResult(dt, shape, out)
}

// opBernoulli draws 1 with probability p and 0 otherwise for every element p of the input,
// which must lie in [0, 1]; the output has the dtype attribute's type, else the input's.
func OpBernoulli(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	if !isRandomFloat(x.DType()) {
		return nil, fmt.Errorf("Bernoulli: input element type %s is not a float type", x.DType())
	}
	dt, err := randomOutputType(n, x.DType(), func(dt tensor.DType) bool {
		return isRandomFloat(dt) || dt == graph.Bool || dt.IsInteger()
	})
	if err != nil {
		return nil, err
	}
	p := tensor.Float64s(x)
	r := randomSource(n)
	out := make([]float64, len(p))
	for i, v := range p {
		if !(v >= 0 && v <= 1) {
			return nil, fmt.Errorf("Bernoulli: probability %g at element %d is outside [0, 1]", v, i)
		}
		if r.Float64() < v {
			out[i] = 1
		}
	}
	return floatResult(dt, x.Dims(), out)
}

// opMultinomial draws sample_size class indices per batch row of the (batch, classes) input of
// unnormalized log-probabilities, class k with probability softmax(row)[k].
func OpMultinomial(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	if !isRandomFloat(x.DType()) || len(x.Dims()) != 2 {
		return nil, fmt.Errorf("Multinomial: input must be a float (batch, classes) tensor, got %s %v", x.DType(), x.Dims())
	}
	dt, err := randomOutputType(n, graph.Int32, func(dt tensor.DType) bool { return dt == graph.Int32 || dt == graph.Int64 })
	if err != nil {
		return nil, err
	}
	samples := n.AttrInt("sample_size", 1)
	batch, classes := int(x.Dims()[0]), int(x.Dims()[1])
	shape := []int64{x.Dims()[0], samples}
	if _, err := tensor.ElementCount(shape); err != nil || samples < 0 {
		return nil, fmt.Errorf("Multinomial: sample_size %d with batch %d is out of range", samples, batch)
	}
	if classes == 0 && samples > 0 && batch > 0 {
		return nil, fmt.Errorf("Multinomial: input %v has no classes to draw from", x.Dims())
	}
	logits := tensor.Float64s(x)
	r := randomSource(n)
	out := make([]float64, 0, batch*int(samples))
	cdf := make([]float64, classes)
	for b := 0; b < batch; b++ {
		row := logits[b*classes : (b+1)*classes]
		top := math.Inf(-1)
		for k, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 1) {
				return nil, fmt.Errorf("Multinomial: log-probability %g at row %d class %d", v, b, k)
			}
			top = max(top, v)
		}
		if math.IsInf(top, -1) && samples > 0 {
			return nil, fmt.Errorf("Multinomial: row %d has no class with nonzero probability", b)
		}
		total := 0.0
		for k, v := range row {
			total += math.Exp(v - top)
			cdf[k] = total
		}
		for s := int64(0); s < samples; s++ {
			u := r.Float64() * total
			// The first class whose cumulative mass exceeds u; a class of zero mass never is.
			out = append(out, float64(sort.Search(classes, func(k int) bool { return cdf[k] > u })))
		}
	}
	return floatResult(dt, shape, out)
}

// dropoutTraining is Dropout with training_mode true (opset 12 on): each element is kept with
// probability 1 - ratio and scaled by 1/(1 - ratio), or dropped to zero; the mask output says
// which were kept. Ratio 0 keeps everything.
func dropoutTraining(n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	if !x.DType().IsFloat() {
		return nil, fmt.Errorf("Dropout: data element type %s is not a float type", x.DType())
	}
	ratio := 0.5
	if t := ops.Optional(in, 1); t.IsValid() {
		if t.Len() != 1 {
			return nil, fmt.Errorf("Dropout: ratio must be a scalar, got shape %v", t.Dims())
		}
		ratio = tensor.Float64s(t)[0]
	}
	if !(ratio >= 0 && ratio < 1) {
		return nil, fmt.Errorf("Dropout: ratio %g is outside [0, 1)", ratio)
	}
	v := tensor.Float64s(x)
	mask := make([]bool, len(v))
	r := randomSource(n)
	scale := 1 / (1 - ratio)
	for i := range v {
		mask[i] = ratio == 0 || r.Float64() >= ratio
		if mask[i] {
			v[i] *= scale
		} else {
			v[i] = 0
		}
	}
	y, err := tensor.FromFloat64s(x.DType(), x.Dims(), v)
	if err != nil {
		return nil, err
	}
	return []tensor.Tensor{y, tensor.Raw(graph.Bool, append([]int64{}, x.Dims()...), mask)}, nil
}
