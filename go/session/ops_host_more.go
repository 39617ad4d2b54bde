package session

import (
	"fmt"
	"sort"

	"github.com/loomrt/loom/go/graph"
)

func init() {
	hostOps["Trilu"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x := in[0]
		r := len(x.shape)
		if r < 2 {
			return nil, fmt.Errorf("Trilu needs rank >= 2")
		}
		k := int64(0)
		if t := optional(in, 1); t.IsValid() {
			k = t.int64s()[0]
		}
		upper := n.AttrInt("upper", 1) != 0
		zero, _ := Zeros(x.dtype, nil)
		joined, err := concatFlat(x, zero.reshaped([]int64{1}))
		if err != nil {
			return nil, err
		}
		idx := make([]int, x.Len())
		forEachIndex(x.shape, func(f int, pos []int) {
			i, j := int64(pos[r-2]), int64(pos[r-1])
			keep := (upper && j-i >= k) || (!upper && j-i <= k)
			if keep {
				idx[f] = f
			} else {
				idx[f] = x.Len()
			}
		})
		return []Tensor{take(joined, x.shape, idx)}, nil
	}
	hostOps["CumSum"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x := in[0]
		ax, err := normAxis(in[1].int64s()[0], len(x.shape))
		if err != nil {
			return nil, err
		}
		excl, rev := n.AttrInt("exclusive", 0) != 0, n.AttrInt("reverse", 0) != 0
		outer, dim, inner := numel(x.shape[:ax]), int(x.shape[ax]), numel(x.shape[ax+1:])
		v := x.float64s()
		out := make([]float64, len(v))
		for o := 0; o < outer; o++ {
			for j := 0; j < inner; j++ {
				s := 0.0
				for t := 0; t < dim; t++ {
					i := t
					if rev {
						i = dim - 1 - t
					}
					at := (o*dim+i)*inner + j
					if excl {
						out[at] = s
						s += v[at]
					} else {
						s += v[at]
						out[at] = s
					}
				}
			}
		}
		return floatResult(x.dtype, x.shape, out)
	}
	hostOps["EyeLike"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x := in[0]
		if len(x.shape) != 2 {
			return nil, fmt.Errorf("EyeLike needs a matrix")
		}
		dt := x.dtype
		if a := n.Attr("dtype"); a != nil {
			dt = DType(a.Int)
		}
		k := int(n.AttrInt("k", 0))
		v := make([]float64, x.Len())
		cols := int(x.shape[1])
		for i := 0; i < int(x.shape[0]); i++ {
			if j := i + k; j >= 0 && j < cols {
				v[i*cols+j] = 1
			}
		}
		return floatResult(dt, x.shape, v)
	}
	d2s := func(toDepth bool) opFunc {
		return func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
			x := in[0]
			if len(x.shape) != 4 {
				return nil, fmt.Errorf("needs rank 4")
			}
			b := x.shape[0]
			c, h, w := x.shape[1], x.shape[2], x.shape[3]
			bs := n.AttrInt("blocksize", 1)
			if toDepth {
				// [b, c, h/bs, bs, w/bs, bs] -> [b, bs, bs, c, h/bs, w/bs]
				t := x.reshaped([]int64{b, c, h / bs, bs, w / bs, bs})
				shape, idx := transposeIndex(t.shape, []int{0, 3, 5, 1, 2, 4})
				return []Tensor{take(t, shape, idx).reshaped([]int64{b, c * bs * bs, h / bs, w / bs})}, nil
			}
			var t Tensor
			var perm []int
			if n.AttrString("mode", "DCR") == "CRD" {
				t, perm = x.reshaped([]int64{b, c / (bs * bs), bs, bs, h, w}), []int{0, 1, 4, 2, 5, 3}
			} else {
				t, perm = x.reshaped([]int64{b, bs, bs, c / (bs * bs), h, w}), []int{0, 3, 4, 1, 5, 2}
			}
			shape, idx := transposeIndex(t.shape, perm)
			return []Tensor{take(t, shape, idx).reshaped([]int64{b, c / (bs * bs), h * bs, w * bs})}, nil
		}
	}
	hostOps["DepthToSpace"] = d2s(false)
	hostOps["SpaceToDepth"] = d2s(true)
	hostOps["OneHot"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		ind, depthT, vals := in[0], in[1], in[2]
		depth := int64(depthT.float64s()[0])
		r := len(ind.shape) + 1
		ax, err := normAxis(n.AttrInt("axis", -1), r)
		if err != nil {
			return nil, err
		}
		out := append(append(append([]int64{}, ind.shape[:ax]...), depth), ind.shape[ax:]...)
		iv := ind.float64s()
		inner := numel(ind.shape[ax:])
		idx := make([]int, numel(out))
		forEachIndex(out, func(f int, pos []int) {
			// The index element this output reads: drop the depth axis from the position.
			o, d := 0, int64(pos[ax])
			src := (f/(int(depth)*inner))*inner + f%inner
			want := int64(iv[src])
			if want < 0 {
				want += depth
			}
			if want == d {
				o = 1
			}
			idx[f] = o
		})
		return []Tensor{take(vals, out, idx)}, nil
	}
	hostOps["TopK"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x := in[0]
		var k int
		if rc.opset < 10 {
			k = int(n.AttrInt("k", 1))
		} else {
			k = int(in[1].int64s()[0])
		}
		ax, err := normAxis(n.AttrInt("axis", -1), len(x.shape))
		if err != nil {
			return nil, err
		}
		largest := n.AttrInt("largest", 1) != 0
		outer, dim, inner := numel(x.shape[:ax]), int(x.shape[ax]), numel(x.shape[ax+1:])
		if k < 0 || k > dim {
			return nil, fmt.Errorf("k %d out of range for axis of size %d", k, dim)
		}
		v := x.float64s()
		out := append([]int64{}, x.shape...)
		out[ax] = int64(k)
		idx := make([]int, 0, numel(out))
		pos := make([]int64, numel(out))
		order := make([]int, dim)
		for o := 0; o < outer; o++ {
			for j := 0; j < inner; j++ {
				for i := range order {
					order[i] = i
				}
				at := func(i int) int { return (o*dim+i)*inner + j }
				sort.SliceStable(order, func(a, b int) bool {
					va, vb := v[at(order[a])], v[at(order[b])]
					if largest {
						return va > vb
					}
					return va < vb
				})
				for t := 0; t < k; t++ {
					pos[(o*k+t)*inner+j] = int64(order[t])
				}
			}
		}
		for f := range pos {
			o, j := f/(k*inner), f%inner
			idx = append(idx, (o*dim+int(pos[f]))*inner+j)
		}
		return []Tensor{take(x, out, idx), i64Tensor(out, pos)}, nil
	}
	hostOps["GatherND"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x, ind := in[0], in[1]
		bd := int(n.AttrInt("batch_dims", 0))
		q := len(ind.shape)
		last := int(ind.shape[q-1])
		out := append(append([]int64{}, ind.shape[:q-1]...), x.shape[bd+last:]...)
		slice := numel(x.shape[bd+last:])
		st := stridesOf(x.shape)
		iv := ind.int64s()
		batch := numel(x.shape[:bd])
		perBatch := numel(ind.shape[bd : q-1])
		bstride := numel(x.shape[bd:])
		idx := make([]int, 0, numel(out))
		for b := 0; b < batch; b++ {
			for t := 0; t < perBatch; t++ {
				tup := iv[(b*perBatch+t)*last : (b*perBatch+t+1)*last]
				base := b * bstride
				for k, e := range tup {
					d := x.shape[bd+k]
					if e < 0 {
						e += d
					}
					if e < 0 || e >= d {
						return nil, fmt.Errorf("index %d out of range", tup[k])
					}
					base += int(e) * st[bd+k]
				}
				for s := 0; s < slice; s++ {
					idx = append(idx, base+s)
				}
			}
		}
		return []Tensor{take(x, out, idx)}, nil
	}
	scatter := func(elements bool) opFunc {
		return func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
			x, ind, upd := in[0], in[1], in[2]
			if n.AttrString("reduction", "none") != "none" {
				return nil, fmt.Errorf("reduction %q is not supported", n.AttrString("reduction", ""))
			}
			joined, err := concatFlat(x, upd)
			if err != nil {
				return nil, err
			}
			idx := identityIndex(x.Len())
			st := stridesOf(x.shape)
			iv := ind.int64s()
			if elements {
				ax, err := normAxis(n.AttrInt("axis", 0), len(x.shape))
				if err != nil {
					return nil, err
				}
				var bad error
				forEachIndex(ind.shape, func(f int, pos []int) {
					o := 0
					for k, p := range pos {
						if k == ax {
							e := iv[f]
							if e < 0 {
								e += x.shape[ax]
							}
							if e < 0 || e >= x.shape[ax] {
								bad = fmt.Errorf("index %d out of range", iv[f])
								return
							}
							p = int(e)
						}
						o += p * st[k]
					}
					idx[o] = x.Len() + f
				})
				if bad != nil {
					return nil, bad
				}
			} else {
				last := int(ind.shape[len(ind.shape)-1])
				slice := numel(x.shape[last:])
				for t := 0; t < len(iv)/max(last, 1); t++ {
					base := 0
					for k, e := range iv[t*last : (t+1)*last] {
						if e < 0 {
							e += x.shape[k]
						}
						base += int(e) * st[k]
					}
					for s := 0; s < slice; s++ {
						idx[base+s] = x.Len() + t*slice + s
					}
				}
			}
			return []Tensor{take(joined, x.shape, idx)}, nil
		}
	}
	hostOps["ScatterElements"] = scatter(true)
	hostOps["Scatter"] = scatter(true)
	hostOps["ScatterND"] = scatter(false)
	hostOps["MeanVarianceNormalization"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		axes := n.AttrInts("axes")
		if axes == nil {
			axes = []int64{0, 2, 3}
		}
		x := in[0]
		add := func(a, v float64) float64 { return a + v }
		mean, err := reduce(x, axes, true, 0, add, func(a float64, c int) float64 { return a / float64(c) })
		if err != nil {
			return nil, err
		}
		idx, _ := broadcastIndex(mean.shape, x.shape)
		mv, xv := mean.float64s(), x.float64s()
		dev := make([]float64, len(xv))
		for i := range xv {
			dev[i] = xv[i] - mv[idx[i]]
		}
		sq := make([]float64, len(xv))
		for i := range dev {
			sq[i] = dev[i] * dev[i]
		}
		sqT, _ := fromFloat64s(graph.Double, x.shape, sq)
		vr, err := reduce(sqT, axes, true, 0, add, func(a float64, c int) float64 { return a / float64(c) })
		if err != nil {
			return nil, err
		}
		vv := vr.float64s()
		for i := range dev {
			dev[i] /= sqrt(vv[idx[i]]) + 1e-9
		}
		return floatResult(x.dtype, x.shape, dev)
	}
}
