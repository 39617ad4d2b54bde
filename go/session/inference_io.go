package session

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomrt/loom/go/graph"
)

// RunOutputs is Run for models whose inputs or outputs may be sequences or optionals: it feeds
// the named values and returns the graph outputs in order, each of the kind the graph produced.
// An optional input that is not fed is none. Errors name the input or node at fault; ctx
// bounds the run and parents its spans as for Run.
func (s *InferenceSession) RunOutputs(ctx context.Context, inputs []NamedValue) ([]Value, error) {
	outs, err := s.run(ctx, inputs, phaseRun, nil)
	if err != nil {
		return nil, err
	}
	vals := make([]Value, len(outs))
	for i, t := range outs {
		vals[i] = TensorValue(t)
	}
	return vals, nil
}

// namedTensorValues wraps Run's tensors as values.
func namedTensorValues(inputs []NamedTensor) []NamedValue {
	out := make([]NamedValue, len(inputs))
	for i, in := range inputs {
		out[i] = NamedValue{Name: in.Name, Value: TensorValue(in.Tensor)}
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
		m.Kind = ValueSequence
		t = inner(t)
	case graph.KindOptional:
		m.Kind = ValueOptional
		t = inner(t)
		if t.Kind == graph.KindSequence {
			m.Holds = ValueSequence
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
	if m.Kind == ValueSequence || (m.Kind == ValueOptional && m.Holds == ValueSequence) {
		s = "seq(" + s + ")"
	}
	if m.Kind == ValueOptional {
		s = "optional(" + s + ")"
	}
	return s
}

// checkFed checks a fed value against its input's declaration; the caller names the input.
func checkFed(meta IOMeta, t Tensor) error {
	switch meta.Kind {
	case ValueSequence:
		if !t.isSeq() {
			return fmt.Errorf("%s was fed, the model wants %s (feed a SequenceValue through RunOutputs)", t.article(), describeMeta(meta))
		}
		return checkSeqElems(meta, t)
	case ValueOptional:
		if t.isOpt() {
			if len(t.seqElems()) == 0 {
				return nil
			}
			t = t.seqElems()[0]
		}
		// A tensor or a sequence fed for an optional is an optional holding it.
		want := meta
		want.Kind = meta.Holds
		if err := checkFed(want, t); err != nil {
			return fmt.Errorf("optional content: %w", err)
		}
		return nil
	}
	if t.box != nil {
		if meta.DType == graph.Undefined && !meta.Ranked {
			return nil // the model does not say what the input is
		}
		return fmt.Errorf("%s (%s) was fed, the model wants %s", t.article(), t, describeMeta(meta))
	}
	if meta.DType != graph.Undefined && t.dtype != meta.DType {
		return fmt.Errorf("element type %s, the model wants %s", t.dtype, meta.DType)
	}
	if !meta.Ranked {
		return nil
	}
	if len(t.shape) != len(meta.Shape) {
		return fmt.Errorf("rank %d (shape %v), the model wants rank %d (%s)", len(t.shape), t.shape, len(meta.Shape), describeMeta(meta))
	}
	for i, d := range meta.Shape {
		if d.Known() && d.Value != t.shape[i] {
			return fmt.Errorf("dimension %d is %d, the model wants %d (%s)", i, t.shape[i], d.Value, describeMeta(meta))
		}
	}
	return nil
}

// checkSeqElems checks a fed sequence's element type. The element shapes are not checked:
// exporters (the ONNX backend tests among them) often declare a sequence's element shape as
// rank 0 where they mean unknown, and ONNX Runtime does not check them either.
func checkSeqElems(meta IOMeta, t Tensor) error {
	if meta.DType == graph.Undefined {
		return nil
	}
	if t.dtype != meta.DType {
		return fmt.Errorf("a sequence of %s was fed, the model wants %s", t.dtype, describeMeta(meta))
	}
	for i, e := range t.seqElems() {
		if e.dtype != meta.DType {
			return fmt.Errorf("sequence element %d has element type %s, the model wants %s", i, e.dtype, describeMeta(meta))
		}
	}
	return nil
}
