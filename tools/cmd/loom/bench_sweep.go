package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session"
)

// `loom bench MODEL --sweep DIM=SIZES` times the first run of every new shape against the
// warm runs of that shape: for each size of the symbolic dimension DIM (every input that has
// it gets the size; SIZES is LO..HI[:STEP] or a comma-separated list), the first run at that
// shape is timed alone, then --runs more, of which the fastest is the warm time. A runtime
// that builds something per shape (a plan, a kernel) shows it as first / warm.

// sweepPoint is one size's figures.
type sweepPoint struct {
	Size    int64   `json:"size"`
	FirstMs float64 `json:"first_ms"`
	WarmMs  float64 `json:"warm_ms"`
	Ratio   float64 `json:"ratio"`
}

// sweepResult is `loom bench --sweep`'s report.
type sweepResult struct {
	Model     string       `json:"model"`
	Provider  string       `json:"provider"`
	Threads   int          `json:"threads"`
	Dim       string       `json:"dim"`
	Points    []sweepPoint `json:"points"`
	WorstSize int64        `json:"worst_size"`
	Worst     float64      `json:"worst_ratio"`
	Median    float64      `json:"median_ratio"`
	// FirstTotalMs and WarmTotalMs sum the first and the warm times over the sizes.
	FirstTotalMs float64 `json:"first_total_ms"`
	WarmTotalMs  float64 `json:"warm_total_ms"`
}

// parseSweep parses DIM=LO..HI[:STEP] or DIM=A,B,C.
func parseSweep(spec string) (string, []int64, error) {
	dim, sizes, ok := strings.Cut(spec, "=")
	if !ok || dim == "" || sizes == "" {
		return "", nil, fmt.Errorf("--sweep %q: want DIM=LO..HI[:STEP] or DIM=A,B,...", spec)
	}
	var out []int64
	if lo, rest, ok := strings.Cut(sizes, ".."); ok {
		hi, stepS, hasStep := strings.Cut(rest, ":")
		step := int64(1)
		a, err1 := strconv.ParseInt(lo, 10, 64)
		b, err2 := strconv.ParseInt(hi, 10, 64)
		var err3 error
		if hasStep {
			step, err3 = strconv.ParseInt(stepS, 10, 64)
		}
		if err1 != nil || err2 != nil || err3 != nil || a < 1 || b < a || step < 1 {
			return "", nil, fmt.Errorf("--sweep %q: want DIM=LO..HI[:STEP] with 1 <= LO <= HI and STEP >= 1", spec)
		}
		if (b-a)/step >= 10000 {
			return "", nil, fmt.Errorf("--sweep %q: %d sizes, at most 10000", spec, (b-a)/step+1)
		}
		for v := a; v <= b; v += step {
			out = append(out, v)
		}
	} else {
		for _, f := range strings.Split(sizes, ",") {
			v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
			if err != nil || v < 1 {
				return "", nil, fmt.Errorf("--sweep %q: size %q is not a positive integer", spec, f)
			}
			out = append(out, v)
		}
		if len(out) > 10000 {
			return "", nil, fmt.Errorf("--sweep %q: %d sizes, at most 10000", spec, len(out))
		}
	}
	return dim, out, nil
}

// sweepFeeds is feeds with every input that has the symbolic dimension dim given size there
// (new random values; its other symbolic dimensions keep their sizes in feeds).
func sweepFeeds(s *session.InferenceSession, feeds []session.NamedTensor, dim string, size int64, rnd *rand.Rand) ([]session.NamedTensor, error) {
	out := slices.Clone(feeds)
	for _, meta := range s.Inputs() {
		if !slices.ContainsFunc(meta.Shape, func(d graph.Dim) bool { return d.Param == dim }) {
			continue
		}
		i := slices.IndexFunc(out, func(f session.NamedTensor) bool { return f.Name == meta.Name })
		if i < 0 {
			continue
		}
		cur := out[i].Tensor.Shape()
		dims := make([]string, len(meta.Shape))
		for j, d := range meta.Shape {
			switch {
			case d.Param == dim:
				dims[j] = strconv.FormatInt(size, 10)
			case j < len(cur):
				dims[j] = strconv.FormatInt(cur[j], 10)
			default:
				dims[j] = "1"
			}
		}
		t, err := makeInput(meta, "shape:"+strings.Join(dims, "x"), rnd)
		if err != nil {
			return nil, fmt.Errorf("input %q at %s=%d: %v", meta.Name, dim, size, err)
		}
		out[i].Tensor = t
	}
	return out, nil
}

// symbolicDims lists the inputs' symbolic dimension names, sorted.
func symbolicDims(s *session.InferenceSession) []string {
	var names []string
	for _, meta := range s.Inputs() {
		for _, d := range meta.Shape {
			if d.Param != "" && !slices.Contains(names, d.Param) {
				names = append(names, d.Param)
			}
		}
	}
	slices.Sort(names)
	return names
}

// benchSweep runs the sweep: sizes in order, each size's first run and then runs warm ones.
func benchSweep(ctx context.Context, s *session.InferenceSession, model string, threads int, feeds []session.NamedTensor,
	dim string, sizes []int64, runs int, rnd *rand.Rand, release func([]session.Tensor), tick func()) (sweepResult, error) {
	r := sweepResult{Model: model, Provider: string(s.Provider()), Threads: threads, Dim: dim}
	if !slices.Contains(symbolicDims(s), dim) {
		return r, fmt.Errorf("--sweep: no input has a dimension named %q (the inputs' symbolic dimensions: %s)", dim, strings.Join(symbolicDims(s), ", "))
	}
	var ratios []float64
	for _, size := range sizes {
		in, err := sweepFeeds(s, feeds, dim, size, rnd)
		if err != nil {
			return r, err
		}
		t0 := time.Now()
		outs, err := s.Run(ctx, in)
		first := msSince(t0)
		if err != nil {
			return r, fmt.Errorf("%s=%d: %w", dim, size, err)
		}
		release(outs)
		warm := 0.0
		for k := range runs {
			t0 := time.Now()
			outs, err := s.Run(ctx, in)
			d := msSince(t0)
			if err != nil {
				return r, fmt.Errorf("%s=%d: %w", dim, size, err)
			}
			release(outs)
			if k == 0 || d < warm {
				warm = d
			}
		}
		tick()
		p := sweepPoint{Size: size, FirstMs: round(first, 6), WarmMs: round(warm, 6), Ratio: round(first/max(warm, 1e-9), 2)}
		r.Points = append(r.Points, p)
		r.FirstTotalMs += first
		r.WarmTotalMs += warm
		ratios = append(ratios, p.Ratio)
		if p.Ratio > r.Worst {
			r.Worst, r.WorstSize = p.Ratio, size
		}
	}
	slices.Sort(ratios)
	r.Median = ratios[len(ratios)/2]
	r.FirstTotalMs, r.WarmTotalMs = round(r.FirstTotalMs, 2), round(r.WarmTotalMs, 2)
	return r, nil
}

func printSweep(w io.Writer, r sweepResult, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintln(w, string(b))
		return
	}
	fmt.Fprintf(w, "%s on %s, %d thread(s), first run at each new %s against the fastest warm run:\n", r.Model, r.Provider, r.Threads, r.Dim)
	for _, p := range r.Points {
		fmt.Fprintf(w, "  %s=%-6d first %10.4f ms  warm %10.4f ms  first/warm %.2f\n", r.Dim, p.Size, p.FirstMs, p.WarmMs, p.Ratio)
	}
	fmt.Fprintf(w, "first/warm: median %.2f, worst %.2f (%s=%d); first runs %.1f ms in all, warm %.1f ms\n",
		r.Median, r.Worst, r.Dim, r.WorstSize, r.FirstTotalMs, r.WarmTotalMs)
}
