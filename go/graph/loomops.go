package graph

import "fmt"

// LoomDomain is the operator domain of the fused operators Loom's optimization passes create:
//
//   - FusedConv: Conv followed by an activation (attribute activation: Relu, Sigmoid, Tanh,
//     LeakyRelu, Clip, HardSigmoid, HardSwish or Swish, x·sigmoid(β·x); activation_params: its
//     alpha/beta, min/max or β, default 1) and then output_scale·y + output_shift (defaults 1
//     and 0).
//   - MatMulAdd: MatMul(A, B) + C for inputs of any rank, C broadcast to the product.
//   - Attention: softmax(Q·Kᵀ·scale ⊕ mask)·V with inputs Q, K (or Kᵀ when k_transposed=1),
//     V and an optional mask; mask_mode 1 adds the mask, 2 keeps scores where the boolean mask
//     is true (else mask_fill), 3 fills where it is true.
//   - LayerNormalization, Gelu and HardSwish: the standard operators, for models whose opset
//     predates them.
const LoomDomain = "ai.loom"

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
		return c.out(0, UnrankedTensor(c.elem(0)))
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
	return c.out(0, TensorType(c.elem(0), out))
}

func inferLoomAttention(c *inferNode) error {
	q, ok := c.shape(0)
	k, ok2 := c.shape(1)
	v, ok3 := c.shape(2)
	if !ok || !ok2 || !ok3 || len(k) < 2 {
		return c.out(0, UnrankedTensor(c.elem(0)))
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
	return c.out(0, TensorType(c.elem(0), out))
}
