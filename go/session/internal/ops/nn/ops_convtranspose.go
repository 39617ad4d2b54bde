package nn

import (
	"fmt"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host function for ConvTranspose (N-D, groups, dilations, output_padding, output_shape,
// auto_pad): every input element scatters its products with the kernel into the output.

// ConvTransposeGeometry returns the padding at the start of each spatial axis and the output
// spatial sizes.
func ConvTransposeGeometry(n *graph.Node, in []int64, kernel []int) (strides, dilations, padBegin, out []int, err error) {
	k := len(in)
	strides, dilations = ops.IntsOr(n, "strides", k, 1), ops.IntsOr(n, "dilations", k, 1)
	outPad := ops.IntsOr(n, "output_padding", k, 0)
	pads := n.AttrInts("pads")
	outShape := n.AttrInts("output_shape")
	if len(outShape) > k {
		outShape = outShape[len(outShape)-k:]
	}
	autoPad := n.AttrString("auto_pad", "NOTSET")
	padBegin, out = make([]int, k), make([]int, k)
	for i := range k {
		if strides[i] <= 0 || dilations[i] <= 0 {
			return nil, nil, nil, nil, fmt.Errorf("strides and dilations must be positive")
		}
		full := strides[i]*(int(in[i])-1) + outPad[i] + (kernel[i]-1)*dilations[i] + 1
		switch {
		case len(outShape) == k || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER":
			want := int(in[i]) * strides[i]
			if len(outShape) == k {
				want = int(outShape[i])
			}
			// A negative total (output_shape beyond the full size) extends the end: the
			// halves use floor division as the spec's reference does.
			total := full - want
			half := floorDiv(total, 2)
			if autoPad == "SAME_UPPER" {
				padBegin[i] = half
			} else {
				padBegin[i] = total - half
			}
			out[i] = want
		case autoPad == "VALID" || len(pads) == 0:
			out[i] = full
		case len(pads) == 2*k:
			padBegin[i] = int(pads[i])
			out[i] = full - int(pads[i]) - int(pads[i+k])
		default:
			return nil, nil, nil, nil, fmt.Errorf("pads has %d values for %d spatial axes", len(pads), k)
		}
		if out[i] <= 0 {
			return nil, nil, nil, nil, fmt.Errorf("output size %d on spatial axis %d is not positive", out[i], i)
		}
	}
	return strides, dilations, padBegin, out, nil
}

// OpConvTranspose is ConvTranspose on the host (the fallback of its Loom kernel).
func OpConvTranspose(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x, w, b := in[0], in[1], ops.Optional(in, 2)
	if len(x.Dims()) < 3 || len(w.Dims()) != len(x.Dims()) {
		return nil, fmt.Errorf("input %v and weight %v must be (N, C, spatial...) of one rank", x.Dims(), w.Dims())
	}
	group := int(n.AttrInt("group", 1))
	nb, c := int(x.Dims()[0]), int(x.Dims()[1])
	if group <= 0 || c%group != 0 || int(w.Dims()[0]) != c {
		return nil, fmt.Errorf("input channels %d, weight %v and group %d disagree", c, w.Dims(), group)
	}
	mg := int(w.Dims()[1])
	m, cg := mg*group, c/group
	kernel := make([]int, len(x.Dims())-2)
	for i := range kernel {
		kernel[i] = int(w.Dims()[i+2])
	}
	if ks := n.AttrInts("kernel_shape"); len(ks) == len(kernel) {
		for i := range kernel {
			if int(ks[i]) != kernel[i] {
				return nil, fmt.Errorf("kernel_shape %v disagrees with weight %v", ks, w.Dims())
			}
		}
	}
	sp := x.Dims()[2:]
	strides, dil, padBegin, osp, err := ConvTransposeGeometry(n, sp, kernel)
	if err != nil {
		return nil, err
	}
	if b.IsValid() && b.Len() != m {
		return nil, fmt.Errorf("bias has %d elements for %d output channels", b.Len(), m)
	}
	outShape := []int64{int64(nb), int64(m)}
	for _, o := range osp {
		outShape = append(outShape, int64(o))
	}
	osz, isz, ksz := ops.Numel(outShape[2:]), ops.Numel(sp), ops.Numel(w.Dims()[2:])
	ost := ops.StridesOf(outShape[2:])
	xv, wv := tensor.Float64s(x), tensor.Float64s(w)
	out := make([]float64, nb*m*osz)
	if b.IsValid() {
		bv := tensor.Float64s(b)
		for i := range out {
			out[i] = bv[(i/osz)%m]
		}
	}
	// For each input position and kernel tap, the output offset it adds to (-1 outside).
	var kpos [][]int
	ops.ForEachIndex(w.Dims()[2:], func(_ int, pos []int) { kpos = append(kpos, append([]int{}, pos...)) })
	target := make([]int, ksz)
	ops.ForEachIndex(sp, func(ifl int, ipos []int) {
		for t, kp := range kpos {
			o := 0
			for d := range ipos {
				q := ipos[d]*strides[d] + kp[d]*dil[d] - padBegin[d]
				if q < 0 || q >= osp[d] {
					o = -1
					break
				}
				o += q * ost[d]
			}
			target[t] = o
		}
		for bn := 0; bn < nb; bn++ {
			for ic := 0; ic < c; ic++ {
				// A zero input is not skipped: 0 times an infinite or NaN weight is NaN.
				xval := xv[(bn*c+ic)*isz+ifl]
				g := ic / cg
				for om := 0; om < mg; om++ {
					oc := g*mg + om
					ob := (bn*m + oc) * osz
					wb := (ic*mg + om) * ksz
					for t, o := range target {
						if o >= 0 {
							out[ob+o] += xval * wv[wb+t]
						}
					}
				}
			}
		}
	})
	return ops.FloatResult(x.DType(), outShape, out)
}

func init() {
	ops.HostOps["ConvTranspose"] = OpConvTranspose
}

func floorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
