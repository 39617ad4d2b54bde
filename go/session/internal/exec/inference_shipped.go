package exec

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/kernels/aot"
	_ "github.com/loomrt/loom/kernels/aot/all" // the shipped variants (see kernels/aot)
)

// Shipped kernels: the op library's variants compiled ahead of time into the binary
// (kernels/aot). A request whose static content key (source, symbol, configuration, target)
// names a shipped variant loads it as a static host module, with no C compiler, or on a CUDA
// device as its cubin, with no NVRTC; any other
// request goes to the JIT (on a v4 machine, a variant shipped only for v3 is compiled for v4
// when the JIT works, and used as it is when it does not). Without a C compiler the JIT is unavailable: the kernel cache says
// so once (CacheStats.JITUnavailable) and the planners' callers run an op whose kernels are not
// all shipped as its host function, with the placement reason saying why (servable).
// LOOM_AOT=off ignores the shipped variants (everything goes to the JIT).

// AotOff is LOOM_AOT=off: the shipped variants are ignored (tests set it).
var AotOff = os.Getenv("LOOM_AOT") == "off"

// shippedState is a shipped variant's parsed metadata and registration, done once a process.
type shippedState struct {
	once sync.Once
	art  *loom.Artifact
	err  error
}

var shippedStates sync.Map // *aot.Variant -> *shippedState

// LookupShipped returns the shipped variant that is exactly src compiled for target: host C
// linked into the binary, or for an sm_XX target a cubin built by NVRTC ahead of time.
func LookupShipped(src device.KernelSource, target loom.Target) *aot.Variant {
	if AotOff {
		return nil
	}
	// The static key hashes the whole source: a new input shape's plan asks for every kernel
	// of the model, so the answers for the op library's sources (SourceOf's, read once and
	// never changed) are kept by file, specialization and target. (They were kept by the
	// source's address, which a copy of the source made anew for each lookup: nothing was
	// ever found, and the memo grew by an entry a lookup.)
	memo, kept := shippedMemoKey(src, target)
	if kept {
		if v, ok := shippedLookups.Load(memo); ok {
			return v.(*aot.Variant)
		}
	}
	var v *aot.Variant
	if key, err := loom.StaticKey(src, target); err == nil {
		v, _ = aot.Lookup(key)
	}
	if kept {
		shippedLookups.Store(memo, v)
	}
	return v
}

// shippedMemoKey is LookupShipped's memo key for src and target, and whether it keeps the
// answer (for the op library's own sources).
func shippedMemoKey(src device.KernelSource, target loom.Target) (string, bool) {
	if !librarySource(src) {
		return "", false
	}
	return ops.KernelKey(src.Name, src.Specialization.Symbol, src.Specialization.Config) + "\x00" + target.String(), true
}

// shippedLookups memoizes LookupShipped (see there); it grows with the distinct kernels of
// the op library a process asks for (the shipped variants and the JIT's specializations).
var shippedLookups sync.Map // string -> *aot.Variant (nil: not shipped)

// LookupShippedBelow returns a shipped variant of src for a lower x86-64 level than target's
// (the v3 code on a v4 machine), which the shim runs there: the fallback when the exact
// variant is not shipped and the JIT is unavailable.
func LookupShippedBelow(src device.KernelSource, target loom.Target) *aot.Variant {
	if target.Kind != loom.TargetHost || target.Arch != "x86_64" || target.Level != "v4" {
		return nil
	}
	lower, err := loom.ParseTarget("host-x86_64-v3")
	if err != nil {
		return nil
	}
	return LookupShipped(src, lower)
}

// shippedArtifact registers v's module with the shim and returns its artifact.
func shippedArtifact(v *aot.Variant) (*loom.Artifact, error) {
	st, _ := shippedStates.LoadOrStore(v, &shippedState{})
	s := st.(*shippedState)
	s.once.Do(func() {
		var md loom.StaticMetadata
		if err := json.Unmarshal([]byte(v.Metadata), &md); err != nil || md.Artifact == nil {
			s.err = fmt.Errorf("shipped kernel %s: bad metadata: %v", v.Module, err)
			return
		}
		if v.Entries != nil { // host code; a CUDA variant's cubin is loaded per device
			entries, n := v.Entries()
			if err := native.RegisterHostModule(v.Module, v.Target, entries, n); err != nil {
				s.err = err
				return
			}
		}
		s.art = md.Artifact
	})
	return s.art, s.err
}

// loadShipped loads a shipped variant's module on dev: the registered host module, or the
// CUDA variant's cubin.
func loadShipped(dev *native.Device, v *aot.Variant) (*native.Module, error) {
	if v.Image == nil {
		return dev.LoadHostStatic(v.Module, dev.Target())
	}
	image, err := v.Image()
	if err != nil {
		return nil, err
	}
	return dev.LoadCUDACubin(v.Module, image, v.Target)
}

// jit reports (once per kernel cache) whether comp can compile at run time: a C compiler for
// host targets, NVRTC for CUDA ones (Loom itself emits the CUDA C); never under JITOff.
func (c *KernelCache) jit(comp device.Compiler) error {
	if err := c.jitLimit(); err != nil {
		return err
	}
	if !c.jitChecked {
		c.jitChecked = true
		if c.Policy == JITOff {
			c.JITErr = errJITOff
			return c.JITErr
		}
		c.JITErr = comp.Loom.JIT(comp.Target)
		if c.JITErr == nil && comp.Target.Kind == loom.TargetCUDA {
			if _, err := native.CUDACompiler(); err != nil {
				c.JITErr = fmt.Errorf("loom: no NVRTC to compile CUDA C for %s: %w", comp.Target, err)
			}
		}
	}
	return c.JITErr
}

// jitUnavailable is why the JIT cannot compile, once known ("" when it can or was not needed).
func (c *KernelCache) jitUnavailable() string {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	if c.JITErr != nil {
		return c.JITErr.Error()
	}
	return ""
}

// servable says why the calls cannot run here ("" when they can): a kernel that is neither
// shipped nor compilable (the JIT is unavailable). Callers run the op's host function instead.
func (c *KernelCache) servable(ctx *device.ModelContext, calls []ops.KernelCall) string {
	why := c.unservable(ctx, calls)
	if why != "" {
		c.Mu.Lock()
		c.NotShipped++
		c.Mu.Unlock()
	}
	return why
}

// loaded says whether call's kernel is loaded in the cache already.
func (c *KernelCache) loaded(call ops.KernelCall) bool {
	var buf [256]byte
	key := ops.AppendKernelKey(buf[:0], call.File, call.Symbol, call.Config) // outside the lock
	c.Mu.Lock()
	defer c.Mu.Unlock()
	_, ok := c.Kernels[string(key)]
	return ok
}

// unservable is servable without counting the fallback (CacheStats.NotShipped).
func (c *KernelCache) unservable(ctx *device.ModelContext, calls []ops.KernelCall) string {
	c.Mu.Lock()
	compiles := c.jitChecked && c.JITErr == nil
	c.Mu.Unlock()
	if compiles { // the JIT serves whatever is not shipped: nothing to look up
		return ""
	}
	for _, call := range calls {
		if c.loaded(call) {
			continue
		}
		comp, err := ctx.Compiler()
		if err != nil {
			return "" // the kernel cache reports it
		}
		c.Mu.Lock()
		jerr := c.jit(comp)
		c.Mu.Unlock()
		if jerr == nil {
			return ""
		}
		src, err := SourceOf(call.File, call.Symbol, call.Config)
		if err != nil {
			return ""
		}
		if LookupShipped(src, comp.Target) == nil && LookupShippedBelow(src, comp.Target) == nil {
			return fmt.Sprintf("host: kernel %s is not shipped in this binary and the JIT is unavailable (%v)", ops.Describe(call), jerr)
		}
	}
	return ""
}

// recordKernels appends every kernel a cache loads to $LOOM_RECORD_KERNELS, one line
// "file symbol K=V,..." each: the corpus tools/cmd/kernelgen -aot ships (kernels/aot/corpus.txt).
var recordKernels = struct {
	once sync.Once
	mu   sync.Mutex
	f    *os.File
}{}

func recordKernel(file, symbol string, config map[string]string) {
	path := os.Getenv("LOOM_RECORD_KERNELS")
	if path == "" {
		return
	}
	r := &recordKernels
	r.once.Do(func() { r.f, _ = os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644) })
	if r.f == nil {
		return
	}
	keys := make([]string, 0, len(config))
	for k, v := range config {
		keys = append(keys, k+"="+v)
	}
	sort.Strings(keys)
	line := file + " " + symbol
	if len(keys) > 0 {
		line += " " + strings.Join(keys, ",")
	}
	r.mu.Lock()
	fmt.Fprintln(r.f, line)
	r.mu.Unlock()
}
