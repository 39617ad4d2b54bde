package nn

import (
	"fmt"
	"math"
	"sort"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for the sampling-style ops GridSample and RoiAlign, and NonMaxSuppression.

func init() {
	ops.HostOps["GridSample"] = OpGridSample
	ops.HostOps["RoiAlign"] = OpRoiAlign
	ops.HostOps["NonMaxSuppression"] = opNonMaxSuppression
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

// OpGridSample is GridSample: the input sampled at the normalized grid coordinates.
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
	return ops.FloatResult(x.DType(), shape, out)
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

// OpRoiAlign is RoiAlign: per region of interest, the average or maximum of bilinear samples
// of its feature map over each output bin.
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
	return ops.FloatResult(x.DType(), []int64{int64(numRois), int64(channels), int64(ph), int64(pw)}, out)
}

func opNonMaxSuppression(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	boxes, scores := in[0], in[1]
	if len(boxes.Dims()) != 3 || boxes.Dims()[2] != 4 || len(scores.Dims()) != 3 || scores.Dims()[0] != boxes.Dims()[0] || scores.Dims()[2] != boxes.Dims()[1] {
		return nil, fmt.Errorf("boxes %v and scores %v must be (B, S, 4) and (B, C, S)", boxes.Dims(), scores.Dims())
	}
	maxOut := int64(0)
	if t := ops.Optional(in, 2); t.IsValid() && t.Len() > 0 {
		maxOut = tensor.Int64s(t)[0]
	}
	iouTh, scoreTh, hasScoreTh := 0.0, 0.0, false
	if t := ops.Optional(in, 3); t.IsValid() && t.Len() > 0 {
		iouTh = tensor.Float64s(t)[0]
	}
	if t := ops.Optional(in, 4); t.IsValid() && t.Len() > 0 {
		scoreTh, hasScoreTh = tensor.Float64s(t)[0], true
	}
	center := n.AttrInt("center_point_box", 0) != 0
	nb, nc, ns := int(scores.Dims()[0]), int(scores.Dims()[1]), int(scores.Dims()[2])
	bv, sv := tensor.Float64s(boxes), tensor.Float64s(scores)
	corners := func(b, i int) (y1, x1, y2, x2 float64) {
		p := bv[(b*ns+i)*4 : (b*ns+i)*4+4]
		if center {
			return p[1] - p[3]/2, p[0] - p[2]/2, p[1] + p[3]/2, p[0] + p[2]/2
		}
		return math.Min(p[0], p[2]), math.Min(p[1], p[3]), math.Max(p[0], p[2]), math.Max(p[1], p[3])
	}
	iou := func(b, i, j int) float64 {
		ay1, ax1, ay2, ax2 := corners(b, i)
		by1, bx1, by2, bx2 := corners(b, j)
		ih := math.Max(0, math.Min(ay2, by2)-math.Max(ay1, by1))
		iw := math.Max(0, math.Min(ax2, bx2)-math.Max(ax1, bx1))
		inter := ih * iw
		union := (ay2-ay1)*(ax2-ax1) + (by2-by1)*(bx2-bx1) - inter
		if union <= 0 {
			return 0
		}
		return inter / union
	}
	var sel []int64
	for b := 0; b < nb; b++ {
		for c := 0; c < nc; c++ {
			sc := sv[(b*nc+c)*ns : (b*nc+c+1)*ns]
			var cand []int
			for i, s := range sc {
				if !hasScoreTh || s > scoreTh {
					cand = append(cand, i)
				}
			}
			sort.SliceStable(cand, func(x, y int) bool { return sc[cand[x]] > sc[cand[y]] })
			var kept []int
			for _, i := range cand {
				if int64(len(kept)) >= maxOut {
					break
				}
				ok := true
				for _, k := range kept {
					if iou(b, i, k) > iouTh {
						ok = false
						break
					}
				}
				if ok {
					kept = append(kept, i)
					sel = append(sel, int64(b), int64(c), int64(i))
				}
			}
		}
	}
	return []tensor.Tensor{ops.I64Tensor([]int64{int64(len(sel) / 3), 3}, sel)}, nil
}
