package loom_test

import (
	"context"
	"debug/elf"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/loom/internal/hostrun"
)

// mathSrc applies math function FN to every element, in a loop that a C compiler vectorizes
// through libmvec where the JIT path links it. (One function a kernel: GCC turns sin and cos of
// one value into sincos, which has no vector variant, and many outputs exceed its alias checks.)
const mathSrc = `
kernel mathfn[FN index = 0] {
	launch(n index) {
		grid = (ceil_div(n, 64), 1, 1)
		block = (64, 1, 1)
	}
	device(x buffer[f32] read, y buffer[f32] write, n index) {
		assume len(x) >= n && len(y) >= n
		i := block_id.x * 64 + thread_id.x
		if i < n {
			v := x[i]
			if FN == 0 {
				y[i] = exp(v)
			} else if FN == 1 {
				y[i] = log(v)
			} else if FN == 2 {
				y[i] = sin(v)
			} else if FN == 3 {
				y[i] = cos(v)
			} else {
				y[i] = tanh(v)
			}
		}
	}
}
`

// ulps is the distance in float32 steps between a and b (0 for two NaNs).
func ulps(a, b float32) float64 {
	if math.IsNaN(float64(a)) && math.IsNaN(float64(b)) {
		return 0
	}
	if math.IsNaN(float64(a)) || math.IsNaN(float64(b)) || math.IsInf(float64(a), 0) || math.IsInf(float64(b), 0) {
		if a == b {
			return 0
		}
		return math.Inf(1)
	}
	ia, ib := int64(int32(math.Float32bits(a))), int64(int32(math.Float32bits(b)))
	if ia < 0 {
		ia = math.MinInt32 - ia
	}
	if ib < 0 {
		ib = math.MinInt32 - ib
	}
	return math.Abs(float64(ia - ib))
}

// importedSymbols returns the names of the functions the shared object at path imports.
func importedSymbols(t *testing.T, path string) []string {
	f, err := elf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	syms, err := f.ImportedSymbols()
	require.NoError(t, err)
	names := make([]string, len(syms))
	for i, s := range syms {
		names[i] = s.Name
	}
	return names
}

// Host kernels' exp and tanh (the emitter's branch-free loom_expf, within 2 ulps, and
// loom_tanhf), log, sin and cos (vectorized through glibc's libmvec on x86-64 Linux) stay within
// 4 ulps of the correctly rounded result and keep the special values; exp and tanh are checked
// on dense sweeps too.
func TestHostMathFunctions(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	// Whether the kernels call libmvec is the compiler's probe's answer (HostFlags defines
	// LOOM_LIBMVEC when a probe linked it): zig cc, for one, has no libmvec to link. GCC on a
	// machine with libmvec must find it, or the probe is broken.
	flags, err := c.HostFlags(context.Background(), loom.HostTarget())
	require.NoError(t, err)
	mvec := slices.ContainsFunc(flags, func(f string) bool { return strings.HasPrefix(f, "-DLOOM_LIBMVEC=") })
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" && slices.Contains(flags, loom.GCCOnlyFlags()[0]) {
		if _, err := os.Stat("/lib/x86_64-linux-gnu/libmvec.so.1"); err == nil {
			require.True(t, mvec, "GCC and libmvec are installed, but the probe found no libmvec (flags %q)", flags)
		}
	}
	t.Logf("compiler flags %q: vector math %v", flags, mvec)
	special := []float32{0, float32(math.Copysign(0, -1)), 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), 88.7, -103.9, 1e-30, 1e30, -1e30, 3.14159265, 1e-7}
	n := 4000
	x := make([]float32, n)
	for i := range x {
		switch {
		case i < len(special):
			x[i] = special[i]
		case i%3 == 0:
			x[i] = float32(r.NormFloat64() * 30)
		default:
			x[i] = float32(r.NormFloat64() * 3)
		}
	}
	refs := []struct {
		name string
		f    func(float64) float64
	}{{"exp", math.Exp}, {"log", math.Log}, {"sin", math.Sin}, {"cos", math.Cos}, {"tanh", math.Tanh}}
	for fn, ref := range refs {
		a := compileInline(t, c, mathSrc, "mathfn", map[string]string{"FN": strconv.Itoa(fn)})
		imports := importedSymbols(t, a.SharedObject)
		if ref.name == "exp" || ref.name == "tanh" {
			// exp and tanh are the emitter's own branch-free code (loom_expf, loom_tanhf),
			// vectorized with or without libmvec: no call of libm's.
			require.NotContains(t, imports, ref.name+"f", "%s calls libm", ref.name)
		} else if mvec {
			require.True(t, slices.ContainsFunc(imports, func(s string) bool { return strings.HasPrefix(s, "_ZGV") }),
				"%s: the probe linked libmvec, but the kernel calls no vector math (imports %q)", ref.name, imports)
		}
		res := launch(t, a, [][]byte{hostrun.F32(x), make([]byte, 4*n)}, 2, int64(n))
		require.Zero(t, res.Violation)
		got := hostrun.ToF32(res.Buffers[1])
		tol := 4.0
		if ref.name == "exp" {
			tol = 2
		}
		for i, v := range x {
			want := float32(ref.f(float64(v)))
			require.LessOrEqual(t, ulps(got[i], want), tol, "%s(%v) = %v, want %v", ref.name, v, got[i], want)
		}
	}
}

// loom_expf over a sweep of its whole range, fresh random points each run, from where it
// underflows to zero (through the subnormal results) to where it overflows, within 2 ulps; and
// loom_tanhf from -12 to 12 (and near 0, where the polynomial and the exp form meet at 0.625),
// within 4.
func TestHostExpTanhSweep(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	n := 200000
	for _, fn := range []struct {
		name   string
		code   string
		f      func(float64) float64
		lo, hi float64
		tol    float64
	}{{"exp", "0", math.Exp, -110, 95, 2}, {"tanh", "4", math.Tanh, -12, 12, 4}, {"tanh", "4", math.Tanh, -1, 1, 4}} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(fn.lo + (fn.hi-fn.lo)*r.Float64())
		}
		a := compileInline(t, c, mathSrc, "mathfn", map[string]string{"FN": fn.code})
		res := launch(t, a, [][]byte{hostrun.F32(x), make([]byte, 4*n)}, 2, int64(n))
		require.Zero(t, res.Violation)
		got := hostrun.ToF32(res.Buffers[1])
		worst := 0.0
		for i, v := range x {
			want := float32(fn.f(float64(v)))
			u := ulps(got[i], want)
			require.LessOrEqual(t, u, fn.tol, "%s(%v) = %v, want %v", fn.name, v, got[i], want)
			worst = max(worst, u)
		}
		t.Logf("%s over [%v, %v]: largest error %v ulps over %d points", fn.name, fn.lo, fn.hi, worst, n)
	}
}
