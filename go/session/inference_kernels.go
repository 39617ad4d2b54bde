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
	counts      [phaseCount]kernelPhaseCounts // by phase (see CacheStats)
	kept        map[string]keptKernel         // non-nil: compiled kernels recorded for an EP context model
	// jitChecked, jitErr: whether the JIT can compile here (see jit); notShipped counts the
	// kernel plans that ran as host functions because a kernel was neither shipped nor
	// compilable.
	jitChecked bool
	jitErr     error
	notShipped int64
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
// disk cache) and loading it on first use; the outcome is counted under phase.
func (c *kernelCache) get(ctx *ModelContext, phase runPhase, file, symbol string, config map[string]string) (*loadedKernel, error) {
	const op = "Run"
	key := kernelCacheKey(file, symbol, config)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, newError(op, ErrClosed, "the session is closed")
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
	if err := comp.checkFor(op, ctx.dev); err != nil {
		return nil, err
	}
	var ck compiledKernel
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
			return nil, wrapError(op, ErrDevice, err, "%s", describeSource(src))
		}
		sig, err := signatureOf(art, ctx.dev.Props())
		if err != nil {
			return nil, wrapError(op, ErrCompile, err, "%s", describeSource(src))
		}
		if sig, err = sig.normalize(op); err != nil {
			return nil, err
		}
		ck = compiledKernel{artifact: art, sig: sig}
		if m = c.moduleByKey[art.Key]; m == nil {
			if m, err = ctx.dev.LoadHostStatic(v.Module, ctx.dev.Target()); err != nil {
				return nil, wrapError(op, ErrDevice, err, "cannot load shipped kernel %s", describeSource(src))
			}
			fresh = true
		}
		c.counts[phase].shipped++
	} else {
		if jerr := c.jit(comp); jerr != nil {
			return nil, wrapError(op, ErrCompile, jerr, "%s is not shipped in this binary and the JIT is unavailable", describeSource(src))
		}
		// The session's context owns its compiler and only this (locked) path compiles with
		// it, so the change in its counters is this kernel's.
		before := comp.Loom.Stats().Misses
		compiled, err := comp.compile(op, ctx.dev, []KernelSource{src})
		c.counts[phase].compiles += comp.Loom.Stats().Misses - before
		if err != nil {
			return nil, err
		}
		ck = compiled[0]
		m = c.moduleByKey[ck.artifact.Key]
		fresh = m == nil
		if fresh {
			if m, err = loadArtifact(op, ctx.dev, ck.artifact); err != nil {
				return nil, err
			}
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
	c.keepArtifact(key, file, symbol, config, ck.artifact)
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

// runSessionPool keeps the ModelSessions of finished runs for later runs, so a run does not
// create (and a finished one tear down) a stream, with its thread, every time. Each idle
// session has been reset: no allocations, recordings or kernels, a fresh owner. At most
// maxIdle are kept; concurrent runs beyond that open their own and close them.
type runSessionPool struct {
	mu     sync.Mutex
	idle   []*ModelSession
	closed bool
}

// maxIdleRunSessions bounds the idle per-run sessions an InferenceSession keeps.
const maxIdleRunSessions = 8

// get returns an idle session, or nil when there is none.
func (p *runSessionPool) get() *ModelSession {
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
func (p *runSessionPool) put(ms *ModelSession) {
	if err := ms.resetForReuse("Run"); err != nil {
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

// resetForReuse waits for the session's work and releases its recordings and allocations,
// keeping its stream and readback buffer, so that a later run can use it as if new. The
// session gets a fresh owner, so regions and kernel ids of the earlier use are refused rather
// than resolved against the new ones. It fails (leaving the session to be closed) when the
// session is closed, frozen or failed, or owns modules (a session of runCtx never does: its
// kernels are the InferenceSession's).
func (s *ModelSession) resetForReuse(op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return err
	}
	if len(s.modules) > 0 {
		return newError(op, ErrInvalidArgument, "the session owns modules")
	}
	if err := s.synchronize(op); err != nil {
		return err
	}
	var errs []error
	for key, rec := range s.recordings {
		errs = append(errs, rec.exec.Close())
		delete(s.recordings, key)
	}
	for _, a := range s.allocs {
		errs = append(errs, s.ctx.freeAllocation(a))
	}
	clear(s.allocs)
	s.allocs = s.allocs[:0]
	clear(s.kernels)
	s.kernels = s.kernels[:0]
	s.owner = newOwner()
	if err := joinErrors(op, errs); err != nil {
		s.failed = err
		return err
	}
	return nil
}

// issueOnce validates commands and enqueues them directly on the session's stream, after the
// work enqueued before them: what Record and Replay do for a command list run once, without
// building a graph (one stream runs its work in order, so the inferred edges add nothing).
func (s *ModelSession) issueOnce(op string, commands []Command) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(op); err != nil {
		return err
	}
	if len(commands) == 0 {
		return newError(op, ErrInvalidArgument, "no commands")
	}
	prepared, err := s.memory().prepare(op, commands)
	if err != nil {
		return err
	}
	return s.issueDirect(op, &recording{commands: prepared})
}
