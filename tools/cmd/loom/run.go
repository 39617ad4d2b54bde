package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session"
)

func init() {
	register("run", "run a model on inputs from .npy files, random shapes or constants", runModel)
}

func runModel(args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	outDir := fs.String("o", ".", "directory to write each output to as NAME.npy")
	provider := fs.String("ep", "auto", "execution provider: host, cuda or auto")
	seed := fs.Uint64("seed", 1, "seed of the random inputs given as name=shape:...")
	showPlan := fs.Bool("plan", false, "print the compiled run plan: segments of Loom kernels, host steps and why")
	timeout := fs.Duration("timeout", 0, "stop the run after this long, e.g. 30s (0: no limit); Ctrl-C stops it too")
	showStats := fs.Bool("stats", false, "print the kernel cache's counts: shipped kernels, JIT compilations, ops that fell back to the host")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: loom run MODEL [name=FILE.npy | name=shape:2x3x4 | name=value:V]... [-o DIR] [--plan] [--stats] [--timeout D]")
		fs.PrintDefaults()
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) == 0 {
		fs.Usage()
		return 2
	}
	s, err := session.Load(pos[0], session.WithExecutionProvider(session.ExecutionProvider(*provider)))
	if err != nil {
		fmt.Fprintf(os.Stderr, "loom run: %v\n", err)
		return 1
	}
	defer s.Close()
	for _, fb := range s.ExecutionProviderFallbackReport() {
		fmt.Fprintf(os.Stderr, "loom run: node %q (%s) runs on %s: %s\n", fb.Node, fb.Op, fb.Provider, fb.Reason)
	}
	rnd := rand.New(rand.NewPCG(*seed, *seed^0x9e3779b97f4a7c15))
	feeds, err := parseInputs(s, pos[1:], rnd, false)
	if err != nil {
		fmt.Fprintf(os.Stderr, "loom run: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	outs, err := s.Run(ctx, feeds)
	if err != nil {
		fmt.Fprintf(os.Stderr, "loom run: %v\n", err)
		return 1
	}
	if *showPlan {
		printPlans(s.ExecutionPlans())
	}
	if *showStats {
		printStats(s.CacheStats())
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "loom run: %v\n", err)
		return 1
	}
	for i, meta := range s.Outputs() {
		path := filepath.Join(*outDir, sanitize(meta.Name)+".npy")
		if err := writeNpy(path, outs[i]); err != nil {
			fmt.Fprintf(os.Stderr, "loom run: output %q: %v\n", meta.Name, err)
			return 1
		}
		fmt.Printf("%s %s -> %s\n", meta.Name, outs[i], path)
	}
	return 0
}

// parseInputs turns name=FILE.npy, name=shape:DIMS and name=value:V arguments into feeds for
// s. With fillMissing, inputs not named get seeded random values of their declared shape, a
// symbolic or unknown dimension counting as 1 (as the ONNX Runtime bench scripts do), so that
// `loom bench MODEL` works without arguments.
func parseInputs(s *session.InferenceSession, specs []string, rnd *rand.Rand, fillMissing bool) ([]session.NamedTensor, error) {
	metas := map[string]session.IOMeta{}
	for _, m := range s.Inputs() {
		metas[m.Name] = m
	}
	given := map[string]bool{}
	var feeds []session.NamedTensor
	for _, spec := range specs {
		name, val, ok := strings.Cut(spec, "=")
		if !ok {
			return nil, fmt.Errorf("input %q: want name=FILE.npy, name=shape:DIMS or name=value:V", spec)
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
		feeds = append(feeds, session.NamedTensor{Name: name, Tensor: t})
	}
	if !fillMissing {
		return feeds, nil
	}
	for _, meta := range s.Inputs() {
		if given[meta.Name] {
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
			}
		}
		t, err := makeInput(meta, "shape:"+strings.Join(dims, "x"), rnd)
		if err != nil {
			return nil, fmt.Errorf("input %q: %v", meta.Name, err)
		}
		feeds = append(feeds, session.NamedTensor{Name: meta.Name, Tensor: t})
	}
	return feeds, nil
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

// makeInput builds an input from FILE.npy, shape:AxBxC (seeded random values of the input's
// type) or value:V (a scalar, or V repeated over the input's static shape).
func makeInput(meta session.IOMeta, val string, rnd *rand.Rand) (session.Tensor, error) {
	switch {
	case strings.HasPrefix(val, "shape:"):
		var shape []int64
		if s := strings.TrimPrefix(val, "shape:"); s != "" {
			for _, d := range strings.Split(s, "x") {
				v, err := strconv.ParseInt(d, 10, 64)
				if err != nil || v < 0 {
					return session.Tensor{}, fmt.Errorf("bad dimension %q in %q", d, val)
				}
				shape = append(shape, v)
			}
		}
		n := 1
		for _, d := range shape {
			n *= int(d)
		}
		vals := make([]float64, n)
		for i := range vals {
			if meta.DType.IsFloat() {
				vals[i] = rnd.Float64()*2 - 1
			} else {
				vals[i] = float64(rnd.IntN(10))
			}
		}
		return fromValues(meta.DType, shape, vals)
	case strings.HasPrefix(val, "value:"):
		v, err := strconv.ParseFloat(strings.TrimPrefix(val, "value:"), 64)
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
	default:
		return readNpy(val)
	}
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
func printPlans(plans []session.PlanReport) {
	for _, p := range plans {
		fmt.Printf("plan for %s\n", p.Signature)
		if !p.Planned {
			fmt.Printf("  not planned (interpreted): %s\n", p.Reason)
			continue
		}
		fmt.Printf("  %d kernel steps in %d recorded segments, %d host steps, %d nodes folded, %d aliases, %d If inlined, arena %d bytes\n",
			p.KernelSteps, len(p.Segments), len(p.HostSteps), p.Folded, p.Aliases, p.Inlined, p.ArenaBytes)
		if len(p.Specialized) > 0 {
			fmt.Printf("  specialized on the values of: %s\n", strings.Join(p.Specialized, ", "))
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
			fmt.Printf("  segment %d%s: %d nodes: %s\n", i, threads, len(seg), strings.Join(seg, ", "))
		}
		for _, h := range p.HostSteps {
			fmt.Printf("  host %s (%s): %s\n", h.Node, h.OpType, h.Reason)
		}
	}
}

// printStats prints where the run's kernels came from (see session.CacheStats).
func printStats(st session.CacheStats) {
	misses := st.Warmup.Misses + st.Run.Misses
	shipped := st.Warmup.Shipped + st.Run.Shipped
	compiles := st.Warmup.Compiles + st.Run.Compiles
	fmt.Printf("kernels: %d loaded: %d shipped, %d from the JIT (%d compiled, %d from its disk cache); %d op runs fell back to the host (kernel not shipped)\n",
		misses, shipped, misses-shipped, compiles, misses-shipped-compiles, st.NotShipped)
	if st.JITUnavailable != "" {
		fmt.Printf("kernels: the JIT is unavailable: %s\n", st.JITUnavailable)
	}
}
