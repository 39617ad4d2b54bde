package movement

import (
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"sort"
	"strconv"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for shape arithmetic and data movement: they work on any element type by
// computing an index map and gathering.

// intSize is the bytes of an int: the index an op builds beside its output costs as much an
// element (ReserveShape's perElem).
const intSize = bits.UintSize / 8

func init() {
	ops.HostOps["Identity"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		return []tensor.Tensor{in[0]}, nil
	}
	ops.HostOps["Constant"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		gt, err := graph.ConstantValue(n)
		if err != nil {
			return nil, err
		}
		t, err := tensor.FromGraphTensor(gt)
		return []tensor.Tensor{t}, err
	}
	ops.HostOps["Shape"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		r := int64(len(in[0].Dims()))
		start, end := n.AttrInt("start", 0), n.AttrInt("end", r)
		clamp := func(v int64) int64 {
			if v < 0 {
				v += r
			}
			return min(max(v, 0), r)
		}
		s, e := clamp(start), clamp(end)
		v := []int64{}
		if s < e {
			v = append(v, in[0].Dims()[s:e]...)
		}
		return []tensor.Tensor{ops.I64Tensor([]int64{int64(len(v))}, v)}, nil
	}
	ops.HostOps["Size"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		// From the shape, not the elements: a plan's shape-only trace passes a data-free input.
		return []tensor.Tensor{ops.I64Tensor(nil, []int64{int64(ops.Numel(in[0].Dims()))})}, nil
	}
	ops.HostOps["Reshape"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		var want []int64
		if rc.OpsetVersion() < 5 {
			want = n.AttrInts("shape")
		} else {
			want = tensor.Int64s(in[1])
		}
		x := in[0]
		out := make([]int64, len(want))
		infer, known := -1, int64(1)
		for i, d := range want {
			switch {
			case d == 0 && n.AttrInt("allowzero", 0) == 0:
				if i >= len(x.Dims()) {
					return nil, fmt.Errorf("shape %v copies dimension %d of a rank-%d input", want, i, len(x.Dims()))
				}
				out[i] = x.Dims()[i]
			case d == -1:
				if infer >= 0 {
					return nil, fmt.Errorf("shape %v has two -1 dimensions", want)
				}
				infer = i
				continue
			case d < -1:
				return nil, fmt.Errorf("shape %v has a negative dimension", want)
			default:
				out[i] = d
			}
			known *= out[i]
		}
		if infer >= 0 {
			if known == 0 {
				return nil, fmt.Errorf("cannot infer -1 in %v with a zero dimension", want)
			}
			out[infer] = int64(x.Len()) / known
		}
		if ops.Numel(out) != x.Len() {
			return nil, fmt.Errorf("cannot reshape %v (%d elements) to %v", x.Dims(), x.Len(), want)
		}
		return []tensor.Tensor{tensor.Reshaped(x, out)}, nil
	}
	ops.HostOps["Flatten"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		a := n.AttrInt("axis", 1)
		if a < 0 {
			a += int64(len(x.Dims()))
		}
		if a < 0 || a > int64(len(x.Dims())) {
			return nil, fmt.Errorf("axis %d out of range", a)
		}
		return []tensor.Tensor{tensor.Reshaped(x, []int64{int64(ops.Numel(x.Dims()[:a])), int64(ops.Numel(x.Dims()[a:]))})}, nil
	}
	ops.HostOps["Squeeze"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		axes := ops.AxesOf(rc, n, in, 1, 13)
		drop := map[int]bool{}
		for _, a := range axes {
			ax, err := ops.NormAxis(a, len(x.Dims()))
			if err != nil {
				return nil, err
			}
			if x.Dims()[ax] != 1 {
				return nil, fmt.Errorf("cannot squeeze axis %d of size %d", ax, x.Dims()[ax])
			}
			drop[ax] = true
		}
		out := []int64{}
		for i, d := range x.Dims() {
			if (len(axes) == 0 && d == 1) || drop[i] {
				continue
			}
			out = append(out, d)
		}
		return []tensor.Tensor{tensor.Reshaped(x, out)}, nil
	}
	ops.HostOps["Unsqueeze"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		axes := ops.AxesOf(rc, n, in, 1, 13)
		r := len(x.Dims()) + len(axes)
		ins := map[int]bool{}
		for _, a := range axes {
			ax, err := ops.NormAxis(a, r)
			if err != nil {
				return nil, err
			}
			if ins[ax] {
				return nil, fmt.Errorf("axis %d repeated", ax)
			}
			ins[ax] = true
		}
		out, j := make([]int64, r), 0
		for i := range out {
			if ins[i] {
				out[i] = 1
			} else {
				out[i] = x.Dims()[j]
				j++
			}
		}
		return []tensor.Tensor{tensor.Reshaped(x, out)}, nil
	}
	ops.HostOps["Transpose"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		r := len(x.Dims())
		perm := make([]int, r)
		if p := n.AttrInts("perm"); len(p) > 0 {
			if len(p) != r {
				return nil, fmt.Errorf("perm %v for rank %d", p, r)
			}
			for i, v := range p {
				perm[i] = int(v)
			}
		} else {
			for i := range perm {
				perm[i] = r - 1 - i
			}
		}
		shape, idx := ops.TransposeIndex(x.Dims(), perm)
		return []tensor.Tensor{tensor.Take(x, shape, idx)}, nil
	}
	ops.HostOps["Concat"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		var ts []tensor.Tensor
		for _, t := range in {
			if t.IsValid() {
				ts = append(ts, t)
			}
		}
		r := len(ts[0].Dims())
		ax, err := ops.NormAxis(n.AttrInt("axis", 0), r)
		if err != nil {
			return nil, err
		}
		out := append([]int64{}, ts[0].Dims()...)
		out[ax] = 0
		for _, t := range ts {
			if len(t.Dims()) != r {
				return nil, fmt.Errorf("inputs of ranks %d and %d", r, len(t.Dims()))
			}
			out[ax] += t.Dims()[ax]
		}
		joined, err := ops.ConcatFlat(ts...)
		if err != nil {
			return nil, err
		}
		outer := ops.Numel(out[:ax])
		idx := make([]int, 0, ops.Numel(out))
		for o := 0; o < outer; o++ {
			base := 0
			for _, t := range ts {
				chunk := ops.Numel(t.Dims()[ax:])
				for j := 0; j < chunk; j++ {
					idx = append(idx, base+o*chunk+j)
				}
				base += t.Len()
			}
		}
		return []tensor.Tensor{tensor.Take(joined, out, idx)}, nil
	}
	ops.HostOps["Split"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		var given []int64
		if len(in) > 1 && in[1].IsValid() {
			given = tensor.Int64s(in[1])
		}
		ax, split, err := SplitParts(n, rc.OpsetVersion(), x.Dims(), given)
		if err != nil {
			return nil, err
		}
		outs := make([]tensor.Tensor, len(split))
		start := int64(0)
		for i, s := range split {
			outs[i] = SliceAxis(x, ax, start, s)
			start += s
		}
		return outs, nil
	}
	ops.HostOps["Slice"] = opSlice
	ops.HostOps["Gather"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x, ind := in[0], in[1]
		ax, err := ops.NormAxis(n.AttrInt("axis", 0), len(x.Dims()))
		if err != nil {
			return nil, err
		}
		iv := tensor.Int64s(ind)
		out := append(append(append([]int64{}, x.Dims()[:ax]...), ind.Dims()...), x.Dims()[ax+1:]...)
		if err := ops.ReserveShape(rc, "the output", x.DType(), out, intSize); err != nil {
			return nil, err
		}
		outer, inner, dim := ops.Numel(x.Dims()[:ax]), ops.Numel(x.Dims()[ax+1:]), int(x.Dims()[ax])
		idx := make([]int, 0, ops.Numel(out))
		for o := 0; o < outer; o++ {
			for _, g := range iv {
				if g < 0 {
					g += int64(dim)
				}
				if g < 0 || g >= int64(dim) {
					return nil, fmt.Errorf("index %d out of range [0, %d)", g, dim)
				}
				for j := 0; j < inner; j++ {
					idx = append(idx, (o*dim+int(g))*inner+j)
				}
			}
		}
		return []tensor.Tensor{tensor.Take(x, out, idx)}, nil
	}
	ops.HostOps["GatherElements"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x, ind := in[0], in[1]
		ax, err := ops.NormAxis(n.AttrInt("axis", 0), len(x.Dims()))
		if err != nil {
			return nil, err
		}
		if len(ind.Dims()) != len(x.Dims()) {
			return nil, fmt.Errorf("the indices (input 1, shape %v) must have the rank of the data (input 0, shape %v)", ind.Dims(), x.Dims())
		}
		for k, d := range ind.Dims() {
			if k != ax && d > x.Dims()[k] {
				return nil, fmt.Errorf("the indices (input 1, shape %v) exceed the data (input 0, shape %v) along axis %d", ind.Dims(), x.Dims(), k)
			}
		}
		iv, st := tensor.Int64s(ind), ops.StridesOf(x.Dims())
		idx := make([]int, ind.Len())
		var bad error
		ops.ForEachIndex(ind.Dims(), func(f int, pos []int) {
			o := 0
			for k, p := range pos {
				if k == ax {
					g := iv[f]
					if g < 0 {
						g += x.Dims()[ax]
					}
					if g < 0 || g >= x.Dims()[ax] {
						bad = fmt.Errorf("index %d out of range", iv[f])
						g = 0
					}
					p = int(g)
				}
				o += p * st[k]
			}
			idx[f] = o
		})
		if bad != nil {
			return nil, bad
		}
		return []tensor.Tensor{tensor.Take(x, ind.Dims(), idx)}, nil
	}
	ops.HostOps["Expand"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		shape, err := ops.BroadcastShapes(x.Dims(), tensor.Int64s(in[1]))
		if err != nil {
			return nil, err
		}
		if err := ops.ReserveShape(rc, "the output", x.DType(), shape, intSize); err != nil {
			return nil, err
		}
		idx, err := ops.BroadcastIndex(x.Dims(), shape)
		if err != nil {
			return nil, err
		}
		return []tensor.Tensor{tensor.Take(x, shape, idx)}, nil
	}
	ops.HostOps["Tile"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x, reps := in[0], tensor.Int64s(in[1])
		if len(reps) != len(x.Dims()) {
			return nil, fmt.Errorf("repeats %v for rank %d", reps, len(x.Dims()))
		}
		// The output's size is checked in floating point first, axis by axis and in all: the
		// product of a dimension and a huge repeat must not wrap.
		count := 1.0
		for i, r := range reps {
			if r < 0 {
				return nil, fmt.Errorf("repeat %d for axis %d is negative (repeats %v)", r, i, reps)
			}
			axis := float64(x.Dims()[i]) * float64(r)
			if err := ops.CheckCount(rc, fmt.Sprintf("axis %d of the output", i), axis); err != nil {
				return nil, err
			}
			count *= axis
		}
		if err := ops.CheckCount(rc, "the output", count); err != nil {
			return nil, err
		}
		out := make([]int64, len(reps))
		for i := range out {
			out[i] = x.Dims()[i] * reps[i]
		}
		if err := ops.ReserveShape(rc, "the output", x.DType(), out, intSize); err != nil {
			return nil, err
		}
		st := ops.StridesOf(x.Dims())
		idx := make([]int, ops.Numel(out))
		ops.ForEachIndex(out, func(f int, pos []int) {
			o := 0
			for k, p := range pos {
				o += (p % int(x.Dims()[k])) * st[k]
			}
			idx[f] = o
		})
		return []tensor.Tensor{tensor.Take(x, out, idx)}, nil
	}
	ops.HostOps["ConstantOfShape"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		shape := tensor.Int64s(in[0])
		if err := ops.CheckShape(rc, "the output", shape); err != nil {
			return nil, err
		}
		val := tensor.Raw(graph.Float, []int64{1}, []float32{0})
		if a := n.Attr("value"); a != nil && a.Tensor != nil {
			t, err := tensor.FromGraphTensor(a.Tensor)
			if err != nil {
				return nil, err
			}
			if t.Len() != 1 {
				return nil, fmt.Errorf("the value attribute holds %d elements, want 1", t.Len())
			}
			val = t
		}
		if err := ops.ReserveShape(rc, "the output", val.DType(), shape, 0); err != nil {
			return nil, err
		}
		out, err := tensor.Zeros(val.DType(), shape)
		if err != nil {
			return nil, err
		}
		fillWithFirst(out.Data(), val.Data())
		return []tensor.Tensor{out}, nil
	}
	ops.HostOps["Range"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		var sld [3]float64
		for i, what := range []string{"start", "limit", "delta"} {
			v := tensor.Float64s(in[i])
			if len(v) != 1 {
				return nil, fmt.Errorf("the %s (input %d) has %d elements, want 1", what, i, len(v))
			}
			if math.IsNaN(v[0]) || math.IsInf(v[0], 0) {
				return nil, fmt.Errorf("the %s (input %d) is %v; Range needs a finite start, limit and delta", what, i, v[0])
			}
			sld[i] = v[0]
		}
		s, l, d := sld[0], sld[1], sld[2]
		if d == 0 {
			return nil, fmt.Errorf("delta is 0")
		}
		count := max(math.Ceil((l-s)/d), 0)
		// The output, and the float64 values it is converted from.
		if err := ops.ReserveCount(rc, "the output", in[0].DType(), count, 8); err != nil {
			return nil, err
		}
		cnt := int(count)
		v := make([]float64, cnt)
		for i := range v {
			v[i] = s + float64(i)*d
		}
		out, err := tensor.FromFloat64s(in[0].DType(), []int64{int64(cnt)}, v)
		return []tensor.Tensor{out}, err
	}
	ops.HostOps["Cast"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		c, err := narrowCastOf(n)
		if err != nil {
			return nil, err
		}
		out, err := castTo(in[0], tensor.DType(n.AttrInt("to", 0)), c)
		return []tensor.Tensor{out}, err
	}
	ops.HostOps["CastLike"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		c, err := narrowCastOf(n)
		if err != nil {
			return nil, err
		}
		out, err := castTo(in[0], in[1].DType(), c)
		return []tensor.Tensor{out}, err
	}
	ops.HostOps["NonZero"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		v := tensor.Float64s(x)
		var hits [][]int
		ops.ForEachIndex(x.Dims(), func(f int, pos []int) {
			if v[f] != 0 {
				hits = append(hits, append([]int{}, pos...))
			}
		})
		r := len(x.Dims())
		out := make([]int64, r*len(hits))
		for j, h := range hits {
			for k := range r {
				out[k*len(hits)+j] = int64(h[k])
			}
		}
		return []tensor.Tensor{ops.I64Tensor([]int64{int64(r), int64(len(hits))}, out)}, nil
	}
	ops.HostOps["Pad"] = opPad
}

// fillWithFirst sets every element of dst to the first of src, slices of one element type.
func fillWithFirst(dst, src any) {
	d, s := reflect.ValueOf(dst), reflect.ValueOf(src)
	if d.Len() == 0 {
		return
	}
	d.Index(0).Set(s.Index(0))
	for k := 1; k < d.Len(); k *= 2 {
		reflect.Copy(d.Slice(k, d.Len()), d.Slice(0, k))
	}
}

// narrowCastOf reads Cast's (and CastLike's) saturate and round_mode attributes, which
// apply to the float8 types.
func narrowCastOf(n *graph.Node) (tensor.NarrowCast, error) {
	c := tensor.NarrowCast{Saturate: n.AttrInt("saturate", 1) != 0, RoundMode: n.AttrString("round_mode", "up")}
	return c, tensor.CheckRoundMode(c.RoundMode)
}

// castTo converts elements, including to and from strings; c says how values out of a
// float8 type's range convert.
func castTo(x tensor.Tensor, to tensor.DType, c tensor.NarrowCast) (tensor.Tensor, error) {
	if x.DType() == to {
		return x, nil
	}
	if tensor.IsNarrow(to) && x.DType() != graph.String {
		v := tensor.Float64s(x)
		if to.IsInteger() && x.DType().IsInteger() {
			// Exactly, from the integers' low bits (float64 holds 53 of them).
			for i, e := range tensor.Int64s(x) {
				v[i] = float64(e & 0xF)
			}
		}
		return tensor.FromFloat64sNarrow(to, x.Dims(), v, c)
	}
	if to == graph.String {
		out := make([]string, x.Len())
		v := tensor.Float64s(x)
		for i := range out {
			switch {
			case x.DType() == graph.Bool:
				out[i] = strconv.FormatBool(v[i] != 0)
			case x.DType().IsFloat():
				out[i] = strconv.FormatFloat(v[i], 'g', -1, 32)
			default:
				out[i] = strconv.FormatInt(int64(v[i]), 10)
			}
		}
		return tensor.Raw(graph.String, x.Shape(), out), nil
	}
	if x.DType() == graph.String {
		s := x.Data().([]string)
		v := make([]float64, len(s))
		for i, e := range s {
			f, err := strconv.ParseFloat(e, 64)
			if err != nil {
				return tensor.Tensor{}, fmt.Errorf("cannot cast %q to %s", e, to)
			}
			v[i] = f
		}
		if tensor.IsNarrow(to) {
			return tensor.FromFloat64sNarrow(to, x.Dims(), v, c)
		}
		return tensor.FromFloat64s(to, x.Dims(), v)
	}
	if x.DType() == graph.Int64 && to != graph.Double && to != graph.Float {
		iv := x.Data().([]int64)
		v := make([]float64, len(iv))
		for i, e := range iv {
			v[i] = float64(e)
		}
		return tensor.FromFloat64s(to, x.Dims(), v)
	}
	return tensor.FromFloat64s(to, x.Dims(), tensor.Float64s(x))
}

// SliceAxis returns elements [start, start+n) along axis ax.
func SliceAxis(x tensor.Tensor, ax int, start, n int64) tensor.Tensor {
	out := append([]int64{}, x.Dims()...)
	out[ax] = n
	st := ops.StridesOf(x.Dims())
	idx := make([]int, ops.Numel(out))
	ops.ForEachIndex(out, func(f int, pos []int) {
		o := 0
		for k, p := range pos {
			if k == ax {
				p += int(start)
			}
			o += p * st[k]
		}
		idx[f] = o
	})
	return tensor.Take(x, out, idx)
}

// SliceBounds applies Slice's rules to one axis of length d: negative start and end count from
// the end, both are clamped to the axis (to [-1, d-1] for a negative step), and the result is
// the first index and the number of elements taken with step k (k != 0).
func SliceBounds(s, e, k, d int64) (first, count int64) {
	if s < 0 {
		s += d
	}
	if e < 0 {
		e += d
	}
	if k > 0 {
		s, e = min(max(s, 0), d), min(max(e, 0), d)
		return s, max(0, (e-s+k-1)/k)
	}
	s, e = min(max(s, -1), d-1), min(max(e, -1), d-1)
	return s, max(0, (s-e+(-k)-1)/(-k))
}

func opSlice(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	var starts, ends, axes, steps []int64
	if rc.OpsetVersion() < 10 {
		starts, ends, axes = n.AttrInts("starts"), n.AttrInts("ends"), n.AttrInts("axes")
	} else {
		starts, ends = tensor.Int64s(in[1]), tensor.Int64s(in[2])
		if len(in) > 3 && in[3].IsValid() {
			axes = tensor.Int64s(in[3])
		}
		if len(in) > 4 && in[4].IsValid() {
			steps = tensor.Int64s(in[4])
		}
	}
	if rc.OpsetVersion() >= 10 {
		for i, name := range []string{"starts", "ends", "axes", "steps"} {
			if k := i + 1; len(in) > k && in[k].IsValid() && !in[k].DType().IsInteger() {
				return nil, fmt.Errorf("the %s (input %d) are %s: want int32 or int64", name, k, in[k].DType())
			}
		}
	}
	r := len(x.Dims())
	if len(axes) == 0 {
		for i := range starts {
			axes = append(axes, int64(i))
		}
	}
	if len(starts) != len(axes) || len(ends) != len(axes) || (steps != nil && len(steps) != len(axes)) {
		return nil, fmt.Errorf("starts %v, ends %v, axes %v and steps %v must have one length", starts, ends, axes, steps)
	}
	begin, step := make([]int64, r), make([]int64, r)
	out := append([]int64{}, x.Dims()...)
	for i := range step {
		step[i] = 1
	}
	for i, a := range axes {
		ax, err := ops.NormAxis(a, r)
		if err != nil {
			return nil, err
		}
		d := x.Dims()[ax]
		k := int64(1)
		if len(steps) > i {
			k = steps[i]
		}
		if k == 0 {
			return nil, fmt.Errorf("slice step 0 on axis %d", ax)
		}
		begin[ax], out[ax] = SliceBounds(starts[i], ends[i], k, d)
		step[ax] = k
	}
	st := ops.StridesOf(x.Dims())
	idx := make([]int, ops.Numel(out))
	ops.ForEachIndex(out, func(f int, pos []int) {
		o := 0
		for k, p := range pos {
			o += int(begin[k]+int64(p)*step[k]) * st[k]
		}
		idx[f] = o
	})
	return []tensor.Tensor{tensor.Take(x, out, idx)}, nil
}

func opPad(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	r := len(x.Dims())
	var pads []int64
	var cval tensor.Tensor
	if rc.OpsetVersion() < 11 {
		pads = n.AttrInts("pads")
		v, _ := tensor.FromFloat64s(x.DType(), nil, []float64{float64(n.AttrFloat("value", 0))})
		cval = v
	} else {
		pads = tensor.Int64s(in[1])
		if len(in) > 2 && in[2].IsValid() {
			cval = tensor.Reshaped(in[2], nil)
		} else {
			cval, _ = tensor.Zeros(x.DType(), nil)
		}
	}
	for _, p := range pads {
		if p < -1<<40 || p > 1<<40 {
			return nil, fmt.Errorf("pads %v: each must be within ±2^40", pads)
		}
	}
	if cval.Len() != 1 {
		return nil, fmt.Errorf("the constant_value (input 2, shape %v) must hold one value", cval.Dims())
	}
	full := make([]int64, 2*r)
	if len(in) > 3 && in[3].IsValid() {
		axes := tensor.Int64s(in[3])
		if len(pads) != 2*len(axes) {
			return nil, fmt.Errorf("the pads (input 1) %v hold %d values for the %d axes (input 3) %v: want %d", pads, len(pads), len(axes), axes, 2*len(axes))
		}
		for i, a := range axes {
			ax, err := ops.NormAxis(a, r)
			if err != nil {
				return nil, err
			}
			full[ax], full[ax+r] = pads[i], pads[i+len(axes)]
		}
	} else if len(pads) == 2*r {
		copy(full, pads)
	} else {
		return nil, fmt.Errorf("pads %v for rank %d", pads, r)
	}
	mode := n.AttrString("mode", "constant")
	switch mode {
	case "constant", "reflect", "edge", "wrap":
	default:
		return nil, fmt.Errorf("mode %q: want constant, reflect, edge or wrap", mode)
	}
	out := make([]int64, r)
	for i := range out {
		out[i] = x.Dims()[i] + full[i] + full[i+r]
		if mode != "constant" && x.Dims()[i] == 0 && out[i] > 0 {
			return nil, fmt.Errorf("mode %q cannot pad axis %d of size 0 (the data, input 0, has the shape %v)", mode, i, x.Dims())
		}
	}
	if err := ops.ReserveShape(rc, "the output", x.DType(), out, intSize); err != nil {
		return nil, err
	}
	joined, err := ops.ConcatFlat(x, cval)
	if err != nil {
		return nil, err
	}
	st := ops.StridesOf(x.Dims())
	idx := make([]int, ops.Numel(out))
	ops.ForEachIndex(out, func(f int, pos []int) {
		o := 0
		for k, p := range pos {
			q, d := int64(p)-full[k], x.Dims()[k]
			if q < 0 || q >= d {
				switch mode {
				case "edge":
					q = min(max(q, 0), d-1)
				case "wrap":
					q = (q%d + d) % d
				case "reflect":
					if d == 1 {
						q = 0
					}
					for q < 0 || q >= d {
						if q < 0 {
							q = -q
						}
						if q >= d {
							q = 2*(d-1) - q
						}
					}
				default:
					o = -1
				}
			}
			if o >= 0 {
				o += int(q) * st[k]
			}
		}
		if o < 0 {
			o = x.Len()
		}
		idx[f] = o
	})
	return []tensor.Tensor{tensor.Take(joined, out, idx)}, nil
}

var _ = sort.Ints

// SplitParts is Split's rule, shared by its host function and its kernel planner: the axis
// and the size of each output along it, for an input of shape dims. given is the split
// input's value (opset 13 on; nil when absent); before opset 13 the split attribute gives
// the sizes. Without sizes the axis is cut evenly into the outputs (num_outputs, opset 18:
// the last part may be smaller). Sizes that are negative, do not add up to the axis, or are
// not one per output are refused.
func SplitParts(n *graph.Node, opset int64, dims []int64, given []int64) (int, []int64, error) {
	ax, err := ops.NormAxis(n.AttrInt("axis", 0), len(dims))
	if err != nil {
		return 0, nil, err
	}
	var split []int64
	if opset < 13 {
		split = n.AttrInts("split")
	} else {
		split = given
	}
	k := len(n.Outputs)
	if len(split) == 0 {
		if no := n.AttrInt("num_outputs", 0); no > 0 {
			k = int(no)
		}
		size := (dims[ax] + int64(k) - 1) / int64(k)
		for i := 0; i < k; i++ {
			split = append(split, min(size, dims[ax]-int64(i)*size))
		}
	}
	// Checked before any slice is made: a negative part (an axis shorter than the outputs,
	// split evenly) or parts that do not add up.
	sum := int64(0)
	for _, s := range split {
		if s < 0 || s > dims[ax] {
			return 0, nil, fmt.Errorf("axis %d of size %d cannot be split into %v (%d outputs)", ax, dims[ax], split, len(n.Outputs))
		}
		sum += s
	}
	if sum != dims[ax] {
		return 0, nil, fmt.Errorf("split %v does not add up to %d", split, dims[ax])
	}
	if len(split) != len(n.Outputs) {
		return 0, nil, fmt.Errorf("split %v makes %d parts for %d outputs", split, len(split), len(n.Outputs))
	}
	return ax, split, nil
}
