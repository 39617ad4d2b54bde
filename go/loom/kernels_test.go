package loom_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/loom/internal/hostrun"
)

// kernelsDir holds the compiler tests' kernels (small kernels the tests exercise the compiler with; the op library is //kernels).
var kernelsDir = filepath.Join("testdata", "kernels")

func newRand(t testing.TB) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func newCompiler(t testing.TB) *loom.Compiler {
	c := loom.NewCompiler(loom.Config{CacheDir: t.TempDir()})
	t.Cleanup(func() { c.Close() })
	return c
}

func compileKernel(t testing.TB, c *loom.Compiler, file, symbol string, spec map[string]string) *loom.Artifact {
	t.Helper()
	src, err := loom.ReadSource(filepath.Join(kernelsDir, file), symbol, spec)
	require.NoError(t, err)
	a, err := c.Compile(src, loom.HostTarget())
	require.NoError(t, err)
	return a
}

// launch runs an artifact on the host driver with scalars given in scalar order; the workload
// is taken from the scalars of the same names.
func launch(t testing.TB, a *loom.Artifact, buffers [][]byte, threads int, scalars ...any) *hostrun.Result {
	t.Helper()
	wl, err := a.WorkloadBits(scalars...)
	require.NoError(t, err)
	g, err := a.LaunchConfig(wl, loom.Limits{})
	require.NoError(t, err)
	var sizes []uint64
	for _, b := range buffers {
		sizes = append(sizes, uint64(len(b)))
	}
	blob, err := a.PackScalars(sizes, scalars...)
	require.NoError(t, err)
	r, err := hostrun.Run(a.SharedObject, a.Entry, a.Target, hostrun.Launch{
		Grid: g.Grid, Block: g.Block, SharedBytes: g.SharedBytes, Buffers: buffers, Scalars: blob, Threads: threads,
	})
	require.NoError(t, err)
	return r
}

func randF32(r *rand.Rand, n int) []float32 {
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = float32(r.NormFloat64())
	}
	return xs
}

func requireClose(t testing.TB, want, got []float32, tol float64) {
	t.Helper()
	require.Equal(t, len(want), len(got))
	for i := range want {
		d := math.Abs(float64(want[i]) - float64(got[i]))
		if d > tol*(1+math.Abs(float64(want[i]))) {
			require.Failf(t, "mismatch", "element %d: want %v, got %v", i, want[i], got[i])
		}
	}
}

// generatedGuards counts the run-time bounds checks in generated C.
func generatedGuards(src string) int {
	return strings.Count(src, "LOOM_CHECK(") - 1 /* the macro definition */
}

func TestFill(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	for _, tc := range []struct {
		spec map[string]string
		size int
	}{
		{map[string]string{}, 4},
		{map[string]string{"T": "f64", "BLOCK": "64"}, 8},
		{map[string]string{"T": "i32", "BLOCK": "32"}, 4},
		{map[string]string{"T": "f16"}, 2},
	} {
		a := compileKernel(t, c, "fill.loom", "fill", tc.spec)
		require.Equal(t, 0, generatedGuards(a.Source), "fill's store is proven in range by its assume")
		n := 1 + r.IntN(5000)
		out := make([]byte, n*tc.size)
		for i := range out {
			out[i] = byte(r.Uint32())
		}
		var value any
		var check func(b []byte) bool
		switch tc.spec["T"] {
		case "f64":
			v := r.NormFloat64()
			value, check = v, func(b []byte) bool { return math.Float64frombits(binary.LittleEndian.Uint64(b)) == v }
		case "i32":
			v := int32(r.Uint32())
			value, check = v, func(b []byte) bool { return int32(binary.LittleEndian.Uint32(b)) == v }
		case "f16":
			value, check = 1.5, func(b []byte) bool { return binary.LittleEndian.Uint16(b) == 0x3e00 }
		default:
			v := float32(r.NormFloat64())
			value, check = v, func(b []byte) bool { return math.Float32frombits(binary.LittleEndian.Uint32(b)) == v }
		}
		res := launch(t, a, [][]byte{out}, 2, value, int64(n))
		require.Zero(t, res.Violation)
		for i := 0; i < n; i++ {
			require.True(t, check(res.Buffers[0][i*tc.size:]), "element %d", i)
		}
	}
}

func TestCopy(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	a := compileKernel(t, c, "copy.loom", "copy", nil)
	require.Equal(t, 0, generatedGuards(a.Source))
	n := 1 + r.IntN(10000)
	src := randF32(r, n)
	dst := randF32(r, n)
	res := launch(t, a, [][]byte{hostrun.F32(dst), hostrun.F32(src)}, 2, int64(n))
	require.Zero(t, res.Violation)
	require.Equal(t, src, hostrun.ToF32(res.Buffers[0]))
}

// broadcastStrides returns contiguous strides of shape with broadcast dimensions (size 1 in the
// operand's own shape) set to 0.
func broadcastStrides(shape [4]int, bcast [4]bool) (own [4]int, strides [4]int64) {
	st := int64(1)
	for d := 3; d >= 0; d-- {
		own[d] = shape[d]
		if bcast[d] {
			own[d] = 1
		}
		if own[d] == 1 {
			strides[d] = 0
		} else {
			strides[d] = st
		}
		st *= int64(own[d])
	}
	return
}

func TestElementwiseBroadcast(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	for _, op := range []string{"add", "mul"} {
		a := compileKernel(t, c, "elementwise.loom", op, map[string]string{"BLOCK": "32"})
		require.Equal(t, 0, generatedGuards(a.Source), "all view accesses are proven")
		for trial := 0; trial < 4; trial++ {
			var shape [4]int
			for d := range shape {
				shape[d] = 1 + r.IntN(6)
			}
			shape[3] = 1 + r.IntN(70)
			var bx, by [4]bool
			for d := range bx {
				bx[d] = r.IntN(3) == 0
				by[d] = r.IntN(3) == 0
			}
			xs, xst := broadcastStrides(shape, bx)
			ys, yst := broadcastStrides(shape, by)
			nx := xs[0] * xs[1] * xs[2] * xs[3]
			ny := ys[0] * ys[1] * ys[2] * ys[3]
			nz := shape[0] * shape[1] * shape[2] * shape[3]
			x, y := randF32(r, nx), randF32(r, ny)
			z := randF32(r, nz)
			want := make([]float32, nz)
			i := 0
			for i0 := 0; i0 < shape[0]; i0++ {
				for i1 := 0; i1 < shape[1]; i1++ {
					for i2 := 0; i2 < shape[2]; i2++ {
						for i3 := 0; i3 < shape[3]; i3++ {
							idx := [4]int{i0, i1, i2, i3}
							var ox, oy int64
							for d := 0; d < 4; d++ {
								ox += int64(idx[d]) * xst[d]
								oy += int64(idx[d]) * yst[d]
							}
							if op == "add" {
								want[i] = x[ox] + y[oy]
							} else {
								want[i] = x[ox] * y[oy]
							}
							i++
						}
					}
				}
			}
			args := []any{int64(shape[0]), int64(shape[1]), int64(shape[2]), int64(shape[3])}
			for d := 0; d < 4; d++ {
				args = append(args, xst[d])
			}
			for d := 0; d < 4; d++ {
				args = append(args, yst[d])
			}
			res := launch(t, a, [][]byte{hostrun.F32(x), hostrun.F32(y), hostrun.F32(z)}, 2, args...)
			require.Zero(t, res.Violation)
			require.Equal(t, want, hostrun.ToF32(res.Buffers[2]), "%s shape %v x strides %v y strides %v", op, shape, xst, yst)
		}
	}
}

func TestReduce(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	sum := compileKernel(t, c, "reduce.loom", "reduce_sum", map[string]string{"ACC": "f64"})
	max := compileKernel(t, c, "reduce.loom", "reduce_max", nil)
	for trial := 0; trial < 4; trial++ {
		outer, axis, inner := 1+r.IntN(5), r.IntN(40), 1+r.IntN(100)
		x := randF32(r, outer*axis*inner)
		wantSum := make([]float32, outer*inner)
		wantMax := make([]float32, outer*inner)
		for o := 0; o < outer; o++ {
			for j := 0; j < inner; j++ {
				s, m := 0.0, float32(math.Inf(-1))
				for k := 0; k < axis; k++ {
					v := x[(o*axis+k)*inner+j]
					s += float64(v)
					if v > m {
						m = v
					}
				}
				wantSum[o*inner+j] = float32(s)
				wantMax[o*inner+j] = m
			}
		}
		y := randF32(r, outer*inner)
		res := launch(t, sum, [][]byte{hostrun.F32(x), hostrun.F32(y)}, 2, int64(outer), int64(axis), int64(inner))
		require.Zero(t, res.Violation)
		require.Equal(t, wantSum, hostrun.ToF32(res.Buffers[1]))
		res = launch(t, max, [][]byte{hostrun.F32(x), hostrun.F32(y)}, 1, int64(outer), int64(axis), int64(inner))
		require.Zero(t, res.Violation)
		require.Equal(t, wantMax, hostrun.ToF32(res.Buffers[1]))
	}
}

func TestSoftmax(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	a := compileKernel(t, c, "softmax.loom", "softmax", map[string]string{"BLOCK": "16"})
	require.Equal(t, 0, generatedGuards(a.Source))
	rows, cols := 1+r.IntN(100), 1+r.IntN(300)
	x := randF32(r, rows*cols)
	for i := range x {
		x[i] *= 4
	}
	want := make([]float32, rows*cols)
	for i := 0; i < rows; i++ {
		m := math.Inf(-1)
		for j := 0; j < cols; j++ {
			m = math.Max(m, float64(x[i*cols+j]))
		}
		s := 0.0
		for j := 0; j < cols; j++ {
			s += math.Exp(float64(x[i*cols+j]) - m)
		}
		for j := 0; j < cols; j++ {
			want[i*cols+j] = float32(math.Exp(float64(x[i*cols+j])-m) / s)
		}
	}
	res := launch(t, a, [][]byte{hostrun.F32(x), hostrun.F32(make([]float32, rows*cols))}, 2, int64(rows), int64(cols))
	require.Zero(t, res.Violation)
	requireClose(t, want, hostrun.ToF32(res.Buffers[1]), 1e-5)
}

func refGEMM(a, b []float32, m, n, k int) []float32 {
	c := make([]float32, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			s := 0.0
			for p := 0; p < k; p++ {
				s += float64(a[i*k+p]) * float64(b[p*n+j])
			}
			c[i*n+j] = float32(s)
		}
	}
	return c
}

func TestGEMM(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	for _, tc := range []struct {
		spec    map[string]string
		m, n, k int
	}{
		// Full tiles (fast path) with k not a multiple of KC, then ragged edges.
		{map[string]string{"MB": "16", "MT": "2", "NB": "64", "KC": "32", "MR": "4", "VL": "8"}, 64, 128, 70},
		{map[string]string{"MB": "16", "MT": "2", "NB": "64", "KC": "32", "MR": "4", "VL": "8"}, 1 + r.IntN(60), 1 + r.IntN(200), 1 + r.IntN(100)},
		{map[string]string{"MB": "24", "MT": "3", "NB": "96", "KC": "64", "MR": "6", "VL": "16", "NV": "3"}, 1 + r.IntN(100), 1 + r.IntN(300), 1 + r.IntN(200)},
		{map[string]string{"MB": "8", "MT": "1", "NB": "32", "KC": "16", "MR": "8", "VL": "8"}, 17, 33, 0},
		{nil, 128, 256, 300},
		{nil, 1 + r.IntN(150), 1 + r.IntN(300), 1 + r.IntN(300)},
	} {
		a := compileKernel(t, c, "gemm.loom", "sgemm", tc.spec)
		require.Equal(t, 0, generatedGuards(a.Source), "every GEMM access is proven in range")
		A, B := randF32(r, tc.m*tc.k), randF32(r, tc.k*tc.n)
		C := randF32(r, tc.m*tc.n)
		res := launch(t, a, [][]byte{hostrun.F32(A), hostrun.F32(B), hostrun.F32(C)}, 2, int64(tc.m), int64(tc.n), int64(tc.k))
		require.Zero(t, res.Violation)
		requireClose(t, refGEMM(A, B, tc.m, tc.n, tc.k), hostrun.ToF32(res.Buffers[2]), 1e-4*math.Sqrt(float64(tc.k)))
	}
}

// TestMain runs the tests. Under Bazel the compilers ZIG_CC_ENV names (tools/defs.bzl: the
// pinned zig cc as $CC, zig c++ as $CXX) are paths relative to the workspace's runfiles, and the
// test runs in its package's directory: they are made absolute first.
func TestMain(m *testing.M) {
	if runfiles := os.Getenv("TEST_SRCDIR"); runfiles != "" {
		workspace := filepath.Join(runfiles, os.Getenv("TEST_WORKSPACE"))
		for _, v := range []string{"CC", "CXX"} {
			if p := os.Getenv(v); strings.Contains(p, "/") && !filepath.IsAbs(p) {
				os.Setenv(v, filepath.Join(workspace, p))
			}
		}
	}
	os.Exit(m.Run())
}

// cxx returns the C++ compiler the tests' own C++ checks run: $CXX, else g++.
func cxx() string {
	if c := os.Getenv("CXX"); c != "" {
		return c
	}
	return "g++"
}
