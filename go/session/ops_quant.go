package session

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
)

// Host functions for the linear quantization operators: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv. Values are
// rounded half to even and saturated to the quantized type, as the ONNX spec asks.

// quantRange is the representable range of an integer quantized type.
func quantRange(dt DType) (lo, hi float64, err error) {
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
	}
	return 0, 0, fmt.Errorf("quantized type %s is not supported (want uint8, int8, uint16, int16 or int32)", dt)
}

// saturateRound rounds v half to even and clamps it into dt's range, in place.
func saturateRound(v []float64, dt DType) error {
	lo, hi, err := quantRange(dt)
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
func perAxis(p Tensor, shape []int64, axis int64, what string) (func(i int) int, error) {
	if !p.IsValid() || p.Len() == 1 {
		return func(int) int { return 0 }, nil
	}
	ax, err := normAxis(axis, len(shape))
	if err != nil {
		return nil, err
	}
	if len(p.shape) != 1 || p.shape[0] != shape[ax] {
		return nil, fmt.Errorf("%s of shape %v does not fit axis %d of shape %v", what, p.shape, ax, shape)
	}
	inner, dim := numel(shape[ax+1:]), int(shape[ax])
	return func(i int) int { return (i / inner) % dim }, nil
}

func checkNoBlocks(n *graph.Node) error {
	if n.AttrInt("block_size", 0) != 0 {
		return fmt.Errorf("blocked quantization (block_size %d) is not supported", n.AttrInt("block_size", 0))
	}
	return nil
}

// divIn divides in the precision of dt (float32 for float types narrower than double), so
// that values on a rounding tie quantize as the spec's float32 reference does.
func divIn(dt DType, a, b float64) float64 {
	if dt == graph.Double {
		return a / b
	}
	return float64(float32(a) / float32(b))
}

// zeroPoints returns zp's values as float64, or nil (all zero) when zp is absent.
func zeroPoints(zp Tensor) []float64 {
	if !zp.IsValid() {
		return nil
	}
	return zp.float64s()
}

func at(v []float64, i int) float64 {
	if v == nil {
		return 0
	}
	return v[i]
}

// quantizeTo quantizes real values v with scale and zero point (already mapped per element).
func quantizeTo(dt DType, shape []int64, v []float64) (Tensor, error) {
	if err := saturateRound(v, dt); err != nil {
		return Tensor{}, err
	}
	return fromFloat64s(dt, shape, v)
}

// integerOperand returns x - zp as float64, with zp mapped along axis of x (axis -1 means a
// scalar zero point only).
func integerOperand(x, zp Tensor, axis int64, what string) ([]float64, error) {
	v := x.float64s()
	if !zp.IsValid() {
		return v, nil
	}
	idx, err := perAxis(zp, x.shape, axis, what)
	if err != nil {
		return nil, err
	}
	z := zp.float64s()
	for i := range v {
		v[i] -= z[idx(i)]
	}
	return v, nil
}

// matmulRows multiplies a (batch.., M, K) by b (.., K, N) already shifted by their zero
// points, by way of the float64 MatMul host path.
func shiftedMatMul(a, b Tensor, av, bv []float64) (Tensor, error) {
	at, err := fromFloat64s(graph.Double, a.shape, av)
	if err != nil {
		return Tensor{}, err
	}
	bt, err := fromFloat64s(graph.Double, b.shape, bv)
	if err != nil {
		return Tensor{}, err
	}
	return matmulHost(at, bt)
}

// rowZeroPointAxis is the axis a per-row zero point of a matrix operand applies to.
func rowAxis(t Tensor) int64 {
	if len(t.shape) < 2 {
		return 0
	}
	return int64(len(t.shape) - 2)
}

func colAxis(t Tensor) int64 { return int64(len(t.shape) - 1) }

func init() {
	hostOps["QuantizeLinear"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		if err := checkNoBlocks(n); err != nil {
			return nil, err
		}
		x, scale, zp := in[0], in[1], optional(in, 2)
		dt := graph.Uint8
		if zp.IsValid() {
			dt = zp.dtype
		} else if a := n.Attr("output_dtype"); a != nil && a.Int != 0 {
			dt = DType(a.Int)
		}
		axis := n.AttrInt("axis", 1)
		si, err := perAxis(scale, x.shape, axis, "y_scale")
		if err != nil {
			return nil, err
		}
		zi, err := perAxis(zp, x.shape, axis, "y_zero_point")
		if err != nil {
			return nil, err
		}
		v, s, z := x.float64s(), scale.float64s(), zeroPoints(zp)
		for i := range v {
			v[i] = math.RoundToEven(divIn(x.dtype, v[i], s[si(i)])) + at(z, zi(i))
		}
		out, err := quantizeTo(dt, x.shape, v)
		return []Tensor{out}, err
	}
	hostOps["DequantizeLinear"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		if err := checkNoBlocks(n); err != nil {
			return nil, err
		}
		x, scale, zp := in[0], in[1], optional(in, 2)
		axis := n.AttrInt("axis", 1)
		si, err := perAxis(scale, x.shape, axis, "x_scale")
		if err != nil {
			return nil, err
		}
		zi, err := perAxis(zp, x.shape, axis, "x_zero_point")
		if err != nil {
			return nil, err
		}
		v, s, z := x.float64s(), scale.float64s(), zeroPoints(zp)
		for i := range v {
			v[i] = (v[i] - at(z, zi(i))) * s[si(i)]
		}
		return floatResult(scale.dtype, x.shape, v)
	}
	hostOps["DynamicQuantizeLinear"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x := in[0]
		v := x.float64s()
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
				v[i] = math.RoundToEven(divIn(x.dtype, v[i], scale)) + zp
			} else {
				v[i] = zp
			}
		}
		y, err := quantizeTo(graph.Uint8, x.shape, v)
		if err != nil {
			return nil, err
		}
		st, _ := fromFloat64s(graph.Float, nil, []float64{scale})
		zt, _ := fromFloat64s(graph.Uint8, nil, []float64{zp})
		return []Tensor{y, st, zt}, nil
	}
	hostOps["MatMulInteger"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		a, b := in[0], in[1]
		av, err := integerOperand(a, optional(in, 2), rowAxis(a), "a_zero_point")
		if err != nil {
			return nil, err
		}
		bv, err := integerOperand(b, optional(in, 3), colAxis(b), "b_zero_point")
		if err != nil {
			return nil, err
		}
		y, err := shiftedMatMul(a, b, av, bv)
		if err != nil {
			return nil, err
		}
		return floatResult(graph.Int32, y.shape, y.float64s())
	}
	hostOps["QLinearMatMul"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
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
		ai, err := perAxis(as, a.shape, rowAxis(a), "a_scale")
		if err != nil {
			return nil, err
		}
		bi, err := perAxis(bs, b.shape, colAxis(b), "b_scale")
		if err != nil {
			return nil, err
		}
		asv, bsv := as.float64s(), bs.float64s()
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
		yi, err := perAxis(ys, y.shape, colAxis(y), "y_scale")
		if err != nil {
			return nil, err
		}
		zi, err := perAxis(yzp, y.shape, colAxis(y), "y_zero_point")
		if err != nil {
			return nil, err
		}
		v, ysv, z := y.float64s(), ys.float64s(), zeroPoints(yzp)
		for i := range v {
			v[i] = math.RoundToEven(v[i]/ysv[yi(i)]) + at(z, zi(i))
		}
		out, err := quantizeTo(yzp.dtype, y.shape, v)
		return []Tensor{out}, err
	}
	hostOps["ConvInteger"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		y, err := integerConv(n, in[0], optional(in, 2), in[1], optional(in, 3), Tensor{})
		if err != nil {
			return nil, err
		}
		return floatResult(graph.Int32, y.shape, y.float64s())
	}
	hostOps["QLinearConv"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		if len(in) < 8 {
			return nil, fmt.Errorf("QLinearConv needs at least 8 inputs, got %d", len(in))
		}
		x, xs, xzp, w, ws, wzp, ys, yzp := in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7]
		y, err := integerConv(n, x, xzp, w, wzp, optional(in, 8))
		if err != nil {
			return nil, err
		}
		// y holds the int32 accumulator (bias included); the real value is acc * xs * ws[m].
		wi, err := perAxis(ws, y.shape, 1, "w_scale")
		if err != nil {
			return nil, err
		}
		if !ys.IsValid() || ys.Len() != 1 || !xs.IsValid() || xs.Len() != 1 {
			return nil, fmt.Errorf("x_scale and y_scale must be scalars")
		}
		v, xsv, wsv, ysv, z := y.float64s(), xs.float64s()[0], ws.float64s(), ys.float64s()[0], zeroPoints(yzp)
		for i := range v {
			v[i] = math.RoundToEven(v[i]*xsv*wsv[wi(i)]/ysv) + at(z, 0)
		}
		out, err := quantizeTo(yzp.dtype, y.shape, v)
		return []Tensor{out}, err
	}
}

// integerConv convolves (x - xzp) with (w - wzp) exactly (integers in float64), adding the
// int32 bias when given; wzp may be per output channel.
func integerConv(n *graph.Node, x, xzp, w, wzp, bias Tensor) (Tensor, error) {
	if len(x.shape) < 3 {
		return Tensor{}, fmt.Errorf("input of rank %d, want (N, C, spatial...)", len(x.shape))
	}
	if xzp.IsValid() && xzp.Len() != 1 {
		return Tensor{}, fmt.Errorf("x_zero_point must be a scalar, got shape %v", xzp.shape)
	}
	xv, err := integerOperand(x, xzp, 0, "x_zero_point")
	if err != nil {
		return Tensor{}, err
	}
	wv, err := integerOperand(w, wzp, 0, "w_zero_point")
	if err != nil {
		return Tensor{}, err
	}
	p, err := convParamsOf(n, x.shape, w.shape)
	if err != nil {
		return Tensor{}, err
	}
	xt, _ := fromFloat64s(graph.Double, x.shape, xv)
	wt, _ := fromFloat64s(graph.Double, w.shape, wv)
	var bt Tensor
	if bias.IsValid() {
		bt, _ = fromFloat64s(graph.Double, bias.shape, bias.float64s())
	}
	return convHost(xt, wt, bt, p)
}
