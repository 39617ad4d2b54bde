package device

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/sessiontest"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

func TestOpen(t *testing.T) {
	s, err := Open(0, WithWorkerThreads(2), WithBudget(1<<20))
	require.NoError(t, err)
	require.NotEmpty(t, s.Target())
	require.Equal(t, s.Context().Device().Target(), s.Target())
	require.Equal(t, uint64(1<<20), s.Context().Budget())
	r, err := s.Allocate(64)
	require.NoError(t, err)
	require.Equal(t, uint64(64), r.Bytes())
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")
	_, err = s.Allocate(8)
	require.ErrorIs(t, err, tensor.ErrClosed)
}

func TestOpenErrors(t *testing.T) {
	_, err := Open(99)
	require.ErrorIs(t, err, tensor.ErrDevice)
	require.ErrorIs(t, err, native.ErrNoDevice)
	require.ErrorContains(t, err, "host device 99")

	_, err = Open(0, WithBudget(0))
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)

	_, err = Open(0, WithWorkerThreads(-1))
	require.ErrorIs(t, err, tensor.ErrDevice)

	// This machine has no CUDA driver; a machine with one but no device 99 fails too.
	_, err = Open(99, OnBackend(native.BackendCUDA))
	require.ErrorIs(t, err, tensor.ErrDevice)
	require.ErrorContains(t, err, "cuda device 99")
}

func TestOpenFor(t *testing.T) {
	probe, err := Open(0)
	require.NoError(t, err)
	target := probe.Target()
	require.NoError(t, probe.Close())

	s, err := OpenFor(0, target)
	require.NoError(t, err)
	require.Equal(t, target, s.Target())
	require.NoError(t, s.Close())

	_, err = OpenFor(0, "sm_90")
	require.ErrorIs(t, err, tensor.ErrTargetMismatch)
	require.ErrorContains(t, err, "not sm_90")

	_, err = OpenFor(0, "")
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
}

// hostCompiler is a Loom compiler without an on-disk cache for dev's target.
func hostCompiler(t testing.TB, dev *native.Device) Compiler {
	t.Helper()
	c := loom.NewCompiler(loom.Config{NoCache: true})
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return Compiler{Loom: c, Target: loom.MustParseTarget(dev.Target())}
}

func TestWithCompiler(t *testing.T) {
	dev := sessiontest.OpenHost(t, 2)
	comp := hostCompiler(t, dev)
	s, err := WithCompiler(dev, comp)
	require.NoError(t, err)
	got, err := s.Context().Compiler()
	require.NoError(t, err)
	require.Same(t, comp.Loom, got.Loom)
	ids, err := s.Compile([]KernelSource{fillSource("f32")})
	require.NoError(t, err)
	require.Len(t, ids, 1)
	require.Equal(t, int64(1), comp.Loom.Stats().Misses, "the supplied compiler did the work")
	require.NoError(t, s.Close())
	// The device and the compiler stay the caller's: both still work.
	require.NotEmpty(t, dev.Target())
	_, err = comp.Loom.Compile(fillSource("f32"), comp.Target)
	require.NoError(t, err)
}

func TestWithCompilerErrors(t *testing.T) {
	dev := sessiontest.OpenHost(t, 2)
	comp := hostCompiler(t, dev)
	_, err := WithCompiler(nil, comp)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	_, err = WithCompiler(dev, Compiler{Target: comp.Target})
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	_, err = WithCompiler(dev, comp, WithBudget(0))
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)

	wrong := Compiler{Loom: comp.Loom, Target: loom.MustParseTarget("sm_90")}
	_, err = WithCompiler(dev, wrong)
	require.ErrorIs(t, err, tensor.ErrTargetMismatch)
	require.ErrorContains(t, err, "the compiler targets sm_90")
	require.Zero(t, comp.Loom.Stats(), "nothing may be compiled or loaded with a mismatched compiler")
}

func TestInContext(t *testing.T) {
	dev := sessiontest.OpenHost(t, 2)
	ctx := newContext(t, dev, 4096)
	s1 := testSession(t, ctx)
	s2 := testSession(t, ctx)
	require.Equal(t, dev.Target(), s1.Target())
	_, err := s1.Allocate(1024)
	require.NoError(t, err)
	_, err = s2.Allocate(2048)
	require.NoError(t, err)
	require.Equal(t, uint64(3072), ctx.Charged(), "sessions share the context's budget")
	_, err = s2.Allocate(2048)
	require.ErrorIs(t, err, tensor.ErrOverBudget)

	_, err = InContext(nil)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
}

func TestModelContextErrors(t *testing.T) {
	dev := sessiontest.OpenHost(t, 2)
	_, err := NewContext(nil, Unlimited)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	_, err = NewContext(dev, 0)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)

	ctx, err := NewContext(dev, Unlimited)
	require.NoError(t, err)
	s, err := InContext(ctx)
	require.NoError(t, err)
	err = ctx.Close()
	require.ErrorIs(t, err, tensor.ErrInUse)
	require.NoError(t, s.Close())
	require.NoError(t, ctx.Close())
	require.NoError(t, ctx.Close(), "Close is idempotent")
	_, err = InContext(ctx)
	require.ErrorIs(t, err, tensor.ErrClosed)
	_, err = ctx.Compiler()
	require.ErrorIs(t, err, tensor.ErrClosed)
}

func TestAllocate(t *testing.T) {
	s := hostSession(t)
	for _, alloc := range []func(uint64) (Region, error){s.Allocate, s.AllocateShared} {
		r, err := alloc(100)
		require.NoError(t, err)
		require.Equal(t, uint64(100), r.Bytes())
		require.Zero(t, r.Offset())
		_, err = alloc(0)
		require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	}
	require.Equal(t, uint64(200), s.Context().Charged())
}

func TestAllocateDeviceFailure(t *testing.T) {
	s := hostSession(t)
	_, err := s.Allocate(1 << 50) // a petabyte: within the unlimited budget, beyond the device
	require.ErrorIs(t, err, tensor.ErrDevice)
	require.ErrorIs(t, err, native.ErrOutOfMemory)
	require.Zero(t, s.Context().Charged(), "the failed allocation's charge was returned")
	_, err = s.Allocate(8)
	require.NoError(t, err, "a refused allocation does not fail the session")
}

func TestAllocateOverBudget(t *testing.T) {
	ctx := newContext(t, sessiontest.OpenHost(t, 2), 1000)
	s := testSession(t, ctx)
	_, err := s.Allocate(600)
	require.NoError(t, err)
	for _, alloc := range []func() error{
		func() error { _, err := s.Allocate(401); return err },
		func() error { _, err := s.AllocateShared(401); return err },
		func() error { _, err := s.Weight(make([]byte, 401)); return err },
		func() error { return s.ReserveReadback(401) },
	} {
		err := alloc()
		require.ErrorIs(t, err, tensor.ErrOverBudget)
		require.ErrorContains(t, err, "budget of 1000 bytes (600 bytes already allocated)")
	}
	require.Equal(t, uint64(600), ctx.Charged(), "a refused allocation charges nothing")
	_, err = s.Allocate(400)
	require.NoError(t, err)
}

func TestWeight(t *testing.T) {
	s := hostSession(t)
	r := sessiontest.NewRand(t)
	data := randomBytes(r, 300)
	w, err := s.Weight(data)
	require.NoError(t, err)
	data[0]++ // the upload was staged: changing the source now changes nothing
	got := make([]byte, 300)
	require.NoError(t, s.Read(w, got))
	data[0]--
	require.Equal(t, data, got)

	_, err = s.Weight(nil)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	err = s.Upload(w, []byte{1})
	require.ErrorIs(t, err, tensor.ErrImmutable)
}

func TestRegionSlice(t *testing.T) {
	s := hostSession(t)
	r, err := s.Allocate(64)
	require.NoError(t, err)
	sub, err := r.Slice(16, 32)
	require.NoError(t, err)
	require.Equal(t, uint64(16), sub.Offset())
	require.Equal(t, uint64(32), sub.Bytes())
	subsub, err := sub.Slice(8, 24)
	require.NoError(t, err)
	require.Equal(t, uint64(24), subsub.Offset())
	require.Equal(t, "bytes [24, 48) of allocation 0", subsub.String())
	empty, err := r.Slice(64, 0)
	require.NoError(t, err)
	require.Zero(t, empty.Bytes())

	_, err = sub.Slice(8, 25)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument, "checked against the parent, not the allocation")
	_, err = r.Slice(65, 0)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	_, err = r.Slice(1, math.MaxUint64)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	_, err = Region{}.Slice(0, 0)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)

	require.Equal(t, Binding{Region: r, Access: AccessRead}, r.Read())
	require.Equal(t, Binding{Region: r, Access: AccessWrite}, r.Write())
	require.Equal(t, Binding{Region: r, Access: AccessReadWrite}, r.ReadWrite())
}

func TestUploadAndRead(t *testing.T) {
	s := hostSession(t)
	rnd := sessiontest.NewRand(t)
	dev, err := s.Allocate(128)
	require.NoError(t, err)
	shared, err := s.AllocateShared(128)
	require.NoError(t, err)
	for _, r := range []Region{dev, shared} {
		data := randomBytes(rnd, 128)
		require.NoError(t, s.Upload(r, data))
		head := randomBytes(rnd, 10)
		require.NoError(t, s.Upload(r, head), "a shorter upload writes the leading bytes")
		copy(data, head)
		got := make([]byte, 128)
		require.NoError(t, s.Read(r, got))
		require.Equal(t, data, got)
		part, err := r.Slice(100, 28)
		require.NoError(t, err)
		got = make([]byte, 20)
		require.NoError(t, s.Read(part, got), "a shorter read gets the leading bytes")
		require.Equal(t, data[100:120], got)
		require.NoError(t, s.Upload(r, nil), "an empty upload does nothing")
	}
}

func TestUploadAndReadErrors(t *testing.T) {
	s := hostSession(t)
	other := hostSession(t)
	r, err := s.Allocate(16)
	require.NoError(t, err)
	foreign, err := other.Allocate(16)
	require.NoError(t, err)

	err = s.Upload(r, make([]byte, 17))
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	require.ErrorContains(t, err, "17 bytes do not fit")
	err = s.Upload(foreign, []byte{1})
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	require.ErrorContains(t, err, "belongs to another session")
	err = s.Upload(Region{}, []byte{1})
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)

	err = s.Read(r, make([]byte, 17))
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	require.ErrorContains(t, err, "longer than")
	err = s.Read(foreign, make([]byte, 1))
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	err = s.ReadMany([]ReadRequest{{Region: r, Dst: make([]byte, 1)}, {Region: Region{}, Dst: nil}})
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	require.ErrorContains(t, err, "request 1")
}

func TestReadMany(t *testing.T) {
	s := hostSession(t)
	rnd := sessiontest.NewRand(t)
	var regions []Region
	var want [][]byte
	for i := range 6 {
		var r Region
		var err error
		if i%2 == 0 {
			r, err = s.Allocate(uint64(50 + i))
		} else {
			r, err = s.AllocateShared(uint64(50 + i))
		}
		require.NoError(t, err)
		data := randomBytes(rnd, 50+i)
		require.NoError(t, s.Upload(r, data))
		regions, want = append(regions, r), append(want, data)
	}
	requests := make([]ReadRequest, len(regions))
	for i, r := range regions {
		requests[i] = ReadRequest{Region: r, Dst: make([]byte, r.Bytes())}
	}
	require.NoError(t, s.ReadMany(requests))
	for i := range requests {
		require.Equal(t, want[i], requests[i].Dst)
	}
	// Three device-local regions went through the readback buffer, one aligned slot each.
	require.Equal(t, uint64(3*readbackAlign), s.readback.Size())

	// All host-visible: no readback buffer is needed or grown.
	before := s.readback
	require.NoError(t, s.ReadMany([]ReadRequest{requests[1], requests[3]}))
	require.Same(t, before, s.readback)
	require.NoError(t, s.ReadMany(nil))
}

func TestReserveReadback(t *testing.T) {
	s := hostSession(t)
	require.NoError(t, s.ReserveReadback(10_000))
	buf := s.readback
	require.Equal(t, uint64(10_000), buf.Size())
	require.NoError(t, s.ReserveReadback(100), "the buffer only grows")
	require.Same(t, buf, s.readback)
	r, err := s.Allocate(5000)
	require.NoError(t, err)
	require.NoError(t, s.Read(r, make([]byte, 5000)))
	require.Same(t, buf, s.readback, "a reserved buffer serves reads that fit")
	require.Equal(t, uint64(15_000), s.Context().Charged(), "the readback buffer is charged to the budget")

	err = s.ReserveReadback(0)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
}

func TestSynchronize(t *testing.T) {
	s := hostSession(t)
	r, err := s.Allocate(8)
	require.NoError(t, err)
	require.NoError(t, s.Upload(r, []byte{1, 2, 3}))
	require.NoError(t, s.Synchronize())
}

// TestFailureLatches injects a device failure and checks every call refuses afterwards.
func TestFailureLatches(t *testing.T) {
	for _, fault := range []native.Fault{native.FaultNextOperation, native.FaultNextSynchronize} {
		t.Run(fmt.Sprint(fault), func(t *testing.T) {
			s := hostSession(t)
			r, err := s.Allocate(64)
			require.NoError(t, err)
			require.NoError(t, s.Record("fill", []Command{Fill{Region: r, Byte: 7}}))
			require.NoError(t, s.stream.InjectFault(fault))
			require.NoError(t, s.Replay("fill"))
			err = s.Synchronize()
			require.ErrorIs(t, err, tensor.ErrFailed)
			require.ErrorIs(t, err, native.ErrDevice, "the stream's failure is the cause")

			calls := map[string]func() error{
				"Allocate":        func() error { _, err := s.Allocate(8); return err },
				"AllocateShared":  func() error { _, err := s.AllocateShared(8); return err },
				"Weight":          func() error { _, err := s.Weight([]byte{1}); return err },
				"Upload":          func() error { return s.Upload(r, []byte{1}) },
				"Read":            func() error { return s.Read(r, make([]byte, 1)) },
				"ReadMany":        func() error { return s.ReadMany(nil) },
				"ReserveReadback": func() error { return s.ReserveReadback(8) },
				"Synchronize":     s.Synchronize,
				"Record":          func() error { return s.Record("x", []Command{Fill{Region: r}}) },
				"Replay":          func() error { return s.Replay("fill") },
				"Benchmark":       func() error { _, err := s.Benchmark("fill", 10); return err },
				"Profile":         func() error { _, err := s.ProfileCommands("fill", 10); return err },
				"Compile":         func() error { _, err := s.Compile([]KernelSource{{Source: []byte("x")}}); return err },
				"ImportKernel":    func() error { _, err := s.ImportKernel(nil, KernelSignature{}); return err },
				"LaunchConfig":    func() error { _, err := s.LaunchConfig(KernelID{}, nil); return err },
				"Freeze":          func() error { _, err := s.Freeze(s.Context()); return err },
			}
			for name, call := range calls {
				err := call()
				require.ErrorIs(t, err, tensor.ErrFailed, name)
				require.ErrorContains(t, err, "accepts no more calls", name)
			}
			require.True(t, s.IsRecorded("fill"))
		})
	}
}

func TestReplayUploadFailureLatches(t *testing.T) {
	// A failure reported while enqueueing (not only at synchronize) latches too.
	s := hostSession(t)
	r, err := s.Allocate(64)
	require.NoError(t, err)
	require.NoError(t, s.stream.InjectFault(native.FaultNextOperation))
	// The host backend reports the failed copy while the upload is enqueued (its staging
	// release is refused); a device that reports it later fails the Read instead.
	err = s.Upload(r, []byte{1})
	if err == nil {
		err = s.Read(r, make([]byte, 1))
	}
	require.ErrorIs(t, err, tensor.ErrFailed)
	require.ErrorIs(t, err, native.ErrDevice)
	_, err = s.Allocate(1)
	require.ErrorIs(t, err, tensor.ErrFailed)
}

func TestCloseReleasesEverything(t *testing.T) {
	dev := sessiontest.OpenHost(t, 2)
	ctx := newContext(t, dev, Unlimited)
	s, err := InContext(ctx)
	require.NoError(t, err)
	r, err := s.Allocate(256)
	require.NoError(t, err)
	_, err = s.Weight(make([]byte, 128))
	require.NoError(t, err)
	k, err := s.ImportKernel(testKernel(t, dev, "mix"), mixSignature([]Access{AccessWrite}))
	require.NoError(t, err)
	require.NoError(t, s.Record("k", []Command{Dispatch{Kernel: k, Args: mixArgs(1, 0, []Binding{r.Write()}), Bindings: []Binding{r.Write()}}}))
	require.NoError(t, s.Read(r, make([]byte, 256)))
	require.NotZero(t, ctx.Charged())
	require.NoError(t, s.Close())
	require.Zero(t, ctx.Charged(), "every allocation was credited back")
	require.False(t, s.IsRecorded("k"))
}
