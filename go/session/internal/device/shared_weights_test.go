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
	r, err := SharedWeight(s, &store, raw)
	require.NoError(t, err)
	again, err := SharedWeight(s, &store, raw)
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
