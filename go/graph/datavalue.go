package graph

import (
	"fmt"

	"github.com/loomrt/loom/go/graph/internal/modelmem"
	"github.com/loomrt/loom/go/graph/internal/onnxpb"
	"google.golang.org/protobuf/proto"
)

// DataValue is a value as ONNX serializes it outside a model, e.g. the input_N.pb and
// output_N.pb files of the ONNX backend tests: a tensor (TensorProto), a sequence
// (SequenceProto) or an optional (OptionalProto).
type DataValue struct {
	Name string
	// Kind is KindTensor, KindSequence or KindOptional.
	Kind TypeKind
	// Tensor is a KindTensor's value.
	Tensor *Tensor
	// Elems are a sequence's elements in order, or an optional's value (none when the
	// optional is empty).
	Elems []*DataValue
}

// The element kinds of SequenceProto and OptionalProto (their DataType enums agree).
const (
	dataElemUndefined = int32(onnxpb.SequenceProto_UNDEFINED)
	dataElemTensor    = int32(onnxpb.SequenceProto_TENSOR)
	dataElemSequence  = int32(onnxpb.SequenceProto_SEQUENCE)
	dataElemOptional  = int32(onnxpb.SequenceProto_OPTIONAL)
)

// DecodeDataValue decodes b as the message kind stands for: a TensorProto for KindTensor, a
// SequenceProto for KindSequence, an OptionalProto for KindOptional (the bytes do not say
// which, so the caller passes the type it expects, e.g. the model's declared one). Sparse
// tensors and maps are refused, as is external data (there is no directory to read it from);
// sizes and nesting are bounded by DefaultLimits.
func DecodeDataValue(b []byte, kind TypeKind) (*DataValue, error) {
	lim := DefaultLimits()
	l := &loader{name: "data", lim: lim, maps: modelmem.NewMappings("")}
	defer l.maps.Close()
	uo := proto.UnmarshalOptions{RecursionLimit: 16*lim.MaxNesting + 16}
	switch kind {
	case KindTensor:
		var tp onnxpb.TensorProto
		if err := uo.Unmarshal(b, &tp); err != nil {
			return nil, fmt.Errorf("not a TensorProto: %w", err)
		}
		return l.dataTensor(&tp)
	case KindSequence:
		var sp onnxpb.SequenceProto
		if err := uo.Unmarshal(b, &sp); err != nil {
			return nil, fmt.Errorf("not a SequenceProto: %w", err)
		}
		return l.dataSequence(&sp, 0)
	case KindOptional:
		var op onnxpb.OptionalProto
		if err := uo.Unmarshal(b, &op); err != nil {
			return nil, fmt.Errorf("not an OptionalProto: %w", err)
		}
		return l.dataOptional(&op, 0)
	}
	return nil, fmt.Errorf("cannot decode a value of kind %s", Type{Kind: kind})
}

func (l *loader) dataTensor(tp *onnxpb.TensorProto) (*DataValue, error) {
	t, err := l.tensor(tp, 0)
	if err != nil {
		return nil, err
	}
	return &DataValue{Name: tp.GetName(), Kind: KindTensor, Tensor: t}, nil
}

func (l *loader) dataSequence(sp *onnxpb.SequenceProto, depth int) (*DataValue, error) {
	if depth > l.lim.MaxNesting {
		return nil, fmt.Errorf("values nested deeper than %d", l.lim.MaxNesting)
	}
	v := &DataValue{Name: sp.GetName(), Kind: KindSequence}
	if len(sp.GetSparseTensorValues()) > 0 || len(sp.GetMapValues()) > 0 {
		return nil, fmt.Errorf("sequence %q: sequences of sparse tensors or maps are not supported", sp.GetName())
	}
	kinds := 0
	for _, n := range []int{len(sp.GetTensorValues()), len(sp.GetSequenceValues()), len(sp.GetOptionalValues())} {
		if n > 0 {
			kinds++
		}
	}
	if kinds > 1 {
		return nil, fmt.Errorf("sequence %q mixes element kinds", sp.GetName())
	}
	et := sp.GetElemType()
	check := func(want int32) error {
		if et != want && et != dataElemUndefined {
			return fmt.Errorf("sequence %q: elem_type %d does not match its elements", sp.GetName(), et)
		}
		return nil
	}
	switch {
	case len(sp.GetTensorValues()) > 0:
		if err := check(dataElemTensor); err != nil {
			return nil, err
		}
		for i, tp := range sp.GetTensorValues() {
			e, err := l.dataTensor(tp)
			if err != nil {
				return nil, fmt.Errorf("sequence %q element %d: %w", sp.GetName(), i, err)
			}
			v.Elems = append(v.Elems, e)
		}
	case len(sp.GetSequenceValues()) > 0:
		if err := check(dataElemSequence); err != nil {
			return nil, err
		}
		for i, s := range sp.GetSequenceValues() {
			e, err := l.dataSequence(s, depth+1)
			if err != nil {
				return nil, fmt.Errorf("sequence %q element %d: %w", sp.GetName(), i, err)
			}
			v.Elems = append(v.Elems, e)
		}
	case len(sp.GetOptionalValues()) > 0:
		if err := check(dataElemOptional); err != nil {
			return nil, err
		}
		for i, o := range sp.GetOptionalValues() {
			e, err := l.dataOptional(o, depth+1)
			if err != nil {
				return nil, fmt.Errorf("sequence %q element %d: %w", sp.GetName(), i, err)
			}
			v.Elems = append(v.Elems, e)
		}
	}
	return v, nil
}

func (l *loader) dataOptional(op *onnxpb.OptionalProto, depth int) (*DataValue, error) {
	if depth > l.lim.MaxNesting {
		return nil, fmt.Errorf("values nested deeper than %d", l.lim.MaxNesting)
	}
	v := &DataValue{Name: op.GetName(), Kind: KindOptional}
	if op.GetSparseTensorValue() != nil || op.GetMapValue() != nil {
		return nil, fmt.Errorf("optional %q: optionals of sparse tensors or maps are not supported", op.GetName())
	}
	set := 0
	for _, present := range []bool{op.GetTensorValue() != nil, op.GetSequenceValue() != nil, op.GetOptionalValue() != nil} {
		if present {
			set++
		}
	}
	if set > 1 {
		return nil, fmt.Errorf("optional %q holds more than one value", op.GetName())
	}
	var e *DataValue
	var err error
	switch {
	case op.GetTensorValue() != nil:
		e, err = l.dataTensor(op.GetTensorValue())
	case op.GetSequenceValue() != nil:
		e, err = l.dataSequence(op.GetSequenceValue(), depth+1)
	case op.GetOptionalValue() != nil:
		e, err = l.dataOptional(op.GetOptionalValue(), depth+1)
	default:
		return v, nil
	}
	if err != nil {
		return nil, fmt.Errorf("optional %q: %w", op.GetName(), err)
	}
	v.Elems = []*DataValue{e}
	return v, nil
}

// Marshal serializes v as the message its Kind stands for (the inverse of DecodeDataValue).
func (v *DataValue) Marshal() ([]byte, error) {
	var m proto.Message
	var err error
	switch v.Kind {
	case KindTensor:
		m, err = v.tensorProto()
	case KindSequence:
		m, err = v.sequenceProto()
	case KindOptional:
		m, err = v.optionalProto()
	default:
		return nil, fmt.Errorf("cannot encode a value of kind %s", Type{Kind: v.Kind})
	}
	if err != nil {
		return nil, err
	}
	return proto.Marshal(m)
}

func (v *DataValue) tensorProto() (*onnxpb.TensorProto, error) {
	if v.Tensor == nil {
		return nil, fmt.Errorf("tensor value %q has no Tensor", v.Name)
	}
	tp, err := tensorProto(v.Tensor)
	if err != nil {
		return nil, err
	}
	tp.Name = proto.String(v.Name)
	return tp, nil
}

func (v *DataValue) sequenceProto() (*onnxpb.SequenceProto, error) {
	sp := &onnxpb.SequenceProto{Name: proto.String(v.Name), ElemType: proto.Int32(dataElemTensor)}
	for i, e := range v.Elems {
		if e == nil {
			return nil, fmt.Errorf("sequence %q element %d is nil", v.Name, i)
		}
		if i > 0 && e.Kind != v.Elems[0].Kind {
			return nil, fmt.Errorf("sequence %q mixes element kinds", v.Name)
		}
		switch e.Kind {
		case KindTensor:
			tp, err := e.tensorProto()
			if err != nil {
				return nil, err
			}
			sp.TensorValues = append(sp.TensorValues, tp)
		case KindSequence:
			s, err := e.sequenceProto()
			if err != nil {
				return nil, err
			}
			sp.ElemType = proto.Int32(dataElemSequence)
			sp.SequenceValues = append(sp.SequenceValues, s)
		case KindOptional:
			o, err := e.optionalProto()
			if err != nil {
				return nil, err
			}
			sp.ElemType = proto.Int32(dataElemOptional)
			sp.OptionalValues = append(sp.OptionalValues, o)
		default:
			return nil, fmt.Errorf("sequence %q element %d: cannot encode kind %s", v.Name, i, Type{Kind: e.Kind})
		}
	}
	return sp, nil
}

func (v *DataValue) optionalProto() (*onnxpb.OptionalProto, error) {
	op := &onnxpb.OptionalProto{Name: proto.String(v.Name), ElemType: proto.Int32(dataElemUndefined)}
	if len(v.Elems) > 1 {
		return nil, fmt.Errorf("optional %q holds %d values", v.Name, len(v.Elems))
	}
	if len(v.Elems) == 0 {
		return op, nil
	}
	e := v.Elems[0]
	if e == nil {
		return nil, fmt.Errorf("optional %q holds nil", v.Name)
	}
	var err error
	switch e.Kind {
	case KindTensor:
		op.ElemType = proto.Int32(dataElemTensor)
		op.TensorValue, err = e.tensorProto()
	case KindSequence:
		op.ElemType = proto.Int32(dataElemSequence)
		op.SequenceValue, err = e.sequenceProto()
	case KindOptional:
		op.ElemType = proto.Int32(dataElemOptional)
		op.OptionalValue, err = e.optionalProto()
	default:
		err = fmt.Errorf("optional %q: cannot encode kind %s", v.Name, Type{Kind: e.Kind})
	}
	if err != nil {
		return nil, err
	}
	return op, nil
}
