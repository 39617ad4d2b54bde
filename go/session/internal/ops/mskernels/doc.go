// Package mskernels holds the kernel planners of ONNX Runtime's contrib operators (domain
// com.microsoft, and SimplifiedLayerNormalization, which ONNX Runtime registers in ai.onnx):
// the transformer ops (layer norms, GELU, rotary embedding, multi-head and group-query
// attention) and the block-quantized ops, registered in package ops at init as kernelops'
// planners are. They plan on the shipped kernels of the kernels module, with the helpers
// kernelops exports, and decline to their ops' host functions (package nn) otherwise. It
// imports ops, kernelops, nn, tensor and device of the session layer; internal/exec links it
// (a blank import), so every program that runs kernels has its planners registered.
package mskernels
