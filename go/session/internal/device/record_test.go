package device

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/sessiontest"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// axpySession is a session with axpy_f32 imported and two float32 vectors of n elements.
func axpySession(t *testing.T, n int) (s *ModelSession, axpy KernelID, x, y Region) {
	t.Helper()
	s = hostSession(t)
	axpy, err := s.ImportKernel(testKernel(t, s.ctx.dev, "axpy_f32"), axpySignature())
	require.NoError(t, err)
	x, err = s.Allocate(uint64(4 * n))
	require.NoError(t, err)
	y, err = s.AllocateShared(uint64(4 * n))
	require.NoError(t, err)
	return s, axpy, x, y
}

func axpy(k KernelID, alpha float32, n int, x, y Region) Dispatch {
	return Dispatch{Kernel: k, Args: []uint64{f32Bits(alpha), uint64(n)}, Workload: []uint64{uint64(n)}, Bindings: []Binding{x.Read(), y.ReadWrite()}}
}

func TestRecordReplay(t *testing.T) {
	const n = 1000
	s, k, x, y := axpySession(t, n)
	rnd := sessiontest.NewRand(t)
	xs, ys := make([]float32, n), make([]float32, n)
	for i := range xs {
		xs[i], ys[i] = rnd.Float32()*2-1, rnd.Float32()*2-1
	}
	require.NoError(t, s.Upload(x, float32Bytes(xs)))
	require.NoError(t, s.Upload(y, float32Bytes(ys)))
	// y += 2x; y += 0.5x, then zero the tail of x and do it again.
	tail, err := x.Slice(4*500, 4*500)
	require.NoError(t, err)
	require.False(t, s.IsRecorded("step"))
	require.NoError(t, s.Record("step", []Command{
		axpy(k, 2, n, x, y),
		axpy(k, 0.5, n, x, y),
		Fill{Region: tail, Byte: 0},
		axpy(k, 1, n, x, y),
	}))
	require.True(t, s.IsRecorded("step"))
	for range 2 {
		require.NoError(t, s.Replay("step"))
	}
	got := make([]byte, 4*n)
	require.NoError(t, s.Read(y, got))
	for i, v := range bytesFloat32(got) {
		want := ys[i]
		for rep := range 2 {
			xi := xs[i]
			if rep == 1 && i >= 500 {
				xi = 0 // the first replay zeroed the tail of x
			}
			want += 2 * xi
			want += 0.5 * xi
			if i >= 500 {
				xi = 0
			}
			want += xi
		}
		require.InDelta(t, want, v, 1e-5, "element %d", i)
	}
}

func TestRecordCopyAndFill(t *testing.T) {
	s := hostSession(t)
	a, err := s.Allocate(64)
	require.NoError(t, err)
	b, err := s.AllocateShared(64)
	require.NoError(t, err)
	w, err := s.Weight([]byte("0123456789abcdef"))
	require.NoError(t, err)
	lo, _ := a.Slice(0, 32)
	hi, _ := a.Slice(32, 32)
	bl, _ := b.Slice(0, 32)
	wdst, _ := b.Slice(40, 16)
	require.NoError(t, s.Record("r", []Command{
		Fill{Region: lo, Byte: 0xAA},
		Fill{Region: hi, Byte: 0x55},
		Copy{Src: hi, Dst: bl},
		Copy{Src: w, Dst: wdst},
		&Fill{Region: hi, Byte: 0x11},
	}))
	require.NoError(t, s.Replay("r"))
	got := make([]byte, 64)
	require.NoError(t, s.Read(b, got))
	for i := range 32 {
		require.Equal(t, byte(0x55), got[i])
	}
	require.Equal(t, "0123456789abcdef", string(got[40:56]))
	require.NoError(t, s.Read(a, got))
	require.Equal(t, byte(0xAA), got[0])
	require.Equal(t, byte(0x11), got[63])
}

func TestRecordErrors(t *testing.T) {
	s, k, x, y := axpySession(t, 16)
	other, ko, xo, _ := axpySession(t, 16)
	_ = other
	w, err := s.Weight(make([]byte, 64))
	require.NoError(t, err)
	x8, _ := x.Slice(0, 8)
	x4, _ := x.Slice(4, 8)
	empty, _ := x.Slice(0, 0)
	cases := []struct {
		name    string
		command Command
		kind    error
		message string
	}{
		{"nil command", nil, tensor.ErrInvalidArgument, "nil command"},
		{"nil *Dispatch", (*Dispatch)(nil), tensor.ErrInvalidArgument, "nil *Dispatch"},
		{"nil *Fill", (*Fill)(nil), tensor.ErrInvalidArgument, "nil *Fill"},
		{"nil *Copy", (*Copy)(nil), tensor.ErrInvalidArgument, "nil *Copy"},
		{"zero kernel", Dispatch{Bindings: []Binding{x.Read(), y.ReadWrite()}}, tensor.ErrInvalidArgument, "zero KernelID"},
		{"foreign kernel", axpy(ko, 1, 16, x, y), tensor.ErrInvalidArgument, "belongs to another session"},
		{"foreign region", axpy(k, 1, 16, xo, y), tensor.ErrInvalidArgument, "belongs to another session"},
		{"zero region", axpy(k, 1, 16, Region{}, y), tensor.ErrInvalidArgument, "zero Region"},
		{"too few bindings", Dispatch{Kernel: k, Args: []uint64{0, 16}, Workload: []uint64{16}, Bindings: []Binding{x.Read()}}, tensor.ErrInvalidArgument, "2 buffer parameters, the dispatch binds 1"},
		{"too few args", Dispatch{Kernel: k, Args: []uint64{0}, Workload: []uint64{16}, Bindings: []Binding{x.Read(), y.ReadWrite()}}, tensor.ErrInvalidArgument, "2 scalar arguments, got 1"},
		{"arg too wide", Dispatch{Kernel: k, Args: []uint64{0, 1 << 40}, Workload: []uint64{16}, Bindings: []Binding{x.Read(), y.ReadWrite()}}, tensor.ErrInvalidArgument, "does not fit in 4 bytes"},
		{"bad workload", Dispatch{Kernel: k, Args: []uint64{0, 16}, Bindings: []Binding{x.Read(), y.ReadWrite()}}, tensor.ErrInvalidArgument, "rejected workload"},
		{"access does not cover", Dispatch{Kernel: k, Args: []uint64{0, 16}, Workload: []uint64{16}, Bindings: []Binding{x.Read(), y.Read()}}, tensor.ErrInvalidArgument, "declared read_write by the kernel but bound for read"},
		{"invalid access", Dispatch{Kernel: k, Args: []uint64{0, 16}, Workload: []uint64{16}, Bindings: []Binding{{Region: x}, y.ReadWrite()}}, tensor.ErrInvalidArgument, "no valid access"},
		{"empty binding", axpy(k, 1, 16, empty, y), tensor.ErrInvalidArgument, "empty region"},
		{"kernel writes a weight", axpy(k, 1, 16, x, w), tensor.ErrImmutable, "is a weight"},
		{"fill of a weight", Fill{Region: w}, tensor.ErrImmutable, "is a weight"},
		{"copy into a weight", Copy{Src: x, Dst: w}, tensor.ErrImmutable, "is a weight"},
		{"copy length mismatch", Copy{Src: x8, Dst: y}, tensor.ErrInvalidArgument, "differ in length"},
		{"overlapping copy", Copy{Src: x8, Dst: x4}, tensor.ErrInvalidArgument, "overlap"},
		{"foreign copy source", Copy{Src: xo, Dst: x}, tensor.ErrInvalidArgument, "belongs to another session"},
		{"foreign fill", Fill{Region: xo}, tensor.ErrInvalidArgument, "belongs to another session"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Record(tc.name, []Command{Fill{Region: x, Byte: 1}, tc.command})
			require.ErrorIs(t, err, tc.kind)
			require.ErrorContains(t, err, "command 1: ")
			require.ErrorContains(t, err, tc.message)
			require.False(t, s.IsRecorded(tc.name))
		})
	}
	type custom struct{ Command }
	err = s.Record("custom", []Command{custom{}})
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	require.ErrorContains(t, err, "unknown command type")

	require.NoError(t, s.Record("ok", []Command{Fill{Region: x}}))
	err = s.Record("ok", []Command{Fill{Region: x}})
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	require.ErrorContains(t, err, "already recorded")
	err = s.Record("empty", nil)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
}

func TestReplayErrors(t *testing.T) {
	s := hostSession(t)
	err := s.Replay("missing")
	require.ErrorIs(t, err, tensor.ErrNotRecorded)
	require.ErrorContains(t, err, `"missing"`)
	require.NoError(t, s.Close())
	err = s.Replay("missing")
	require.ErrorIs(t, err, tensor.ErrClosed)
}

func TestImportKernel(t *testing.T) {
	s := hostSession(t)
	mix := testKernel(t, s.ctx.dev, "mix")
	a, err := s.ImportKernel(mix, mixSignature([]Access{AccessRead}))
	require.NoError(t, err)
	b, err := s.ImportKernel(mix, mixSignature([]Access{AccessWrite, AccessRead}))
	require.NoError(t, err)
	require.NotEqual(t, a, b, "one kernel may be imported with several signatures")
	require.Len(t, s.modules, 1, "the module is owned once")
	require.Equal(t, "kernel 1", b.String())
	require.Equal(t, "the zero KernelID", KernelID{}.String())
}

func TestImportKernelErrors(t *testing.T) {
	s := hostSession(t)
	mix := testKernel(t, s.ctx.dev, "mix")
	_, err := s.ImportKernel(nil, mixSignature(nil))
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)

	bad := []struct {
		name    string
		sig     KernelSignature
		message string
	}{
		{"no launch", KernelSignature{Name: "k"}, "no launch rule"},
		{"bad access", KernelSignature{Name: "k", Launch: oneBlock, Buffers: []BufferParam{{Name: "b"}}}, "no valid access mode"},
		{"bad scalar", KernelSignature{Name: "k", Launch: oneBlock, Scalars: []ScalarParam{{Name: "s", Bytes: 3}}}, "is 3 bytes"},
		{"misaligned scalar", KernelSignature{Name: "k", Launch: oneBlock, BlobBytes: 8, Scalars: []ScalarParam{{Name: "s", Bytes: 4, Offset: 2}}}, "does not fit, aligned"},
		{"scalar past the blob", KernelSignature{Name: "k", Launch: oneBlock, BlobBytes: 8, Scalars: []ScalarParam{{Name: "s", Bytes: 8, Offset: 8}}}, "does not fit, aligned"},
		{"sizes without a blob", KernelSignature{Name: "k", Launch: oneBlock, Buffers: []BufferParam{{Name: "b", Access: AccessRead}}, BindingSizeOffsets: []int{0}}, "gives no blob size"},
		{"size offsets per binding", KernelSignature{Name: "k", Launch: oneBlock, BlobBytes: 16, BindingSizeOffsets: []int{0}}, "0 buffer parameters but 1 binding size offsets"},
		{"size past the blob", KernelSignature{Name: "k", Launch: oneBlock, BlobBytes: 16, Buffers: []BufferParam{{Name: "b", Access: AccessRead}}, BindingSizeOffsets: []int{16}}, "binding size 0"},
		{"workload scalar", KernelSignature{Name: "k", Launch: oneBlock, WorkloadScalars: []int{0}}, "names scalar 0 of 0"},
	}
	for _, tc := range bad {
		_, err := s.ImportKernel(mix, tc.sig)
		require.ErrorIs(t, err, tensor.ErrInvalidArgument, tc.name)
		require.ErrorContains(t, err, tc.message, tc.name)
	}
	// The module was never taken over; close it here.
	require.NoError(t, mix.Module().Close())

	// A kernel loaded on another device.
	elsewhere := sessiontest.OpenHost(t, 1)
	foreign := testKernel(t, elsewhere, "mix")
	_, err = s.ImportKernel(foreign, mixSignature(nil))
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	require.ErrorContains(t, err, "not on the session's")
	require.NoError(t, foreign.Module().Close())
}

func TestLaunchConfig(t *testing.T) {
	s, k, _, _ := axpySession(t, 4)
	cfg, err := s.LaunchConfig(k, []uint64{1000})
	require.NoError(t, err)
	require.Equal(t, LaunchConfig{Grid: native.Dim3{X: 16, Y: 1, Z: 1}, Block: native.Dim3{X: 64, Y: 1, Z: 1}}, cfg)

	_, err = s.LaunchConfig(k, nil)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	require.ErrorContains(t, err, "takes one launch argument")
	_, err = s.LaunchConfig(KernelID{}, nil)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	_, err = s.LaunchConfig(KernelID{owner: newOwner()}, nil)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
}

func TestPackScalars(t *testing.T) {
	sig, err := NormalizeSignature(KernelSignature{Name: "k", Launch: oneBlock, Scalars: []ScalarParam{
		{Name: "a", Bytes: 1}, {Name: "b", Bytes: 4}, {Name: "c", Bytes: 2}, {Name: "d", Bytes: 8}, {Name: "e", Bytes: 4},
	}}, "test")
	require.NoError(t, err)
	// Natural alignment: a@0, b@4, c@8, d@16, e@24.
	offsets := []int{0, 4, 8, 16, 24}
	for i, p := range sig.Scalars {
		require.Equal(t, offsets[i], p.Offset, p.Name)
	}
	require.Equal(t, 28, sig.BlobBytes)
	blob, err := sig.packScalars("test", []uint64{0x12, 0xdeadbeef, 0xffff, 1 << 40, 0xffffffffffffffff}, nil)
	require.NoError(t, err)
	require.Len(t, blob, 28)
	require.Equal(t, byte(0x12), blob[0])
	require.Equal(t, uint32(0xdeadbeef), binary.NativeEndian.Uint32(blob[4:]))
	require.Equal(t, uint64(1<<40), binary.NativeEndian.Uint64(blob[16:]))
	// A negative value sign-extended to 64 bits fits its narrower parameter.
	_, err = sig.packScalars("test", []uint64{0xffffffffffffff80, 0, 0, 0, 0}, nil)
	require.NoError(t, err)
	_, err = sig.packScalars("test", []uint64{0x100, 0, 0, 0, 0}, nil)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	_, err = sig.packScalars("test", []uint64{0, 0, 0x1ffff, 0, 0}, nil)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)

	// An explicit layout with binding sizes (Loom's CUDA convention).
	sig, err = NormalizeSignature(KernelSignature{Name: "k", Launch: oneBlock, BlobBytes: 24,
		Buffers:            []BufferParam{{Name: "x", Access: AccessRead}, {Name: "y", Access: AccessWrite}},
		Scalars:            []ScalarParam{{Name: "n", Bytes: 4, Offset: 4}},
		BindingSizeOffsets: []int{8, 16},
	}, "test")
	require.NoError(t, err)
	blob, err = sig.packScalars("test", []uint64{7}, []uint64{100, 200})
	require.NoError(t, err)
	require.Equal(t, uint32(7), binary.NativeEndian.Uint32(blob[4:]))
	require.Equal(t, uint64(100), binary.NativeEndian.Uint64(blob[8:]))
	require.Equal(t, uint64(200), binary.NativeEndian.Uint64(blob[16:]))
}

func TestEmptyDispatch(t *testing.T) {
	s, k, x, y := axpySession(t, 16)
	cfg, err := s.LaunchConfig(k, []uint64{0})
	require.NoError(t, err)
	require.Zero(t, cfg.Grid.X, "a grid of zero blocks")
	require.NoError(t, s.Upload(y, float32Bytes(make([]float32, 16))))
	require.NoError(t, s.Record("empty", []Command{axpy(k, 1, 0, x, y), Fill{Region: x, Byte: 0}}))
	require.NoError(t, s.Replay("empty"))
	timings, err := s.Benchmark("empty", 10)
	require.NoError(t, err)
	require.Equal(t, 10, timings.Samples)
	got := make([]byte, 64)
	require.NoError(t, s.Read(y, got))
	require.Equal(t, make([]byte, 64), got, "the empty dispatch wrote nothing")
}

func TestBenchmark(t *testing.T) {
	s, k, x, y := axpySession(t, 256)
	cmds := make([]Command, 20)
	for i := range cmds {
		cmds[i] = axpy(k, 0.001, 256, x, y)
	}
	require.NoError(t, s.Record("fwd", cmds))
	timings, err := s.Benchmark("fwd", 12)
	require.NoError(t, err)
	require.Equal(t, 12, timings.Samples)
	for _, d := range []Distribution{timings.Graph, timings.Direct} {
		require.Positive(t, d.MedianMs)
		require.GreaterOrEqual(t, d.P95Ms, d.MedianMs)
	}

	_, err = s.Benchmark("fwd", 9)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	require.ErrorContains(t, err, "at least 10")
	_, err = s.Benchmark("nope", 10)
	require.ErrorIs(t, err, tensor.ErrNotRecorded)
}

func TestProfileCommands(t *testing.T) {
	s, k, x, y := axpySession(t, 256)
	require.NoError(t, s.Record("fwd", []Command{axpy(k, 1, 256, x, y), Fill{Region: x}, Copy{Src: y, Dst: x}}))
	profile, err := s.ProfileCommands("fwd", 10)
	require.NoError(t, err)
	require.Len(t, profile, 3)
	for _, d := range profile {
		require.Positive(t, d.MedianMs)
		require.GreaterOrEqual(t, d.P95Ms, d.MedianMs)
	}
	_, err = s.ProfileCommands("fwd", 0)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	_, err = s.ProfileCommands("nope", 10)
	require.ErrorIs(t, err, tensor.ErrNotRecorded)
}

// mixSession is a session with the mix test kernel over one read-write binding, and state, a
// region that every mixStep replaces with a hash of its bytes and the step's seed: after a
// series of steps, state's bytes depend on how many ran, with which seeds, in which order.
// expect applies seeds in order to a reference region the same way, one command at a time,
// and returns the bytes state must then hold.
func mixSession(t *testing.T) (s *ModelSession, step func(seed uint32) Command, state Region, expect func(seeds []uint32) []byte) {
	t.Helper()
	const n = 16
	s = hostSession(t)
	k, err := s.ImportKernel(testKernel(t, s.ctx.dev, "mix"), mixSignature([]Access{AccessReadWrite}))
	require.NoError(t, err)
	state, err = s.Allocate(n)
	require.NoError(t, err)
	ref, err := s.Allocate(n)
	require.NoError(t, err)
	initial := []byte("initial contents")
	require.NoError(t, s.Upload(state, initial))
	mixOn := func(r Region, seed uint32) Command {
		b := []Binding{r.ReadWrite()}
		return Dispatch{Kernel: k, Args: mixArgs(seed, 0, b), Bindings: b}
	}
	step = func(seed uint32) Command { return mixOn(state, seed) }
	expect = func(seeds []uint32) []byte {
		t.Helper()
		require.NoError(t, s.Upload(ref, initial))
		for _, seed := range seeds {
			require.NoError(t, IssueOnce(s, "test", []Command{mixOn(ref, seed)}))
		}
		out := make([]byte, n)
		require.NoError(t, s.Read(ref, out))
		return out
	}
	return s, step, state, expect
}

// Benchmark's documented schedule, observed through what the runs leave in device memory
// rather than through timing: ten warm-up pairs, each a replay of the graph and then the
// commands issued one by one, then samples pairs whose order alternates (graph first in the
// even ones). The recording benchmarked replays one recording's graph but issues another's
// commands, so the two ways leave different marks.
func TestBenchmarkRunsTenAlternatingWarmupPairs(t *testing.T) {
	const graphSeed, directSeed = 1, 2
	s, step, state, expect := mixSession(t)
	require.NoError(t, s.Record("graph", []Command{step(graphSeed)}))
	require.NoError(t, s.Record("direct", []Command{step(directSeed)}))
	s.mu.Lock()
	s.recordings["crossed"] = &recording{commands: s.recordings["direct"].commands, exec: s.recordings["graph"].exec}
	s.mu.Unlock()
	t.Cleanup(func() { // before the session closes: the graph is "graph"'s to close
		s.mu.Lock()
		delete(s.recordings, "crossed")
		s.mu.Unlock()
	})

	const samples = 11
	var want []uint32
	for range 10 { // the documented ten warm-up pairs, graph first
		want = append(want, graphSeed, directSeed)
	}
	for i := range samples {
		if i%2 == 0 {
			want = append(want, graphSeed, directSeed)
		} else {
			want = append(want, directSeed, graphSeed)
		}
	}
	timings, err := s.Benchmark("crossed", samples)
	require.NoError(t, err)
	require.Equal(t, samples, timings.Samples)
	got := make([]byte, state.Bytes())
	require.NoError(t, s.Read(state, got))
	require.Equal(t, expect(want), got, "Benchmark ran the graph and the direct commands in another number or order than 10 warm-up pairs, then %d alternating pairs", samples)
}

// ProfileCommands runs each command once unmeasured, then samples times, before the next
// command: observed, as above, through the marks the runs leave in device memory.
func TestProfileCommandsWarmsUpEachCommandOnce(t *testing.T) {
	s, step, state, expect := mixSession(t)
	seeds := []uint32{3, 4, 5}
	cmds := make([]Command, len(seeds))
	for i, seed := range seeds {
		cmds[i] = step(seed)
	}
	require.NoError(t, s.Record("profile", cmds))
	const samples = 10
	var want []uint32
	for _, seed := range seeds {
		for range 1 + samples { // the documented one warm-up, then the samples
			want = append(want, seed)
		}
	}
	profile, err := s.ProfileCommands("profile", samples)
	require.NoError(t, err)
	require.Len(t, profile, len(seeds))
	got := make([]byte, state.Bytes())
	require.NoError(t, s.Read(state, got))
	require.Equal(t, expect(want), got, "ProfileCommands ran the commands in another number or order than one warm-up and %d samples each, command after command", samples)
}

func TestDistributionNearestRank(t *testing.T) {
	samples := make([]float64, 20)
	for i := range samples {
		samples[i] = float64(20 - i) // 20..1, unsorted
	}
	d := distribution(samples)
	require.Equal(t, 10.0, d.MedianMs) // rank ceil(0.5*20) = 10
	require.Equal(t, 19.0, d.P95Ms)    // rank ceil(0.95*20) = 19
	d = distribution([]float64{3, 1, 2})
	require.Equal(t, 2.0, d.MedianMs)
	require.Equal(t, 3.0, d.P95Ms)
	require.Equal(t, Distribution{}, distribution(nil))
	require.Equal(t, []float64{20, 19}, samples[:2], "the samples are not reordered")
}

func TestErrorFormatting(t *testing.T) {
	cause := errors.New("boom")
	err := tensor.WrapError("Op", tensor.ErrDevice, cause, "it %s", "failed")
	require.Equal(t, "session: Op: device error: it failed: boom", err.Error())
	require.ErrorIs(t, err, tensor.ErrDevice)
	require.ErrorIs(t, err, cause)
	require.Equal(t, "session: Op: closed: 100% done", tensor.NewError("Op", tensor.ErrClosed, "%d%% done", 100).Error())
}
