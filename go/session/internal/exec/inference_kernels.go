package exec

import (
	"fmt"
	"sync"

	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// KernelCache holds an InferenceSession's loaded kernels by (file, symbol, configuration), and
// the modules behind them by artifact key. It is safe for concurrent use; a miss compiles and
// loads under the lock, so concurrent runs never load the same kernel twice. Under the
// background policy (Policy, jit_background.go) a run whose kernels are not all loaded or
// shipped runs shape-generic shipped ones instead, and the exact kernels are compiled by one
// worker outside the lock and loaded when done.
type KernelCache struct {
	Mu          sync.Mutex
	Kernels     map[string]*device.LoadedKernel
	ModuleByKey map[string]*native.Module
	Modules     []*native.Module // owned, in load order
	closed      bool
	Counts      [phaseCount]KernelPhaseCounts // by phase (see CacheStats)
	kept        map[string]keptKernel         // non-nil: compiled kernels recorded for an EP context model
	// jitChecked, jitErr: whether the JIT can compile here (see jit); notShipped counts the
	// kernel plans that ran as host functions because a kernel was neither shipped nor
	// compilable.
	jitChecked bool
	JITErr     error
	NotShipped int64
	// Policy says when kernels that are neither loaded nor shipped are compiled (set before
	// the first run); bg is the background compiler of JITBackground (jit_background.go).
	Policy JITPolicy
	bg     background
	// MaxJITModules bounds the modules the JIT compiles and loads for the session (0:
	// DefaultMaxJITModules). A kernel specialization can depend on the input shape (a
	// convolution's row width, a block count), so a stream of new shapes would otherwise
	// load modules without end; past the bound the JIT is unavailable to the session (as
	// under JITOff: loaded and shipped kernels, shape-generic stand-ins, host functions), and
	// JITErr says why. jitModules counts the modules it loaded.
	MaxJITModules int
	jitModules    int
}

// DefaultMaxJITModules is KernelCache.MaxJITModules's default: 35 times what a batch sweep of
// a CNN classifier loads (29 for batches 1-64). A host module costs about 38 kB of resident
// memory and 5 memory mappings (150 loaded: +5,648 kB RSS, +750 mappings), so 1024 stay under
// 40 MB and a tenth of Linux's default limit of 65,530 mappings a process.
const DefaultMaxJITModules = 1024

// Get returns the kernel for the request, compiling (through the context's compiler and its
// disk cache) and loading it on first use; the outcome is counted under phase.
func (c *KernelCache) Get(ctx *device.ModelContext, phase RunPhase, file, symbol string, config map[string]string) (*device.LoadedKernel, error) {
	const op = "Run"
	var buf [256]byte
	kb := ops.AppendKernelKey(buf[:0], file, symbol, config)
	c.Mu.Lock()
	defer c.Mu.Unlock()
	if c.closed {
		return nil, tensor.NewError(op, tensor.ErrClosed, "the session is closed")
	}
	if k := c.Kernels[string(kb)]; k != nil {
		c.Counts[phase].Hits++
		return k, nil
	}
	key := string(kb)
	c.Counts[phase].Misses++
	recordKernel(file, symbol, config)
	src, err := SourceOf(file, symbol, config)
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
	v := LookupShipped(src, comp.Target)
	if v == nil && c.jit(comp) != nil {
		v = LookupShippedBelow(src, comp.Target)
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
		if m = c.ModuleByKey[art.Key]; m == nil {
			if m, err = loadShipped(ctx.Device(), v); err != nil {
				return nil, tensor.WrapError(op, tensor.ErrDevice, err, "cannot load shipped kernel %s", device.DescribeSource(src))
			}
			fresh = true
		}
		c.Counts[phase].Shipped++
	} else {
		if jerr := c.jit(comp); jerr != nil {
			return nil, tensor.WrapError(op, tensor.ErrCompile, jerr, "%s is not shipped in this binary and the JIT is unavailable", device.DescribeSource(src))
		}
		// The session's context owns its compiler and only this (locked) path and the
		// background worker compile with it, so the change in its counters, less what the
		// worker counted meanwhile, is this kernel's (see compileBackground).
		before, bgBefore := comp.Loom.Stats().Misses, c.bg.misses.Load()
		compiled, err := device.CompileKernel(comp, op, ctx.Device(), []device.KernelSource{src})
		d := max(comp.Loom.Stats().Misses-before-(c.bg.misses.Load()-bgBefore), 0)
		c.Counts[phase].Compiles += d
		c.bg.fgMisses.Add(d)
		if err != nil {
			return nil, err
		}
		ck = compiled[0]
		m = c.ModuleByKey[ck.Artifact.Key]
		fresh = m == nil
		if fresh {
			if m, err = device.LoadArtifact(op, ctx.Device(), comp.Loom, ck.Artifact); err != nil {
				return nil, err
			}
		}
	}
	return c.install(key, file, symbol, config, src, ck, m, fresh, v == nil)
}

// install records a loaded kernel of module m (fresh: m was loaded for it, and is closed
// when the kernel is not in it; compiled: the JIT built m, which counts against
// MaxJITModules); c.Mu is held.
func (c *KernelCache) install(key, file, symbol string, config map[string]string, src device.KernelSource, ck device.CompiledKernel, m *native.Module, fresh, compiled bool) (*device.LoadedKernel, error) {
	if fresh && compiled {
		if err := c.takeJITModule(); err != nil {
			m.Close()
			return nil, tensor.WrapError("Run", tensor.ErrCompile, err, "%s", device.DescribeSource(src))
		}
	}
	kernel, err := m.Kernel(ck.Artifact.Entry)
	if err != nil {
		if fresh {
			m.Close()
		}
		return nil, tensor.WrapError("Run", tensor.ErrDevice, err, "%s: the compiled module has no kernel %s", device.DescribeSource(src), ck.Artifact.Entry)
	}
	if fresh {
		if c.ModuleByKey == nil {
			c.ModuleByKey = map[string]*native.Module{}
		}
		c.ModuleByKey[ck.Artifact.Key] = m
		c.Modules = append(c.Modules, m)
	}
	if c.Kernels == nil {
		c.Kernels = map[string]*device.LoadedKernel{}
	}
	k := &device.LoadedKernel{Kernel: kernel, Sig: ck.Sig}
	c.Kernels[key] = k
	c.keepArtifact(key, file, symbol, config, ck.Artifact)
	return k, nil
}

// takeJITModule counts a module the JIT built, or fails when the session has loaded
// MaxJITModules of them (and makes the JIT unavailable to it from then on); c.Mu is held.
func (c *KernelCache) takeJITModule() error {
	if err := c.jitLimit(); err != nil {
		return err
	}
	c.jitModules++
	return nil
}

// JITModules is how many modules the JIT built and loaded for the session; c.Mu is held.
func (c *KernelCache) JITModules() int { return c.jitModules }

// jitLimit is JITErr once the session has loaded MaxJITModules modules the JIT built (set
// then, for good), else nil; c.Mu is held.
func (c *KernelCache) jitLimit() error {
	limit := c.MaxJITModules
	if limit <= 0 {
		limit = DefaultMaxJITModules
	}
	if c.jitModules < limit {
		return nil
	}
	if c.JITErr == nil {
		c.jitChecked = true
		c.JITErr = fmt.Errorf("the session has loaded %d kernels compiled at run time, its limit (session option loom.jit_max_kernels)", c.jitModules)
	}
	return c.JITErr
}

// Close stops the background compiler (waiting for it) and unloads the modules; the caller
// guarantees that no run uses them any more. Idempotent.
func (c *KernelCache) Close() []error {
	c.bg.stop()
	c.Mu.Lock()
	defer c.Mu.Unlock()
	c.closed = true
	var errs []error
	for _, m := range c.Modules {
		errs = append(errs, m.Close())
	}
	c.Modules, c.ModuleByKey, c.Kernels = nil, nil, nil
	return errs
}

// runSessionPool keeps the ModelSessions of finished runs for later runs, so a run does not
// create (and a finished one tear down) a stream, with its thread, every time. Each idle
// session has been reset: no allocations, recordings or kernels, a fresh owner. At most
// maxIdle are kept; concurrent runs beyond that open their own and close them.
type runSessionPool struct {
	Mu     sync.Mutex
	Idle   []*device.ModelSession
	closed bool
}

// MaxIdleRunSessions bounds the idle per-run sessions an InferenceSession keeps.
const MaxIdleRunSessions = 8

// Get returns an idle session, or nil when there is none.
func (p *runSessionPool) Get() *device.ModelSession {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	if n := len(p.Idle); n > 0 {
		ms := p.Idle[n-1]
		p.Idle[n-1] = nil
		p.Idle = p.Idle[:n-1]
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
	p.Mu.Lock()
	if p.closed || len(p.Idle) >= MaxIdleRunSessions {
		p.Mu.Unlock()
		ms.Close()
		return
	}
	p.Idle = append(p.Idle, ms)
	p.Mu.Unlock()
}

// Close closes the idle sessions; later puts close theirs. Idempotent.
func (p *runSessionPool) Close() []error {
	p.Mu.Lock()
	idle := p.Idle
	p.Idle, p.closed = nil, true
	p.Mu.Unlock()
	var errs []error
	for _, ms := range idle {
		errs = append(errs, ms.Close())
	}
	return errs
}
