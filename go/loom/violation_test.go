package loom_test

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/loom/internal/hostrun"
	"github.com/loomrt/loom/go/loom/ir"
)

const gatherSrc = `
kernel gather[BLOCK index = 32] {
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

kernel scatter {
	launch(n index) {
		grid = (1, 1, 1)
		block = (n, 1, 1)
	}
	device(y buffer[f32] write, idx buffer[i32] read, n index) {
		assume len(idx) >= n
		i := thread_id.x
		y[index(idx[i])] = 1.0
	}
}

kernel viewfit {
	launch(m index, k index) {
		grid = (1, 1, 1)
		block = (1, 1, 1)
	}
	device(a buffer[f32] read_write, m index, k index) {
		A := view(a, [m, k])
		for i := range(m) {
			for j := range(k) {
				A[i, j] = 2.0 * A[i, j]
			}
		}
	}
}
`

func compileInline(t testing.TB, c *loom.Compiler, src, symbol string, spec map[string]string) *loom.Artifact {
	t.Helper()
	a, err := c.Compile(loom.KernelSource{Name: "inline.loom", Source: []byte(src), Specialization: loom.Specialization{Symbol: symbol, Config: spec}}, loom.HostTarget())
	require.NoError(t, err)
	return a
}

func i32s(xs ...int32) []byte {
	b := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func TestGuardedLoadSkipsAndReports(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	a := compileInline(t, c, gatherSrc, "gather", nil)
	// Only x[idx[i]] cannot be proven: one guard, on binding 1.
	require.Equal(t, 1, generatedGuards(a.Source), a.Source)
	require.Contains(t, a.Source, "loom_viol |= 0x2u")
	require.Equal(t, loom.CheckStats{Accesses: 3, Proven: 2, Remaining: 2}, a.Checks)

	n := 50 + r.IntN(50)
	x := randF32(r, 40)
	idx := make([]int32, n)
	want := make([]float32, n)
	bad := 0
	for i := range idx {
		switch r.IntN(4) {
		case 0:
			idx[i] = int32(40 + r.IntN(10)) // past the end
			bad++
		case 1:
			idx[i] = -1 - int32(r.IntN(5)) // negative
			bad++
		default:
			idx[i] = int32(r.IntN(40))
			want[i] = x[idx[i]]
		}
	}
	y := randF32(r, n)
	res := launch(t, a, [][]byte{hostrun.F32(y), hostrun.F32(x), i32s(idx...)}, 2, int64(n))
	require.Equal(t, hostrun.ToF32(res.Buffers[0]), want, "skipped loads read as zero")
	if bad > 0 {
		require.Equal(t, ir.ViolationBinding(1), res.Violation)
	} else {
		require.Zero(t, res.Violation)
	}
}

func TestGuardedStoreSkipsAndReports(t *testing.T) {
	c := newCompiler(t)
	a := compileInline(t, c, gatherSrc, "scatter", nil)
	require.Equal(t, 1, generatedGuards(a.Source))
	y := make([]float32, 8)
	res := launch(t, a, [][]byte{hostrun.F32(y), i32s(0, 9, 3, -2, 7)}, 1, int64(5))
	require.Equal(t, []float32{1, 0, 0, 1, 0, 0, 0, 1}, hostrun.ToF32(res.Buffers[0]))
	require.Equal(t, ir.ViolationBinding(0), res.Violation)
}

func TestAssumeFailureAbortsBlock(t *testing.T) {
	c := newCompiler(t)
	a := compileInline(t, c, gatherSrc, "gather", nil)
	// y has room for 4 elements but n = 10: the assume fails and no block writes anything.
	y := []float32{7, 7, 7, 7}
	res := launch(t, a, [][]byte{hostrun.F32(y), hostrun.F32(make([]float32, 10)), i32s(make([]int32, 10)...)}, 1, int64(10))
	require.Equal(t, ir.ViolationAssume, res.Violation)
	require.Equal(t, y, hostrun.ToF32(res.Buffers[0]))
}

func TestViewThatDoesNotFitAborts(t *testing.T) {
	c := newCompiler(t)
	a := compileInline(t, c, gatherSrc, "viewfit", nil)
	require.Equal(t, 0, generatedGuards(a.Source), "indices inside the view's shape need no checks")
	buf := []float32{1, 2, 3, 4, 5, 6}
	res := launch(t, a, [][]byte{hostrun.F32(buf)}, 1, int64(2), int64(3))
	require.Zero(t, res.Violation)
	require.Equal(t, []float32{2, 4, 6, 8, 10, 12}, hostrun.ToF32(res.Buffers[0]))
	// 3 x 3 does not fit in 6 elements: the block stops before touching memory.
	res = launch(t, a, [][]byte{hostrun.F32(buf)}, 1, int64(3), int64(3))
	require.Equal(t, ir.ViolationView, res.Violation)
	require.Equal(t, buf, hostrun.ToF32(res.Buffers[0]))
}

func TestLaunchGeometryMismatchAborts(t *testing.T) {
	c := newCompiler(t)
	a := compileKernel(t, c, "fill.loom", "fill", nil)
	out := make([]float32, 300)
	blob, err := a.PackScalars(nil, float32(1), int64(300))
	require.NoError(t, err)
	// The launch program wants grid (2,1,1) block (256,1,1); launch one block of 128 instead.
	res, err := hostrun.Run(a.SharedObject, a.Entry, a.Target, hostrun.Launch{
		Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{128, 1, 1}, Buffers: [][]byte{hostrun.F32(out)}, Scalars: blob,
	})
	require.NoError(t, err)
	require.Equal(t, ir.ViolationLaunch, res.Violation)
	require.Equal(t, out, hostrun.ToF32(res.Buffers[0]))
	// A scalar blob that is too short is refused the same way.
	res, err = hostrun.Run(a.SharedObject, a.Entry, a.Target, hostrun.Launch{
		Grid: [3]uint32{2, 1, 1}, Block: [3]uint32{256, 1, 1}, Buffers: [][]byte{hostrun.F32(out)}, Scalars: blob[:8],
	})
	require.NoError(t, err)
	require.Equal(t, ir.ViolationLaunch, res.Violation)
}

func TestIndexParameterRangeAborts(t *testing.T) {
	c := newCompiler(t)
	a := compileKernel(t, c, "fill.loom", "fill", nil)
	blob := make([]byte, a.BlobBytes)
	binary.LittleEndian.PutUint64(blob[8:], 1<<41) // n beyond ±2^40
	res, err := hostrun.Run(a.SharedObject, a.Entry, a.Target, hostrun.Launch{
		Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{256, 1, 1}, Buffers: [][]byte{make([]byte, 16)}, Scalars: blob,
	})
	require.NoError(t, err)
	require.Equal(t, ir.ViolationAssume, res.Violation)
	require.True(t, strings.Contains(a.Source, "assume index parameter n"))
}
