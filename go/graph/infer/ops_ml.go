package infer

import (
	"fmt"

	"github.com/loomrt/loom/go/graph"
)

// Shape and type rules of the ai.onnx.ml operators the session runs (go/session/internal/ops/
// arith/ops_ml.go): Binarizer, ArrayFeatureExtractor, LabelEncoder and TreeEnsemble.

func init() {
	inferMLFuncs["Binarizer"] = inferSame
	inferMLFuncs["ArrayFeatureExtractor"] = inferArrayFeatureExtractor
	inferMLFuncs["LabelEncoder"] = inferLabelEncoder
	inferMLFuncs["TreeEnsemble"] = inferTreeEnsemble
}

// inferArrayFeatureExtractor: X's elements at indices Y along X's last axis; a 1-D X gives
// [1, |Y|], an N-D X its shape with the last axis |Y| (the count of Y's elements).
func inferArrayFeatureExtractor(c *inferNode) error {
	x, ok := c.shape(0)
	if !ok {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	if len(x) == 0 {
		return fmt.Errorf("X must have at least one axis, got a scalar")
	}
	count := graph.UnknownDim()
	if y, ok := c.shape(1); ok {
		if n, ok := y.Ints(); ok {
			total := int64(1)
			for _, d := range n {
				total *= d
			}
			count = graph.DimOf(total)
		}
	}
	if len(x) == 1 {
		return c.out(0, graph.TensorType(c.elem(0), graph.Shape{graph.DimOf(1), count}))
	}
	out := x.Clone()
	out[len(out)-1] = count
	return c.out(0, graph.TensorType(c.elem(0), out))
}

// inferLabelEncoder: the input's shape, the element type of the values (values_strings,
// values_int64s, values_floats, or values_tensor's type).
func inferLabelEncoder(c *inferNode) error {
	elem := graph.Undefined
	switch {
	case c.n.Attr("values_strings") != nil:
		elem = graph.String
	case c.n.Attr("values_int64s") != nil:
		elem = graph.Int64
	case c.n.Attr("values_floats") != nil:
		elem = graph.Float
	case c.n.Attr("values_tensor") != nil && c.n.Attr("values_tensor").Tensor != nil:
		elem = c.n.Attr("values_tensor").Tensor.DType
	}
	if elem == graph.Undefined { // no values attribute: the checker names it; keep the declared type
		if v := c.s.g.Values[c.n.Outputs[0]]; v != nil {
			v.Type = v.Declared.Clone()
		}
		return nil
	}
	s, ok := c.shape(0)
	return c.out(0, tensorOut(elem, s, ok))
}

// inferTreeEnsemble: [N, n_targets] of X's element type, N being X's first axis.
func inferTreeEnsemble(c *inferNode) error {
	n := graph.UnknownDim()
	if x, ok := c.shape(0); ok && len(x) > 0 {
		n = x[0]
	}
	targets := graph.UnknownDim()
	if a := c.n.Attr("n_targets"); a != nil && a.Int > 0 {
		targets = graph.DimOf(a.Int)
	}
	return c.out(0, graph.TensorType(c.elem(0), graph.Shape{n, targets}))
}
