package hostops

import (
	"fmt"
	"math"
	"sort"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for assorted ops: Compress, Unique, ReverseSequence, Det, LRN, the window
// generators, NonMaxSuppression, MaxPool's indices output and scatter reductions.

func init() {
	ops.HostOps["Compress"] = opCompress
	ops.HostOps["Unique"] = opUnique
	ops.HostOps["ReverseSequence"] = opReverseSequence
	ops.HostOps["Det"] = opDet
	ops.HostOps["LRN"] = opLRN
	ops.HostOps["HannWindow"] = windowOp(func(k, n float64) float64 { return 0.5 - 0.5*math.Cos(2*math.Pi*k/n) })
	ops.HostOps["HammingWindow"] = windowOp(func(k, n float64) float64 {
		const a0 = 25.0 / 46
		return a0 - (1-a0)*math.Cos(2*math.Pi*k/n)
	})
	ops.HostOps["BlackmanWindow"] = windowOp(func(k, n float64) float64 {
		return 0.42 - 0.5*math.Cos(2*math.Pi*k/n) + 0.08*math.Cos(4*math.Pi*k/n)
	})
	ops.HostOps["NonMaxSuppression"] = opNonMaxSuppression
	maxPool := ops.HostOps["MaxPool"]
	ops.HostOps["MaxPool"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		if len(n.Outputs) > 1 && n.Outputs[1] != "" {
			return MaxPoolWithIndices(n, in[0])
		}
		return maxPool(rc, n, in)
	}
	for _, op := range []string{"ScatterElements", "ScatterND"} {
		plain, elements := ops.HostOps[op], op == "ScatterElements"
		ops.HostOps[op] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
			if red := n.AttrString("reduction", "none"); red != "none" {
				return scatterReduce(n, in, elements, red)
			}
			return plain(rc, n, in)
		}
	}
}

func opCompress(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x, cond := in[0], in[1]
	if len(cond.Dims()) != 1 {
		return nil, fmt.Errorf("condition must be 1-D, got shape %v", cond.Dims())
	}
	c := tensor.Float64s(cond)
	shape := x.Dims()
	ax := 0
	if a := n.Attr("axis"); a != nil {
		var err error
		if ax, err = ops.NormAxis(a.Int, len(x.Dims())); err != nil {
			return nil, err
		}
	} else {
		shape = []int64{int64(x.Len())}
	}
	dim := int(shape[ax])
	if len(c) > dim {
		return nil, fmt.Errorf("condition has %d elements, axis has %d", len(c), dim)
	}
	outer, inner := ops.Numel(shape[:ax]), ops.Numel(shape[ax+1:])
	var keep []int
	for i, v := range c {
		if v != 0 {
			keep = append(keep, i)
		}
	}
	idx := make([]int, 0, outer*len(keep)*inner)
	for o := 0; o < outer; o++ {
		for _, k := range keep {
			for j := 0; j < inner; j++ {
				idx = append(idx, (o*dim+k)*inner+j)
			}
		}
	}
	out := append([]int64{}, shape...)
	out[ax] = int64(len(keep))
	return []tensor.Tensor{tensor.Take(x, out, idx)}, nil
}

// compareElems orders two elements of t (numbers numerically, strings lexically).
func compareElems(t tensor.Tensor, f []float64, i, j int) int {
	if s, ok := t.Data().([]string); ok {
		switch {
		case s[i] < s[j]:
			return -1
		case s[i] > s[j]:
			return 1
		}
		return 0
	}
	switch {
	case f[i] < f[j]:
		return -1
	case f[i] > f[j]:
		return 1
	}
	return 0
}

func opUnique(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	shape := []int64{int64(x.Len())}
	ax := 0
	if a := n.Attr("axis"); a != nil {
		var err error
		if ax, err = ops.NormAxis(a.Int, len(x.Dims())); err != nil {
			return nil, err
		}
		shape = x.Dims()
	}
	var f []float64
	if x.DType() != graph.String {
		f = tensor.Float64s(x)
	}
	dim, outer, inner := int(shape[ax]), ops.Numel(shape[:ax]), ops.Numel(shape[ax+1:])
	// Slice s along ax holds the elements (o*dim+s)*inner+j.
	cmp := func(a, b int) int {
		for o := 0; o < outer; o++ {
			for j := 0; j < inner; j++ {
				if c := compareElems(x, f, (o*dim+a)*inner+j, (o*dim+b)*inner+j); c != 0 {
					return c
				}
			}
		}
		return 0
	}
	var firsts []int // first occurrence of each distinct slice, in order of appearance
	inverse := make([]int64, dim)
	counts := map[int]int64{}
	for s := 0; s < dim; s++ {
		found := -1
		for u, fs := range firsts {
			if cmp(fs, s) == 0 {
				found = u
				break
			}
		}
		if found < 0 {
			found = len(firsts)
			firsts = append(firsts, s)
		}
		inverse[s] = int64(found)
		counts[found]++
	}
	order := make([]int, len(firsts)) // output position -> distinct id
	for i := range order {
		order[i] = i
	}
	if n.AttrInt("sorted", 1) != 0 {
		sort.SliceStable(order, func(a, b int) bool { return cmp(firsts[order[a]], firsts[order[b]]) < 0 })
	}
	rank := make([]int64, len(order))
	for pos, id := range order {
		rank[id] = int64(pos)
	}
	idx := make([]int, 0, outer*len(order)*inner)
	for o := 0; o < outer; o++ {
		for _, id := range order {
			for j := 0; j < inner; j++ {
				idx = append(idx, (o*dim+firsts[id])*inner+j)
			}
		}
	}
	yShape := append([]int64{}, shape...)
	yShape[ax] = int64(len(order))
	indices, cnt := make([]int64, len(order)), make([]int64, len(order))
	for pos, id := range order {
		indices[pos], cnt[pos] = int64(firsts[id]), counts[id]
	}
	inv := make([]int64, dim)
	for s := range inv {
		inv[s] = rank[inverse[s]]
	}
	k := int64(len(order))
	return []tensor.Tensor{tensor.Take(x, yShape, idx), I64Tensor([]int64{k}, indices), I64Tensor([]int64{int64(dim)}, inv), I64Tensor([]int64{k}, cnt)}, nil
}

func opReverseSequence(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x, lens := in[0], tensor.Int64s(in[1])
	r := len(x.Dims())
	bAx, err := ops.NormAxis(n.AttrInt("batch_axis", 1), r)
	if err != nil {
		return nil, err
	}
	tAx, err := ops.NormAxis(n.AttrInt("time_axis", 0), r)
	if err != nil {
		return nil, err
	}
	if bAx == tAx || len(lens) != int(x.Dims()[bAx]) {
		return nil, fmt.Errorf("batch_axis %d, time_axis %d and %d sequence lengths do not fit shape %v", bAx, tAx, len(lens), x.Dims())
	}
	st := ops.StridesOf(x.Dims())
	idx := make([]int, x.Len())
	var bad error
	ops.ForEachIndex(x.Dims(), func(f int, pos []int) {
		l := lens[pos[bAx]]
		if l < 0 || l > x.Dims()[tAx] {
			bad = fmt.Errorf("sequence length %d outside [0, %d]", l, x.Dims()[tAx])
			return
		}
		t := pos[tAx]
		if int64(t) < l {
			idx[f] = f + (int(l)-1-2*t)*st[tAx]
		} else {
			idx[f] = f
		}
	})
	if bad != nil {
		return nil, bad
	}
	return []tensor.Tensor{tensor.Take(x, x.Dims(), idx)}, nil
}

func opDet(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	r := len(x.Dims())
	if r < 2 || x.Dims()[r-1] != x.Dims()[r-2] {
		return nil, fmt.Errorf("Det needs (..., M, M), got shape %v", x.Dims())
	}
	m := int(x.Dims()[r-1])
	v := tensor.Float64s(x)
	batch := ops.Numel(x.Dims()[:r-2])
	out := make([]float64, batch)
	a := make([]float64, m*m)
	for b := range batch {
		copy(a, v[b*m*m:(b+1)*m*m])
		det := 1.0
		// Gaussian elimination with partial pivoting.
		for c := 0; c < m; c++ {
			p := c
			for i := c + 1; i < m; i++ {
				if math.Abs(a[i*m+c]) > math.Abs(a[p*m+c]) {
					p = i
				}
			}
			if a[p*m+c] == 0 {
				det = 0
				break
			}
			if p != c {
				for j := 0; j < m; j++ {
					a[p*m+j], a[c*m+j] = a[c*m+j], a[p*m+j]
				}
				det = -det
			}
			det *= a[c*m+c]
			for i := c + 1; i < m; i++ {
				f := a[i*m+c] / a[c*m+c]
				for j := c; j < m; j++ {
					a[i*m+j] -= f * a[c*m+j]
				}
			}
		}
		out[b] = det
	}
	return floatResult(x.DType(), x.Dims()[:r-2], out)
}

func opLRN(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	if len(x.Dims()) < 3 {
		return nil, fmt.Errorf("LRN needs (N, C, ...), got shape %v", x.Dims())
	}
	size := int(n.AttrInt("size", 0))
	if size <= 0 {
		return nil, fmt.Errorf("size must be positive, got %d", size)
	}
	alpha, beta, bias := float64(n.AttrFloat("alpha", 1e-4)), float64(n.AttrFloat("beta", 0.75)), float64(n.AttrFloat("bias", 1))
	nb, c, inner := int(x.Dims()[0]), int(x.Dims()[1]), ops.Numel(x.Dims()[2:])
	lo, hi := (size-1)/2, (size-1)-(size-1)/2
	v := tensor.Float64s(x)
	out := make([]float64, len(v))
	for b := 0; b < nb; b++ {
		for ch := 0; ch < c; ch++ {
			for j := 0; j < inner; j++ {
				s := 0.0
				for k := max(0, ch-lo); k <= min(c-1, ch+hi); k++ {
					e := v[(b*c+k)*inner+j]
					s += e * e
				}
				i := (b*c+ch)*inner + j
				out[i] = v[i] / math.Pow(bias+alpha/float64(size)*s, beta)
			}
		}
	}
	return floatResult(x.DType(), x.Dims(), out)
}

// windowOp makes a window generator from w(k, N), N the periodic or symmetric denominator.
func windowOp(w func(k, n float64) float64) ops.OpFunc {
	return func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		if in[0].Len() != 1 {
			return nil, fmt.Errorf("size must be a scalar")
		}
		size := tensor.Int64s(in[0])[0]
		if size < 0 || size > 1<<28 {
			return nil, fmt.Errorf("window size %d out of range", size)
		}
		den := float64(size)
		if n.AttrInt("periodic", 1) == 0 {
			den = float64(size - 1)
		}
		v := make([]float64, size)
		for k := range v {
			v[k] = w(float64(k), den)
		}
		return floatResult(tensor.DType(n.AttrInt("output_datatype", int64(graph.Float))), []int64{size}, v)
	}
}

func opNonMaxSuppression(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	boxes, scores := in[0], in[1]
	if len(boxes.Dims()) != 3 || boxes.Dims()[2] != 4 || len(scores.Dims()) != 3 || scores.Dims()[0] != boxes.Dims()[0] || scores.Dims()[2] != boxes.Dims()[1] {
		return nil, fmt.Errorf("boxes %v and scores %v must be (B, S, 4) and (B, C, S)", boxes.Dims(), scores.Dims())
	}
	maxOut := int64(0)
	if t := ops.Optional(in, 2); t.IsValid() && t.Len() > 0 {
		maxOut = tensor.Int64s(t)[0]
	}
	iouTh, scoreTh, hasScoreTh := 0.0, 0.0, false
	if t := ops.Optional(in, 3); t.IsValid() && t.Len() > 0 {
		iouTh = tensor.Float64s(t)[0]
	}
	if t := ops.Optional(in, 4); t.IsValid() && t.Len() > 0 {
		scoreTh, hasScoreTh = tensor.Float64s(t)[0], true
	}
	center := n.AttrInt("center_point_box", 0) != 0
	nb, nc, ns := int(scores.Dims()[0]), int(scores.Dims()[1]), int(scores.Dims()[2])
	bv, sv := tensor.Float64s(boxes), tensor.Float64s(scores)
	corners := func(b, i int) (y1, x1, y2, x2 float64) {
		p := bv[(b*ns+i)*4 : (b*ns+i)*4+4]
		if center {
			return p[1] - p[3]/2, p[0] - p[2]/2, p[1] + p[3]/2, p[0] + p[2]/2
		}
		return math.Min(p[0], p[2]), math.Min(p[1], p[3]), math.Max(p[0], p[2]), math.Max(p[1], p[3])
	}
	iou := func(b, i, j int) float64 {
		ay1, ax1, ay2, ax2 := corners(b, i)
		by1, bx1, by2, bx2 := corners(b, j)
		ih := math.Max(0, math.Min(ay2, by2)-math.Max(ay1, by1))
		iw := math.Max(0, math.Min(ax2, bx2)-math.Max(ax1, bx1))
		inter := ih * iw
		union := (ay2-ay1)*(ax2-ax1) + (by2-by1)*(bx2-bx1) - inter
		if union <= 0 {
			return 0
		}
		return inter / union
	}
	var sel []int64
	for b := 0; b < nb; b++ {
		for c := 0; c < nc; c++ {
			sc := sv[(b*nc+c)*ns : (b*nc+c+1)*ns]
			var cand []int
			for i, s := range sc {
				if !hasScoreTh || s > scoreTh {
					cand = append(cand, i)
				}
			}
			sort.SliceStable(cand, func(x, y int) bool { return sc[cand[x]] > sc[cand[y]] })
			var kept []int
			for _, i := range cand {
				if int64(len(kept)) >= maxOut {
					break
				}
				ok := true
				for _, k := range kept {
					if iou(b, i, k) > iouTh {
						ok = false
						break
					}
				}
				if ok {
					kept = append(kept, i)
					sel = append(sel, int64(b), int64(c), int64(i))
				}
			}
		}
	}
	return []tensor.Tensor{I64Tensor([]int64{int64(len(sel) / 3), 3}, sel)}, nil
}

// maxPoolWithIndices is MaxPool with its Indices output: the flat index of each maximum in
// the input tensor, spatial axes row-major (storage_order 0) or column-major (1).
func MaxPoolWithIndices(n *graph.Node, x tensor.Tensor) ([]tensor.Tensor, error) {
	if len(x.Dims()) < 3 {
		return nil, fmt.Errorf("pooling input of rank %d", len(x.Dims()))
	}
	p, err := ops.PoolParamsOf(n, x.Dims())
	if err != nil {
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
	return []tensor.Tensor{y, I64Tensor(shape, ind)}, nil
}

// scatterReduce is ScatterElements / ScatterND with reduction add, mul, max or min,
// computed in float64 (exact for integers up to 2^53).
func scatterReduce(n *graph.Node, in []tensor.Tensor, elements bool, red string) ([]tensor.Tensor, error) {
	x, ind, upd := in[0], in[1], in[2]
	var f func(a, b float64) float64
	switch red {
	case "add":
		f = func(a, b float64) float64 { return a + b }
	case "mul":
		f = func(a, b float64) float64 { return a * b }
	case "max":
		f = math.Max
	case "min":
		f = math.Min
	default:
		return nil, fmt.Errorf("reduction %q is not one of none, add, mul, max, min", red)
	}
	if x.DType() == graph.String {
		return nil, fmt.Errorf("reduction %q on strings", red)
	}
	xv, uv, iv := tensor.Float64s(x), tensor.Float64s(upd), tensor.Int64s(ind)
	st := ops.StridesOf(x.Dims())
	norm := func(e, d int64) (int, error) {
		if e < 0 {
			e += d
		}
		if e < 0 || e >= d {
			return 0, fmt.Errorf("index %d out of range [0, %d)", e, d)
		}
		return int(e), nil
	}
	if elements {
		ax, err := ops.NormAxis(n.AttrInt("axis", 0), len(x.Dims()))
		if err != nil {
			return nil, err
		}
		if !sameShape(ind.Dims(), upd.Dims()) || len(ind.Dims()) != len(x.Dims()) {
			return nil, fmt.Errorf("indices %v and updates %v must share a shape of the data's rank %d", ind.Dims(), upd.Dims(), len(x.Dims()))
		}
		var bad error
		ops.ForEachIndex(ind.Dims(), func(fl int, pos []int) {
			if bad != nil {
				return
			}
			o := 0
			for k, p := range pos {
				if k == ax {
					e, err := norm(iv[fl], x.Dims()[ax])
					if err != nil {
						bad = err
						return
					}
					p = e
				}
				o += p * st[k]
			}
			xv[o] = f(xv[o], uv[fl])
		})
		if bad != nil {
			return nil, bad
		}
	} else {
		last := int(ind.Dims()[len(ind.Dims())-1])
		if last > len(x.Dims()) {
			return nil, fmt.Errorf("index tuples of length %d for data rank %d", last, len(x.Dims()))
		}
		slice := ops.Numel(x.Dims()[last:])
		for t := 0; t < len(iv)/max(last, 1); t++ {
			base := 0
			for k, e := range iv[t*last : (t+1)*last] {
				p, err := norm(e, x.Dims()[k])
				if err != nil {
					return nil, err
				}
				base += p * st[k]
			}
			for s := 0; s < slice; s++ {
				xv[base+s] = f(xv[base+s], uv[t*slice+s])
			}
		}
	}
	return floatResult(x.DType(), x.Dims(), xv)
}
