package movement

import (
	"fmt"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// TensorScatter (opset 24) and CenterCropPad (opset 18): data movement of any element type, by
// an index map over the input joined with what it takes in (the update, a zero).

func init() {
	ops.HostOps["TensorScatter"] = opTensorScatter
	ops.HostOps["CenterCropPad"] = opCenterCropPad
}

// opTensorScatter is the KV-cache update: the past cache with, for every index of the axes
// before the sequence axis (the first of them the batch b), the update's sequence_length rows
// written along that axis from write_indices[b] (0 without write_indices) on; in mode
// "circular" the row index wraps around max_sequence_length (the cache's sequence axis), in
// mode "linear" the rows must fit in the cache.
func opTensorScatter(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	past, upd := in[0], in[1]
	pd, ud := past.Dims(), upd.Dims()
	r := len(pd)
	if r < 2 {
		return nil, fmt.Errorf("the past_cache (input 0, shape %v) must have rank >= 2: a batch axis and a sequence axis", pd)
	}
	if past.DType() != upd.DType() {
		return nil, fmt.Errorf("the past_cache (input 0) is %s and the update (input 1) %s: they must have one element type", past.DType(), upd.DType())
	}
	ax, err := ops.NormAxis(n.AttrInt("axis", -2), r)
	if err != nil {
		return nil, fmt.Errorf("axis: %v", err)
	}
	if ax == 0 {
		return nil, fmt.Errorf("axis %d is the batch axis (0): the sequence axis must be another", n.AttrInt("axis", -2))
	}
	mode := n.AttrString("mode", "linear")
	if mode != "linear" && mode != "circular" {
		return nil, fmt.Errorf("mode %q: want linear or circular", mode)
	}
	if len(ud) != r {
		return nil, fmt.Errorf("the update (input 1, shape %v) must have the past_cache's rank %d (shape %v)", ud, r, pd)
	}
	for k := range pd {
		if k != ax && ud[k] != pd[k] {
			return nil, fmt.Errorf("the update (input 1, shape %v) differs from the past_cache (input 0, shape %v) on axis %d: only the sequence axis %d may differ", ud, pd, k, ax)
		}
	}
	maxSeq, seq := pd[ax], ud[ax]
	if seq > maxSeq {
		return nil, fmt.Errorf("the update's sequence length %d (input 1, shape %v) exceeds the past_cache's %d (input 0, shape %v) on axis %d", seq, ud, maxSeq, pd, ax)
	}
	batch := pd[0]
	var wi []int64 // nil: every write index is 0
	if w := ops.Optional(in, 2); w.IsValid() {
		if len(w.Dims()) != 1 || w.Dims()[0] != batch {
			return nil, fmt.Errorf("the write_indices (input 2, shape %v) must be (batch_size) = (%d)", w.Dims(), batch)
		}
		wi = append([]int64(nil), tensor.Int64s(w)...) // a copy: the circular mode wraps them
	}
	for b, e := range wi {
		if mode == "linear" && (e < 0 || e > maxSeq-seq) {
			return nil, fmt.Errorf("write_indices[%d] = %d: in mode linear the %d update rows must fit in the cache's %d from there: want [0, %d]", b, e, seq, maxSeq, maxSeq-seq)
		}
		if mode == "circular" && maxSeq > 0 {
			if wi[b] = e % maxSeq; wi[b] < 0 {
				wi[b] += maxSeq
			}
		}
	}
	if err := ops.ReserveShape(rc, "the output", past.DType(), pd, intSize); err != nil {
		return nil, err
	}
	joined, err := ops.ConcatFlat(past, upd)
	if err != nil {
		return nil, err
	}
	idx := ops.IdentityIndex(past.Len())
	if upd.Len() > 0 {
		// Every axis is positive (the update's are, and seq <= maxSeq), their products within
		// the past's element count.
		inner, outer := ops.Numel(pd[ax+1:]), ops.Numel(pd[:ax])
		perBatch := outer / int(batch)
		base := past.Len()
		for o := 0; o < outer; o++ {
			w := int64(0)
			if wi != nil {
				w = wi[o/perBatch]
			}
			for s := int64(0); s < seq; s++ {
				row := w + s
				if row >= maxSeq {
					row -= maxSeq // circular only (w < maxSeq, s < maxSeq): linear rows fit
				}
				dst := (o*int(maxSeq) + int(row)) * inner
				src := base + (o*int(seq)+int(s))*inner
				for j := 0; j < inner; j++ {
					idx[dst+j] = src + j
				}
			}
		}
	}
	return []tensor.Tensor{tensor.Take(joined, pd, idx)}, nil
}

// opCenterCropPad crops or pads the given axes (all without the axes attribute) to the sizes
// of the shape input, keeping the input centered: a crop drops floor(d/2) elements at the
// start and the rest at the end, a pad adds floor(d/2) zeros at the start and the rest at the
// end, d the size difference.
func opCenterCropPad(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x, sh := in[0], in[1]
	xd := x.Dims()
	r := len(xd)
	if len(sh.Dims()) != 1 {
		return nil, fmt.Errorf("the shape (input 1, shape %v) must be 1-D", sh.Dims())
	}
	sizes := tensor.Int64s(sh)
	var axes []int
	if a := n.AttrInts("axes"); a != nil {
		seen := make([]bool, r)
		for _, v := range a {
			ax, err := ops.NormAxis(v, r)
			if err != nil {
				return nil, fmt.Errorf("axes %v: %v", a, err)
			}
			if seen[ax] {
				return nil, fmt.Errorf("axes %v name axis %d twice", a, ax)
			}
			seen[ax] = true
			axes = append(axes, ax)
		}
	} else {
		for i := range r {
			axes = append(axes, i)
		}
	}
	if len(sizes) != len(axes) {
		return nil, fmt.Errorf("the shape (input 1) %v holds %d sizes for %d axes (of the input's shape %v): want one per axis", sizes, len(sizes), len(axes), xd)
	}
	out := append([]int64{}, xd...)
	shift := make([]int64, r) // output index minus input index, per axis
	for i, ax := range axes {
		s := sizes[i]
		if s < 0 {
			return nil, fmt.Errorf("the shape (input 1) %v holds a negative size for axis %d", sizes, ax)
		}
		out[ax] = s
		if s > xd[ax] {
			shift[ax] = (s - xd[ax]) / 2
		} else {
			shift[ax] = -((xd[ax] - s) / 2)
		}
	}
	if err := ops.ReserveShape(rc, "the output", x.DType(), out, intSize); err != nil {
		return nil, err
	}
	zero, err := tensor.Zeros(x.DType(), nil)
	if err != nil {
		return nil, err
	}
	joined, err := ops.ConcatFlat(x, zero)
	if err != nil {
		return nil, err
	}
	st := ops.StridesOf(xd)
	idx := make([]int, ops.Numel(out))
	ops.ForEachIndex(out, func(f int, pos []int) {
		o := 0
		for k, p := range pos {
			q := int64(p) - shift[k]
			if q < 0 || q >= xd[k] {
				o = x.Len() // the zero
				break
			}
			o += int(q) * st[k]
		}
		idx[f] = o
	})
	return []tensor.Tensor{tensor.Take(joined, out, idx)}, nil
}
