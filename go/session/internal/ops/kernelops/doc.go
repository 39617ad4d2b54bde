// Package kernelops holds the op library's kernel planners, registered in package ops at init:
// each plans its op as launches of kernels of the kernels module (a source, a symbol, a
// specialization and a launch geometry) for the inputs it covers, and declines otherwise, when
// the op's host function (package hostops) runs. It imports ops, hostops, tensor and device of
// the session layer.
package kernelops
