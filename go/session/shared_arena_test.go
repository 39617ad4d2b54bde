package session

import (
	"context"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// sharedArenaCase is a model and input signatures whose plans have arenas of SharedArenaMin
// or more (the shared arenas serve them).
type sharedArenaCase struct {
	model string
	feeds func(rnd interface{ Float32() float32 }, size int64) []tensor.NamedTensor
	sizes []int64
}

func sharedArenaCases() []sharedArenaCase {
	f32 := func(name string, shape ...int64) func(rnd interface{ Float32() float32 }, size int64) []tensor.NamedTensor {
		return func(rnd interface{ Float32() float32 }, size int64) []tensor.NamedTensor {
			s := append([]int64{size}, shape...)
			v := make([]float32, ops.Numel(s))
			for i := range v {
				v[i] = 2*rnd.Float32() - 1
			}
			return []tensor.NamedTensor{{Name: name, Tensor: tensor.MustTensor(s, v)}}
		}
	}
	return []sharedArenaCase{
		// Convolutions, pooling and a Gemm head: scratch operands and bound outputs.
		{"cnn_classifier.onnx", f32("x", 3, 32, 32), []int64{8, 16, 4, 24, 16}},
		// Attention: transposes, reshapes (aliases) and softmax rows.
		{"tiny_encoder.onnx", f32("x", 32, 64), []int64{4, 8, 16, 8}},
		// An If whose branches are plan steps: the branch test reads the arena, a branch's
		// copy writes it (host-side steps between segments).
		{"mlp_if.onnx", f32("x", 64), []int64{512, 1024, 256, 1024}},
	}
}

// Plans with large arenas run on the session's shared arenas: the outputs are the same as
// with an arena per instance (bit for bit: the same kernels) and as the interpreter's (fresh
// random inputs each run), sequential runs of every signature share one slab, and no
// instance's own arena is ever touched (its pages stay out of memory).
func TestSharedArenasServeEverySignature(t *testing.T) {
	rnd := inferRand()
	for _, c := range sharedArenaCases() {
		t.Run(c.model, func(t *testing.T) {
			path := filepath.Join("testdata", "models", c.model)
			open := func(opts ...LoadOption) *InferenceSession {
				s, err := Load(path, append([]LoadOption{WithExecutionProvider(ProviderHost)}, opts...)...)
				require.NoError(t, err)
				t.Cleanup(func() { require.NoError(t, s.Close()) })
				return s
			}
			// shared and own are held to each other bit for bit: the same kernels (sameKernels).
			shared, own, interpreted := open(sameKernels(nil)...), open(sameKernels([]LoadOption{WithOption(OptionSharedArenas, "0")})...), open(WithOption(OptionRunPlan, "0"))
			for _, size := range c.sizes {
				for range 2 { // the signature's first run and a later one
					feeds := c.feeds(rnd, size)
					want, err := interpreted.Run(context.Background(), feeds)
					require.NoError(t, err)
					ref, err := own.Run(context.Background(), feeds)
					require.NoError(t, err)
					got, err := shared.Run(context.Background(), feeds)
					require.NoError(t, err)
					requireOutputsMatch(t, want, got, 1e-4)
					require.Len(t, got, len(ref))
					for i := range ref {
						require.Equal(t, ref[i].Data(), got[i].Data(), "size %d output %d: not the per-instance arena's result", size, i)
					}
				}
			}
			for _, p := range shared.ExecutionPlans() {
				require.True(t, p.Planned, p.Reason)
				require.True(t, p.SharedArena, "%s: arena %d bytes", p.Signature, p.ArenaBytes)
			}
			for _, p := range own.ExecutionPlans() {
				require.False(t, p.SharedArena, p.Signature)
			}
			a := shared.pe.Arenas
			assert.Equal(t, 1, a.Live, "sequential runs share one slab")
			assert.Equal(t, 1, a.Idle())
			assert.Positive(t, a.Reused)
			assert.Equal(t, int64(1), a.Mapped, "one slab, mapped once")
			assert.Positive(t, a.Grown, "grown in place for larger signatures")
			assert.Zero(t, a.Unmapped)
			requireRecordedArenasUntouched(t, shared)
			assert.Equal(t, AllocationCount{Count: 1, Bytes: a.LiveBytes}, shared.DeviceAllocationCounts().Scratch, "the slab is the plans' scratch")
		})
	}
}

// requireRecordedArenasUntouched checks, with mincore(2), that no page of any shared-arena
// instance's own (recorded) arena is resident: every kernel binding of an arena slot was
// rebound to the run's slab and no host step read or wrote the own arena.
func requireRecordedArenasUntouched(t *testing.T, s *InferenceSession) {
	t.Helper()
	s.plans.Mu.Lock()
	defer s.plans.Mu.Unlock()
	checked := 0
	for key, e := range s.plans.Entries {
		for _, inst := range e.All {
			own := inst.RecordedArena()
			if own == nil {
				continue
			}
			checked++
			page := syscall.Getpagesize()
			vec := make([]byte, (len(own)+page-1)/page)
			_, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(own))), uintptr(len(own)), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
			require.Zero(t, errno, "mincore")
			resident := 0
			for _, v := range vec {
				resident += int(v & 1)
			}
			require.Zero(t, resident, "%s: %d of %d pages of the recorded arena are resident", s.describeKey(key), resident, len(vec))
		}
	}
	require.Positive(t, checked, "no instance on a shared arena")
}

// Traced runs (spans view every step's operands) and RunInto (outputs written into the
// caller's tensors) on a shared arena give the per-instance arena's results.
func TestSharedArenasTracedAndInto(t *testing.T) {
	rnd := inferRand()
	c := sharedArenaCases()[0]
	path := filepath.Join("testdata", "models", c.model)
	tp, rec := recordingProvider(t)
	traced, err := Load(path, WithExecutionProvider(ProviderHost), WithTracerProvider(tp))
	require.NoError(t, err)
	defer traced.Close()
	own, err := Load(path, WithExecutionProvider(ProviderHost), WithOption(OptionSharedArenas, "0"))
	require.NoError(t, err)
	defer own.Close()
	ctx, _ := parentContext(t, tp)
	for _, size := range []int64{16, 8, 16} {
		feeds := c.feeds(rnd, size)
		ref, err := own.Run(context.Background(), feeds)
		require.NoError(t, err)
		got, err := traced.Run(ctx, feeds)
		require.NoError(t, err)
		require.Equal(t, ref[0].Data(), got[0].Data(), "traced, size %d", size)
		into := []tensor.NamedTensor{{Name: traced.Outputs()[0].Name, Tensor: tensor.MustTensor(ref[0].Dims(), make([]float32, ref[0].Len()))}}
		_, err = traced.RunInto(context.Background(), feeds, into)
		require.NoError(t, err)
		require.Equal(t, ref[0].Data(), into[0].Tensor.Data(), "RunInto, size %d", size)
	}
	require.Len(t, spansNamed(rec.Ended(), "FusedConv"), 9, "the traced runs' op spans")
	for _, p := range traced.ExecutionPlans() {
		require.True(t, p.SharedArena, p.Signature)
	}
	requireRecordedArenasUntouched(t, traced)
}

// Concurrent runs of several signatures take a slab each and give the interpreter's results;
// the pool then holds no more slabs than runs overlapped, and Close unmaps them all.
func TestSharedArenasConcurrentRuns(t *testing.T) {
	rnd := inferRand()
	c := sharedArenaCases()[0]
	path := filepath.Join("testdata", "models", c.model)
	s, err := Load(path, WithExecutionProvider(ProviderHost), WithIntraOpThreads(1))
	require.NoError(t, err)
	interpreted, err := Load(path, WithExecutionProvider(ProviderHost), WithOption(OptionRunPlan, "0"))
	require.NoError(t, err)
	defer interpreted.Close()
	const workers, runs = 4, 6
	feeds := make([][][]tensor.NamedTensor, workers)
	want := make([][][]tensor.Tensor, workers)
	for w := range workers {
		for r := range runs {
			f := c.feeds(rnd, []int64{8, 12, 16, 20}[(w+r)%4])
			o, err := interpreted.Run(context.Background(), f)
			require.NoError(t, err)
			feeds[w], want[w] = append(feeds[w], f), append(want[w], o)
		}
	}
	var wg sync.WaitGroup
	got := make([][][]tensor.Tensor, workers)
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range runs {
				o, err := s.Run(context.Background(), feeds[w][r])
				if err != nil {
					errs[w] = err
					return
				}
				got[w] = append(got[w], o)
			}
		}()
	}
	wg.Wait()
	for w := range workers {
		require.NoError(t, errs[w])
		for r := range runs {
			requireOutputsMatch(t, want[w][r], got[w][r], 1e-4)
		}
	}
	a := s.pe.Arenas
	assert.LessOrEqual(t, a.Live, workers)
	assert.Equal(t, a.Live, a.Idle(), "every slab is back")
	require.NoError(t, s.Close())
	assert.Zero(t, a.Live, "Close unmaps the slabs")
	assert.Zero(t, a.LiveBytes)
}
