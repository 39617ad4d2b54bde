package session

import (
	"slices"

	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/plan"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Bound outputs (RunInto): the caller allocates some graph outputs, and the run writes them
// there. Compiled run plans hand the caller's memory to the kernel that produces the output
// (Template.run); other outputs, and every output of the interpreter, are copied in once
// the run has computed them (fillBound).

// bindOutputs checks RunInto's outputs against the model and the inputs and returns them by
// output index (the zero Tensor where not bound), naming the output at fault.
func (s *InferenceSession) bindOutputs(inputs, outputs []tensor.NamedTensor) ([]tensor.Tensor, error) {
	const op = "RunInto"
	into := make([]tensor.Tensor, len(s.outputs))
	var ranges []exec.MemRange
	for _, o := range outputs {
		i := -1
		for j, m := range s.outputs {
			if m.Name == o.Name {
				i = j
				break
			}
		}
		if i < 0 {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "no output named %q", o.Name)
		}
		if into[i].IsValid() {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "output %q bound twice", o.Name)
		}
		t, m := o.Tensor, s.outputs[i]
		switch {
		case !t.IsValid():
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "output %q: empty tensor (the zero Tensor)", o.Name)
		case tensor.Box(t) != nil || m.Kind != tensor.ValueTensor:
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "output %q is %s; only tensors can be bound", o.Name, describeMeta(m))
		}
		if err := checkFed(m, t); err != nil {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "output %q: the bound tensor has %v", o.Name, err)
		}
		if r, ok := exec.DataRange(t); ok {
			if s.eng.Held.Overlaps(r) {
				return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "output %q: the bound tensor's memory is a weight's", o.Name)
			}
			for _, in := range inputs {
				if ir, ok := exec.DataRange(in.Tensor); ok && ir.Overlaps(r) {
					return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "output %q: the bound tensor's memory overlaps input %q", o.Name, in.Name)
				}
			}
			for _, other := range ranges {
				if other.Overlaps(r) {
					return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "output %q: the bound tensor's memory overlaps another bound output", o.Name)
				}
			}
			ranges = append(ranges, r)
		}
		into[i] = t
	}
	return into, nil
}

// fillBound copies each computed output into its bound tensor (unless the run wrote it there)
// and puts the bound tensor in its place, refusing one whose type or shape is not the
// output's.
func (s *InferenceSession) fillBound(outs, into []tensor.Tensor) error {
	for i, dst := range into {
		if !dst.IsValid() || i >= len(outs) {
			continue
		}
		src := outs[i]
		if tensor.Box(src) != nil {
			return tensor.NewError("RunInto", tensor.ErrInvalidArgument, "output %q is %s (%s); only tensors can be bound", s.outputs[i].Name, tensor.Article(src), src)
		}
		if src.DType() != dst.DType() || !slices.Equal(src.Dims(), dst.Dims()) {
			return tensor.NewError("RunInto", tensor.ErrInvalidArgument, "output %q: the bound tensor is %s, the run produced %s",
				s.outputs[i].Name, exec.DescribeTensor(dst), exec.DescribeTensor(src))
		}
		if b, ok := ops.RawBytes(src); !ok || !plan.SameElements(dst, b) {
			plan.CopyElements(dst, src)
		}
		outs[i] = dst
	}
	return nil
}
