package opt

import (
	"github.com/loomrt/loom/go/graph"
)

// FuseConvOutputAffine folds the chain of Mul, Add, Sub and Div by one-value constants that
// follows a FusedConv (each step the only reader of the one before) into the FusedConv's
// output_scale and output_shift: y = output_scale·act(conv(x)) + output_shift, which the conv
// kernels apply in their epilogue. (Before the activation, FuseConvMul and FuseConvAdd fold
// such constants into the weights and bias instead.)
func FuseConvOutputAffine(m *graph.Model) (bool, error) {
	changed := false
	m.Graph.Walk(func(g *graph.Graph) {
		u := uses(g)
		dead := map[*graph.Node]bool{}
		for _, conv := range g.Nodes {
			if conv.OpType != "FusedConv" || conv.Domain != graph.LoomDomain || len(conv.Outputs) == 0 || elemOf(g, conv.Outputs[0]) != graph.Float {
				continue
			}
			scale := float64(conv.AttrFloat("output_scale", 1))
			shift := float64(conv.AttrFloat("output_shift", 0))
			out, steps := conv.Outputs[0], 0
			for {
				n := soleReader(g, u, out)
				if n == nil || n.Domain != "" || len(n.Inputs) != 2 || dead[n] || elemOf(g, n.Outputs[0]) != graph.Float {
					break
				}
				c, ok := otherInput(n, out)
				if !ok || c == out {
					break
				}
				v, ok := scalarOperandValue(g, c, out)
				if !ok {
					break
				}
				switch {
				case n.OpType == "Mul":
					scale, shift = scale*v, shift*v
				case n.OpType == "Add":
					shift += v
				case n.OpType == "Sub" && n.Inputs[0] == out:
					shift -= v
				case n.OpType == "Div" && n.Inputs[0] == out && v != 0:
					scale, shift = scale/v, shift/v
				default:
					ok = false
				}
				if !ok {
					break
				}
				dead[n] = true
				out = n.Outputs[0]
				steps++
			}
			if steps == 0 {
				continue
			}
			conv.SetAttr(graph.FloatAttr("output_scale", float32(scale)))
			conv.SetAttr(graph.FloatAttr("output_shift", float32(shift)))
			conv.Outputs[0] = out
		}
		if len(dead) > 0 {
			removeNodes(g, dead)
			changed = true
		}
	})
	return changed, nil
}
