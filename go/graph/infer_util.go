package graph

import "fmt"

// normAxis maps a possibly negative axis into [0, rank).
func normAxis(axis int64, rank int) (int, error) {
	if axis < -int64(rank) || axis >= int64(rank) {
		return 0, fmt.Errorf("axis %d out of range for rank %d", axis, rank)
	}
	if axis < 0 {
		axis += int64(rank)
	}
	return int(axis), nil
}

// broadcastShapes applies ONNX multidirectional (numpy) broadcasting.
func broadcastShapes(shapes ...Shape) (Shape, error) {
	rank := 0
	for _, s := range shapes {
		if len(s) > rank {
			rank = len(s)
		}
	}
	out := make(Shape, rank)
	for i := 0; i < rank; i++ {
		var known int64 = -1
		var syms []Dim
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
			out[i] = DimOf(known)
		case len(syms) > 0 && !unknown && allSame(syms):
			out[i] = syms[0]
		case len(syms) == 0 && !unknown:
			out[i] = DimOf(1)
		default:
			out[i] = UnknownDim()
		}
	}
	return out, nil
}

func allSame(ds []Dim) bool {
	for _, d := range ds[1:] {
		if !d.Same(ds[0]) {
			return false
		}
	}
	return true
}

// mergeShapeDims combines two shapes known to describe the same value (If branches, sequence
// elements): equal dims stay, different ones become unknown; different ranks are unranked.
func unifyTypes(a, b Type) Type {
	if a.Kind == KindUnknown {
		return b.Clone()
	}
	if b.Kind == KindUnknown {
		return a.Clone()
	}
	if a.Kind != b.Kind {
		return Type{}
	}
	out := a.Clone()
	switch a.Kind {
	case KindTensor, KindSparseTensor:
		if out.Elem == Undefined {
			out.Elem = b.Elem
		}
		if !a.Ranked || !b.Ranked || len(a.Shape) != len(b.Shape) {
			out.Ranked, out.Shape = false, nil
			return out
		}
		for i := range out.Shape {
			if !a.Shape[i].Same(b.Shape[i]) {
				out.Shape[i] = UnknownDim()
			}
		}
	case KindSequence, KindOptional, KindMap:
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

func unknownDims(n int) Shape {
	s := make(Shape, n)
	for i := range s {
		s[i] = UnknownDim()
	}
	return s
}

func dimsProduct(s Shape) Dim {
	p := DimOf(1)
	for _, d := range s {
		p = dimMul(p, d)
	}
	return p
}

// convOutDim computes one spatial output size of a convolution or pooling window.
func convOutDim(in Dim, kernel, stride, dilation, padBegin, padEnd int64, autoPad string, ceilMode bool) Dim {
	if stride <= 0 || dilation <= 0 || kernel <= 0 {
		return UnknownDim()
	}
	eff := (kernel-1)*dilation + 1
	switch autoPad {
	case "SAME_UPPER", "SAME_LOWER":
		return dimDiv(in, stride, true)
	case "VALID":
		if in.Known() {
			if in.Value < eff {
				return UnknownDim()
			}
			return DimOf((in.Value-eff)/stride + 1)
		}
		return dimAddConst(dimDiv(dimAddConst(in, -eff), stride, false), 1)
	}
	if in.Known() {
		span := in.Value + padBegin + padEnd - eff
		if span < 0 {
			return UnknownDim()
		}
		out := span/stride + 1
		if ceilMode {
			out = (span+stride-1)/stride + 1
			// A last window starting in the end padding is dropped.
			if (out-1)*stride >= in.Value+padBegin {
				out--
			}
		}
		return DimOf(out)
	}
	padded := dimAddConst(in, padBegin+padEnd-eff)
	return dimAddConst(dimDiv(padded, stride, ceilMode), 1)
}
