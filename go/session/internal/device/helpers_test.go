package device

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/sessiontest"
	"github.com/loomrt/loom/go/session/internal/testkernels"
)

func TestMain(m *testing.M) { sessiontest.Main(m) }

// newContext makes a context on dev, closed when the test ends (before dev).
func newContext(t testing.TB, dev *native.Device, budget uint64) *ModelContext {
	t.Helper()
	ctx, err := NewContext(dev, budget)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, ctx.Close()) })
	return ctx
}

// testSession makes a session in ctx, closed when the test ends (before ctx).
func testSession(t testing.TB, ctx *ModelContext) *ModelSession {
	t.Helper()
	s, err := InContext(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// hostSession is a session in a fresh context on a fresh host device.
func hostSession(t testing.TB) *ModelSession {
	t.Helper()
	return testSession(t, newContext(t, sessiontest.OpenHost(t, 2), Unlimited))
}

// testKernel loads one of the test kernels on dev, in a module of its own, which a session
// takes over by importing the kernel (ImportKernel).
func testKernel(t testing.TB, dev *native.Device, name string) *native.Kernel {
	t.Helper()
	m, err := testkernels.Load(dev)
	require.NoError(t, err)
	k, err := m.Kernel(name)
	if err != nil {
		m.Close()
	}
	require.NoError(t, err)
	return k
}

func oneBlock([]uint64) (LaunchConfig, error) {
	return LaunchConfig{Grid: native.Dim3{X: 1}, Block: native.Dim3{X: 1}}, nil
}

// mixSignature describes the mix test kernel with one buffer per access mode.
func mixSignature(modes []Access) KernelSignature {
	sig := KernelSignature{
		Name:    fmt.Sprintf("mix%v", modes),
		Scalars: []ScalarParam{{Name: "seed", Bytes: 4}, {Name: "delay_us", Bytes: 4}},
		Launch:  oneBlock,
	}
	for i, m := range modes {
		sig.Buffers = append(sig.Buffers, BufferParam{Name: fmt.Sprintf("b%d", i), Access: m})
		sig.Scalars = append(sig.Scalars, ScalarParam{Name: fmt.Sprintf("mode%d", i), Bytes: 4}, ScalarParam{Name: fmt.Sprintf("bytes%d", i), Bytes: 4})
	}
	return sig
}

// mixArgs are the scalar arguments of a mix dispatch over bindings.
func mixArgs(seed, delayMicros uint32, bindings []Binding) []uint64 {
	args := []uint64{uint64(seed), uint64(delayMicros)}
	for _, b := range bindings {
		args = append(args, uint64(b.Access), b.Region.Bytes())
	}
	return args
}

// axpySignature describes axpy_f32(x read, y read_write; alpha, n), 64 threads a block.
func axpySignature() KernelSignature {
	return KernelSignature{
		Name:    "axpy_f32",
		Buffers: []BufferParam{{"x", AccessRead}, {"y", AccessReadWrite}},
		Scalars: []ScalarParam{{Name: "alpha", Bytes: 4}, {Name: "n", Bytes: 4}},
		Launch: func(w []uint64) (LaunchConfig, error) {
			if len(w) != 1 {
				return LaunchConfig{}, fmt.Errorf("axpy_f32 takes one launch argument (n), got %d", len(w))
			}
			return LaunchConfig{Grid: native.Dim3{X: uint32((w[0] + 63) / 64)}, Block: native.Dim3{X: 64}}, nil
		},
	}
}

func f32Bits(v float32) uint64 { return uint64(math.Float32bits(v)) }

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func float32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.NativeEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func bytesFloat32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.NativeEndian.Uint32(b[4*i:]))
	}
	return v
}
