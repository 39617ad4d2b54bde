// Package kernelops holds the op library's kernel planners, registered in package ops at init:
// each plans its op as launches of kernels of the kernels module (a source, a symbol, a
// specialization and a launch geometry) for the inputs it covers, and declines otherwise, when
// the op's host function (packages movement, arith and nn) runs. It imports ops, the host
// packages whose functions its planners call, tensor and device of the session layer.
package kernelops
