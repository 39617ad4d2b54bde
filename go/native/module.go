package native

import (
	"sync"

	"github.com/loomrt/loom/go/native/internal/cabi"
)

// Module is loaded code: host kernels (a shared object or a statically registered module) or
// CUDA code (source compiled by NVRTC, PTX or a cubin). Its kernels live as long as it does.
// Close waits for the streams its kernels ran on; it fails with ErrInUse while a graph or graph
// exec refers to one of its kernels.
type Module struct {
	c    *core
	dev  *Device
	h    cabi.Module
	name string

	mu      sync.Mutex
	kernels map[string]*Kernel
}

// Kernel is one entry point of a Module. It has no Close of its own: it dies with the module,
// and using it after the module was closed fails with ErrClosed.
type Kernel struct {
	m    *Module
	h    cabi.Kernel
	name string
}

// LoadHostSharedObject loads host kernels from a shared object (dlopen) that exports
// loom_host_module_entries. target is what the code was compiled for; it must equal the
// device's target (ErrTargetMismatch).
func (d *Device) LoadHostSharedObject(path, target string) (*Module, error) {
	return d.load("Device.LoadHostSharedObject", cabi.FormatHostSharedObject, target, path, path, nil)
}

// LoadHostStatic loads the host module registered under name (RegisterHostModule); target
// must equal the device's target and the registered one.
func (d *Device) LoadHostStatic(name, target string) (*Module, error) {
	return d.load("Device.LoadHostStatic", cabi.FormatHostStatic, target, "", name, nil)
}

// LoadCUDASource compiles CUDA C source with NVRTC for the device. target may be empty (the
// device's own) or must equal the device's target. Compilation errors return ErrCompile with
// NVRTC's log as the message. name appears in messages.
func (d *Device) LoadCUDASource(name string, source []byte, target string) (*Module, error) {
	return d.load("Device.LoadCUDASource", cabi.FormatCUDASource, target, "", name, source)
}

// LoadCUDAPTX loads PTX text compiled for target (the device's target).
func (d *Device) LoadCUDAPTX(name string, ptx []byte, target string) (*Module, error) {
	return d.load("Device.LoadCUDAPTX", cabi.FormatCUDAPTX, target, "", name, ptx)
}

// LoadCUDACubin loads a cubin or fatbin image compiled for target (the device's target).
func (d *Device) LoadCUDACubin(name string, image []byte, target string) (*Module, error) {
	return d.load("Device.LoadCUDACubin", cabi.FormatCUDACubin, target, "", name, image)
}

func (d *Device) load(op string, format int32, target, path, name string, data []byte) (*Module, error) {
	if err := d.c.pin(op); err != nil {
		return nil, err
	}
	defer d.c.unpin()
	h, f := cabi.ModuleLoad(d.h, format, target, path, name, data)
	if f != nil {
		return nil, fromFailure(op, f)
	}
	c, err := d.newChild(op, "module", func() { cabi.ModuleDestroy(h) })
	if err != nil {
		return nil, err
	}
	m := &Module{c: c, dev: d, h: h, name: name, kernels: make(map[string]*Kernel)}
	guard(m, c)
	return m, nil
}

// Kernel looks up a kernel by name (ErrNotFound if the module has none of that name). Looking
// the same name up again returns the same *Kernel.
func (m *Module) Kernel(name string) (*Kernel, error) {
	const op = "Module.Kernel"
	if err := m.c.pin(op); err != nil {
		return nil, err
	}
	defer m.c.unpin()
	m.mu.Lock()
	defer m.mu.Unlock()
	if k, ok := m.kernels[name]; ok {
		return k, nil
	}
	h, f := cabi.ModuleGetKernel(m.h, m.dev.h, name)
	if f != nil {
		return nil, fromFailure(op, f)
	}
	k := &Kernel{m: m, h: h, name: name}
	m.kernels[name] = k
	return k, nil
}

// Name is the module's name (its path for shared objects).
func (m *Module) Name() string { return m.name }

// Device is the device the module was loaded on.
func (m *Module) Device() *Device { return m.dev }

// String names the module ("module #5 (add.so)").
func (m *Module) String() string { return m.c.String() + " (" + m.name + ")" }

// Close unloads the module after the streams its kernels ran on are done. Idempotent;
// ErrInUse while graphs or graph execs refer to its kernels.
func (m *Module) Close() error { return m.c.close("Module.Close") }

// Name is the kernel's name.
func (k *Kernel) Name() string { return k.name }

// Module is the module the kernel belongs to.
func (k *Kernel) Module() *Module { return k.m }
