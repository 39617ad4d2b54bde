package modelmem

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStoreCarving: parts are aligned, do not overlap, and a full or released store
// hands out nothing.
func TestStoreCarving(t *testing.T) {
	lens, rooms := []int{100, 70000, 1, 65536}, []int{0, 300, 0, 64}
	size := Size(lens, rooms)
	require.Positive(t, size)
	s := NewStore(size)
	require.NotNil(t, s)
	var prevEnd uintptr
	for i := range lens {
		b := s.Take(lens[i], rooms[i])
		require.NotNil(t, b, "part %d", i)
		assert.Len(t, b, lens[i])
		assert.Equal(t, lens[i]+rooms[i], cap(b))
		p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		assert.Zero(t, p%Align)
		assert.GreaterOrEqual(t, p, prevEnd, "part %d does not overlap the one before", i)
		prevEnd = p + uintptr(cap(b))
		for j := range b {
			b[j] = byte(i)
		}
	}
	assert.Nil(t, s.Take(1, 0), "full")
	assert.Nil(t, s.Take(-1, 0))
	require.NoError(t, s.Release())
	assert.True(t, s.Memory().Released())
	assert.Nil(t, s.Take(0, 0), "released")
	require.NoError(t, s.Release(), "once")
	assert.Equal(t, -1, Size([]int{int(^uint(0) >> 2), int(^uint(0) >> 2), 1 << 20}, []int{0, 0, 0}))
}
