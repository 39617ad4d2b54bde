package main

import (
	"context"
	"encoding/json"
	"flag"
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

	"github.com/loomrt/loom/go/session"
)

func init() {
	register("bench", "time a model: median and p95 latency, load time, peak memory", runBench)
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
}

func runBench(args []string) int { return benchMain(args, os.Stdout, os.Stderr, true) }

// benchMain implements `loom bench MODEL [INPUT...]`. Inputs not given get seeded random values
// of their declared shape. The first `--warmup` runs are not timed; then each of `--runs` runs
// is timed alone. Each run's outputs are handed back with Recycle after its clock stops, as
// shared/bench's ortbench releases ONNX Runtime's outputs after its clock stops (--keep-outputs:
// leave them to the garbage collector instead). showProgress allows a progress bar (on a
// terminal only).
func benchMain(args []string, stdout, stderr io.Writer, showProgress bool) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	threads := fs.Int("threads", 1, "host worker threads (0: one per core)")
	runs := fs.Int("runs", 50, "timed runs")
	warmup := fs.Int("warmup", 3, "untimed runs before the timed ones")
	provider := fs.String("ep", "auto", "execution provider: host, cuda or auto")
	seed := fs.Uint64("seed", 1, "seed of the random inputs")
	asJSON := fs.Bool("json", false, "print one JSON object (the fields of shared/bench/ortbench.sh)")
	keep := fs.Bool("keep-outputs", false, "do not hand each run's outputs back (session.Recycle) after its clock stops")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: loom bench MODEL [name=FILE.npy | name=shape:2x3x4 | name=value:V]... [--threads N] [--runs N] [--warmup N] [--ep host|cuda|auto] [--keep-outputs] [--json]")
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
	switch {
	case *runs < 1:
		fmt.Fprintf(stderr, "loom bench: --runs %d: want at least 1\n", *runs)
		return 2
	case *warmup < 0:
		fmt.Fprintf(stderr, "loom bench: --warmup %d: want 0 or more\n", *warmup)
		return 2
	case *threads < 0:
		fmt.Fprintf(stderr, "loom bench: --threads %d: want 0 (one per core) or more\n", *threads)
		return 2
	}
	start := time.Now()
	s, err := session.Load(pos[0], session.WithExecutionProvider(session.ExecutionProvider(*provider)), session.WithIntraOpThreads(*threads))
	if err != nil {
		fmt.Fprintf(stderr, "loom bench: %v\n", err)
		return 1
	}
	loadMs := msSince(start)
	defer s.Close()
	for _, fb := range s.ExecutionProviderFallbackReport() {
		fmt.Fprintf(stderr, "loom bench: node %q (%s) runs on %s: %s\n", fb.Node, fb.Op, fb.Provider, fb.Reason)
	}
	rnd := rand.New(rand.NewPCG(*seed, *seed^0x9e3779b97f4a7c15))
	feeds, err := parseInputs(s, pos[1:], rnd, true)
	if err != nil {
		fmt.Fprintf(stderr, "loom bench: %v\n", err)
		return 2
	}
	// Ctrl-C stops the run in progress (and the benchmark) rather than the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	bar := newProgress(*warmup+*runs, "loom bench", showProgress && !*asJSON)
	release := func(outs []session.Tensor) {
		if !*keep {
			s.Recycle(outs...)
		}
	}
	for i := 0; i < *warmup; i++ {
		outs, err := s.Run(ctx, feeds)
		if err != nil {
			fmt.Fprintf(stderr, "loom bench: %v\n", err)
			return 1
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
			fmt.Fprintf(stderr, "loom bench: %v\n", err)
			return 1
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
		PeakRSSMb: round(peakRSSMiB(), 1),
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
