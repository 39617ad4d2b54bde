package opt

import (
	"math"

	"github.com/loomrt/loom/go/graph"
)

// FuseAttention recognizes MatMul(Q, Kᵀ) → [scale by Div or Mul] → [mask by Add or Where] →
// Softmax(last axis) → MatMul(·, V) with every intermediate read once, and replaces it with
// one Attention node of graph.LoomDomain (k_transposed=1: its second input is Kᵀ as given).
// When Kᵀ is a Transpose of K that only swaps the last two axes and feeds nothing else (a
// decode step's KV cache transposed every step), the Attention reads K itself
// (k_transposed=0) and the Transpose goes.
func FuseAttention(m *graph.Model) (bool, error) {
	changed := false
	m.Graph.Walk(func(g *graph.Graph) {
		u := uses(g)
		dead := map[*graph.Node]bool{}
		for _, sm := range g.Nodes {
			if !isOp(sm, "Softmax") || dead[sm] || !singleUse(g, u, sm.Outputs[0]) {
				continue
			}
			ss, ok := shapeOf(g, sm.Inputs[0])
			if !ok || len(ss) < 2 || elemOf(g, sm.Inputs[0]) != graph.Float {
				continue
			}
			axis := sm.AttrInt("axis", -1)
			if m.Opset("") < 13 {
				axis = sm.AttrInt("axis", 1)
			}
			if axis != -1 && axis != int64(len(ss)-1) {
				continue
			}
			pv := consumersOf(g, sm.Outputs[0])
			if len(pv) != 1 || !isOp(pv[0], "MatMul") || pv[0].Inputs[0] != sm.Outputs[0] {
				continue
			}
			matched := []*graph.Node{sm}
			cur := sm.Inputs[0]
			mask, mode, fill := "", int64(0), float32(0)
			if p := producerOf(g, cur); p != nil && singleUse(g, u, cur) {
				switch {
				case isOp(p, "Add") && len(p.Inputs) == 2:
					for side := 0; side < 2; side++ {
						if s := producerOf(g, p.Inputs[side]); s != nil && scoreNode(s) {
							mask, mode, cur = p.Inputs[1-side], 1, p.Inputs[side]
							matched = append(matched, p)
							break
						}
					}
				case isOp(p, "Where") && len(p.Inputs) == 3:
					if f, ok := scalarConst(g, p.Inputs[1]); ok {
						mask, mode, fill, cur = p.Inputs[0], 3, float32(f), p.Inputs[2]
						matched = append(matched, p)
					} else if f, ok := scalarConst(g, p.Inputs[2]); ok {
						mask, mode, fill, cur = p.Inputs[0], 2, float32(f), p.Inputs[1]
						matched = append(matched, p)
					}
				}
			}
			scale := 1.0
			if p := producerOf(g, cur); p != nil && singleUse(g, u, cur) && len(p.Inputs) == 2 {
				switch {
				case isOp(p, "Div"):
					if c, ok := scalarConst(g, p.Inputs[1]); ok && c != 0 {
						scale, cur = 1/c, p.Inputs[0]
						matched = append(matched, p)
					}
				case isOp(p, "Mul"):
					for side := 0; side < 2; side++ {
						if c, ok := scalarConst(g, p.Inputs[1-side]); ok {
							scale, cur = c, p.Inputs[side]
							matched = append(matched, p)
							break
						}
					}
				}
			}
			qk := producerOf(g, cur)
			if !isOp(qk, "MatMul") || !singleUse(g, u, cur) || dead[qk] {
				continue
			}
			matched = append(matched, qk)
			skip := false
			for _, n := range matched {
				if dead[n] {
					skip = true
				}
			}
			if skip || math.IsNaN(scale) {
				continue
			}
			att := pv[0]
			att.OpType, att.Domain = "Attention", graph.LoomDomain
			att.Inputs = []string{qk.Inputs[0], qk.Inputs[1], pv[0].Inputs[1]}
			kTransposed := int64(1)
			if t := producerOf(g, qk.Inputs[1]); t != nil && isOp(t, "Transpose") && !dead[t] && singleUse(g, u, qk.Inputs[1]) && swapsLastTwo(g, t) {
				att.Inputs[1], kTransposed = t.Inputs[0], 0
				matched = append(matched, t)
			}
			att.Attrs = []*graph.Attribute{graph.IntAttr("k_transposed", kTransposed), graph.FloatAttr("scale", float32(scale))}
			if mode != 0 {
				att.Inputs = append(att.Inputs, mask)
				att.Attrs = append(att.Attrs, graph.IntAttr("mask_mode", mode))
				if mode != 1 {
					att.Attrs = append(att.Attrs, graph.FloatAttr("mask_fill", fill))
				}
			}
			for _, n := range matched {
				dead[n] = true
			}
			importLoomDomain(m)
		}
		if len(dead) > 0 {
			removeNodes(g, dead)
			changed = true
		}
	})
	return changed, nil
}

// scoreNode reports whether n can be the scaled-scores side of an additive mask.
func scoreNode(n *graph.Node) bool {
	return isOp(n, "MatMul") || isOp(n, "Div") || isOp(n, "Mul")
}

// swapsLastTwo reports whether Transpose t exchanges the last two axes of its input and keeps
// the others in place (no perm: the reversal, which does so for rank 2).
func swapsLastTwo(g *graph.Graph, t *graph.Node) bool {
	xs, ok := shapeOf(g, t.Inputs[0])
	if !ok || len(xs) < 2 {
		return false
	}
	r := len(xs)
	perm := t.AttrInts("perm")
	if perm == nil {
		return r == 2
	}
	if len(perm) != r {
		return false
	}
	for i, p := range perm {
		want := int64(i)
		switch i {
		case r - 2:
			want = int64(r - 1)
		case r - 1:
			want = int64(r - 2)
		}
		if p != want {
			return false
		}
	}
	return true
}
