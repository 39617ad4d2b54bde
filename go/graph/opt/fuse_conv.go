package opt

import (
	"math"
	"strings"

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
// FusedConv of graph.LoomDomain: Relu, Sigmoid, Tanh, LeakyRelu, HardSigmoid, Clip with
// constant bounds, HardSwish (ai.onnx's, or graph.LoomDomain's that FuseHardSwish makes before
// opset 14) and swish x·sigmoid(β·x) (activation Swish, activation_params [β] when β is not 1).
func FuseConvActivation(m *graph.Model) (bool, error) {
	changed := false
	m.Graph.Walk(func(g *graph.Graph) {
		u := uses(g)
		dead := map[*graph.Node]bool{}
		for _, act := range g.Nodes {
			hardSwish := act.OpType == "HardSwish" && (act.Domain == "" || act.Domain == graph.LoomDomain)
			if (act.Domain != "" && !hardSwish) || len(act.Inputs) == 0 || dead[act] {
				continue
			}
			name := act.OpType
			var params []float32
			// The nodes the FusedConv replaces, and the output it takes over.
			fused, out := []*graph.Node{act}, act.Outputs[0]
			// The Conv's output must be read by the activation alone (twice by swish).
			x, readers := act.Inputs[0], 1
			switch act.OpType {
			case "Relu", "Tanh", "HardSwish":
			case "Sigmoid":
				if sw, ok := matchSwish(g, u, act); ok {
					name, x, readers, fused, out = "Swish", sw.x, 2, sw.nodes, sw.out
					if sw.beta != 1 {
						params = []float32{float32(sw.beta)}
					}
				}
			case "LeakyRelu":
				params = []float32{act.AttrFloat("alpha", 0.01)}
			case "HardSigmoid":
				params = []float32{act.AttrFloat("alpha", 0.2), act.AttrFloat("beta", 0.5)}
			case "Clip":
				lo, hi, ok := clipBounds(g, act, m.Opset(""))
				if !ok {
					continue
				}
				params = []float32{float32(lo), float32(hi)}
			default:
				continue
			}
			conv := producerOf(g, x)
			if !isOp(conv, "Conv") || dead[conv] || u[x] != readers || g.IsOutput(x) || elemOf(g, x) != graph.Float {
				continue
			}
			conv.OpType, conv.Domain = "FusedConv", graph.LoomDomain
			conv.SetAttr(graph.StringAttr("activation", name))
			if params != nil {
				conv.SetAttr(&graph.Attribute{Name: "activation_params", Type: graph.AttrFloats, Floats: params})
			}
			conv.Outputs[0] = out
			for _, n := range fused {
				dead[n] = true
			}
		}
		if len(dead) > 0 {
			removeNodes(g, dead)
			importLoomDomain(m)
			changed = true
		}
	})
	return changed, nil
}

// clipBounds returns a Clip's bounds (infinite where absent) when they are constants: the
// min and max attributes before opset 11, inputs 1 and 2 from then on.
func clipBounds(g *graph.Graph, clip *graph.Node, opset int64) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(-1), math.Inf(1)
	if opset < 11 {
		return float64(clip.AttrFloat("min", float32(lo))), float64(clip.AttrFloat("max", float32(hi))), true
	}
	ok = true
	if len(clip.Inputs) > 1 && clip.Inputs[1] != "" {
		var isConst bool
		lo, isConst = scalarConst(g, clip.Inputs[1])
		ok = ok && isConst
	}
	if len(clip.Inputs) > 2 && clip.Inputs[2] != "" {
		var isConst bool
		hi, isConst = scalarConst(g, clip.Inputs[2])
		ok = ok && isConst
	}
	return lo, hi, ok
}

// FuseConvAdd folds Add(Conv(x), c) into the Conv's bias when c is a constant holding one value
// per output channel (shape [C,1,...] or [1,C,1,...]) or one value, and the Conv feeds only the
// Add.
func FuseConvAdd(m *graph.Model) (bool, error) {
	return foldChannelConstant(m, "Add", func(w, b []float64, c []float64, per int) ([]float64, []float64) {
		for i := range b {
			b[i] += c[i]
		}
		return w, b
	})
}

// FuseConvMul folds Mul(Conv(x), c) into the Conv's weights and bias when c is a constant
// holding one value per output channel or one value, and the Conv feeds only the Mul:
// (W·x + b)·c is (c·W)·x + c·b channel by channel. Run before FuseConvAdd, it lets a scale and
// shift after a Conv (an unfused BatchNormalization) collapse into the Conv.
func FuseConvMul(m *graph.Model) (bool, error) {
	return foldChannelConstant(m, "Mul", func(w, b []float64, c []float64, per int) ([]float64, []float64) {
		nw := make([]float64, len(w))
		for i := range w {
			nw[i] = w[i] * c[i/per]
		}
		for i := range b {
			b[i] *= c[i]
		}
		return nw, b
	})
}

// foldChannelConstant rewrites op(Conv(x), c) (either operand order) into a Conv whose weights
// and bias fold returns from the Conv's weights w (per values for each output channel; nil for
// Add, which keeps the weights), bias b (zeros when the Conv has none) and c expanded to one
// value per output channel. The Conv must
// feed only op, and c must broadcast along the output channels without changing the result's
// shape.
func foldChannelConstant(m *graph.Model, op string, fold func(w, b, c []float64, per int) ([]float64, []float64)) (bool, error) {
	changed := false
	m.Graph.Walk(func(g *graph.Graph) {
		u := uses(g)
		dead := map[*graph.Node]bool{}
		for _, n := range g.Nodes {
			if !isOp(n, op) || len(n.Inputs) != 2 {
				continue
			}
			for side := 0; side < 2; side++ {
				conv := producerOf(g, n.Inputs[side])
				c := constant(g, n.Inputs[1-side])
				if !isOp(conv, "Conv") || dead[conv] || c == nil || !singleUse(g, u, conv.Outputs[0]) || len(conv.Inputs) < 2 {
					continue
				}
				w := constant(g, conv.Inputs[1])
				os, ok := shapeOf(g, conv.Outputs[0])
				if w == nil || !ok || len(w.Dims) < 3 || c.DType != w.DType || !w.DType.IsFloat() {
					continue
				}
				outC := w.Dims[0]
				if outC < 1 || !perChannel(c.Dims, outC, len(os)) {
					continue
				}
				cv, err := c.Float64s()
				if err != nil {
					continue
				}
				var wv []float64
				if op != "Add" {
					if wv, err = w.Float64s(); err != nil {
						continue
					}
				}
				channel := make([]float64, outC)
				for i := range channel {
					channel[i] = cv[i%len(cv)]
				}
				bias := make([]float64, outC)
				hasBias := len(conv.Inputs) > 2 && conv.Inputs[2] != ""
				if hasBias {
					b := constant(g, conv.Inputs[2])
					if b == nil {
						continue
					}
					bv, err := b.Float64s()
					if err != nil || len(bv) != int(outC) {
						continue
					}
					copy(bias, bv)
				}
				nw, nb := fold(wv, bias, channel, int(w.NumElements()/outC))
				weights := conv.Inputs[1]
				if op != "Add" {
					wt, err := graph.TensorFromValues(uniqueName(m, conv.Inputs[1]+"_"+strings.ToLower(op)), w.DType, w.Dims, nw)
					if err != nil {
						continue
					}
					g.AddInitializer(wt)
					weights = wt.Name
				}
				inputs := []string{conv.Inputs[0], weights}
				if hasBias || op == "Add" {
					bt, err := graph.TensorFromValues(uniqueName(m, conv.Name+"_bias"), w.DType, []int64{outC}, nb)
					if err != nil {
						continue
					}
					g.AddInitializer(bt)
					inputs = append(inputs, bt.Name)
				}
				conv.Inputs = inputs
				conv.Outputs[0] = n.Outputs[0]
				dead[n] = true
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
