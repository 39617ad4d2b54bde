package arith

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for the linear quantization operators: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv. Values are
// rounded half to even and saturated to the quantized type, as the ONNX spec asks.

// saturateRound rounds v half to even and clamps it into dt's range, in place.
func saturateRound(v []float64, dt tensor.DType) error {
	lo, hi, err := ops.QuantRange(dt)
	if err != nil {
		return err
	}
	for i, x := range v {
		v[i] = math.Max(lo, math.Min(hi, math.RoundToEven(x)))
	}
	return nil
}

// perAxis maps the flat index of an element of shape to the element of a quantization
// parameter p: a scalar (or one element) applies everywhere, a 1-D tensor of shape[axis]
// elements per slice along axis.
func perAxis(p tensor.Tensor, shape []int64, axis int64, what string) (func(i int) int, error) {
	if !p.IsValid() || p.Len() == 1 {
		return func(int) int { return 0 }, nil
	}
	ax, err := ops.NormAxis(axis, len(shape))
	if err != nil {
		return nil, err
	}
	if len(p.Dims()) != 1 || p.Dims()[0] != shape[ax] {
		return nil, fmt.Errorf("%s of shape %v does not fit axis %d of shape %v", what, p.Dims(), ax, shape)
	}
	inner, dim := ops.Numel(shape[ax+1:]), int(shape[ax])
	return func(i int) int { return (i / inner) % dim }, nil
}

// blocked maps the flat index of an element of shape to the element of a blocked
// quantization parameter p (opset 21+, block_size > 0): p has shape's rank and its dims but
// along axis, where it has ceil(shape[axis] / block) elements, each for block consecutive
// elements of shape (the last block possibly shorter). An absent p (no zero point) maps to 0.
func blocked(p tensor.Tensor, shape []int64, axis, block int64, what string) (func(i int) int, error) {
	if block <= 0 {
		return nil, fmt.Errorf("block_size %d must be positive", block)
	}
	if !p.IsValid() {
		return func(int) int { return 0 }, nil
	}
	pd := p.Dims()
	if len(pd) != len(shape) {
		return nil, fmt.Errorf("blocked quantization (block_size %d) needs %s of the input's rank %d, got shape %v for the input's %v", block, what, len(shape), pd, shape)
	}
	ax, err := ops.NormAxis(axis, len(shape))
	if err != nil {
		return nil, err
	}
	d := shape[ax]
	blocks := int64(0)
	if d > 0 {
		blocks = (d-1)/block + 1 // ceil(d / block) without overflow
	}
	for j := range shape {
		want := shape[j]
		if j == ax {
			want = blocks
		}
		if pd[j] != want {
			return nil, fmt.Errorf("%s of shape %v does not fit blocks of %d along axis %d of the input's shape %v: dimension %d must be %d", what, pd, block, ax, shape, j, want)
		}
	}
	inner, dim, nb, bs := ops.Numel(shape[ax+1:]), int(d), int(blocks), int(block)
	return func(i int) int {
		in, k, outer := i%inner, (i/inner)%dim, i/(inner*dim)
		return (outer*nb+k/bs)*inner + in
	}, nil
}

// quantParam maps the elements of x's shape to those of a scale or zero point: per tensor or
// per axis, or by blocks when the node's block_size is set (nonzero).
func quantParam(n *graph.Node, p tensor.Tensor, shape []int64, axis int64, what string) (func(i int) int, error) {
	if block := n.AttrInt("block_size", 0); block != 0 {
		return blocked(p, shape, axis, block, what)
	}
	return perAxis(p, shape, axis, what)
}

// divIn divides in the precision of dt (float32 for float types narrower than double, the
// quotient then rounded to float16 or bfloat16 when dt is one), so that values on a rounding
// tie quantize as the spec's reference does.
func divIn(dt tensor.DType, a, b float64) float64 {
	switch dt {
	case graph.Double:
		return a / b
	case graph.Float16:
		return float64(tensor.ToFloat16(tensor.ToFloat16(float32(a)).Float32() / tensor.ToFloat16(float32(b)).Float32()).Float32())
	case graph.BFloat16:
		return float64(tensor.ToBFloat16(tensor.ToBFloat16(float32(a)).Float32() / tensor.ToBFloat16(float32(b)).Float32()).Float32())
	}
	return float64(float32(a) / float32(b))
}

// zeroPoints returns zp's values as float64, or nil (all zero) when zp is absent.
func zeroPoints(zp tensor.Tensor) []float64 {
	if !zp.IsValid() {
		return nil
	}
	return tensor.Float64s(zp)
}

func at(v []float64, i int) float64 {
	if v == nil {
		return 0
	}
	return v[i]
}

// quantizeTo quantizes real values v with scale and zero point (already mapped per element).
func quantizeTo(dt tensor.DType, shape []int64, v []float64) (tensor.Tensor, error) {
	if err := saturateRound(v, dt); err != nil {
		return tensor.Tensor{}, err
	}
	return tensor.FromFloat64s(dt, shape, v)
}

// integerOperand returns x - zp as float64, with zp mapped along axis of x (axis -1 means a
// scalar zero point only).
func integerOperand(x, zp tensor.Tensor, axis int64, what string) ([]float64, error) {
	v := tensor.Float64s(x)
	if !zp.IsValid() {
		return v, nil
	}
	idx, err := perAxis(zp, x.Dims(), axis, what)
	if err != nil {
		return nil, err
	}
	z := tensor.Float64s(zp)
	for i := range v {
		v[i] -= z[idx(i)]
	}
	return v, nil
}

// matmulRows multiplies a (batch.., M, K) by b (.., K, N) already shifted by their zero
// points, by way of the float64 MatMul host path.
func shiftedMatMul(a, b tensor.Tensor, av, bv []float64) (tensor.Tensor, error) {
	at, err := tensor.FromFloat64s(graph.Double, a.Dims(), av)
	if err != nil {
		return tensor.Tensor{}, err
	}
	bt, err := tensor.FromFloat64s(graph.Double, b.Dims(), bv)
	if err != nil {
		return tensor.Tensor{}, err
	}
	return ops.MatmulHost(at, bt)
}

// rowZeroPointAxis is the axis a per-row zero point of a matrix operand applies to.
func rowAxis(t tensor.Tensor) int64 {
	if len(t.Dims()) < 2 {
		return 0
	}
	return int64(len(t.Dims()) - 2)
}

func colAxis(t tensor.Tensor) int64 { return int64(len(t.Dims()) - 1) }

func init() {
	ops.HostOps["QuantizeLinear"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x, scale, zp := in[0], in[1], ops.Optional(in, 2)
		dt := graph.Uint8
		if zp.IsValid() {
			dt = zp.DType()
		} else if a := n.Attr("output_dtype"); a != nil && a.Int != 0 {
			dt = tensor.DType(a.Int)
		}
		axis := n.AttrInt("axis", 1)
		si, err := quantParam(n, scale, x.Dims(), axis, "y_scale")
		if err != nil {
			return nil, err
		}
		zi, err := quantParam(n, zp, x.Dims(), axis, "y_zero_point")
		if err != nil {
			return nil, err
		}
		prec := x.DType() // float32 division but for double
		if prec != graph.Double {
			prec = graph.Float
		}
		if p := n.AttrInt("precision", 0); p != 0 {
			prec = tensor.DType(p)
		}
		v, s, z := tensor.Float64s(x), tensor.Float64s(scale), zeroPoints(zp)
		if dt.IsFloat() {
			// float8 and float4e2m1: y = x / scale + zero point, rounded to the type (ties to
			// even) and saturated unless saturate = 0 (float8 only).
			for i := range v {
				v[i] = divIn(prec, v[i], s[si(i)]) + at(z, zi(i))
			}
			if !tensor.IsNarrow(dt) {
				return nil, fmt.Errorf("quantized type %s is not supported", dt)
			}
			out, err := tensor.FromFloat64sNarrow(dt, x.Dims(), v, tensor.NarrowCast{Saturate: n.AttrInt("saturate", 1) != 0})
			return []tensor.Tensor{out}, err
		}
		for i := range v {
			v[i] = math.RoundToEven(divIn(prec, v[i], s[si(i)])) + at(z, zi(i))
		}
		out, err := quantizeTo(dt, x.Dims(), v)
		return []tensor.Tensor{out}, err
	}
	ops.HostOps["DequantizeLinear"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x, scale, zp := in[0], in[1], ops.Optional(in, 2)
		axis := n.AttrInt("axis", 1)
		si, err := quantParam(n, scale, x.Dims(), axis, "x_scale")
		if err != nil {
			return nil, err
		}
		zi, err := quantParam(n, zp, x.Dims(), axis, "x_zero_point")
		if err != nil {
			return nil, err
		}
		v, s, z := tensor.Float64s(x), tensor.Float64s(scale), zeroPoints(zp)
		for i := range v {
			v[i] = (v[i] - at(z, zi(i))) * s[si(i)]
		}
		// The output type: output_dtype (opset 25), else the scale's; a float8e8m0 (MX) scale
		// gives float.
		out := scale.DType()
		if o := n.AttrInt("output_dtype", 0); o != 0 {
			out = tensor.DType(o)
		} else if out == graph.Float8E8M0 {
			out = graph.Float
		}
		switch out {
		case graph.Float, graph.Float16, graph.BFloat16, graph.Double:
		default:
			return nil, fmt.Errorf("output element type %s is not float, float16 or bfloat16", out)
		}
		return ops.FloatResult(out, x.Dims(), v)
	}
	ops.HostOps["DynamicQuantizeLinear"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		v := tensor.Float64s(x)
		lo, hi := 0.0, 0.0
		for _, e := range v {
			lo, hi = math.Min(lo, e), math.Max(hi, e)
		}
		// The scale is computed in float32 as the spec's reference does.
		scale := float64(float32(hi-lo) / 255)
		zp := 0.0
		if scale != 0 {
			zp = math.Max(0, math.Min(255, math.RoundToEven(-lo/scale)))
		}
		for i := range v {
			if scale != 0 {
				v[i] = math.RoundToEven(divIn(x.DType(), v[i], scale)) + zp
			} else {
				v[i] = zp
			}
		}
		y, err := quantizeTo(graph.Uint8, x.Dims(), v)
		if err != nil {
			return nil, err
		}
		st, _ := tensor.FromFloat64s(graph.Float, nil, []float64{scale})
		zt, _ := tensor.FromFloat64s(graph.Uint8, nil, []float64{zp})
		return []tensor.Tensor{y, st, zt}, nil
	}
	ops.HostOps["MatMulInteger"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		a, b := in[0], in[1]
		av, err := integerOperand(a, ops.Optional(in, 2), rowAxis(a), "a_zero_point")
		if err != nil {
			return nil, err
		}
		bv, err := integerOperand(b, ops.Optional(in, 3), colAxis(b), "b_zero_point")
		if err != nil {
			return nil, err
		}
		y, err := shiftedMatMul(a, b, av, bv)
		if err != nil {
			return nil, err
		}
		return ops.FloatResult(graph.Int32, y.Dims(), tensor.Float64s(y))
	}
	ops.HostOps["QLinearMatMul"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		if len(in) < 8 {
			return nil, fmt.Errorf("QLinearMatMul needs 8 inputs, got %d", len(in))
		}
		a, as, azp, b, bs, bzp, ys, yzp := in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7]
		av, err := integerOperand(a, azp, rowAxis(a), "a_zero_point")
		if err != nil {
			return nil, err
		}
		bv, err := integerOperand(b, bzp, colAxis(b), "b_zero_point")
		if err != nil {
			return nil, err
		}
		// Scale the operands by their (per-row / per-column) scales before multiplying.
		ai, err := perAxis(as, a.Dims(), rowAxis(a), "a_scale")
		if err != nil {
			return nil, err
		}
		bi, err := perAxis(bs, b.Dims(), colAxis(b), "b_scale")
		if err != nil {
			return nil, err
		}
		asv, bsv := tensor.Float64s(as), tensor.Float64s(bs)
		for i := range av {
			av[i] *= asv[ai(i)]
		}
		for i := range bv {
			bv[i] *= bsv[bi(i)]
		}
		y, err := shiftedMatMul(a, b, av, bv)
		if err != nil {
			return nil, err
		}
		yi, err := perAxis(ys, y.Dims(), colAxis(y), "y_scale")
		if err != nil {
			return nil, err
		}
		zi, err := perAxis(yzp, y.Dims(), colAxis(y), "y_zero_point")
		if err != nil {
			return nil, err
		}
		v, ysv, z := tensor.Float64s(y), tensor.Float64s(ys), zeroPoints(yzp)
		for i := range v {
			v[i] = math.RoundToEven(v[i]/ysv[yi(i)]) + at(z, zi(i))
		}
		out, err := quantizeTo(yzp.DType(), y.Dims(), v)
		return []tensor.Tensor{out}, err
	}
	ops.HostOps["ConvInteger"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		y, err := integerConv(rc, n, in[0], ops.Optional(in, 2), in[1], ops.Optional(in, 3), tensor.Tensor{})
		if err != nil {
			return nil, err
		}
		return ops.FloatResult(graph.Int32, y.Dims(), tensor.Float64s(y))
	}
	ops.HostOps["QLinearConv"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		if len(in) < 8 {
			return nil, fmt.Errorf("QLinearConv needs at least 8 inputs, got %d", len(in))
		}
		x, xs, xzp, w, ws, wzp, ys, yzp := in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7]
		y, err := integerConv(rc, n, x, xzp, w, wzp, ops.Optional(in, 8))
		if err != nil {
			return nil, err
		}
		// y holds the int32 accumulator (bias included); the real value is acc * xs * ws[m].
		wi, err := perAxis(ws, y.Dims(), 1, "w_scale")
		if err != nil {
			return nil, err
		}
		if !ys.IsValid() || ys.Len() != 1 || !xs.IsValid() || xs.Len() != 1 {
			return nil, fmt.Errorf("x_scale and y_scale must be scalars")
		}
		v, xsv, wsv, ysv, z := tensor.Float64s(y), tensor.Float64s(xs)[0], tensor.Float64s(ws), tensor.Float64s(ys)[0], zeroPoints(yzp)
		for i := range v {
			v[i] = math.RoundToEven(v[i]*xsv*wsv[wi(i)]/ysv) + at(z, 0)
		}
		out, err := quantizeTo(yzp.DType(), y.Dims(), v)
		return []tensor.Tensor{out}, err
	}
}

// integerConv convolves (x - xzp) with (w - wzp) exactly (integers in float64), adding the
// int32 bias when given; wzp may be per output channel.
func integerConv(rc ops.OpRun, n *graph.Node, x, xzp, w, wzp, bias tensor.Tensor) (tensor.Tensor, error) {
	if len(x.Dims()) < 3 {
		return tensor.Tensor{}, fmt.Errorf("input of rank %d, want (N, C, spatial...)", len(x.Dims()))
	}
	if xzp.IsValid() && xzp.Len() != 1 {
		return tensor.Tensor{}, fmt.Errorf("x_zero_point must be a scalar, got shape %v", xzp.Dims())
	}
	xv, err := integerOperand(x, xzp, 0, "x_zero_point")
	if err != nil {
		return tensor.Tensor{}, err
	}
	wv, err := integerOperand(w, wzp, 0, "w_zero_point")
	if err != nil {
		return tensor.Tensor{}, err
	}
	p, err := ops.ConvParamsOf(n, x.Dims(), w.Dims())
	if err != nil {
		return tensor.Tensor{}, err
	}
	xt, _ := tensor.FromFloat64s(graph.Double, x.Dims(), xv)
	wt, _ := tensor.FromFloat64s(graph.Double, w.Dims(), wv)
	var bt tensor.Tensor
	if bias.IsValid() {
		bt, _ = tensor.FromFloat64s(graph.Double, bias.Dims(), tensor.Float64s(bias))
	}
	return ops.ConvHost(rc, xt, wt, bt, p)
}
