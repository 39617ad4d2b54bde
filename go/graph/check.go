package graph

import (
	"fmt"
	"strings"
)

// Check validates the model against the operator schemas of its imported opsets: every node's
// operator exists in the imported version of its domain (ai.onnx, ai.onnx.ml and the
// ai.onnx.preview domains, whose schemas come from ONNX 1.22, are checked in full; other
// imported domains and model-local functions are accepted), required inputs and
// outputs are present and counts fit, attributes are known and of the declared types, required
// attributes are given, and the element types of inputs and outputs meet the type constraints
// and agree where they share a type parameter. It also repeats the structural checks of
// loading (duplicate outputs, undefined names, cycles). Errors name the model, graph, node and
// value; several problems come back as a *MultiError.
func (m *Model) Check() error {
	if m.Graph == nil {
		return &Error{Model: m.Name, Msg: "model has no graph"}
	}
	if err := resolve(m); err != nil {
		return err
	}
	if _, err := schemas(); err != nil {
		return err
	}
	el := &ErrorList{}
	for d, v := range m.Opsets {
		if KnownDomain(d) && v > MaxOpset(d) {
			el.Add(&Error{Model: m.Name, Msg: fmt.Sprintf("opset %d of domain %q is newer than the %d Loom knows", v, domainName(d), MaxOpset(d))})
		}
	}
	funcs := map[schemaKey]bool{}
	for _, f := range m.Functions {
		funcs[schemaKey{f.Domain, f.Name}] = true
	}
	c := &checker{m: m, el: el, funcs: funcs}
	c.graph(m.Graph, GraphPath(m.Graph, ""))
	return el.Err()
}

func domainName(d string) string {
	if d == "" {
		return "ai.onnx"
	}
	return d
}

type checker struct {
	m     *Model
	el    *ErrorList
	funcs map[schemaKey]bool
}

func (c *checker) errorf(path string, n *Node, value, format string, args ...any) {
	e := &Error{Model: c.m.Name, Graph: path, Value: value, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Node, e.Op = n.Label(), n.OpType
	}
	c.el.Add(e)
}

func (c *checker) graph(g *Graph, path string) {
	for _, n := range g.Nodes {
		c.node(g, n, path)
		for _, sg := range n.Subgraphs() {
			c.graph(sg, GraphPath(sg, path+"/"+n.Label()))
		}
	}
}

func (c *checker) node(g *Graph, n *Node, path string) {
	dom := n.Domain
	ver, imported := c.m.Opsets[dom]
	if !imported {
		if c.funcs[schemaKey{n.Domain, n.OpType}] {
			return
		}
		c.errorf(path, n, "", "domain %q is not imported by the model", domainName(dom))
		return
	}
	if !KnownDomain(dom) || c.funcs[schemaKey{n.Domain, n.OpType}] {
		return
	}
	s, first := LookupSchema(dom, n.OpType, ver)
	if s == nil {
		if first == 0 && dom == "" && ortONNXDomainOps[n.OpType] {
			return
		}
		if first == 0 {
			c.errorf(path, n, "", "unknown operator %s in domain %q", n.OpType, domainName(dom))
		} else {
			c.errorf(path, n, "", "operator %s does not exist in opset %d of %q (it first appears in opset %d)", n.OpType, ver, domainName(dom), first)
		}
		return
	}
	if s.Deprecated {
		c.errorf(path, n, "", "operator %s is deprecated in opset %d of %q (since opset %d)", n.OpType, ver, domainName(dom), s.Since)
		return
	}
	c.arity(path, n, "input", n.Inputs, s.Inputs, s.MinInputs, s.MaxInputs)
	c.arity(path, n, "output", n.Outputs, s.Outputs, s.MinOutputs, s.MaxOutputs)
	for _, a := range n.Attrs {
		spec, ok := s.Attrs[a.Name]
		if !ok {
			c.errorf(path, n, "", "attribute %q is not defined for %s in opset %d", a.Name, n.OpType, s.Since)
			continue
		}
		if a.RefAttrName == "" && a.Type != spec.Type {
			c.errorf(path, n, "", "attribute %q is %v, want %v", a.Name, a.Type, spec.Type)
		}
	}
	for name, spec := range s.Attrs {
		if spec.Required && n.Attr(name) == nil {
			c.errorf(path, n, "", "required attribute %q is missing", name)
		}
	}
	c.types(g, path, n, s)
}

func (c *checker) arity(path string, n *Node, what string, names []string, formal []FormalParam, min, max int) {
	given := len(names)
	for given > 0 && names[given-1] == "" {
		given-- // trailing omitted optionals do not count
	}
	if given < min {
		missing := ""
		if given < len(formal) {
			missing = formal[given].Name
		}
		c.errorf(path, n, "", "%d %ss given, %s needs at least %d (missing %q)", given, what, n.OpType, min, missing)
		return
	}
	if given > max {
		c.errorf(path, n, "", "%d %ss given, %s takes at most %d", given, what, n.OpType, max)
		return
	}
	for i := 0; i < given; i++ {
		if names[i] != "" {
			continue
		}
		p := formalAt(formal, i)
		if p.Option != ParamOptional {
			c.errorf(path, n, "", "required %s %d (%q) is empty", what, i, p.Name)
		}
	}
}

func formalAt(formal []FormalParam, i int) FormalParam {
	if len(formal) == 0 {
		return FormalParam{}
	}
	if i >= len(formal) {
		return formal[len(formal)-1] // variadic tail
	}
	return formal[i]
}

// TypeString renders a type in the spelling of ONNX type constraints: tensor(float),
// seq(tensor(int64)), optional(seq(tensor(float))), map(string,tensor(float)).
func TypeString(t Type) string {
	switch t.Kind {
	case KindTensor:
		return "tensor(" + t.Elem.String() + ")"
	case KindSparseTensor:
		return "sparse_tensor(" + t.Elem.String() + ")"
	case KindSequence:
		return "seq(" + typeStringPtr(t.Inner) + ")"
	case KindOptional:
		return "optional(" + typeStringPtr(t.Inner) + ")"
	case KindMap:
		return "map(" + t.Key.String() + "," + typeStringPtr(t.Inner) + ")"
	}
	return ""
}

func typeStringPtr(t *Type) string {
	if t == nil {
		return "?"
	}
	return TypeString(*t)
}

// typeKnown reports whether the element types are fully known, so that a constraint can be
// checked without false alarms.
func typeKnown(t Type) bool {
	switch t.Kind {
	case KindTensor, KindSparseTensor:
		return t.Elem != Undefined
	case KindSequence, KindOptional:
		return t.Inner != nil && typeKnown(*t.Inner)
	case KindMap:
		return t.Key != Undefined && t.Inner != nil && typeKnown(*t.Inner)
	}
	return false
}

func (c *checker) types(g *Graph, path string, n *Node, s *OpSchema) {
	bound := map[string]string{}
	boundBy := map[string]string{}
	check := func(what, name string, p FormalParam) {
		if name == "" || p.TypeStr == "" {
			return
		}
		v := g.Value(name)
		if v == nil || !typeKnown(v.Type) {
			return
		}
		ts := TypeString(v.Type)
		if strings.Contains(p.TypeStr, "(") {
			if ts != p.TypeStr {
				c.errorf(path, n, name, "%s %q has type %s, want %s", what, p.Name, ts, p.TypeStr)
			}
			return
		}
		allowed, constrained := s.TypeConstraints[p.TypeStr]
		if constrained && allowed != nil && !contains(allowed, ts) {
			c.errorf(path, n, name, "%s %q has type %s, not allowed for %s (allowed: %s)", what, p.Name, ts, p.TypeStr, strings.Join(allowed, ", "))
			return
		}
		if p.Option == ParamHeterogeneous {
			return // each element has its own type
		}
		if prev, ok := bound[p.TypeStr]; ok && prev != ts {
			c.errorf(path, n, name, "%s %q has type %s but %q bound %s to %s", what, p.Name, ts, boundBy[p.TypeStr], p.TypeStr, prev)
			return
		}
		bound[p.TypeStr] = ts
		boundBy[p.TypeStr] = name
	}
	for i, in := range n.Inputs {
		check("input", in, formalAt(s.Inputs, i))
	}
	for i, out := range n.Outputs {
		check("output", out, formalAt(s.Outputs, i))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
