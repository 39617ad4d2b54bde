package nn

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for Resize (opsets 10-19) and Upsample. Resizing is separable: the input is
// interpolated along one axis at a time, each output coordinate reading a few weighted input
// elements (nearest: one, linear: two, cubic: four).

// resizeTap is one weighted input index along an axis; index -1 reads extrapolation_value.
type resizeTap struct {
	index  int
	weight float64
}

// resizeAxis is how the node maps output coordinates to input coordinates.
type resizeConfig struct {
	mode, coordMode, nearestMode string
	cubicA, extrapolation        float64
	excludeOutside               bool
	// antialias stretches the linear and cubic filters by 1/scale when downsampling.
	antialias bool
}

// sourceCoord maps output coordinate x of an axis of in -> out elements at scale to the input
// coordinate, per coordinate_transformation_mode. ok is false for a tf_crop_and_resize
// coordinate outside the input.
func (c resizeConfig) sourceCoord(x, in, out int, scale, roiStart, roiEnd float64) (float64, bool, error) {
	fx := float64(x)
	switch c.coordMode {
	case "half_pixel":
		return (fx+0.5)/scale - 0.5, true, nil
	case "half_pixel_symmetric":
		adj := float64(out) / (scale * float64(in))
		center := float64(in) / 2
		off := center * (1 - adj)
		return off + (fx+0.5)/scale - 0.5, true, nil
	case "pytorch_half_pixel":
		if out > 1 {
			return (fx+0.5)/scale - 0.5, true, nil
		}
		return 0, true, nil
	case "align_corners":
		// The spec's length_resized is in*scale, which differs from out when the scale does
		// not divide evenly.
		length := float64(in) * scale
		if length == 1 || out == 1 {
			return 0, true, nil
		}
		return fx * float64(in-1) / (length - 1), true, nil
	case "asymmetric":
		return fx / scale, true, nil
	case "tf_half_pixel_for_nn":
		return (fx + 0.5) / scale, true, nil
	case "tf_crop_and_resize":
		var v float64
		if out > 1 {
			v = roiStart*float64(in-1) + fx*(roiEnd-roiStart)*float64(in-1)/float64(out-1)
		} else {
			v = 0.5 * (roiStart + roiEnd) * float64(in-1)
		}
		return v, v >= 0 && v <= float64(in-1), nil
	}
	return 0, false, fmt.Errorf("coordinate_transformation_mode %q is not supported", c.coordMode)
}

// taps lists the weighted input indices for input coordinate v on an axis of in elements.
func (c resizeConfig) taps(v float64, in int, scale float64) ([]resizeTap, error) {
	clampIdx := func(i int) int { return max(0, min(in-1, i)) }
	if c.antialias && scale < 1 && (c.mode == "linear" || c.mode == "cubic") {
		return c.antialiasTaps(v, in, scale)
	}
	switch c.mode {
	case "nearest":
		var i float64
		switch c.nearestMode {
		case "round_prefer_floor":
			if v == math.Floor(v)+0.5 {
				i = math.Floor(v)
			} else {
				i = math.Round(v)
			}
		case "round_prefer_ceil":
			i = math.Round(v) // Go rounds halves away from zero; coordinates here are >= -0.5
			if v == math.Floor(v)+0.5 {
				i = math.Ceil(v)
			}
		case "floor":
			i = math.Floor(v)
		case "ceil":
			i = math.Ceil(v)
		default:
			return nil, fmt.Errorf("nearest_mode %q is not supported", c.nearestMode)
		}
		return []resizeTap{{clampIdx(int(i)), 1}}, nil
	case "linear":
		v = math.Max(0, math.Min(float64(in-1), v))
		i0 := int(math.Floor(v))
		i1 := min(i0+1, in-1)
		t := v - float64(i0)
		return []resizeTap{{i0, 1 - t}, {i1, t}}, nil
	case "cubic":
		i0 := int(math.Floor(v))
		t := v - float64(i0)
		a := c.cubicA
		cubic := func(d float64) float64 { // the Keys kernel at distance d
			d = math.Abs(d)
			switch {
			case d <= 1:
				return ((a+2)*d-(a+3))*d*d + 1
			case d < 2:
				return ((a*d-5*a)*d+8*a)*d - 4*a
			}
			return 0
		}
		out := make([]resizeTap, 0, 4)
		sum := 0.0
		for k := -1; k <= 2; k++ {
			w := cubic(float64(k) - t)
			idx := i0 + k
			if idx < 0 || idx >= in {
				if c.excludeOutside {
					continue
				}
				idx = clampIdx(idx)
			}
			out = append(out, resizeTap{idx, w})
			sum += w
		}
		if c.excludeOutside && sum != 0 {
			for i := range out {
				out[i].weight /= sum
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("mode %q is not supported (want nearest, linear or cubic)", c.mode)
}

// antialiasTaps are the taps of the linear or cubic filter stretched by 1/scale (scale < 1):
// the filter evaluated at scale times the distance from v to each input index within its
// widened support, the weights normalized to sum 1. Indices outside the input read the edge
// element, or, with exclude_outside, are dropped (the rest renormalized).
func (c resizeConfig) antialiasTaps(v float64, in int, scale float64) ([]resizeTap, error) {
	radius := 1.0 // the filter's support at scale 1: linear [-1, 1], cubic [-2, 2]
	if c.mode == "cubic" {
		radius = 2
	}
	// The scale is at least about 1/in when an output element exists; bound the support
	// (and so the tap count) against hostile scales and coordinates all the same.
	half := math.Floor(-radius/scale) + 1 // the first tap's offset, <= 0
	if !(scale > 0) || !(-half <= 4*float64(in)+8) || math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > 1<<52 {
		return nil, fmt.Errorf("antialiased %s filter at scale %g and coordinate %g on an axis of %d is out of range", c.mode, scale, v, in)
	}
	start := int(half)
	// The taps sit at base+start .. base+1-start, base the index just below v (v-1 when v
	// is a whole number), so that v-base is in (0, 1].
	base := math.Floor(v)
	ratio := v - base
	if ratio == 0 {
		base, ratio = base-1, 1
	}
	a := c.cubicA
	filter := func(d float64) float64 {
		d = math.Abs(d)
		if c.mode == "linear" {
			return max(0, 1-d)
		}
		switch {
		case d <= 1:
			return ((a+2)*d-(a+3))*d*d + 1
		case d < 2:
			return ((a*d-5*a)*d+8*a)*d - 4*a
		}
		return 0
	}
	out := make([]resizeTap, 0, 2-2*start)
	sum := 0.0
	for k := start; k <= 1-start; k++ {
		w := filter(scale * (float64(k) - ratio))
		out = append(out, resizeTap{int(base) + k, w})
		sum += w
	}
	for i := range out {
		out[i].weight /= sum
	}
	if c.excludeOutside {
		kept, ksum := out[:0], 0.0
		for _, t := range out {
			if t.index >= 0 && t.index < in {
				kept = append(kept, t)
				ksum += t.weight
			}
		}
		out = kept
		if ksum != 0 {
			for i := range out {
				out[i].weight /= ksum
			}
		}
		return out, nil
	}
	for i := range out {
		out[i].index = max(0, min(in-1, out[i].index))
	}
	return out, nil
}

// resizeAlong interpolates v (shape) along axis ax to out elements.
func (c resizeConfig) resizeAlong(v []float64, shape []int64, ax, out int, scale, roiStart, roiEnd float64) ([]float64, error) {
	in := int(shape[ax])
	outer, inner := ops.Numel(shape[:ax]), ops.Numel(shape[ax+1:])
	taps := make([][]resizeTap, out)
	for x := range out {
		src, inside, err := c.sourceCoord(x, in, out, scale, roiStart, roiEnd)
		if err != nil {
			return nil, err
		}
		if !inside {
			taps[x] = []resizeTap{{-1, 1}}
			continue
		}
		if taps[x], err = c.taps(src, in, scale); err != nil {
			return nil, err
		}
	}
	res := make([]float64, outer*out*inner)
	for o := 0; o < outer; o++ {
		for x, ts := range taps {
			dst := res[(o*out+x)*inner : (o*out+x+1)*inner]
			for _, t := range ts {
				if t.index < 0 {
					for j := range dst {
						dst[j] = c.extrapolation
					}
					continue
				}
				src := v[(o*in+t.index)*inner : (o*in+t.index+1)*inner]
				for j := range dst {
					dst[j] += t.weight * src[j]
				}
			}
		}
	}
	return res, nil
}

// resize applies the config to x with per-axis output sizes and scales.
func (c resizeConfig) resize(x tensor.Tensor, outShape []int64, scales, roi []float64) (tensor.Tensor, error) {
	if x.DType() == graph.String || x.DType() == graph.Bool {
		return tensor.Tensor{}, fmt.Errorf("element type %s cannot be resized", x.DType())
	}
	v := tensor.Float64s(x)
	shape := append([]int64{}, x.Dims()...)
	r := len(shape)
	for ax := range r {
		if shape[ax] == outShape[ax] && c.coordMode != "tf_crop_and_resize" && scales[ax] == 1 {
			continue
		}
		if shape[ax] == 0 {
			return tensor.Tensor{}, fmt.Errorf("cannot resize an empty axis %d", ax)
		}
		rs, re := 0.0, 1.0
		if len(roi) == 2*r {
			rs, re = roi[ax], roi[ax+r]
		}
		var err error
		if v, err = c.resizeAlong(v, shape, ax, int(outShape[ax]), scales[ax], rs, re); err != nil {
			return tensor.Tensor{}, err
		}
		shape[ax] = outShape[ax]
	}
	if c.mode == "nearest" || x.DType() == graph.Float || x.DType() == graph.Double || x.DType() == graph.Float16 || x.DType() == graph.BFloat16 {
		return tensor.FromFloat64s(x.DType(), shape, v)
	}
	// Integer results of interpolation round to the nearest value and saturate.
	if lo, hi, err := ops.QuantRange(x.DType()); err == nil {
		for i, e := range v {
			v[i] = math.Max(lo, math.Min(hi, math.RoundToEven(e)))
		}
	}
	return tensor.FromFloat64s(x.DType(), shape, v)
}

// OpResize is Resize and Upsample on the host (the fallback of the Resize kernels).
func OpResize(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	r := len(x.Dims())
	c := resizeConfig{
		mode:           n.AttrString("mode", "nearest"),
		coordMode:      n.AttrString("coordinate_transformation_mode", "half_pixel"),
		nearestMode:    n.AttrString("nearest_mode", "round_prefer_floor"),
		cubicA:         float64(n.AttrFloat("cubic_coeff_a", -0.75)),
		extrapolation:  float64(n.AttrFloat("extrapolation_value", 0)),
		excludeOutside: n.AttrInt("exclude_outside", 0) != 0,
		// Antialiasing applies to the linear and cubic filters; nearest ignores it.
		antialias: n.AttrInt("antialias", 0) != 0,
	}
	var roi []float64
	var scalesT, sizesT tensor.Tensor
	if rc.OpsetVersion() < 11 {
		// Resize-10 has inputs (X, scales) and behaves as Upsample.
		c.coordMode, c.nearestMode = "asymmetric", "floor"
		scalesT = ops.Optional(in, 1)
	} else {
		if t := ops.Optional(in, 1); t.IsValid() {
			roi = tensor.Float64s(t)
		}
		scalesT, sizesT = ops.Optional(in, 2), ops.Optional(in, 3)
	}
	axes, err := ResizeAxes(n, r)
	if err != nil {
		return nil, err
	}
	if len(n.AttrInts("axes")) > 0 {
		if len(roi) == 2*len(axes) && len(axes) != r {
			full := make([]float64, 2*r)
			for i := range r {
				full[i], full[i+r] = 0, 1
			}
			for i, ax := range axes {
				full[ax], full[ax+r] = roi[i], roi[i+len(axes)]
			}
			roi = full
		}
	}
	outShape := append([]int64{}, x.Dims()...)
	scales := make([]float64, r)
	for i := range scales {
		scales[i] = 1
	}
	switch {
	case sizesT.IsValid() && sizesT.Len() > 0:
		if scalesT.IsValid() && scalesT.Len() > 0 {
			return nil, fmt.Errorf("only one of scales and sizes may be given")
		}
		sz := tensor.Int64s(sizesT)
		if len(sz) != len(axes) {
			return nil, fmt.Errorf("sizes has %d elements for %d axes", len(sz), len(axes))
		}
		policy := n.AttrString("keep_aspect_ratio_policy", "stretch")
		if policy != "stretch" {
			// One scale for all the resized axes: the smallest (not_larger) or largest
			// (not_smaller) of the per-axis ratios.
			s := 0.0
			for i, ax := range axes {
				q := float64(sz[i]) / float64(x.Dims()[ax])
				switch {
				case i == 0:
					s = q
				case policy == "not_larger":
					s = math.Min(s, q)
				case policy == "not_smaller":
					s = math.Max(s, q)
				default:
					return nil, fmt.Errorf("keep_aspect_ratio_policy %q is not supported", policy)
				}
			}
			for _, ax := range axes {
				scales[ax] = s
				outShape[ax] = int64(math.Round(s * float64(x.Dims()[ax])))
			}
			break
		}
		for i, ax := range axes {
			outShape[ax] = sz[i]
			scales[ax] = float64(sz[i]) / float64(x.Dims()[ax])
		}
	case scalesT.IsValid() && scalesT.Len() > 0:
		sc := tensor.Float64s(scalesT)
		if len(sc) != len(axes) {
			return nil, fmt.Errorf("scales has %d elements for %d axes", len(sc), len(axes))
		}
		for i, ax := range axes {
			if sc[i] <= 0 {
				return nil, fmt.Errorf("scale %g on axis %d must be positive", sc[i], ax)
			}
			scales[ax] = sc[i]
			outShape[ax] = int64(math.Floor(float64(x.Dims()[ax]) * sc[i]))
		}
	default:
		return nil, fmt.Errorf("neither scales nor sizes given")
	}
	if err := ops.ReserveShape(rc, "the output", x.DType(), outShape, 8); err != nil {
		return nil, err
	}
	out, err := c.resize(x, outShape, scales, roi)
	return []tensor.Tensor{out}, err
}

func init() {
	ops.HostOps["Resize"] = OpResize
	ops.HostOps["Upsample"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		var sc []float64
		if t := ops.Optional(in, 1); t.IsValid() {
			sc = tensor.Float64s(t)
		} else {
			for _, f := range n.AttrFloats("scales") {
				sc = append(sc, float64(f))
			}
		}
		if len(sc) != len(x.Dims()) {
			return nil, fmt.Errorf("scales has %d elements for rank %d", len(sc), len(x.Dims()))
		}
		c := resizeConfig{mode: n.AttrString("mode", "nearest"), coordMode: "asymmetric", nearestMode: "floor"}
		if c.mode == "bilinear" {
			c.mode = "linear"
		}
		outShape := make([]int64, len(sc))
		for i, s := range sc {
			if s < 1 {
				return nil, fmt.Errorf("Upsample scale %g on axis %d is below 1", s, i)
			}
			outShape[i] = int64(math.Floor(float64(x.Dims()[i]) * s))
		}
		out, err := c.resize(x, outShape, sc, nil)
		return []tensor.Tensor{out}, err
	}
}

// ResizeAxes is Resize's axes attribute normalized against rank r, or every axis.
func ResizeAxes(n *graph.Node, r int) ([]int, error) {
	a := n.AttrInts("axes")
	if len(a) == 0 {
		axes := make([]int, r)
		for i := range axes {
			axes[i] = i
		}
		return axes, nil
	}
	axes := make([]int, 0, len(a))
	for _, v := range a {
		ax, err := ops.NormAxis(v, r)
		if err != nil {
			return nil, err
		}
		axes = append(axes, ax)
	}
	return axes, nil
}
