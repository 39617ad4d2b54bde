package opt

import (
	"math"

	"github.com/loomrt/loom/go/graph"
)

// FuseGelu recognizes x·½·(1+erf(x/√2)) in the orderings exporters produce (the ½ applied
// last, first, or to the erf term) and replaces it with Gelu (graph.LoomDomain's before opset
// 20).
func FuseGelu(m *graph.Model) (bool, error) {
	changed := false
	m.Graph.Walk(func(g *graph.Graph) {
		u := uses(g)
		dead := map[*graph.Node]bool{}
		for _, erf := range g.Nodes {
			if !isOp(erf, "Erf") || dead[erf] || !singleUse(g, u, erf.Outputs[0]) {
				continue
			}
			scale := producerOf(g, erf.Inputs[0])
			if scale == nil || !singleUse(g, u, scale.Outputs[0]) || len(scale.Inputs) != 2 {
				continue
			}
			var x string
			switch {
			case isOp(scale, "Div"):
				if c, ok := scalarConst(g, scale.Inputs[1]); ok && near(c, math.Sqrt2) {
					x = scale.Inputs[0]
				}
			case isOp(scale, "Mul"):
				for side := 0; side < 2; side++ {
					if c, ok := scalarConst(g, scale.Inputs[1-side]); ok && near(c, 1/math.Sqrt2) {
						x = scale.Inputs[side]
					}
				}
			}
			if x == "" || elemOf(g, x) != graph.Float {
				continue
			}
			cs := consumersOf(g, erf.Outputs[0])
			if len(cs) != 1 || !isOp(cs[0], "Add") {
				continue
			}
			add := cs[0]
			if o, ok := otherInput(add, erf.Outputs[0]); !ok || !isConstValue(g, o, 1) || !singleUse(g, u, add.Outputs[0]) {
				continue
			}
			a := add.Outputs[0]
			matched, out := matchGeluTail(g, u, x, a)
			if matched == nil {
				continue
			}
			gelu := &graph.Node{Name: uniqueName(m, "Gelu_"+out), OpType: "Gelu", Inputs: []string{x}, Outputs: []string{out}}
			if m.Opset("") < 20 {
				gelu.Domain = graph.LoomDomain
				importLoomDomain(m)
			}
			for _, n := range append(matched, scale, erf, add) {
				dead[n] = true
			}
			g.Nodes = append(g.Nodes, gelu)
		}
		if len(dead) > 0 {
			removeNodes(g, dead)
			changed = true
		}
	})
	return changed, nil
}

func isConstValue(g *graph.Graph, name string, want float64) bool {
	v, ok := scalarConst(g, name)
	return ok && v == want
}

// matchGeluTail finds the multiplications that combine x, ½ and a = 1+erf(·), returning them
// and the final output.
func matchGeluTail(g *graph.Graph, u map[string]int, x, a string) ([]*graph.Node, string) {
	cs := consumersOf(g, a)
	if len(cs) != 1 || !isOp(cs[0], "Mul") {
		return nil, ""
	}
	m1 := cs[0]
	o, ok := otherInput(m1, a)
	if !ok {
		return nil, ""
	}
	switch {
	case o == x: // (x·a)·½
		next := consumersOf(g, m1.Outputs[0])
		if len(next) != 1 || !isOp(next[0], "Mul") || !singleUse(g, u, m1.Outputs[0]) {
			return nil, ""
		}
		if h, ok := otherInput(next[0], m1.Outputs[0]); ok && isConstValue(g, h, 0.5) {
			return []*graph.Node{m1, next[0]}, next[0].Outputs[0]
		}
	case isConstValue(g, o, 0.5): // x·(a·½)
		next := consumersOf(g, m1.Outputs[0])
		if len(next) != 1 || !isOp(next[0], "Mul") || !singleUse(g, u, m1.Outputs[0]) {
			return nil, ""
		}
		if h, ok := otherInput(next[0], m1.Outputs[0]); ok && h == x {
			return []*graph.Node{m1, next[0]}, next[0].Outputs[0]
		}
	default: // (x·½)·a
		h := producerOf(g, o)
		if isOp(h, "Mul") && singleUse(g, u, o) {
			if c, ok := otherInput(h, x); ok && isConstValue(g, c, 0.5) {
				return []*graph.Node{h, m1}, m1.Outputs[0]
			}
		}
	}
	return nil, ""
}
