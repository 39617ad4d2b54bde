package opt

import (
	"math"

	"github.com/loomrt/loom/go/graph"
)

// FuseGelu recognizes x·½·(1+erf(x/√2)) in the orderings exporters produce (the ½ applied
// last, first, or to the erf term) and replaces it with Gelu (graph.LoomDomain's before opset
// 20). It also recognizes the tanh approximation as torch.onnx.export writes it,
// x·½·(1+tanh(√(2/π)·(x+0.044715·x³))) with x³ as Pow(x, 3) or products of x, and replaces
// it with Gelu approximate="tanh".
func FuseGelu(m *graph.Model) (bool, error) {
	changed := false
	m.Graph.Walk(func(g *graph.Graph) {
		u := uses(g)
		dead := map[*graph.Node]bool{}
		for _, fn := range g.Nodes {
			if dead[fn] || len(fn.Inputs) != 1 || len(fn.Outputs) != 1 || !singleUse(g, u, fn.Outputs[0]) {
				continue
			}
			var x, approximate string
			var inner []*graph.Node
			switch {
			case isOp(fn, "Erf"):
				x, inner = matchGeluErfArg(g, u, fn.Inputs[0])
			case isOp(fn, "Tanh"):
				x, inner = matchGeluTanhArg(g, u, fn.Inputs[0])
				approximate = "tanh"
			}
			if x == "" || elemOf(g, x) != graph.Float {
				continue
			}
			cs := consumersOf(g, fn.Outputs[0])
			if len(cs) != 1 || !isOp(cs[0], "Add") {
				continue
			}
			add := cs[0]
			if o, ok := otherInput(add, fn.Outputs[0]); !ok || !isConstValue(g, o, 1) || !singleUse(g, u, add.Outputs[0]) {
				continue
			}
			a := add.Outputs[0]
			matched, out := matchGeluTail(g, u, x, a)
			if matched == nil || !sameRank(g, x, out) {
				continue
			}
			gelu := &graph.Node{Name: uniqueName(m, "Gelu_"+out), OpType: "Gelu", Inputs: []string{x}, Outputs: []string{out}}
			if approximate != "" {
				gelu.Attrs = []*graph.Attribute{graph.StringAttr("approximate", approximate)}
			}
			if m.Opset("") < 20 {
				gelu.Domain = graph.LoomDomain
				importLoomDomain(m)
			}
			for _, n := range append(append(matched, inner...), fn, add) {
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

// matchGeluErfArg matches x/√2 or x·(1/√2), the argument of erf, returning x and the node.
func matchGeluErfArg(g *graph.Graph, u map[string]int, arg string) (string, []*graph.Node) {
	scale := producerOf(g, arg)
	if scale == nil || !singleUse(g, u, arg) || len(scale.Inputs) != 2 {
		return "", nil
	}
	switch {
	case isOp(scale, "Div"):
		if c, ok := scalarConst(g, scale.Inputs[1]); ok && near(c, math.Sqrt2) {
			return scale.Inputs[0], []*graph.Node{scale}
		}
	case isOp(scale, "Mul"):
		for side := 0; side < 2; side++ {
			if c, ok := scalarConst(g, scale.Inputs[1-side]); ok && near(c, 1/math.Sqrt2) {
				return scale.Inputs[side], []*graph.Node{scale}
			}
		}
	}
	return "", nil
}

// matchGeluTanhArg matches √(2/π)·(x + 0.044715·x³), the argument of tanh, with the
// constants on either side, x³ as Pow(x, 3), x·(x·x) or (x·x)·x, and every intermediate read
// once. It returns x and the nodes.
func matchGeluTanhArg(g *graph.Graph, u map[string]int, arg string) (string, []*graph.Node) {
	scale := producerOf(g, arg)
	if !isOp(scale, "Mul") || !singleUse(g, u, arg) {
		return "", nil
	}
	sum, ok := constFactor(g, scale, math.Sqrt(2/math.Pi))
	add := producerOf(g, sum)
	if !ok || !isOp(add, "Add") || len(add.Inputs) != 2 || !singleUse(g, u, sum) {
		return "", nil
	}
	for side := 0; side < 2; side++ {
		x, term := add.Inputs[side], add.Inputs[1-side]
		kappa := producerOf(g, term)
		if !isOp(kappa, "Mul") || !singleUse(g, u, term) {
			continue
		}
		cube, ok := constFactor(g, kappa, 0.044715)
		if !ok || !singleUse(g, u, cube) {
			continue
		}
		if pow := matchCube(g, u, x, cube); pow != nil {
			return x, append(pow, scale, add, kappa)
		}
	}
	return "", nil
}

// constFactor returns the other input of a two-input Mul one of whose inputs is a scalar
// constant near want.
func constFactor(g *graph.Graph, mul *graph.Node, want float64) (string, bool) {
	if len(mul.Inputs) != 2 {
		return "", false
	}
	for side := 0; side < 2; side++ {
		if c, ok := scalarConst(g, mul.Inputs[1-side]); ok && near(c, want) {
			return mul.Inputs[side], true
		}
	}
	return "", false
}

// matchCube matches cube = Pow(x, 3), x·(x·x) or (x·x)·x, the square read once, returning
// the nodes.
func matchCube(g *graph.Graph, u map[string]int, x, cube string) []*graph.Node {
	p := producerOf(g, cube)
	if p == nil || p.Domain != "" || len(p.Inputs) != 2 {
		return nil
	}
	switch p.OpType {
	case "Pow":
		if c, ok := scalarConst(g, p.Inputs[1]); ok && p.Inputs[0] == x && near(c, 3) {
			return []*graph.Node{p}
		}
	case "Mul":
		sq, ok := otherInput(p, x)
		if !ok {
			return nil
		}
		s := producerOf(g, sq)
		if isOp(s, "Mul") && len(s.Inputs) == 2 && s.Inputs[0] == x && s.Inputs[1] == x && singleUse(g, u, sq) {
			return []*graph.Node{s, p}
		}
	}
	return nil
}

// sameRank reports that y has x's rank, or that either rank is unknown: a constant of one
// element but a higher rank would broadcast the result up, which Gelu does not.
func sameRank(g *graph.Graph, x, y string) bool {
	xs, ok1 := shapeOf(g, x)
	ys, ok2 := shapeOf(g, y)
	return !ok1 || !ok2 || len(xs) == len(ys)
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
