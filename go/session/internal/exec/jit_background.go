package exec

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/kernelops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// The background JIT. A new input shape often needs a kernel specialization that is neither
// shipped (kernels/aot) nor loaded yet: a GEMM register tile or a convolution's extents fitted
// to the shape. Compiling it with the C compiler on the run path costs that run from a tenth
// of a second to seconds. Under JITBackground a run instead takes the op's shape-generic
// shipped kernels (kernelops.GenericPlan) when they can all run now, and the exact kernels go
// to one worker per session that compiles them (through the session's compiler and its disk
// cache, outside KernelCache.Mu) and loads them. A compiled run plan built with such
// stand-ins is provisional (Substitutes): once every kernel it waits for is loaded, the plan
// cache drops it and the signature is planned again, with the exact kernels and no compile.
// A background compile that fails leaves the stand-ins in place.

// JITPolicy says when a kernel that is neither loaded nor shipped is compiled.
type JITPolicy uint8

// The JIT policies (session option loom.jit).
const (
	// JITBackground runs shape-generic shipped stand-ins while the exact kernels compile in
	// the background (the default); an op without such stand-ins compiles on the run path.
	JITBackground JITPolicy = iota
	// JITSync compiles on the run path, before the kernel's first launch.
	JITSync
	// JITOff never compiles at run time: only shipped kernels run, as on a machine without a
	// C compiler.
	JITOff
)

// ParseJITPolicy reads a policy's name: background, sync or off.
func ParseJITPolicy(s string) (JITPolicy, bool) {
	for p := JITBackground; p <= JITOff; p++ {
		if p.String() == s {
			return p, true
		}
	}
	return 0, false
}

// String is the policy's name, as session option loom.jit spells it.
func (p JITPolicy) String() string {
	switch p {
	case JITBackground:
		return "background"
	case JITSync:
		return "sync"
	case JITOff:
		return "off"
	}
	return "unknown"
}

// errJITOff is why the JIT is unavailable under JITOff.
var errJITOff = errors.New("run-time kernel compilation is off (session option loom.jit=off)")

// BackgroundCounts are the background compiler's outcomes: kernels queued, compiled and
// loaded (Done), failed, and the compiles the Loom compiler really ran for them (its disk
// cache had no entry).
type BackgroundCounts struct{ Queued, Done, Failed, Compiles int64 }

// bgJob is a kernel the background worker compiles and loads.
type bgJob struct {
	key, file, symbol string
	config            map[string]string
}

// background is a kernel cache's background compiler: a queue worked by at most one
// goroutine, started by the first job and ended when the queue is empty or stop is called.
type background struct {
	mu      sync.Mutex
	queue   []bgJob
	pending map[string]bool  // queued or compiling, by kernel key
	loaded  map[string]bool  // compiled and loaded (or found loaded), by kernel key
	failed  map[string]error // by kernel key
	mctx    *device.ModelContext
	ctx     context.Context // cancelled by stop
	cancel  context.CancelFunc
	running bool
	stopped bool
	idle    chan struct{} // closed when the running worker ends
	wg      sync.WaitGroup
	counts  BackgroundCounts
	// gen counts finished jobs (loaded or failed): a waiting plan is looked at again only
	// when it changed. misses and fgMisses are the compiler misses the worker's compiles and
	// the run path's counted, each less the other's during its compile: the compiler's
	// counters are shared, and a miss is counted once when one compile runs inside another.
	gen      atomic.Uint64
	misses   atomic.Int64
	fgMisses atomic.Int64
	// syncing counts the Warmups in progress: while one runs, the policy acts as JITSync (a
	// warmup compiles what its shapes need before the first Run).
	syncing atomic.Int32
}

// SyncCompiles makes the background policy compile on the run path until the returned
// function is called (Warmup).
func (c *KernelCache) SyncCompiles() (end func()) {
	c.bg.syncing.Add(1)
	return func() { c.bg.syncing.Add(-1) }
}

// BackgroundStats returns the background compiler's counters.
func (c *KernelCache) BackgroundStats() BackgroundCounts {
	c.bg.mu.Lock()
	defer c.bg.mu.Unlock()
	return c.bg.counts
}

// BackgroundGen changes whenever a background compile finishes (loaded or failed).
func (c *KernelCache) BackgroundGen() uint64 { return c.bg.gen.Load() }

// WaitBackground waits until the background compiler has nothing queued or compiling, or ctx
// is done.
func (c *KernelCache) WaitBackground(ctx context.Context) error {
	for {
		c.bg.mu.Lock()
		running, idle := c.bg.running, c.bg.idle
		c.bg.mu.Unlock()
		if !running {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Settled reports whether every kernel of keys has left the background compiler, loaded or
// failed (none still queued or compiling), and whether at least one of them is loaded: a
// plan waiting for them is then worth building again. It takes only the background
// compiler's lock, never the one a run-path compile holds.
func (c *KernelCache) Settled(keys []string) (settled, loaded bool) {
	c.bg.mu.Lock()
	defer c.bg.mu.Unlock()
	for _, k := range keys {
		switch {
		case c.bg.loaded[k]:
			loaded = true
		case c.bg.failed[k] != nil:
		default:
			return false, false
		}
	}
	return true, loaded
}

// deferPlan is p, whose kernels the JIT can serve, or under JITBackground (outside a warmup:
// warm) a plan of the same op with shape-generic kernels that are all loaded or shipped,
// while p's missing kernels compile in the background. p stays when nothing is missing or
// there is no such plan (its kernels then compile on the run path).
func (c *KernelCache) deferPlan(ctx *device.ModelContext, key string, n *graph.Node, opset int64, in []ops.ValueInfo, p *ops.KernelPlan, warm bool) *ops.KernelPlan {
	if c.Policy != JITBackground || warm || c.bg.syncing.Load() > 0 {
		return p
	}
	c.Mu.Lock()
	keeping := c.kept != nil
	c.Mu.Unlock()
	if keeping { // an EP context model records the compiled kernels: compile them now
		return p
	}
	missing := c.missing(ctx, p.Calls)
	if len(missing) == 0 {
		return p
	}
	// A plan with large constants of its own (a weight the session holds packed) has
	// stand-ins that read them unpacked, a second copy until the plan is replaced (and made
	// by GenericPlan even when unused): when the exact kernels are in the disk cache
	// (compiled by an earlier process), the run path loads them instead, about a
	// millisecond each.
	if constBytes(p) >= standInCopyBytes && c.cached(ctx, missing) {
		return p
	}
	g := kernelops.GenericPlan(key, n, opset, in, p)
	if g == nil || len(c.missing(ctx, g.Calls)) > 0 {
		return p
	}
	const unavailable = "the JIT is unavailable"
	if strings.Contains(g.Reason, unavailable) {
		g.Reason = strings.Replace(g.Reason, unavailable, "the exact kernels compile in the background", 1)
	} else {
		g.Reason += " (shape-generic stand-ins while the exact kernels compile in the background)"
	}
	if keys := c.enqueue(ctx, missing); len(keys) > 0 {
		substitutes.add(g, c, keys)
	}
	return g
}

// standInCopyBytes is the size of a plan's own constants from which deferPlan prefers the
// exact kernels the disk cache holds to stand-ins: a transformer projection's packed weight
// (768 x 768 floats: 2.25 MiB) is over it, a convolution's packed filters (PP-OCRv4's, whose
// first runs would load dozens of kernels) are under it.
const standInCopyBytes = 1 << 20

// constBytes is the size of p's constants.
func constBytes(p *ops.KernelPlan) int64 {
	var n int64
	for _, t := range p.Consts {
		n += tensor.StorageBytes(t.DType(), int64(t.Len()))
	}
	return n
}

// cached says whether the compiler's disk cache holds every call's kernel.
func (c *KernelCache) cached(ctx *device.ModelContext, calls []ops.KernelCall) bool {
	comp, err := ctx.Compiler()
	if err != nil {
		return false
	}
	for _, call := range calls {
		src, err := SourceOf(call.File, call.Symbol, call.Config)
		if err != nil || !comp.Loom.Cached(context.Background(), src, comp.Target) {
			return false
		}
	}
	return true
}

// missing returns the calls whose kernels are neither loaded nor shipped for the exact target
// (KernelCache.Get would compile them).
func (c *KernelCache) missing(ctx *device.ModelContext, calls []ops.KernelCall) []ops.KernelCall {
	var out []ops.KernelCall
	var comp device.Compiler
	for _, call := range calls {
		if c.loaded(call) {
			continue
		}
		if comp.Loom == nil {
			var err error
			if comp, err = ctx.Compiler(); err != nil {
				return nil // Get reports it
			}
		}
		src, err := SourceOf(call.File, call.Symbol, call.Config)
		if err != nil {
			return nil
		}
		if LookupShipped(src, comp.Target) == nil {
			out = append(out, call)
		}
	}
	return out
}

// enqueue queues the calls' kernels for the background worker (once each) and returns the
// keys a plan standing in for them waits for: those queued or compiling, not those that
// failed before.
func (c *KernelCache) enqueue(ctx *device.ModelContext, calls []ops.KernelCall) []string {
	b := &c.bg
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return nil
	}
	var keys []string
	for _, call := range calls {
		key := ops.KernelKey(call.File, call.Symbol, call.Config)
		if b.failed[key] != nil {
			continue
		}
		keys = append(keys, key)
		if b.pending[key] {
			continue
		}
		if b.pending == nil {
			b.pending = map[string]bool{}
		}
		b.pending[key] = true
		b.queue = append(b.queue, bgJob{key: key, file: call.File, symbol: call.Symbol, config: call.Config})
		b.counts.Queued++
	}
	if len(b.queue) > 0 && !b.running {
		if b.ctx == nil {
			b.ctx, b.cancel = context.WithCancel(context.Background())
		}
		b.mctx, b.running, b.idle = ctx, true, make(chan struct{})
		b.wg.Add(1)
		go c.work()
	}
	return keys
}

// work compiles and loads the queued kernels, one at a time, until the queue is empty or the
// cache stops it.
func (c *KernelCache) work() {
	b := &c.bg
	defer b.wg.Done()
	for {
		b.mu.Lock()
		if len(b.queue) == 0 || b.ctx.Err() != nil {
			b.running = false
			close(b.idle)
			b.mu.Unlock()
			return
		}
		job, mctx, ctx := b.queue[0], b.mctx, b.ctx
		b.queue = b.queue[1:]
		b.mu.Unlock()
		err := c.compileBackground(ctx, mctx, job)
		b.mu.Lock()
		delete(b.pending, job.key)
		switch {
		case err == nil:
			if b.loaded == nil {
				b.loaded = map[string]bool{}
			}
			b.loaded[job.key] = true
			b.counts.Done++
		case ctx.Err() == nil: // a failure, not a stop
			if b.failed == nil {
				b.failed = map[string]error{}
			}
			b.failed[job.key] = err
			b.counts.Failed++
		}
		b.mu.Unlock()
		b.gen.Add(1)
	}
}

// compileBackground compiles job's kernel through the session's compiler (outside c.Mu: runs
// go on meanwhile) and loads it into the cache.
func (c *KernelCache) compileBackground(ctx context.Context, mctx *device.ModelContext, job bgJob) error {
	const op = "Run"
	c.Mu.Lock()
	done := c.closed || c.Kernels[job.key] != nil
	limit := c.jitLimit()
	c.Mu.Unlock()
	if done { // closed, or a run loaded it meanwhile
		return ctx.Err()
	}
	if limit != nil { // the session's JIT is spent: the stand-ins stay
		return limit
	}
	src, err := SourceOf(job.file, job.symbol, job.config)
	if err != nil {
		return err
	}
	comp, err := mctx.Compiler()
	if err != nil {
		return err
	}
	if err := device.CheckTarget(comp, op, mctx.Device()); err != nil {
		return err
	}
	if h := backgroundHook.Load(); h != nil {
		(*h)(ctx)
	}
	// The compiler's misses meanwhile, less those the run path counted as its own (it
	// compiles under c.Mu, typically inside this window), are this kernel's.
	before, fgBefore := comp.Loom.Stats().Misses, c.bg.fgMisses.Load()
	res := comp.Loom.CompileBatch(ctx, []loom.Request{{Source: src, Target: comp.Target, RunOnly: true}})[0]
	d := max(comp.Loom.Stats().Misses-before-(c.bg.fgMisses.Load()-fgBefore), 0)
	c.bg.misses.Add(d)
	c.bg.mu.Lock()
	c.bg.counts.Compiles += d
	c.bg.mu.Unlock()
	if res.Err != nil {
		return tensor.WrapError(op, tensor.ErrCompile, res.Err, "%s does not compile", device.DescribeSource(src))
	}
	art := res.Artifact
	if err := loom.CheckTarget(art, comp.Target); err != nil {
		return tensor.WrapError(op, tensor.ErrTargetMismatch, err, "%s", device.DescribeSource(src))
	}
	dev := mctx.Device()
	sig, err := device.SignatureOf(art, dev.Props())
	if err != nil {
		return tensor.WrapError(op, tensor.ErrCompile, err, "%s", device.DescribeSource(src))
	}
	if sig, err = device.NormalizeSignature(sig, op); err != nil {
		return err
	}
	if dev.Backend() == native.BackendCUDA {
		// NVRTC's part of the compile, outside the lock too (LoadArtifact then finds the
		// image in the compiler's image cache).
		if _, err := device.CUDAImage(comp.Loom, art, dev.Props().DriverVersion); err != nil {
			return tensor.WrapError(op, tensor.ErrCompile, err, "cannot compile kernel %s for %s", art.Kernel, art.Target)
		}
	}
	c.Mu.Lock()
	defer c.Mu.Unlock()
	if c.closed || ctx.Err() != nil {
		return ctx.Err()
	}
	if c.Kernels[job.key] != nil {
		return nil
	}
	m := c.ModuleByKey[art.Key]
	fresh := m == nil
	if fresh {
		if m, err = device.LoadArtifact(op, dev, comp.Loom, art); err != nil {
			return err
		}
	}
	_, err = c.install(job.key, job.file, job.symbol, job.config, src, device.CompiledKernel{Artifact: art, Sig: sig}, m, fresh, true)
	return err
}

// backgroundHook, when set, runs in the worker before each compile, with the worker's context.
var backgroundHook atomic.Pointer[func(context.Context)]

// SetBackgroundHook makes every background compile call f with the worker's context (which
// Close cancels) before compiling, until restore is called: tests hold a compile in flight
// with it.
func SetBackgroundHook(f func(ctx context.Context)) (restore func()) {
	backgroundHook.Store(&f)
	return func() { backgroundHook.Store(nil) }
}

// stop cancels the background compile under way (its C compiler is killed) and waits for
// the worker to end; nothing is queued afterwards. Idempotent.
func (b *background) stop() {
	b.mu.Lock()
	b.stopped = true
	b.queue = nil
	if b.cancel != nil {
		b.cancel()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// substitute is what a shape-generic plan the kernel cache handed out stands in for: the
// keys of the exact kernels compiling in the background, in cache.
type substitute struct {
	cache *KernelCache
	keys  []string
}

// substituteTable maps the stand-in plans the kernel caches handed out to what they wait
// for, by a weak pointer: an entry goes when its plan is garbage collected.
type substituteTable struct{ m sync.Map }

var substitutes substituteTable

func (t *substituteTable) add(p *ops.KernelPlan, c *KernelCache, keys []string) {
	wp := weak.Make(p)
	t.m.Store(wp, substitute{cache: c, keys: keys})
	runtime.AddCleanup(p, func(wp weak.Pointer[ops.KernelPlan]) { t.m.Delete(wp) }, wp)
}

// Substitutes reports whether p is a shape-generic plan a kernel cache handed out in place
// of one whose kernels compile in the background: the cache, and the keys of the kernels it
// waits for (see KernelCache.Settled). A compiled run plan holding such a plan is
// provisional (plan.Cache re-plans its signature once they are loaded).
func Substitutes(p *ops.KernelPlan) (*KernelCache, []string) {
	if p == nil {
		return nil, nil
	}
	v, ok := substitutes.m.Load(weak.Make(p))
	if !ok {
		return nil, nil
	}
	s := v.(substitute)
	return s.cache, s.keys
}
