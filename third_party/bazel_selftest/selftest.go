// Package selftest checks the Bazel setup: a cgo package calling C++ from a
// cc_library through cdeps.
package selftest

// #include <stdint.h>
// #include "third_party/bazel_selftest/checksum.h"
import "C"

import "unsafe"

// Fletcher32 returns the Fletcher-32 checksum of data, computed by the C++
// cc_library.
func Fletcher32(data []byte) uint32 {
	if len(data) == 0 {
		return uint32(C.selftest_fletcher32(nil, 0))
	}
	return uint32(C.selftest_fletcher32((*C.uint8_t)(unsafe.Pointer(&data[0])), C.size_t(len(data))))
}
