package movement

import (
	"fmt"
	"math"
	"sort"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for selection ops: Compress, Unique, ReverseSequence, and the reductions of
// ScatterElements and ScatterND.

func init() {
	ops.HostOps["Compress"] = opCompress
	ops.HostOps["Unique"] = opUnique
	ops.HostOps["ReverseSequence"] = opReverseSequence
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
	return []tensor.Tensor{tensor.Take(x, yShape, idx), ops.I64Tensor([]int64{k}, indices), ops.I64Tensor([]int64{int64(dim)}, inv), ops.I64Tensor([]int64{k}, cnt)}, nil
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
	if err := checkScatter(n, x, ind, upd, elements); err != nil {
		return nil, err
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
		if !ops.SameShape(ind.Dims(), upd.Dims()) || len(ind.Dims()) != len(x.Dims()) {
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
	return ops.FloatResult(x.DType(), x.Dims(), xv)
}
