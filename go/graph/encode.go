package graph

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/loomrt/loom/go/graph/internal/onnxpb"
	"google.golang.org/protobuf/proto"
)

// Marshal serializes the model as an ONNX ModelProto. Tensors are written inline as raw data
// (external weights are embedded); value_info carries the known types of intermediate values.
func (m *Model) Marshal() ([]byte, error) {
	mp, err := m.toProto()
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(mp)
}

func (m *Model) toProto() (*onnxpb.ModelProto, error) {
	if m.Graph == nil {
		return nil, fmt.Errorf("model has no graph")
	}
	mp := &onnxpb.ModelProto{
		IrVersion:       proto.Int64(m.IRVersion),
		ProducerName:    proto.String(m.ProducerName),
		ProducerVersion: proto.String(m.ProducerVersion),
		Domain:          proto.String(m.Domain),
		ModelVersion:    proto.Int64(m.ModelVersion),
		DocString:       proto.String(m.Doc),
	}
	doms := make([]string, 0, len(m.Opsets))
	for d := range m.Opsets {
		doms = append(doms, d)
	}
	sort.Strings(doms)
	for _, d := range doms {
		mp.OpsetImport = append(mp.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: proto.String(d), Version: proto.Int64(m.Opsets[d])})
	}
	keys := make([]string, 0, len(m.MetadataProps))
	for k := range m.MetadataProps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		mp.MetadataProps = append(mp.MetadataProps, &onnxpb.StringStringEntryProto{Key: proto.String(k), Value: proto.String(m.MetadataProps[k])})
	}
	g, err := graphProto(m.Graph)
	if err != nil {
		return nil, err
	}
	mp.Graph = g
	return mp, nil
}

func graphProto(g *Graph) (*onnxpb.GraphProto, error) {
	gp := &onnxpb.GraphProto{Name: proto.String(g.Name), DocString: proto.String(g.Doc)}
	for _, name := range g.InitOrder {
		tp, err := tensorProto(g.Initializers[name])
		if err != nil {
			return nil, err
		}
		gp.Initializer = append(gp.Initializer, tp)
	}
	for _, in := range g.Inputs {
		gp.Input = append(gp.Input, valueInfoProto(in.Name, in.Declared, in.Doc))
	}
	for _, o := range g.Outputs {
		gp.Output = append(gp.Output, valueInfoProto(o.Name, o.Declared, o.Doc))
	}
	for _, n := range g.Nodes {
		np, err := nodeProto(n)
		if err != nil {
			return nil, err
		}
		gp.Node = append(gp.Node, np)
		for _, out := range n.Outputs {
			if v := g.Values[out]; v != nil && out != "" && !g.IsOutput(out) && v.Type.Kind != KindUnknown {
				gp.ValueInfo = append(gp.ValueInfo, valueInfoProto(out, v.Type, v.Doc))
			}
		}
	}
	return gp, nil
}

func valueInfoProto(name string, t Type, doc string) *onnxpb.ValueInfoProto {
	vp := &onnxpb.ValueInfoProto{Name: proto.String(name)}
	if doc != "" {
		vp.DocString = proto.String(doc)
	}
	if t.Kind != KindUnknown {
		vp.Type = typeProto(t)
	}
	return vp
}

func typeProto(t Type) *onnxpb.TypeProto {
	tp := &onnxpb.TypeProto{}
	inner := func() *onnxpb.TypeProto {
		if t.Inner == nil {
			return nil
		}
		return typeProto(*t.Inner)
	}
	switch t.Kind {
	case KindTensor, KindSparseTensor:
		var sp *onnxpb.TensorShapeProto
		if t.Ranked {
			sp = &onnxpb.TensorShapeProto{}
			for _, d := range t.Shape {
				dp := &onnxpb.TensorShapeProto_Dimension{}
				switch {
				case d.Known():
					dp.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d.Value}
				case d.Param != "":
					dp.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: d.Param}
				}
				sp.Dim = append(sp.Dim, dp)
			}
		}
		if t.Kind == KindTensor {
			tp.Value = &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(t.Elem)), Shape: sp}}
		} else {
			tp.Value = &onnxpb.TypeProto_SparseTensorType{SparseTensorType: &onnxpb.TypeProto_SparseTensor{ElemType: proto.Int32(int32(t.Elem)), Shape: sp}}
		}
	case KindSequence:
		tp.Value = &onnxpb.TypeProto_SequenceType{SequenceType: &onnxpb.TypeProto_Sequence{ElemType: inner()}}
	case KindOptional:
		tp.Value = &onnxpb.TypeProto_OptionalType{OptionalType: &onnxpb.TypeProto_Optional{ElemType: inner()}}
	case KindMap:
		tp.Value = &onnxpb.TypeProto_MapType{MapType: &onnxpb.TypeProto_Map{KeyType: proto.Int32(int32(t.Key)), ValueType: inner()}}
	}
	return tp
}

func tensorProto(t *Tensor) (*onnxpb.TensorProto, error) {
	if t == nil {
		return nil, fmt.Errorf("nil tensor")
	}
	tp := &onnxpb.TensorProto{Name: proto.String(t.Name), DataType: proto.Int32(int32(t.DType)), Dims: append([]int64{}, t.Dims...)}
	if t.Doc != "" {
		tp.DocString = proto.String(t.Doc)
	}
	if t.DType == String {
		tp.StringData = t.Strings
		return tp, nil
	}
	if int64(len(t.Raw)) != t.DType.ByteSize(t.NumElements()) {
		return nil, fmt.Errorf("tensor %q: %d bytes for %d %v elements", t.Name, len(t.Raw), t.NumElements(), t.DType)
	}
	tp.RawData = append([]byte{}, t.Raw...)
	return tp, nil
}

func nodeProto(n *Node) (*onnxpb.NodeProto, error) {
	np := &onnxpb.NodeProto{Name: proto.String(n.Name), OpType: proto.String(n.OpType), Input: n.Inputs, Output: n.Outputs}
	if n.Domain != "" {
		np.Domain = proto.String(n.Domain)
	}
	if n.Doc != "" {
		np.DocString = proto.String(n.Doc)
	}
	for _, a := range n.Attrs {
		ap, err := attrProto(a)
		if err != nil {
			return nil, fmt.Errorf("node %q attribute %q: %w", n.Name, a.Name, err)
		}
		np.Attribute = append(np.Attribute, ap)
	}
	return np, nil
}

func attrProto(a *Attribute) (*onnxpb.AttributeProto, error) {
	t := onnxpb.AttributeProto_AttributeType(a.Type)
	ap := &onnxpb.AttributeProto{Name: proto.String(a.Name), Type: &t}
	if a.RefAttrName != "" {
		ap.RefAttrName = proto.String(a.RefAttrName)
	}
	var err error
	switch a.Type {
	case AttrFloat:
		ap.F = proto.Float32(a.Float)
	case AttrInt:
		ap.I = proto.Int64(a.Int)
	case AttrString:
		ap.S = a.String
	case AttrTensor:
		if a.Tensor != nil {
			ap.T, err = tensorProto(a.Tensor)
		}
	case AttrGraph:
		if a.Graph != nil {
			ap.G, err = graphProto(a.Graph)
		}
	case AttrFloats:
		ap.Floats = a.Floats
	case AttrInts:
		ap.Ints = a.Ints
	case AttrStrings:
		ap.Strings = a.Strings
	case AttrTensors:
		for _, t := range a.Tensors {
			tp, err := tensorProto(t)
			if err != nil {
				return nil, err
			}
			ap.Tensors = append(ap.Tensors, tp)
		}
	case AttrGraphs:
		for _, g := range a.Graphs {
			gp, err := graphProto(g)
			if err != nil {
				return nil, err
			}
			ap.Graphs = append(ap.Graphs, gp)
		}
	case AttrTypeProto:
		if a.TypeProto != nil {
			ap.Tp = typeProto(*a.TypeProto)
		}
	case AttrTypeProtos:
		for _, tp := range a.TypeProtos {
			ap.TypeProtos = append(ap.TypeProtos, typeProto(*tp))
		}
	case AttrSparseTensor, AttrSparseTensors:
		return nil, fmt.Errorf("writing sparse tensor attributes is not supported")
	default:
		return nil, fmt.Errorf("attribute type %s", strconv.Itoa(int(a.Type)))
	}
	return ap, err
}
