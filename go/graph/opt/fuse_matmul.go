package opt

import "github.com/loomrt/loom/go/graph"

// FuseMatMulAdd merges MatMul(A, B) followed by Add(·, C) with a constant bias C into Gemm
// when A and B are matrices and C broadcasts to the product's last axis, or otherwise into a
// MatMulAdd of graph.LoomDomain (any rank, C a constant of the product's trailing shape).
func FuseMatMulAdd(m *graph.Model) (bool, error) {
	changed := false
	m.Graph.Walk(func(g *graph.Graph) {
		u := uses(g)
		dead := map[*graph.Node]bool{}
		for _, add := range g.Nodes {
			if !isOp(add, "Add") || len(add.Inputs) != 2 {
				continue
			}
			for side := 0; side < 2; side++ {
				mm := producerOf(g, add.Inputs[side])
				bias := add.Inputs[1-side]
				if !isOp(mm, "MatMul") || dead[mm] || !singleUse(g, u, mm.Outputs[0]) || constant(g, bias) == nil {
					continue
				}
				ps, ok1 := shapeOf(g, mm.Outputs[0])
				as, ok2 := shapeOf(g, mm.Inputs[0])
				bs, ok3 := shapeOf(g, mm.Inputs[1])
				cs, ok4 := shapeOf(g, bias)
				if !ok1 || !ok2 || !ok3 || !ok4 || len(as) < 2 || len(bs) < 2 || len(cs) > len(ps) {
					continue
				}
				if t := elemOf(g, bias); t != elemOf(g, mm.Outputs[0]) || !t.IsFloat() {
					continue
				}
				// The bias must not broadcast the product up: its dims are 1 or equal.
				fits := true
				for i := range cs {
					d, p := cs[len(cs)-1-i], ps[len(ps)-1-i]
					if !(d.Known() && d.Value == 1) && !d.Same(p) {
						fits = false
					}
				}
				if !fits {
					continue
				}
				if len(as) == 2 && len(bs) == 2 && len(cs) <= 2 && m.Opset("") >= 7 {
					mm.OpType = "Gemm"
					mm.Attrs = nil
				} else {
					mm.OpType, mm.Domain = "MatMulAdd", graph.LoomDomain
					importLoomDomain(m)
				}
				mm.Inputs = []string{mm.Inputs[0], mm.Inputs[1], bias}
				mm.Outputs[0] = add.Outputs[0]
				dead[add] = true
				break
			}
		}
		if len(dead) > 0 {
			removeNodes(g, dead)
			changed = true
		}
	})
	return changed, nil
}
