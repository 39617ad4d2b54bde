// Package graph is Loom's in-memory form of an ONNX model: it loads ModelProto bytes (with
// external weights mmapped from the model's directory), checks them against the operator
// schemas of the imported opsets, plans activation memory and renders an inspection report.
// Shape inference is package go/graph/infer, the optimization passes package go/graph/opt.
//
// Every entry point that takes untrusted bytes (Load, LoadBytes) returns a *Error naming the
// model, graph, node and value at fault instead of panicking, and refuses absurd sizes before
// allocating for them (see Limits).
package graph
