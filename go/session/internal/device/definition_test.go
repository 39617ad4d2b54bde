package device

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/sessiontest"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// axpyModel is a session holding y = y0 + alpha*w + beta*w, with w a weight and y0 an input:
// the fragment copies the input into y, applies axpy twice, and y is the output.
type axpyModel struct {
	s       *ModelSession
	k       KernelID
	w       Region
	in, y   Region
	weights []float32
	n       int
}

func newAxpyModel(t *testing.T, ctx *ModelContext, n int) *axpyModel {
	t.Helper()
	s, err := InContext(ctx)
	require.NoError(t, err)
	m := &axpyModel{s: s, n: n}
	m.k, err = s.ImportKernel(testKernel(t, ctx.dev, "axpy_f32"), axpySignature())
	require.NoError(t, err)
	rnd := sessiontest.NewRand(t)
	m.weights = make([]float32, n)
	for i := range m.weights {
		m.weights[i] = rnd.Float32()*2 - 1
	}
	m.w, err = s.Weight(float32Bytes(m.weights))
	require.NoError(t, err)
	m.in, err = s.Allocate(uint64(4 * n))
	require.NoError(t, err)
	m.y, err = s.AllocateShared(uint64(4 * n))
	require.NoError(t, err)
	return m
}

func (m *axpyModel) commands() []Command {
	return []Command{
		Copy{Src: m.in, Dst: m.y},
		axpy(m.k, 2, m.n, m.w, m.y),
		axpy(m.k, -0.5, m.n, m.w, m.y),
	}
}

func (m *axpyModel) want(input []float32) []float32 {
	out := make([]float32, m.n)
	for i := range out {
		out[i] = input[i] + 2*m.weights[i]
		out[i] += -0.5 * m.weights[i]
	}
	return out
}

func TestFreezePrepareRunSlotsConcurrently(t *testing.T) {
	const n = 300
	ctx := newContext(t, sessiontest.OpenHost(t, 4), Unlimited)
	m := newAxpyModel(t, ctx, n)
	// The session works before freezing.
	require.NoError(t, m.s.Record("fwd", m.commands()))
	// The recording's two dispatches each have a violation word of the session's (4 bytes).
	const words = 2 * 4
	require.Equal(t, uint64(3*4*n+words), ctx.Charged())

	def, err := m.s.Freeze(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, def.Close()) })
	require.Equal(t, uint64(4*n), ctx.Charged(), "only the weight stays, charged once")
	require.Equal(t, ctx.Target(), def.Target())
	require.Same(t, ctx, def.Context())

	// The session is used up; closing it is still fine.
	_, err = m.s.Allocate(1)
	require.ErrorIs(t, err, tensor.ErrClosed)
	require.ErrorContains(t, err, "frozen")
	require.False(t, m.s.IsRecorded("fwd"), "the raw graphs are gone")
	require.NoError(t, m.s.Close())

	frag, err := def.Fragment(m.commands(), []Region{m.in}, []Region{m.y})
	require.NoError(t, err)
	const slots = 4
	prep, err := frag.Prepare(slots)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, prep.Close()) })
	require.Equal(t, slots, prep.Len())
	require.Equal(t, uint64(4*n+slots*(2*4*n+words)), ctx.Charged(), "each slot has its own scratch and words; the weight is not charged again")

	var wg sync.WaitGroup
	errs := make([]error, slots)
	for i := range slots {
		sl, err := prep.Slot(i)
		require.NoError(t, err)
		rnd := sessiontest.NewRand(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				input := make([]float32, n)
				for j := range input {
					input[j] = rnd.Float32()*10 - 5
				}
				out := make([]byte, 4*n)
				if err := sl.Run([][]byte{float32Bytes(input)}, [][]byte{out}); err != nil {
					errs[i] = err
					return
				}
				want := m.want(input)
				for j, v := range bytesFloat32(out) {
					if d := v - want[j]; d > 1e-5 || d < -1e-5 {
						errs[i] = tensor.NewError("slot", tensor.ErrInvalidArgument, "slot %d element %d: got %v, want %v", i, j, v, want[j])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	// The staging buffers were created on first use (the input is device-local; the output
	// is host-visible and needs none).
	require.Equal(t, uint64(4*n+slots*(2*4*n+words)+slots*((4*n+readbackAlign-1)/readbackAlign*readbackAlign)), ctx.Charged())
}

func TestFreezeIntoAnotherContext(t *testing.T) {
	dev := sessiontest.OpenHost(t, 2)
	source := newContext(t, dev, Unlimited)
	target := newContext(t, dev, 10_000)
	m := newAxpyModel(t, source, 100)
	def, err := m.s.Freeze(target)
	require.NoError(t, err)
	require.NoError(t, m.s.Close())
	require.Zero(t, source.Charged(), "the weights moved out of the session's context")
	require.Equal(t, uint64(400), target.Charged(), "and were charged to the target once")
	frag, err := def.Fragment(m.commands(), []Region{m.in}, []Region{m.y})
	require.NoError(t, err)
	prep, err := frag.Prepare(1)
	require.NoError(t, err)
	sl, err := prep.Slot(0)
	require.NoError(t, err)
	input := make([]float32, 100)
	out := make([]byte, 400)
	require.NoError(t, sl.Run([][]byte{float32Bytes(input)}, [][]byte{out}))
	require.InDeltaSlice(t, m.want(input), bytesFloat32(out), 1e-5)
	require.NoError(t, prep.Close())
	require.NoError(t, def.Close())
	require.Zero(t, target.Charged())
}

func TestFreezeOwnContext(t *testing.T) {
	// A session from Open hands its context (and device) to the definition.
	s, err := Open(0, WithWorkerThreads(2))
	require.NoError(t, err)
	_, err = s.Weight([]byte{1, 2, 3})
	require.NoError(t, err)
	def, err := s.Freeze(s.Context())
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, def.Close(), "closes the context and device it took over")
	require.NoError(t, def.Close(), "Close is idempotent")
}

func TestFreezeErrors(t *testing.T) {
	dev := sessiontest.OpenHost(t, 2)
	ctx := newContext(t, dev, Unlimited)
	m := newAxpyModel(t, ctx, 100)
	t.Cleanup(func() { require.NoError(t, m.s.Close()) })

	_, err := m.s.Freeze(nil)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)

	elsewhere := newContext(t, sessiontest.OpenHost(t, 1), Unlimited)
	_, err = m.s.Freeze(elsewhere)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	require.ErrorContains(t, err, "stays on the session's device")

	small := newContext(t, dev, 399)
	_, err = m.s.Freeze(small)
	require.ErrorIs(t, err, tensor.ErrOverBudget)
	require.Zero(t, small.Charged())

	closed, err := NewContext(dev, Unlimited)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	_, err = m.s.Freeze(closed)
	require.ErrorIs(t, err, tensor.ErrClosed)

	// After the refusals the session is intact.
	require.NoError(t, m.s.Record("fwd", m.commands()))
	require.NoError(t, m.s.Replay("fwd"))
	require.NoError(t, m.s.Synchronize())
}

func TestFragmentErrors(t *testing.T) {
	ctx := newContext(t, sessiontest.OpenHost(t, 2), Unlimited)
	m := newAxpyModel(t, ctx, 64)
	other := newAxpyModel(t, ctx, 64)
	t.Cleanup(func() { require.NoError(t, other.s.Close()) })
	def, err := m.s.Freeze(ctx)
	require.NoError(t, err)
	require.NoError(t, m.s.Close())
	t.Cleanup(func() { require.NoError(t, def.Close()) })

	cases := []struct {
		name     string
		commands []Command
		inputs   []Region
		outputs  []Region
		kind     error
		message  string
	}{
		{"no commands", nil, nil, nil, tensor.ErrInvalidArgument, "at least one command"},
		{"input aliases a weight", m.commands(), []Region{m.w}, nil, tensor.ErrImmutable, "input 0"},
		{"output aliases a weight", m.commands(), nil, []Region{m.in, m.w}, tensor.ErrImmutable, "output 1"},
		{"kernel writes a weight", []Command{axpy(m.k, 1, 64, m.y, m.w)}, nil, nil, tensor.ErrImmutable, "weight"},
		{"fill of a weight", []Command{Fill{Region: m.w}}, nil, nil, tensor.ErrImmutable, "weight"},
		{"copy into a weight", []Command{Copy{Src: m.in, Dst: m.w}}, nil, nil, tensor.ErrImmutable, "weight"},
		{"foreign region", []Command{Fill{Region: other.in}}, nil, nil, tensor.ErrInvalidArgument, "another session"},
		{"foreign input", m.commands(), []Region{other.in}, nil, tensor.ErrInvalidArgument, "another session"},
		{"foreign kernel", []Command{axpy(other.k, 1, 64, m.w, m.y)}, nil, nil, tensor.ErrInvalidArgument, "another session"},
	}
	for _, tc := range cases {
		_, err := def.Fragment(tc.commands, tc.inputs, tc.outputs)
		require.ErrorIs(t, err, tc.kind, tc.name)
		require.ErrorContains(t, err, tc.message, tc.name)
	}
}

func TestPrepareAndSlotErrors(t *testing.T) {
	ctx := newContext(t, sessiontest.OpenHost(t, 2), 3000)
	m := newAxpyModel(t, ctx, 100)
	def, err := m.s.Freeze(ctx)
	require.NoError(t, err)
	require.NoError(t, m.s.Close())
	frag, err := def.Fragment(m.commands(), []Region{m.in}, []Region{m.y})
	require.NoError(t, err)

	_, err = frag.Prepare(0)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	// 400 bytes of weight + 800 of scratch per slot: five slots do not fit in 3000 bytes.
	_, err = frag.Prepare(5)
	require.ErrorIs(t, err, tensor.ErrOverBudget)
	require.Equal(t, uint64(400), ctx.Charged(), "a failed Prepare releases its slots")

	prep, err := frag.Prepare(2)
	require.NoError(t, err)
	_, err = prep.Slot(2)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	sl, err := prep.Slot(1)
	require.NoError(t, err)

	err = sl.Run(nil, nil)
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	require.ErrorContains(t, err, "1 inputs and 1 outputs")
	err = sl.Run([][]byte{make([]byte, 401)}, [][]byte{nil})
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	require.ErrorContains(t, err, "input 0")
	err = sl.Run([][]byte{nil}, [][]byte{make([]byte, 401)})
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	require.ErrorContains(t, err, "output 0")
	// With one more slot (2800 bytes), the staging for the device-local input (512 bytes)
	// does not fit any more.
	more, err := frag.Prepare(1)
	require.NoError(t, err, "one more slot fits")
	err = sl.Run([][]byte{make([]byte, 400)}, [][]byte{make([]byte, 400)})
	require.ErrorIs(t, err, tensor.ErrOverBudget)
	require.NoError(t, more.Close())
	require.NoError(t, sl.Run([][]byte{make([]byte, 400)}, [][]byte{make([]byte, 400)}), "fits again")

	err = def.Close()
	require.ErrorIs(t, err, tensor.ErrInUse)

	require.NoError(t, prep.Close())
	require.NoError(t, prep.Close(), "Close is idempotent")
	err = sl.Run([][]byte{nil}, [][]byte{nil})
	require.ErrorIs(t, err, tensor.ErrClosed)
	_, err = prep.Slot(0)
	require.ErrorIs(t, err, tensor.ErrClosed)
	require.NoError(t, def.Close())
}

func TestSlotFailureLatches(t *testing.T) {
	ctx := newContext(t, sessiontest.OpenHost(t, 2), Unlimited)
	m := newAxpyModel(t, ctx, 16)
	def, err := m.s.Freeze(ctx)
	require.NoError(t, err)
	require.NoError(t, m.s.Close())
	t.Cleanup(func() { require.NoError(t, def.Close()) })
	frag, err := def.Fragment(m.commands(), []Region{m.in}, []Region{m.y})
	require.NoError(t, err)
	prep, err := frag.Prepare(2)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, prep.Close()) })
	bad, err := prep.Slot(0)
	require.NoError(t, err)
	good, err := prep.Slot(1)
	require.NoError(t, err)
	require.NoError(t, bad.stream.InjectFault(native.FaultNextSynchronize))
	io := func() ([][]byte, [][]byte) { return [][]byte{make([]byte, 64)}, [][]byte{make([]byte, 64)} }
	in, out := io()
	err = bad.Run(in, out)
	require.ErrorIs(t, err, tensor.ErrFailed)
	require.ErrorIs(t, err, native.ErrDevice)
	err = bad.Run(in, out)
	require.ErrorIs(t, err, tensor.ErrFailed)
	require.NoError(t, good.Run(in, out), "other slots are unaffected")
}

func TestDefinitionClosed(t *testing.T) {
	ctx := newContext(t, sessiontest.OpenHost(t, 2), Unlimited)
	m := newAxpyModel(t, ctx, 16)
	def, err := m.s.Freeze(ctx)
	require.NoError(t, err)
	require.NoError(t, m.s.Close())
	frag, err := def.Fragment(m.commands(), nil, nil)
	require.NoError(t, err)
	require.NoError(t, def.Close())
	require.Zero(t, ctx.Charged())
	_, err = def.Fragment(m.commands(), nil, nil)
	require.ErrorIs(t, err, tensor.ErrClosed)
	_, err = frag.Prepare(1)
	require.ErrorIs(t, err, tensor.ErrClosed)
}
