package session

import (
	"fmt"

	"github.com/loomrt/loom/go/graph"
)

// Host functions for the ONNX sequence and optional operators. Sequences and optionals are
// Tensors with a composite box (see value.go); the tensors inside are shared, never copied,
// since no operator modifies its inputs.

func init() {
	hostOps["SequenceEmpty"] = opSequenceEmpty
	hostOps["SequenceConstruct"] = opSequenceConstruct
	hostOps["SequenceInsert"] = opSequenceInsert
	hostOps["SequenceAt"] = opSequenceAt
	hostOps["SequenceErase"] = opSequenceErase
	hostOps["SequenceLength"] = opSequenceLength
	hostOps["SplitToSequence"] = opSplitToSequence
	hostOps["ConcatFromSequence"] = opConcatFromSequence
	hostOps["Optional"] = opOptional
	hostOps["OptionalHasElement"] = opOptionalHasElement
	hostOps["OptionalGetElement"] = opOptionalGetElement
	hostOps["SequenceMap"] = func(*runCtx, *graph.Node, []Tensor) ([]Tensor, error) {
		return nil, fmt.Errorf("SequenceMap runs through controlFlow")
	}
}

// seqInput returns input i, which must be a sequence.
func seqInput(in []Tensor, i int, what string) (Tensor, error) {
	t := optional(in, i)
	if !t.isSeq() {
		if !t.IsValid() {
			return Tensor{}, fmt.Errorf("the %s input is missing", what)
		}
		return Tensor{}, fmt.Errorf("the %s input is %s (%s), not a sequence", what, t.article(), t)
	}
	return t, nil
}

// tensorInput returns input i, which must be a tensor (not a sequence or an optional).
func tensorInput(in []Tensor, i int, what string) (Tensor, error) {
	t := optional(in, i)
	if !t.IsValid() {
		return Tensor{}, fmt.Errorf("the %s input is missing", what)
	}
	if t.box != nil {
		return Tensor{}, fmt.Errorf("the %s input is %s (%s), not a tensor", what, t.article(), t)
	}
	return t, nil
}

// seqPosition reads the position input i (one int32 or int64 element) and checks it against
// the accepted range [-n, n-1], or [-n, n] when end is allowed (insertion); negative
// positions count from the back.
func seqPosition(in []Tensor, i, n int, end bool) (int, error) {
	p, err := tensorInput(in, i, "position")
	if err != nil {
		return 0, err
	}
	if (p.dtype != graph.Int64 && p.dtype != graph.Int32) || p.Len() != 1 || p.Rank() > 1 {
		return 0, fmt.Errorf("position must be one int32 or int64 element, got %s", p)
	}
	v := p.int64s()[0]
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

func opSequenceEmpty(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
	dt := DType(n.AttrInt("dtype", int64(graph.Float)))
	if _, err := makeSlice(dt, 0); err != nil {
		return nil, fmt.Errorf("dtype: %w", err)
	}
	return []Tensor{seqOf(dt, nil)}, nil
}

func opSequenceConstruct(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("SequenceConstruct needs at least one input")
	}
	elems := make([]Tensor, len(in))
	for i := range in {
		t, err := tensorInput(in, i, fmt.Sprintf("#%d", i))
		if err != nil {
			return nil, err
		}
		if t.dtype != in[0].dtype {
			return nil, fmt.Errorf("input %d has element type %s, input 0 %s", i, t.dtype, in[0].dtype)
		}
		elems[i] = t
	}
	return []Tensor{seqOf(in[0].dtype, elems)}, nil
}

func opSequenceInsert(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
	s, err := seqInput(in, 0, "sequence")
	if err != nil {
		return nil, err
	}
	t, err := tensorInput(in, 1, "tensor")
	if err != nil {
		return nil, err
	}
	if t.dtype != s.dtype {
		return nil, fmt.Errorf("cannot insert a tensor of %s into a sequence of %s", t.dtype, s.dtype)
	}
	old := s.seqElems()
	pos := len(old)
	if optional(in, 2).IsValid() {
		if pos, err = seqPosition(in, 2, len(old), true); err != nil {
			return nil, err
		}
	}
	elems := make([]Tensor, 0, len(old)+1)
	elems = append(append(append(elems, old[:pos]...), t), old[pos:]...)
	return []Tensor{seqOf(s.dtype, elems)}, nil
}

func opSequenceAt(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
	s, err := seqInput(in, 0, "sequence")
	if err != nil {
		return nil, err
	}
	pos, err := seqPosition(in, 1, len(s.seqElems()), false)
	if err != nil {
		return nil, err
	}
	return []Tensor{s.seqElems()[pos]}, nil
}

func opSequenceErase(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
	s, err := seqInput(in, 0, "sequence")
	if err != nil {
		return nil, err
	}
	old := s.seqElems()
	if len(old) == 0 {
		return nil, fmt.Errorf("cannot erase from an empty sequence")
	}
	pos := len(old) - 1
	if optional(in, 1).IsValid() {
		if pos, err = seqPosition(in, 1, len(old), false); err != nil {
			return nil, err
		}
	}
	elems := append(append(make([]Tensor, 0, len(old)-1), old[:pos]...), old[pos+1:]...)
	return []Tensor{seqOf(s.dtype, elems)}, nil
}

func opSequenceLength(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
	s, err := seqInput(in, 0, "sequence")
	if err != nil {
		return nil, err
	}
	return []Tensor{i64Tensor(nil, []int64{int64(len(s.seqElems()))})}, nil
}

// opSplitToSequence splits along axis: into pieces of size 1 without split (the axis dropped
// when keepdims is 0), into pieces of a scalar split's size (the last one shorter when the size
// does not divide the axis), or into the sizes a 1-D split lists.
func opSplitToSequence(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
	x := in[0]
	if x.Rank() == 0 {
		return nil, fmt.Errorf("cannot split a scalar")
	}
	ax, err := normAxis(n.AttrInt("axis", 0), x.Rank())
	if err != nil {
		return nil, err
	}
	dim := x.shape[ax]
	split := optional(in, 1)
	var sizes []int64
	switch {
	case !split.IsValid():
		sizes = make([]int64, dim)
		for i := range sizes {
			sizes[i] = 1
		}
	case !split.dtype.IsInteger():
		return nil, fmt.Errorf("split must be int32 or int64, got %s", split)
	case split.Rank() == 0:
		size := split.int64s()[0]
		if size <= 0 {
			return nil, fmt.Errorf("split size %d must be positive", size)
		}
		for left := dim; left > 0; left -= size {
			sizes = append(sizes, min(size, left))
		}
	case split.Rank() == 1:
		sizes = split.int64s()
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
	elems := make([]Tensor, len(sizes))
	start := int64(0)
	for i, s := range sizes {
		e := sliceAxis(x, ax, start, s)
		if squeeze {
			e = e.reshaped(append(append([]int64{}, x.shape[:ax]...), x.shape[ax+1:]...))
		}
		elems[i] = e
		start += s
	}
	return []Tensor{seqOf(x.dtype, elems)}, nil
}

// opConcatFromSequence concatenates a sequence's tensors along axis, or stacks them along a new
// axis when new_axis is 1.
func opConcatFromSequence(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
	s, err := seqInput(in, 0, "sequence")
	if err != nil {
		return nil, err
	}
	if n.Attr("axis") == nil {
		return nil, fmt.Errorf("the axis attribute is required")
	}
	elems := s.seqElems()
	if len(elems) == 0 {
		return nil, fmt.Errorf("cannot concatenate an empty sequence")
	}
	r := elems[0].Rank()
	stack := n.AttrInt("new_axis", 0) == 1
	var ax int
	if stack {
		ax, err = normAxis(n.AttrInt("axis", 0), r+1)
	} else if r == 0 {
		err = fmt.Errorf("cannot concatenate scalars without new_axis")
	} else {
		ax, err = normAxis(n.AttrInt("axis", 0), r)
	}
	if err != nil {
		return nil, err
	}
	parts := make([]Tensor, len(elems))
	for i, e := range elems {
		if e.Rank() != r {
			return nil, fmt.Errorf("element %d has rank %d, element 0 rank %d", i, e.Rank(), r)
		}
		for d := range r {
			if d != ax && e.shape[d] != elems[0].shape[d] {
				return nil, fmt.Errorf("element %d has shape %v, element 0 %v: only axis %d may differ", i, e.shape, elems[0].shape, ax)
			}
		}
		if stack {
			shape := append(append(append([]int64{}, e.shape[:ax]...), 1), e.shape[ax:]...)
			e = e.reshaped(shape)
		}
		parts[i] = e
	}
	concat := graph.NewNode(n.Name, "Concat", nil, nil, graph.IntAttr("axis", int64(ax)))
	return hostOps["Concat"](rc, concat, parts)
}

// innermostElem is the element type of the tensors a type holds (Undefined when unknown).
func innermostElem(t *graph.Type) DType {
	for t != nil && t.Kind != graph.KindTensor {
		t = t.Inner
	}
	if t == nil {
		return graph.Undefined
	}
	return t.Elem
}

func opOptional(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
	if v := optional(in, 0); v.IsValid() {
		if v.isOpt() {
			return nil, fmt.Errorf("an optional of an optional is not supported")
		}
		return []Tensor{optOf(v.dtype, &v)}, nil
	}
	a := n.Attr("type")
	if a == nil || a.TypeProto == nil {
		return nil, fmt.Errorf("an Optional without input needs the type attribute")
	}
	return []Tensor{optOf(innermostElem(a.TypeProto), nil)}, nil
}

// opOptionalHasElement is true for an optional holding a value and for a tensor or sequence
// (opset 18 accepts those), false for none and for an omitted input.
func opOptionalHasElement(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
	v := optional(in, 0)
	has := v.IsValid() && (!v.isOpt() || len(v.seqElems()) > 0)
	return []Tensor{raw(graph.Bool, nil, []bool{has})}, nil
}

// opOptionalGetElement returns what an optional holds, and a tensor or sequence as it is.
func opOptionalGetElement(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
	v := optional(in, 0)
	switch {
	case !v.IsValid():
		return nil, fmt.Errorf("the input is missing")
	case !v.isOpt():
		return []Tensor{v}, nil
	case len(v.seqElems()) == 0:
		return nil, fmt.Errorf("the optional is empty")
	}
	return []Tensor{v.seqElems()[0]}, nil
}

// sequenceMap runs n's body once per element of the input sequence: sequence inputs bind their
// i-th element, tensor inputs bind whole; each body output collects into an output sequence.
func (rc *runCtx) sequenceMap(n *graph.Node, in []Tensor, sc *scope) ([]Tensor, error) {
	body := n.Attr("body")
	if body == nil || body.Graph == nil {
		return nil, fmt.Errorf("SequenceMap has no body")
	}
	g := body.Graph
	s, err := seqInput(in, 0, "input_sequence")
	if err != nil {
		return nil, err
	}
	steps := len(s.seqElems())
	if len(g.Inputs) != len(in) {
		return nil, fmt.Errorf("the body has %d inputs for %d node inputs", len(g.Inputs), len(in))
	}
	for i, t := range in {
		switch {
		case !t.IsValid():
			return nil, fmt.Errorf("input %d is missing", i)
		case t.isOpt():
			return nil, fmt.Errorf("input %d is an optional; SequenceMap takes sequences and tensors", i)
		case t.isSeq() && len(t.seqElems()) != steps:
			return nil, fmt.Errorf("input %d has %d elements, input 0 has %d", i, len(t.seqElems()), steps)
		}
	}
	if len(n.Outputs) > len(g.Outputs) {
		return nil, fmt.Errorf("the body has %d outputs for %d node outputs", len(g.Outputs), len(n.Outputs))
	}
	collected := make([][]Tensor, len(g.Outputs))
	for it := range steps {
		inner := &scope{vals: make(map[string]Tensor, len(in)), parent: sc}
		for i, t := range in {
			if t.isSeq() {
				t = t.seqElems()[it]
			}
			inner.vals[g.Inputs[i].Name] = t
		}
		outs, err := rc.evalBody(n.OpType, g, inner)
		if err != nil {
			return nil, err
		}
		for k, t := range outs {
			if t.box != nil {
				return nil, fmt.Errorf("body output %d is %s (%s); SequenceMap collects tensors", k, t.article(), t)
			}
			if it > 0 && t.dtype != collected[k][0].dtype {
				return nil, fmt.Errorf("body output %d has element type %s in iteration %d, %s before", k, t.dtype, it, collected[k][0].dtype)
			}
			collected[k] = append(collected[k], t)
		}
	}
	res := make([]Tensor, len(collected))
	for k, ts := range collected {
		dt := graph.Undefined
		if len(ts) > 0 {
			dt = ts[0].dtype
		} else if v := g.Outputs[k]; v.Type.Kind == graph.KindTensor {
			dt = v.Type.Elem
		} else {
			dt = v.Declared.Elem
		}
		res[k] = seqOf(dt, ts)
	}
	return res, nil
}
