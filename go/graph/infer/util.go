package infer

import (
	"fmt"

	"github.com/loomrt/loom/go/graph"
)

// broadcastShapes applies ONNX multidirectional (numpy) broadcasting.
func broadcastShapes(shapes ...graph.Shape) (graph.Shape, error) {
	rank := 0
	for _, s := range shapes {
		if len(s) > rank {
			rank = len(s)
		}
	}
	out := make(graph.Shape, rank)
	for i := 0; i < rank; i++ {
		var known int64 = -1
		var syms []graph.Dim
		unknown := false
		for _, s := range shapes {
			j := i - (rank - len(s))
			if j < 0 {
				continue
			}
			d := s[j]
			switch {
			case d.Known() && d.Value == 1:
			case d.Known():
				if known >= 0 && known != d.Value {
					return nil, fmt.Errorf("shapes %v cannot be broadcast: dimension %d is %d and %d", shapes, i, known, d.Value)
				}
				known = d.Value
			case d.Param != "":
				syms = append(syms, d)
			default:
				unknown = true
			}
		}
		switch {
		case known >= 0:
			out[i] = graph.DimOf(known)
		case len(syms) > 0 && !unknown && allSame(syms):
			out[i] = syms[0]
		case len(syms) == 0 && !unknown:
			out[i] = graph.DimOf(1)
		default:
			out[i] = graph.UnknownDim()
		}
	}
	return out, nil
}

func allSame(ds []graph.Dim) bool {
	for _, d := range ds[1:] {
		if !d.Same(ds[0]) {
			return false
		}
	}
	return true
}

// mergeShapeDims combines two shapes known to describe the same value (If branches, sequence
// elements): equal dims stay, different ones become unknown; different ranks are unranked.
func unifyTypes(a, b graph.Type) graph.Type {
	if a.Kind == graph.KindUnknown {
		return b.Clone()
	}
	if b.Kind == graph.KindUnknown {
		return a.Clone()
	}
	if a.Kind != b.Kind {
		return graph.Type{}
	}
	out := a.Clone()
	switch a.Kind {
	case graph.KindTensor, graph.KindSparseTensor:
		if out.Elem == graph.Undefined {
			out.Elem = b.Elem
		}
		if !a.Ranked || !b.Ranked || len(a.Shape) != len(b.Shape) {
			out.Ranked, out.Shape = false, nil
			return out
		}
		for i := range out.Shape {
			if !a.Shape[i].Same(b.Shape[i]) {
				out.Shape[i] = graph.UnknownDim()
			}
		}
	case graph.KindSequence, graph.KindOptional, graph.KindMap:
		if a.Inner != nil && b.Inner != nil {
			in := unifyTypes(*a.Inner, *b.Inner)
			out.Inner = &in
		} else if a.Inner == nil && b.Inner != nil {
			in := b.Inner.Clone()
			out.Inner = &in
		}
	}
	return out
}

func unknownDims(n int) graph.Shape {
	s := make(graph.Shape, n)
	for i := range s {
		s[i] = graph.UnknownDim()
	}
	return s
}

func dimsProduct(s graph.Shape) graph.Dim {
	p := graph.DimOf(1)
	for _, d := range s {
		p = dimMul(p, d)
	}
	return p
}

// convOutDim computes one spatial output size of a convolution or pooling window.
func convOutDim(in graph.Dim, kernel, stride, dilation, padBegin, padEnd int64, autoPad string, ceilMode bool) graph.Dim {
	if stride <= 0 || dilation <= 0 || kernel <= 0 {
		return graph.UnknownDim()
	}
	eff := (kernel-1)*dilation + 1
	switch autoPad {
	case "SAME_UPPER", "SAME_LOWER":
		return dimDiv(in, stride, true)
	case "VALID":
		if in.Known() {
			if in.Value < eff {
				return graph.UnknownDim()
			}
			return graph.DimOf((in.Value-eff)/stride + 1)
		}
		return dimAddConst(dimDiv(dimAddConst(in, -eff), stride, false), 1)
	}
	if in.Known() {
		span := in.Value + padBegin + padEnd - eff
		if span < 0 {
			return graph.UnknownDim()
		}
		out := span/stride + 1
		if ceilMode {
			out = (span+stride-1)/stride + 1
			// A last window starting in the end padding is dropped.
			if (out-1)*stride >= in.Value+padBegin {
				out--
			}
		}
		return graph.DimOf(out)
	}
	padded := dimAddConst(in, padBegin+padEnd-eff)
	return dimAddConst(dimDiv(padded, stride, ceilMode), 1)
}
