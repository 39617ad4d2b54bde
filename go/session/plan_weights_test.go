package session

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/native"
)

// The instances a plan makes for concurrent runs share one device copy of each weight: the
// session's store holds as many buffers after several instances as after the first, every
// instance's weight regions are those buffers, and the results stay right.
func TestPlanInstancesShareWeights(t *testing.T) {
	rnd := inferRand()
	w, b := randomF32(rnd, 64*32), randomF32(rnd, 32)
	s, err := FromGraph(mlpModel(t, w, b, 64, 32), WithExecutionProvider(ProviderHost), WithIntraOpThreads(1))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	run := func(x []float32) {
		outs, err := s.Run(context.Background(), []NamedTensor{{Name: "x", Tensor: MustTensor([]int64{4, 64}, x)}})
		require.NoError(t, err)
		want := mlpReference(x, w, b, 4, 64, 32)
		require.InDeltaSlice(t, want, outs[0].Data(), 1e-5)
	}
	run(randomF32(rnd, 4*64)) // traced
	run(randomF32(rnd, 4*64)) // the first instance
	s.planWeights.mu.Lock()
	stored := len(s.planWeights.bufs)
	s.planWeights.mu.Unlock()
	require.Positive(t, stored)

	// A run that finds every instance busy builds one of its own: hold the idle ones while
	// running, twice, for three instances in all.
	s.plans.mu.Lock()
	var entry *planEntry
	for _, e := range s.plans.entries {
		entry = e
	}
	s.plans.mu.Unlock()
	var held []*planInstance
	for range 2 {
		for {
			_, _, inst := s.plans.takeIdleOf(entry)
			if inst == nil {
				break
			}
			held = append(held, inst)
		}
		run(randomF32(rnd, 4*64))
	}
	for _, inst := range held {
		s.plans.give(entry, inst, false)
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
	s.plans.mu.Lock()
	var instances []*planInstance
	for _, e := range s.plans.entries {
		instances = append(instances, e.all...)
	}
	s.plans.mu.Unlock()
	require.GreaterOrEqual(t, len(instances), 3, "busy instances made more")

	s.planWeights.mu.Lock()
	defer s.planWeights.mu.Unlock()
	require.Equal(t, stored, len(s.planWeights.bufs), "no instance uploaded weights of its own")
	shared := map[*native.Buffer]bool{}
	for _, buf := range s.planWeights.bufs {
		shared[buf] = true
	}
	for _, inst := range instances {
		inst.ms.mu.Lock()
		borrowed := 0
		for _, a := range inst.ms.allocs {
			if a.weight {
				require.True(t, a.borrowed, "an instance owns a weight")
				require.True(t, shared[a.buf], "an instance reads a weight outside the store")
				borrowed++
			}
		}
		inst.ms.mu.Unlock()
		require.Equal(t, stored, borrowed)
	}
}

// A session reading shared weights neither frees them on Close nor releases or freezes them;
// the store frees them once. On the host they are the weights' own memory, wrapped.
func TestSharedWeightsStayWithTheirStore(t *testing.T) {
	dev := openHost(t, 2)
	ctx := newContext(t, dev, Unlimited)
	s, err := newSessionWith("test", ctx, false, native.StreamOptions{})
	require.NoError(t, err)
	var store sharedWeights
	raw := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	r, err := s.sharedWeight(&store, raw)
	require.NoError(t, err)
	again, err := s.sharedWeight(&store, raw)
	require.NoError(t, err)
	require.NotEqual(t, r, again, "each binding is a region of its own")
	require.Len(t, store.bufs, 1, "over one buffer")
	for _, buf := range store.bufs {
		require.Same(t, &raw[0], &buf.Bytes()[0], "on the host, the weight's own memory")
	}
	require.Zero(t, ctx.Charged(), "wrapped memory costs the budget nothing")
	require.ErrorIs(t, s.release([]Region{r}), ErrInvalidArgument)
	_, err = s.Freeze(ctx)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "shared weights")
	require.NoError(t, s.Close())
	for _, buf := range store.bufs {
		require.Equal(t, raw, buf.Bytes(), "the session left the store's buffer alone")
	}
	for _, err := range store.close(ctx) {
		require.NoError(t, err)
	}
	require.Empty(t, store.bufs)
	require.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8}, raw)
	require.Empty(t, store.close(ctx), "idempotent")
}
