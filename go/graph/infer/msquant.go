package infer

import (
	"fmt"

	"github.com/loomrt/loom/go/graph"
)

// The shape rules of ONNX Runtime's block-quantized contrib operators (com.microsoft).
func init() {
	inferMSFuncs["MatMulNBits"] = inferMatMulNBits
	inferMSFuncs["GatherBlockQuantized"] = inferGatherBlockQuantized
}

// inferMatMulNBits: Y is A's shape with its last axis (K) replaced by the attribute N, of A's
// type.
func inferMatMulNBits(c *inferNode) error {
	k, n := c.n.AttrInt("K", 0), c.n.AttrInt("N", 0)
	if k <= 0 || n <= 0 {
		return fmt.Errorf("attributes K (%d) and N (%d) must be positive", k, n)
	}
	a, ok := c.shape(0)
	if !ok {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	if len(a) == 0 {
		return fmt.Errorf("input A is a scalar")
	}
	if last := a[len(a)-1]; last.Known() && last.Value != k {
		return fmt.Errorf("input A has the shape %v, whose last axis is not K = %d", a, k)
	}
	out := append(append(graph.Shape{}, a[:len(a)-1]...), graph.DimOf(n))
	return c.out(0, graph.TensorType(c.elem(0), out))
}

// inferGatherBlockQuantized: uint8 data holds 8/bits codes a byte along its last axis (int4
// and uint4 data one an element); the output is Gather's shape over those codes, of the
// scales' type.
func inferGatherBlockQuantized(c *inferNode) error {
	data, ok := c.shape(0)
	idx, ok2 := c.shape(1)
	if !ok || !ok2 {
		return c.out(0, graph.UnrankedTensor(c.elem(2)))
	}
	if len(data) == 0 {
		return fmt.Errorf("input data is a scalar")
	}
	bits := c.n.AttrInt("bits", 4)
	if bits != 4 && bits != 8 {
		return fmt.Errorf("bits %d is not supported (4 or 8)", bits)
	}
	logical := append(graph.Shape{}, data...)
	// int4 and uint4 data hold one code an element: the shape is the codes' shape.
	if e := c.elem(0); e != graph.Int4 && e != graph.Uint4 {
		if last := logical[len(logical)-1]; last.Known() {
			logical[len(logical)-1] = graph.DimOf(last.Value * (8 / bits))
		} else {
			logical[len(logical)-1] = graph.UnknownDim()
		}
	}
	ax, err := graph.NormAxis(c.n.AttrInt("gather_axis", 0), len(logical))
	if err != nil {
		return err
	}
	out := append(append(append(graph.Shape{}, logical[:ax]...), idx...), logical[ax+1:]...)
	return c.out(0, graph.TensorType(c.elem(2), out))
}
