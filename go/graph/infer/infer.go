package infer

import (
	"fmt"
	"runtime/debug"

	"github.com/loomrt/loom/go/graph"
)

// Shapes derives the type and shape of every value from the graph inputs, initializers
// and operator semantics, walking subgraphs with their outer scope. Dimensions stay symbolic
// where inputs are (a named dimension flows through, arithmetic on it becomes an expression),
// and small integer tensors computed from shapes (Shape, Gather, Concat, ...) are tracked so
// that Reshape, Expand, Slice and the like get static or symbolic outputs. Each value's
// Inferred type records what inference found on its own; Type merges it with what the model
// declared. A declared type that contradicts the inferred one (element type, rank, or a known
// dimension) is an error naming the node and value.
func Shapes(m *graph.Model) error { return ShapesFor(m, Signature{}) }

// Check checks m (graph.Model.Check), infers its shapes and types, and checks it again with
// them: the values the model leaves untyped get their inferred types, and an operator fed a
// type its schema does not allow (an int8 GlobalAveragePool after an int8 Div) is an error
// naming it.
func Check(m *graph.Model) error {
	if err := m.Check(); err != nil {
		return err
	}
	if err := Shapes(m); err != nil {
		return fmt.Errorf("shape inference failed: %w", err)
	}
	if err := m.Check(); err != nil {
		return fmt.Errorf("with its inferred types: %w", err)
	}
	return nil
}

// Signature binds graph inputs for inference: concrete shapes, and values for small inputs
// that steer control flow or shapes (a sample rate choosing an If branch, say).
type Signature struct {
	Shapes map[string]graph.Shape
	Values map[string]*graph.Tensor
	// Resolved says the model is resolved as it stands (graph.Model.Resolve ran after the
	// last change to its nodes, values or initializers, as Load and every pass leave it), so
	// ShapesFor does not resolve it again: a session infers a loaded model's shapes for each
	// new input shape, on a copy of its value records.
	Resolved bool
}

// ShapesFor is Shapes with graph inputs bound by a signature, which must agree with what the
// model declares for them. Call Shapes again to return to the declared, possibly
// symbolic, shapes.
func ShapesFor(m *graph.Model, sig Signature) (err error) {
	inputs := map[string]graph.Shape{}
	for name, s := range sig.Shapes {
		inputs[name] = s
	}
	for name, t := range sig.Values {
		if t == nil {
			return &graph.Error{Model: m.Name, Value: name, Msg: "nil value"}
		}
		if s, ok := inputs[name]; ok && !s.Static() || ok && s.String() != t.Shape().String() {
			return &graph.Error{Model: m.Name, Value: name, Msg: fmt.Sprintf("value of shape %v contradicts shape %v", t.Shape(), s)}
		}
		inputs[name] = t.Shape()
	}
	if m.Graph == nil {
		return &graph.Error{Model: m.Name, Msg: "model has no graph"}
	}
	if !sig.Resolved {
		if err := m.Resolve(); err != nil {
			return err
		}
	}
	defer func() {
		if r := recover(); r != nil {
			err = &graph.Error{Model: m.Name, Msg: fmt.Sprintf("internal error in shape inference: %v\n%s", r, debug.Stack())}
		}
	}()
	el := &graph.ErrorList{}
	inf := &inferrer{m: m, el: el, lim: graph.DefaultLimits()}
	root := &inferScope{g: m.Graph, path: graph.GraphPath(m.Graph, ""), data: map[string]symData{}, consts: map[string]*graph.Tensor{}, fixedInits: m.IRVersion < 4}
	for _, in := range m.Graph.Inputs {
		if in.Initializer == nil || in.Declared.Kind == graph.KindUnknown {
			in.Type = in.Declared.Clone()
		}
		if in.Initializer != nil && in.Declared.Kind == graph.KindUnknown {
			in.Type = in.Initializer.Type()
		}
		if s, ok := inputs[in.Name]; ok {
			bound := graph.TensorType(in.Type.Elem, s.Clone())
			if err := compatible(in.Declared, bound); err != nil {
				return &graph.Error{Model: m.Name, Value: in.Name, Msg: fmt.Sprintf("shape %v does not fit the declared %v: %v", s, in.Declared, err)}
			}
			in.Type = mergeTypes(in.Declared, bound)
			for i, d := range s {
				in.Type.Shape[i] = d
			}
		}
	}
	for name := range inputs {
		if v := m.Graph.Values[name]; v == nil || !m.Graph.IsInput(name) {
			return &graph.Error{Model: m.Name, Value: name, Msg: "no graph input of this name"}
		}
	}
	for name, t := range sig.Values {
		if v := m.Graph.Values[name]; v != nil && v.Type.Elem != graph.Undefined && v.Type.Elem != t.DType {
			return &graph.Error{Model: m.Name, Value: name, Msg: fmt.Sprintf("value of type %v for an input of type %v", t.DType, v.Type.Elem)}
		}
		root.consts[name] = t
		if d, ok := tensorSymData(t); ok {
			root.data[name] = d
		}
	}
	inf.graph(root)
	return el.Err()
}

type inferrer struct {
	m   *graph.Model
	el  *graph.ErrorList
	lim graph.Limits
}

// inferScope is one graph being inferred, with the constants and tracked integer contents
// known in it.
type inferScope struct {
	g      *graph.Graph
	parent *inferScope
	path   string
	data   map[string]symData
	consts map[string]*graph.Tensor
	depth  int // subgraph nesting
	// fixedInits: before IR version 4 every initializer had to be listed as a graph input, so
	// such inputs are constants rather than overridable defaults.
	fixedInits bool
}

func (s *inferScope) lookupData(name string) (symData, bool) {
	for c := s; c != nil; c = c.parent {
		if d, ok := c.data[name]; ok {
			return d, true
		}
		if _, defined := c.g.Values[name]; defined {
			break // shadowed: the inner definition is not tracked
		}
	}
	return symData{}, false
}

func (s *inferScope) lookupConst(name string) *graph.Tensor {
	for c := s; c != nil; c = c.parent {
		if t, ok := c.consts[name]; ok {
			return t
		}
		if t, ok := c.g.Initializers[name]; ok {
			if c.g.IsInput(name) && !c.fixedInits {
				return nil // an input with a default value may be overridden at run time
			}
			return t
		}
		if _, defined := c.g.Values[name]; defined {
			return nil
		}
	}
	return nil
}

const maxTrackedElements = 1024

func (inf *inferrer) graph(s *inferScope) {
	g := s.g
	for _, name := range g.InitOrder {
		t := g.Initializers[name]
		if g.IsInput(name) && !s.fixedInits {
			continue
		}
		if d, ok := tensorSymData(t); ok {
			s.data[name] = d
		}
	}
	for _, n := range g.Nodes {
		c := &inferNode{inf: inf, s: s, n: n}
		c.opset = inf.m.Opset(n.Domain)
		if err := c.run(); err != nil {
			if e, ok := err.(*graph.Error); ok {
				inf.el.Add(e)
			} else {
				inf.el.Add(c.errorf("", "%v", err))
			}
		}
	}
	for _, o := range g.Outputs {
		if v := g.Value(o.Name); v != nil && v != o {
			o.Inferred = v.Inferred.Clone()
			if o.Declared.Kind == graph.KindUnknown {
				o.Type = v.Type.Clone()
			} else {
				o.Type = mergeTypes(o.Declared, v.Type)
			}
		}
	}
}

// tensorSymData tracks a small integer constant.
func tensorSymData(t *graph.Tensor) (symData, bool) {
	if t == nil || !(t.DType == graph.Int64 || t.DType == graph.Int32 || t.DType == graph.Bool) || len(t.Dims) > 1 || t.NumElements() > maxTrackedElements {
		return symData{}, false
	}
	vals, err := t.Int64s()
	if err != nil {
		return symData{}, false
	}
	d := symData{scalar: len(t.Dims) == 0}
	for _, v := range vals {
		d.vals = append(d.vals, knownInt(v))
	}
	return d, true
}

// inferNode is the inference of one node.
type inferNode struct {
	inf   *inferrer
	s     *inferScope
	n     *graph.Node
	opset int64
}

func (c *inferNode) errorf(value, format string, args ...any) *graph.Error {
	return &graph.Error{Model: c.inf.m.Name, Graph: c.s.path, Node: c.n.Label(), Op: c.n.OpType, Value: value, Msg: fmt.Sprintf(format, args...)}
}

func (c *inferNode) run() error {
	fn := inferFuncs[c.n.OpType]
	if c.n.Domain == "ai.onnx.ml" {
		fn = inferMLFuncs[c.n.OpType]
	} else if c.n.Domain == graph.LoomDomain {
		fn = inferLoomFuncs[c.n.OpType]
	} else if c.n.Domain == graph.MSDomain {
		fn = inferMSFuncs[c.n.OpType]
	} else if c.n.Domain != "" && c.n.Domain != "ai.onnx.preview.training" {
		fn = nil
	}
	if fn == nil {
		// No rule: outputs keep their declared types only.
		for _, o := range c.n.Outputs {
			if v := c.s.g.Values[o]; v != nil && o != "" {
				v.Type = v.Declared.Clone()
			}
		}
		return nil
	}
	return fn(c)
}

func (c *inferNode) has(i int) bool { return i < len(c.n.Inputs) && c.n.Inputs[i] != "" }

func (c *inferNode) numIn() int { return len(c.n.Inputs) }

// in returns the current type of input i (unknown when absent).
func (c *inferNode) in(i int) graph.Type {
	if !c.has(i) {
		return graph.Type{}
	}
	if v := c.s.g.Value(c.n.Inputs[i]); v != nil {
		return v.Type
	}
	return graph.Type{}
}

// shape returns input i's shape when its rank is known.
func (c *inferNode) shape(i int) (graph.Shape, bool) {
	t := c.in(i)
	if t.Kind != graph.KindTensor || !t.Ranked {
		return nil, false
	}
	return t.Shape, true
}

func (c *inferNode) elem(i int) graph.DataType { return c.in(i).Elem }

// data returns the tracked contents of a small integer input.
func (c *inferNode) data(i int) (symData, bool) {
	if !c.has(i) {
		return symData{}, false
	}
	return c.s.lookupData(c.n.Inputs[i])
}

// ints returns the contents of input i when every element is a known number.
func (c *inferNode) ints(i int) ([]int64, bool) {
	d, ok := c.data(i)
	if !ok {
		return nil, false
	}
	out := make([]int64, len(d.vals))
	for j, v := range d.vals {
		if !v.known {
			return nil, false
		}
		out[j] = v.v
	}
	return out, true
}

// constant returns input i's value when it is a constant (initializer or Constant output).
func (c *inferNode) constant(i int) *graph.Tensor {
	if !c.has(i) {
		return nil
	}
	return c.s.lookupConst(c.n.Inputs[i])
}

// out sets output i's inferred type, checking it against any declared type.
func (c *inferNode) out(i int, t graph.Type) error {
	if i >= len(c.n.Outputs) || c.n.Outputs[i] == "" {
		return nil
	}
	name := c.n.Outputs[i]
	v := c.s.g.Values[name]
	if v == nil {
		return nil
	}
	if t.Kind == graph.KindTensor && t.Ranked && len(t.Shape) > c.inf.lim.MaxRank {
		return c.errorf(name, "inferred rank %d over the limit of %d", len(t.Shape), c.inf.lim.MaxRank)
	}
	v.Inferred = t.Clone()
	if err := compatible(v.Declared, t); err != nil {
		return c.errorf(name, "declared type %v contradicts inferred type %v: %v", v.Declared, t, err)
	}
	v.Type = mergeTypes(v.Declared, t)
	return nil
}

func (c *inferNode) outData(i int, d symData) {
	if i < len(c.n.Outputs) && c.n.Outputs[i] != "" && len(d.vals) <= maxTrackedElements {
		c.s.data[c.n.Outputs[i]] = d
	}
}

// compatible reports a contradiction between a declared and an inferred type.
func compatible(decl, inf graph.Type) error {
	if decl.Kind == graph.KindUnknown || inf.Kind == graph.KindUnknown {
		return nil
	}
	if decl.Kind != inf.Kind {
		return fmt.Errorf("kinds differ")
	}
	switch decl.Kind {
	case graph.KindTensor, graph.KindSparseTensor:
		if decl.Elem != graph.Undefined && inf.Elem != graph.Undefined && decl.Elem != inf.Elem {
			return fmt.Errorf("element types %v and %v", decl.Elem, inf.Elem)
		}
		if decl.Ranked && inf.Ranked {
			if len(decl.Shape) != len(inf.Shape) {
				return fmt.Errorf("ranks %d and %d", len(decl.Shape), len(inf.Shape))
			}
			for i := range decl.Shape {
				if decl.Shape[i].Known() && inf.Shape[i].Known() && decl.Shape[i].Value != inf.Shape[i].Value {
					return fmt.Errorf("dimension %d is %d, inferred %d", i, decl.Shape[i].Value, inf.Shape[i].Value)
				}
			}
		}
	case graph.KindSequence, graph.KindOptional, graph.KindMap:
		if decl.Inner != nil && inf.Inner != nil {
			return compatible(*decl.Inner, *inf.Inner)
		}
	}
	return nil
}

// mergeTypes combines a declared and an inferred type, taking the more precise information of
// each: known element types and ranks, numeric dimensions first, then declared names.
func mergeTypes(decl, inf graph.Type) graph.Type {
	if decl.Kind == graph.KindUnknown {
		return inf.Clone()
	}
	if inf.Kind == graph.KindUnknown || inf.Kind != decl.Kind {
		return decl.Clone()
	}
	out := inf.Clone()
	switch decl.Kind {
	case graph.KindTensor, graph.KindSparseTensor:
		if out.Elem == graph.Undefined {
			out.Elem = decl.Elem
		}
		if !out.Ranked {
			out.Ranked, out.Shape = decl.Ranked, decl.Shape.Clone()
		} else if decl.Ranked && len(decl.Shape) == len(out.Shape) {
			for i, d := range decl.Shape {
				o := out.Shape[i]
				if !o.Known() && (d.Known() || d.Param != "") {
					out.Shape[i] = d
				}
			}
		}
	case graph.KindSequence, graph.KindOptional, graph.KindMap:
		if decl.Inner != nil && out.Inner != nil {
			in := mergeTypes(*decl.Inner, *out.Inner)
			out.Inner = &in
		} else if out.Inner == nil && decl.Inner != nil {
			in := decl.Inner.Clone()
			out.Inner = &in
		}
		if out.Key == graph.Undefined {
			out.Key = decl.Key
		}
	}
	return out
}
