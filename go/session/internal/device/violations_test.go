package device

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/session/internal/sessiontest"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// gatherLoom reads x at data-dependent indices: an index outside x fails the guarded read,
// which yields zero and sets bit 1 (binding x) of the launch's violation word.
const gatherLoom = `
kernel gather[BLOCK index = 64] {
	launch(n index) {
		grid = (ceil_div(n, BLOCK), 1, 1)
		block = (BLOCK, 1, 1)
	}
	device(y buffer[f32] write, x buffer[f32] read, idx buffer[i32] read, n index) {
		assume len(y) >= n && len(idx) >= n
		i := block_id.x * BLOCK + thread_id.x
		if i < n {
			y[i] = x[index(idx[i])]
		}
	}
}
`

// gatherFixture is a session with the gather kernel, a table x of 16 floats (x[i] = i+1),
// and two index vectors and outputs of n elements.
type gatherFixture struct {
	s          *ModelSession
	k          KernelID
	x          Region
	idx, y     [2]Region
	n          int
	good, oops []byte // index vectors: all in range; one (element 5) out of range
}

const gatherN = 64

func newGatherFixture(t *testing.T, s *ModelSession) *gatherFixture {
	t.Helper()
	ids, err := s.Compile([]KernelSource{{Name: "gather.loom", Source: []byte(gatherLoom)}})
	require.NoError(t, err)
	f := &gatherFixture{s: s, k: ids[0], n: gatherN}
	xs := make([]float32, 16)
	for i := range xs {
		xs[i] = float32(i + 1)
	}
	f.x, err = s.Weight(float32Bytes(xs))
	require.NoError(t, err)
	f.good, f.oops = make([]byte, 4*gatherN), make([]byte, 4*gatherN)
	for i := range gatherN {
		binary.NativeEndian.PutUint32(f.good[4*i:], uint32(i%16))
		binary.NativeEndian.PutUint32(f.oops[4*i:], uint32(i%16))
	}
	binary.NativeEndian.PutUint32(f.oops[4*5:], 99)
	for j := range 2 {
		f.idx[j], err = s.Allocate(4 * gatherN)
		require.NoError(t, err)
		f.y[j], err = s.AllocateShared(4 * gatherN)
		require.NoError(t, err)
		require.NoError(t, s.Upload(f.idx[j], f.good))
	}
	return f
}

func (f *gatherFixture) dispatch(j int) Dispatch {
	return Dispatch{Kernel: f.k, Args: []uint64{uint64(f.n)}, Bindings: []Binding{f.y[j].Write(), f.x.Read(), f.idx[j].Read()}}
}

// requireGathered checks that output j holds x[i%16] everywhere.
func (f *gatherFixture) requireGathered(t *testing.T, j int) {
	t.Helper()
	got := make([]byte, 4*f.n)
	require.NoError(t, f.s.Read(f.y[j], got))
	for i, v := range bytesFloat32(got) {
		require.Equal(t, float32(i%16+1), v, "element %d of output %d", i, j)
	}
}

// requireViolation checks that err reports a bounds check of gather's x at command cmd of
// what.
func requireViolation(t *testing.T, err error, cmd, what string) {
	t.Helper()
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	require.ErrorContains(t, err, "command "+cmd+" of "+what+", a dispatch of kernel \"gather\"")
	require.ErrorContains(t, err, "failed a bounds check: accesses outside binding 1 (x) were skipped")
	require.ErrorContains(t, err, "(violation bits 0x2)")
}

func TestReplayReportsViolations(t *testing.T) { checkReplayReportsViolations(t, hostSession(t)) }

// TestCUDAReplayReportsViolations: the session's words are host-visible memory that CUDA
// kernels write through the device's mapping of it, read once the stream has synchronized.
func TestCUDAReplayReportsViolations(t *testing.T) {
	checkReplayReportsViolations(t, testSession(t, newContext(t, sessiontest.CUDADevice(t), Unlimited)))
}

func checkReplayReportsViolations(t *testing.T, s *ModelSession) {
	f := newGatherFixture(t, s)
	require.NoError(t, s.Record("both", []Command{f.dispatch(0), f.dispatch(1)}))

	// A good replay reads back cleanly.
	require.NoError(t, s.Replay("both"))
	f.requireGathered(t, 0)
	f.requireGathered(t, 1)

	// An index out of range in the second dispatch: Replay only enqueues, the next wait
	// reports it, naming the dispatch, and reads nothing.
	require.NoError(t, s.Upload(f.idx[1], f.oops))
	require.NoError(t, s.Replay("both"))
	got := make([]byte, 4*f.n)
	err := s.Read(f.y[0], got)
	requireViolation(t, err, "1", `recording "both"`)
	require.Equal(t, make([]byte, 4*f.n), got, "a reported violation copies nothing")
	require.NotContains(t, err.Error(), "more dispatches")

	// The error does not fail the session, and it is reported once.
	require.NoError(t, s.Synchronize())
	require.NoError(t, s.Read(f.y[1], got))
	require.Zero(t, binary.NativeEndian.Uint32(got[4*5:]), "the skipped read yielded zero")

	// Bits of several replays accumulate until a wait reads them; Synchronize reports too.
	require.NoError(t, s.Upload(f.idx[0], f.oops))
	require.NoError(t, s.Replay("both"))
	require.NoError(t, s.Replay("both"))
	err = s.Synchronize()
	requireViolation(t, err, "0", `recording "both"`)
	require.ErrorContains(t, err, "1 more dispatches of it failed bounds checks too")

	// Fixed inputs: the same recording replays cleanly again.
	require.NoError(t, s.Upload(f.idx[0], f.good))
	require.NoError(t, s.Upload(f.idx[1], f.good))
	require.NoError(t, s.Replay("both"))
	f.requireGathered(t, 0)
	f.requireGathered(t, 1)
}

func TestReplayIgnoreViolationsOptsOut(t *testing.T) {
	s := hostSession(t)
	f := newGatherFixture(t, s)
	d := f.dispatch(0)
	d.IgnoreViolations = true
	require.NoError(t, s.Record("quiet", []Command{d}))
	require.NoError(t, s.Upload(f.idx[0], f.oops))
	require.NoError(t, s.Replay("quiet"))
	got := make([]byte, 4*f.n)
	require.NoError(t, s.Read(f.y[0], got), "an ignored violation is no error")
	require.Zero(t, binary.NativeEndian.Uint32(got[4*5:]))
	require.Equal(t, float32(5), math.Float32frombits(binary.NativeEndian.Uint32(got[4*4:])))

	// A word of the caller's own: the caller reads it, the session reports nothing.
	word, err := s.AllocateShared(4)
	require.NoError(t, err)
	require.NoError(t, s.Upload(word, make([]byte, 4)))
	own := f.dispatch(0)
	own.Violation = word
	require.NoError(t, s.Record("own", []Command{own}))
	require.NoError(t, s.Replay("own"))
	bits := make([]byte, 4)
	require.NoError(t, s.Read(word, bits))
	require.Equal(t, uint32(0x2), binary.NativeEndian.Uint32(bits))

	// Both at once is contradictory.
	own.IgnoreViolations = true
	err = s.Record("both", []Command{own})
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	require.ErrorContains(t, err, "binds a violation word")
}

func TestSessionViolationWordsAddNoEdges(t *testing.T) {
	s := hostSession(t)
	f := newGatherFixture(t, s)
	edges := map[int][]int{}
	s.edgeFilter = func(node int, deps []int) []int {
		edges[node] = append([]int(nil), deps...)
		return deps
	}
	// Two independent gathers, then a third that rewrites the first's output.
	require.NoError(t, s.Record("graph", []Command{f.dispatch(0), f.dispatch(1), f.dispatch(0)}))
	require.Empty(t, edges[0])
	require.Empty(t, edges[1], "the session's words keep independent dispatches independent")
	require.Equal(t, []int{0}, edges[2])
	require.Len(t, s.recordings["graph"].words.sites, 3, "one word per dispatch")
}

func TestRunPathsReportViolations(t *testing.T) {
	s := hostSession(t)
	f := newGatherFixture(t, s)
	require.NoError(t, s.Upload(f.idx[0], f.oops))

	// Commands run once.
	require.NoError(t, IssueOnce(s, "Run", []Command{f.dispatch(1), f.dispatch(0)}))
	requireViolation(t, s.Synchronize(), "1", "the commands run once")
	require.NoError(t, IssueOnce(s, "Run", []Command{f.dispatch(1)}))
	require.NoError(t, s.Synchronize())

	// A recording run to completion.
	require.NoError(t, s.Record("one", []Command{f.dispatch(0)}))
	requireViolation(t, RunRecorded(s, "one", 0, nil, nil), "0", `recording "one"`)
	require.NoError(t, s.Upload(f.idx[0], f.good))
	require.NoError(t, RunRecorded(s, "one", 0, nil, nil))
	f.requireGathered(t, 0)

	// Benchmark waits after every replay.
	require.NoError(t, s.Upload(f.idx[0], f.oops))
	_, err := s.Benchmark("one", MinBenchmarkSamples)
	requireViolation(t, err, "0", `recording "one"`)
}

func TestSlotRunReportsViolations(t *testing.T) {
	ctx := newContext(t, sessiontest.OpenHost(t, 2), Unlimited)
	s := testSession(t, ctx)
	f := newGatherFixture(t, s)
	def, err := s.Freeze(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, def.Close()) })
	frag, err := def.Fragment([]Command{f.dispatch(0)}, []Region{f.idx[0]}, []Region{f.y[0]})
	require.NoError(t, err)
	prep, err := frag.Prepare(2)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, prep.Close()) })
	bad, err := prep.Slot(0)
	require.NoError(t, err)
	good, err := prep.Slot(1)
	require.NoError(t, err)
	out := make([]byte, 4*gatherN)
	requireViolation(t, bad.Run([][]byte{f.oops}, [][]byte{out}), "0", "the fragment")
	require.NoError(t, good.Run([][]byte{f.good}, [][]byte{out}), "slots have words of their own")
	require.NoError(t, bad.Run([][]byte{f.good}, [][]byte{out}), "the slot stays usable")
	for i, v := range bytesFloat32(out) {
		require.Equal(t, float32(i%16+1), v, "element %d", i)
	}
}

func TestViolationWordsAreReleased(t *testing.T) {
	ctx := newContext(t, sessiontest.OpenHost(t, 2), Unlimited)
	s, err := InContext(ctx)
	require.NoError(t, err)
	f := newGatherFixture(t, s)
	before := ctx.Charged()
	require.NoError(t, s.Record("r", []Command{f.dispatch(0), f.dispatch(1)}))
	require.Equal(t, before+8, ctx.Charged(), "one 4-byte word per dispatch")
	require.NoError(t, IssueOnce(s, "Run", []Command{f.dispatch(0)}))
	require.NoError(t, s.Replay("r"))
	require.NoError(t, s.Synchronize())
	require.Equal(t, before+8, ctx.Charged(), "the words of commands run once go with the wait")
	require.NoError(t, IssueOnce(s, "Run", []Command{f.dispatch(0)}))
	require.NoError(t, s.Close())
	require.Zero(t, ctx.Charged())
}

func TestViolationReason(t *testing.T) {
	buffers := []BufferParam{{Name: "y", Access: AccessWrite}, {Name: "x", Access: AccessRead}}
	require.Equal(t, "accesses outside binding 0 (y), binding 3 were skipped (an index out of range); an assumption about the operands does not hold (violation bits 0x20000009)",
		violationReason(buffers, 1|1<<3|1<<29))
	require.Equal(t, "unknown bits (violation bits 0x4000000)", violationReason(nil, 1<<26))
}
