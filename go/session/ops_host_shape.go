package session

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/loomrt/loom/go/graph"
)

// Host functions for shape arithmetic and data movement: they work on any element type by
// computing an index map and gathering.

func i64Tensor(shape []int64, v []int64) Tensor {
	return raw(graph.Int64, shape, v)
}

// axesOf reads axes from an attribute (before opset since) or the input at index i.
func axesOf(rc *runCtx, n *graph.Node, in []Tensor, i int, since int64) []int64 {
	if rc.opset < since {
		return n.AttrInts("axes")
	}
	if len(in) > i && in[i].IsValid() {
		return in[i].int64s()
	}
	return nil
}

func transposeIndex(shape []int64, perm []int) ([]int64, []int) {
	out := make([]int64, len(shape))
	for i, p := range perm {
		out[i] = shape[p]
	}
	st := stridesOf(shape)
	idx := make([]int, numel(out))
	forEachIndex(out, func(f int, pos []int) {
		o := 0
		for i, p := range perm {
			o += pos[i] * st[p]
		}
		idx[f] = o
	})
	return out, idx
}

func init() {
	hostOps["Identity"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) { return []Tensor{in[0]}, nil }
	hostOps["Dropout"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		mask := make([]bool, in[0].Len())
		for i := range mask {
			mask[i] = true
		}
		return []Tensor{in[0], raw(graph.Bool, in[0].Shape(), mask)}, nil
	}
	hostOps["Constant"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		gt, err := graph.ConstantValue(n)
		if err != nil {
			return nil, err
		}
		t, err := FromGraphTensor(gt)
		return []Tensor{t}, err
	}
	hostOps["Shape"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		r := int64(len(in[0].shape))
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
			v = append(v, in[0].shape[s:e]...)
		}
		return []Tensor{i64Tensor([]int64{int64(len(v))}, v)}, nil
	}
	hostOps["Size"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		return []Tensor{i64Tensor(nil, []int64{int64(in[0].Len())})}, nil
	}
	hostOps["Reshape"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		var want []int64
		if rc.opset < 5 {
			want = n.AttrInts("shape")
		} else {
			want = in[1].int64s()
		}
		x := in[0]
		out := make([]int64, len(want))
		infer, known := -1, int64(1)
		for i, d := range want {
			switch {
			case d == 0 && n.AttrInt("allowzero", 0) == 0:
				if i >= len(x.shape) {
					return nil, fmt.Errorf("shape %v copies dimension %d of a rank-%d input", want, i, len(x.shape))
				}
				out[i] = x.shape[i]
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
		if numel(out) != x.Len() {
			return nil, fmt.Errorf("cannot reshape %v (%d elements) to %v", x.shape, x.Len(), want)
		}
		return []Tensor{x.reshaped(out)}, nil
	}
	hostOps["Flatten"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x := in[0]
		a := n.AttrInt("axis", 1)
		if a < 0 {
			a += int64(len(x.shape))
		}
		if a < 0 || a > int64(len(x.shape)) {
			return nil, fmt.Errorf("axis %d out of range", a)
		}
		return []Tensor{x.reshaped([]int64{int64(numel(x.shape[:a])), int64(numel(x.shape[a:]))})}, nil
	}
	hostOps["Squeeze"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x := in[0]
		axes := axesOf(rc, n, in, 1, 13)
		drop := map[int]bool{}
		for _, a := range axes {
			ax, err := normAxis(a, len(x.shape))
			if err != nil {
				return nil, err
			}
			if x.shape[ax] != 1 {
				return nil, fmt.Errorf("cannot squeeze axis %d of size %d", ax, x.shape[ax])
			}
			drop[ax] = true
		}
		out := []int64{}
		for i, d := range x.shape {
			if (len(axes) == 0 && d == 1) || drop[i] {
				continue
			}
			out = append(out, d)
		}
		return []Tensor{x.reshaped(out)}, nil
	}
	hostOps["Unsqueeze"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x := in[0]
		axes := axesOf(rc, n, in, 1, 13)
		r := len(x.shape) + len(axes)
		ins := map[int]bool{}
		for _, a := range axes {
			ax, err := normAxis(a, r)
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
				out[i] = x.shape[j]
				j++
			}
		}
		return []Tensor{x.reshaped(out)}, nil
	}
	hostOps["Transpose"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x := in[0]
		r := len(x.shape)
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
		shape, idx := transposeIndex(x.shape, perm)
		return []Tensor{take(x, shape, idx)}, nil
	}
	hostOps["Concat"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		var ts []Tensor
		for _, t := range in {
			if t.IsValid() {
				ts = append(ts, t)
			}
		}
		r := len(ts[0].shape)
		ax, err := normAxis(n.AttrInt("axis", 0), r)
		if err != nil {
			return nil, err
		}
		out := append([]int64{}, ts[0].shape...)
		out[ax] = 0
		for _, t := range ts {
			if len(t.shape) != r {
				return nil, fmt.Errorf("inputs of ranks %d and %d", r, len(t.shape))
			}
			out[ax] += t.shape[ax]
		}
		joined, err := concatFlat(ts...)
		if err != nil {
			return nil, err
		}
		outer := numel(out[:ax])
		idx := make([]int, 0, numel(out))
		for o := 0; o < outer; o++ {
			base := 0
			for _, t := range ts {
				chunk := numel(t.shape[ax:])
				for j := 0; j < chunk; j++ {
					idx = append(idx, base+o*chunk+j)
				}
				base += t.Len()
			}
		}
		return []Tensor{take(joined, out, idx)}, nil
	}
	hostOps["Split"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x := in[0]
		ax, err := normAxis(n.AttrInt("axis", 0), len(x.shape))
		if err != nil {
			return nil, err
		}
		var split []int64
		if rc.opset < 13 {
			split = n.AttrInts("split")
		} else if len(in) > 1 && in[1].IsValid() {
			split = in[1].int64s()
		}
		k := len(n.Outputs)
		if len(split) == 0 {
			if no := n.AttrInt("num_outputs", 0); no > 0 {
				k = int(no)
			}
			size := (x.shape[ax] + int64(k) - 1) / int64(k)
			for i := 0; i < k; i++ {
				split = append(split, min(size, x.shape[ax]-int64(i)*size))
			}
		}
		outs := make([]Tensor, len(split))
		start := int64(0)
		for i, s := range split {
			outs[i] = sliceAxis(x, ax, start, s)
			start += s
		}
		if start != x.shape[ax] {
			return nil, fmt.Errorf("split %v does not add up to %d", split, x.shape[ax])
		}
		return outs, nil
	}
	hostOps["Slice"] = opSlice
	hostOps["Gather"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x, ind := in[0], in[1]
		ax, err := normAxis(n.AttrInt("axis", 0), len(x.shape))
		if err != nil {
			return nil, err
		}
		iv := ind.int64s()
		out := append(append(append([]int64{}, x.shape[:ax]...), ind.shape...), x.shape[ax+1:]...)
		outer, inner, dim := numel(x.shape[:ax]), numel(x.shape[ax+1:]), int(x.shape[ax])
		idx := make([]int, 0, numel(out))
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
		return []Tensor{take(x, out, idx)}, nil
	}
	hostOps["GatherElements"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x, ind := in[0], in[1]
		ax, err := normAxis(n.AttrInt("axis", 0), len(x.shape))
		if err != nil {
			return nil, err
		}
		iv, st := ind.int64s(), stridesOf(x.shape)
		idx := make([]int, ind.Len())
		var bad error
		forEachIndex(ind.shape, func(f int, pos []int) {
			o := 0
			for k, p := range pos {
				if k == ax {
					g := iv[f]
					if g < 0 {
						g += x.shape[ax]
					}
					if g < 0 || g >= x.shape[ax] {
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
		return []Tensor{take(x, ind.shape, idx)}, nil
	}
	hostOps["Expand"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x := in[0]
		shape, err := broadcastShapes(x.shape, in[1].int64s())
		if err != nil {
			return nil, err
		}
		idx, err := broadcastIndex(x.shape, shape)
		if err != nil {
			return nil, err
		}
		return []Tensor{take(x, shape, idx)}, nil
	}
	hostOps["Tile"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x, reps := in[0], in[1].int64s()
		if len(reps) != len(x.shape) {
			return nil, fmt.Errorf("repeats %v for rank %d", reps, len(x.shape))
		}
		out := make([]int64, len(reps))
		for i := range out {
			out[i] = x.shape[i] * reps[i]
		}
		st := stridesOf(x.shape)
		idx := make([]int, numel(out))
		forEachIndex(out, func(f int, pos []int) {
			o := 0
			for k, p := range pos {
				o += (p % int(x.shape[k])) * st[k]
			}
			idx[f] = o
		})
		return []Tensor{take(x, out, idx)}, nil
	}
	hostOps["ConstantOfShape"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		shape := in[0].int64s()
		val := raw(graph.Float, []int64{1}, []float32{0})
		if a := n.Attr("value"); a != nil && a.Tensor != nil {
			t, err := FromGraphTensor(a.Tensor)
			if err != nil {
				return nil, err
			}
			val = t
		}
		return []Tensor{take(val, shape, make([]int, numel(shape)))}, nil
	}
	hostOps["Range"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		s, l, d := in[0].float64s()[0], in[1].float64s()[0], in[2].float64s()[0]
		if d == 0 {
			return nil, fmt.Errorf("delta is 0")
		}
		cnt := int(max(math.Ceil((l-s)/d), 0))
		v := make([]float64, cnt)
		for i := range v {
			v[i] = s + float64(i)*d
		}
		out, err := fromFloat64s(in[0].dtype, []int64{int64(cnt)}, v)
		return []Tensor{out}, err
	}
	hostOps["Cast"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		out, err := castTo(in[0], DType(n.AttrInt("to", 0)))
		return []Tensor{out}, err
	}
	hostOps["CastLike"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		out, err := castTo(in[0], in[1].dtype)
		return []Tensor{out}, err
	}
	hostOps["NonZero"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x := in[0]
		v := x.float64s()
		var hits [][]int
		forEachIndex(x.shape, func(f int, pos []int) {
			if v[f] != 0 {
				hits = append(hits, append([]int{}, pos...))
			}
		})
		r := len(x.shape)
		out := make([]int64, r*len(hits))
		for j, h := range hits {
			for k := range r {
				out[k*len(hits)+j] = int64(h[k])
			}
		}
		return []Tensor{i64Tensor([]int64{int64(r), int64(len(hits))}, out)}, nil
	}
	hostOps["Pad"] = opPad
}

// castTo converts elements, including to and from strings.
func castTo(x Tensor, to DType) (Tensor, error) {
	if x.dtype == to {
		return x, nil
	}
	if to == graph.String {
		out := make([]string, x.Len())
		v := x.float64s()
		for i := range out {
			switch {
			case x.dtype == graph.Bool:
				out[i] = strconv.FormatBool(v[i] != 0)
			case x.dtype.IsFloat():
				out[i] = strconv.FormatFloat(v[i], 'g', -1, 32)
			default:
				out[i] = strconv.FormatInt(int64(v[i]), 10)
			}
		}
		return raw(graph.String, x.Shape(), out), nil
	}
	if x.dtype == graph.String {
		s := x.data.([]string)
		v := make([]float64, len(s))
		for i, e := range s {
			f, err := strconv.ParseFloat(e, 64)
			if err != nil {
				return Tensor{}, fmt.Errorf("cannot cast %q to %s", e, to)
			}
			v[i] = f
		}
		return fromFloat64s(to, x.shape, v)
	}
	if x.dtype == graph.Int64 && to != graph.Double && to != graph.Float {
		iv := x.data.([]int64)
		v := make([]float64, len(iv))
		for i, e := range iv {
			v[i] = float64(e)
		}
		return fromFloat64s(to, x.shape, v)
	}
	return fromFloat64s(to, x.shape, x.float64s())
}

// sliceAxis returns elements [start, start+n) along axis ax.
func sliceAxis(x Tensor, ax int, start, n int64) Tensor {
	out := append([]int64{}, x.shape...)
	out[ax] = n
	st := stridesOf(x.shape)
	idx := make([]int, numel(out))
	forEachIndex(out, func(f int, pos []int) {
		o := 0
		for k, p := range pos {
			if k == ax {
				p += int(start)
			}
			o += p * st[k]
		}
		idx[f] = o
	})
	return take(x, out, idx)
}

// sliceBounds applies Slice's rules to one axis of length d: negative start and end count from
// the end, both are clamped to the axis (to [-1, d-1] for a negative step), and the result is
// the first index and the number of elements taken with step k (k != 0).
func sliceBounds(s, e, k, d int64) (first, count int64) {
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

func opSlice(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
	x := in[0]
	var starts, ends, axes, steps []int64
	if rc.opset < 10 {
		starts, ends, axes = n.AttrInts("starts"), n.AttrInts("ends"), n.AttrInts("axes")
	} else {
		starts, ends = in[1].int64s(), in[2].int64s()
		if len(in) > 3 && in[3].IsValid() {
			axes = in[3].int64s()
		}
		if len(in) > 4 && in[4].IsValid() {
			steps = in[4].int64s()
		}
	}
	r := len(x.shape)
	if len(axes) == 0 {
		for i := range starts {
			axes = append(axes, int64(i))
		}
	}
	begin, step := make([]int64, r), make([]int64, r)
	out := append([]int64{}, x.shape...)
	for i := range step {
		step[i] = 1
	}
	for i, a := range axes {
		ax, err := normAxis(a, r)
		if err != nil {
			return nil, err
		}
		d := x.shape[ax]
		k := int64(1)
		if len(steps) > i {
			k = steps[i]
		}
		if k == 0 {
			return nil, fmt.Errorf("slice step 0 on axis %d", ax)
		}
		begin[ax], out[ax] = sliceBounds(starts[i], ends[i], k, d)
		step[ax] = k
	}
	st := stridesOf(x.shape)
	idx := make([]int, numel(out))
	forEachIndex(out, func(f int, pos []int) {
		o := 0
		for k, p := range pos {
			o += int(begin[k]+int64(p)*step[k]) * st[k]
		}
		idx[f] = o
	})
	return []Tensor{take(x, out, idx)}, nil
}

func opPad(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
	x := in[0]
	r := len(x.shape)
	var pads []int64
	var cval Tensor
	if rc.opset < 11 {
		pads = n.AttrInts("pads")
		v, _ := fromFloat64s(x.dtype, nil, []float64{float64(n.AttrFloat("value", 0))})
		cval = v
	} else {
		pads = in[1].int64s()
		if len(in) > 2 && in[2].IsValid() {
			cval = in[2].reshaped(nil)
		} else {
			cval, _ = Zeros(x.dtype, nil)
		}
	}
	full := make([]int64, 2*r)
	if len(in) > 3 && in[3].IsValid() {
		axes := in[3].int64s()
		for i, a := range axes {
			ax, err := normAxis(a, r)
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
	out := make([]int64, r)
	for i := range out {
		out[i] = x.shape[i] + full[i] + full[i+r]
	}
	joined, err := concatFlat(x, cval)
	if err != nil {
		return nil, err
	}
	st := stridesOf(x.shape)
	idx := make([]int, numel(out))
	forEachIndex(out, func(f int, pos []int) {
		o := 0
		for k, p := range pos {
			q, d := int64(p)-full[k], x.shape[k]
			if q < 0 || q >= d {
				switch mode {
				case "edge":
					q = min(max(q, 0), d-1)
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
	return []Tensor{take(joined, out, idx)}, nil
}

var _ = sort.Ints
