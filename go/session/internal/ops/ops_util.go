package ops

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// broadcastShapes is numpy's multidirectional broadcast of two shapes.
func BroadcastShapes(a, b []int64) ([]int64, error) {
	r := max(len(a), len(b))
	out := make([]int64, r)
	for i := range r {
		da, db := int64(1), int64(1)
		if j := i - (r - len(a)); j >= 0 {
			da = a[j]
		}
		if j := i - (r - len(b)); j >= 0 {
			db = b[j]
		}
		switch {
		case da == db:
			out[i] = da
		case da == 1:
			out[i] = db
		case db == 1:
			out[i] = da
		default:
			return nil, fmt.Errorf("shapes %v and %v do not broadcast", a, b)
		}
	}
	return out, nil
}

// broadcastStrides gives, for each axis of out, the element stride of in (0 where in is
// broadcast along it).
func BroadcastStrides(in, out []int64) ([]int, error) {
	if len(in) > len(out) {
		return nil, fmt.Errorf("shape %v does not broadcast to %v", in, out)
	}
	st := make([]int, len(out))
	s := 1
	for i := len(in) - 1; i >= 0; i-- {
		j := i + len(out) - len(in)
		switch in[i] {
		case out[j]:
			if in[i] != 1 {
				st[j] = s
			}
		case 1:
		default:
			return nil, fmt.Errorf("shape %v does not broadcast to %v", in, out)
		}
		s *= int(in[i])
	}
	return st, nil
}

// broadcastIndex maps every element of out to the element of in it reads.
func BroadcastIndex(in, out []int64) ([]int, error) {
	st, err := BroadcastStrides(in, out)
	if err != nil {
		return nil, err
	}
	n := 1
	for _, d := range out {
		n *= int(d)
	}
	idx := make([]int, n)
	ForEachIndex(out, func(i int, pos []int) {
		o := 0
		for k, p := range pos {
			o += p * st[k]
		}
		idx[i] = o
	})
	return idx, nil
}

// forEachIndex calls fn with every multi-index of shape in row-major order.
func ForEachIndex(shape []int64, fn func(flat int, pos []int)) {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	pos := make([]int, len(shape))
	for i := 0; i < n; i++ {
		fn(i, pos)
		for k := len(shape) - 1; k >= 0; k-- {
			pos[k]++
			if pos[k] < int(shape[k]) {
				break
			}
			pos[k] = 0
		}
	}
}

func StridesOf(shape []int64) []int {
	st := make([]int, len(shape))
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = s
		s *= int(shape[i])
	}
	return st
}

// NormAxis is axis a of a tensor of rank r, in [-r, r): a negative one counts from the end.
// A scalar has no axis: any a is an error for rank 0 (ops that index an axis would panic).
func NormAxis(a int64, r int) (int, error) {
	if r == 0 {
		return 0, fmt.Errorf("axis %d out of range for rank 0 (a scalar has no axes)", a)
	}
	if a < -int64(r) || a >= int64(r) {
		return 0, fmt.Errorf("axis %d out of range for rank %d", a, r)
	}
	if a < 0 {
		a += int64(r)
	}
	return int(a), nil
}

func Numel(shape []int64) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}

// convParams are the geometry of a convolution or pooling over the spatial axes.
type ConvParams struct {
	Kernel, Strides, Dilations, PadBegin, PadEnd, Out []int
	Group                                             int
}

// OutShape is the shape of the output of a convolution or pooling with these parameters of a
// batch of n and c channels: [n, c, Out...].
func (p ConvParams) OutShape(n, c int64) []int64 {
	out := []int64{n, c}
	for _, o := range p.Out {
		out = append(out, int64(o))
	}
	return out
}

func IntsOr(n *graph.Node, name string, k int, def int) []int {
	v := n.AttrInts(name)
	out := make([]int, k)
	for i := range out {
		if i < len(v) {
			out[i] = int(v[i])
		} else {
			out[i] = def
		}
	}
	return out
}

// spatialParams works out padding and output sizes from the attributes for input spatial
// sizes in and kernel sizes kernel.
func spatialParams(n *graph.Node, in []int64, kernel []int, ceil bool) (ConvParams, error) {
	k := len(in)
	p := ConvParams{Kernel: kernel, Strides: IntsOr(n, "strides", k, 1), Dilations: IntsOr(n, "dilations", k, 1),
		PadBegin: make([]int, k), PadEnd: make([]int, k), Out: make([]int, k), Group: int(n.AttrInt("group", 1))}
	pads := n.AttrInts("pads")
	for _, v := range pads {
		if v < 0 || v > math.MaxInt32 {
			return p, fmt.Errorf("pads %v: each must be in [0, 2^31)", pads)
		}
	}
	autoPad := n.AttrString("auto_pad", "NOTSET")
	for i := range k {
		if p.Strides[i] <= 0 || p.Dilations[i] <= 0 || p.Strides[i] > math.MaxInt32 || p.Dilations[i] > math.MaxInt32 {
			return p, fmt.Errorf("strides %v and dilations %v must be positive (and below 2^31)", p.Strides, p.Dilations)
		}
		if kernel[i] < 1 || kernel[i] > math.MaxInt32 {
			return p, fmt.Errorf("the kernel %v must be positive (and below 2^31) on every spatial axis", kernel)
		}
		ek := (kernel[i]-1)*p.Dilations[i] + 1
		size := int(in[i])
		switch autoPad {
		case "SAME_UPPER", "SAME_LOWER":
			o := (size + p.Strides[i] - 1) / p.Strides[i]
			total := max(0, (o-1)*p.Strides[i]+ek-size)
			if autoPad == "SAME_UPPER" {
				p.PadBegin[i], p.PadEnd[i] = total/2, total-total/2
			} else {
				p.PadBegin[i], p.PadEnd[i] = total-total/2, total/2
			}
			p.Out[i] = o
			continue
		case "VALID":
		default:
			if len(pads) == 2*k {
				p.PadBegin[i], p.PadEnd[i] = int(pads[i]), int(pads[i+k])
			}
		}
		span := size + p.PadBegin[i] + p.PadEnd[i] - ek
		if span < 0 {
			return p, fmt.Errorf("kernel larger than padded input on spatial axis %d", i)
		}
		if ceil {
			p.Out[i] = (span+p.Strides[i]-1)/p.Strides[i] + 1
			// The last window must start inside the input or its left padding.
			if (p.Out[i]-1)*p.Strides[i] >= size+p.PadBegin[i] {
				p.Out[i]--
			}
		} else {
			p.Out[i] = span/p.Strides[i] + 1
		}
	}
	return p, nil
}

func ConvParamsOf(n *graph.Node, x, w []int64) (ConvParams, error) {
	if len(w) != len(x) {
		return ConvParams{}, fmt.Errorf("weight rank %d differs from input rank %d", len(w), len(x))
	}
	kernel := make([]int, len(x)-2)
	for i := range kernel {
		kernel[i] = int(w[i+2])
	}
	if ks := n.AttrInts("kernel_shape"); ks != nil && !SameShape(ks, w[2:]) {
		return ConvParams{}, fmt.Errorf("kernel_shape %v differs from the weight's spatial shape %v (weight %v)", ks, w[2:], w)
	}
	p, err := spatialParams(n, x[2:], kernel, false)
	if err != nil {
		return p, err
	}
	if p.Group <= 0 || x[1]%int64(p.Group) != 0 || w[0]%int64(p.Group) != 0 || w[1]*int64(p.Group) != x[1] {
		return p, fmt.Errorf("input channels %d, weight %v and group %d disagree", x[1], w, p.Group)
	}
	return p, nil
}

func PoolParamsOf(n *graph.Node, x []int64) (ConvParams, error) {
	ks := n.AttrInts("kernel_shape")
	if len(ks) != len(x)-2 {
		return ConvParams{}, fmt.Errorf("kernel_shape %v does not fit input rank %d", ks, len(x))
	}
	kernel := make([]int, len(ks))
	for i, v := range ks {
		kernel[i] = int(v)
	}
	return spatialParams(n, x[2:], kernel, n.AttrInt("ceil_mode", 0) != 0)
}

// OneInt is the one value of input i (what names it: "the axis (input 1)"), an integer
// scalar or a tensor of one element: an error naming it when it holds none or more.
func OneInt(in []tensor.Tensor, i int, what string) (int64, error) {
	if i >= len(in) || in[i].Len() != 1 {
		return 0, oneValueError(in, i, what)
	}
	return tensor.Int64s(in[i])[0], nil
}

// OneFloat is OneInt for a value of any numeric type, as a float64.
func OneFloat(in []tensor.Tensor, i int, what string) (float64, error) {
	if i >= len(in) || in[i].Len() != 1 {
		return 0, oneValueError(in, i, what)
	}
	return tensor.Float64s(in[i])[0], nil
}

func oneValueError(in []tensor.Tensor, i int, what string) error {
	if i >= len(in) || !in[i].IsValid() {
		return fmt.Errorf("%s is missing", what)
	}
	return fmt.Errorf("%s must hold one value, got the shape %v", what, in[i].Dims())
}

// optional returns input i, or the zero Tensor when the node has fewer inputs.
func Optional(in []tensor.Tensor, i int) tensor.Tensor {
	if i < len(in) {
		return in[i]
	}
	return tensor.Tensor{}
}

func Sqrt(x float64) float64 { return math.Sqrt(x) }

func SoftmaxDefaultAxis(opset int64) int64 {
	if opset < 13 {
		return 1
	}
	return -1
}
