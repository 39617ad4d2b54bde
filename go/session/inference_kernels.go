package session

import (
	"sort"
	"strings"
	"sync"

	"github.com/loomrt/loom/go/native"
)

// loadedKernel is a kernel an InferenceSession compiled and loaded once for all its runs: the
// module stays loaded until the session closes, so a run only has to register the kernel with
// its ModelSession (no compile-cache lookup, no module load per run).
type loadedKernel struct {
	kernel *native.Kernel
	sig    KernelSignature // normalized
}

// kernelCache holds an InferenceSession's loaded kernels by (file, symbol, configuration), and
// the modules behind them by artifact key. It is safe for concurrent use; a miss compiles and
// loads under the lock, so concurrent runs never load the same kernel twice.
type kernelCache struct {
	mu          sync.Mutex
	kernels     map[string]*loadedKernel
	moduleByKey map[string]*native.Module
	modules     []*native.Module // owned, in load order
	closed      bool
}

// kernelCacheKey spells out a kernel request; the configuration's keys are sorted so the same
// specialization always maps to the same entry.
func kernelCacheKey(file, symbol string, config map[string]string) string {
	keys := make([]string, 0, len(config))
	for k := range config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(file)
	b.WriteByte(0)
	b.WriteString(symbol)
	for _, k := range keys {
		b.WriteByte(0)
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(config[k])
	}
	return b.String()
}

// get returns the kernel for the request, compiling (through the context's compiler and its
// disk cache) and loading it on first use.
func (c *kernelCache) get(ctx *ModelContext, file, symbol string, config map[string]string) (*loadedKernel, error) {
	const op = "Run"
	key := kernelCacheKey(file, symbol, config)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, newError(op, ErrClosed, "the session is closed")
	}
	if k := c.kernels[key]; k != nil {
		return k, nil
	}
	src, err := kernelSource(file, symbol, config)
	if err != nil {
		return nil, err
	}
	comp, err := ctx.Compiler()
	if err != nil {
		return nil, err
	}
	if err := comp.checkFor(op, ctx.dev); err != nil {
		return nil, err
	}
	compiled, err := comp.compile(op, ctx.dev, []KernelSource{src})
	if err != nil {
		return nil, err
	}
	ck := compiled[0]
	m := c.moduleByKey[ck.artifact.Key]
	fresh := m == nil
	if fresh {
		if m, err = loadArtifact(op, ctx.dev, ck.artifact); err != nil {
			return nil, err
		}
	}
	kernel, err := m.Kernel(ck.artifact.Entry)
	if err != nil {
		if fresh {
			m.Close()
		}
		return nil, wrapError(op, ErrDevice, err, "%s: the compiled module has no kernel %s", describeSource(src), ck.artifact.Entry)
	}
	if fresh {
		if c.moduleByKey == nil {
			c.moduleByKey = map[string]*native.Module{}
		}
		c.moduleByKey[ck.artifact.Key] = m
		c.modules = append(c.modules, m)
	}
	if c.kernels == nil {
		c.kernels = map[string]*loadedKernel{}
	}
	k := &loadedKernel{kernel: kernel, sig: ck.sig}
	c.kernels[key] = k
	return k, nil
}

// close unloads the modules; the caller guarantees that no run uses them any more.
// Idempotent.
func (c *kernelCache) close() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for _, m := range c.modules {
		errs = append(errs, m.Close())
	}
	c.modules, c.moduleByKey, c.kernels = nil, nil, nil
	return errs
}

// useLoadedKernel makes a kernel that the caller keeps loaded dispatchable in s without handing
// s its module (unlike ImportKernel): the module must outlive s. sig must be normalized.
func (s *ModelSession) useLoadedKernel(op string, k *loadedKernel) (KernelID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return KernelID{}, err
	}
	return s.addKernel(k.kernel, k.sig), nil
}
