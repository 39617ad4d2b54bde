package opt

import "github.com/loomrt/loom/go/graph"

// ConstantsToInitializers turns Constant nodes into initializers of their graph, so that later
// passes see one kind of constant.
func ConstantsToInitializers(m *graph.Model) (bool, error) {
	changed := false
	var err error
	m.Graph.Walk(func(g *graph.Graph) {
		dead := map[*graph.Node]bool{}
		for _, n := range g.Nodes {
			if !isOp(n, "Constant") || len(n.Outputs) != 1 || n.Outputs[0] == "" {
				continue
			}
			t, e := graph.ConstantValue(n)
			if e != nil {
				err = e
				return
			}
			t.Name = n.Outputs[0]
			dead[n] = true
			g.AddInitializer(t)
		}
		if len(dead) > 0 {
			removeNodes(g, dead)
			changed = true
		}
	})
	return changed, err
}
