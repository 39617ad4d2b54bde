// Command cudareport writes docs/cuda.md's resource report: for every kernel the op library
// ships as a cubin (kernels/aot, built by NVRTC ahead of time), the registers, spill stack,
// local and shared memory that cuobjdump reads from the cubin, and the theoretical occupancy on
// the target (sm_90 by default) for the block the kernel's launch program picks on a large
// workload, and the integer divisions in its machine code (cuobjdump -sass, through nvdisasm).
// It checks the thresholds for the hot kernels (GEMM, convolution, attention, reductions,
// elementwise): no spill (a stack frame) and an occupancy of at least 25%, and for the
// streaming kernels (elementwise and movement: a few instructions an element) no integer
// division, which costs tens of instructions in every thread on a GPU. A
// variant that misses them fails the check unless kernels/aot/cuda_exceptions.txt lists it;
// a listed variant that meets them fails it too, so the list only shrinks.
//
// Usage: cudareport [-dir kernels] [-target sm_90] [-cuobjdump PATH] [-nvdisasm PATH] [-out docs/cuda.md] [-check]
//
// cuobjdump and nvdisasm come from tools/cuda/fetch.sh ($LOOM_CUOBJDUMP, $LOOM_NVDISASM);
// -check compares instead of writing and applies the thresholds.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/kernels/aot"
	_ "github.com/loomrt/loom/kernels/aot/gen/cuda_sm80" // the shipped cubins (Go only: the host
	_ "github.com/loomrt/loom/kernels/aot/gen/cuda_sm90" // packages of aot/all need libm)
	"github.com/loomrt/loom/tools/internal/checkcache"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "cudareport:", err)
		os.Exit(1)
	}
}

// usage is one shipped variant's resources.
type usage struct {
	v         *aot.Variant
	regs      int
	stack     int // bytes of stack frame per thread: spilled registers and local arrays
	local     int
	shared    int // static shared memory per block
	threads   int // per block, from the launch program on the sample workload (0: unknown)
	dynShared int
	occupancy float64 // theoretical, 0..1
	divisions int     // integer divisions in the machine code (inlined or called)
	why       string  // a threshold missed ("" when none or not a hot kernel)
}

func (u usage) id() string { return u.v.Symbol + " " + u.v.Key[:12] }

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("cudareport", flag.ContinueOnError)
	dir := fs.String("dir", "kernels", "the op library's directory")
	target := fs.String("target", "sm_90", "the CUDA target whose cubins to report")
	cuobjdump := fs.String("cuobjdump", os.Getenv("LOOM_CUOBJDUMP"), "cuobjdump (default $LOOM_CUOBJDUMP, else cuobjdump on PATH)")
	nvdisasm := fs.String("nvdisasm", os.Getenv("LOOM_NVDISASM"), "nvdisasm, which cuobjdump -sass runs (default $LOOM_NVDISASM, else nvdisasm on PATH)")
	out := fs.String("out", "docs/cuda.md", "the report to write")
	check := fs.Bool("check", false, "compare with -out and apply the thresholds instead of writing")
	record := fs.Bool("record-exceptions", false, "also rewrite kernels/aot/cuda_exceptions.txt with today's variants under the thresholds (a kernel change that regresses one shows in that file's diff)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tool, err := lookTool(*cuobjdump, "cuobjdump", "LOOM_CUOBJDUMP")
	if err != nil {
		return err
	}
	disasm, err := lookTool(*nvdisasm, "nvdisasm", "LOOM_NVDISASM")
	if err != nil {
		return err
	}
	t, err := loom.ParseTarget(*target)
	if err != nil || t.Kind != loom.TargetCUDA {
		return fmt.Errorf("target %q is not sm_XX", *target)
	}
	sm, ok := smLimits[t.SM]
	if !ok {
		return fmt.Errorf("no occupancy model for %s (have sm_80, sm_90)", t)
	}
	var vs []*aot.Variant
	for _, v := range aot.Variants() {
		if v.Target == t.String() {
			vs = append(vs, v)
		}
	}
	// cuobjdump and nvdisasm take a fraction of a second a cubin: one at a time per CPU, for the
	// cubins the check cache has not seen with these tools.
	cache := openFactsCache(tool, disasm)
	us := make([]usage, len(vs))
	errs := make([]error, len(vs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(runtime.NumCPU(), 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				us[i], errs[i] = measure(tool, disasm, vs[i], sm, cache)
			}
		}()
	}
	for i := range vs {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if len(us) == 0 {
		return fmt.Errorf("no shipped cubins for %s", t)
	}
	sort.Slice(us, func(i, j int) bool { return us[i].v.Module < us[j].v.Module })
	exceptions, err := readExceptions(filepath.Join(*dir, "aot", "cuda_exceptions.txt"))
	if err != nil {
		return err
	}
	report := render(t.String(), us)
	if !*check {
		if *record {
			if err := writeExceptions(filepath.Join(*dir, "aot", "cuda_exceptions.txt"), t.String(), us); err != nil {
				return err
			}
		}
		return os.WriteFile(*out, report, 0o644)
	}
	var problems []string
	for _, u := range us {
		_, listed := exceptions[u.id()]
		switch {
		case u.why != "" && !listed:
			problems = append(problems, fmt.Sprintf("%s (%s %s): %s", u.id(), u.v.File, aot.FormatConfig(u.v.Config), u.why))
		case u.why == "" && listed:
			problems = append(problems, fmt.Sprintf("%s meets the thresholds now: remove it from kernels/aot/cuda_exceptions.txt", u.id()))
		}
		delete(exceptions, u.id())
	}
	for id := range exceptions {
		problems = append(problems, fmt.Sprintf("%s is listed in kernels/aot/cuda_exceptions.txt but not shipped for %s", id, t))
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		return fmt.Errorf("%d kernels miss the thresholds on %s:\n  %s", len(problems), t, strings.Join(problems, "\n  "))
	}
	have, err := os.ReadFile(*out)
	if err != nil || !bytes.Equal(have, report) {
		return fmt.Errorf("%s is not current: run `go run ./tools/cmd/cudareport` (with LOOM_CUOBJDUMP from tools/cuda/fetch.sh)", *out)
	}
	fmt.Fprintf(stdout, "cudareport: %d cubins for %s meet the thresholds or are listed; %s is current (%s)\n", len(us), t, *out, cache.stats())
	return nil
}

// lookTool is the tool a flag names, else name on PATH.
func lookTool(flagValue, name, env string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("no %s: set -%s or %s (tools/cuda/fetch.sh installs it)", name, name, env)
	}
	return p, nil
}

// smLimits are the per-SM resources of the occupancy model (CUDA C Programming Guide, compute
// capabilities table; the CUDA occupancy calculator's allocation rules).
type limits struct {
	maxWarps, maxBlocks, regs, regUnit, warpUnit, sharedPerSM, sharedReserved, sharedUnit int
}

var smLimits = map[int]limits{
	80: {maxWarps: 64, maxBlocks: 32, regs: 65536, regUnit: 256, warpUnit: 4, sharedPerSM: 164 << 10, sharedReserved: 1 << 10, sharedUnit: 128},
	90: {maxWarps: 64, maxBlocks: 32, regs: 65536, regUnit: 256, warpUnit: 4, sharedPerSM: 228 << 10, sharedReserved: 1 << 10, sharedUnit: 128},
}

// occupancy is the theoretical occupancy of blocks of threads using regs registers per thread
// and shared bytes per block.
func occupancy(sm limits, threads, regs, shared int) float64 {
	if threads <= 0 {
		return 0
	}
	warps := (threads + 31) / 32
	blocks := min(sm.maxBlocks, sm.maxWarps/warps)
	if regs > 0 {
		// Registers go to warps in units of regUnit per warp, and to a block's warps in
		// groups of warpUnit warps.
		perWarp := (regs*32 + sm.regUnit - 1) / sm.regUnit * sm.regUnit
		blocks = min(blocks, sm.regs/perWarp/sm.warpUnit*sm.warpUnit/warps)
	}
	if shared > 0 {
		per := (shared+sm.sharedUnit-1)/sm.sharedUnit*sm.sharedUnit + sm.sharedReserved
		blocks = min(blocks, sm.sharedPerSM/per)
	}
	return float64(blocks*warps) / float64(sm.maxWarps)
}

var resource = regexp.MustCompile(`REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)`)

// division matches the first instruction of an integer division's reciprocal step (32-bit, or
// 64-bit with its 32-bit fast path): one a division, inlined or in a called routine.
var division = regexp.MustCompile(`\bI2F\.U(32|64)\.RP\b`)

func measure(tool, disasm string, v *aot.Variant, sm limits, cache *factsCache) (usage, error) {
	u := usage{v: v}
	image, err := v.Image()
	if err != nil {
		return u, err
	}
	f, err := cache.facts(image, func() (cubinFacts, error) { return readCubin(tool, disasm, v.Module, image) })
	if err != nil {
		return u, err
	}
	u.regs, u.stack, u.shared, u.local, u.divisions = f.Regs, f.Stack, f.Shared, f.Local, f.Divisions
	var md loom.StaticMetadata
	if err := json.Unmarshal([]byte(v.Metadata), &md); err != nil || md.Artifact == nil {
		return u, fmt.Errorf("%s: bad metadata: %v", v.Module, err)
	}
	u.threads, u.dynShared = sampleBlock(md.Artifact)
	u.occupancy = occupancy(sm, u.threads, u.regs, u.shared+u.dynShared)
	if hot(v.Symbol) {
		var why []string
		if u.stack > 0 || u.local > 0 {
			why = append(why, fmt.Sprintf("spills (stack %d B, local %d B per thread)", u.stack, u.local))
		}
		if u.occupancy < 0.25 {
			why = append(why, fmt.Sprintf("occupancy %.0f%% < 25%% (%d threads, %d registers per thread)", 100*u.occupancy, u.threads, u.regs))
		}
		if u.threads > 0 && u.threads < 32 {
			// Occupancy counts warps: a block smaller than a warp leaves the rest of its
			// lanes idle however many blocks are resident.
			why = append(why, fmt.Sprintf("a block of %d threads fills %d of a warp's 32 lanes", u.threads, u.threads))
		}
		if streaming(v.Symbol) && u.divisions > 0 {
			why = append(why, fmt.Sprintf("%d integer divisions in every thread", u.divisions))
		}
		u.why = strings.Join(why, "; ")
	}
	return u, nil
}

// cubinFacts is what cuobjdump and nvdisasm read from one cubin.
type cubinFacts struct {
	Regs, Stack, Shared, Local int
	Divisions                  int // integer divisions in the machine code
}

// readCubin runs cuobjdump (and, for -sass, nvdisasm) on image, the cubin of module.
func readCubin(tool, disasm, module string, image []byte) (cubinFacts, error) {
	var c cubinFacts
	f, err := os.CreateTemp("", "cudareport-*.cubin")
	if err != nil {
		return c, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(image); err != nil {
		f.Close()
		return c, err
	}
	f.Close()
	outb, err := exec.Command(tool, "--dump-resource-usage", f.Name()).CombinedOutput()
	if err != nil {
		return c, fmt.Errorf("%s on %s: %v: %s", tool, module, err, outb)
	}
	m := resource.FindSubmatch(outb)
	if m == nil {
		return c, fmt.Errorf("%s on %s printed no resource usage:\n%s", tool, module, outb)
	}
	sass := exec.Command(tool, "-sass", f.Name())
	sass.Env = append(os.Environ(), "NVDISASM_PATH="+filepath.Dir(disasm))
	sassOut, err := sass.CombinedOutput()
	if err != nil {
		return c, fmt.Errorf("%s -sass on %s: %v: %s", tool, module, err, sassOut)
	}
	c.Divisions = len(division.FindAll(sassOut, -1))
	c.Regs, _ = strconv.Atoi(string(m[1]))
	c.Stack, _ = strconv.Atoi(string(m[2]))
	c.Shared, _ = strconv.Atoi(string(m[3]))
	c.Local, _ = strconv.Atoi(string(m[4]))
	return c, nil
}

// factsCache keeps cubinFacts by the cubin's bytes and the two tools' (checkcache): a clean
// clone reads again only the cubins that changed. The nil *factsCache keeps nothing.
type factsCache struct {
	*checkcache.Cache
	tools []byte
}

// openFactsCache is the cache for these two tools, or nil when either cannot be read.
func openFactsCache(tool, disasm string) *factsCache {
	a, err := checkcache.FileHash(tool)
	if err != nil {
		return nil
	}
	b, err := checkcache.FileHash(disasm)
	if err != nil {
		return nil
	}
	c := checkcache.Open("cudareport")
	if c == nil {
		return nil
	}
	return &factsCache{Cache: c, tools: []byte(a + "\x00" + b)}
}

func (c *factsCache) stats() string {
	if c == nil {
		return "no check cache"
	}
	return c.Stats()
}

// facts is image's facts from the cache, else read's (then kept).
func (c *factsCache) facts(image []byte, read func() (cubinFacts, error)) (cubinFacts, error) {
	if c == nil {
		return read()
	}
	key := checkcache.Key([]byte("cudareport-v1"), c.tools, image)
	if b, ok := c.Get(key); ok {
		var f cubinFacts
		if json.Unmarshal(b, &f) == nil {
			return f, nil
		}
	}
	f, err := read()
	if err != nil {
		return f, err
	}
	if b, err := json.Marshal(f); err == nil {
		c.Put(key, b)
	}
	return f, nil
}

// sampleBlock is the block the launch program picks for a large workload: every workload value
// 4096 (dimensions, counts), else smaller ones where the program refuses that.
func sampleBlock(a *loom.Artifact) (threads, shared int) {
	for _, n := range []uint64{4096, 512, 64, 1} {
		w := make([]uint64, len(a.Workload))
		for i := range w {
			w[i] = n
		}
		g, err := a.LaunchConfig(w, loom.Limits{})
		if err == nil {
			return int(g.Block[0] * g.Block[1] * g.Block[2]), int(g.SharedBytes)
		}
	}
	return 0, 0
}

// hot says whether the report's thresholds apply to a kernel: GEMM, convolution, attention,
// reductions and elementwise kernels.
func hot(symbol string) bool {
	for _, p := range []string{"gemm", "bmm", "conv", "attn", "reduce", "softmax", "norm", "binary", "unary", "activation", "compare", "where", "cast", "clip"} {
		if strings.Contains(symbol, p) {
			return true
		}
	}
	return false
}

// streaming says whether a kernel does a few instructions an element (elementwise and
// movement kernels), so that an integer division in every thread outweighs its work.
func streaming(symbol string) bool {
	switch symbol {
	case "binary", "binary_flat", "unary", "activation", "compare", "clip", "cast", "cast_to_bool", "cast_from_bool",
		"strided_copy", "where", "gather":
		return true
	}
	return false
}

// readExceptions reads "SYMBOL KEY12  # why" lines.
func readExceptions(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		text, why, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 2 || len(fields[1]) != 12 {
			return nil, fmt.Errorf("%s:%d: want SYMBOL KEY12 [# why]", path, line)
		}
		out[fields[0]+" "+fields[1]] = strings.TrimSpace(why)
	}
	return out, sc.Err()
}

func writeExceptions(path, target string, us []usage) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# The shipped hot kernels that miss tools/cmd/cudareport's thresholds on %s today (no spill,\n", target)
	b.WriteString("# occupancy of at least 25%, a block of at least a warp, no integer division in a streaming\n")
	b.WriteString("# kernel): SYMBOL KEY12 # why. The check fails\n")
	b.WriteString("# on any other variant under them and on a listed one that meets them: the list only shrinks.\n")
	b.WriteString("# The planners' CPU-shaped GEMM, convolution and RNN tiles (blocks of 1-64 threads, each with\n")
	b.WriteString("# many accumulators) are why; GPU-shaped kernels (issue 13) empty it.\n")
	for _, u := range us {
		if u.why != "" {
			fmt.Fprintf(&b, "%s # %s\n", u.id(), u.why)
		}
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func render(target string, us []usage) []byte {
	type agg struct {
		n, spilling, low           int
		regsLo, regsHi, stack, shm int
		occLo, occHi               float64
		threadsLo, threadsHi       int
		divLo, divHi               int
	}
	bySym := map[string]*agg{}
	var syms []string
	for _, u := range us {
		a := bySym[u.v.Symbol]
		if a == nil {
			a = &agg{regsLo: u.regs, occLo: u.occupancy, threadsLo: u.threads, divLo: u.divisions}
			bySym[u.v.Symbol] = a
			syms = append(syms, u.v.Symbol)
		}
		a.n++
		a.regsLo, a.regsHi = min(a.regsLo, u.regs), max(a.regsHi, u.regs)
		a.stack, a.shm = max(a.stack, u.stack), max(a.shm, u.shared+u.dynShared)
		a.occLo, a.occHi = min(a.occLo, u.occupancy), max(a.occHi, u.occupancy)
		a.threadsLo, a.threadsHi = min(a.threadsLo, u.threads), max(a.threadsHi, u.threads)
		a.divLo, a.divHi = min(a.divLo, u.divisions), max(a.divHi, u.divisions)
		if u.stack > 0 || u.local > 0 {
			a.spilling++
		}
		if u.occupancy < 0.25 {
			a.low++
		}
	}
	sort.Strings(syms)
	var b bytes.Buffer
	fmt.Fprintf(&b, "# CUDA kernels: resource report (%s)\n\n", target)
	b.WriteString("Generated by `go run ./tools/cmd/cudareport` (cuobjdump from `tools/cuda/fetch.sh`); CI\n")
	b.WriteString("checks it is current (`tools/cmd/cudareport`'s test). Do not edit by hand.\n\n")
	b.WriteString("Every kernel variant the op library ships (kernels/aot: manifest.txt and corpus.txt) is\n")
	b.WriteString("compiled by NVRTC 12.9 to a cubin for sm_80 and sm_90 ahead of time and embedded in the\n")
	b.WriteString("binary; CI recompiles them all with the real compiler (tools/cmd/kernelgen's\n")
	b.WriteString("TestShippedCubinsAreWhatNVRTCBuilds). Registers, stack (spills and local arrays, bytes per\n")
	b.WriteString("thread) and shared memory are cuobjdump's; the block is what the kernel's launch program\n")
	b.WriteString("picks when every workload value is 4096; occupancy is the theoretical share of the SM's\n")
	b.WriteString("64 warps resident (registers, shared memory and the 32-block limit); integer divisions are\n")
	b.WriteString("the division sequences in the machine code (`cuobjdump -sass`: each starts with an\n")
	b.WriteString("`I2F.U32.RP` or `I2F.U64.RP`, inlined or in a called routine).\n\n")
	b.WriteString("Thresholds for the hot kernels (GEMM, convolution, attention, reductions, elementwise):\n")
	b.WriteString("no stack frame, at least 25% occupancy, and blocks of at least a warp (occupancy counts warps,\n")
	b.WriteString("so a block of 1 thread resident 32 times reads 50% with 31 of every 32 lanes idle), and for\n")
	b.WriteString("the streaming kernels (elementwise and movement, a few instructions an element) no integer\n")
	b.WriteString("division: tens of instructions in every thread on a GPU (they split block indices with\n")
	b.WriteString("per-launch multipliers instead, FASTDIV in kernels/elementwise.loom). The\n")
	b.WriteString("variants that miss them today are listed in\n")
	b.WriteString("kernels/aot/cuda_exceptions.txt: the check fails on any other, and on a listed one that\n")
	b.WriteString("meets them, so the list only shrinks as the kernels become GPU-shaped.\n\n")
	b.WriteString("| kernel | variants | registers | max stack (B) | max shared (B) | threads per block | occupancy | integer divisions | spilling | under 25% |\n")
	b.WriteString("|---|---:|---|---:|---:|---|---|---|---:|---:|\n")
	for _, s := range syms {
		a := bySym[s]
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %d | %s | %s | %s | %d | %d |\n", s, a.n, span(a.regsLo, a.regsHi), a.stack, a.shm,
			span(a.threadsLo, a.threadsHi), spanPct(a.occLo, a.occHi), span(a.divLo, a.divHi), a.spilling, a.low)
	}
	var listed []usage
	for _, u := range us {
		if u.why != "" {
			listed = append(listed, u)
		}
	}
	fmt.Fprintf(&b, "\n## Hot kernels under the thresholds (%d of %d variants)\n\n", len(listed), len(us))
	if len(listed) == 0 {
		b.WriteString("None.\n")
	} else {
		b.WriteString("| variant | configuration | what |\n|---|---|---|\n")
		for _, u := range listed {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", u.id(), aot.FormatConfig(u.v.Config), u.why)
		}
	}
	return b.Bytes()
}

func span(lo, hi int) string {
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

func spanPct(lo, hi float64) string {
	if lo == hi {
		return fmt.Sprintf("%.0f%%", 100*lo)
	}
	return fmt.Sprintf("%.0f-%.0f%%", 100*lo, 100*hi)
}
