package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	"github.com/loomrt/loom/go/session"
)

// decodeResult is what `loom bench --decode N --json` prints: the per-step latency of the
// eager steps and, with --capture, of the replays of the captured device graph.
type decodeResult struct {
	Runtime        string  `json:"runtime"`
	Model          string  `json:"model"`
	Provider       string  `json:"provider"`
	Threads        int     `json:"threads"`
	Steps          int     `json:"steps"`
	EagerMedianMs  float64 `json:"eager_median_ms"`
	EagerP95Ms     float64 `json:"eager_p95_ms"`
	Captured       bool    `json:"captured"`
	Segments       int     `json:"segments,omitempty"`
	ReplayMedianMs float64 `json:"replay_median_ms,omitempty"`
	ReplayP95Ms    float64 `json:"replay_p95_ms,omitempty"`
	Reason         string  `json:"reason,omitempty"`
}

// benchDecode times steps decode steps of s with every input and every output in a persistent
// device binding (session.AllocateDeviceBinding): eager steps (RunWithDeviceBindings), then,
// when capture is set, the step captured (TryCaptureWithDeviceBindings) and replayed
// (ReplayDeviceGraph). The inputs keep their values: each step is the same step, as the
// runs of plain `loom bench` are. One Run first learns the outputs' shapes.
func benchDecode(ctx context.Context, s *session.InferenceSession, model string, threads int, feeds []session.NamedTensor, steps, warmup int, capture bool) (decodeResult, error) {
	r := decodeResult{Runtime: "loom " + string(s.Provider()), Model: filepath.Base(model), Provider: string(s.Provider()), Threads: threads, Steps: steps}
	outs, err := s.Run(ctx, feeds)
	if err != nil {
		return r, err
	}
	var bindings []*session.DeviceBinding
	defer func() {
		for _, b := range bindings {
			b.Destroy()
		}
	}()
	for _, f := range feeds {
		d := f.Tensor.Shape()
		b, err := s.AllocateDeviceBinding(f.Name, "", f.Tensor.DType(), d, d)
		if err != nil {
			return r, err
		}
		bindings = append(bindings, b)
		if err := b.Upload(f.Tensor); err != nil {
			return r, err
		}
	}
	for i, m := range s.Outputs() {
		d := outs[i].Shape()
		b, err := s.AllocateDeviceOutputBinding(m.Name, outs[i].DType(), d, d)
		if err != nil {
			return r, err
		}
		bindings = append(bindings, b)
	}
	// At least two eager steps: the first builds the step's plan, the second its instance.
	for range max(warmup, 2) {
		if _, err := s.RunWithDeviceBindings(ctx, nil, bindings); err != nil {
			return r, err
		}
	}
	times := make([]float64, steps)
	for i := range times {
		t0 := time.Now()
		_, err := s.RunWithDeviceBindings(ctx, nil, bindings)
		times[i] = msSince(t0)
		if err != nil {
			return r, err
		}
	}
	slices.Sort(times)
	r.EagerMedianMs, r.EagerP95Ms = round(percentile(times, 50), 4), round(percentile(times, 95), 4)
	if !capture {
		return r, nil
	}
	res, err := s.TryCaptureWithDeviceBindings(ctx, nil, bindings)
	if err != nil {
		return r, err
	}
	if !res.Captured {
		r.Reason = res.Reason
		return r, nil
	}
	defer s.ResetDeviceGraph()
	r.Captured, r.Segments = true, s.CapturedGraphSegmentCount()
	for i := range times {
		t0 := time.Now()
		ok, err := s.ReplayDeviceGraph(bindings)
		times[i] = msSince(t0)
		if err != nil {
			return r, err
		}
		if !ok {
			return r, fmt.Errorf("the captured graph was retired at replay %d (a branch flipped)", i)
		}
	}
	slices.Sort(times)
	r.ReplayMedianMs, r.ReplayP95Ms = round(percentile(times, 50), 4), round(percentile(times, 95), 4)
	return r, nil
}

// printDecode prints benchDecode's result as text or JSON.
func printDecode(w io.Writer, r decodeResult, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintln(w, string(b))
		return
	}
	fmt.Fprintf(w, "%s on %s, %d decode steps with bindings, %d thread(s):\n", r.Model, r.Provider, r.Steps, r.Threads)
	fmt.Fprintf(w, "  eager   median %v ms, p95 %v ms\n", r.EagerMedianMs, r.EagerP95Ms)
	switch {
	case r.Captured:
		fmt.Fprintf(w, "  replay  median %v ms, p95 %v ms (captured graph of %d segment(s))\n", r.ReplayMedianMs, r.ReplayP95Ms, r.Segments)
	case r.Reason != "":
		fmt.Fprintf(w, "  replay  not capturable: %s\n", r.Reason)
	}
}
