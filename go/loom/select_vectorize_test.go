package loom_test

import (
	"context"
	"math"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/loom/internal/hostrun"
)

// clampExpSrc is attention softmax's exp pass: the exps of a row's scores less their maximum,
// clamped so that masked scores take no slow path and come out 0.
const clampExpSrc = `
kernel clampexp {
	launch(n index) {
		grid = (1, 1, 1)
		block = (1, 1, 1)
	}
	device(x buffer[f32] read_write, n index) {
		assume len(x) >= n
		for j := range(n) {
			d := x[j]
			x[j] = select(d < -87.0, 0.0, exp(select(d < -87.0, -87.0, d)))
		}
	}
}
`

// packedFMA matches a packed single-precision fused multiply-add on 256- or 512-bit registers
// in objdump's AT&T syntax.
var packedFMA = regexp.MustCompile(`vfn?m(add|sub)[0-9]+ps\s.*%[yz]mm`)

// A loop of a select between float math and a constant vectorizes on the host: the C compiler
// may compute the math for every element (host kernels are built without trapping math, so
// it need not keep a skipped branch's float exceptions), where it ran one element at a time
// with a branch each (attention softmax's exps: 11 ms of a BERT-base run on one Zen 3 core).
// The results are exp's, 0 for the clamped scores, NaN for NaN.
func TestSelectOfFloatMathVectorizes(t *testing.T) {
	c := newCompiler(t)
	flags, err := c.HostFlags(context.Background(), loom.HostTarget())
	require.NoError(t, err)
	require.Contains(t, flags, "-fno-trapping-math")
	a := compileInline(t, c, clampExpSrc, "clampexp", nil)

	r := newRand(t)
	n := 1000 + r.IntN(1000)
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(-math.Abs(r.NormFloat64()) * 40)
	}
	x[0], x[1], x[2], x[3] = float32(math.Inf(-1)), -1e30, float32(math.NaN()), -87
	res := launch(t, a, [][]byte{hostrun.F32(x)}, 1, int64(n))
	require.Zero(t, res.Violation)
	got := hostrun.ToF32(res.Buffers[0])
	for i, d := range x {
		switch {
		case math.IsNaN(float64(d)):
			require.True(t, math.IsNaN(float64(got[i])), "exp(NaN) = %v", got[i])
		case d < -87:
			require.Zero(t, got[i], "x = %v", d)
		default:
			want := float32(math.Exp(float64(d)))
			require.LessOrEqual(t, ulps(got[i], want), 2.0, "exp(%v) = %v, want %v", d, got[i], want)
		}
	}

	if runtime.GOARCH != "amd64" || !slices.Contains(flags, loom.GCCOnlyFlags()[0]) {
		t.Skipf("the code check reads GCC's x86-64 output (flags %q)", flags)
	}
	objdump, err := exec.LookPath("objdump")
	if err != nil {
		t.Skip("no objdump (binutils) to read the kernel's code")
	}
	out, err := exec.Command(objdump, "-d", "--no-show-raw-insn", a.SharedObject).Output()
	require.NoError(t, err)
	require.Regexp(t, packedFMA, string(out), "the exp polynomial runs one element at a time: no packed FMA in the kernel")
}
