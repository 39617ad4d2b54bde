package opt

import (
	"fmt"
	"math"
	"strconv"

	"github.com/loomrt/loom/go/graph"
)

// flexDomain is the domain of FlexAttention (ONNX 1.22, opset 1 of ai.onnx.preview).
const flexDomain = "ai.onnx.preview"

// ExpandFlexAttention lowers every FlexAttention node (ai.onnx.preview), in the main graph and
// in subgraphs, to the ai.onnx operators that define it, so that it runs on the kernels of
// MatMul, Softmax and the rest (it is a lowering, not an optimization: Optimize runs it at
// every level, LevelDisabled included):
//
//	Y = MatMul(Softmax(prob_mod? ... score_mod(Cast(MatMul(Q, Kᵀ)·scale, softmax precision)) ...), V)
//
// Q is (batch, q_heads, L, E), K (batch, kv_heads, S, E), V (batch, kv_heads, S, Ev); with
// fewer key/value heads than query heads each key/value head serves q_heads/kv_heads
// consecutive query heads (repeated by Unsqueeze, Expand and Reshape). scale defaults to
// 1/√E; softmax_precision to float, or double for double inputs (the scores are cast to it
// before score_mod and the probabilities back after prob_mod). score_mod and prob_mod, one
// input and one output each, are inlined with their values and initializers renamed; a
// modifier holding a subgraph of its own is refused, as are models whose ai.onnx opset is
// older than 13 (the Softmax over the last axis). Errors name the node.
func ExpandFlexAttention(m *graph.Model) (bool, error) {
	changed := false
	var err error
	var nm *namer
	m.Graph.Walk(func(g *graph.Graph) {
		if err != nil {
			return
		}
		var out []*graph.Node
		for _, n := range g.Nodes {
			if n.OpType != "FlexAttention" || n.Domain != flexDomain {
				out = append(out, n)
				continue
			}
			if nm == nil {
				nm = newNamer(m)
			}
			nodes, e := expandFlex(m, g, n, nm)
			if e != nil {
				err = e
				return
			}
			out = append(out, nodes...)
			changed = true
		}
		g.Nodes = out
	})
	return changed, err
}

// namer makes value, node and initializer names unused anywhere in the model.
type namer struct{ taken map[string]bool }

func newNamer(m *graph.Model) *namer { return &namer{taken: takenNames(m)} }

func (nm *namer) fresh(base string) string {
	name := base
	for i := 1; nm.taken[name]; i++ {
		name = base + "_" + strconv.Itoa(i)
	}
	nm.taken[name] = true
	return name
}

// flexBuilder collects the nodes and constants that replace one FlexAttention node.
type flexBuilder struct {
	g      *graph.Graph
	nm     *namer
	prefix string
	nodes  []*graph.Node
}

// add appends a node of op with inputs and one output named after what (or out when given).
func (b *flexBuilder) add(op, what string, inputs []string, out string, attrs ...*graph.Attribute) string {
	if out == "" {
		out = b.nm.fresh(b.prefix + "/" + what)
	}
	b.nodes = append(b.nodes, graph.NewNode(b.nm.fresh(b.prefix+"/"+what), op, inputs, []string{out}, attrs...))
	return out
}

// constant binds a constant tensor in the node's graph and returns its name.
func (b *flexBuilder) constant(what string, t *graph.Tensor) string {
	t.Name = b.nm.fresh(b.prefix + "/" + what)
	b.g.AddInitializer(t)
	return t.Name
}

func expandFlex(m *graph.Model, g *graph.Graph, n *graph.Node, nm *namer) ([]*graph.Node, error) {
	fail := func(format string, args ...any) error {
		return &graph.Error{Model: m.Name, Graph: g.Name, Node: n.Name, Op: n.OpType, Msg: fmt.Sprintf(format, args...)}
	}
	if len(n.Inputs) != 3 || n.Inputs[0] == "" || n.Inputs[1] == "" || n.Inputs[2] == "" || len(n.Outputs) < 1 || n.Outputs[0] == "" {
		return nil, fail("FlexAttention takes Q, K and V and gives Y")
	}
	if v := m.Opset(""); v < 13 {
		return nil, fail("FlexAttention is lowered to ai.onnx operators of opset 13 or newer; the model imports ai.onnx %d", v)
	}
	q, k, v := n.Inputs[0], n.Inputs[1], n.Inputs[2]
	qv := g.Value(q)
	if qv == nil || !qv.Type.Elem.IsFloat() {
		return nil, fail("Q (%q) must be a float tensor of a known element type", q)
	}
	T := qv.Type.Elem
	sp := graph.Float
	if T == graph.Double {
		sp = graph.Double
	}
	if a := n.Attr("softmax_precision"); a != nil {
		sp = graph.DataType(a.Int)
		if sp != graph.Float && sp != graph.Double && sp != graph.Float16 && sp != graph.BFloat16 {
			return nil, fail("softmax_precision %d is not a float type", a.Int)
		}
	}
	prefix := n.Name
	if prefix == "" {
		prefix = "FlexAttention"
	}
	b := &flexBuilder{g: g, nm: nm, prefix: prefix}
	qs, qok := shapeOf(g, q)
	ks, kok := shapeOf(g, k)
	for _, s := range []struct {
		name  string
		shape graph.Shape
		ok    bool
	}{{q, qs, qok}, {k, ks, kok}} {
		if s.ok && len(s.shape) != 4 {
			return nil, fail("%q has rank %d; FlexAttention's Q, K and V are rank 4", s.name, len(s.shape))
		}
	}

	// Key/value heads shared by groups of query heads: repeated to the query's head count.
	kr, vr := k, v
	if !(qok && kok && qs[1].Known() && ks[1].Known() && qs[1].Value == ks[1].Value) {
		if qok && kok && qs[1].Known() && ks[1].Known() && (ks[1].Value == 0 || qs[1].Value%ks[1].Value != 0) {
			return nil, fail("q_num_heads %d is not a multiple of kv_num_heads %d", qs[1].Value, ks[1].Value)
		}
		dim := func(x, what string, i int64) string {
			shape := b.add("Shape", what+"_shape", []string{x}, "")
			idx := b.constant(what+"_index", graph.TensorFromInt64("", []int64{1}, []int64{i}))
			return b.add("Gather", what, []string{shape, idx}, "", graph.IntAttr("axis", 0))
		}
		batch, qHeads, kvHeads := dim(q, "batch", 0), dim(q, "q_heads", 1), dim(k, "kv_heads", 1)
		repeat := b.add("Div", "kv_repeat", []string{qHeads, kvHeads}, "")
		axis2 := b.constant("axis2", graph.TensorFromInt64("", []int64{1}, []int64{2}))
		rep := func(x, what string) string {
			seq, size := dim(x, what+"_seq", 2), dim(x, what+"_size", 3)
			u := b.add("Unsqueeze", what+"_unsqueezed", []string{x, axis2}, "")
			wide := b.add("Concat", what+"_expand_shape", []string{batch, kvHeads, repeat, seq, size}, "", graph.IntAttr("axis", 0))
			e := b.add("Expand", what+"_expanded", []string{u, wide}, "")
			flat := b.add("Concat", what+"_heads_shape", []string{batch, qHeads, seq, size}, "", graph.IntAttr("axis", 0))
			return b.add("Reshape", what+"_repeated", []string{e, flat}, "")
		}
		kr, vr = rep(k, "k"), rep(v, "v")
	}

	// scale: the attribute, else 1/√E (E from Q's shape when known, else computed).
	var scale string
	if a := n.Attr("scale"); a != nil {
		scale = b.typedScalar("scale", float64(a.Float), T)
	} else if qok && qs[3].Known() && qs[3].Value > 0 {
		scale = b.typedScalar("scale", 1/math.Sqrt(float64(qs[3].Value)), T)
	} else {
		shape := b.add("Shape", "q_shape", []string{q}, "")
		idx := b.constant("head_size_index", graph.TensorFromInt64("", []int64{}, []int64{3}))
		e := b.add("Gather", "head_size", []string{shape, idx}, "", graph.IntAttr("axis", 0))
		ef := b.add("Cast", "head_size_float", []string{e}, "", graph.IntAttr("to", int64(graph.Float)))
		root := b.add("Sqrt", "head_size_sqrt", []string{ef}, "")
		inv := b.add("Reciprocal", "scale_float", []string{root}, "")
		scale = inv
		if T != graph.Float {
			scale = b.add("Cast", "scale", []string{inv}, "", graph.IntAttr("to", int64(T)))
		}
	}

	kt := b.add("Transpose", "k_transposed", []string{kr}, "", graph.IntsAttr("perm", 0, 1, 3, 2))
	scores := b.add("MatMul", "qk", []string{q, kt}, "")
	scores = b.add("Mul", "scores", []string{scores, scale}, "")
	if sp != T {
		scores = b.add("Cast", "scores_cast", []string{scores}, "", graph.IntAttr("to", int64(sp)))
	}
	scores, err := b.inline(n, "score_mod", scores, fail)
	if err != nil {
		return nil, err
	}
	probs := b.add("Softmax", "probs", []string{scores}, "", graph.IntAttr("axis", -1))
	if probs, err = b.inline(n, "prob_mod", probs, fail); err != nil {
		return nil, err
	}
	if sp != T {
		probs = b.add("Cast", "probs_cast", []string{probs}, "", graph.IntAttr("to", int64(T)))
	}
	b.add("MatMul", "y", []string{probs, vr}, n.Outputs[0])
	return b.nodes, nil
}

// typedScalar binds a scalar constant of type t (float and double directly, other types
// through a Cast from float).
func (b *flexBuilder) typedScalar(what string, v float64, t graph.DataType) string {
	switch t {
	case graph.Double:
		return b.constant(what, graph.TensorFromFloat64("", []int64{}, []float64{v}))
	case graph.Float:
		return b.constant(what, graph.TensorFromFloat32("", []int64{}, []float32{float32(v)}))
	}
	f := b.constant(what+"_float", graph.TensorFromFloat32("", []int64{}, []float32{float32(v)}))
	return b.add("Cast", what, []string{f}, "", graph.IntAttr("to", int64(t)))
}

// inline copies the modifier subgraph of n's attribute attr (when n has one) into the node's
// graph, its input bound to in, every value, node and initializer it defines renamed, and the
// names it reads from enclosing scopes kept; it returns the name of its output (in without a
// modifier).
func (b *flexBuilder) inline(n *graph.Node, attr, in string, fail func(string, ...any) error) (string, error) {
	a := n.Attr(attr)
	if a == nil {
		return in, nil
	}
	sg := a.Graph
	if a.Type != graph.AttrGraph || sg == nil || len(sg.Inputs) != 1 || len(sg.Outputs) != 1 {
		return "", fail("%s must be a graph of one input and one output", attr)
	}
	rename := map[string]string{sg.Inputs[0].Name: in}
	for _, name := range sg.InitOrder {
		t := *sg.Initializers[name]
		rename[name] = b.constant(attr+"/"+name, &t)
	}
	for _, sn := range sg.Nodes {
		if len(sn.Subgraphs()) > 0 {
			return "", fail("%s's node %q holds a subgraph; a modifier with control flow is not supported", attr, sn.Name)
		}
		ins := make([]string, len(sn.Inputs))
		for i, x := range sn.Inputs {
			if r, ok := rename[x]; ok {
				x = r
			}
			ins[i] = x
		}
		outs := make([]string, len(sn.Outputs))
		for i, o := range sn.Outputs {
			if o != "" {
				outs[i] = b.nm.fresh(b.prefix + "/" + attr + "/" + o)
				rename[o] = outs[i]
			}
		}
		c := graph.NewNode(b.nm.fresh(b.prefix+"/"+attr+"/"+sn.OpType), sn.OpType, ins, outs)
		c.Domain, c.Attrs, c.Overload = sn.Domain, sn.Attrs, sn.Overload
		b.nodes = append(b.nodes, c)
	}
	out := sg.Outputs[0].Name
	if r, ok := rename[out]; ok {
		out = r
	}
	return out, nil
}
