// Package testkernels registers a static host module of small kernels (kernels.c) for
// go/session's tests, examples and benchmarks: kernels whose memory behaviour is exactly what
// their bindings declare, without depending on the Loom compiler. cgo cannot appear in _test.go
// files, hence an internal package; it reaches the shim only through package native.
//
// Kernels (buffers; scalars):
//
//	mix(b0..bk; seed, delay_us, mode0, bytes0, ..., modek, bytesk)
//	    hashes the bytes of the bindings it reads (mode bit 0), sleeps delay_us, then fills
//	    the bindings it writes (mode bit 1) with bytes derived from the hash; one block, one
//	    thread
//	axpy_f32(x, y; alpha, n)   y[i] += alpha * x[i] for i < n
package testkernels

/*
#cgo CPPFLAGS: -I${SRCDIR}/../../../../shim/include
#cgo CFLAGS: -O2

#include <stdint.h>
#include "loom/loom.h"

extern const loom_host_kernel_entry loom_session_testkernels_entries[];
extern const uint32_t loom_session_testkernels_count;
*/
import "C"

import (
	"unsafe"

	"github.com/loomrt/loom/go/native"
)

// Module is the name the kernels are registered under.
const Module = "loom_session_testkernels"

// Load registers the kernels for dev's target (they are plain C and run on any host target)
// and loads them on dev.
func Load(dev *native.Device) (*native.Module, error) {
	if err := native.RegisterHostModule(Module, dev.Target(), unsafe.Pointer(&C.loom_session_testkernels_entries), int(C.loom_session_testkernels_count)); err != nil {
		return nil, err
	}
	return dev.LoadHostStatic(Module, dev.Target())
}
