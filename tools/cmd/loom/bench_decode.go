package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
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
	// Grow: the steps ran through Run, each feeding its present outputs back as the next
	// step's past inputs; PastFirst and PastLast are the past length of the first and the last
	// timed step (the eager fields then time those steps).
	Grow      bool  `json:"grow,omitempty"`
	PastFirst int64 `json:"past_first,omitempty"`
	PastLast  int64 `json:"past_last,omitempty"`
}

// pastPresentPairs pairs each input whose name holds "past" with the output named the same
// with "present" in its place (past_key_0 / present_key_0, past_k0 / present_k0): the KV
// cache a decode loop feeds back.
func pastPresentPairs(s *session.InferenceSession) (map[string]string, error) {
	outputs := map[string]bool{}
	for _, m := range s.Outputs() {
		outputs[m.Name] = true
	}
	pairs := map[string]string{}
	for _, m := range s.Inputs() {
		if !strings.Contains(m.Name, "past") {
			continue
		}
		present := strings.Replace(m.Name, "past", "present", 1)
		if !outputs[present] {
			return nil, fmt.Errorf("--grow: input %q has no output %q to take its next value from", m.Name, present)
		}
		pairs[m.Name] = present
	}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("--grow: the model has no past inputs (inputs named past..., fed back from outputs named present...)")
	}
	return pairs, nil
}

// benchDecodeGrow times steps decode steps of a loop through Run in which each step's
// present outputs are the next step's past inputs, so the KV cache grows by the step's tokens
// each step and every step brings new input shapes, as a generation loop does; the other
// inputs keep their values. After each step the pasts it read, outputs of the step before,
// are handed back (session.Recycle), as a loop done with them should. --warmup steps of the
// loop run first, untimed.
func benchDecodeGrow(ctx context.Context, s *session.InferenceSession, model string, threads int, feeds []session.NamedTensor, steps, warmup int) (decodeResult, error) {
	r := decodeResult{Runtime: "loom " + string(s.Provider()), Model: filepath.Base(model), Provider: string(s.Provider()), Threads: threads, Steps: steps, Grow: true}
	pairs, err := pastPresentPairs(s)
	if err != nil {
		return r, err
	}
	index := map[string]int{}
	for i, m := range s.Outputs() {
		index[m.Name] = i
	}
	feeds = slices.Clone(feeds)
	pastLen := func() int64 {
		for _, f := range feeds {
			if _, ok := pairs[f.Name]; ok {
				if d := f.Tensor.Shape(); len(d) >= 2 {
					return d[len(d)-2]
				}
			}
		}
		return -1
	}
	times := make([]float64, steps)
	for i := range warmup + steps {
		if i == warmup {
			r.PastFirst = pastLen()
		}
		r.PastLast = pastLen()
		t0 := time.Now()
		outs, err := s.Run(ctx, feeds)
		if i >= warmup {
			times[i-warmup] = msSince(t0)
		}
		if err != nil {
			return r, fmt.Errorf("step %d (past length %d): %w", i, pastLen(), err)
		}
		// The pasts this step read were the step before's outputs (after the first step): hand
		// them back, as a generation loop that is done with them should, so that the next
		// step's presents, one position longer, are written into their memory.
		var done []session.Tensor
		for j := range feeds {
			if present, ok := pairs[feeds[j].Name]; ok {
				if i > 0 {
					done = append(done, feeds[j].Tensor)
				}
				feeds[j].Tensor = outs[index[present]]
			}
		}
		s.Recycle(done...)
	}
	slices.Sort(times)
	r.EagerMedianMs, r.EagerP95Ms = round(percentile(times, 50), 4), round(percentile(times, 95), 4)
	return r, nil
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
	// Under loom.jit=background (the default) the first plans run shape-generic stand-ins
	// while their exact kernels compile: the warm-up goes on, a step every 10 ms, until nothing
	// is queued or compiling (two minutes at most), and one more step plans with them, so that
	// the eager steps and the replays time the same kernels.
	if bg := s.CacheStats().Background; bg.Queued > bg.Done+bg.Failed {
		for deadline := time.Now().Add(2 * time.Minute); bg.Queued > bg.Done+bg.Failed && time.Now().Before(deadline); bg = s.CacheStats().Background {
			select {
			case <-ctx.Done():
				return r, ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
			if _, err := s.RunWithDeviceBindings(ctx, nil, bindings); err != nil {
				return r, err
			}
		}
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
	if r.Grow {
		fmt.Fprintf(w, "%s on %s, %d decode steps through Run, the KV cache growing (past length %d to %d), %d thread(s):\n",
			r.Model, r.Provider, r.Steps, r.PastFirst, r.PastLast, r.Threads)
		fmt.Fprintf(w, "  run     median %v ms, p95 %v ms\n", r.EagerMedianMs, r.EagerP95Ms)
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
