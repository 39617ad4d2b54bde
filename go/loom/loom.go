package loom

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/loomrt/loom/go/loom/codegen"
)

// CompilerVersion identifies the code this compiler generates; it is part of every cache key
// and changes whenever generated code may change.
const CompilerVersion = "loom-0.3.5"

// Config configures a Compiler. The zero Config works: it caches under LOOM_CACHE_DIR (or the
// user cache directory's loom/), uses $CC (or gcc) and compiles up to GOMAXPROCS kernels at once.
type Config struct {
	// CacheDir holds compiled artifacts. Empty: $LOOM_CACHE_DIR, else os.UserCacheDir()/loom,
	// else (no HOME, as in a Bazel test sandbox) $TMPDIR/loom-cache-<uid>.
	CacheDir string
	// NoCache disables the on-disk cache: artifacts live in a private directory removed by Close.
	NoCache bool
	// CC is the C compiler for host targets. Empty: $CC, else "gcc".
	CC string
	// Parallelism bounds concurrent compilations in CompileBatch. Zero: GOMAXPROCS.
	Parallelism int
	// CacheMaxBytes bounds the disk cache: past it the least recently used entries are
	// removed (cache_trim.go). Zero: $LOOM_CACHE_MAX_BYTES, else DefaultCacheMaxBytes;
	// negative: the cache is never trimmed.
	CacheMaxBytes int64
}

// Specialization selects a kernel in a source file and binds its specialization constants.
// Keys hold only [A-Za-z0-9._-]; values are spelled as in source (256, f16, true, 0.5).
type Specialization struct {
	Symbol string
	Config map[string]string
}

// KernelSource is a kernel to compile: the file's name (for positions and messages), its text
// and the specialization.
type KernelSource struct {
	Name           string
	Source         []byte
	Specialization Specialization
}

// CacheStats counts cache outcomes since the Compiler was created.
type CacheStats struct {
	Hits    int64 // artifacts served from disk (or by a concurrent compilation of the same key)
	Misses  int64 // artifacts compiled (no entry, or a corrupt one)
	Corrupt int64 // entries (artifacts or images) that failed verification and were rebuilt
	// ImageHits and ImageMisses count CachedImage: device images (cubins) served from disk,
	// and built.
	ImageHits, ImageMisses int64
}

// Compiler compiles kernels. It is safe for concurrent use; Close releases its private files.
type Compiler struct {
	cfg Config

	initOnce sync.Once
	initErr  error
	cacheDir string
	private  string // NoCache: private directory removed by Close
	cc       string
	ccID     string
	ccGCC    bool // the C compiler is GCC (its --version names the Free Software Foundation)
	// vecMath is the libmvec level each host target links (see vectorMath), probed once.
	vecMath map[Target]int

	mu       sync.Mutex
	inflight map[string]*flight
	closed   bool

	hits, misses, corrupt  atomic.Int64
	imageHits, imageMisses atomic.Int64

	// written counts the bytes written to the disk cache since the last trim, wroteOnce
	// says something was; trimming says a trim is running (trimWG: Close waits for it).
	written             atomic.Int64
	wroteOnce, trimming atomic.Bool
	trimWG              sync.WaitGroup
}

type flight struct {
	done chan struct{}
	art  *Artifact
	err  error
}

// NewCompiler returns a Compiler for cfg.
func NewCompiler(cfg Config) *Compiler {
	return &Compiler{cfg: cfg, inflight: map[string]*flight{}}
}

// ErrClosed is returned by a Compiler after Close.
var ErrClosed = errors.New("loom: compiler closed")

// Close removes the compiler's private files (NoCache). Artifacts that point into them become
// unusable. Close is idempotent.
func (c *Compiler) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.trimWG.Wait()
	if c.private != "" {
		return os.RemoveAll(c.private)
	}
	return nil
}

// Stats returns the cache counters.
func (c *Compiler) Stats() CacheStats {
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Corrupt: c.corrupt.Load(),
		ImageHits: c.imageHits.Load(), ImageMisses: c.imageMisses.Load()}
}

// CacheDir returns the directory artifacts are cached in (after the first compilation).
func (c *Compiler) CacheDir() string {
	c.init()
	return c.cacheDir
}

func (c *Compiler) init() error {
	c.initOnce.Do(func() {
		c.cc = c.cfg.CC
		if c.cc == "" {
			c.cc = os.Getenv("CC")
		}
		if c.cc == "" {
			c.cc = "gcc"
		}
		if c.cfg.NoCache {
			dir, err := os.MkdirTemp("", "loom-private-")
			if err != nil {
				c.initErr = fmt.Errorf("loom: private directory: %w", err)
				return
			}
			c.private = dir
			c.cacheDir = dir
			return
		}
		dir := c.cfg.CacheDir
		if dir == "" {
			dir = os.Getenv("LOOM_CACHE_DIR")
		}
		if dir == "" {
			if base, err := os.UserCacheDir(); err == nil {
				dir = filepath.Join(base, "loom")
			} else {
				// Hermetic sandboxes (Bazel tests, services without HOME) have no user cache
				// directory: fall back to a per-user directory under the temporary directory.
				dir = filepath.Join(os.TempDir(), fmt.Sprintf("loom-cache-%d", os.Getuid()))
			}
		}
		c.cacheDir = dir
	})
	return c.initErr
}

// ccIdentity returns the C compiler's version line (part of host cache keys), found once.
func (c *Compiler) ccIdentity(ctx context.Context) (string, error) {
	c.mu.Lock()
	id := c.ccID
	c.mu.Unlock()
	if id != "" {
		return id, nil
	}
	file, known := ccFileOf(c.cc)
	if known {
		if p, ok := cachedIdentity(file); ok {
			c.mu.Lock()
			c.ccID, c.ccGCC = p.id, p.gcc
			c.mu.Unlock()
			return p.id, nil
		}
	}
	out, err := ccCommand(ctx, "", c.cc, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("loom: C compiler %q: %w", c.cc, err)
	}
	p := ccIdentityProbe{id: strings.SplitN(string(out), "\n", 2)[0],
		gcc: !strings.Contains(string(out), "clang") && strings.Contains(string(out), "Free Software Foundation")}
	if known {
		keepIdentity(file, p)
	}
	c.mu.Lock()
	c.ccID, c.ccGCC = p.id, p.gcc
	c.mu.Unlock()
	return p.id, nil
}

// gccOnlyFlags are code-generation flags for host kernels that GCC takes and clang rejects.
// -fira-region=all has GCC's register allocator treat every loop as a region of its own:
// without it, values live around a kernel's innermost loop (an epilogue's constants hoisted
// out of the loop nest) left gemm_nn's 8 x 3 tile of accumulators short of registers in its k
// loop, which then stored and reloaded them on every iteration (BERT-base's 128 x 768 x 768
// product with its weight constant: 94 -> 146 GFLOP/s on one Xeon core, docs/performance.md).
var gccOnlyFlags = []string{"-fira-region=all"}

// GCCOnlyFlags returns the code-generation flags the JIT adds to cflags when its C compiler is
// GCC. Ahead-of-time C gives them to GCC in a #pragma GCC optimize, which clang ignores.
func GCCOnlyFlags() []string { return slices.Clone(gccOnlyFlags) }

// HostFlags returns the flags c's C compiler builds host kernels of target with (before the
// output and source files): optimization and code-generation flags, the target's ISA flags,
// GCCOnlyFlags when that compiler is GCC, and the libmvec level found by a probe. They are part
// of the kernels' cache keys.
func (c *Compiler) HostFlags(ctx context.Context, target Target) ([]string, error) {
	if err := c.init(); err != nil {
		return nil, err
	}
	if _, err := c.ccIdentity(ctx); err != nil {
		return nil, err
	}
	f := cflags(target)
	c.mu.Lock()
	gcc := c.ccGCC
	c.mu.Unlock()
	if gcc {
		f = append(f, gccOnlyFlags...)
	}
	vf, err := c.vectorMathFlags(ctx, target)
	if err != nil {
		return nil, err
	}
	return append(f, vf...), nil
}

// vectorMathFlags defines LOOM_LIBMVEC for host kernels of target when libmvec links (see
// codegen.VectorMathDecls).
func (c *Compiler) vectorMathFlags(ctx context.Context, target Target) ([]string, error) {
	level, err := c.vectorMath(ctx, target)
	if err != nil || level == 0 {
		return nil, err
	}
	return []string{"-DLOOM_LIBMVEC=" + strconv.Itoa(level)}, nil
}

// vectorMath returns how much of glibc's libmvec host kernels of target can call: 2 (glibc
// 2.35 on), 1 (2.22 on) or 0 (none: not x86-64 Linux, another C library, or a compiler that
// rejects the declarations). It links a probe that calls each declared function from a
// vectorized loop, with undefined symbols refused, once a process for a compiler's file and
// target (ccProbes); a probe its context cancelled returns the context's error.
func (c *Compiler) vectorMath(ctx context.Context, target Target) (int, error) {
	if target.Kind != TargetHost || target.Arch != "x86_64" || runtime.GOOS != "linux" {
		return 0, nil
	}
	c.mu.Lock()
	level, ok := c.vecMath[target]
	c.mu.Unlock()
	if ok {
		return level, nil
	}
	file, known := ccFileOf(c.cc)
	if known {
		level, ok = cachedVectorMath(file, target)
	}
	if !ok {
		level = 0
		for _, try := range []int{2, 1} {
			if c.linksVectorMath(ctx, target, try) {
				level = try
				break
			}
		}
		// A probe the context cut short failed for that reason alone: kept, its "does not
		// link" would give every later kernel of the process other flags (other keys: each
		// compiled again, and without vector math).
		if ctx.Err() != nil {
			return 0, fmt.Errorf("loom: probing libmvec: %w", context.Cause(ctx))
		}
		if known {
			keepVectorMath(file, target, level)
		}
	}
	c.mu.Lock()
	if c.vecMath == nil {
		c.vecMath = map[Target]int{}
	}
	c.vecMath[target] = level
	c.mu.Unlock()
	return level, nil
}

func (c *Compiler) linksVectorMath(ctx context.Context, target Target, level int) bool {
	dir, err := os.MkdirTemp("", "loom-mvec-")
	if err != nil {
		return false
	}
	defer os.RemoveAll(dir)
	fns := []string{"exp", "log", "sin", "cos"}
	if level >= 2 {
		fns = append(fns, "tanh")
	}
	src := "#include <math.h>\n" + codegen.VectorMathDecls + "\n" +
		"void loom_probe(float* restrict x, double* restrict y, int n) {\n"
	for _, fn := range fns { // one loop each: GCC vectorizes a loop of one such call
		src += fmt.Sprintf("  for (int i = 0; i < n; i++) x[i] = %sf(x[i]);\n", fn)
		src += fmt.Sprintf("  for (int i = 0; i < n; i++) y[i] = %s(y[i]);\n", fn)
	}
	src += "}\n"
	cfile, sofile := filepath.Join(dir, "probe.c"), filepath.Join(dir, "probe.so")
	if os.WriteFile(cfile, []byte(src), 0o644) != nil {
		return false
	}
	args := append(cflags(target), "-DLOOM_LIBMVEC="+strconv.Itoa(level), "-Wl,-z,defs", "-o", sofile, cfile, "-lmvec", "-lm")
	if ccCommand(ctx, dir, c.cc, args...).Run() != nil {
		return false
	}
	// The declarations must have taken effect: the probe calls vector variants.
	so, err := os.ReadFile(sofile)
	return err == nil && strings.Contains(string(so), "_ZGV")
}

// Compile compiles one kernel for target.
func (c *Compiler) Compile(src KernelSource, target Target) (*Artifact, error) {
	return c.CompileContext(context.Background(), src, target)
}

// CompileContext is Compile with a context that bounds the C compiler's run.
func (c *Compiler) CompileContext(ctx context.Context, src KernelSource, target Target) (*Artifact, error) {
	return c.compileContext(ctx, src, target, true)
}

// compileContext is CompileContext; text false is Request.RunOnly.
func (c *Compiler) compileContext(ctx context.Context, src KernelSource, target Target, text bool) (*Artifact, error) {
	src, key, err := c.prepare(ctx, src, target)
	if err != nil {
		return nil, err
	}
	// One compilation per key (and kind of artifact) at a time in this process.
	flightKey := key
	if !text {
		flightKey += " run-only"
	}
	c.mu.Lock()
	if f, ok := c.inflight[flightKey]; ok {
		c.mu.Unlock()
		select {
		case <-f.done:
			if f.err == nil {
				c.hits.Add(1) // served without compiling
			}
			return f.art, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f := &flight{done: make(chan struct{})}
	c.inflight[flightKey] = f
	c.mu.Unlock()
	f.art, f.err = c.compileKey(ctx, src, target, key, text)
	c.mu.Lock()
	delete(c.inflight, flightKey)
	c.mu.Unlock()
	close(f.done)
	return f.art, f.err
}

// prepare checks that c can compile for target and returns src with its kernel's symbol
// resolved and the compilation's cache key (see key).
func (c *Compiler) prepare(ctx context.Context, src KernelSource, target Target) (KernelSource, string, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return src, "", ErrClosed
	}
	if err := c.init(); err != nil {
		return src, "", err
	}
	if target.Kind != TargetHost && target.Kind != TargetCUDA {
		return src, "", fmt.Errorf("loom: invalid target %v", target)
	}
	if _, err := ParseTarget(target.String()); err != nil {
		return src, "", fmt.Errorf("loom: %w", err)
	}
	symbol, err := resolveSymbol(src)
	if err != nil {
		return src, "", err
	}
	src.Specialization.Symbol = symbol
	key, err := c.key(ctx, src, target)
	return src, key, err
}

func (c *Compiler) compileKey(ctx context.Context, src KernelSource, target Target, key string, text bool) (*Artifact, error) {
	if art, status := c.lookup(key, target, text); status == cacheHit {
		c.hits.Add(1)
		return art, nil
	} else if status == cacheCorrupt {
		c.corrupt.Add(1)
	}
	c.misses.Add(1)
	fe, err := frontend(src, target, nil)
	if err != nil {
		return nil, err
	}
	art := fe.artifact(key, target)
	if target.Kind == TargetHost {
		so, err := c.buildSharedObject(ctx, fe.source, target, key)
		if err != nil {
			return nil, err
		}
		if err := c.publish(art, target, so); err != nil {
			return nil, err
		}
	} else if err := c.publish(art, target, nil); err != nil {
		return nil, err
	}
	return art, nil
}

// key derives the content address of a compilation.
func (c *Compiler) key(ctx context.Context, src KernelSource, target Target) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "version=%s\n", CompilerVersion)
	sum := sha256.Sum256(src.Source)
	fmt.Fprintf(h, "source=%x\n", sum)
	fmt.Fprintf(h, "symbol=%s\n", src.Specialization.Symbol)
	fmt.Fprintf(h, "target=%s\n", target)
	keys := make([]string, 0, len(src.Specialization.Config))
	for k := range src.Specialization.Config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "spec %q=%q\n", k, src.Specialization.Config[k])
	}
	if target.Kind == TargetHost {
		id, err := c.ccIdentity(ctx)
		if err != nil {
			return "", err
		}
		flags, err := c.HostFlags(ctx, target)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "cc=%s\nflags=%s\n", id, strings.Join(flags, " "))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// cflags are the C compiler flags of host kernels. -fno-trapping-math: a kernel never reads
// the floating-point exception flags, and with them kept GCC may not compute a float operation
// a branch might skip, so it could not if-convert, and vectorize, a loop holding a select of
// float math: attention softmax's exps, select(d < -87, 0, exp(max(d, -87))), ran scalar
// (11 ms of a BERT-base run on Zen 3). It changes no result.
func cflags(t Target) []string {
	f := []string{"-O3", "-std=gnu11", "-fPIC", "-shared", "-fwrapv", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=fast", "-fvisibility=hidden"}
	return append(f, t.hostFlags()...)
}

// buildSharedObject compiles C source into a shared object and returns its bytes.
func (c *Compiler) buildSharedObject(ctx context.Context, source string, target Target, key string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "loom-cc-")
	if err != nil {
		return nil, fmt.Errorf("loom: %w", err)
	}
	defer os.RemoveAll(dir)
	cfile := filepath.Join(dir, "kernel.c")
	sofile := filepath.Join(dir, "kernel.so")
	if err := os.WriteFile(cfile, []byte(source), 0o644); err != nil {
		return nil, fmt.Errorf("loom: %w", err)
	}
	args, err := c.HostFlags(ctx, target)
	if err != nil {
		return nil, err
	}
	args = append(args, "-o", sofile, cfile)
	if level, err := c.vectorMath(ctx, target); err != nil {
		return nil, err
	} else if level > 0 {
		args = append(args, "-lmvec")
	}
	args = append(args, "-lm")
	out, err := ccCommand(ctx, dir, c.cc, args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("loom: %s failed for %s: %v\n%s", c.cc, key[:12], err, out)
	}
	return os.ReadFile(sofile)
}

// Request is one compilation of a batch.
type Request struct {
	Source KernelSource
	Target Target
	// RunOnly says the caller loads and runs the artifact and never reads its Source or IR:
	// a host artifact read from the disk cache then comes without them (they stay on disk,
	// unread; a fresh compilation's come along anyway).
	RunOnly bool
}

// Result is the outcome of one Request.
type Result struct {
	Artifact *Artifact
	Err      error
}

// CompileBatch compiles requests concurrently (at most Config.Parallelism at a time) and returns
// the results in request order.
func (c *Compiler) CompileBatch(ctx context.Context, reqs []Request) []Result {
	n := c.cfg.Parallelism
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	out := make([]Result, len(reqs))
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				out[i].Err = ctx.Err()
				return
			}
			defer func() { <-sem }()
			out[i].Artifact, out[i].Err = c.compileContext(ctx, reqs[i].Source, reqs[i].Target, !reqs[i].RunOnly)
		}(i)
	}
	wg.Wait()
	return out
}
