package exec

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHeldRangesOverlap(t *testing.T) {
	h := HeldRanges{{100, 200}, {110, 120}, {300, 310}, {50, 1000}}
	require.True(t, h.Overlaps(MemRange{150, 151}))
	require.True(t, h.Overlaps(MemRange{0, 51}), "the range nesting all others")
	h = HeldRanges{{100, 200}, {110, 120}, {300, 310}}
	require.False(t, h.Overlaps(MemRange{200, 300}), "ends are exclusive")
	require.False(t, h.Overlaps(MemRange{0, 100}))
	require.True(t, h.Overlaps(MemRange{305, 400}))
	require.False(t, h.Overlaps(MemRange{310, 400}))
	require.False(t, HeldRanges(nil).Overlaps(MemRange{1, 2}))
}
