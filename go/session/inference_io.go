package session

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// RunValues is Run for models whose inputs or outputs may be sequences or optionals: it feeds
// the named values and returns the graph outputs in order, each of the kind the graph produced.
// An optional input that is not fed is none. Errors name the input or node at fault; ctx
// bounds the run and parents its spans as for Run.
func (s *InferenceSession) RunValues(ctx context.Context, inputs []tensor.NamedValue) ([]tensor.Value, error) {
	outs, err := s.run(ctx, inputs, exec.PhaseRun, nil)
	if err != nil {
		return nil, err
	}
	vals := make([]tensor.Value, len(outs))
	for i, t := range outs {
		vals[i] = tensor.TensorValue(t)
	}
	return vals, nil
}

// RunOutputs is RunValues, under its earlier name.
//
// Deprecated: use RunValues; the name read as if it picked outputs, which RunSelected does.
func (s *InferenceSession) RunOutputs(ctx context.Context, inputs []tensor.NamedValue) ([]tensor.Value, error) {
	return s.RunValues(ctx, inputs)
}

// RunSelected is Run returning only the outputs named, in the order named, as ONNX Runtime's
// Run takes output names: RunSelected(ctx, inputs, "logits") returns one tensor. A name that
// is not a graph output, a name given twice, or no name at all is an *Error matching
// ErrInvalidArgument, reported before anything runs. The whole graph still runs (the outputs
// not selected are computed, then their memory is handed back to the session as by Recycle),
// so it costs what Run costs.
func (s *InferenceSession) RunSelected(ctx context.Context, inputs []tensor.NamedTensor, outputs ...string) ([]tensor.Tensor, error) {
	idx, err := s.outputIndexes("RunSelected", outputs)
	if err != nil {
		return nil, err
	}
	outs, err := s.runTensors(ctx, "RunSelected", inputs, nil)
	if err != nil {
		return nil, err
	}
	sel := make([]tensor.Tensor, len(idx))
	taken := make([]bool, len(outs))
	for i, k := range idx {
		sel[i], taken[k] = outs[k], true
	}
	for k, t := range outs {
		if !taken[k] && !sharesMemory(t, sel, inputs) {
			s.Recycle(t)
		}
	}
	return sel, nil
}

// outputIndexes maps output names to their indexes in Outputs.
func (s *InferenceSession) outputIndexes(op string, names []string) ([]int, error) {
	if len(names) == 0 {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "no output named; the model's outputs are %s", s.outputNames())
	}
	idx := make([]int, len(names))
	seen := make(map[string]bool, len(names))
	for i, name := range names {
		if seen[name] {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "output %q named twice", name)
		}
		seen[name] = true
		idx[i] = -1
		for k, m := range s.outputs {
			if m.Name == name {
				idx[i] = k
				break
			}
		}
		if idx[i] < 0 {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "no output named %q; the model's outputs are %s", name, s.outputNames())
		}
	}
	return idx, nil
}

// outputNames lists the graph outputs, for messages.
func (s *InferenceSession) outputNames() string {
	names := make([]string, len(s.outputs))
	for i, m := range s.outputs {
		names[i] = m.Name
	}
	return strings.Join(names, ", ")
}

// sharesMemory reports whether t's data overlaps any of ts' or of the inputs' (two outputs of
// a run may be one value, e.g. an Identity's): such a tensor is not recycled.
func sharesMemory(t tensor.Tensor, ts []tensor.Tensor, inputs []tensor.NamedTensor) bool {
	r, ok := exec.DataRange(t)
	if !ok {
		return false
	}
	for _, o := range ts {
		if or, ok := exec.DataRange(o); ok && or.Overlaps(r) {
			return true
		}
	}
	for _, in := range inputs {
		if ir, ok := exec.DataRange(in.Tensor); ok && ir.Overlaps(r) {
			return true
		}
	}
	return false
}

// namedTensorValues wraps Run's tensors as values.
func namedTensorValues(inputs []tensor.NamedTensor) []tensor.NamedValue {
	out := make([]tensor.NamedValue, len(inputs))
	for i, in := range inputs {
		out[i] = tensor.NamedValue{Name: in.Name, Value: tensor.TensorValue(in.Tensor)}
	}
	return out
}

// ioKinds sets m's Kind, Holds and tensor description from a graph type: a sequence's or an
// optional's tensors are described by DType, Shape and Ranked.
func ioKinds(m *IOMeta, t graph.Type) {
	inner := func(t graph.Type) graph.Type {
		if t.Inner == nil {
			return graph.Type{}
		}
		return *t.Inner
	}
	switch t.Kind {
	case graph.KindSequence:
		m.Kind = tensor.ValueSequence
		t = inner(t)
	case graph.KindOptional:
		m.Kind = tensor.ValueOptional
		t = inner(t)
		if t.Kind == graph.KindSequence {
			m.Holds = tensor.ValueSequence
			t = inner(t)
		}
	}
	m.DType, m.Shape, m.Ranked = t.Elem, append(graph.Shape{}, t.Shape...), t.Ranked
}

// describeMeta renders m's declared type: tensor(float)[N,3], seq(tensor(int64)),
// optional(seq(tensor(float)[5])).
func describeMeta(m IOMeta) string {
	s := "tensor(" + m.DType.String() + ")"
	if m.Ranked {
		dims := make([]string, len(m.Shape))
		for i, d := range m.Shape {
			dims[i] = d.String()
		}
		s += "[" + strings.Join(dims, ",") + "]"
	}
	if m.Kind == tensor.ValueSequence || (m.Kind == tensor.ValueOptional && m.Holds == tensor.ValueSequence) {
		s = "seq(" + s + ")"
	}
	if m.Kind == tensor.ValueOptional {
		s = "optional(" + s + ")"
	}
	return s
}

// checkFed checks a fed value against its input's declaration; the caller names the input.
func checkFed(meta IOMeta, t tensor.Tensor) error {
	switch meta.Kind {
	case tensor.ValueSequence:
		if !tensor.IsSeq(t) {
			return fmt.Errorf("%s was fed, the model wants %s (feed a SequenceValue through RunValues)", tensor.Article(t), describeMeta(meta))
		}
		return checkSeqElems(meta, t)
	case tensor.ValueOptional:
		if tensor.IsOpt(t) {
			if len(tensor.SeqElems(t)) == 0 {
				return nil
			}
			t = tensor.SeqElems(t)[0]
		}
		// A tensor or a sequence fed for an optional is an optional holding it.
		want := meta
		want.Kind = meta.Holds
		if err := checkFed(want, t); err != nil {
			return fmt.Errorf("optional content: %w", err)
		}
		return nil
	}
	if tensor.Box(t) != nil {
		if meta.DType == graph.Undefined && !meta.Ranked {
			return nil // the model does not say what the input is
		}
		return fmt.Errorf("%s (%s) was fed, the model wants %s", tensor.Article(t), t, describeMeta(meta))
	}
	if meta.DType != graph.Undefined && t.DType() != meta.DType {
		return fmt.Errorf("element type %s, the model wants %s", t.DType(), meta.DType)
	}
	if !meta.Ranked {
		return nil
	}
	if len(t.Dims()) != len(meta.Shape) {
		return fmt.Errorf("rank %d (shape %v), the model wants rank %d (%s)", len(t.Dims()), t.Dims(), len(meta.Shape), describeMeta(meta))
	}
	for i, d := range meta.Shape {
		if d.Known() && d.Value != t.Dims()[i] {
			return fmt.Errorf("dimension %d is %d, the model wants %d (%s)", i, t.Dims()[i], d.Value, describeMeta(meta))
		}
	}
	return nil
}

// checkSeqElems checks a fed sequence's element type. The element shapes are not checked:
// exporters (the ONNX backend tests among them) often declare a sequence's element shape as
// rank 0 where they mean unknown, and ONNX Runtime does not check them either.
func checkSeqElems(meta IOMeta, t tensor.Tensor) error {
	if meta.DType == graph.Undefined {
		return nil
	}
	if t.DType() != meta.DType {
		return fmt.Errorf("a sequence of %s was fed, the model wants %s", t.DType(), describeMeta(meta))
	}
	for i, e := range tensor.SeqElems(t) {
		if e.DType() != meta.DType {
			return fmt.Errorf("sequence element %d has element type %s, the model wants %s", i, e.DType(), describeMeta(meta))
		}
	}
	return nil
}
