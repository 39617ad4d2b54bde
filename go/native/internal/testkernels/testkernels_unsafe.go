// Package testkernels registers a static host module of small kernels (kernels.c) for
// go/native's tests, benchmarks and the nativedemo program. cgo cannot appear in _test.go
// files, so the kernels live in this internal package; it reaches the shim only through
// package native.
//
// Kernels (buffers; scalars), all on uint32 elements, wrapping, guarded: an out-of-range
// element is skipped and bit 1 ORed into the violation word.
//
//	noop                        does nothing
//	add_u32(x, y, z; n)         z[i] = x[i] + y[i]
//	axpy_u32(x, y; alpha, n)    y[i] += alpha * x[i]
//	block_sum_u32(x, out; n)    out[b] = sum of block b's elements (uses 4*block shared bytes)
//	sleep_write_u32(out; us, v) block 0 sleeps us microseconds, then out[0] = v
package testkernels

/*
#cgo CPPFLAGS: -I${SRCDIR}/../../../../shim/include
#cgo CFLAGS: -O2

#include <stdint.h>
#include "loom/loom.h"

extern const loom_host_kernel_entry loom_testkernels_entries[];
extern const uint32_t loom_testkernels_count;
*/
import "C"

import (
	"unsafe"

	"github.com/loomrt/loom/go/native"
)

// Module is the name the kernels are registered under.
const Module = "loom_testkernels"

// Register registers the kernels as Module for target (pass the device's Target(): the
// kernels are plain C and run on any host target). Registering again replaces the entry.
func Register(target string) error {
	return native.RegisterHostModule(Module, target, unsafe.Pointer(&C.loom_testkernels_entries), int(C.loom_testkernels_count))
}

// Load registers the kernels for dev's target and loads them on dev.
func Load(dev *native.Device) (*native.Module, error) {
	if err := Register(dev.Target()); err != nil {
		return nil, err
	}
	return dev.LoadHostStatic(Module, dev.Target())
}
