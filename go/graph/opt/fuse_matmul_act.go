package opt

import "github.com/loomrt/loom/go/graph"

// FuseMatMulActivation moves a Gelu (ai.onnx's from opset 20, or graph.LoomDomain's) into the
// epilogue of the matrix product it is the only reader of: a MatMulAdd of graph.LoomDomain
// without an activation, or a Gemm with alpha = beta = 1, no transposes, matrices A and B and
// a constant C, which becomes a MatMulAdd. The product takes the Gelu's output (and so keeps a
// graph output's name); a product whose own output is a graph output is left alone.
func FuseMatMulActivation(m *graph.Model) (bool, error) {
	changed := false
	m.Graph.Walk(func(g *graph.Graph) {
		u := uses(g)
		dead := map[*graph.Node]bool{}
		for _, act := range g.Nodes {
			if !isGelu(m, act) || dead[act] || len(act.Inputs) != 1 || len(act.Outputs) != 1 {
				continue
			}
			approximate := act.AttrString("approximate", "none")
			if approximate != "none" && approximate != "tanh" {
				continue
			}
			mm := producerOf(g, act.Inputs[0])
			if mm == nil || dead[mm] || len(mm.Outputs) != 1 || !singleUse(g, u, mm.Outputs[0]) {
				continue
			}
			switch {
			case mm.OpType == "MatMulAdd" && mm.Domain == graph.LoomDomain:
				if mm.AttrString("activation", "") != "" || (mm.Attr("activation") != nil && mm.Attr("activation").Type != graph.AttrString) {
					continue
				}
				kept := mm.Attrs[:0:0]
				for _, a := range mm.Attrs {
					if a.Name != "activation" && a.Name != "approximate" {
						kept = append(kept, a)
					}
				}
				mm.Attrs = kept
			case isOp(mm, "Gemm"):
				if !plainGemm(g, mm) {
					continue
				}
				mm.OpType, mm.Domain, mm.Attrs = "MatMulAdd", graph.LoomDomain, nil
				importLoomDomain(m)
			default:
				continue
			}
			mm.Attrs = append(mm.Attrs, graph.StringAttr("activation", "Gelu"))
			if approximate == "tanh" {
				mm.Attrs = append(mm.Attrs, graph.StringAttr("approximate", "tanh"))
			}
			mm.Outputs[0] = act.Outputs[0]
			dead[act] = true
		}
		if len(dead) > 0 {
			removeNodes(g, dead)
			changed = true
		}
	})
	return changed, nil
}

// isGelu reports whether n is ai.onnx's Gelu (opset 20 on) or graph.LoomDomain's.
func isGelu(m *graph.Model, n *graph.Node) bool {
	return n.OpType == "Gelu" && (n.Domain == graph.LoomDomain || (n.Domain == "" && m.Opset("") >= 20))
}

// plainGemm reports whether a Gemm is MatMul(A, B) + C: alpha and beta 1, no transposes,
// matrices A and B, and a constant C.
func plainGemm(g *graph.Graph, n *graph.Node) bool {
	if len(n.Inputs) != 3 || n.Inputs[2] == "" || constant(g, n.Inputs[2]) == nil {
		return false
	}
	if n.AttrFloat("alpha", 1) != 1 || n.AttrFloat("beta", 1) != 1 || n.AttrInt("transA", 0) != 0 || n.AttrInt("transB", 0) != 0 {
		return false
	}
	for _, a := range n.Attrs {
		switch a.Name {
		case "alpha", "beta", "transA", "transB", "broadcast":
		default:
			return false // an attribute this rewrite would drop
		}
	}
	as, ok1 := shapeOf(g, n.Inputs[0])
	bs, ok2 := shapeOf(g, n.Inputs[1])
	cs, ok3 := shapeOf(g, n.Inputs[2])
	return ok1 && ok2 && ok3 && len(as) == 2 && len(bs) == 2 && len(cs) <= 2
}
