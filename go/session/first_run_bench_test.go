package session

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/plan"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// BenchmarkFirstRunNewBatch times the first run of the classifier at each batch size 1-16, every
// one a signature the session has not planned (each run again, untimed): what a dynamic-batch service pays when a new
// batch size arrives (the plan built from shapes, its arena, its kernels loaded). The sessions
// are made, and the kernels compiled once, outside the clock.
func BenchmarkFirstRunNewBatch(b *testing.B) {
	rnd := inferRand()
	feeds := make([][]tensor.NamedTensor, 16)
	for i := range feeds {
		n := i + 1
		feeds[i] = []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{int64(n), 3, 32, 32}, randomF32(rnd, n*3*32*32))}}
	}
	open := func() *InferenceSession {
		s, err := Load(classifierPath, WithExecutionProvider(ProviderHost), WithIntraOpThreads(1))
		require.NoError(b, err)
		return s
	}
	warm := open()
	for _, f := range feeds {
		_, err := warm.Run(context.Background(), f)
		require.NoError(b, err)
	}
	// The disk cache holds every kernel: Close cancels the compiles still queued or running.
	require.NoError(b, warm.waitBackground(context.Background()))
	require.NoError(b, warm.Close())
	var s *InferenceSession
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	i := 0
	var first, second time.Duration
	for b.Loop() {
		if i%len(feeds) == 0 {
			b.StopTimer()
			if s != nil {
				s.Close()
			}
			s = open()
			b.StartTimer()
		}
		t0 := time.Now()
		if _, err := s.Run(context.Background(), feeds[i%len(feeds)]); err != nil {
			b.Fatal(err)
		}
		first += time.Since(t0)
		// A second run, as a service's batch sizes recur (a sweep of sizes that never come
		// back would have the session interpret new sizes: plan.Tiering).
		b.StopTimer()
		t0 = time.Now()
		if _, err := s.Run(context.Background(), feeds[i%len(feeds)]); err != nil {
			b.Fatal(err)
		}
		second += time.Since(t0)
		b.StartTimer()
		i++
	}
	// first/second: a size's first run over its second (the plan built; until the background
	// compiles land, the same shape-generic kernels).
	b.ReportMetric(float64(first)/float64(second), "first/second")
}

// BenchmarkPlanPhases times the two phases that follow a new signature's shape trace before
// its first run (BenchmarkShapeTrace times the trace): BuildTemplate (the kernel planners,
// the arena's slots) and NewInstance (the arena, the weights bound, the segments recorded as
// device graphs), one signature after another: the small encoder at sequence lengths 8-256,
// the classifier at batches 1-16. Every signature runs once before, and the background
// compiles are waited for, so that the plans find their exact kernels loaded. Reported per
// signature: build-us, instance-us, and instance-us/call (per kernel launch recorded).
func BenchmarkPlanPhases(b *testing.B) {
	models := signatureModels()
	for _, m := range models {
		b.Run(m.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := Load(m.path, WithExecutionProvider(ProviderHost), WithIntraOpThreads(1))
			require.NoError(b, err)
			defer s.Close()
			type signature struct {
				fed   map[string]tensor.Tensor
				trace []plan.TracedNode
			}
			sigs := make([]signature, len(m.sizes))
			for i, n := range m.sizes {
				fed := m.feed(n)
				var in []tensor.NamedTensor
				for name, t := range fed {
					in = append(in, tensor.NamedTensor{Name: name, Tensor: t})
				}
				_, err := s.Run(ctx, in)
				require.NoError(b, err)
				sigs[i].fed = fed
			}
			require.NoError(b, s.waitBackground(ctx))
			rc := &exec.RunCtx{Eng: s.eng, Opset: s.eng.Opset, Phase: exec.PhaseRun, Ctx: ctx}
			for i := range sigs {
				var why string
				sigs[i].trace, why = s.pe.ShapeTrace(rc, sigs[i].fed)
				require.Empty(b, why)
			}
			var build, instance time.Duration
			calls := 0
			i := 0
			for b.Loop() {
				sig := sigs[i%len(sigs)]
				t0 := time.Now()
				t, reason := s.pe.BuildTemplate("bench "+strconv.Itoa(i), sig.fed, sig.trace)
				if t == nil {
					b.Fatal(reason)
				}
				t1 := time.Now()
				inst, err := s.pe.NewInstance(t, exec.PhaseRun)
				if err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				b.StopTimer()
				require.NoError(b, inst.Close())
				b.StartTimer()
				build += t1.Sub(t0)
				instance += t2.Sub(t1)
				calls += t.KernelCalls()
				i++
			}
			b.ReportMetric(float64(build.Microseconds())/float64(i), "build-us")
			b.ReportMetric(float64(instance.Microseconds())/float64(i), "instance-us")
			b.ReportMetric(float64(instance.Microseconds())/float64(max(calls, 1)), "instance-us/call")
		})
	}
}
