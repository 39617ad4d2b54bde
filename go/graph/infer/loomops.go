package infer

import (
	"fmt"

	"github.com/loomrt/loom/go/graph"
)

// The shape rules of the operators in graph.LoomDomain, the ones Loom's optimization passes
// create.
func init() {
	inferLoomFuncs = map[string]inferFunc{
		"FusedConv":          inferConv,
		"MatMulAdd":          inferMatMulAdd,
		"Attention":          inferLoomAttention,
		"LayerNormalization": inferLayerNorm,
		"Gelu":               inferSame,
		"HardSwish":          inferSame,
	}
}

var inferLoomFuncs map[string]inferFunc

func inferMatMulAdd(c *inferNode) error {
	a, ok := c.shape(0)
	b, ok2 := c.shape(1)
	bias, ok3 := c.shape(2)
	if !ok || !ok2 || !ok3 {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	p, err := matmulShape(a, b)
	if err != nil {
		return err
	}
	out, err := broadcastShapes(p, bias)
	if err != nil {
		return err
	}
	if len(out) != len(p) {
		return fmt.Errorf("bias %v has a higher rank than the product %v", bias, p)
	}
	return c.out(0, graph.TensorType(c.elem(0), out))
}

func inferLoomAttention(c *inferNode) error {
	q, ok := c.shape(0)
	k, ok2 := c.shape(1)
	v, ok3 := c.shape(2)
	if !ok || !ok2 || !ok3 || len(k) < 2 {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	kt := k
	if c.n.AttrInt("k_transposed", 0) == 0 {
		kt = k.Clone()
		kt[len(kt)-1], kt[len(kt)-2] = k[len(k)-2], k[len(k)-1]
	}
	s, err := matmulShape(q, kt)
	if err != nil {
		return err
	}
	out, err := matmulShape(s, v)
	if err != nil {
		return err
	}
	return c.out(0, graph.TensorType(c.elem(0), out))
}
