package session_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/session"
)

// lookupLoom gathers table rows by index; an index outside the table fails the guarded read
// (which yields zero) and sets bit 1 of the launch's violation word.
const lookupLoom = `
kernel lookup[BLOCK index = 64] {
	launch(n index) {
		grid = (ceil_div(n, BLOCK), 1, 1)
		block = (BLOCK, 1, 1)
	}
	device(y buffer[f32] write, table buffer[f32] read, idx buffer[i32] read, n index) {
		assume len(y) >= n && len(idx) >= n
		i := block_id.x * BLOCK + thread_id.x
		if i < n {
			y[i] = table[index(idx[i])]
		}
	}
}
`

// Issue 18, finding 6: a replay whose bounds guards skipped an access (63 of 64 outputs
// written) is an error by default; opting out restores the silent behaviour.
func TestModelSessionReplayReportsBoundsViolations(t *testing.T) {
	const n = 64
	s, err := session.Open(0)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	ids, err := s.Compile([]session.KernelSource{{Name: "lookup.loom", Source: []byte(lookupLoom)}})
	require.NoError(t, err)
	tableValues := make([]byte, 4*16)
	for i := range 16 {
		binary.NativeEndian.PutUint32(tableValues[4*i:], math.Float32bits(float32(i+1)))
	}
	table, err := s.Weight(tableValues)
	require.NoError(t, err)
	idx, err := s.AllocateShared(4 * n)
	require.NoError(t, err)
	y, err := s.AllocateShared(4 * n)
	require.NoError(t, err)
	indices := func(bad bool) []byte {
		b := make([]byte, 4*n)
		for i := range n {
			binary.NativeEndian.PutUint32(b[4*i:], uint32(i%16))
		}
		if bad {
			binary.NativeEndian.PutUint32(b[4*63:], 1000)
		}
		return b
	}
	lookup := session.Dispatch{Kernel: ids[0], Args: []uint64{n}, Bindings: []session.Binding{y.Write(), table.Read(), idx.Read()}}
	quiet := lookup
	quiet.IgnoreViolations = true
	require.NoError(t, s.Record("lookup", []session.Command{lookup}))
	require.NoError(t, s.Record("quiet", []session.Command{quiet}))
	got := make([]byte, 4*n)

	require.NoError(t, s.Upload(idx, indices(true)))
	require.NoError(t, s.Replay("lookup"))
	err = s.Read(y, got)
	require.ErrorIs(t, err, session.ErrInvalidArgument)
	require.ErrorContains(t, err, `command 0 of recording "lookup", a dispatch of kernel "lookup"`)
	require.ErrorContains(t, err, "accesses outside binding 1 (table) were skipped")
	require.ErrorContains(t, err, "(violation bits 0x2)")

	// Opted out: nil, as before, with the skipped element zero.
	require.NoError(t, s.Replay("quiet"))
	require.NoError(t, s.Read(y, got))
	require.Zero(t, binary.NativeEndian.Uint32(got[4*63:]))

	// The session is still usable: a good replay succeeds.
	require.NoError(t, s.Upload(idx, indices(false)))
	require.NoError(t, s.Replay("lookup"))
	require.NoError(t, s.Read(y, got))
	for i := range n {
		require.Equal(t, float32(i%16+1), math.Float32frombits(binary.NativeEndian.Uint32(got[4*i:])), "element %d", i)
	}
}
