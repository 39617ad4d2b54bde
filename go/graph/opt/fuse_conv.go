package opt

import (
	"math"

	"github.com/loomrt/loom/go/graph"
)

// FuseConvBatchNorm folds an inference BatchNormalization into the preceding Conv's weights
// and bias when all of them are constants and the Conv feeds only the BatchNormalization.
func FuseConvBatchNorm(m *graph.Model) (bool, error) {
	changed := false
	m.Graph.Walk(func(g *graph.Graph) {
		u := uses(g)
		dead := map[*graph.Node]bool{}
		for _, bn := range g.Nodes {
			if !isOp(bn, "BatchNormalization") || len(bn.Inputs) < 5 || countOutputs(bn) != 1 || bn.AttrInt("training_mode", 0) != 0 {
				continue
			}
			conv := producerOf(g, bn.Inputs[0])
			if !isOp(conv, "Conv") || dead[conv] || !singleUse(g, u, conv.Outputs[0]) || len(conv.Inputs) < 2 {
				continue
			}
			w := constant(g, conv.Inputs[1])
			var b *graph.Tensor
			if len(conv.Inputs) > 2 && conv.Inputs[2] != "" {
				if b = constant(g, conv.Inputs[2]); b == nil {
					continue
				}
			}
			params := make([][]float64, 4)
			ok := w != nil && (w.DType == graph.Float || w.DType == graph.Double) && len(w.Dims) >= 3
			for i := 0; i < 4 && ok; i++ {
				t := constant(g, bn.Inputs[1+i])
				if t == nil || t.DType != w.DType {
					ok = false
					break
				}
				params[i], _ = t.Float64s()
			}
			if !ok {
				continue
			}
			wv, _ := w.Float64s()
			outC := int(w.Dims[0])
			per := len(wv) / outC
			for _, p := range params {
				if len(p) != outC {
					ok = false
				}
			}
			var bv []float64
			if b != nil {
				bv, _ = b.Float64s()
				ok = ok && len(bv) == outC
			} else {
				bv = make([]float64, outC)
			}
			if !ok {
				continue
			}
			eps := float64(bn.AttrFloat("epsilon", 1e-5))
			scale, bias, mean, variance := params[0], params[1], params[2], params[3]
			nw := make([]float64, len(wv))
			nb := make([]float64, outC)
			for c := 0; c < outC; c++ {
				f := scale[c] / math.Sqrt(variance[c]+eps)
				for i := 0; i < per; i++ {
					nw[c*per+i] = wv[c*per+i] * f
				}
				nb[c] = (bv[c]-mean[c])*f + bias[c]
			}
			wt, err := graph.TensorFromValues(uniqueName(m, conv.Inputs[1]+"_bn"), w.DType, w.Dims, nw)
			if err != nil {
				continue
			}
			bt, err := graph.TensorFromValues(uniqueName(m, conv.Name+"_bn_bias"), w.DType, []int64{int64(outC)}, nb)
			if err != nil {
				continue
			}
			g.AddInitializer(wt)
			g.AddInitializer(bt)
			conv.Inputs = []string{conv.Inputs[0], wt.Name, bt.Name}
			conv.Outputs[0] = bn.Outputs[0]
			dead[bn] = true
		}
		if len(dead) > 0 {
			removeNodes(g, dead)
			changed = true
		}
	})
	return changed, nil
}

func countOutputs(n *graph.Node) int {
	c := 0
	for _, o := range n.Outputs {
		if o != "" {
			c++
		}
	}
	return c
}

// FuseConvActivation merges a Conv with the activation that is its only reader into a
// FusedConv of graph.LoomDomain.
func FuseConvActivation(m *graph.Model) (bool, error) {
	changed := false
	m.Graph.Walk(func(g *graph.Graph) {
		u := uses(g)
		dead := map[*graph.Node]bool{}
		for _, act := range g.Nodes {
			if act.Domain != "" || len(act.Inputs) == 0 {
				continue
			}
			var params []float32
			switch act.OpType {
			case "Relu", "Sigmoid", "Tanh":
			case "LeakyRelu":
				params = []float32{act.AttrFloat("alpha", 0.01)}
			case "HardSigmoid":
				params = []float32{act.AttrFloat("alpha", 0.2), act.AttrFloat("beta", 0.5)}
			case "Clip":
				lo, hi := float32(math.Inf(-1)), float32(math.Inf(1))
				if m.Opset("") < 11 {
					lo, hi = act.AttrFloat("min", lo), act.AttrFloat("max", hi)
				} else {
					ok := true
					if len(act.Inputs) > 1 && act.Inputs[1] != "" {
						v, isConst := scalarConst(g, act.Inputs[1])
						lo, ok = float32(v), ok && isConst
					}
					if len(act.Inputs) > 2 && act.Inputs[2] != "" {
						v, isConst := scalarConst(g, act.Inputs[2])
						hi, ok = float32(v), ok && isConst
					}
					if !ok {
						continue
					}
				}
				params = []float32{lo, hi}
			default:
				continue
			}
			conv := producerOf(g, act.Inputs[0])
			if !isOp(conv, "Conv") || dead[conv] || !singleUse(g, u, conv.Outputs[0]) || elemOf(g, conv.Outputs[0]) != graph.Float {
				continue
			}
			conv.OpType, conv.Domain = "FusedConv", graph.LoomDomain
			conv.SetAttr(graph.StringAttr("activation", act.OpType))
			if params != nil {
				conv.SetAttr(&graph.Attribute{Name: "activation_params", Type: graph.AttrFloats, Floats: params})
			}
			conv.Outputs[0] = act.Outputs[0]
			dead[act] = true
		}
		if len(dead) > 0 {
			removeNodes(g, dead)
			importLoomDomain(m)
			changed = true
		}
	})
	return changed, nil
}

// FuseConvAdd folds Add(Conv(x), c) into the Conv's bias when c is a constant holding one value
// per output channel (shape [C,1,...] or [1,C,1,...]) and the Conv feeds only the Add.
func FuseConvAdd(m *graph.Model) (bool, error) {
	changed := false
	m.Graph.Walk(func(g *graph.Graph) {
		u := uses(g)
		dead := map[*graph.Node]bool{}
		for _, add := range g.Nodes {
			if !isOp(add, "Add") || len(add.Inputs) != 2 {
				continue
			}
			for side := 0; side < 2; side++ {
				conv := producerOf(g, add.Inputs[side])
				c := constant(g, add.Inputs[1-side])
				if !isOp(conv, "Conv") || dead[conv] || c == nil || !singleUse(g, u, conv.Outputs[0]) || len(conv.Inputs) < 2 {
					continue
				}
				w := constant(g, conv.Inputs[1])
				os, ok := shapeOf(g, conv.Outputs[0])
				if w == nil || !ok || len(w.Dims) < 3 || c.DType != w.DType || !w.DType.IsFloat() {
					continue
				}
				outC := w.Dims[0]
				if !perChannel(c.Dims, outC, len(os)) {
					continue
				}
				cv, err := c.Float64s()
				if err != nil {
					continue
				}
				bias := make([]float64, outC)
				for i := range bias {
					bias[i] = cv[i%len(cv)]
				}
				if len(conv.Inputs) > 2 && conv.Inputs[2] != "" {
					b := constant(g, conv.Inputs[2])
					if b == nil {
						continue
					}
					bv, err := b.Float64s()
					if err != nil || len(bv) != int(outC) {
						continue
					}
					for i := range bias {
						bias[i] += bv[i]
					}
				}
				bt, err := graph.TensorFromValues(uniqueName(m, conv.Name+"_bias"), w.DType, []int64{outC}, bias)
				if err != nil {
					continue
				}
				g.AddInitializer(bt)
				conv.Inputs = []string{conv.Inputs[0], conv.Inputs[1], bt.Name}
				conv.Outputs[0] = add.Outputs[0]
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

// perChannel accepts the shapes of a per-channel constant broadcast against [N,C,spatial...]
// of the given rank without changing the result's shape: [C,1,...], [1,C,1,...], [1] or [].
func perChannel(dims []int64, c int64, rank int) bool {
	if len(dims) > rank {
		return false
	}
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	if n == 1 {
		return true
	}
	if n != c {
		return false
	}
	// The channel axis is rank-2 positions from the end of a rank-`rank` output.
	axis := len(dims) - (rank - 1)
	return axis >= 0 && dims[axis] == c
}
