package plan

import (
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// diagnose explains a kernel step that failed a bounds check (failure, from checkViolations)
// better when it can: a kernel only knows that an access fell outside a buffer, while the
// op's planner, given the values, says which input holds what (an index outside its axis,
// naming the input and the value), as the interpreter's run of the op does. So the step's
// node runs once more through the interpreter, on the run's own inputs, and its error, when
// it fails, is the run's. That is done only when every value the node reads is a graph input
// of the run or a constant: an intermediate value's memory may have been reused by a later
// step of the segment by the time the violation is seen, and a wrong diagnosis is worse than
// the kernel's own words. Otherwise, or when the node runs without error, failure stands.
func (t *Template) diagnose(rc *exec.RunCtx, ins []tensor.Tensor, step int, failure error) error {
	if step < 0 || step >= len(t.Steps) || rc == nil {
		return failure
	}
	st := &t.Steps[step]
	in := make([]tensor.Tensor, len(st.in))
	for j, r := range st.in {
		if r.fixed {
			in[j] = r.static
			continue
		}
		v, ok := t.inputValue(ins, r)
		if !ok {
			return failure
		}
		in[j] = v
	}
	f, ok := exec.LookupOp(st.Node)
	if !ok {
		return failure
	}
	if _, err := rc.RunNode(f, st.Node, in, nil); err != nil {
		return tensor.NodeError(st.Node, err)
	}
	return failure
}

// inputValue is the value r refers to when it is a graph input of the run (or a view of one
// in another shape), read from the run's inputs themselves.
func (t *Template) inputValue(ins []tensor.Tensor, r planRef) (tensor.Tensor, bool) {
	if r.Slot < 0 || r.Off != 0 {
		return tensor.Tensor{}, false
	}
	for _, pi := range t.Inputs {
		if pi.Ref.Slot != r.Slot || pi.pos >= len(ins) {
			continue
		}
		v := ins[pi.pos]
		raw, ok := ops.RawBytes(v)
		if !ok || v.DType() != r.dtype || ops.Numel(r.shape) != v.Len() {
			return tensor.Tensor{}, false
		}
		return tensor.ViewBytes(r.dtype, r.shape, raw), true
	}
	return tensor.Tensor{}, false
}
