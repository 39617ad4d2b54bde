package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session"
	"github.com/loomrt/loom/tools/internal/npy"
)

func init() {
	register("run", "run a model on inputs from .npy files, random values, zeros or constants", runMain)
}

// inputForms describes the INPUT arguments of run and bench.
const inputForms = `Each INPUT is name=VALUE, VALUE one of:
  FILE.npy       a C-ordered little-endian NumPy file
  shape:2x3x4    random values of the input's element type with that shape (seeded by --seed)
  zeros:2x3x4    zeros with that shape (RNN states, masks); ones:2x3x4 likewise with ones
  value:V        V repeated over the input's static shape, or a scalar`

// runModel is `loom run` on the process's streams.
func runModel(args []string) int { return runMain(args, os.Stdout, os.Stderr) }

// runMain implements `loom run MODEL [INPUT...]`: it runs the model once and writes each output
// to DIR/NAME.npy.
func runMain(args []string, stdout, stderr io.Writer) int {
	c := newCommand("run", "run MODEL [INPUT...] [-o DIR] [--ep host|cuda|auto] [--strict] [-v] [--plan] [--stats] [--timeout D] [--memory-budget SIZE] [--option KEY=VALUE]...",
		"Runs the model once and writes each output to DIR/NAME.npy.\n"+inputForms+"\nEvery input of the model must be given.", stdout, stderr)
	outDir := c.String("o", ".", "directory to write each output to as NAME.npy")
	provider := c.String("ep", "auto", "execution provider: host, cuda or auto")
	strict := c.Bool("strict", false, "exit 1, without running, when a node does not run on the provider --ep names")
	verbose := c.Bool("v", false, "list every node that does not run on the provider --ep names")
	seed := c.Uint64("seed", 1, "seed of the random inputs given as name=shape:...")
	showPlan := c.Bool("plan", false, "print the compiled run plan: segments of Loom kernels, host steps and why")
	timeout := c.Duration("timeout", 0, "stop the run after this long, e.g. 30s (0: no limit); Ctrl-C stops it too")
	showStats := c.Bool("stats", false, "print the kernel cache's counts: shipped kernels, JIT compilations, ops that fell back to the host")
	var budget byteSize
	c.Var(&budget, "memory-budget", "most memory the run may hold, e.g. 2GiB or 500MB (default: 3/4 of the memory the process may use; docs/reliability.md)")
	maxLoop := c.Int64("max-loop-iterations", session.DefaultMaxLoopIterations, "most iterations of one Loop or Scan node")
	var options sessionOptions
	c.Var(&options, "option", optionUsage)
	pos, rc := c.parse(args)
	if rc >= 0 {
		return rc
	}
	if len(pos) == 0 {
		return c.usageError("no MODEL given")
	}
	if err := checkProvider(*provider); err != nil {
		return c.badArgument("%v", err)
	}
	if err := checkFile("model", pos[0]); err != nil {
		return c.badArgument("%v", err)
	}
	opts := append([]session.LoadOption{session.WithExecutionProvider(session.ExecutionProvider(*provider)), session.WithMaxLoopIterations(*maxLoop)}, options...)
	if budget > 0 {
		opts = append(opts, session.WithMemoryBudget(uint64(budget)))
	}
	stopSpinner := working("loom run: loading "+filepath.Base(pos[0]), true, time.Second)
	s, err := session.Load(pos[0], opts...)
	stopSpinner()
	if err != nil {
		return c.fail("%v", err)
	}
	defer s.Close()
	if n := reportFallbacks(stderr, "loom run", *provider, s.ExecutionProviderFallbackReport(), *verbose); n > 0 && *strict {
		return c.fail("--strict: %d node(s) do not run on %s", n, *provider)
	}
	rnd := rand.New(rand.NewPCG(*seed, *seed^0x9e3779b97f4a7c15))
	feeds, err := parseInputs(s, pos[1:], rnd, false)
	if err != nil {
		return c.badArgument("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	// The first run of a shape builds its plan, and on a cold cache compiles kernels.
	stopSpinner = working("loom run: running "+filepath.Base(pos[0]), true, time.Second)
	outs, err := s.Run(ctx, feeds)
	stopSpinner()
	if err != nil {
		return c.fail("%v", err)
	}
	if *showPlan {
		printPlans(stdout, s.ExecutionPlans())
	}
	if *showStats {
		printStats(stdout, s.CacheStats())
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return c.fail("%v", err)
	}
	for i, meta := range s.Outputs() {
		path := filepath.Join(*outDir, sanitize(meta.Name)+".npy")
		if err := npy.Write(path, outs[i]); err != nil {
			return c.fail("output %q: %v", meta.Name, err)
		}
		fmt.Fprintf(stdout, "%s %s -> %s\n", meta.Name, describeTensor(outs[i]), path)
	}
	return exitOK
}

// describeTensor spells a tensor's type and shape as inspect spells declared ones:
// tensor(float)[1,10].
func describeTensor(t session.Tensor) string {
	return "tensor(" + t.DType().String() + ")" + graph.ShapeOf(t.Shape()...).String()
}

// reportFallbacks writes one line summing up the nodes that do not run on the provider asked
// for (by reason: without a GPU every node falls back for the same one), or with verbose one
// line per node too. It returns how many nodes fall back.
func reportFallbacks(w io.Writer, prefix, asked string, report []session.FallbackEntry, verbose bool) int {
	if len(report) == 0 {
		return 0
	}
	type group struct {
		where, reason string
		n             int
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, fb := range report {
		key := string(fb.Provider) + "\x00" + fb.Reason
		g := byKey[key]
		if g == nil {
			g = &group{where: string(fb.Provider), reason: fb.Reason}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.n++
	}
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].n > groups[j].n })
	top := groups[0]
	line := fmt.Sprintf("%s: %d node(s) do not run on %s: ", prefix, len(report), asked)
	if len(groups) == 1 {
		line += fmt.Sprintf("they run on %s: %s", top.where, top.reason)
	} else {
		line += fmt.Sprintf("%d run on %s: %s; %d more for %d other reason(s)", top.n, top.where, top.reason, len(report)-top.n, len(groups)-1)
	}
	if !verbose {
		line += " (-v lists them)"
	}
	fmt.Fprintln(w, line)
	if verbose {
		for _, fb := range report {
			fmt.Fprintf(w, "%s: node %q (%s) runs on %s: %s\n", prefix, fb.Node, fb.Op, fb.Provider, fb.Reason)
		}
	}
	return len(report)
}

// parseInputs turns name=FILE.npy, name=shape:DIMS, name=zeros:DIMS, name=ones:DIMS and
// name=value:V arguments into feeds for s. Without fillMissing every input must be given; with
// it, inputs not named get seeded random values of their declared shape, a symbolic dimension
// taking the size the inputs given make it, else (as an unknown one) 1, as the ONNX Runtime
// bench scripts do, so that `loom bench MODEL` works without arguments.
func parseInputs(s *session.InferenceSession, specs []string, rnd *rand.Rand, fillMissing bool) ([]session.NamedTensor, error) {
	metas := map[string]session.IOMeta{}
	for _, m := range s.Inputs() {
		metas[m.Name] = m
	}
	given := map[string]bool{}
	symbols := map[string]symbolSize{} // what the inputs given make each symbolic dimension
	var feeds []session.NamedTensor
	for _, spec := range specs {
		name, val, ok := strings.Cut(spec, "=")
		if !ok {
			return nil, fmt.Errorf("input %q: want name=FILE.npy, name=shape:DIMS, name=zeros:DIMS, name=ones:DIMS or name=value:V", spec)
		}
		meta, ok := metas[name]
		if !ok {
			return nil, fmt.Errorf("the model has no input %q (it has %s)", name, inputNames(s))
		}
		if given[name] {
			return nil, fmt.Errorf("input %q is given twice", name)
		}
		given[name] = true
		t, err := makeInput(meta, val, rnd)
		if err != nil {
			return nil, fmt.Errorf("input %q: %v", name, err)
		}
		if err := fits(meta, t, symbols); err != nil {
			return nil, err
		}
		feeds = append(feeds, session.NamedTensor{Name: name, Tensor: t})
	}
	var missing []string
	for _, meta := range s.Inputs() {
		if given[meta.Name] {
			continue
		}
		if !fillMissing {
			missing = append(missing, fmt.Sprintf("%q (tensor(%s)%s)", meta.Name, meta.DType, meta.Shape))
			continue
		}
		if !meta.Ranked {
			return nil, fmt.Errorf("input %q has no declared rank: give it as %s=shape:DIMS", meta.Name, meta.Name)
		}
		dims := make([]string, len(meta.Shape))
		for i, d := range meta.Shape {
			dims[i] = "1"
			if d.Known() {
				dims[i] = strconv.FormatInt(d.Value, 10)
			} else if sym, ok := symbols[d.Param]; ok && d.Param != "" {
				dims[i] = strconv.FormatInt(sym.size, 10)
			}
		}
		t, err := makeInput(meta, "shape:"+strings.Join(dims, "x"), rnd)
		if err != nil {
			return nil, fmt.Errorf("input %q: %v", meta.Name, err)
		}
		feeds = append(feeds, session.NamedTensor{Name: meta.Name, Tensor: t})
	}
	if len(missing) > 0 {
		what := "input"
		if len(missing) > 1 {
			what = "inputs"
		}
		return nil, fmt.Errorf("%s %s not given: give each as name=FILE.npy, name=shape:DIMS, name=zeros:DIMS, name=ones:DIMS or name=value:V",
			what, strings.Join(missing, ", "))
	}
	return feeds, nil
}

// symbolSize is the size a symbolic dimension has in the first input given that has it.
type symbolSize struct {
	input string
	size  int64
}

// fits checks a given input against the model's declaration: element type, rank, the known
// dimensions, and the symbolic ones against what earlier inputs made them.
func fits(meta session.IOMeta, t session.Tensor, symbols map[string]symbolSize) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("input %q is %s but the model wants tensor(%s)%s: %s", meta.Name, describeTensor(t), meta.DType, meta.Shape, fmt.Sprintf(format, args...))
	}
	if t.DType() != meta.DType {
		return bad("element type %s, not %s", t.DType(), meta.DType)
	}
	if !meta.Ranked {
		return nil
	}
	shape := t.Shape()
	if len(shape) != len(meta.Shape) {
		return bad("rank %d, not %d", len(shape), len(meta.Shape))
	}
	for i, d := range meta.Shape {
		switch {
		case d.Known() && d.Value != shape[i]:
			return bad("dimension %d is %d, not %d", i, shape[i], d.Value)
		case d.Param != "":
			if prev, ok := symbols[d.Param]; ok && prev.size != shape[i] {
				return bad("dimension %d (%s) is %d, but input %q makes it %d", i, d.Param, shape[i], prev.input, prev.size)
			}
			symbols[d.Param] = symbolSize{meta.Name, shape[i]}
		}
	}
	return nil
}

func inputNames(s *session.InferenceSession) string {
	var names []string
	for _, m := range s.Inputs() {
		names = append(names, strconv.Quote(m.Name))
	}
	if len(names) == 0 {
		return "no inputs"
	}
	return strings.Join(names, ", ")
}

func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, name)
}

// dimsRE matches what a shape looks like on the command line: 1x3x48x320.
var dimsRE = regexp.MustCompile(`^[0-9]+(x[0-9]+)*$`)

// parseDims parses DIMS of shape:DIMS, zeros:DIMS and ones:DIMS ("" is a scalar).
func parseDims(val, dims string) ([]int64, error) {
	var shape []int64
	if dims == "" {
		return nil, nil
	}
	for _, d := range strings.Split(dims, "x") {
		v, err := strconv.ParseInt(d, 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("bad dimension %q in %q", d, val)
		}
		shape = append(shape, v)
	}
	return shape, nil
}

// makeInput builds an input from FILE.npy, shape:AxBxC (seeded random values of the input's
// type), zeros:AxBxC, ones:AxBxC or value:V (a scalar, or V repeated over the input's static
// shape).
func makeInput(meta session.IOMeta, val string, rnd *rand.Rand) (session.Tensor, error) {
	kind, rest, _ := strings.Cut(val, ":")
	switch kind {
	case "shape", "zeros", "ones":
		shape, err := parseDims(val, rest)
		if err != nil {
			return session.Tensor{}, err
		}
		n := 1
		for _, d := range shape {
			n *= int(d)
		}
		vals := make([]float64, n)
		for i := range vals {
			switch {
			case kind == "zeros":
			case kind == "ones":
				vals[i] = 1
			case meta.DType.IsFloat():
				vals[i] = rnd.Float64()*2 - 1
			default:
				vals[i] = float64(rnd.IntN(10))
			}
		}
		return fromValues(meta.DType, shape, vals)
	case "value":
		v, err := strconv.ParseFloat(rest, 64)
		if err != nil {
			return session.Tensor{}, fmt.Errorf("bad value in %q", val)
		}
		var shape []int64
		for _, d := range meta.Shape {
			if !d.Known() {
				shape = nil
				break
			}
			shape = append(shape, d.Value)
		}
		if len(shape) != len(meta.Shape) {
			shape = nil
		}
		n := 1
		for _, d := range shape {
			n *= int(d)
		}
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = v
		}
		return fromValues(meta.DType, shape, vals)
	}
	t, err := npy.Read(val)
	if errors.Is(err, fs.ErrNotExist) {
		return session.Tensor{}, fmt.Errorf("%v%s", err, inputHint(meta.Name, val))
	}
	return t, err
}

// inputHint suggests what a value that names no file may have meant: a shape without
// "shape:", a number without "value:", or a form misspelt.
func inputHint(name, val string) string {
	if _, err := strconv.ParseFloat(val, 64); err == nil {
		return fmt.Sprintf("; did you mean %s=value:%s?", name, val)
	}
	if dimsRE.MatchString(val) {
		return fmt.Sprintf("; did you mean %s=shape:%s (random values) or %s=zeros:%s?", name, val, name, val)
	}
	if !strings.HasSuffix(val, ".npy") {
		return "; an input is name=FILE.npy, name=shape:DIMS, name=zeros:DIMS, name=ones:DIMS or name=value:V"
	}
	return ""
}

func fromValues(dt session.DType, shape []int64, vals []float64) (session.Tensor, error) {
	gt, err := graph.TensorFromValues("input", dt, shape, vals)
	if err != nil {
		return session.Tensor{}, err
	}
	return session.FromGraphTensor(gt)
}

// printPlans prints the compiled run plans' audit: what runs as recorded Loom kernel
// segments, what runs on the host and why.
func printPlans(w io.Writer, plans []session.PlanReport) {
	for _, p := range plans {
		fmt.Fprintf(w, "plan for %s\n", p.Signature)
		if !p.Planned {
			fmt.Fprintf(w, "  not planned (interpreted): %s\n", p.Reason)
			continue
		}
		fmt.Fprintf(w, "  %d kernel steps in %d recorded segments, %d host steps, %d nodes folded, %d aliases, %d If inlined, arena %d bytes\n",
			p.KernelSteps, len(p.Segments), len(p.HostSteps), p.Folded, p.Aliases, p.Inlined, p.ArenaBytes)
		if p.Branched > 0 {
			fmt.Fprintf(w, "  %d If with both branches in the plan (each run reads its condition and runs one)\n", p.Branched)
		}
		if len(p.Specialized) > 0 {
			fmt.Fprintf(w, "  specialized on the values of: %s\n", strings.Join(p.Specialized, ", "))
		}
		for i, seg := range p.Segments {
			threads := ""
			switch n := p.SegmentThreads[i]; {
			case n < 0:
				threads = " (threads: still timing 1 against all)"
			case n == 0:
				threads = " (threads: all)"
			default:
				threads = fmt.Sprintf(" (threads: %d)", n)
			}
			fmt.Fprintf(w, "  segment %d%s: %d nodes: %s\n", i, threads, len(seg), strings.Join(seg, ", "))
		}
		for _, h := range p.HostSteps {
			fmt.Fprintf(w, "  host %s (%s): %s\n", h.Node, h.OpType, h.Reason)
		}
	}
}

// printStats prints where the run's kernels came from (see session.CacheStats).
func printStats(w io.Writer, st session.CacheStats) {
	misses := st.Warmup.Misses + st.Run.Misses
	shipped := st.Warmup.Shipped + st.Run.Shipped
	compiles := st.Warmup.Compiles + st.Run.Compiles
	fmt.Fprintf(w, "kernels: %d loaded: %d shipped, %d from the JIT (%d compiled, %d from its disk cache); %d op runs fell back to the host (kernel not shipped)\n",
		misses, shipped, misses-shipped, compiles, misses-shipped-compiles, st.NotShipped)
	if st.JITUnavailable != "" {
		fmt.Fprintf(w, "kernels: the JIT is unavailable: %s\n", st.JITUnavailable)
	}
}

// byteSize is a flag holding a size in bytes: a number with an optional unit, decimal (kB, MB,
// GB, TB) or binary (KiB, MiB, GiB, TiB), case-insensitive ("1.5GiB", "500mb", "4096").
type byteSize uint64

func (b *byteSize) String() string {
	if *b == 0 {
		return ""
	}
	return strconv.FormatUint(uint64(*b), 10)
}

func (b *byteSize) Set(v string) error {
	s := strings.ToLower(strings.TrimSpace(v))
	num := strings.TrimRightFunc(s, unicode.IsLetter)
	units := map[string]float64{"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
	unit, ok := units[strings.TrimSpace(s[len(num):])]
	f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if !ok || err != nil || f <= 0 || math.IsInf(f, 0) || f*unit >= 1<<63 {
		return fmt.Errorf("%q is not a size in bytes (e.g. 4096, 500MB, 1.5GiB)", v)
	}
	*b = byteSize(f * unit)
	return nil
}

// optionUsage is the help of --option.
const optionUsage = "a session option KEY=VALUE, repeatable (session.WithOption: ONNX Runtime's keys and Loom's, e.g. loom.pack_weights=0, loom.run_plan=0)"

// sessionOptions collects --option KEY=VALUE flags as session.WithOption load options (the
// session checks the key and the value when it is made).
type sessionOptions []session.LoadOption

func (o *sessionOptions) String() string { return "" }

func (o *sessionOptions) Set(v string) error {
	key, value, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(key) == "" {
		return fmt.Errorf("%q is not KEY=VALUE", v)
	}
	*o = append(*o, session.WithOption(strings.TrimSpace(key), value))
	return nil
}
