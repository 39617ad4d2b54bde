// Package arith holds the host functions of the arithmetic ops, registered in package ops at
// init: elementwise math, comparison and logic (computed in float64 and converted back to the
// operand type), Gelu, the reductions, ArgMax, ArgMin and CumSum, MatMul, Gemm, Einsum and Det,
// quantization (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, the integer and QLinear
// matrix products and convolutions), the random generators and Dropout, the window generators
// and MelWeightMatrix, and the text ops StringNormalizer and TfIdfVectorizer. It imports ops and
// tensor of the session layer.
package arith
