package ops

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/infer"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// The host helpers the host functions of several kinds share (and the kernel planners' host
// fallbacks): result conversion, index maps for transposes, flat concatenation, reductions, and
// the reference matrix product and convolution.

// FloatResult is an op's one output of element type dt and the given shape, converted from v.
func FloatResult(dt tensor.DType, shape []int64, v []float64) ([]tensor.Tensor, error) {
	t, err := tensor.FromFloat64s(dt, shape, v)
	return []tensor.Tensor{t}, err
}

// MatmulHost multiplies a and b as ONNX MatMul does (batched, broadcasting the batch axes) on
// the host: the reference path the kernels fall back to.
func MatmulHost(a, b tensor.Tensor) (tensor.Tensor, error) {
	d, err := infer.MatMulShapes(a.Dims(), b.Dims())
	if err != nil {
		return tensor.Tensor{}, err
	}
	ia, err := BroadcastIndex(d.ABatch, d.Batch)
	if err != nil {
		return tensor.Tensor{}, err
	}
	ib, _ := BroadcastIndex(d.BBatch, d.Batch)
	av, bv := tensor.Float64s(a), tensor.Float64s(b)
	mm, kk, nn := int(d.M), int(d.K), int(d.N)
	out := make([]float64, len(ia)*mm*nn)
	for bi := range ia {
		ao, bo, oo := ia[bi]*mm*kk, ib[bi]*kk*nn, bi*mm*nn
		for i := 0; i < mm; i++ {
			for p := 0; p < kk; p++ {
				// No skipping of a zero x: 0 times an infinite or NaN element of b is NaN, and
				// the product must say so (as the kernels and ONNX Runtime do).
				x := av[ao+i*kk+p]
				for j := 0; j < nn; j++ {
					out[oo+i*nn+j] += x * bv[bo+p*nn+j]
				}
			}
		}
	}
	return tensor.FromFloat64s(a.DType(), d.Out, out)
}

// ConvHost is an N-d grouped convolution of x by w (plus the bias b when valid) with the
// geometry p, on the host: the reference path of Conv, the fused and the integer convolutions.
func ConvHost(rc OpRun, x, w, b tensor.Tensor, p ConvParams) (tensor.Tensor, error) {
	if len(x.Dims()) < 3 {
		return tensor.Tensor{}, fmt.Errorf("the input X (input 0, shape %v) must be (N, C, spatial...): rank >= 3", x.Dims())
	}
	nb, c, m := int(x.Dims()[0]), int(x.Dims()[1]), int(w.Dims()[0])
	if b.IsValid() && int64(b.Len()) != w.Dims()[0] {
		return tensor.Tensor{}, fmt.Errorf("the bias B (input 2, shape %v) has %d values, want one per output channel: %d (the weight's shape %v)", b.Dims(), b.Len(), w.Dims()[0], w.Dims())
	}
	if err := ReserveShape(rc, "the output", x.DType(), p.OutShape(x.Dims()[0], w.Dims()[0]), 8); err != nil {
		return tensor.Tensor{}, err
	}
	sp := x.Dims()[2:]
	cg, mg := c/p.Group, m/p.Group
	outShape := []int64{int64(nb), int64(m)}
	for _, o := range p.Out {
		outShape = append(outShape, int64(o))
	}
	osp := outShape[2:]
	xv, wv := tensor.Float64s(x), tensor.Float64s(w)
	var bv []float64
	if b.IsValid() {
		bv = tensor.Float64s(b)
	}
	ksz := Numel(w.Dims()[2:])
	kshape := w.Dims()[2:]
	isz, osz := Numel(sp), Numel(osp)
	out := make([]float64, nb*m*osz)
	ist := StridesOf(sp)
	kpos := make([][]int, 0, ksz)
	ForEachIndex(kshape, func(_ int, pos []int) { kpos = append(kpos, append([]int{}, pos...)) })
	ForEachIndex(osp, func(of int, opos []int) {
		// For each output position, the input offsets of every kernel tap (-1 in padding).
		offs := make([]int, ksz)
		for t, kp := range kpos {
			o := 0
			for d := range opos {
				q := opos[d]*p.Strides[d] + kp[d]*p.Dilations[d] - p.PadBegin[d]
				if q < 0 || q >= int(sp[d]) {
					o = -1
					break
				}
				o += q * ist[d]
			}
			offs[t] = o
		}
		for bn := 0; bn < nb; bn++ {
			for oc := 0; oc < m; oc++ {
				g := oc / mg
				s := 0.0
				if bv != nil {
					s = bv[oc]
				}
				for ic := 0; ic < cg; ic++ {
					xb := (bn*c + g*cg + ic) * isz
					wb := (oc*cg + ic) * ksz
					for t, o := range offs {
						if o >= 0 {
							s += xv[xb+o] * wv[wb+t]
						}
					}
				}
				out[(bn*m+oc)*osz+of] = s
			}
		}
	})
	return tensor.FromFloat64s(x.DType(), outShape, out)
}

// Reduce folds the given axes (all when empty) of x.
func Reduce(x tensor.Tensor, axes []int64, keep bool, init float64, f func(acc, v float64) float64, fin func(acc float64, n int) float64) (tensor.Tensor, error) {
	r := len(x.Dims())
	red := make([]bool, r)
	if len(axes) == 0 {
		for i := range red {
			red[i] = true
		}
	}
	for _, a := range axes {
		ax, err := NormAxis(a, r)
		if err != nil {
			return tensor.Tensor{}, err
		}
		red[ax] = true
	}
	var out, keptShape []int64
	cnt := 1
	for i, d := range x.Dims() {
		if red[i] {
			cnt *= int(d)
			keptShape = append(keptShape, 1)
			if keep {
				out = append(out, 1)
			}
		} else {
			keptShape = append(keptShape, d)
			out = append(out, d)
		}
	}
	ost := StridesOf(keptShape)
	acc := make([]float64, Numel(keptShape))
	for i := range acc {
		acc[i] = init
	}
	xv := tensor.Float64s(x)
	ForEachIndex(x.Dims(), func(flat int, pos []int) {
		o := 0
		for k, p := range pos {
			if !red[k] {
				o += p * ost[k]
			}
		}
		acc[o] = f(acc[o], xv[flat])
	})
	if fin != nil {
		for i := range acc {
			acc[i] = fin(acc[i], cnt)
		}
	}
	return tensor.FromFloat64s(x.DType(), out, acc)
}

// I64Tensor is an int64 tensor of the given shape over v.
func I64Tensor(shape []int64, v []int64) tensor.Tensor {
	return tensor.Raw(graph.Int64, shape, v)
}

// AxesOf reads axes from an attribute (before opset since) or the input at index i.
func AxesOf(rc OpRun, n *graph.Node, in []tensor.Tensor, i int, since int64) []int64 {
	if rc.OpsetVersion() < since {
		return n.AttrInts("axes")
	}
	if len(in) > i && in[i].IsValid() {
		return tensor.Int64s(in[i])
	}
	return nil
}

// TransposeIndex is the shape of a tensor of the given shape transposed by perm, and per
// output element the flat index of its source element.
func TransposeIndex(shape []int64, perm []int) ([]int64, []int) {
	out := make([]int64, len(shape))
	for i, p := range perm {
		out[i] = shape[p]
	}
	st := StridesOf(shape)
	idx := make([]int, Numel(out))
	ForEachIndex(out, func(f int, pos []int) {
		o := 0
		for i, p := range perm {
			o += pos[i] * st[p]
		}
		idx[f] = o
	})
	return out, idx
}

// B2F is 1 for true and 0 for false.
func B2F(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// IdentityIndex is 0, 1, ..., n-1.
func IdentityIndex(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// MathSelect is a when c holds, else b.
func MathSelect(c bool, a, b float64) float64 {
	if c {
		return a
	}
	return b
}

// ConcatFlat joins the elements of tensors of one type into a flat tensor.
func ConcatFlat(ts ...tensor.Tensor) (tensor.Tensor, error) {
	total := 0
	for _, t := range ts {
		if t.DType() != ts[0].DType() {
			return tensor.Tensor{}, fmt.Errorf("element types %s and %s differ", ts[0].DType(), t.DType())
		}
		total += t.Len()
	}
	out, err := tensor.Zeros(ts[0].DType(), []int64{int64(total)})
	if err != nil {
		return tensor.Tensor{}, err
	}
	off := 0
	for _, t := range ts {
		copyInto(out.Data(), off, t.Data())
		off += t.Len()
	}
	return out, nil
}

func copyInto(dst any, off int, src any) {
	if d, _, ok := tensor.NarrowBytes(dst); ok {
		sb, _, _ := tensor.NarrowBytes(src)
		copy(d[off:], sb)
		return
	}
	switch d := dst.(type) {
	case []float32:
		copy(d[off:], src.([]float32))
	case []float64:
		copy(d[off:], src.([]float64))
	case []tensor.Float16:
		copy(d[off:], src.([]tensor.Float16))
	case []tensor.BFloat16:
		copy(d[off:], src.([]tensor.BFloat16))
	case []int8:
		copy(d[off:], src.([]int8))
	case []int16:
		copy(d[off:], src.([]int16))
	case []int32:
		copy(d[off:], src.([]int32))
	case []int64:
		copy(d[off:], src.([]int64))
	case []uint8:
		copy(d[off:], src.([]uint8))
	case []uint16:
		copy(d[off:], src.([]uint16))
	case []uint32:
		copy(d[off:], src.([]uint32))
	case []uint64:
		copy(d[off:], src.([]uint64))
	case []bool:
		copy(d[off:], src.([]bool))
	case []string:
		copy(d[off:], src.([]string))
	}
}

// QuantRange is the representable range of an integer quantized type.
func QuantRange(dt tensor.DType) (lo, hi float64, err error) {
	switch dt {
	case graph.Uint8:
		return 0, 255, nil
	case graph.Int8:
		return -128, 127, nil
	case graph.Uint16:
		return 0, 65535, nil
	case graph.Int16:
		return -32768, 32767, nil
	case graph.Int32:
		return math.MinInt32, math.MaxInt32, nil
	case graph.Uint4:
		return 0, 15, nil
	case graph.Int4:
		return -8, 7, nil
	case graph.Uint2:
		return 0, 3, nil
	case graph.Int2:
		return -2, 1, nil
	}
	return 0, 0, fmt.Errorf("quantized type %s is not supported (want uint8, int8, uint16, int16, int32, uint4, int4, uint2 or int2)", dt)
}

// SameShape reports whether the shapes a and b are equal.
func SameShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
