package infer

import (
	"fmt"

	"github.com/loomrt/loom/go/graph"
)

// Shape and type rules of the com.microsoft (ONNX Runtime contrib) operators the session runs
// (go/session/internal/ops/nn/ops_ms.go), and of SimplifiedLayerNormalization, which ONNX
// Runtime registers in the ai.onnx domain. Each checks what its attributes and input ranks
// fix statically and names the input it refuses.

func init() {
	inferMSFuncs["SkipLayerNormalization"] = inferSkipNorm
	inferMSFuncs["SkipSimplifiedLayerNormalization"] = inferSkipNorm
	inferMSFuncs["FastGelu"] = inferSame
	inferMSFuncs["BiasGelu"] = inferSame
	inferMSFuncs["RotaryEmbedding"] = inferMSRotary
	inferMSFuncs["MultiHeadAttention"] = inferMultiHeadAttention
	inferMSFuncs["GroupQueryAttention"] = inferGroupQueryAttention
	inferFuncs["SimplifiedLayerNormalization"] = inferSimplifiedLayerNorm
}

// statShape is x with the axes from ax on set to 1 (a normalization's per-row statistics).
func statShape(x graph.Shape, ax int) graph.Shape {
	s := x.Clone()
	for k := ax; k < len(s); k++ {
		s[k] = graph.DimOf(1)
	}
	return s
}

// inferSkipNorm: output and input_skip_bias_sum the input's shape, mean and inv_std_var its
// shape with the hidden axis 1.
func inferSkipNorm(c *inferNode) error {
	x, ok := c.shape(0)
	if !ok {
		for i := range c.n.Outputs {
			if err := c.out(i, graph.UnrankedTensor(c.elem(0))); err != nil {
				return err
			}
		}
		return nil
	}
	if len(x) != 2 && len(x) != 3 {
		return fmt.Errorf("input (input 0) has rank %d; want 3 (batch, seq, hidden) or 2 (tokens, hidden)", len(x))
	}
	if g, ok := c.shape(2); ok && len(g) != 1 {
		return fmt.Errorf("gamma (input 2) has rank %d; want a vector over the hidden axis", len(g))
	}
	st := statShape(x, len(x)-1)
	for i, t := range []graph.Shape{x, st, st, x} {
		if err := c.out(i, graph.TensorType(c.elem(0), t)); err != nil {
			return err
		}
	}
	return nil
}

// inferSimplifiedLayerNorm: Y the input's shape, inv_std_var its shape with the normalized
// axes 1.
func inferSimplifiedLayerNorm(c *inferNode) error {
	x, ok := c.shape(0)
	if !ok {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	ax := int(c.n.AttrInt("axis", -1))
	if ax < 0 {
		ax += len(x)
	}
	if ax < 0 || ax >= len(x) {
		return fmt.Errorf("axis %d is out of range for X of rank %d", c.n.AttrInt("axis", -1), len(x))
	}
	if err := c.out(0, graph.TensorType(c.elem(0), x)); err != nil {
		return err
	}
	return c.out(1, graph.TensorType(c.elem(0), statShape(x, ax)))
}

// inferMSRotary: the input's shape; a rank-3 input needs num_heads dividing the hidden size
// (when both are known).
func inferMSRotary(c *inferNode) error {
	x, ok := c.shape(0)
	if !ok {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	if len(x) != 3 && len(x) != 4 {
		return fmt.Errorf("input (input 0) has rank %d; want 3 (batch, seq, hidden) or 4 (batch, heads, seq, head_size)", len(x))
	}
	if nh := c.n.AttrInt("num_heads", 0); len(x) == 3 && nh != 0 && (nh < 0 || (x[2].Known() && x[2].Value%nh != 0)) {
		return fmt.Errorf("num_heads %d does not divide the hidden size %v", nh, x[2])
	}
	if c.n.AttrInt("is_packed_batching", 0) != 0 {
		return fmt.Errorf("is_packed_batching=1 is not supported")
	}
	return c.out(0, graph.TensorType(c.elem(0), x))
}

// heads4 is (batch, heads, seq, size) with known heads and size.
func heads4(b graph.Dim, h int64, s graph.Dim, d graph.Dim) graph.Shape {
	return graph.Shape{b, graph.DimOf(h), s, d}
}

// inferMultiHeadAttention: output (batch, seq, heads·v_head_size); present_key and
// present_value (batch, heads, past + kv_seq, head_size).
func inferMultiHeadAttention(c *inferNode) error {
	nh := c.n.AttrInt("num_heads", 0)
	if nh <= 0 {
		return fmt.Errorf("num_heads must be positive, got %d", nh)
	}
	q, ok := c.shape(0)
	if !ok {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	if len(q) != 3 {
		return fmt.Errorf("query (input 0) has rank %d; want 3 (batch, seq, hidden) (packed QKV is not supported)", len(q))
	}
	if q[2].Known() && q[2].Value%nh != 0 {
		return fmt.Errorf("num_heads %d does not divide the query's hidden size %d", nh, q[2].Value)
	}
	if !c.has(1) || !c.has(2) {
		return fmt.Errorf("key and value (inputs 1 and 2) are required (packed QKV or KV is not supported)")
	}
	k, kok := c.shape(1)
	v, vok := c.shape(2)
	out := graph.Shape{q[0], q[1], graph.UnknownDim()}
	var kvSeq, hs, vhs graph.Dim = graph.UnknownDim(), dimDiv(q[2], nh, false), graph.UnknownDim()
	if kok && vok {
		if len(k) != len(v) || (len(k) != 3 && len(k) != 4) {
			return fmt.Errorf("key %v and value %v must both be (batch, kv_seq, hidden) or both (batch, heads, kv_seq, head_size)", k, v)
		}
		if len(v) == 3 {
			out[2] = v[2]
			kvSeq, vhs = k[1], dimDiv(v[2], nh, false)
		} else {
			out[2] = dimMul(v[3], graph.DimOf(nh))
			kvSeq, vhs = k[2], v[3]
		}
	}
	if err := c.out(0, graph.TensorType(c.elem(0), out)); err != nil {
		return err
	}
	total := kvSeq
	if c.has(6) {
		if p, ok := c.shape(6); ok && len(p) == 4 {
			total = dimAdd(p[2], kvSeq)
		} else {
			total = graph.UnknownDim()
		}
	}
	if err := c.out(1, graph.TensorType(c.elem(0), heads4(q[0], nh, total, hs))); err != nil {
		return err
	}
	return c.out(2, graph.TensorType(c.elem(0), heads4(q[0], nh, total, vhs)))
}

// inferGroupQueryAttention: output (batch, seq, num_heads·head_size); present_key and
// present_value (batch, kv_num_heads, present, head_size), present known only from the
// inputs' values.
func inferGroupQueryAttention(c *inferNode) error {
	nh, kvh := c.n.AttrInt("num_heads", 0), c.n.AttrInt("kv_num_heads", 0)
	if nh <= 0 || kvh <= 0 || nh%kvh != 0 {
		return fmt.Errorf("num_heads %d must be a positive multiple of kv_num_heads %d", nh, kvh)
	}
	q, ok := c.shape(0)
	if !ok {
		return c.out(0, graph.UnrankedTensor(c.elem(0)))
	}
	if len(q) != 3 {
		return fmt.Errorf("query (input 0) has rank %d; want 3 (batch, seq, hidden)", len(q))
	}
	hs := dimDiv(q[2], nh, false)
	if !c.has(1) {
		hs = dimDiv(q[2], nh+2*kvh, false) // packed QKV
		if q[2].Known() && q[2].Value%(nh+2*kvh) != 0 {
			return fmt.Errorf("packed query's hidden size %d is not a multiple of num_heads + 2·kv_num_heads = %d", q[2].Value, nh+2*kvh)
		}
	} else if q[2].Known() && q[2].Value%nh != 0 {
		return fmt.Errorf("num_heads %d does not divide the query's hidden size %d", nh, q[2].Value)
	}
	if err := c.out(0, graph.TensorType(c.elem(0), graph.Shape{q[0], q[1], dimMul(hs, graph.DimOf(nh))})); err != nil {
		return err
	}
	present := graph.UnknownDim()
	if p, ok := c.shape(3); ok && len(p) == 4 {
		if t, ok := c.ints(6); ok && len(t) == 1 && p[2].Known() {
			present = graph.DimOf(max(p[2].Value, t[0]))
		}
	} else if !c.has(3) {
		if t, ok := c.ints(6); ok && len(t) == 1 {
			present = graph.DimOf(t[0])
		}
	}
	for i := 1; i <= 2; i++ {
		if err := c.out(i, graph.TensorType(c.elem(0), heads4(q[0], kvh, present, hs))); err != nil {
			return err
		}
	}
	return nil
}
