// Package infer is Loom's shape inference over go/graph's model IR: Shapes and ShapesFor derive
// the type and the static or symbolic shape of every value of a graph.Model from its inputs,
// initializers and operator semantics, walking subgraphs with their outer scope, and record
// them in each graph.Value (Inferred, and Type merged with what the model declares).
//
// Each operator's shape rule is written once, here; MatMulShapes exposes MatMul's for the paths
// that run MatMul on concrete shapes (the session's host function and kernel planners).
// Inference errors are *graph.Error values naming the node and value at fault, and a panic
// inside a rule is returned as an internal error instead of escaping.
package infer
