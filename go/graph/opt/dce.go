package opt

import "github.com/loomrt/loom/go/graph"

// EliminateDeadCode removes nodes none of whose outputs are read (by nodes, subgraphs or graph
// outputs) and initializers nothing reads, in every graph.
func EliminateDeadCode(m *graph.Model) (bool, error) {
	changed := false
	m.Graph.Walk(func(g *graph.Graph) {
		for {
			u := uses(g)
			dead := map[*graph.Node]bool{}
			for _, n := range g.Nodes {
				live := false
				for _, o := range n.Outputs {
					if o != "" && u[o] > 0 {
						live = true
						break
					}
				}
				if !live {
					dead[n] = true
				}
			}
			if len(dead) == 0 {
				break
			}
			removeNodes(g, dead)
			changed = true
		}
		u := uses(g)
		for _, name := range append([]string{}, g.InitOrder...) {
			if u[name] == 0 && !isGraphInput(g, name) && !readFromSubgraphs(g, name) {
				g.RemoveInitializer(name)
				changed = true
			}
		}
	})
	return changed, nil
}

func isGraphInput(g *graph.Graph, name string) bool {
	for _, in := range g.Inputs {
		if in.Name == name {
			return true
		}
	}
	return false
}

// readFromSubgraphs reports whether a nested graph reads name from this scope (OuterRefs are
// already counted through ImplicitInputs; this guards against stale resolution).
func readFromSubgraphs(g *graph.Graph, name string) bool {
	for _, n := range g.Nodes {
		for _, r := range n.ImplicitInputs() {
			if r == name {
				return true
			}
		}
	}
	return false
}
