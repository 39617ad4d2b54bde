package graph

import (
	"container/heap"
	"fmt"
	"sort"
)

// Resolve recomputes what loading derives from the node list: the producer of every value, the
// outer-scope references of every subgraph, and a topological order of every graph's nodes
// (stable: nodes keep their relative order where dependencies allow). It reports duplicate
// definitions, references to undefined names and cycles. Passes call it after rewriting.
func (m *Model) Resolve() error { return resolve(m) }

func resolve(m *Model) error {
	el := &ErrorList{}
	path := GraphPath(m.Graph, "")
	resolveGraph(m.Name, m.Graph, path, el)
	// A run returns the model's outputs by name, so each is listed once. (A subgraph may
	// list a value twice: its outputs are positional, and passes rename them.)
	seen := make(map[string]int, len(m.Graph.Outputs))
	for _, o := range m.Graph.Outputs {
		if seen[o.Name]++; seen[o.Name] == 2 {
			el.Add(&Error{Model: m.Name, Graph: path, Value: o.Name, Msg: "graph output is listed twice (a model's outputs are named, so each must be listed once)"})
		}
	}
	return el.Err()
}

// GraphPath is how errors locate graph g: its name (or "<unnamed>"), after the path of the
// enclosing graph when there is one.
func GraphPath(g *Graph, parent string) string {
	name := g.Name
	if name == "" {
		name = "<unnamed>"
	}
	if parent == "" {
		return name
	}
	return parent + "/" + name
}

func resolveGraph(model string, g *Graph, path string, el *ErrorList) {
	if g.Values == nil {
		g.Values = map[string]*Value{}
	}
	if g.Initializers == nil {
		g.Initializers = map[string]*Tensor{}
	}
	defined := map[string]bool{}
	for _, in := range g.Inputs {
		defined[in.Name] = true
		v := g.ensureValue(in.Name)
		v.Producer = nil
		if v != in {
			// Keep one record per name: the graph input's.
			g.Values[in.Name] = in
		}
		in.Initializer = g.Initializers[in.Name]
	}
	for _, name := range g.InitOrder {
		defined[name] = true
		v := g.ensureValue(name)
		v.Producer = nil
		v.Initializer = g.Initializers[name]
		if v.Type.Kind == KindUnknown {
			v.Type = v.Initializer.Type()
		}
	}
	producer := map[string]*Node{}
	for _, n := range g.Nodes {
		for _, out := range n.Outputs {
			if out == "" {
				continue
			}
			if defined[out] {
				what := "another node"
				if p := producer[out]; p == nil {
					what = "a graph input or initializer"
				} else if p == n {
					what = "the same node"
				}
				el.Add(&Error{Model: model, Graph: path, Node: n.Label(), Op: n.OpType, Value: out, Msg: "output already defined by " + what})
				continue
			}
			defined[out] = true
			producer[out] = n
			v := g.ensureValue(out)
			v.Producer = n
			v.Initializer = nil
		}
	}
	// Forget records of names no longer defined here (a pass removed their producer), keeping
	// declared graph outputs that are resolved below.
	for name := range g.Values {
		if !defined[name] {
			delete(g.Values, name)
		}
	}
	for _, n := range g.Nodes {
		for _, sg := range n.Subgraphs() {
			sg.Parent = g
			resolveGraph(model, sg, GraphPath(sg, path+"/"+n.Label()), el)
		}
	}
	outer := map[string]bool{}
	visible := func(name string) bool {
		if defined[name] {
			return true
		}
		if g.Parent != nil && g.Parent.Value(name) != nil {
			outer[name] = true
			return true
		}
		return false
	}
	for _, n := range g.Nodes {
		for _, in := range n.Inputs {
			if in != "" && !visible(in) {
				el.Add(&Error{Model: model, Graph: path, Node: n.Label(), Op: n.OpType, Value: in, Msg: "input is not defined by any graph input, initializer or node output in scope"})
			}
		}
		for _, in := range n.ImplicitInputs() {
			if !visible(in) {
				el.Add(&Error{Model: model, Graph: path, Node: n.Label(), Op: n.OpType, Value: in, Msg: "subgraph reads a name not defined in any enclosing scope"})
			}
		}
	}
	for _, o := range g.Outputs {
		if !visible(o.Name) {
			el.Add(&Error{Model: model, Graph: path, Value: o.Name, Msg: "graph output is not produced by any node, input or initializer"})
		}
		if v := g.Values[o.Name]; v != nil && v != o && v.Declared.Kind == KindUnknown && o.Declared.Kind != KindUnknown {
			v.Declared = o.Declared.Clone()
			if v.Type.Kind == KindUnknown {
				v.Type = o.Declared.Clone()
			}
		}
	}
	g.OuterRefs = g.OuterRefs[:0]
	for name := range outer {
		g.OuterRefs = append(g.OuterRefs, name)
	}
	sort.Strings(g.OuterRefs)
	topoSort(model, g, path, producer, el)
}

type indexHeap []int

func (h indexHeap) Len() int           { return len(h) }
func (h indexHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h indexHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *indexHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *indexHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// topoSort orders g.Nodes by Kahn's algorithm, always taking the earliest ready node so that an
// already sorted graph keeps its order.
func topoSort(model string, g *Graph, path string, producer map[string]*Node, el *ErrorList) {
	index := map[*Node]int{}
	for i, n := range g.Nodes {
		index[n] = i
	}
	pending := make([]int, len(g.Nodes))
	users := make([][]int, len(g.Nodes))
	for i, n := range g.Nodes {
		deps := map[int]bool{}
		for _, in := range append(append([]string{}, n.Inputs...), n.ImplicitInputs()...) {
			if p, ok := producer[in]; ok && in != "" {
				deps[index[p]] = true
			}
		}
		for d := range deps {
			users[d] = append(users[d], i)
		}
		pending[i] = len(deps)
	}
	h := &indexHeap{}
	for i, p := range pending {
		if p == 0 {
			*h = append(*h, i)
		}
	}
	heap.Init(h)
	order := make([]*Node, 0, len(g.Nodes))
	for h.Len() > 0 {
		i := heap.Pop(h).(int)
		order = append(order, g.Nodes[i])
		for _, u := range users[i] {
			pending[u]--
			if pending[u] == 0 {
				heap.Push(h, u)
			}
		}
	}
	if len(order) != len(g.Nodes) {
		for i, p := range pending {
			if p > 0 {
				n := g.Nodes[i]
				el.Add(&Error{Model: model, Graph: path, Node: n.Label(), Op: n.OpType,
					Msg: fmt.Sprintf("graph has a cycle through this node (%d nodes cannot be ordered)", len(g.Nodes)-len(order))})
				return
			}
		}
	}
	g.Nodes = order
}
