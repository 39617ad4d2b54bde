package opt

import (
	"math"
	"strconv"

	"github.com/loomrt/loom/go/graph"
)

// constant returns the tensor bound to name when it is a true constant of g's scope (an
// initializer that is not also an overridable graph input).
func constant(g *graph.Graph, name string) *graph.Tensor {
	for s := g; s != nil; s = s.Parent {
		if t, ok := s.Initializers[name]; ok {
			for _, in := range s.Inputs {
				if in.Name == name {
					return nil
				}
			}
			return t
		}
		if _, ok := s.Values[name]; ok {
			return nil
		}
	}
	return nil
}

// scalarConst returns the single value of a constant, if name is one.
func scalarConst(g *graph.Graph, name string) (float64, bool) {
	t := constant(g, name)
	if t == nil || t.NumElements() != 1 {
		return 0, false
	}
	v, err := t.Float64s()
	if err != nil {
		return 0, false
	}
	return v[0], true
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-4*math.Max(1, math.Abs(b)) }

// producerOf returns the node of g that outputs name.
func producerOf(g *graph.Graph, name string) *graph.Node {
	if v := g.Values[name]; v != nil {
		return v.Producer
	}
	return nil
}

// uses counts the readers of each value in g (node inputs, subgraph reads, graph outputs).
func uses(g *graph.Graph) map[string]int {
	u := map[string]int{}
	for _, n := range g.Nodes {
		for _, in := range n.Inputs {
			if in != "" {
				u[in]++
			}
		}
		for _, in := range n.ImplicitInputs() {
			u[in]++
		}
	}
	for _, o := range g.Outputs {
		u[o.Name]++
	}
	return u
}

// singleUse reports whether value is read exactly once and is not a graph output.
func singleUse(g *graph.Graph, u map[string]int, value string) bool {
	return u[value] == 1 && !g.IsOutput(value)
}

// consumersOf returns the nodes of g reading value directly.
func consumersOf(g *graph.Graph, value string) []*graph.Node {
	var out []*graph.Node
	for _, n := range g.Nodes {
		for _, in := range n.Inputs {
			if in == value {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

// renameUses makes every reader of old in g (and in subgraphs that see g's old through their
// outer scope) read repl instead. Graph outputs are not renamed.
func renameUses(g *graph.Graph, old, repl string) {
	for _, n := range g.Nodes {
		for i, in := range n.Inputs {
			if in == old {
				n.Inputs[i] = repl
			}
		}
		for _, sg := range n.Subgraphs() {
			if !definesLocally(sg, old) {
				renameUses(sg, old, repl)
				for _, o := range sg.Outputs {
					if o.Name == old {
						o.Name = repl
					}
				}
			}
		}
	}
}

func definesLocally(g *graph.Graph, name string) bool {
	if _, ok := g.Initializers[name]; ok {
		return true
	}
	for _, in := range g.Inputs {
		if in.Name == name {
			return true
		}
	}
	for _, n := range g.Nodes {
		for _, o := range n.Outputs {
			if o == name {
				return true
			}
		}
	}
	return false
}

// removeNodes drops the marked nodes from g.
func removeNodes(g *graph.Graph, dead map[*graph.Node]bool) {
	if len(dead) == 0 {
		return
	}
	kept := g.Nodes[:0]
	for _, n := range g.Nodes {
		if !dead[n] {
			kept = append(kept, n)
		}
	}
	for i := len(kept); i < len(g.Nodes); i++ {
		g.Nodes[i] = nil
	}
	g.Nodes = kept
}

// takenNames collects every name in use anywhere in the model: values, initializers, graph
// inputs, nodes and their outputs.
func takenNames(m *graph.Model) map[string]bool {
	taken := map[string]bool{}
	m.Graph.Walk(func(g *graph.Graph) {
		for name := range g.Values {
			taken[name] = true
		}
		for name := range g.Initializers {
			taken[name] = true
		}
		for _, v := range g.Inputs {
			taken[v.Name] = true
		}
		for _, n := range g.Nodes {
			taken[n.Name] = true
			for _, o := range n.Outputs {
				taken[o] = true
			}
		}
	})
	return taken
}

// uniqueName returns base, or base with a numeric suffix, unused anywhere in the model.
func uniqueName(m *graph.Model, base string) string {
	taken := takenNames(m)
	if !taken[base] {
		return base
	}
	for i := 1; ; i++ {
		c := base + "_" + strconv.Itoa(i)
		if !taken[c] {
			return c
		}
	}
}

// replaceValue redirects the readers of old to repl. When old is a graph output, the value
// that feeds repl is renamed to old instead where possible; it reports false when neither
// can be done safely.
func replaceValue(g *graph.Graph, old, repl string) bool {
	if !g.IsOutput(old) {
		renameUses(g, old, repl)
		return true
	}
	p := producerOf(g, repl)
	if p == nil || g.IsOutput(repl) {
		return false
	}
	// Rename repl to old at its producer: old's own producer is about to be removed.
	for i, o := range p.Outputs {
		if o == repl {
			p.Outputs[i] = old
		}
	}
	renameUses(g, repl, old)
	return true
}

func shapeOf(g *graph.Graph, name string) (graph.Shape, bool) {
	v := g.Value(name)
	if v == nil || v.Type.Kind != graph.KindTensor || !v.Type.Ranked {
		return nil, false
	}
	return v.Type.Shape, true
}

func elemOf(g *graph.Graph, name string) graph.DataType {
	if v := g.Value(name); v != nil {
		return v.Type.Elem
	}
	return graph.Undefined
}

func isOp(n *graph.Node, op string) bool { return n != nil && n.OpType == op && n.Domain == "" }

// importLoomDomain makes the fused-operator domain available to the model.
func importLoomDomain(m *graph.Model) {
	if _, ok := m.Opsets[graph.LoomDomain]; !ok {
		m.Opsets[graph.LoomDomain] = 1
	}
}
