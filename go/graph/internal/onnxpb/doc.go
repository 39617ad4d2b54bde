// Package onnxpb holds the Go bindings generated from the vendored ONNX protos
// (third_party/onnx/onnx-ml.proto and onnx-data.proto). Regenerate with gen.sh.
package onnxpb

//go:generate ./gen.sh
