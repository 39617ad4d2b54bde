package nn

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for the pooling ops: MaxPool (with its indices output), AveragePool, LpPool,
// their global forms, and MaxUnpool.

func poolHost(x tensor.Tensor, p ops.ConvParams, isMax, countPad bool, lp float64) (tensor.Tensor, error) {
	sp := x.Dims()[2:]
	nc := int(x.Dims()[0] * x.Dims()[1])
	outShape := []int64{x.Dims()[0], x.Dims()[1]}
	for _, o := range p.Out {
		outShape = append(outShape, int64(o))
	}
	osp := outShape[2:]
	isz, osz := ops.Numel(sp), ops.Numel(osp)
	xv := tensor.Float64s(x)
	out := make([]float64, nc*osz)
	kshape := make([]int64, len(p.Kernel))
	for i, k := range p.Kernel {
		kshape[i] = int64(k)
	}
	ist := ops.StridesOf(sp)
	ops.ForEachIndex(osp, func(of int, opos []int) {
		var offs []int
		pad := 0
		ops.ForEachIndex(kshape, func(_ int, kp []int) {
			// A tap reads the input when inside it on every axis; otherwise it counts as
			// padding (count_include_pad) when inside the padded input on every axis (a
			// ceil_mode window's overhang past the end padding does not count).
			o, inside, inPadded := 0, true, true
			for d := range opos {
				q := opos[d]*p.Strides[d] + kp[d]*p.Dilations[d] - p.PadBegin[d]
				if q < -p.PadBegin[d] || q >= int(sp[d])+p.PadEnd[d] {
					inPadded = false
				}
				if q < 0 || q >= int(sp[d]) {
					inside = false
					continue
				}
				o += q * ist[d]
			}
			switch {
			case inside:
				offs = append(offs, o)
			case inPadded:
				pad++
			}
		})
		for ch := 0; ch < nc; ch++ {
			base := ch * isz
			var r float64
			switch {
			case isMax:
				r = math.Inf(-1)
				for _, o := range offs {
					r = math.Max(r, xv[base+o])
				}
			case lp > 0:
				for _, o := range offs {
					r += math.Pow(math.Abs(xv[base+o]), lp)
				}
				r = math.Pow(r, 1/lp)
			default:
				for _, o := range offs {
					r += xv[base+o]
				}
				cnt := len(offs)
				if countPad {
					cnt += pad
				}
				r /= float64(max(cnt, 1))
			}
			out[ch*osz+of] = r
		}
	})
	return tensor.FromFloat64s(x.DType(), outShape, out)
}

func init() {
	pool := func(isMax bool, lp float64) ops.OpFunc {
		return func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
			x := in[0]
			if len(x.Dims()) < 3 {
				return nil, fmt.Errorf("pooling input of rank %d", len(x.Dims()))
			}
			p, err := ops.PoolParamsOf(n, x.Dims())
			if err != nil {
				return nil, err
			}
			if err := ops.ReserveShape(rc, "the output", x.DType(), p.OutShape(x.Dims()[0], x.Dims()[1]), 8); err != nil {
				return nil, err
			}
			if lp > 0 {
				lp = float64(n.AttrInt("p", 2))
			}
			out, err := poolHost(x, p, isMax, n.AttrInt("count_include_pad", 0) != 0, lp)
			if err != nil {
				return nil, err
			}
			if len(n.Outputs) > 1 && n.Outputs[1] != "" {
				return nil, fmt.Errorf("MaxPool indices output not supported")
			}
			return []tensor.Tensor{out}, nil
		}
	}
	ops.HostOps["MaxPool"] = pool(true, 0)
	ops.HostOps["AveragePool"] = pool(false, 0)
	ops.HostOps["LpPool"] = pool(false, 2)
	global := func(kind string) ops.OpFunc {
		return func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
			x := in[0]
			if len(x.Dims()) < 2 {
				return nil, fmt.Errorf("the input X (input 0, shape %v) must be (N, C, ...): rank >= 2", x.Dims())
			}
			axes := make([]int64, 0, len(x.Dims()))
			for i := 2; i < len(x.Dims()); i++ {
				axes = append(axes, int64(i))
			}
			init, add, fin := 0.0, func(a, v float64) float64 { return a + v }, func(a float64, c int) float64 { return a / float64(c) }
			switch kind {
			case "max":
				init, add, fin = math.Inf(-1), math.Max, func(a float64, _ int) float64 { return a }
			case "lp":
				p := float64(n.AttrInt("p", 2))
				add = func(a, v float64) float64 { return a + math.Pow(math.Abs(v), p) }
				fin = func(a float64, _ int) float64 { return math.Pow(a, 1/p) }
			}
			if len(axes) == 0 {
				// No spatial axes: each value is pooled alone (Reduce would take no axes as all).
				v := tensor.Float64s(x)
				for i := range v {
					v[i] = fin(add(init, v[i]), 1)
				}
				return ops.FloatResult(x.DType(), x.Dims(), v)
			}
			out, err := ops.Reduce(x, axes, true, init, add, fin)
			return []tensor.Tensor{out}, err
		}
	}
	ops.HostOps["GlobalMaxPool"] = global("max")
	ops.HostOps["GlobalAveragePool"] = global("avg")
	ops.HostOps["GlobalLpPool"] = global("lp")
	maxPool := ops.HostOps["MaxPool"]
	ops.HostOps["MaxPool"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		if len(n.Outputs) > 1 && n.Outputs[1] != "" {
			return MaxPoolWithIndices(rc, n, in[0])
		}
		return maxPool(rc, n, in)
	}
	ops.HostOps["MaxUnpool"] = OpMaxUnpool
}

// MaxPoolWithIndices is MaxPool with its Indices output: the flat index of each maximum in
// the input tensor, spatial axes row-major (storage_order 0) or column-major (1).
func MaxPoolWithIndices(rc ops.OpRun, n *graph.Node, x tensor.Tensor) ([]tensor.Tensor, error) {
	if len(x.Dims()) < 3 {
		return nil, fmt.Errorf("pooling input of rank %d", len(x.Dims()))
	}
	p, err := ops.PoolParamsOf(n, x.Dims())
	if err != nil {
		return nil, err
	}
	if err := ops.ReserveShape(rc, "the output", x.DType(), p.OutShape(x.Dims()[0], x.Dims()[1]), 16); err != nil {
		return nil, err
	}
	colMajor := n.AttrInt("storage_order", 0) != 0
	sp := x.Dims()[2:]
	k := len(sp)
	nc := int(x.Dims()[0] * x.Dims()[1])
	isz := ops.Numel(sp)
	ost := make([]int64, k)
	for i, o := range p.Out {
		ost[i] = int64(o)
	}
	osz := ops.Numel(ost)
	ist := ops.StridesOf(sp)
	cst := make([]int, k) // column-major strides of the spatial axes
	s := 1
	for i := 0; i < k; i++ {
		cst[i] = s
		s *= int(sp[i])
	}
	kshape := make([]int64, k)
	for i, v := range p.Kernel {
		kshape[i] = int64(v)
	}
	v := tensor.Float64s(x)
	out, ind := make([]float64, nc*osz), make([]int64, nc*osz)
	ops.ForEachIndex(ost, func(of int, opos []int) {
		for ch := 0; ch < nc; ch++ {
			best, bi := math.Inf(-1), int64(-1)
			ops.ForEachIndex(kshape, func(_ int, kp []int) {
				o, oc := 0, 0
				for d := range opos {
					q := opos[d]*p.Strides[d] + kp[d]*p.Dilations[d] - p.PadBegin[d]
					if q < 0 || q >= int(sp[d]) {
						return
					}
					o += q * ist[d]
					oc += q * cst[d]
				}
				if e := v[ch*isz+o]; e > best || bi < 0 {
					best = e
					if colMajor {
						bi = int64(ch*isz + oc)
					} else {
						bi = int64(ch*isz + o)
					}
				}
			})
			out[ch*osz+of], ind[ch*osz+of] = best, bi
		}
	})
	shape := append([]int64{x.Dims()[0], x.Dims()[1]}, ost...)
	y, err := tensor.FromFloat64s(x.DType(), shape, out)
	if err != nil {
		return nil, err
	}
	return []tensor.Tensor{y, ops.I64Tensor(shape, ind)}, nil
}

// OpMaxUnpool is MaxUnpool: the values of x scattered to the positions given by the indices,
// zeros elsewhere.
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
	if err := ops.ReserveShape(rc, "the output", x.DType(), shape, 8); err != nil {
		return nil, err
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
	return ops.FloatResult(x.DType(), shape, out)
}
