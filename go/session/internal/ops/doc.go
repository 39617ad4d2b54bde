// Package ops is the registry of go/session's op library: per operator its Go host function
// (HostOps, LoomOps for the fused operators of graph.LoomDomain) and, for the ops Loom kernels
// back, its kernel planner (KernelPlanners, with the fallback it runs when the planner declines,
// KernelFallbacks); the types a planner plans with (KernelPlan, KernelCall, operands,
// ValueInfo), the launch geometry fitted to the devices' limits, and the shape and parameter
// helpers the host and kernel paths share. An op's function reaches the run executing it only
// through OpRun. The host functions (packages movement, arith and nn, by kind) and the
// planners (package kernelops) register here; the interpreter and the compiled run plans of
// package session run them. It imports the tensor and device packages of the session layer.
package ops
