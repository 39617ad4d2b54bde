package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session"
)

func init() {
	register("bench", "time a model: median and p95 latency, load time, peak memory", func(args []string, stdout, stderr io.Writer) int {
		return benchMain(args, stdout, stderr, true)
	})
}

// benchResult is what `loom bench --json` prints: the fields and rounding of
// shared/bench/ortbench.sh and ort.js, so that a script can compare the two runtimes.
type benchResult struct {
	Runtime   string  `json:"runtime"`
	Model     string  `json:"model"`
	Provider  string  `json:"provider"`
	Threads   int     `json:"threads"`
	Runs      int     `json:"runs"`
	LoadMs    float64 `json:"load_ms"`
	MedianMs  float64 `json:"median_ms"`
	P95Ms     float64 `json:"p95_ms"`
	MinMs     float64 `json:"min_ms"`
	PeakRSSMb float64 `json:"peak_rss_mb"`
	// WeightsMb is the model's constants (initializers after the optimization passes) in MiB,
	// less those only gathered from (embedding tables, of which a run reads the rows it picks):
	// what a run that reads every weight (a decode step) streams at least once, to divide by a
	// streaming read rate for its bound (tools/bench/vs_ort.sh). Loom's field, not ortbench's.
	WeightsMb float64 `json:"weights_mb"`
}

// benchMain implements `loom bench MODEL [INPUT...]`. Inputs not given get seeded random values
// of their declared shape. The first `--warmup` runs are not timed; then each of `--runs` runs
// is timed alone. Each run's outputs are handed back with Recycle after its clock stops, as
// shared/bench's ortbench releases ONNX Runtime's outputs after its clock stops (--keep-outputs:
// leave them to the garbage collector instead). showProgress allows a progress bar (on a
// terminal only).
func benchMain(args []string, stdout, stderr io.Writer, showProgress bool) int {
	c := newCommand("bench", "bench MODEL [INPUT...] [--threads N] [--runs N] [--warmup N] [--ep host|cuda|auto] [--strict] [-v] [--seed S] [--keep-outputs] [--decode N [--capture | --grow]] [--sweep DIM=SIZES] [--json] [--option KEY=VALUE]...",
		"Times --runs runs of the model after --warmup untimed ones: median, p95 and min latency, load time,\npeak RSS. "+
			"Inputs not given get random values of their declared shape (symbolic dimensions count as 1).\n"+inputForms, stdout, stderr)
	threads := c.Int("threads", 1, "host worker threads (0: one per core)")
	runs := c.Int("runs", 50, "timed runs")
	warmup := c.Int("warmup", 3, "untimed runs before the timed ones")
	provider := c.String("ep", "auto", "execution provider: host, cuda or auto")
	strict := c.Bool("strict", false, "exit 1, without running, when a node does not run on the provider --ep names")
	verbose := c.Bool("v", false, "list every node that does not run on the provider --ep names")
	seed := c.Uint64("seed", 1, "seed of the random inputs")
	asJSON := c.Bool("json", false, "print one JSON object (the fields of shared/bench/ortbench.sh)")
	keep := c.Bool("keep-outputs", false, "do not hand each run's outputs back (session.Recycle) after its clock stops")
	decode := c.Int("decode", 0, "time N decode steps with every input and output in a persistent binding (eager), instead of --runs runs")
	capture := c.Bool("capture", false, "with --decode: also capture the step and time N replays of the captured device graph")
	grow := c.Bool("grow", false, "with --decode: a decode loop through Run, each step's present outputs fed back as the next step's past inputs (the KV cache one token longer each step)")
	sweep := c.String("sweep", "", "time the first run at each size of a symbolic dimension against the fastest of --runs warm runs there: DIM=LO..HI[:STEP] or DIM=A,B,...")
	var options sessionOptions
	c.Var(&options, "option", optionUsage)
	pos, rc := c.parse(args)
	if rc >= 0 {
		return rc
	}
	switch {
	case len(pos) == 0:
		return c.usageError("no MODEL given")
	case *runs < 1:
		return c.badArgument("--runs %d: want at least 1", *runs)
	case *warmup < 0:
		return c.badArgument("--warmup %d: want 0 or more", *warmup)
	case *threads < 0:
		return c.badArgument("--threads %d: want 0 (one per core) or more", *threads)
	case *decode < 0:
		return c.badArgument("--decode %d: want 1 or more steps", *decode)
	case *capture && *decode == 0:
		return c.badArgument("--capture needs --decode N")
	case *grow && *decode == 0:
		return c.badArgument("--grow needs --decode N")
	case *grow && *capture:
		return c.badArgument("--grow and --capture are separate benchmarks: a captured step has fixed shapes")
	case *sweep != "" && *decode > 0:
		return c.badArgument("--sweep and --decode are separate benchmarks: give one")
	}
	var sweepDim string
	var sweepSizes []int64
	if *sweep != "" {
		var err error
		if sweepDim, sweepSizes, err = parseSweep(*sweep); err != nil {
			return c.badArgument("%v", err)
		}
	}
	if err := checkProvider(*provider); err != nil {
		return c.badArgument("%v", err)
	}
	if err := checkFile("model", pos[0]); err != nil {
		return c.badArgument("%v", err)
	}
	start := time.Now()
	stopSpinner := working("loom bench: loading "+filepath.Base(pos[0]), showProgress && !*asJSON, time.Second)
	s, err := session.Load(pos[0], append([]session.LoadOption{session.WithExecutionProvider(session.ExecutionProvider(*provider)), session.WithIntraOpThreads(*threads)}, options...)...)
	stopSpinner()
	if err != nil {
		return c.fail("%v", err)
	}
	loadMs := msSince(start)
	defer s.Close()
	if n := reportFallbacks(stderr, "loom bench", *provider, s.ExecutionProviderFallbackReport(), *verbose); n > 0 && *strict {
		return c.fail("--strict: %d node(s) do not run on %s", n, *provider)
	}
	rnd := rand.New(rand.NewPCG(*seed, *seed^0x9e3779b97f4a7c15))
	feeds, err := parseInputs(s, pos[1:], rnd, true)
	if err != nil {
		return c.badArgument("%v", err)
	}
	// Ctrl-C stops the run in progress (and the benchmark) rather than the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *decode > 0 {
		n := *threads
		if n == 0 {
			n = runtime.NumCPU()
		}
		var r decodeResult
		var err error
		if *grow {
			r, err = benchDecodeGrow(ctx, s, pos[0], n, feeds, *decode, *warmup)
		} else {
			r, err = benchDecode(ctx, s, pos[0], n, feeds, *decode, *warmup, *capture)
		}
		if err != nil {
			return c.fail("%v", err)
		}
		printDecode(stdout, r, *asJSON)
		return 0
	}
	release := func(outs []session.Tensor) {
		if !*keep {
			s.Recycle(outs...)
		}
	}
	if sweepDim != "" {
		n := *threads
		if n == 0 {
			n = runtime.NumCPU()
		}
		// The process's and the session's one-time costs go to --warmup runs at the inputs'
		// own shape first.
		for i := 0; i < *warmup; i++ {
			outs, err := s.Run(ctx, feeds)
			if err != nil {
				return c.fail("%v", err)
			}
			release(outs)
		}
		bar := newProgress(len(sweepSizes), "loom bench", "sizes", showProgress && !*asJSON)
		r, err := benchSweep(ctx, s, filepath.Base(pos[0]), n, feeds, sweepDim, sweepSizes, *runs, rnd, release, func() { bar.Add(1) })
		bar.Finish()
		if err != nil {
			return c.fail("%v", err)
		}
		printSweep(stdout, r, *asJSON)
		return 0
	}
	bar := newProgress(*warmup+*runs, "loom bench", "runs", showProgress && !*asJSON)
	for i := 0; i < *warmup; i++ {
		outs, err := s.Run(ctx, feeds)
		if err != nil {
			return c.fail("%v", err)
		}
		release(outs)
		bar.Add(1)
	}
	times := make([]float64, *runs)
	for i := range times {
		t0 := time.Now()
		outs, err := s.Run(ctx, feeds)
		times[i] = msSince(t0)
		if err != nil {
			return c.fail("%v", err)
		}
		release(outs)
		bar.Add(1)
	}
	bar.Finish()
	slices.Sort(times)
	n := *threads
	if n == 0 {
		n = runtime.NumCPU()
	}
	// The peak first: Graph gives back the weights the session held packed alone (unpacked,
	// a second copy), which weightBytes reads.
	peak := peakRSSMiB()
	r := benchResult{
		Runtime:   "loom " + string(s.Provider()),
		Model:     filepath.Base(pos[0]),
		Provider:  string(s.Provider()),
		Threads:   n,
		Runs:      *runs,
		LoadMs:    round(loadMs, 2),
		MedianMs:  round(percentile(times, 50), 4),
		P95Ms:     round(percentile(times, 95), 4),
		MinMs:     round(times[0], 4),
		PeakRSSMb: round(peak, 1),
		WeightsMb: round(float64(weightBytes(s.Graph()))/(1<<20), 3),
	}
	if *asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	fmt.Fprintf(stdout, "%s on %s: median %v ms, p95 %v ms, min %v ms over %d runs, %d thread(s); load %v ms; peak RSS %v MB\n",
		r.Model, r.Provider, r.MedianMs, r.P95Ms, r.MinMs, r.Runs, r.Threads, r.LoadMs, r.PeakRSSMb)
	return 0
}

// weightBytes is the size of m's main-graph initializers that some node reads other than as
// a Gather's table (input 0).
func weightBytes(m *graph.Model) int64 {
	if m == nil || m.Graph == nil {
		return 0
	}
	streamed := map[string]bool{}
	for _, nd := range m.Graph.Nodes {
		for i, in := range nd.Inputs {
			if i > 0 || nd.OpType != "Gather" || (nd.Domain != "" && nd.Domain != "ai.onnx") {
				streamed[in] = true
			}
		}
	}
	for _, out := range m.Graph.Outputs {
		streamed[out.Name] = true
	}
	var n int64
	for name, t := range m.Graph.Initializers {
		if streamed[name] {
			n += int64(len(t.Raw))
		}
	}
	return n
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Nanoseconds()) / 1e6 }

// percentile is the nearest-rank percentile of sorted values (as ortbench and ort.js compute it).
func percentile(sorted []float64, p int) float64 {
	r := (len(sorted)*p + 99) / 100
	return sorted[max(r-1, 0)]
}

func round(x float64, decimals int) float64 {
	f := math.Pow(10, float64(decimals))
	return math.Round(x*f) / f
}

// peakRSSMiB is the process's peak resident set size in MiB (getrusage's ru_maxrss: KiB on
// Linux, bytes on macOS).
func peakRSSMiB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return float64(ru.Maxrss) / (1 << 20)
	}
	return float64(ru.Maxrss) / 1024
}
