package graph

import (
	"errors"
	"sort"

	"github.com/loomrt/loom/go/graph/internal/modelmem"
)

// Model is a loaded ONNX model: metadata, opset imports and the main graph. A model whose
// weights are mmapped from external files, or whose large weights its file loader keeps
// outside the Go heap, should be closed to release that memory (see Close).
type Model struct {
	Name            string // the file name for Load, "" for LoadBytes unless the graph is named
	IRVersion       int64
	ProducerName    string
	ProducerVersion string
	Domain          string
	ModelVersion    int64
	Doc             string
	MetadataProps   map[string]string
	Opsets          map[string]int64 // domain ("" for ai.onnx) -> imported version
	Graph           *Graph
	Functions       []*Function
	// Passes records the optimization passes applied, in order.
	Passes []PassResult

	mappings *modelmem.Mappings
	// weights holds the initializers the loader copied out of a mapped model file, outside
	// the Go heap (modelmem.Store).
	weights *modelmem.Store
}

// Function is a model-local function (FunctionProto). Loading expands every call of it (see
// ExpandFunctions); the model keeps it for inspection.
type Function struct {
	Name, Domain string
	Overload     string // with Name and Domain, what a calling node names (IR 10)
	Inputs       []string
	Outputs      []string
	Attributes   []string     // attributes without a default
	AttrDefaults []*Attribute // attributes with a default (attribute_proto)
	Nodes        []*Node
	Opsets       map[string]int64
}

// Close releases mmapped external weights and the memory of the large initializers a model
// file's loader copied out of the file (outside the Go heap). It is safe to call more than
// once; tensors that aliased that memory must not be used afterwards. A model not closed gives
// that memory back once neither it nor any of those tensors is reachable.
func (m *Model) Close() error {
	if m == nil {
		return nil
	}
	err := m.weights.Release()
	if m.mappings != nil {
		err = errors.Join(m.mappings.Close(), err)
	}
	return err
}

// Opset returns the imported version of a domain ("" and "ai.onnx" are the same), 0 when the
// domain is not imported.
func (m *Model) Opset(domain string) int64 {
	if domain == "ai.onnx" {
		domain = ""
	}
	return m.Opsets[domain]
}

// Graph is a computation graph in static single assignment form: every value name is defined
// once in its scope, by a graph input, an initializer or a node output. Nodes are kept in
// topological order.
type Graph struct {
	Name    string
	Doc     string
	Inputs  []*Value // graph inputs; an input that is also an initializer has Initializer set
	Outputs []*Value
	// Initializers holds constant tensors by name; InitOrder keeps the file order.
	Initializers map[string]*Tensor
	InitOrder    []string
	Nodes        []*Node
	// Values holds type information for every name defined in this graph's scope (inputs,
	// initializers, node outputs), from the model's value_info and from shape inference.
	Values map[string]*Value
	// Parent is the graph of the node that owns this subgraph; nil for the main graph.
	Parent *Graph
	// OuterRefs lists the names a subgraph (or its own subgraphs) reads from enclosing scopes,
	// sorted; resolved on load.
	OuterRefs []string
}

// Value is a named value with its type. Declared is what the model stated (graph inputs and
// outputs, value_info); Type is the best known type after inference; Inferred is what inference
// derived on its own (for comparison with Declared).
type Value struct {
	Name        string
	Type        Type
	Declared    Type
	Inferred    Type
	Doc         string
	Producer    *Node   // nil for graph inputs and initializers
	Initializer *Tensor // set for constants
}

// Node is one operator application.
type Node struct {
	Name    string
	OpType  string
	Domain  string // "" for ai.onnx
	Inputs  []string
	Outputs []string
	Attrs   []*Attribute
	Doc     string
	// Overload, with Domain and OpType, names the model-local function a node calls (IR 10).
	Overload string
}

// Attr returns the named attribute or nil.
func (n *Node) Attr(name string) *Attribute {
	for _, a := range n.Attrs {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// AttrInt returns an INT attribute or def when absent.
func (n *Node) AttrInt(name string, def int64) int64 {
	if a := n.Attr(name); a != nil && a.Type == AttrInt {
		return a.Int
	}
	return def
}

// AttrFloat returns a FLOAT attribute or def when absent.
func (n *Node) AttrFloat(name string, def float32) float32 {
	if a := n.Attr(name); a != nil && a.Type == AttrFloat {
		return a.Float
	}
	return def
}

// AttrString returns a STRING attribute or def when absent.
func (n *Node) AttrString(name string, def string) string {
	if a := n.Attr(name); a != nil && a.Type == AttrString {
		return string(a.String)
	}
	return def
}

// AttrInts returns an INTS attribute or nil when absent.
func (n *Node) AttrInts(name string) []int64 {
	if a := n.Attr(name); a != nil && a.Type == AttrInts {
		return a.Ints
	}
	return nil
}

// AttrFloats returns a FLOATS attribute or nil when absent.
func (n *Node) AttrFloats(name string) []float32 {
	if a := n.Attr(name); a != nil && a.Type == AttrFloats {
		return a.Floats
	}
	return nil
}

// SetAttr replaces or adds an attribute.
func (n *Node) SetAttr(a *Attribute) {
	for i, o := range n.Attrs {
		if o.Name == a.Name {
			n.Attrs[i] = a
			return
		}
	}
	n.Attrs = append(n.Attrs, a)
}

// Input returns the i-th input name, or "" when absent or omitted.
func (n *Node) Input(i int) string {
	if i < len(n.Inputs) {
		return n.Inputs[i]
	}
	return ""
}

// Subgraphs returns the graphs held by GRAPH and GRAPHS attributes (If branches, Loop and Scan
// bodies), in attribute order.
func (n *Node) Subgraphs() []*Graph {
	var gs []*Graph
	for _, a := range n.Attrs {
		if a.Graph != nil {
			gs = append(gs, a.Graph)
		}
		gs = append(gs, a.Graphs...)
	}
	return gs
}

// HasSubgraphs reports whether the node carries graphs (what Subgraphs returns), without
// collecting them.
func (n *Node) HasSubgraphs() bool {
	for _, a := range n.Attrs {
		if a.Graph != nil || len(a.Graphs) > 0 {
			return true
		}
	}
	return false
}

// ImplicitInputs returns the outer-scope names that the node's subgraphs read.
func (n *Node) ImplicitInputs() []string {
	var names []string
	seen := map[string]bool{}
	for _, g := range n.Subgraphs() {
		for _, r := range g.OuterRefs {
			if !seen[r] {
				seen[r] = true
				names = append(names, r)
			}
		}
	}
	sort.Strings(names)
	return names
}

// Label names the node in messages: its name, or its first output when unnamed.
func (n *Node) Label() string {
	if n.Name != "" {
		return n.Name
	}
	if len(n.Outputs) > 0 {
		return "<output " + n.Outputs[0] + ">"
	}
	return "<unnamed>"
}

// AttrType is an ONNX attribute type; the values are those of AttributeProto.AttributeType.
type AttrType int32

// The ONNX attribute types.
const (
	AttrUndefined     AttrType = 0
	AttrFloat         AttrType = 1
	AttrInt           AttrType = 2
	AttrString        AttrType = 3
	AttrTensor        AttrType = 4
	AttrGraph         AttrType = 5
	AttrFloats        AttrType = 6
	AttrInts          AttrType = 7
	AttrStrings       AttrType = 8
	AttrTensors       AttrType = 9
	AttrGraphs        AttrType = 10
	AttrSparseTensor  AttrType = 11
	AttrSparseTensors AttrType = 12
	AttrTypeProto     AttrType = 13
	AttrTypeProtos    AttrType = 14
)

var attrTypeNames = map[AttrType]string{
	AttrUndefined: "UNDEFINED", AttrFloat: "FLOAT", AttrInt: "INT", AttrString: "STRING",
	AttrTensor: "TENSOR", AttrGraph: "GRAPH", AttrFloats: "FLOATS", AttrInts: "INTS",
	AttrStrings: "STRINGS", AttrTensors: "TENSORS", AttrGraphs: "GRAPHS",
	AttrSparseTensor: "SPARSE_TENSOR", AttrSparseTensors: "SPARSE_TENSORS",
	AttrTypeProto: "TYPE_PROTO", AttrTypeProtos: "TYPE_PROTOS",
}

// String returns the ONNX spelling (FLOAT, INTS, GRAPH, ...).
func (t AttrType) String() string {
	if s, ok := attrTypeNames[t]; ok {
		return s
	}
	return "AttrType(?)"
}

// Attribute is a typed node attribute; only the field matching Type is meaningful. Sparse tensor
// attributes keep their values and indices tensors.
type Attribute struct {
	Name        string
	Type        AttrType
	RefAttrName string // set inside functions: the value comes from the caller's attribute
	Doc         string
	Float       float32
	Int         int64
	String      []byte
	Tensor      *Tensor
	Sparse      *SparseTensor
	Graph       *Graph
	TypeProto   *Type
	Floats      []float32
	Ints        []int64
	Strings     [][]byte
	Tensors     []*Tensor
	Sparses     []*SparseTensor
	Graphs      []*Graph
	TypeProtos  []*Type
}

// SparseTensor is a COO sparse constant: Values (1-D) at Indices (1-D linear or 2-D [NNZ,rank]).
type SparseTensor struct {
	Values  *Tensor
	Indices *Tensor
	Dims    []int64
}

// IntAttr returns an INT attribute.
func IntAttr(name string, v int64) *Attribute { return &Attribute{Name: name, Type: AttrInt, Int: v} }

// FloatAttr returns a FLOAT attribute.
func FloatAttr(name string, v float32) *Attribute {
	return &Attribute{Name: name, Type: AttrFloat, Float: v}
}

// IntsAttr returns an INTS attribute.
func IntsAttr(name string, v ...int64) *Attribute {
	return &Attribute{Name: name, Type: AttrInts, Ints: v}
}

// StringAttr returns a STRING attribute.
func StringAttr(name, v string) *Attribute {
	return &Attribute{Name: name, Type: AttrString, String: []byte(v)}
}

// TensorAttr returns a TENSOR attribute.
func TensorAttr(name string, t *Tensor) *Attribute {
	return &Attribute{Name: name, Type: AttrTensor, Tensor: t}
}

// Value returns the value record of a name visible in this graph's scope, walking out to
// enclosing graphs; nil when undefined.
func (g *Graph) Value(name string) *Value {
	for s := g; s != nil; s = s.Parent {
		if v, ok := s.Values[name]; ok {
			return v
		}
	}
	return nil
}

// Initializer returns the constant tensor bound to name in this graph or an enclosing one.
func (g *Graph) Initializer(name string) *Tensor {
	for s := g; s != nil; s = s.Parent {
		if t, ok := s.Initializers[name]; ok {
			return t
		}
	}
	return nil
}

// AddInitializer binds a constant in this graph, replacing any earlier binding of the name.
func (g *Graph) AddInitializer(t *Tensor) {
	if g.Initializers == nil {
		g.Initializers = map[string]*Tensor{}
	}
	if _, ok := g.Initializers[t.Name]; !ok {
		g.InitOrder = append(g.InitOrder, t.Name)
	}
	g.Initializers[t.Name] = t
	v := g.ensureValue(t.Name)
	v.Initializer = t
	v.Producer = nil
	v.Type = t.Type()
}

// RemoveInitializer drops a constant binding.
func (g *Graph) RemoveInitializer(name string) {
	if _, ok := g.Initializers[name]; !ok {
		return
	}
	delete(g.Initializers, name)
	for i, n := range g.InitOrder {
		if n == name {
			g.InitOrder = append(g.InitOrder[:i:i], g.InitOrder[i+1:]...)
			break
		}
	}
	if v := g.Values[name]; v != nil {
		v.Initializer = nil
		if !g.IsInput(name) {
			delete(g.Values, name)
		}
	}
}

// IsInput reports whether name is one of the graph's inputs.
func (g *Graph) IsInput(name string) bool {
	for _, in := range g.Inputs {
		if in.Name == name {
			return true
		}
	}
	return false
}

// IsOutput reports whether name is one of the graph's outputs.
func (g *Graph) IsOutput(name string) bool {
	for _, o := range g.Outputs {
		if o.Name == name {
			return true
		}
	}
	return false
}

func (g *Graph) ensureValue(name string) *Value {
	if g.Values == nil {
		g.Values = map[string]*Value{}
	}
	v := g.Values[name]
	if v == nil {
		v = &Value{Name: name}
		g.Values[name] = v
	}
	return v
}

// Walk calls fn for g and every nested subgraph, depth first, parents before children.
func (g *Graph) Walk(fn func(*Graph)) {
	fn(g)
	for _, n := range g.Nodes {
		for _, sg := range n.Subgraphs() {
			sg.Walk(fn)
		}
	}
}

// NodeCount counts the nodes of g and of all its subgraphs.
func (g *Graph) NodeCount() int {
	c := 0
	g.Walk(func(s *Graph) { c += len(s.Nodes) })
	return c
}

// Consumers maps each value name to the nodes of this graph that read it, counting reads from
// inside their subgraphs as reads by the node.
func (g *Graph) Consumers() map[string][]*Node {
	m := map[string][]*Node{}
	for _, n := range g.Nodes {
		seen := map[string]bool{}
		for _, in := range append(append([]string{}, n.Inputs...), n.ImplicitInputs()...) {
			if in != "" && !seen[in] {
				seen[in] = true
				m[in] = append(m[in], n)
			}
		}
	}
	return m
}
