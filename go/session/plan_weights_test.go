package session

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/plan"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// The instances a plan makes for concurrent runs share one device copy of each weight: the
// session's store holds as many buffers after several instances as after the first, every
// instance's weight regions are those buffers, and the results stay right.
func TestPlanInstancesShareWeights(t *testing.T) {
	rnd := inferRand()
	w, b := randomF32(rnd, 64*32), randomF32(rnd, 32)
	// The exact kernels on the run path (sync): under the background JIT the first plan runs
	// stand-ins and is replaced, with new instances, once the exact kernels load, which under
	// a loaded machine's timing could land between the runs below and leave the replacing
	// entry with fewer instances than the runs made (a CI run's shared-arenas stage saw 2).
	s, err := FromGraph(mlpModel(t, w, b, 64, 32), WithExecutionProvider(ProviderHost), WithIntraOpThreads(1), WithOption(OptionJIT, "sync"))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	run := func(x []float32) {
		outs, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{4, 64}, x)}})
		require.NoError(t, err)
		want := mlpReference(x, w, b, 4, 64, 32)
		require.InDeltaSlice(t, want, outs[0].Data(), 1e-5)
	}
	run(randomF32(rnd, 4*64)) // traced
	run(randomF32(rnd, 4*64)) // the first instance
	s.pe.PlanWeights.Mu.Lock()
	stored := len(s.pe.PlanWeights.Bufs)
	s.pe.PlanWeights.Mu.Unlock()
	require.Positive(t, stored)

	// A run that finds every instance busy builds one of its own: hold the idle ones while
	// running, twice, for three instances in all.
	s.plans.Mu.Lock()
	var entry *plan.Entry
	for _, e := range s.plans.Entries {
		entry = e
	}
	s.plans.Mu.Unlock()
	var held []*plan.Instance
	for range 2 {
		for {
			_, _, inst := s.plans.TakeIdleOf(entry)
			if inst == nil {
				break
			}
			held = append(held, inst)
		}
		run(randomF32(rnd, 4*64))
	}
	for _, inst := range held {
		s.plans.Give(entry, inst, false)
	}
	// And runs at once, as they come.
	var wg sync.WaitGroup
	inputs := make([][]float32, 8)
	for i := range inputs {
		inputs[i] = randomF32(rnd, 4*64)
	}
	for round := 0; round < 20; round++ {
		for _, x := range inputs {
			wg.Go(func() { run(x) })
		}
		wg.Wait()
	}
	s.plans.Mu.Lock()
	var instances []*plan.Instance
	for _, e := range s.plans.Entries {
		instances = append(instances, e.All...)
	}
	s.plans.Mu.Unlock()
	require.GreaterOrEqual(t, len(instances), 3, "busy instances made more")

	s.pe.PlanWeights.Mu.Lock()
	defer s.pe.PlanWeights.Mu.Unlock()
	require.Equal(t, stored, len(s.pe.PlanWeights.Bufs), "no instance uploaded weights of its own")
	shared := map[*native.Buffer]bool{}
	for _, buf := range s.pe.PlanWeights.Bufs {
		shared[buf] = true
	}
	for _, inst := range instances {
		borrowed := 0
		for _, a := range device.Allocations(inst.MS) {
			if a.Weight {
				require.True(t, a.Borrowed, "an instance owns a weight")
				require.True(t, shared[a.Buf], "an instance reads a weight outside the store")
				borrowed++
			}
		}
		require.Equal(t, stored, borrowed)
	}
}
