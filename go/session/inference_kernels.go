package session

import (
	"sync"

	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// kernelCache holds an InferenceSession's loaded kernels by (file, symbol, configuration), and
// the modules behind them by artifact key. It is safe for concurrent use; a miss compiles and
// loads under the lock, so concurrent runs never load the same kernel twice.
type kernelCache struct {
	mu          sync.Mutex
	kernels     map[string]*device.LoadedKernel
	moduleByKey map[string]*native.Module
	modules     []*native.Module // owned, in load order
	closed      bool
	counts      [phaseCount]kernelPhaseCounts // by phase (see CacheStats)
	kept        map[string]keptKernel         // non-nil: compiled kernels recorded for an EP context model
	// jitChecked, jitErr: whether the JIT can compile here (see jit); notShipped counts the
	// kernel plans that ran as host functions because a kernel was neither shipped nor
	// compilable.
	jitChecked bool
	jitErr     error
	notShipped int64
}

// get returns the kernel for the request, compiling (through the context's compiler and its
// disk cache) and loading it on first use; the outcome is counted under phase.
func (c *kernelCache) get(ctx *device.ModelContext, phase runPhase, file, symbol string, config map[string]string) (*device.LoadedKernel, error) {
	const op = "Run"
	key := ops.KernelKey(file, symbol, config)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, tensor.NewError(op, tensor.ErrClosed, "the session is closed")
	}
	if k := c.kernels[key]; k != nil {
		c.counts[phase].hits++
		return k, nil
	}
	c.counts[phase].misses++
	recordKernel(file, symbol, config)
	src, err := kernelSource(file, symbol, config)
	if err != nil {
		return nil, err
	}
	comp, err := ctx.Compiler()
	if err != nil {
		return nil, err
	}
	if err := device.CheckTarget(comp, op, ctx.Device()); err != nil {
		return nil, err
	}
	var ck device.CompiledKernel
	var m *native.Module
	fresh := false
	// A shipped variant is the same code the JIT would build (same static key), so it is
	// used whenever it exists, except while recording artifacts for an EP context model
	// (which embeds shared objects) on a machine that can compile.
	v := lookupShipped(src, comp.Target)
	if v == nil && c.jit(comp) != nil {
		v = lookupShippedBelow(src, comp.Target)
	}
	if v != nil && (c.kept == nil || c.jit(comp) != nil) {
		art, err := shippedArtifact(v)
		if err != nil {
			return nil, tensor.WrapError(op, tensor.ErrDevice, err, "%s", device.DescribeSource(src))
		}
		sig, err := device.SignatureOf(art, ctx.Device().Props())
		if err != nil {
			return nil, tensor.WrapError(op, tensor.ErrCompile, err, "%s", device.DescribeSource(src))
		}
		if sig, err = device.NormalizeSignature(sig, op); err != nil {
			return nil, err
		}
		ck = device.CompiledKernel{Artifact: art, Sig: sig}
		if m = c.moduleByKey[art.Key]; m == nil {
			if m, err = ctx.Device().LoadHostStatic(v.Module, ctx.Device().Target()); err != nil {
				return nil, tensor.WrapError(op, tensor.ErrDevice, err, "cannot load shipped kernel %s", device.DescribeSource(src))
			}
			fresh = true
		}
		c.counts[phase].shipped++
	} else {
		if jerr := c.jit(comp); jerr != nil {
			return nil, tensor.WrapError(op, tensor.ErrCompile, jerr, "%s is not shipped in this binary and the JIT is unavailable", device.DescribeSource(src))
		}
		// The session's context owns its compiler and only this (locked) path compiles with
		// it, so the change in its counters is this kernel's.
		before := comp.Loom.Stats().Misses
		compiled, err := device.CompileKernel(comp, op, ctx.Device(), []device.KernelSource{src})
		c.counts[phase].compiles += comp.Loom.Stats().Misses - before
		if err != nil {
			return nil, err
		}
		ck = compiled[0]
		m = c.moduleByKey[ck.Artifact.Key]
		fresh = m == nil
		if fresh {
			if m, err = device.LoadArtifact(op, ctx.Device(), ck.Artifact); err != nil {
				return nil, err
			}
		}
	}
	kernel, err := m.Kernel(ck.Artifact.Entry)
	if err != nil {
		if fresh {
			m.Close()
		}
		return nil, tensor.WrapError(op, tensor.ErrDevice, err, "%s: the compiled module has no kernel %s", device.DescribeSource(src), ck.Artifact.Entry)
	}
	if fresh {
		if c.moduleByKey == nil {
			c.moduleByKey = map[string]*native.Module{}
		}
		c.moduleByKey[ck.Artifact.Key] = m
		c.modules = append(c.modules, m)
	}
	if c.kernels == nil {
		c.kernels = map[string]*device.LoadedKernel{}
	}
	k := &device.LoadedKernel{Kernel: kernel, Sig: ck.Sig}
	c.kernels[key] = k
	c.keepArtifact(key, file, symbol, config, ck.Artifact)
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

// runSessionPool keeps the ModelSessions of finished runs for later runs, so a run does not
// create (and a finished one tear down) a stream, with its thread, every time. Each idle
// session has been reset: no allocations, recordings or kernels, a fresh owner. At most
// maxIdle are kept; concurrent runs beyond that open their own and close them.
type runSessionPool struct {
	mu     sync.Mutex
	idle   []*device.ModelSession
	closed bool
}

// maxIdleRunSessions bounds the idle per-run sessions an InferenceSession keeps.
const maxIdleRunSessions = 8

// get returns an idle session, or nil when there is none.
func (p *runSessionPool) get() *device.ModelSession {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.idle); n > 0 {
		ms := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		return ms
	}
	return nil
}

// put resets ms and keeps it for a later run; a session that cannot be reset (its stream
// failed, say) or does not fit is closed instead.
func (p *runSessionPool) put(ms *device.ModelSession) {
	if err := device.ResetForReuse(ms, "Run"); err != nil {
		ms.Close()
		return
	}
	p.mu.Lock()
	if p.closed || len(p.idle) >= maxIdleRunSessions {
		p.mu.Unlock()
		ms.Close()
		return
	}
	p.idle = append(p.idle, ms)
	p.mu.Unlock()
}

// close closes the idle sessions; later puts close theirs. Idempotent.
func (p *runSessionPool) close() []error {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	var errs []error
	for _, ms := range idle {
		errs = append(errs, ms.Close())
	}
	return errs
}
