package device

import (
	"math"
	"slices"
	"time"

	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Distribution summarizes timing samples by nearest rank.
type Distribution struct {
	MedianMs float64
	P95Ms    float64
}

// distribution computes the nearest-rank median and 95th percentile of samples (ms).
func distribution(samples []float64) Distribution {
	if len(samples) == 0 {
		return Distribution{}
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	return Distribution{MedianMs: nearestRank(sorted, 0.50), P95Ms: nearestRank(sorted, 0.95)}
}

// nearestRank is the smallest sample with at least p of the samples at or below it.
func nearestRank(sorted []float64, p float64) float64 {
	rank := int(math.Ceil(p * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

// ForwardTimings compares replaying a recording's graph with issuing the same prepared
// commands one by one.
type ForwardTimings struct {
	Samples int
	Graph   Distribution
	Direct  Distribution
}

// MinBenchmarkSamples is the fewest samples Benchmark and ProfileCommands take.
const MinBenchmarkSamples = 10

// benchmarkWarmup is the number of untimed graph/direct pairs before Benchmark measures.
const benchmarkWarmup = 10

// Benchmark times the recording under key both ways: replaying its graph, and issuing the
// same prepared commands one by one on the session's stream. Each sample is timed on the
// host from the first submission through the synchronize that follows it, so it includes the
// cost of submitting; no host transfers are involved. After 10 untimed warm-up pairs, the two
// ways alternate which goes first in each of the samples pairs, so neither always runs on a
// device the other just warmed. samples must be at least 10.
//
// Both ways run the recording's commands on the session's memory, so its contents change as
// a replay would change them.
func (s *ModelSession) Benchmark(key string, samples int) (ForwardTimings, error) {
	const op = "ModelSession.Benchmark"
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.recording(op, key)
	if err != nil {
		return ForwardTimings{}, err
	}
	if samples < MinBenchmarkSamples {
		return ForwardTimings{}, tensor.NewError(op, tensor.ErrInvalidArgument, "%d samples; Benchmark takes at least %d", samples, MinBenchmarkSamples)
	}
	if err := s.synchronize(op); err != nil {
		return ForwardTimings{}, err
	}
	graph := func() error {
		if err := s.launch(op, rec); err != nil {
			return err
		}
		return s.synchronize(op)
	}
	direct := func() error {
		if err := s.issueDirect(op, rec); err != nil {
			return err
		}
		return s.synchronize(op)
	}
	for range benchmarkWarmup {
		if err := graph(); err != nil {
			return ForwardTimings{}, err
		}
		if err := direct(); err != nil {
			return ForwardTimings{}, err
		}
	}
	graphMs := make([]float64, 0, samples)
	directMs := make([]float64, 0, samples)
	for i := range samples {
		order := [2]bool{true, false} // true: graph
		if i%2 == 1 {
			order = [2]bool{false, true}
		}
		for _, useGraph := range order {
			run, into := direct, &directMs
			if useGraph {
				run, into = graph, &graphMs
			}
			start := time.Now()
			if err := run(); err != nil {
				return ForwardTimings{}, err
			}
			*into = append(*into, milliseconds(time.Since(start)))
		}
	}
	return ForwardTimings{Samples: samples, Graph: distribution(graphMs), Direct: distribution(directMs)}, nil
}

// ProfileCommands times each command of the recording under key on its own: after one
// untimed warm-up submission, each sample submits the one command and synchronizes. It is a
// diagnostic: every sample includes a submission and a synchronization, which a graph replay
// amortizes, so the figures add up to more than a replay takes. samples must be at least 10.
func (s *ModelSession) ProfileCommands(key string, samples int) ([]Distribution, error) {
	const op = "ModelSession.ProfileCommands"
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.recording(op, key)
	if err != nil {
		return nil, err
	}
	if samples < MinBenchmarkSamples {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "%d samples; ProfileCommands takes at least %d", samples, MinBenchmarkSamples)
	}
	if err := s.synchronize(op); err != nil {
		return nil, err
	}
	out := make([]Distribution, len(rec.commands))
	times := make([]float64, samples)
	for c := range rec.commands {
		cmd := &rec.commands[c]
		for i := -1; i < samples; i++ {
			start := time.Now()
			s.launched(rec.words)
			if err := cmd.enqueue(s.stream); err != nil {
				return nil, s.latch(op, err)
			}
			if err := s.synchronize(op); err != nil {
				return nil, err
			}
			if i >= 0 {
				times[i] = milliseconds(time.Since(start))
			}
		}
		out[c] = distribution(times)
	}
	return out, nil
}

func milliseconds(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
