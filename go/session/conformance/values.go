package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session"
)

// hasValueIO reports whether a graph input or output is declared a sequence or an optional,
// so the test runs through RunValues; unsupported is set when one is of a kind the session
// does not run (maps, sparse tensors).
func hasValueIO(g *graph.Graph) (values bool, unsupported string) {
	for _, v := range append(append([]*graph.Value{}, g.Inputs...), g.Outputs...) {
		switch t := v.Declared; t.Kind {
		case graph.KindTensor, graph.KindUnknown:
		case graph.KindSequence, graph.KindOptional:
			if !holdsTensors(t) {
				return false, fmt.Sprintf("%s has type %s: only sequences and optionals of tensors are supported", v.Name, t)
			}
			values = true
		default:
			return false, fmt.Sprintf("%s has type %s: only tensors, sequences and optionals are supported", v.Name, t)
		}
	}
	return values, ""
}

// holdsTensors reports whether t is a sequence or optional whose values are tensors (or
// sequences of tensors, for an optional), or does not say.
func holdsTensors(t graph.Type) bool {
	in := t.Inner
	if in == nil || in.Kind == graph.KindTensor || in.Kind == graph.KindUnknown {
		return true
	}
	return t.Kind == graph.KindOptional && in.Kind == graph.KindSequence && holdsTensors(*in)
}

// runValueSet runs one test_data_set_* of a model with sequence or optional inputs or outputs
// through RunValues and compares every output value with the expected one; "" when they
// agree, else what differs.
func runValueSet(s *session.InferenceSession, g *graph.Graph, set string, opts Options) string {
	var feeds []session.NamedValue
	for i := 0; ; i++ {
		b, err := os.ReadFile(filepath.Join(set, fmt.Sprintf("input_%d.pb", i)))
		if err != nil {
			break
		}
		if i >= len(g.Inputs) {
			return fmt.Sprintf("input_%d.pb: the model has %d inputs", i, len(g.Inputs))
		}
		// The bytes do not say which message they are; the backend tests write the inputs in
		// graph order, so the graph input at the same position declares it.
		decl := g.Inputs[i].Declared
		dv, err := graph.DecodeDataValue(b, kindOf(decl))
		if err != nil {
			return fmt.Sprintf("input_%d.pb: %v", i, err)
		}
		v, err := ToValue(dv, decl)
		if err != nil {
			return fmt.Sprintf("input_%d.pb: %v", i, err)
		}
		name := dv.Name
		if name == "" {
			name = g.Inputs[i].Name
		}
		feeds = append(feeds, session.NamedValue{Name: name, Value: v})
	}
	got, err := s.RunValues(context.Background(), feeds)
	if err != nil {
		return err.Error()
	}
	for i := range got {
		b, err := os.ReadFile(filepath.Join(set, fmt.Sprintf("output_%d.pb", i)))
		if err != nil {
			return fmt.Sprintf("output_%d.pb: %v", i, err)
		}
		decl := g.Outputs[i].Declared
		dv, err := graph.DecodeDataValue(b, kindOf(decl))
		if err != nil {
			return fmt.Sprintf("output_%d.pb: %v", i, err)
		}
		want, err := ToValue(dv, decl)
		if err != nil {
			return fmt.Sprintf("output_%d.pb: %v", i, err)
		}
		if msg := CompareValues(got[i], want, opts.RTol, opts.ATol); msg != "" {
			return fmt.Sprintf("output %d (%s): %s", i, g.Outputs[i].Name, msg)
		}
	}
	return ""
}

// kindOf is the message kind a value of declared type t is serialized as.
func kindOf(t graph.Type) graph.TypeKind {
	if t.Kind == graph.KindUnknown {
		return graph.KindTensor
	}
	return t.Kind
}

// innerOf is the declared type a sequence's or optional's values have (unknown when unsaid).
func innerOf(t graph.Type) graph.Type {
	if t.Inner == nil {
		return graph.Type{}
	}
	return *t.Inner
}

// tensorElem is the element type of the tensors a declared type holds, Undefined when unsaid.
func tensorElem(t graph.Type) graph.DataType {
	for t.Kind == graph.KindSequence || t.Kind == graph.KindOptional {
		t = innerOf(t)
	}
	return t.Elem
}

// ToValue converts a decoded test-data value into a session Value; decl, the model's declared
// type for it (unknown when the model does not say), supplies the element type of an empty
// sequence or a none optional and the bfloat16 quirk of old test data.
func ToValue(dv *graph.DataValue, decl graph.Type) (session.Value, error) {
	switch dv.Kind {
	case graph.KindTensor:
		if dv.Tensor == nil {
			return session.Value{}, fmt.Errorf("tensor %q without data", dv.Name)
		}
		t, err := session.FromGraphTensor(dv.Tensor)
		if err != nil {
			return session.Value{}, err
		}
		return session.TensorValue(bfloat16Quirk(t, decl.Elem)), nil
	case graph.KindSequence:
		inner := innerOf(decl)
		elems := make([]session.Tensor, len(dv.Elems))
		for i, e := range dv.Elems {
			if e.Kind != graph.KindTensor {
				return session.Value{}, fmt.Errorf("sequence %q element %d: only tensors are supported", dv.Name, i)
			}
			v, err := ToValue(e, inner)
			if err != nil {
				return session.Value{}, fmt.Errorf("sequence %q element %d: %w", dv.Name, i, err)
			}
			elems[i], _ = v.Tensor()
		}
		dt := tensorElem(decl)
		if dt == graph.Undefined && len(elems) > 0 {
			dt = elems[0].DType()
		}
		if dt == graph.Undefined {
			return session.Value{}, fmt.Errorf("sequence %q: neither the model nor the data says its element type", dv.Name)
		}
		return session.SequenceValue(dt, elems...)
	case graph.KindOptional:
		if len(dv.Elems) == 0 {
			return session.NoneValue(tensorElem(decl)), nil
		}
		v, err := ToValue(dv.Elems[0], innerOf(decl))
		if err != nil {
			return session.Value{}, fmt.Errorf("optional %q: %w", dv.Name, err)
		}
		return session.OptionalValue(v)
	}
	return session.Value{}, fmt.Errorf("value %q of kind %s is not supported", dv.Name, graph.Type{Kind: dv.Kind})
}

// CompareValues checks got against want as Compare does, element by element through
// sequences and optionals: the same kinds, sequence lengths and presence; "" when they agree,
// else the first difference.
func CompareValues(got, want session.Value, rtol, atol float64) string {
	if got.Kind() != want.Kind() {
		return fmt.Sprintf("a %s, want a %s", got.Kind(), want.Kind())
	}
	switch want.Kind() {
	case session.ValueSequence:
		g, _ := got.Sequence()
		w, _ := want.Sequence()
		if got.ElemType() != want.ElemType() {
			return fmt.Sprintf("a sequence of %s, want %s", got.ElemType(), want.ElemType())
		}
		if len(g) != len(w) {
			return fmt.Sprintf("a sequence of %d tensors, want %d", len(g), len(w))
		}
		for i := range w {
			if msg := Compare(g[i], w[i], rtol, atol); msg != "" {
				return fmt.Sprintf("sequence element %d: %s", i, msg)
			}
		}
		return ""
	case session.ValueOptional:
		g, gok := got.Element()
		w, wok := want.Element()
		switch {
		case gok != wok && wok:
			return "none, want a value"
		case gok != wok:
			return fmt.Sprintf("a value (%s), want none", g)
		case !wok:
			return ""
		}
		if msg := CompareValues(g, w, rtol, atol); msg != "" {
			return "optional content: " + msg
		}
		return ""
	}
	g, err := got.Tensor()
	if err != nil {
		return err.Error()
	}
	w, err := want.Tensor()
	if err != nil {
		return err.Error()
	}
	return Compare(g, w, rtol, atol)
}
