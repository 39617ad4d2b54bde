package movement

import (
	"fmt"
	"math"
	"sort"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for layout and indexing ops: Trilu, EyeLike, DepthToSpace and SpaceToDepth,
// OneHot, TopK, GatherND and the scatters (their reductions are scatterReduce, ops_select.go).

func init() {
	ops.HostOps["Trilu"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		r := len(x.Dims())
		if r < 2 {
			return nil, fmt.Errorf("Trilu needs rank >= 2")
		}
		k := int64(0)
		if t := ops.Optional(in, 1); t.IsValid() {
			var err error
			if k, err = ops.OneInt(in, 1, "k (input 1)"); err != nil {
				return nil, err
			}
		}
		upper := n.AttrInt("upper", 1) != 0
		zero, _ := tensor.Zeros(x.DType(), nil)
		joined, err := ops.ConcatFlat(x, tensor.Reshaped(zero, []int64{1}))
		if err != nil {
			return nil, err
		}
		idx := make([]int, x.Len())
		ops.ForEachIndex(x.Dims(), func(f int, pos []int) {
			i, j := int64(pos[r-2]), int64(pos[r-1])
			keep := (upper && j-i >= k) || (!upper && j-i <= k)
			if keep {
				idx[f] = f
			} else {
				idx[f] = x.Len()
			}
		})
		return []tensor.Tensor{tensor.Take(joined, x.Dims(), idx)}, nil
	}
	ops.HostOps["EyeLike"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		if len(x.Dims()) != 2 {
			return nil, fmt.Errorf("EyeLike needs a matrix")
		}
		dt := x.DType()
		if a := n.Attr("dtype"); a != nil {
			dt = tensor.DType(a.Int)
		}
		k := int(n.AttrInt("k", 0))
		v := make([]float64, x.Len())
		cols := int(x.Dims()[1])
		for i := 0; i < int(x.Dims()[0]); i++ {
			if j := i + k; j >= 0 && j < cols {
				v[i*cols+j] = 1
			}
		}
		return ops.FloatResult(dt, x.Dims(), v)
	}
	d2s := func(toDepth bool) ops.OpFunc {
		return func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
			x := in[0]
			if len(x.Dims()) != 4 {
				return nil, fmt.Errorf("needs rank 4")
			}
			b := x.Dims()[0]
			c, h, w := x.Dims()[1], x.Dims()[2], x.Dims()[3]
			bs := n.AttrInt("blocksize", 1)
			if bs < 1 {
				return nil, fmt.Errorf("blocksize %d; it must be at least 1", bs)
			}
			if toDepth && (h%bs != 0 || w%bs != 0) {
				return nil, fmt.Errorf("the input's height %d and width %d must be multiples of blocksize %d", h, w, bs)
			}
			if !toDepth && c != 0 && (bs > c/bs || c%(bs*bs) != 0) {
				return nil, fmt.Errorf("the input's %d channels must be a multiple of blocksize² = %d", c, bs*bs)
			}
			if toDepth {
				// [b, c, h/bs, bs, w/bs, bs] -> [b, bs, bs, c, h/bs, w/bs]
				t := tensor.Reshaped(x, []int64{b, c, h / bs, bs, w / bs, bs})
				shape, idx := ops.TransposeIndex(t.Dims(), []int{0, 3, 5, 1, 2, 4})
				return []tensor.Tensor{tensor.Reshaped(tensor.Take(t, shape, idx), []int64{b, c * bs * bs, h / bs, w / bs})}, nil
			}
			var t tensor.Tensor
			var perm []int
			if n.AttrString("mode", "DCR") == "CRD" {
				t, perm = tensor.Reshaped(x, []int64{b, c / (bs * bs), bs, bs, h, w}), []int{0, 1, 4, 2, 5, 3}
			} else {
				t, perm = tensor.Reshaped(x, []int64{b, bs, bs, c / (bs * bs), h, w}), []int{0, 3, 4, 1, 5, 2}
			}
			shape, idx := ops.TransposeIndex(t.Dims(), perm)
			return []tensor.Tensor{tensor.Reshaped(tensor.Take(t, shape, idx), []int64{b, c / (bs * bs), h * bs, w * bs})}, nil
		}
	}
	ops.HostOps["DepthToSpace"] = d2s(false)
	ops.HostOps["SpaceToDepth"] = d2s(true)
	ops.HostOps["OneHot"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		ind, depthT, vals := in[0], in[1], in[2]
		dv := tensor.Float64s(depthT)
		if len(dv) != 1 {
			return nil, fmt.Errorf("the depth (input 1) has %d elements, want 1", len(dv))
		}
		if math.IsNaN(dv[0]) || dv[0] < 1 {
			return nil, fmt.Errorf("the depth (input 1) is %v; it must be at least 1", dv[0])
		}
		if err := ops.CheckCount(rc, "the output", dv[0]*float64(ind.Len())); err != nil {
			return nil, err
		}
		if err := ops.CheckCount(rc, "the output's depth axis", dv[0]); err != nil {
			return nil, err
		}
		depth := int64(dv[0])
		if vals.Len() != 2 {
			return nil, fmt.Errorf("the values (input 2) hold %d elements, want 2 (off, on)", vals.Len())
		}
		r := len(ind.Dims()) + 1
		ax, err := ops.NormAxis(n.AttrInt("axis", -1), r)
		if err != nil {
			return nil, err
		}
		out := append(append(append([]int64{}, ind.Dims()[:ax]...), depth), ind.Dims()[ax:]...)
		if err := ops.ReserveShape(rc, "the output", vals.DType(), out, intSize); err != nil {
			return nil, err
		}
		iv := tensor.Float64s(ind)
		inner := ops.Numel(ind.Dims()[ax:])
		idx := make([]int, ops.Numel(out))
		ops.ForEachIndex(out, func(f int, pos []int) {
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
		return []tensor.Tensor{tensor.Take(vals, out, idx)}, nil
	}
	ops.HostOps["TopK"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		var k int
		if rc.OpsetVersion() < 10 {
			k = int(n.AttrInt("k", 1))
		} else {
			k64, err := ops.OneInt(in, 1, "K (input 1)")
			if err != nil {
				return nil, err
			}
			k = int(max(min(k64, math.MaxInt32), -1)) // checked against the axis below
		}
		ax, err := ops.NormAxis(n.AttrInt("axis", -1), len(x.Dims()))
		if err != nil {
			return nil, err
		}
		largest := n.AttrInt("largest", 1) != 0
		outer, dim, inner := ops.Numel(x.Dims()[:ax]), int(x.Dims()[ax]), ops.Numel(x.Dims()[ax+1:])
		if k < 0 || k > dim {
			return nil, fmt.Errorf("k %d out of range for axis of size %d", k, dim)
		}
		v := tensor.Float64s(x)
		out := append([]int64{}, x.Dims()...)
		out[ax] = int64(k)
		idx := make([]int, 0, ops.Numel(out))
		pos := make([]int64, ops.Numel(out))
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
		return []tensor.Tensor{tensor.Take(x, out, idx), ops.I64Tensor(out, pos)}, nil
	}
	ops.HostOps["GatherND"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x, ind := in[0], in[1]
		if err := checkGatherND(n, x.Dims(), ind.Dims()); err != nil {
			return nil, err
		}
		bd := int(n.AttrInt("batch_dims", 0))
		q := len(ind.Dims())
		last := int(ind.Dims()[q-1])
		out := append(append([]int64{}, ind.Dims()[:q-1]...), x.Dims()[bd+last:]...)
		slice := ops.Numel(x.Dims()[bd+last:])
		st := ops.StridesOf(x.Dims())
		iv := tensor.Int64s(ind)
		batch := ops.Numel(x.Dims()[:bd])
		perBatch := ops.Numel(ind.Dims()[bd : q-1])
		bstride := ops.Numel(x.Dims()[bd:])
		idx := make([]int, 0, ops.Numel(out))
		for b := 0; b < batch; b++ {
			for t := 0; t < perBatch; t++ {
				tup := iv[(b*perBatch+t)*last : (b*perBatch+t+1)*last]
				base := b * bstride
				for k, e := range tup {
					d := x.Dims()[bd+k]
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
		return []tensor.Tensor{tensor.Take(x, out, idx)}, nil
	}
	scatter := func(elements bool) ops.OpFunc {
		return func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
			x, ind, upd := in[0], in[1], in[2]
			if n.AttrString("reduction", "none") != "none" {
				return nil, fmt.Errorf("reduction %q is not supported", n.AttrString("reduction", ""))
			}
			if err := checkScatter(n, x, ind, upd, elements); err != nil {
				return nil, err
			}
			joined, err := ops.ConcatFlat(x, upd)
			if err != nil {
				return nil, err
			}
			idx := ops.IdentityIndex(x.Len())
			st := ops.StridesOf(x.Dims())
			iv := tensor.Int64s(ind)
			if elements {
				ax, err := ops.NormAxis(n.AttrInt("axis", 0), len(x.Dims()))
				if err != nil {
					return nil, err
				}
				// checkScatter checked every index and the shapes.
				ops.ForEachIndex(ind.Dims(), func(f int, pos []int) {
					o := 0
					for k, p := range pos {
						if k == ax {
							e := iv[f]
							if e < 0 {
								e += x.Dims()[ax]
							}
							p = int(e)
						}
						o += p * st[k]
					}
					idx[o] = x.Len() + f
				})
			} else {
				last := int(ind.Dims()[len(ind.Dims())-1])
				slice := ops.Numel(x.Dims()[last:])
				for t := 0; t < len(iv)/max(last, 1); t++ {
					base := 0
					for k, e := range iv[t*last : (t+1)*last] {
						if e < 0 {
							e += x.Dims()[k]
						}
						base += int(e) * st[k]
					}
					for s := 0; s < slice; s++ {
						idx[base+s] = x.Len() + t*slice + s
					}
				}
			}
			return []tensor.Tensor{tensor.Take(joined, x.Dims(), idx)}, nil
		}
	}
	ops.HostOps["ScatterElements"] = scatter(true)
	ops.HostOps["Scatter"] = scatter(true)
	ops.HostOps["ScatterND"] = scatter(false)
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

// checkGatherND checks GatherND's data (shape xd) and indices (shape id) against its batch_dims
// before any index is used: ranks of at least 1, batch_dims within both ranks, the batch axes
// of one size, and index tuples no longer than the data's axes after the batch axes.
func checkGatherND(n *graph.Node, xd, id []int64) error {
	if len(xd) == 0 || len(id) == 0 {
		return fmt.Errorf("the data (input 0, shape %v) and the indices (input 1, shape %v) must have rank >= 1", xd, id)
	}
	bd := n.AttrInt("batch_dims", 0)
	if bd < 0 || bd >= int64(min(len(xd), len(id))) {
		return fmt.Errorf("batch_dims %d out of range for the data's rank %d and the indices' rank %d: want [0, %d)", bd, len(xd), len(id), min(len(xd), len(id)))
	}
	for i := range bd {
		if xd[i] != id[i] {
			return fmt.Errorf("batch axis %d is %d in the data (input 0, shape %v) and %d in the indices (input 1, shape %v)", i, xd[i], xd, id[i], id)
		}
	}
	if last := id[len(id)-1]; last > int64(len(xd))-bd {
		return fmt.Errorf("the indices (input 1, shape %v) hold tuples of %d indices, more than the %d axes of the data (shape %v) after batch_dims %d", id, last, int64(len(xd))-bd, xd, bd)
	}
	return nil
}

// checkScatter checks a scatter's indices and updates against its data x before any index is
// used, naming the input and the value at fault. ScatterND (elements false): index tuples of
// at most x's rank, every index within its axis of x (a negative one counting from the end),
// updates of the shape the tuples select. ScatterElements: indices and updates of one shape of
// x's rank, within x along the other axes, every index within x's scatter axis.
func checkScatter(n *graph.Node, x, ind, upd tensor.Tensor, elements bool) error {
	xd, id := x.Dims(), ind.Dims()
	iv := tensor.Int64s(ind)
	inRange := func(e, d int64) bool { return e >= -d && e < d }
	if elements {
		if len(xd) == 0 {
			return fmt.Errorf("the data (input 0) must have rank >= 1, got a scalar")
		}
		ax, err := ops.NormAxis(n.AttrInt("axis", 0), len(xd))
		if err != nil {
			return err
		}
		if len(id) != len(xd) || !ops.SameShape(id, upd.Dims()) {
			return fmt.Errorf("the indices (input 1, shape %v) and the updates (input 2, shape %v) must have one shape of the data's rank %d", id, upd.Dims(), len(xd))
		}
		for k := range xd {
			if k != ax && id[k] > xd[k] {
				return fmt.Errorf("the indices (input 1, shape %v) exceed the data (input 0, shape %v) along axis %d", id, xd, k)
			}
		}
		for f, e := range iv {
			if !inRange(e, xd[ax]) {
				return fmt.Errorf("the indices (input 1) hold index %d (element %d), out of range for axis %d of the data (shape %v): want [%d, %d)", e, f, ax, xd, -xd[ax], xd[ax])
			}
		}
		return nil
	}
	if len(id) == 0 {
		return fmt.Errorf("the indices (input 1) must have rank >= 1, got a scalar")
	}
	last := id[len(id)-1]
	if last > int64(len(xd)) {
		return fmt.Errorf("the indices (input 1, shape %v) hold tuples of %d indices, more than the data's rank %d", id, last, len(xd))
	}
	want := append(append([]int64{}, id[:len(id)-1]...), xd[last:]...)
	if !ops.SameShape(upd.Dims(), want) {
		return fmt.Errorf("the updates (input 2) have the shape %v; the indices (shape %v) into the data (shape %v) select %v", upd.Dims(), id, xd, want)
	}
	for f, e := range iv {
		k := f % int(last)
		if !inRange(e, xd[k]) {
			return fmt.Errorf("the indices (input 1) hold index %d (tuple %d, position %d), out of range for axis %d of the data (shape %v): want [%d, %d)", e, f/int(last), k, k, xd, -xd[k], xd[k])
		}
	}
	return nil
}
