// Package hostops holds the Go host functions of the op library, one per ONNX operator (and the
// fused operators of graph.LoomDomain), registered in package ops at init: they run every op on
// the host, and are what a kernel planner falls back to when its kernels do not cover the
// inputs. It imports ops, tensor and device of the session layer.
package hostops
