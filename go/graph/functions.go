package graph

import (
	"fmt"
	"strings"
)

// Model-local functions (FunctionProto) are expanded when a model loads: every node whose
// (domain, op_type, overload) names a function of the model is replaced by the function's body,
// with the function's formal inputs and outputs bound to the node's actual ones, attribute
// references (ref_attr_name) bound to the node's attributes (or the function's defaults),
// every other value and node of the body given a fresh name unique in the model, and calls
// inside the body (and inside its subgraphs) expanded in turn. A function that calls itself,
// directly or through others, a node that passes an attribute the function does not declare,
// a body that reads a name it does not define, and a function whose opset imports disagree
// with the model's for an operator the body uses are errors naming the node and the function.

// funcKey names a model-local function: domain (ai.onnx as ""), name, overload.
type funcKey struct{ domain, name, overload string }

func (k funcKey) String() string {
	s := k.name
	if k.domain != "" {
		s = k.domain + "." + s
	}
	if k.overload != "" {
		s += ":" + k.overload
	}
	return s
}

func normDomain(d string) string {
	if d == "ai.onnx" {
		return ""
	}
	return d
}

// expander expands the function calls of one model.
type expander struct {
	m     *Model
	lim   Limits
	funcs map[funcKey]*Function
	// names holds every value name in use anywhere in the model; nodeNames every node name.
	names, nodeNames map[string]bool
	nodes            int // nodes of the model, kept up to date as calls are expanded
	// opsetsChecked records the functions whose opset imports were merged into the model's.
	opsetsChecked map[*Function]bool
}

// ExpandFunctions replaces every call of a model-local function, in the main graph and its
// subgraphs, by the function's body (see the rules above). Load calls it; a model built in
// code may call it before Resolve. Functions stay listed in m.Functions.
func (m *Model) ExpandFunctions() error { return expandFunctions(m, DefaultLimits()) }

func expandFunctions(m *Model, lim Limits) error {
	if len(m.Functions) == 0 || m.Graph == nil {
		return nil
	}
	e := &expander{m: m, lim: lim, funcs: map[funcKey]*Function{}, names: map[string]bool{}, nodeNames: map[string]bool{}, opsetsChecked: map[*Function]bool{}}
	for _, f := range m.Functions {
		k := funcKey{normDomain(f.Domain), f.Name, f.Overload}
		if _, dup := e.funcs[k]; dup {
			return &Error{Model: m.Name, Msg: fmt.Sprintf("function %s is defined twice", k)}
		}
		e.funcs[k] = f
	}
	if !e.hasCalls(m.Graph) {
		return nil
	}
	m.Graph.Walk(func(g *Graph) {
		for _, in := range g.Inputs {
			e.names[in.Name] = true
		}
		for _, o := range g.Outputs {
			e.names[o.Name] = true
		}
		for name := range g.Initializers {
			e.names[name] = true
		}
		for name := range g.Values {
			e.names[name] = true
		}
		for _, n := range g.Nodes {
			e.nodes++
			e.nodeNames[n.Name] = true
			for _, s := range n.Inputs {
				e.names[s] = true
			}
			for _, s := range n.Outputs {
				e.names[s] = true
			}
		}
	})
	for _, f := range m.Functions {
		for _, n := range f.Nodes {
			e.nodeNames[n.Name] = true
		}
	}
	return e.graph(m.Graph, GraphPath(m.Graph, ""), nil)
}

// hasCalls reports whether g or its subgraphs call a function.
func (e *expander) hasCalls(g *Graph) bool {
	found := false
	g.Walk(func(s *Graph) {
		for _, n := range s.Nodes {
			if e.funcOf(n) != nil {
				found = true
			}
		}
	})
	return found
}

func (e *expander) funcOf(n *Node) *Function {
	return e.funcs[funcKey{normDomain(n.Domain), n.OpType, n.Overload}]
}

// graph expands the calls among g's nodes and inside their subgraphs; stack lists the
// functions being expanded around g (for recursion).
func (e *expander) graph(g *Graph, path string, stack []funcKey) error {
	var out []*Node
	for _, n := range g.Nodes {
		for _, sg := range n.Subgraphs() {
			if err := e.graph(sg, GraphPath(sg, path+"/"+n.Label()), stack); err != nil {
				return err
			}
		}
		if e.funcOf(n) == nil {
			out = append(out, n)
			continue
		}
		body, err := e.call(n, path, stack)
		if err != nil {
			return err
		}
		out = append(out, body...)
	}
	g.Nodes = out
	return nil
}

func (e *expander) errorf(path string, n *Node, f *Function, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if f != nil {
		msg = fmt.Sprintf("function %s: %s", funcKey{normDomain(f.Domain), f.Name, f.Overload}, msg)
	}
	return &Error{Model: e.m.Name, Graph: path, Node: n.Label(), Op: n.OpType, Msg: msg}
}

// fresh returns a value name unique in the model, built from base.
func (e *expander) fresh(base string) string {
	name := base
	for k := 1; e.names[name]; k++ {
		name = fmt.Sprintf("%s_%d", base, k)
	}
	e.names[name] = true
	return name
}

func (e *expander) freshNode(base string) string {
	name := base
	for k := 1; e.nodeNames[name]; k++ {
		name = fmt.Sprintf("%s_%d", base, k)
	}
	e.nodeNames[name] = true
	return name
}

// scope binds the names a function body (or a subgraph inside it) reads and defines to their
// names in the model; parent is the enclosing scope (nil at the body's top).
type scope struct {
	names  map[string]string
	parent *scope
}

func (s *scope) lookup(name string) (string, bool) {
	for ; s != nil; s = s.parent {
		if v, ok := s.names[name]; ok {
			return v, true
		}
	}
	return "", false
}

// call returns the body of f bound to node n's inputs, outputs and attributes, with the calls
// inside it expanded.
func (e *expander) call(n *Node, path string, stack []funcKey) ([]*Node, error) {
	f := e.funcOf(n)
	k := funcKey{normDomain(f.Domain), f.Name, f.Overload}
	for i, s := range stack {
		if s == k {
			chain := make([]string, 0, len(stack)-i+1)
			for _, c := range stack[i:] {
				chain = append(chain, c.String())
			}
			chain = append(chain, k.String())
			return nil, e.errorf(path, n, f, "calls itself (%s): recursive functions cannot be expanded", strings.Join(chain, " -> "))
		}
	}
	stack = append(stack[:len(stack):len(stack)], k)
	if len(n.Inputs) > len(f.Inputs) {
		return nil, e.errorf(path, n, f, "the node has %d inputs, the function takes %d", len(n.Inputs), len(f.Inputs))
	}
	if len(n.Outputs) > len(f.Outputs) {
		return nil, e.errorf(path, n, f, "the node has %d outputs, the function returns %d", len(n.Outputs), len(f.Outputs))
	}
	declared := map[string]bool{}
	for _, a := range f.Attributes {
		declared[a] = true
	}
	defaults := map[string]*Attribute{}
	for _, a := range f.AttrDefaults {
		declared[a.Name] = true
		defaults[a.Name] = a
	}
	given := map[string]*Attribute{}
	for _, a := range n.Attrs {
		if !declared[a.Name] {
			return nil, e.errorf(path, n, f, "attribute %q is not an attribute of the function (it declares %s)", a.Name, listOr(f))
		}
		given[a.Name] = a
	}
	if err := e.mergeOpsets(f, n, path); err != nil {
		return nil, err
	}
	prefix := n.Name
	if prefix == "" {
		prefix = f.Name
	}
	top := &scope{names: map[string]string{}}
	for i, formal := range f.Inputs {
		top.names[formal] = n.Input(i)
	}
	for i, formal := range f.Outputs {
		if i < len(n.Outputs) && n.Outputs[i] != "" {
			top.names[formal] = n.Outputs[i]
		} else {
			top.names[formal] = e.fresh(prefix + "/" + formal)
		}
	}
	for _, bn := range f.Nodes {
		for _, o := range bn.Outputs {
			if _, bound := top.names[o]; !bound && o != "" {
				top.names[o] = e.fresh(prefix + "/" + o)
			}
		}
	}
	var out []*Node
	for _, bn := range f.Nodes {
		e.nodes++
		if e.nodes > e.lim.MaxNodes {
			return nil, e.errorf(path, n, f, "expanding the function makes more than %d nodes", e.lim.MaxNodes)
		}
		c, err := e.cloneNode(bn, top, given, defaults, declared, prefix, path, n, f)
		if err != nil {
			return nil, err
		}
		for _, sg := range c.Subgraphs() {
			if err := e.graph(sg, GraphPath(sg, path+"/"+c.Label()), stack); err != nil {
				return nil, err
			}
		}
		if e.funcOf(c) != nil {
			body, err := e.call(c, path, stack)
			if err != nil {
				return nil, err
			}
			out = append(out, body...)
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

func listOr(f *Function) string {
	var names []string
	names = append(names, f.Attributes...)
	for _, a := range f.AttrDefaults {
		names = append(names, a.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// cloneNode copies body node bn into the model: its names through sc, its attribute
// references bound to the call's attributes.
func (e *expander) cloneNode(bn *Node, sc *scope, given, defaults map[string]*Attribute, declared map[string]bool, prefix, path string, call *Node, f *Function) (*Node, error) {
	name := bn.Name
	if name == "" {
		name = strings.ToLower(bn.OpType)
	}
	c := &Node{Name: e.freshNode(prefix + "/" + name), OpType: bn.OpType, Domain: bn.Domain, Doc: bn.Doc, Overload: bn.Overload}
	for _, in := range bn.Inputs {
		if in == "" {
			c.Inputs = append(c.Inputs, "")
			continue
		}
		v, ok := sc.lookup(in)
		if !ok {
			return nil, e.errorf(path, call, f, "body node %s reads %q, which is neither an input of the function nor an output of a body node", bn.Label(), in)
		}
		c.Inputs = append(c.Inputs, v)
	}
	for _, o := range bn.Outputs {
		if o == "" {
			c.Outputs = append(c.Outputs, "")
			continue
		}
		v, _ := sc.lookup(o)
		c.Outputs = append(c.Outputs, v)
	}
	for _, a := range bn.Attrs {
		if a.RefAttrName != "" {
			if !declared[a.RefAttrName] {
				return nil, e.errorf(path, call, f, "body node %s's attribute %q refers to %q, which the function does not declare", bn.Label(), a.Name, a.RefAttrName)
			}
			src := given[a.RefAttrName]
			if src == nil {
				src = defaults[a.RefAttrName]
			}
			if src == nil {
				// Not given and no default: the body node's own default applies, unless the
				// body's operator requires the attribute.
				if e.requires(bn, a.Name) {
					return nil, e.errorf(path, call, f, "attribute %q is not given and has no default, but body node %s (%s) requires it as %q", a.RefAttrName, bn.Label(), bn.OpType, a.Name)
				}
				continue
			}
			if a.Type != AttrUndefined && src.Type != a.Type {
				return nil, e.errorf(path, call, f, "attribute %q is %s, but body node %s's %q that refers to it is %s", a.RefAttrName, src.Type, bn.Label(), a.Name, a.Type)
			}
			b := copyAttr(src)
			b.Name, b.RefAttrName = a.Name, ""
			c.Attrs = append(c.Attrs, b)
			continue
		}
		b := *copyAttr(a)
		if a.Graph != nil {
			g, err := e.cloneGraph(a.Graph, sc, given, defaults, declared, prefix, path, call, f)
			if err != nil {
				return nil, err
			}
			b.Graph = g
		}
		if len(a.Graphs) > 0 {
			b.Graphs = make([]*Graph, len(a.Graphs))
			for i, sg := range a.Graphs {
				g, err := e.cloneGraph(sg, sc, given, defaults, declared, prefix, path, call, f)
				if err != nil {
					return nil, err
				}
				b.Graphs[i] = g
			}
		}
		c.Attrs = append(c.Attrs, &b)
	}
	return c, nil
}

// cloneGraph copies a subgraph of a body node with every name it defines renamed fresh and
// every name it reads from the body bound through sc.
func (e *expander) cloneGraph(g *Graph, sc *scope, given, defaults map[string]*Attribute, declared map[string]bool, prefix, path string, call *Node, f *Function) (*Graph, error) {
	inner := &scope{names: map[string]string{}, parent: sc}
	def := func(name string) string {
		if name == "" {
			return ""
		}
		if v, ok := inner.names[name]; ok {
			return v
		}
		v := e.fresh(prefix + "/" + name)
		inner.names[name] = v
		return v
	}
	c := &Graph{Name: g.Name, Doc: g.Doc, Initializers: map[string]*Tensor{}, Values: map[string]*Value{}}
	for _, in := range g.Inputs {
		v := cloneValue(in)
		v.Name = def(in.Name)
		c.Inputs = append(c.Inputs, v)
		c.Values[v.Name] = v
	}
	for _, name := range g.InitOrder {
		t := *g.Initializers[name]
		t.Name = def(name)
		c.Initializers[t.Name] = &t
		c.InitOrder = append(c.InitOrder, t.Name)
	}
	for _, n := range g.Nodes {
		for _, o := range n.Outputs {
			def(o)
		}
	}
	for name, v := range g.Values {
		if mapped, ok := inner.names[name]; ok && c.Values[mapped] == nil {
			cv := cloneValue(v)
			cv.Name = mapped
			c.Values[mapped] = cv
		}
	}
	for _, n := range g.Nodes {
		cn, err := e.cloneNode(n, inner, given, defaults, declared, prefix, path, call, f)
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, cn)
		e.nodes++
	}
	for _, o := range g.Outputs {
		v := cloneValue(o)
		mapped, ok := inner.lookup(o.Name)
		if !ok {
			return nil, e.errorf(path, call, f, "a subgraph of the body returns %q, which the function does not define", o.Name)
		}
		v.Name = mapped
		c.Outputs = append(c.Outputs, v)
	}
	return c, nil
}

// requires reports whether the schema of body node bn's operator (at the model's opset of its
// domain) marks attribute name required.
func (e *expander) requires(bn *Node, name string) bool {
	d := normDomain(bn.Domain)
	if !KnownDomain(d) {
		return false
	}
	s, _ := LookupSchema(d, bn.OpType, e.m.Opsets[d])
	return s != nil && s.Attrs[name].Required
}

// copyAttr copies an attribute with its own lists, so that a pass that edits one expansion's
// attribute in place leaves the function and the other expansions alone. (Graphs are copied
// by cloneGraph; tensors are not edited in place.)
func copyAttr(a *Attribute) *Attribute {
	b := *a
	b.Floats = append([]float32(nil), a.Floats...)
	b.Ints = append([]int64(nil), a.Ints...)
	b.Strings = append([][]byte(nil), a.Strings...)
	b.String = append([]byte(nil), a.String...)
	b.Tensors = append([]*Tensor(nil), a.Tensors...)
	b.Sparses = append([]*SparseTensor(nil), a.Sparses...)
	b.TypeProtos = append([]*Type(nil), a.TypeProtos...)
	return &b
}

func cloneValue(v *Value) *Value {
	return &Value{Name: v.Name, Type: v.Type.Clone(), Declared: v.Declared.Clone(), Inferred: v.Inferred.Clone(), Doc: v.Doc}
}

// mergeOpsets makes the model import the domains f imports, once per function: a domain the
// model lacks is added at f's version; a domain both import at different versions is accepted
// only when every operator of that domain in f's body has the same schema version under both.
func (e *expander) mergeOpsets(f *Function, call *Node, path string) error {
	if e.opsetsChecked[f] {
		return nil
	}
	e.opsetsChecked[f] = true
	for d, v := range f.Opsets {
		d = normDomain(d)
		mv, ok := e.m.Opsets[d]
		if !ok {
			e.m.Opsets[d] = v
			continue
		}
		if mv == v || !KnownDomain(d) {
			continue
		}
		for _, bn := range f.Nodes {
			if normDomain(bn.Domain) != d || e.funcOf(bn) != nil {
				continue
			}
			fs, _ := LookupSchema(d, bn.OpType, v)
			ms, _ := LookupSchema(d, bn.OpType, mv)
			if fs == nil || ms == nil || fs.Since != ms.Since {
				var fv, mvs int64
				if fs != nil {
					fv = fs.Since
				}
				if ms != nil {
					mvs = ms.Since
				}
				return e.errorf(path, call, f, "it imports %s opset %d and the model %d, under which body node %s's %s resolves to different versions (%d and %d)", domainName(d), v, mv, bn.Label(), bn.OpType, fv, mvs)
			}
		}
	}
	return nil
}
