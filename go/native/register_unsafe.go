package native

import (
	"unsafe"

	"github.com/loomrt/loom/go/native/internal/cabi"
)

// RegisterHostModule registers ahead-of-time host kernels linked into the binary under a
// module name, for Device.LoadHostStatic (loom_host_module_register; registering a name again
// replaces it). entries points to count loom_host_kernel_entry values in C memory that stays
// valid for the life of the process, as cgo code defines them (a static array); it is the one
// way C function pointers reach this package, hence the unsafe.Pointer.
func RegisterHostModule(name, target string, entries unsafe.Pointer, count int) error {
	const op = "RegisterHostModule"
	if err := abiCheck(); err != nil {
		return err
	}
	if name == "" || target == "" || entries == nil || count <= 0 || count > 1<<20 {
		return newError(op, StatusInvalidArgument, "need a module name, a target and 1 or more entries (name %q, target %q, %d entries)", name, target, count)
	}
	return fromFailure(op, cabi.HostModuleRegister(name, target, entries, uint32(count)))
}
