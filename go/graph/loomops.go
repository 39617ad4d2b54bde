package graph

// LoomDomain is the operator domain of the fused operators Loom's optimization passes create:
//
//   - FusedConv: Conv followed by an activation (attribute activation: Relu, Sigmoid, Tanh,
//     LeakyRelu, Clip, HardSigmoid, HardSwish or Swish, x·sigmoid(β·x); activation_params: its
//     alpha/beta, min/max or β, default 1) and then output_scale·y + output_shift (defaults 1
//     and 0).
//   - MatMulAdd: MatMul(A, B) + C for inputs of any rank, C broadcast to the product, then an
//     optional activation applied to that sum in the product's epilogue, with ONNX Gelu's
//     semantics: attribute activation (string) "" or absent for none, or "Gelu"; approximate
//     (string, as Gelu-20's) "none" (the default: 0.5·x·(1+erf(x/√2))) or "tanh"
//     (0.5·x·(1+tanh(√(2/π)·(x+0.044715·x³)))). Other values are errors.
//   - Attention: softmax(Q·Kᵀ·scale ⊕ mask)·V with inputs Q, K (or Kᵀ when k_transposed=1),
//     V and an optional mask; mask_mode 1 adds the mask, 2 keeps scores where the boolean mask
//     is true (else mask_fill), 3 fills where it is true.
//   - LayerNormalization, Gelu and HardSwish: the standard operators, for models whose opset
//     predates them.
const LoomDomain = "ai.loom"
