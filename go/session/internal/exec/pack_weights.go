package exec

import (
	"slices"

	"github.com/loomrt/loom/go/graph"
)

// PackOnlyWeights names (sorted) the float32 matrices of the model's initializers that the
// session may hold packed alone (its relayWeights): read only as B by matrix products that run as kernels, all in one orientation;
// transposed says which of them those products read transposed (Gemm's transB).
func (e *Engine) PackOnlyWeights() (_ []string, transposed map[string]bool) {
	g := e.Model.Graph
	cand := map[string]bool{}
	transposed = map[string]bool{}
	oriented := map[string]bool{} // a product read the weight: transposed holds its orientation
	for name, gt := range g.Initializers {
		if gt.DType == graph.Float && len(gt.Dims) == 2 && e.Weights[name].IsValid() {
			cand[name] = true
		}
	}
	for _, v := range g.Inputs {
		delete(cand, v.Name)
	}
	for _, v := range g.Outputs {
		delete(cand, v.Name)
	}
	for _, n := range g.Nodes {
		packs, trans := readsBPacked(n)
		packs = packs && e.Placements.Of(n).Kernel
		for i, in := range n.Inputs {
			if !cand[in] {
				continue
			}
			if i != 1 || !packs || (oriented[in] && transposed[in] != trans) {
				delete(cand, in)
				continue
			}
			oriented[in], transposed[in] = true, trans
		}
		for _, sg := range n.Subgraphs() {
			sg.Walk(func(inner *graph.Graph) {
				for _, m := range inner.Nodes {
					for _, in := range m.Inputs {
						delete(cand, in)
					}
				}
				for _, v := range inner.Outputs {
					delete(cand, v.Name)
				}
			})
		}
	}
	names := make([]string, 0, len(cand))
	for name := range cand {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, transposed
}

// readsBPacked says whether n's host kernels may read its input 1 (B) packed in gemm_nn's
// panels: MatMul, Loom's MatMulAdd and Gemm, a B of [k, n] with rows n apart, or (transposed,
// Gemm's transB) a Bᵀ of [n, k].
func readsBPacked(n *graph.Node) (packs, transposed bool) {
	onnx := n.Domain == "" || n.Domain == "ai.onnx"
	switch {
	case onnx && n.OpType == "MatMul":
		return true, false
	case n.Domain == graph.LoomDomain && n.OpType == "MatMulAdd":
		return true, false
	case onnx && n.OpType == "Gemm":
		return true, n.AttrInt("transB", 0) != 0
	}
	return false, false
}
