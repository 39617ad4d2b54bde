package graph

import (
	"fmt"
	"sort"
)

// FromGraph wraps a programmatically built graph in a Model importing the given opsets (domain
// "" is ai.onnx). Initializers must carry their bytes inline (WeightRef.Location empty) with a
// length that fits their element type and dims. Graph inputs and outputs take their Declared
// types as their types. The graph is resolved and sorted as on load; call Check and infer.Shapes
// as for a loaded model. The graph is adopted, not copied.
func FromGraph(name string, g *Graph, opsets map[string]int64) (*Model, error) {
	if g == nil {
		return nil, &Error{Model: name, Msg: "nil graph"}
	}
	m := &Model{Name: name, IRVersion: 8, ProducerName: "loom", MetadataProps: map[string]string{}, Opsets: map[string]int64{}, Graph: g}
	for d, v := range opsets {
		if d == "ai.onnx" {
			d = ""
		}
		m.Opsets[d] = v
	}
	if _, ok := m.Opsets[""]; !ok {
		return nil, &Error{Model: name, Msg: "no ai.onnx opset imported"}
	}
	if m.Opsets[""] > 21 {
		m.IRVersion = 10
	}
	var err error
	g.Walk(func(sg *Graph) {
		if err != nil {
			return
		}
		if sg.Initializers == nil {
			sg.Initializers = map[string]*Tensor{}
		}
		if len(sg.InitOrder) != len(sg.Initializers) {
			// Built by assigning the map directly: take a deterministic order.
			sg.InitOrder = sortedKeys(sg.Initializers)
		}
		for _, n := range sg.InitOrder {
			t := sg.Initializers[n]
			if t == nil {
				err = &Error{Model: name, Graph: sg.Name, Value: n, Msg: "initializer listed but missing"}
				return
			}
			if !t.Ref.Inline() {
				err = &Error{Model: name, Graph: sg.Name, Value: n, Msg: "initializer must be inline (WeightRef " + t.Ref.Location + ")"}
				return
			}
			if t.Name != n {
				err = &Error{Model: name, Graph: sg.Name, Value: n, Msg: fmt.Sprintf("initializer stored under %q is named %q", n, t.Name)}
				return
			}
			if t.DType == String {
				if int64(len(t.Strings)) != t.NumElements() {
					err = &Error{Model: name, Graph: sg.Name, Value: n, Msg: "string count does not match dims"}
				}
			} else if _, e := NewTensor(t.Name, t.DType, t.Dims, t.Raw); e != nil {
				err = &Error{Model: name, Graph: sg.Name, Value: n, Msg: e.Error()}
				return
			}
		}
		for _, v := range append(append([]*Value{}, sg.Inputs...), sg.Outputs...) {
			if v.Type.Kind == KindUnknown {
				v.Type = v.Declared.Clone()
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if err := resolve(m); err != nil {
		return nil, err
	}
	return m, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Input declares a graph input of the given type.
func Input(name string, t Type) *Value { return &Value{Name: name, Declared: t, Type: t} }

// Output declares a graph output; its type may be left unknown for inference to fill.
func Output(name string, t Type) *Value { return &Value{Name: name, Declared: t, Type: t} }

// NewNode returns a node of the default domain.
func NewNode(name, op string, inputs, outputs []string, attrs ...*Attribute) *Node {
	return &Node{Name: name, OpType: op, Inputs: inputs, Outputs: outputs, Attrs: attrs}
}
