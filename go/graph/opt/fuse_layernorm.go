package opt

import (
	"github.com/loomrt/loom/go/graph"
)

// reduceAxes returns the normalized axes of a ReduceMean with keepdims=1 over a tensor of the
// given rank; ok is false for anything else.
func reduceAxes(m *graph.Model, g *graph.Graph, n *graph.Node, rank int) ([]int, bool) {
	if !isOp(n, "ReduceMean") || n.AttrInt("keepdims", 1) == 0 {
		return nil, false
	}
	var axes []int64
	if m.Opset("") >= 18 {
		if len(n.Inputs) < 2 || n.Inputs[1] == "" {
			return nil, false
		}
		t := constant(g, n.Inputs[1])
		if t == nil {
			return nil, false
		}
		var err error
		if axes, err = t.Int64s(); err != nil {
			return nil, false
		}
	} else {
		axes = n.AttrInts("axes")
	}
	if len(axes) == 0 {
		return nil, false
	}
	out := make([]int, len(axes))
	for i, a := range axes {
		if a < 0 {
			a += int64(rank)
		}
		if a < 0 || a >= int64(rank) {
			return nil, false
		}
		out[i] = int(a)
	}
	return out, true
}

// trailingAxis checks that axes are exactly the last len(axes) axes and returns the first.
func trailingAxis(axes []int, rank int) (int, bool) {
	seen := map[int]bool{}
	for _, a := range axes {
		if a < rank-len(axes) || seen[a] {
			return 0, false
		}
		seen[a] = true
	}
	return rank - len(axes), true
}

func sameInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[int]bool{}
	for _, x := range a {
		seen[x] = true
	}
	for _, x := range b {
		if !seen[x] {
			return false
		}
	}
	return true
}

// otherInput returns the input of a two-input node that is not name.
func otherInput(n *graph.Node, name string) (string, bool) {
	if len(n.Inputs) != 2 {
		return "", false
	}
	switch name {
	case n.Inputs[0]:
		return n.Inputs[1], true
	case n.Inputs[1]:
		return n.Inputs[0], true
	}
	return "", false
}

// FuseLayerNorm recognizes layer normalization spelled out as
// ReduceMean → Sub → Pow(2) → ReduceMean → Add(ε) → Sqrt → Div, optionally followed by Mul(γ)
// and Add(β) with constant γ and β, and replaces it with LayerNormalization (graph.LoomDomain's
// before opset 17).
func FuseLayerNorm(m *graph.Model) (bool, error) {
	changed := false
	m.Graph.Walk(func(g *graph.Graph) {
		u := uses(g)
		dead := map[*graph.Node]bool{}
		for _, div := range g.Nodes {
			if !isOp(div, "Div") || len(div.Inputs) != 2 || dead[div] {
				continue
			}
			sub := producerOf(g, div.Inputs[0])
			sqrt := producerOf(g, div.Inputs[1])
			if !isOp(sub, "Sub") || !isOp(sqrt, "Sqrt") || u[sub.Outputs[0]] != 2 || g.IsOutput(sub.Outputs[0]) {
				continue
			}
			x := sub.Inputs[0]
			xs, ok := shapeOf(g, x)
			if !ok || elemOf(g, x) != graph.Float {
				continue
			}
			rank := len(xs)
			mean := producerOf(g, sub.Inputs[1])
			axes, ok := reduceAxes(m, g, mean, rank)
			if !ok || mean.Inputs[0] != x || !singleUse(g, u, mean.Outputs[0]) {
				continue
			}
			axis, ok := trailingAxis(axes, rank)
			if !ok {
				continue
			}
			add := producerOf(g, sqrt.Inputs[0])
			if !isOp(add, "Add") || !singleUse(g, u, sqrt.Outputs[0]) || !singleUse(g, u, add.Outputs[0]) {
				continue
			}
			var eps float64
			var vr *graph.Node
			for side := 0; side < 2 && vr == nil; side++ {
				if e, ok := scalarConst(g, add.Inputs[1-side]); ok {
					if p := producerOf(g, add.Inputs[side]); p != nil {
						eps, vr = e, p
					}
				}
			}
			vaxes, ok := reduceAxes(m, g, vr, rank)
			if !ok || !sameInts(vaxes, axes) || !singleUse(g, u, vr.Outputs[0]) {
				continue
			}
			pow := producerOf(g, vr.Inputs[0])
			if pow == nil || !singleUse(g, u, pow.Outputs[0]) || len(pow.Inputs) != 2 {
				continue
			}
			switch {
			case isOp(pow, "Pow"):
				if e, ok := scalarConst(g, pow.Inputs[1]); !ok || e != 2 || pow.Inputs[0] != sub.Outputs[0] {
					continue
				}
			case isOp(pow, "Mul"):
				if pow.Inputs[0] != sub.Outputs[0] || pow.Inputs[1] != sub.Outputs[0] {
					continue
				}
			default:
				continue
			}
			normShape := xs[axis:]
			normDims, ok := normShape.Ints()
			if !ok {
				continue
			}
			// Optional affine tail: Mul(γ) then Add(β).
			out := div.Outputs[0]
			var gamma, beta string
			var mul, addB *graph.Node
			if cs := consumersOf(g, out); len(cs) == 1 && singleUse(g, u, out) && isOp(cs[0], "Mul") {
				if o, ok := otherInput(cs[0], out); ok && affineParam(g, o, normDims) {
					mul, gamma, out = cs[0], affineInput(m, g, o, normDims), cs[0].Outputs[0]
					if cs := consumersOf(g, out); len(cs) == 1 && singleUse(g, u, out) && isOp(cs[0], "Add") {
						if o, ok := otherInput(cs[0], out); ok && affineParam(g, o, normDims) {
							addB, beta, out = cs[0], affineInput(m, g, o, normDims), cs[0].Outputs[0]
						}
					}
				}
			}
			if gamma == "" {
				ones := make([]float32, graph.ShapeOf(normDims...).NumElements())
				for i := range ones {
					ones[i] = 1
				}
				t := graph.TensorFromFloat32(uniqueName(m, div.Outputs[0]+"_ln_scale"), normDims, ones)
				g.AddInitializer(t)
				gamma = t.Name
			}
			ln := &graph.Node{Name: uniqueName(m, "LayerNorm_"+div.Outputs[0]), OpType: "LayerNormalization",
				Inputs: []string{x, gamma}, Outputs: []string{out},
				Attrs: []*graph.Attribute{graph.IntAttr("axis", int64(axis)), graph.FloatAttr("epsilon", float32(eps))}}
			if beta != "" {
				ln.Inputs = append(ln.Inputs, beta)
			}
			if m.Opset("") < 17 {
				ln.Domain = graph.LoomDomain
				importLoomDomain(m)
			}
			for _, n := range []*graph.Node{mean, sub, pow, vr, add, sqrt, div, mul, addB} {
				if n != nil {
					dead[n] = true
				}
			}
			g.Nodes = append(g.Nodes, ln)
		}
		if len(dead) > 0 {
			removeNodes(g, dead)
			changed = true
		}
	})
	return changed, nil
}

// affineParam accepts a constant γ or β whose shape is the normalized shape, possibly with
// leading 1s.
func affineParam(g *graph.Graph, name string, norm []int64) bool {
	t := constant(g, name)
	if t == nil || t.DType != graph.Float {
		return false
	}
	d := t.Dims
	for len(d) > len(norm) && d[0] == 1 {
		d = d[1:]
	}
	if len(d) != len(norm) {
		return false
	}
	for i := range d {
		if d[i] != norm[i] {
			return false
		}
	}
	return true
}

// affineInput returns name, or a copy of the constant without the leading 1s that
// LayerNormalization does not take (the original may have other readers).
func affineInput(m *graph.Model, g *graph.Graph, name string, norm []int64) string {
	t := constant(g, name)
	if len(t.Dims) == len(norm) {
		return name
	}
	c := *t
	c.Name = uniqueName(m, name+"_ln")
	c.Dims = append([]int64{}, norm...)
	g.AddInitializer(&c)
	return c.Name
}
