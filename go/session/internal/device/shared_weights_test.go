package device

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/sessiontest"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// A session reading shared weights neither frees them on Close nor releases or freezes them;
// the store frees them once. On the host they are the weights' own memory, wrapped.
func TestSharedWeightsStayWithTheirStore(t *testing.T) {
	dev := sessiontest.OpenHost(t, 2)
	ctx := newContext(t, dev, Unlimited)
	s, err := NewSessionWith("test", ctx, false, native.StreamOptions{})
	require.NoError(t, err)
	var store SharedWeights
	raw := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	rawOf := func() []byte { return raw }
	r, err := SharedWeight(s, &store, WeightKey(raw), rawOf, true)
	require.NoError(t, err)
	again, err := SharedWeight(s, &store, WeightKey(raw), rawOf, true)
	require.NoError(t, err)
	require.NotEqual(t, r, again, "each binding is a region of its own")
	require.Len(t, store.Bufs, 1, "over one buffer")
	for _, buf := range store.Bufs {
		require.Same(t, &raw[0], &buf.Bytes()[0], "on the host, the weight's own memory")
	}
	require.Zero(t, ctx.Charged(), "wrapped memory costs the budget nothing")
	require.ErrorIs(t, ReleaseRegions(s, []Region{r}), tensor.ErrInvalidArgument)
	_, err = s.Freeze(ctx)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	require.ErrorContains(t, err, "shared weights")
	require.NoError(t, s.Close())
	for _, buf := range store.Bufs {
		require.Equal(t, raw, buf.Bytes(), "the session left the store's buffer alone")
	}
	for _, err := range CloseWeights(&store, ctx) {
		require.NoError(t, err)
	}
	require.Empty(t, store.Bufs)
	require.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8}, raw)
	require.Empty(t, CloseWeights(&store, ctx), "idempotent")
}

// Buffers are counted by the references taken: one not kept is freed with its last
// reference, a kept one stays for later plans; an unpacked weight is made once for the
// references it has and again after they are all given back.
func TestSharedWeightsFreeWhatNoInstanceBinds(t *testing.T) {
	dev := sessiontest.OpenHost(t, 2)
	ctx := newContext(t, dev, Unlimited)
	s, err := NewSessionWith("test", ctx, false, native.StreamOptions{})
	require.NoError(t, err)
	defer s.Close()
	var store SharedWeights
	model, mask := []byte{1, 2, 3, 4}, []byte{5, 6, 7, 8, 9, 10, 11, 12}
	packed := []byte{13, 14, 15, 16}
	unpacks := 0
	unpack := func() []byte { unpacks++; return []byte{16, 15, 14, 13} }
	bind := func() []SharedWeightKey {
		keys := []SharedWeightKey{WeightKey(model), WeightKey(mask), UnpackedKey(packed, 4, "rows")}
		_, err := SharedWeight(s, &store, keys[0], func() []byte { return model }, true)
		require.NoError(t, err)
		_, err = SharedWeight(s, &store, keys[1], func() []byte { return mask }, false)
		require.NoError(t, err)
		r, err := SharedWeight(s, &store, keys[2], unpack, false)
		require.NoError(t, err)
		require.Equal(t, uint64(4), r.Bytes())
		return keys
	}
	first, second := bind(), bind()
	require.Len(t, store.Bufs, 3)
	require.Equal(t, 1, unpacks, "unpacked once for both instances")
	require.NoError(t, ReleaseWeights(&store, ctx, first))
	require.Len(t, store.Bufs, 3, "the second instance still binds them")
	require.NoError(t, ReleaseWeights(&store, ctx, second))
	require.Len(t, store.Bufs, 1, "the plan's own constants are freed with their last instance")
	require.Contains(t, store.Bufs, WeightKey(model), "the model's weight is kept")
	require.NoError(t, ReleaseWeights(&store, ctx, second), "nothing left to give back")
	bind()
	require.Equal(t, 2, unpacks, "unpacked again for a later instance")
	_, err = SharedWeight(s, &store, UnpackedKey(packed, 8, "rows"), unpack, false)
	require.ErrorIs(t, err, tensor.ErrInternal, "a key whose length is not the bytes'")
	for _, err := range CloseWeights(&store, ctx) {
		require.NoError(t, err)
	}
	require.Empty(t, store.Bufs)
}
