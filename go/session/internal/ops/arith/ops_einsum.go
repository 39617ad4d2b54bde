package arith

import (
	"fmt"
	"sort"
	"strings"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host function for Einsum: the equation's letters index every operand axis (an ellipsis
// stands for the broadcast leading axes); the output sums the products over the letters it
// omits. Implicit mode ("ab,bc") outputs the letters used once, in alphabetical order,
// after the ellipsis axes.

// OpEinsum is Einsum on the host: the product of its operands summed over the indices the
// equation leaves out of the output.
func OpEinsum(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	eq := strings.ReplaceAll(n.AttrString("equation", ""), " ", "")
	lhs, rhs, explicit := strings.Cut(eq, "->")
	terms := strings.Split(lhs, ",")
	if len(terms) != len(in) {
		return nil, fmt.Errorf("equation %q has %d operands, the node %d", eq, len(terms), len(in))
	}
	// The ellipsis becomes the reserved letters '0'.. (one per broadcast axis).
	ellRank := 0
	for i, t := range terms {
		if strings.Count(t, "...") > 1 {
			return nil, fmt.Errorf("operand %d has more than one ellipsis", i)
		}
		if strings.Contains(t, "...") {
			ellRank = max(ellRank, len(in[i].Dims())-(len(t)-3))
		}
	}
	ell := ""
	for k := range ellRank {
		ell += string(rune('0' + k))
	}
	sizes := map[rune]int64{}
	labels := make([][]rune, len(in))
	for i, t := range terms {
		if strings.Contains(t, "...") {
			own := len(in[i].Dims()) - (len(t) - 3)
			if own < 0 {
				return nil, fmt.Errorf("operand %d (%q) has rank %d", i, t, len(in[i].Dims()))
			}
			t = strings.Replace(t, "...", ell[ellRank-own:], 1)
		}
		labels[i] = []rune(t)
		if len(labels[i]) != len(in[i].Dims()) {
			return nil, fmt.Errorf("operand %d: %q names %d axes, its rank is %d", i, terms[i], len(labels[i]), len(in[i].Dims()))
		}
		for k, l := range labels[i] {
			d := in[i].Dims()[k]
			if old, ok := sizes[l]; ok && old != d {
				switch {
				case old == 1:
					sizes[l] = d
				case d == 1 && l >= '0' && l <= '9':
				default:
					return nil, fmt.Errorf("label %q has sizes %d and %d", string(l), old, d)
				}
			} else if !ok {
				sizes[l] = d
			}
		}
	}
	var outLabels []rune
	if explicit {
		rhs = strings.Replace(rhs, "...", ell, 1)
		outLabels = []rune(rhs)
	} else {
		count := map[rune]int{}
		for _, ls := range labels {
			for _, l := range ls {
				count[l]++
			}
		}
		outLabels = []rune(ell)
		var once []rune
		for l, c := range count {
			if c == 1 && !(l >= '0' && l <= '9') {
				once = append(once, l)
			}
		}
		sort.Slice(once, func(a, b int) bool { return once[a] < once[b] })
		outLabels = append(outLabels, once...)
	}
	all := append([]rune{}, outLabels...)
	seen := map[rune]bool{}
	for _, l := range outLabels {
		if seen[l] {
			return nil, fmt.Errorf("output label %q repeated", string(l))
		}
		if _, ok := sizes[l]; !ok {
			return nil, fmt.Errorf("output label %q is not in any operand", string(l))
		}
		seen[l] = true
	}
	for _, ls := range labels {
		for _, l := range ls {
			if !seen[l] {
				seen[l] = true
				all = append(all, l)
			}
		}
	}
	pos := map[rune]int{}
	loop := make([]int64, len(all))
	for i, l := range all {
		pos[l], loop[i] = i, sizes[l]
	}
	// For each operand, the stride of every loop axis into its elements (summed over
	// repeated labels, which walks a diagonal; 0 where broadcast).
	strides := make([][]int, len(in))
	vals := make([][]float64, len(in))
	for i, t := range in {
		strides[i] = make([]int, len(all))
		st := ops.StridesOf(t.Dims())
		for k, l := range labels[i] {
			if t.Dims()[k] != 1 || sizes[l] == 1 {
				strides[i][pos[l]] += st[k]
			}
		}
		vals[i] = tensor.Float64s(t)
	}
	outShape := loop[:len(outLabels)]
	inner := ops.Numel(loop[len(outLabels):])
	if err := ops.ReserveShape(rc, "the output", in[0].DType(), outShape, 8); err != nil {
		return nil, err
	}
	// The work is one step per point of all the labels' space: bounded like a tensor of it.
	if err := ops.CheckShape(rc, "the iteration space of all labels", loop); err != nil {
		return nil, err
	}
	out := make([]float64, ops.Numel(outShape))
	ops.ForEachIndex(loop, func(f int, p []int) {
		prod := 1.0
		for i := range in {
			o := 0
			for k, q := range p {
				o += q * strides[i][k]
			}
			prod *= vals[i][o]
		}
		out[f/max(inner, 1)] += prod
	})
	return ops.FloatResult(in[0].DType(), append([]int64{}, outShape...), out)
}

func init() {
	ops.HostOps["Einsum"] = OpEinsum
}
