package opt

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/loomrt/loom/go/graph"
)

// EliminateCommonSubexpressions merges nodes that apply the same operator with the same
// attributes to the same inputs, keeping the first; nondeterministic operators
// (graph.OpTraits) are never merged.
func EliminateCommonSubexpressions(m *graph.Model) (bool, error) {
	changed := false
	m.Graph.Walk(func(g *graph.Graph) {
		for {
			seen := map[string]*graph.Node{}
			dead := map[*graph.Node]bool{}
			for _, n := range g.Nodes {
				if n.Traits().Nondeterministic || len(n.Subgraphs()) > 0 {
					continue
				}
				key := nodeKey(n)
				first, ok := seen[key]
				if !ok {
					seen[key] = n
					continue
				}
				if len(first.Outputs) != len(n.Outputs) {
					continue
				}
				ok = true
				for i, o := range n.Outputs {
					if o != "" && g.IsOutput(o) {
						ok = false
					}
					if o != "" && first.Outputs[i] == "" {
						ok = false
					}
				}
				if !ok {
					continue
				}
				for i, o := range n.Outputs {
					if o != "" {
						renameUses(g, o, first.Outputs[i])
					}
				}
				dead[n] = true
			}
			if len(dead) == 0 {
				break
			}
			removeNodes(g, dead)
			changed = true
		}
	})
	return changed, nil
}

func nodeKey(n *graph.Node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%q|", n.Domain, n.OpType, n.Inputs)
	for _, a := range n.Attrs {
		fmt.Fprintf(&b, "%s:%d:%v:%d:%q:%v:%v:%q;", a.Name, a.Type, a.Float, a.Int, a.String, a.Floats, a.Ints, a.Strings)
		if a.Tensor != nil {
			fmt.Fprintf(&b, "%d%v%x", a.Tensor.DType, a.Tensor.Dims, a.Tensor.Raw)
			b.Write(bytes.Join(a.Tensor.Strings, []byte{0}))
		}
	}
	return b.String()
}
