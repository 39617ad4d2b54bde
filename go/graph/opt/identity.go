package opt

import "github.com/loomrt/loom/go/graph"

// EliminateIdentity removes Identity nodes and inference-mode Dropout (no training_mode input,
// or a constant false one, and an unused mask), wiring readers to the input directly.
func EliminateIdentity(m *graph.Model) (bool, error) {
	changed := false
	m.Graph.Walk(func(g *graph.Graph) {
		dead := map[*graph.Node]bool{}
		for _, n := range g.Nodes {
			if !removable(g, n) {
				continue
			}
			in, out := n.Inputs[0], n.Outputs[0]
			if replaceValue(g, out, in) {
				dead[n] = true
			}
		}
		if len(dead) > 0 {
			removeNodes(g, dead)
			changed = true
		}
	})
	return changed, nil
}

func removable(g *graph.Graph, n *graph.Node) bool {
	if n.Domain != "" || len(n.Inputs) == 0 || n.Inputs[0] == "" || len(n.Outputs) == 0 || n.Outputs[0] == "" {
		return false
	}
	switch n.OpType {
	case "Identity":
		v := g.Value(n.Inputs[0])
		return v == nil || v.Type.Kind == graph.KindTensor || v.Type.Kind == graph.KindUnknown
	case "Dropout":
		if len(n.Outputs) > 1 && n.Outputs[1] != "" {
			if len(consumersOf(g, n.Outputs[1])) > 0 || g.IsOutput(n.Outputs[1]) {
				return false
			}
		}
		if n.AttrInt("is_test", 1) == 0 && n.Attr("is_test") != nil {
			return false
		}
		if len(n.Inputs) > 2 && n.Inputs[2] != "" {
			v, ok := scalarConst(g, n.Inputs[2])
			return ok && v == 0
		}
		return true
	}
	return false
}
