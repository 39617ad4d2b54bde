package nn

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// DeformConv (opset 19): a convolution whose kernel taps sample the input at positions moved
// by learned offsets. For batch b, offset group g, output position o and kernel tap t, the tap
// reads the input at o*strides - pads_begin + t*dilations + offset[b, g, t, axis, o] along each
// spatial axis, interpolated (bilinear, multilinear for other ranks) from the neighbouring
// elements, those outside the image reading zero; the sample is scaled by mask[b, g, t, o]
// (1 when absent) and weighted by W as in Conv, B added per output channel.
//
// Inputs: X (N, C, D1..Dk), W (oC, C/group, k1..kk), offset (N, offset_group*k*prod(kernel),
// O1..Ok) laid out (offset group, kernel tap, axis), optional B (oC) and mask (N,
// offset_group*prod(kernel), O1..Ok). O is the output size that Conv's arithmetic gives.

func init() {
	ops.HostOps["DeformConv"] = opDeformConv
}

// deformFloat reports whether dt is one of the floating types DeformConv takes.
func deformFloat(dt tensor.DType) bool {
	return dt == graph.Float || dt == graph.Double || dt == graph.Float16 || dt == graph.BFloat16
}

// mulCapped is a*b for non-negative a and b, or -1 when it exceeds math.MaxInt32*math.MaxInt32
// (beyond any real tensor's axis).
func mulCapped(a, b int64) int64 {
	const limit = int64(math.MaxInt32) * math.MaxInt32
	if a < 0 || b < 0 {
		return -1
	}
	if b != 0 && a > limit/b {
		return -1
	}
	return a * b
}

func opDeformConv(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	if len(in) < 3 {
		return nil, fmt.Errorf("DeformConv takes X, W and offset (inputs 0-2), got %d inputs", len(in))
	}
	x, w, off := in[0], in[1], in[2]
	b, mask := ops.Optional(in, 3), ops.Optional(in, 4)
	xd, wd, od := x.Dims(), w.Dims(), off.Dims()
	if len(xd) < 3 {
		return nil, fmt.Errorf("the input X (input 0, shape %v) must be (N, C, D1, ...): rank 3 or more", xd)
	}
	for i, t := range []tensor.Tensor{x, w, off, b, mask} {
		if t.IsValid() && !deformFloat(t.DType()) {
			return nil, fmt.Errorf("input %d is of type %s: DeformConv takes float, double, float16 or bfloat16", i, t.DType())
		}
	}
	k := len(xd) - 2
	p, err := ops.ConvParamsOf(n, xd, wd)
	if err != nil {
		return nil, err
	}
	og := n.AttrInt("offset_group", 1)
	ch, oc := xd[1], wd[0]
	if og < 1 || og > math.MaxInt32 || ch%og != 0 {
		return nil, fmt.Errorf("offset_group %d must be positive and divide the input channels %d (X shape %v)", og, ch, xd)
	}
	// The kernel's size, capped so that it cannot overflow.
	kn := int64(1)
	for _, v := range p.Kernel {
		kn = mulCapped(kn, int64(v))
	}
	outSp := make([]int64, k)
	for i, o := range p.Out {
		outSp[i] = int64(o)
	}
	wantOff := append([]int64{xd[0], mulCapped(mulCapped(og, int64(k)), kn)}, outSp...)
	if !ops.SameShape(od, wantOff) {
		return nil, fmt.Errorf("the offset (input 2, shape %v) must be %v: (N, offset_group %d * %d axes * %d kernel taps, output shape %v)", od, wantOff, og, k, kn, outSp)
	}
	if b.IsValid() && !ops.SameShape(b.Dims(), []int64{oc}) {
		return nil, fmt.Errorf("the bias B (input 3, shape %v) must be (%d): one per output channel", b.Dims(), oc)
	}
	if mask.IsValid() {
		wantMask := append([]int64{xd[0], mulCapped(og, kn)}, outSp...)
		if !ops.SameShape(mask.Dims(), wantMask) {
			return nil, fmt.Errorf("the mask (input 4, shape %v) must be %v: (N, offset_group %d * %d kernel taps, output shape %v)", mask.Dims(), wantMask, og, kn, outSp)
		}
	}
	outShape := p.OutShape(xd[0], oc)
	if err := ops.ReserveShape(rc, "the output", x.DType(), outShape, 8); err != nil {
		return nil, err
	}
	if ops.Numel(outShape) == 0 {
		// Its shape may hold huge dimensions beside a 0.
		return []tensor.Tensor{tensor.Take(x, outShape, nil)}, nil
	}
	// Every output axis is positive here, so N, oC and the output's spatial size are within its
	// element count.
	nb, noc, no := int(xd[0]), int(oc), ops.Numel(outSp)
	out := make([]float64, ops.Numel(outShape))
	if b.IsValid() {
		bv := tensor.Float64s(b)
		for i := range nb * noc {
			dst := out[i*no : (i+1)*no]
			for j := range dst {
				dst[j] = bv[i%noc]
			}
		}
	}
	if x.Len() == 0 || w.Len() == 0 {
		// No channels or no kernel taps to sum over: the output is the bias. (X holds no
		// element only when C is 0 here, N and the image being positive for a positive output.)
		return ops.FloatResult(x.DType(), outShape, out)
	}
	// Every axis of X, W and the offset is positive now: their sizes bound the loops below.
	xv, wv, ov := tensor.Float64s(x), tensor.Float64s(w), tensor.Float64s(off)
	var mv []float64
	if mask.IsValid() {
		mv = tensor.Float64s(mask)
	}
	img := xd[2:]
	imgSt := ops.StridesOf(img)
	isz := ops.Numel(img)
	nc, ng, kk := int(ch), int(og), int(kn)
	cpog := nc / ng              // input channels per offset group
	icpg := int(wd[1])           // input channels per group
	ocpg := noc / p.Group        // output channels per group
	kpos := make([][]int, 0, kk) // each kernel tap's position
	ops.ForEachIndex(wd[2:], func(_ int, pos []int) { kpos = append(kpos, append([]int{}, pos...)) })
	coord := make([]float64, k)
	// corners are the image elements a sample reads and their weights; at most 2 per axis,
	// and never more than the image holds.
	type corner struct {
		idx int
		w   float64
	}
	corners := make([]corner, 0, 16)
	next := make([]corner, 0, 16)
	for bi := range nb {
		for g := range ng {
			ops.ForEachIndex(outSp, func(o int, opos []int) {
				for t := range kk {
					tapBase := (bi*ng+g)*kk + t
					m := 1.0
					if mv != nil {
						m = mv[tapBase*no+o]
					}
					inside := true
					for d := range k {
						c := float64(opos[d]*p.Strides[d]-p.PadBegin[d]+kpos[t][d]*p.Dilations[d]) + ov[(tapBase*k+d)*no+o]
						// NaN fails this test too; a position beyond (-1, D) reads only zeros.
						if !(c > -1 && c < float64(img[d])) {
							inside = false
							break
						}
						coord[d] = c
					}
					if inside {
						corners = append(corners[:0], corner{0, 1})
						for d := range k {
							f := math.Floor(coord[d]) // in [-1, D-1]: a safe int
							i0, fr := int(f), coord[d]-f
							next = next[:0]
							for _, cr := range corners {
								if i0 >= 0 {
									next = append(next, corner{cr.idx + i0*imgSt[d], cr.w * (1 - fr)})
								}
								if i0+1 < int(img[d]) {
									next = append(next, corner{cr.idx + (i0+1)*imgSt[d], cr.w * fr})
								}
							}
							corners, next = next, corners
						}
					}
					for c := g * cpog; c < (g+1)*cpog; c++ {
						s := 0.0
						if inside {
							plane := xv[(bi*nc+c)*isz : (bi*nc+c+1)*isz]
							for _, cr := range corners {
								s += cr.w * plane[cr.idx]
							}
						}
						s *= m
						grp, ci := c/icpg, c%icpg
						for q := grp * ocpg; q < (grp+1)*ocpg; q++ {
							out[(bi*noc+q)*no+o] += wv[(q*icpg+ci)*kk+t] * s
						}
					}
				}
			})
		}
	}
	return ops.FloatResult(x.DType(), outShape, out)
}
