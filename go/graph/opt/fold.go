package opt

import (
	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/refeval"
)

// maxFoldedElements bounds a folded result that is larger than the constants it came from, so
// that folding an Expand or ConstantOfShape cannot bloat the model.
const maxFoldedElements = 1 << 16

// FoldConstants evaluates nodes whose inputs are all constants and replaces their outputs with
// initializers. Shape and Size of values whose shapes inference knows statically fold too, so
// Shape→Gather→Unsqueeze→Concat chains that compute static shapes collapse into constants.
// Random operators, operators with subgraphs and those the reference evaluator lacks stay.
func FoldConstants(m *graph.Model) (bool, error) {
	changed := false
	m.Graph.Walk(func(g *graph.Graph) {
		dead := map[*graph.Node]bool{}
		for _, n := range g.Nodes {
			if n.Domain != "" || n.Traits().Nondeterministic || len(n.Subgraphs()) > 0 || n.OpType == "Constant" {
				continue
			}
			outs := foldShape(g, n)
			if outs == nil {
				outs = foldEval(m, g, n)
			}
			if outs == nil {
				continue
			}
			for i, t := range outs {
				if i < len(n.Outputs) && n.Outputs[i] != "" {
					t.Name = n.Outputs[i]
					g.AddInitializer(t)
				}
			}
			dead[n] = true
		}
		if len(dead) > 0 {
			removeNodes(g, dead)
			changed = true
		}
	})
	return changed, nil
}

func foldShape(g *graph.Graph, n *graph.Node) []*graph.Tensor {
	if !(isOp(n, "Shape") || isOp(n, "Size")) || len(n.Inputs) < 1 {
		return nil
	}
	s, ok := shapeOf(g, n.Inputs[0])
	if !ok {
		return nil
	}
	dims, ok := s.Ints()
	if !ok {
		return nil
	}
	if n.OpType == "Size" {
		return []*graph.Tensor{graph.TensorFromInt64("", nil, []int64{s.NumElements()})}
	}
	r := int64(len(dims))
	start, end := n.AttrInt("start", 0), n.AttrInt("end", r)
	if start < 0 {
		start += r
	}
	if end < 0 {
		end += r
	}
	start, end = max(0, min(start, r)), max(0, min(end, r))
	if end < start {
		end = start
	}
	return []*graph.Tensor{graph.TensorFromInt64("", []int64{end - start}, dims[start:end])}
}

func foldEval(m *graph.Model, g *graph.Graph, n *graph.Node) []*graph.Tensor {
	// Every input must be a constant before any is converted: a float64 copy of a large
	// weight read by a node that cannot fold (Gather of an embedding by token ids) was 2x
	// the weight of garbage (309 MB for GPT-2's).
	for _, in := range n.Inputs {
		if in != "" && constant(g, in) == nil {
			return nil
		}
	}
	args := make([]*refeval.Value, len(n.Inputs))
	inElems := 0
	for i, in := range n.Inputs {
		if in == "" {
			continue
		}
		t := constant(g, in)
		if t == nil || t.DType == graph.String {
			return nil
		}
		v, err := refeval.FromTensor(t)
		if err != nil {
			return nil
		}
		inElems += v.Numel()
		args[i] = v
	}
	if len(n.Inputs) == 0 {
		return nil
	}
	for _, o := range n.Outputs {
		// Refuse before evaluating when inference already knows the result grows too much.
		if s, ok := shapeOf(g, o); ok && s.NumElements() > maxFoldedElements && s.NumElements() > int64(inElems) {
			return nil
		}
	}
	outs, err := refeval.Eval(n, m.Opset(n.Domain), args)
	if err != nil {
		return nil
	}
	var res []*graph.Tensor
	for i, o := range outs {
		if i >= len(n.Outputs) {
			break
		}
		if o.Numel() > maxFoldedElements && o.Numel() > inElems {
			return nil
		}
		want := elemOf(g, n.Outputs[i])
		if want != graph.Undefined && want != o.DType {
			return nil
		}
		t, err := o.ToTensor(n.Outputs[i])
		if err != nil {
			return nil
		}
		res = append(res, t)
	}
	return res
}
