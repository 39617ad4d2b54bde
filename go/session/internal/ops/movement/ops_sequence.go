package movement

import (
	"fmt"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for the ONNX sequence and optional operators. Sequences and optionals are
// Tensors with a composite box (see value.go); the tensors inside are shared, never copied,
// since no operator modifies its inputs.

func init() {
	ops.HostOps["SequenceEmpty"] = opSequenceEmpty
	ops.HostOps["SequenceConstruct"] = opSequenceConstruct
	ops.HostOps["SequenceInsert"] = opSequenceInsert
	ops.HostOps["SequenceAt"] = opSequenceAt
	ops.HostOps["SequenceErase"] = opSequenceErase
	ops.HostOps["SequenceLength"] = opSequenceLength
	ops.HostOps["SplitToSequence"] = opSplitToSequence
	ops.HostOps["ConcatFromSequence"] = opConcatFromSequence
	ops.HostOps["Optional"] = opOptional
	ops.HostOps["OptionalHasElement"] = OpOptionalHasElement
	ops.HostOps["OptionalGetElement"] = OpOptionalGetElement
	ops.HostOps["SequenceMap"] = func(ops.OpRun, *graph.Node, []tensor.Tensor) ([]tensor.Tensor, error) {
		return nil, fmt.Errorf("SequenceMap runs through controlFlow")
	}
}

// SeqInput returns input i, which must be a sequence.
func SeqInput(in []tensor.Tensor, i int, what string) (tensor.Tensor, error) {
	t := ops.Optional(in, i)
	if !tensor.IsSeq(t) {
		if !t.IsValid() {
			return tensor.Tensor{}, fmt.Errorf("the %s input is missing", what)
		}
		return tensor.Tensor{}, fmt.Errorf("the %s input is %s (%s), not a sequence", what, tensor.Article(t), t)
	}
	return t, nil
}

// tensorInput returns input i, which must be a tensor (not a sequence or an optional).
func tensorInput(in []tensor.Tensor, i int, what string) (tensor.Tensor, error) {
	t := ops.Optional(in, i)
	if !t.IsValid() {
		return tensor.Tensor{}, fmt.Errorf("the %s input is missing", what)
	}
	if tensor.Box(t) != nil {
		return tensor.Tensor{}, fmt.Errorf("the %s input is %s (%s), not a tensor", what, tensor.Article(t), t)
	}
	return t, nil
}

// seqPosition reads the position input i (one int32 or int64 element) and checks it against
// the accepted range [-n, n-1], or [-n, n] when end is allowed (insertion); negative
// positions count from the back.
func seqPosition(in []tensor.Tensor, i, n int, end bool) (int, error) {
	p, err := tensorInput(in, i, "position")
	if err != nil {
		return 0, err
	}
	if (p.DType() != graph.Int64 && p.DType() != graph.Int32) || p.Len() != 1 || p.Rank() > 1 {
		return 0, fmt.Errorf("position must be one int32 or int64 element, got %s", p)
	}
	v := tensor.Int64s(p)[0]
	hi := int64(n) - 1
	if end {
		hi = int64(n)
	}
	if v < -int64(n) || v > hi {
		return 0, fmt.Errorf("position %d out of range [%d, %d] for a sequence of %d", v, -n, hi, n)
	}
	if v < 0 {
		v += int64(n)
	}
	return int(v), nil
}

func opSequenceEmpty(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	dt := tensor.DType(n.AttrInt("dtype", int64(graph.Float)))
	if _, err := tensor.MakeSlice(dt, 0); err != nil {
		return nil, fmt.Errorf("dtype: %w", err)
	}
	return []tensor.Tensor{tensor.SeqOf(dt, nil)}, nil
}

func opSequenceConstruct(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("SequenceConstruct needs at least one input")
	}
	elems := make([]tensor.Tensor, len(in))
	for i := range in {
		t, err := tensorInput(in, i, fmt.Sprintf("#%d", i))
		if err != nil {
			return nil, err
		}
		if t.DType() != in[0].DType() {
			return nil, fmt.Errorf("input %d has element type %s, input 0 %s", i, t.DType(), in[0].DType())
		}
		elems[i] = t
	}
	return []tensor.Tensor{tensor.SeqOf(in[0].DType(), elems)}, nil
}

func opSequenceInsert(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	s, err := SeqInput(in, 0, "sequence")
	if err != nil {
		return nil, err
	}
	t, err := tensorInput(in, 1, "tensor")
	if err != nil {
		return nil, err
	}
	if t.DType() != s.DType() {
		return nil, fmt.Errorf("cannot insert a tensor of %s into a sequence of %s", t.DType(), s.DType())
	}
	old := tensor.SeqElems(s)
	pos := len(old)
	if ops.Optional(in, 2).IsValid() {
		if pos, err = seqPosition(in, 2, len(old), true); err != nil {
			return nil, err
		}
	}
	elems := make([]tensor.Tensor, 0, len(old)+1)
	elems = append(append(append(elems, old[:pos]...), t), old[pos:]...)
	return []tensor.Tensor{tensor.SeqOf(s.DType(), elems)}, nil
}

func opSequenceAt(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	s, err := SeqInput(in, 0, "sequence")
	if err != nil {
		return nil, err
	}
	pos, err := seqPosition(in, 1, len(tensor.SeqElems(s)), false)
	if err != nil {
		return nil, err
	}
	return []tensor.Tensor{tensor.SeqElems(s)[pos]}, nil
}

func opSequenceErase(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	s, err := SeqInput(in, 0, "sequence")
	if err != nil {
		return nil, err
	}
	old := tensor.SeqElems(s)
	if len(old) == 0 {
		return nil, fmt.Errorf("cannot erase from an empty sequence")
	}
	pos := len(old) - 1
	if ops.Optional(in, 1).IsValid() {
		if pos, err = seqPosition(in, 1, len(old), false); err != nil {
			return nil, err
		}
	}
	elems := append(append(make([]tensor.Tensor, 0, len(old)-1), old[:pos]...), old[pos+1:]...)
	return []tensor.Tensor{tensor.SeqOf(s.DType(), elems)}, nil
}

func opSequenceLength(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	s, err := SeqInput(in, 0, "sequence")
	if err != nil {
		return nil, err
	}
	return []tensor.Tensor{ops.I64Tensor(nil, []int64{int64(len(tensor.SeqElems(s)))})}, nil
}

// opSplitToSequence splits along axis: into pieces of size 1 without split (the axis dropped
// when keepdims is 0), into pieces of a scalar split's size (the last one shorter when the size
// does not divide the axis), or into the sizes a 1-D split lists.
func opSplitToSequence(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	if x.Rank() == 0 {
		return nil, fmt.Errorf("cannot split a scalar")
	}
	ax, err := ops.NormAxis(n.AttrInt("axis", 0), x.Rank())
	if err != nil {
		return nil, err
	}
	dim := x.Dims()[ax]
	split := ops.Optional(in, 1)
	var sizes []int64
	switch {
	case !split.IsValid():
		sizes = make([]int64, dim)
		for i := range sizes {
			sizes[i] = 1
		}
	case !split.DType().IsInteger():
		return nil, fmt.Errorf("split must be int32 or int64, got %s", split)
	case split.Rank() == 0:
		size := tensor.Int64s(split)[0]
		if size <= 0 {
			return nil, fmt.Errorf("split size %d must be positive", size)
		}
		for left := dim; left > 0; left -= size {
			sizes = append(sizes, min(size, left))
		}
	case split.Rank() == 1:
		sizes = tensor.Int64s(split)
		total := int64(0)
		for _, s := range sizes {
			if s < 0 {
				return nil, fmt.Errorf("split %v has a negative size", sizes)
			}
			total += s
		}
		if total != dim {
			return nil, fmt.Errorf("split %v does not add up to %d", sizes, dim)
		}
	default:
		return nil, fmt.Errorf("split must be a scalar or 1-D, got %s", split)
	}
	squeeze := !split.IsValid() && n.AttrInt("keepdims", 1) == 0
	elems := make([]tensor.Tensor, len(sizes))
	start := int64(0)
	for i, s := range sizes {
		e := SliceAxis(x, ax, start, s)
		if squeeze {
			e = tensor.Reshaped(e, append(append([]int64{}, x.Dims()[:ax]...), x.Dims()[ax+1:]...))
		}
		elems[i] = e
		start += s
	}
	return []tensor.Tensor{tensor.SeqOf(x.DType(), elems)}, nil
}

// opConcatFromSequence concatenates a sequence's tensors along axis, or stacks them along a new
// axis when new_axis is 1.
func opConcatFromSequence(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	s, err := SeqInput(in, 0, "sequence")
	if err != nil {
		return nil, err
	}
	if n.Attr("axis") == nil {
		return nil, fmt.Errorf("the axis attribute is required")
	}
	elems := tensor.SeqElems(s)
	if len(elems) == 0 {
		return nil, fmt.Errorf("cannot concatenate an empty sequence")
	}
	r := elems[0].Rank()
	stack := n.AttrInt("new_axis", 0) == 1
	var ax int
	if stack {
		ax, err = ops.NormAxis(n.AttrInt("axis", 0), r+1)
	} else if r == 0 {
		err = fmt.Errorf("cannot concatenate scalars without new_axis")
	} else {
		ax, err = ops.NormAxis(n.AttrInt("axis", 0), r)
	}
	if err != nil {
		return nil, err
	}
	parts := make([]tensor.Tensor, len(elems))
	for i, e := range elems {
		if e.Rank() != r {
			return nil, fmt.Errorf("element %d has rank %d, element 0 rank %d", i, e.Rank(), r)
		}
		for d := range r {
			if d != ax && e.Dims()[d] != elems[0].Dims()[d] {
				return nil, fmt.Errorf("element %d has shape %v, element 0 %v: only axis %d may differ", i, e.Dims(), elems[0].Dims(), ax)
			}
		}
		if stack {
			shape := append(append(append([]int64{}, e.Dims()[:ax]...), 1), e.Dims()[ax:]...)
			e = tensor.Reshaped(e, shape)
		}
		parts[i] = e
	}
	concat := graph.NewNode(n.Name, "Concat", nil, nil, graph.IntAttr("axis", int64(ax)))
	return ops.HostOps["Concat"](rc, concat, parts)
}

// innermostElem is the element type of the tensors a type holds (Undefined when unknown).
func innermostElem(t *graph.Type) tensor.DType {
	for t != nil && t.Kind != graph.KindTensor {
		t = t.Inner
	}
	if t == nil {
		return graph.Undefined
	}
	return t.Elem
}

func opOptional(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	if v := ops.Optional(in, 0); v.IsValid() {
		if tensor.IsOpt(v) {
			return nil, fmt.Errorf("an optional of an optional is not supported")
		}
		return []tensor.Tensor{tensor.OptOf(v.DType(), &v)}, nil
	}
	a := n.Attr("type")
	if a == nil || a.TypeProto == nil {
		return nil, fmt.Errorf("an Optional without input needs the type attribute")
	}
	return []tensor.Tensor{tensor.OptOf(innermostElem(a.TypeProto), nil)}, nil
}

// OpOptionalHasElement is true for an optional holding a value and for a tensor or sequence
// (opset 18 accepts those), false for none and for an omitted input.
func OpOptionalHasElement(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	v := ops.Optional(in, 0)
	has := v.IsValid() && (!tensor.IsOpt(v) || len(tensor.SeqElems(v)) > 0)
	return []tensor.Tensor{tensor.Raw(graph.Bool, nil, []bool{has})}, nil
}

// OpOptionalGetElement returns what an optional holds, and a tensor or sequence as it is.
func OpOptionalGetElement(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	v := ops.Optional(in, 0)
	switch {
	case !v.IsValid():
		return nil, fmt.Errorf("the input is missing")
	case !tensor.IsOpt(v):
		return []tensor.Tensor{v}, nil
	case len(tensor.SeqElems(v)) == 0:
		return nil, fmt.Errorf("the optional is empty")
	}
	return []tensor.Tensor{tensor.SeqElems(v)[0]}, nil
}
