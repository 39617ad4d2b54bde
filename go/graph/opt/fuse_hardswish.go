package opt

import (
	"github.com/loomrt/loom/go/graph"
)

// FuseHardSwish recognizes hard swish in the orderings exporters produce and replaces it with
// HardSwish (graph.LoomDomain's before opset 14, with ai.onnx's semantics):
//
//	x·clip(x+3, 0, 6)/6     the division last, or as a multiplication by 1/6
//	x·(clip(x+3, 0, 6)/6)   the division (or multiplication by 1/6) on the clip
//	x·HardSigmoid(x)        with alpha 1/6 and beta ½ (ONNX's own expansion)
//
// Clip's bounds may be attributes (before opset 11) or constant inputs. The intermediate
// values must have no other reader; x may have others.
func FuseHardSwish(m *graph.Model) (bool, error) {
	opset := m.Opset("")
	changed := false
	m.Graph.Walk(func(g *graph.Graph) {
		u := uses(g)
		dead := map[*graph.Node]bool{}
		for _, n := range g.Nodes {
			if dead[n] {
				continue
			}
			var x string
			var head []*graph.Node
			// gate is clip(x+3, 0, 6), or HardSigmoid(x) already divided by 6.
			gate, divided := n.Outputs[0], false
			switch {
			case isOp(n, "Clip") && len(n.Inputs) > 0:
				if lo, hi, ok := clipBounds(g, n, opset); !ok || lo != 0 || hi != 6 {
					continue
				}
				add := producerOf(g, n.Inputs[0])
				if !isOp(add, "Add") || len(add.Inputs) != 2 || dead[add] || !singleUse(g, u, add.Outputs[0]) {
					continue
				}
				for side := 0; side < 2; side++ {
					if scalarOperand(g, add.Inputs[1-side], add.Inputs[side], 3) {
						x = add.Inputs[side]
					}
				}
				head = []*graph.Node{add, n}
			case isOp(n, "HardSigmoid") && len(n.Inputs) == 1:
				if !near(float64(n.AttrFloat("alpha", 0.2)), 1.0/6) || !near(float64(n.AttrFloat("beta", 0.5)), 0.5) {
					continue
				}
				x, head, divided = n.Inputs[0], []*graph.Node{n}, true
			default:
				continue
			}
			if x == "" || !elemOf(g, x).IsFloat() || !singleUse(g, u, gate) {
				continue
			}
			tail, out := hardSwishTail(g, u, x, gate, divided)
			if tail == nil {
				continue
			}
			for _, t := range tail {
				if dead[t] {
					tail = nil
				}
			}
			if tail == nil {
				continue
			}
			hs := &graph.Node{Name: uniqueName(m, "HardSwish_"+out), OpType: "HardSwish", Inputs: []string{x}, Outputs: []string{out}}
			if opset < 14 {
				hs.Domain = graph.LoomDomain
				importLoomDomain(m)
			}
			for _, d := range append(head, tail...) {
				dead[d] = true
			}
			g.Nodes = append(g.Nodes, hs)
		}
		if len(dead) > 0 {
			removeNodes(g, dead)
			changed = true
		}
	})
	return changed, nil
}

// hardSwishTail finds the nodes that combine x and gate into hard swish: gate·x when divided
// (gate is already in [0, 1]), else gate·x then /6, or gate/6 then ·x. It returns them and the
// result.
func hardSwishTail(g *graph.Graph, u map[string]int, x, gate string, divided bool) ([]*graph.Node, string) {
	c1 := soleReader(g, u, gate)
	if c1 == nil {
		return nil, ""
	}
	if isOp(c1, "Mul") {
		if o, ok := otherInput(c1, gate); ok && o == x {
			if divided {
				return []*graph.Node{c1}, c1.Outputs[0]
			}
			// (x·gate)/6
			c2 := soleReader(g, u, c1.Outputs[0])
			if c2 != nil && isSixth(g, c2, c1.Outputs[0]) {
				return []*graph.Node{c1, c2}, c2.Outputs[0]
			}
			return nil, ""
		}
	}
	// x·(gate/6)
	if divided || !isSixth(g, c1, gate) {
		return nil, ""
	}
	c2 := soleReader(g, u, c1.Outputs[0])
	if isOp(c2, "Mul") {
		if o, ok := otherInput(c2, c1.Outputs[0]); ok && o == x {
			return []*graph.Node{c1, c2}, c2.Outputs[0]
		}
	}
	return nil, ""
}

// isSixth reports whether n computes v/6 as Div(v, 6) or Mul(v, 1/6) (either order).
func isSixth(g *graph.Graph, n *graph.Node, v string) bool {
	if len(n.Inputs) != 2 {
		return false
	}
	switch {
	case isOp(n, "Div"):
		return n.Inputs[0] == v && n.Inputs[1] != v && scalarOperand(g, n.Inputs[1], v, 6)
	case isOp(n, "Mul"):
		o, ok := otherInput(n, v)
		if !ok || o == v {
			return false
		}
		c, isConst := scalarOperandValue(g, o, v)
		return isConst && near(c, 1.0/6)
	}
	return false
}

// soleReader returns the one node reading value when value has no other reader and is not a
// graph output.
func soleReader(g *graph.Graph, u map[string]int, value string) *graph.Node {
	if !singleUse(g, u, value) {
		return nil
	}
	if cs := consumersOf(g, value); len(cs) == 1 {
		return cs[0]
	}
	return nil
}

// scalarOperand reports whether c is a constant of the single value want that, combined
// elementwise with x, leaves x's shape and element type unchanged.
func scalarOperand(g *graph.Graph, c, x string, want float64) bool {
	v, ok := scalarOperandValue(g, c, x)
	return ok && v == want
}

// scalarOperandValue returns the value of c when it is a one-element constant of x's element
// type whose rank does not exceed x's (so that broadcasting it keeps x's shape).
func scalarOperandValue(g *graph.Graph, c, x string) (float64, bool) {
	t := constant(g, c)
	if t == nil || t.NumElements() != 1 || t.DType != elemOf(g, x) {
		return 0, false
	}
	if len(t.Dims) > 0 {
		s, ok := shapeOf(g, x)
		if !ok || len(t.Dims) > len(s) {
			return 0, false
		}
	}
	v, err := t.Float64s()
	if err != nil {
		return 0, false
	}
	return v[0], true
}

// swish is a matched x·sigmoid(β·x): its input, β, the nodes it spans and its output.
type swish struct {
	x     string
	beta  float64
	nodes []*graph.Node
	out   string
}

// matchSwish matches x·sigmoid(x) or x·sigmoid(β·x) (β a constant) around the Sigmoid sig.
// The intermediates must have no other reader; x's readers are the caller's to check (the
// pattern reads it twice).
func matchSwish(g *graph.Graph, u map[string]int, sig *graph.Node) (swish, bool) {
	if !isOp(sig, "Sigmoid") || len(sig.Inputs) != 1 {
		return swish{}, false
	}
	sw := swish{x: sig.Inputs[0], beta: 1, nodes: []*graph.Node{sig}}
	if p := producerOf(g, sig.Inputs[0]); isOp(p, "Mul") && len(p.Inputs) == 2 && singleUse(g, u, p.Outputs[0]) {
		for side := 0; side < 2; side++ {
			if b, ok := scalarOperandValue(g, p.Inputs[1-side], p.Inputs[side]); ok && p.Inputs[side] != p.Inputs[1-side] {
				sw.x, sw.beta, sw.nodes = p.Inputs[side], b, []*graph.Node{p, sig}
				break
			}
		}
	}
	if !elemOf(g, sw.x).IsFloat() {
		return swish{}, false
	}
	mul := soleReader(g, u, sig.Outputs[0])
	if !isOp(mul, "Mul") {
		return swish{}, false
	}
	if o, ok := otherInput(mul, sig.Outputs[0]); !ok || o != sw.x {
		return swish{}, false
	}
	sw.nodes = append(sw.nodes, mul)
	sw.out = mul.Outputs[0]
	return sw, true
}
