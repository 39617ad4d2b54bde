package session

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// rnnLM is a tiny recurrent language model, one token a step with its state in a fixed-shape
// input: e = emb[tok]; m = (e + h)·W (then CumSum along the features when host, an op with no
// Loom kernel, so that the plan has a host step between two segments); h_out = tanh(m);
// logits = reshape(reshape(h_out, [H]), [1, H])·Wo (two pure views).
type rnnLM struct {
	v, h         int
	emb, w, wo   []float32
	host         bool
	model        *graph.Model
	hostNodeName string
}

func newRNNLM(t *testing.T, rnd *rand.Rand, v, h int, host bool) *rnnLM {
	lm := &rnnLM{v: v, h: h, host: host, emb: randomF32(rnd, v*h), w: randomF32(rnd, h*h), wo: randomF32(rnd, h*v)}
	for i := range lm.w {
		lm.w[i] *= 0.5
	}
	g := &graph.Graph{Name: "rnnlm"}
	g.Inputs = []*graph.Value{
		graph.Input("tok", graph.TensorType(graph.Int64, graph.ShapeOf(1))),
		graph.Input("h", graph.TensorType(graph.Float, graph.ShapeOf(1, int64(h)))),
	}
	g.Outputs = []*graph.Value{graph.Output("logits", graph.Type{}), graph.Output("h_out", graph.Type{})}
	g.AddInitializer(graph.TensorFromFloat32("emb", []int64{int64(v), int64(h)}, lm.emb))
	g.AddInitializer(graph.TensorFromFloat32("W", []int64{int64(h), int64(h)}, lm.w))
	g.AddInitializer(graph.TensorFromFloat32("Wo", []int64{int64(h), int64(v)}, lm.wo))
	g.AddInitializer(graph.TensorFromInt64("flat", []int64{1}, []int64{int64(h)}))
	g.AddInitializer(graph.TensorFromInt64("row", []int64{2}, []int64{1, int64(h)}))
	g.AddInitializer(graph.TensorFromInt64("axis", nil, []int64{1}))
	m := "m"
	g.Nodes = []*graph.Node{
		graph.NewNode("embed", "Gather", []string{"emb", "tok"}, []string{"e"}),
		graph.NewNode("mix", "Add", []string{"e", "h"}, []string{"a"}),
		graph.NewNode("proj", "MatMul", []string{"a", "W"}, []string{"m"}),
	}
	if host {
		lm.hostNodeName = "cumsum"
		g.Nodes = append(g.Nodes, graph.NewNode("cumsum", "CumSum", []string{"m", "axis"}, []string{"mc"}))
		m = "mc"
	}
	g.Nodes = append(g.Nodes,
		graph.NewNode("act", "Tanh", []string{m}, []string{"h_out"}),
		graph.NewNode("flatten", "Reshape", []string{"h_out", "flat"}, []string{"hf"}),
		graph.NewNode("unflatten", "Reshape", []string{"hf", "row"}, []string{"hr"}),
		graph.NewNode("head", "MatMul", []string{"hr", "Wo"}, []string{"logits"}),
	)
	model, err := graph.FromGraph("rnnlm", g, map[string]int64{"": 14})
	require.NoError(t, err)
	lm.model = model
	return lm
}

// step is the reference: the logits and the next state from tok and h, in float64.
func (lm *rnnLM) step(tok int64, h []float32) (logits []float64, next []float32) {
	a := make([]float64, lm.h)
	for i := range a {
		a[i] = float64(lm.emb[int(tok)*lm.h+i]) + float64(h[i])
	}
	m := make([]float64, lm.h)
	for j := range m {
		for k := range a {
			m[j] += a[k] * float64(lm.w[k*lm.h+j])
		}
	}
	if lm.host {
		for j := 1; j < lm.h; j++ {
			m[j] += m[j-1]
		}
	}
	next = make([]float32, lm.h)
	for j := range m {
		next[j] = float32(math.Tanh(m[j]))
	}
	logits = make([]float64, lm.v)
	for c := range logits {
		for k := range next {
			logits[c] += float64(next[k]) * float64(lm.wo[k*lm.v+c])
		}
	}
	return logits, next
}

func argmax[T float32 | float64](v []T) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// bindingProviders are the setups every binding test runs on: the host provider and the cuda
// provider's host stand-in. They compile on the run path (sameKernels): the tests capture
// after two eager steps and hold replays to eager runs bit for bit, which a plan on
// background stand-ins does not allow (TestCaptureDeclinesBackgroundStandIns tests that case).
var bindingProviders = []struct {
	name string
	opts []LoadOption
}{
	{"host", sameKernels([]LoadOption{WithExecutionProvider(ProviderHost), WithIntraOpThreads(1)})},
	{"cuda-stand-in", sameKernels([]LoadOption{WithExecutionProvider(ProviderCUDA), WithOption(OptionCUDAStandIn, "1"), WithIntraOpThreads(1)})},
}

// sameKernels adds OptionJIT "sync" to opts, for tests that hold two sessions' results to each
// other bit for bit. Under the default ("background") a plan runs shape-generic stand-ins until
// its exact kernels are compiled and loaded, which differ from them in the last bits (a GEMM's
// summation order), and when that happens depends on the machine's load: two sessions of one
// model may switch at different steps (stop 46's CI: TestCapturedDecodeMatchesEager's step 1).
// Compiled on the run path, every session runs the exact kernels from its first plan.
func sameKernels(opts []LoadOption) []LoadOption {
	return append(slices.Clip(opts), WithOption(OptionJIT, "sync"))
}

func forBindingProviders(t *testing.T, f func(t *testing.T, opts []LoadOption)) {
	for _, p := range bindingProviders {
		t.Run(p.name, func(t *testing.T) { f(t, p.opts) })
	}
}

func requireKind(t *testing.T, err error, kind error, contains string) {
	t.Helper()
	require.Error(t, err)
	var e *Error
	require.True(t, errors.As(err, &e), "%v is not an *Error", err)
	require.ErrorIs(t, err, kind)
	if contains != "" {
		require.Contains(t, err.Error(), contains)
	}
}

func TestDeviceBindingRefusesBadArguments(t *testing.T) {
	forBindingProviders(t, func(t *testing.T, opts []LoadOption) {
		rnd := inferRand()
		lm := newRNNLM(t, rnd, 16, 8, false)
		s, err := FromGraph(lm.model, opts...)
		require.NoError(t, err)
		defer s.Close()
		_, err = s.AllocateDeviceBinding("nope", "", graph.Float, []int64{1, 8}, []int64{1, 8})
		requireKind(t, err, ErrInvalidArgument, `no input named "nope"`)
		_, err = s.AllocateDeviceBinding("h", "nope", graph.Float, []int64{1, 8}, []int64{1, 8})
		requireKind(t, err, ErrInvalidArgument, `no output named "nope"`)
		_, err = s.AllocateDeviceOutputBinding("nope", graph.Float, []int64{1, 16}, []int64{1, 16})
		requireKind(t, err, ErrInvalidArgument, `no output named "nope"`)
		_, err = s.AllocateDeviceBinding("h", "h_out", graph.Double, []int64{1, 8}, []int64{1, 8})
		requireKind(t, err, ErrInvalidArgument, "element type double")
		_, err = s.AllocateDeviceBinding("h", "h_out", graph.Float, []int64{1, 9}, []int64{1, 8})
		requireKind(t, err, ErrInvalidArgument, "dimension 1 is 9, the model wants 8")
		_, err = s.AllocateDeviceBinding("h", "h_out", graph.Float, []int64{8}, []int64{8})
		requireKind(t, err, ErrInvalidArgument, "rank 1")
		_, err = s.AllocateDeviceBinding("h", "h_out", graph.Float, []int64{1, 8}, []int64{2, 8})
		requireKind(t, err, ErrInvalidArgument, "exceeds the physical shape")
		_, err = s.AllocateDeviceBinding("h", "h_out", graph.String, []int64{1, 8}, []int64{1, 8})
		requireKind(t, err, ErrInvalidArgument, "cannot be bound")

		h, err := s.AllocateDeviceBinding("h", "h_out", graph.Float, []int64{1, 8}, []int64{1, 8})
		require.NoError(t, err)
		requireKind(t, h.Upload(tensor.MustTensor([]int64{1, 8}, make([]float64, 8))), ErrInvalidArgument, "element type double")
		requireKind(t, h.Upload(tensor.MustTensor([]int64{1, 9}, make([]float32, 9))), ErrInvalidArgument, "exceeds the physical shape")
		requireKind(t, h.SetLogicalShape([]int64{1, 9}), ErrInvalidArgument, "exceeds the physical shape")
		requireKind(t, h.SetLogicalShape([]int64{8}), ErrInvalidArgument, "rank 1")
		tok, err := s.AllocateDeviceBinding("tok", "", graph.Int64, []int64{1}, []int64{1})
		require.NoError(t, err)
		ctx := context.Background()
		// Bound twice, fed and bound, unknown feed, a binding of another session.
		_, err = s.RunWithDeviceBindings(ctx, nil, []*DeviceBinding{h, h, tok})
		requireKind(t, err, ErrInvalidArgument, `input "h" is bound twice`)
		_, err = s.RunWithDeviceBindings(ctx, []NamedTensor{{Name: "tok", Tensor: tensor.MustTensor([]int64{1}, []int64{0})}}, []*DeviceBinding{h, tok})
		requireKind(t, err, ErrInvalidArgument, `input "tok" is fed and bound`)
		_, err = s.RunWithDeviceBindings(ctx, []NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{1}, []int64{0})}}, []*DeviceBinding{h, tok})
		requireKind(t, err, ErrInvalidArgument, `no input named "x"`)
		other, err := FromGraph(lm.model, opts...)
		require.NoError(t, err)
		defer other.Close()
		_, err = other.RunWithDeviceBindings(ctx, nil, []*DeviceBinding{h, tok})
		requireKind(t, err, ErrInvalidArgument, "belongs to another session")
		_, err = s.RunWithDeviceBindings(ctx, nil, []*DeviceBinding{h, nil})
		requireKind(t, err, ErrInvalidArgument, "nil binding")
		// A missing input is the run's error.
		_, err = s.RunWithDeviceBindings(ctx, nil, []*DeviceBinding{h})
		requireKind(t, err, ErrInvalidArgument, "tok")
		// The model fixes the logits' shape (shape inference): a binding of another is refused.
		_, err = s.AllocateDeviceOutputBinding("logits", graph.Float, []int64{1, 4}, []int64{1, 4})
		requireKind(t, err, ErrInvalidArgument, "dimension 1 is 4, the model wants 16")
		// Destroyed: every method refuses (ErrClosed), Destroy again is a no-op.
		require.NoError(t, tok.Destroy())
		require.NoError(t, tok.Destroy())
		requireKind(t, tok.Upload(tensor.MustTensor([]int64{1}, []int64{1})), ErrClosed, "destroyed")
		_, err = tok.Download()
		requireKind(t, err, ErrClosed, "destroyed")
		requireKind(t, tok.SetLogicalShape([]int64{1}), ErrClosed, "destroyed")
		requireKind(t, tok.Reallocate([]int64{1}), ErrClosed, "destroyed")
		_, err = s.RunWithDeviceBindings(ctx, nil, []*DeviceBinding{h, tok})
		requireKind(t, err, ErrClosed, "destroyed")
		// Closed session: allocation, steps and the binding's methods refuse.
		require.NoError(t, s.Close())
		_, err = s.AllocateDeviceBinding("h", "", graph.Float, []int64{1, 8}, []int64{1, 8})
		requireKind(t, err, ErrClosed, "closed")
		requireKind(t, h.Upload(tensor.MustTensor([]int64{1, 8}, make([]float32, 8))), ErrClosed, "")
		_, err = s.RunWithDeviceBindings(ctx, []NamedTensor{{Name: "tok", Tensor: tensor.MustTensor([]int64{1}, []int64{0})}}, []*DeviceBinding{h})
		requireKind(t, err, ErrClosed, "")
		assert.Equal(t, DeviceAllocations{}, s.DeviceAllocationCounts())
	})
}

// decodeEager runs n greedy steps of lm through Run from token first and state zero.
func decodeEager(t *testing.T, s *InferenceSession, lm *rnnLM, first int64, n int) (toks []int64, logits [][]float32, states [][]float32) {
	h := tensor.MustTensor([]int64{1, int64(lm.h)}, make([]float32, lm.h))
	tok := first
	for range n {
		states = append(states, append([]float32{}, h.Data().([]float32)...))
		outs, err := s.Run(context.Background(), []NamedTensor{{Name: "tok", Tensor: tensor.MustTensor([]int64{1}, []int64{tok})}, {Name: "h", Tensor: h}})
		require.NoError(t, err)
		l, err := tensor.TensorOf[float32](outs[0])
		require.NoError(t, err)
		logits = append(logits, append([]float32{}, l...))
		tok = int64(argmax(l))
		toks = append(toks, tok)
		h = outs[1]
	}
	return toks, logits, states
}

// checkReference checks each step's logits against the float64 reference fed the same token
// and state (the engine's, so that rounding does not compound through the recurrence), and
// each chosen token against the reference's argmax where the top two are apart.
func checkReference(t *testing.T, lm *rnnLM, first int64, toks []int64, logits, states [][]float32) {
	t.Helper()
	tok := first
	for i := range toks {
		want, _ := lm.step(tok, states[i])
		for c := range want {
			require.InDelta(t, want[c], float64(logits[i][c]), 1e-4*(1+math.Abs(want[c])), "step %d logit %d", i, c)
		}
		best := argmax(want)
		second := math.Inf(-1)
		for c, v := range want {
			if c != best {
				second = math.Max(second, v)
			}
		}
		if want[best]-second > 1e-3 {
			require.Equal(t, int64(best), toks[i], "step %d", i)
		}
		tok = toks[i]
	}
}

func TestRunWithDeviceBindingsMatchesRun(t *testing.T) {
	forBindingProviders(t, func(t *testing.T, opts []LoadOption) {
		rnd := inferRand()
		lm := newRNNLM(t, rnd, 40, 24, false)
		s, err := FromGraph(lm.model, opts...)
		require.NoError(t, err)
		defer s.Close()
		const steps = 12
		first := int64(rnd.IntN(lm.v))
		wantToks, wantLogits, states := decodeEager(t, s, lm, first, steps)
		checkReference(t, lm, first, wantToks, wantLogits, states)

		b, err := FromGraph(lm.model, opts...)
		require.NoError(t, err)
		defer b.Close()
		tok, err := b.AllocateDeviceBinding("tok", "", graph.Int64, []int64{1}, []int64{1})
		require.NoError(t, err)
		h, err := b.AllocateDeviceBinding("h", "h_out", graph.Float, []int64{1, int64(lm.h)}, []int64{1, int64(lm.h)})
		require.NoError(t, err)
		logits, err := b.AllocateDeviceOutputBinding("logits", graph.Float, []int64{1, int64(lm.v)}, []int64{1, int64(lm.v)})
		require.NoError(t, err)
		all := []*DeviceBinding{tok, h, logits}
		require.NoError(t, tok.Upload(tensor.MustTensor([]int64{1}, []int64{first})))
		for i := range steps {
			outs, err := b.RunWithDeviceBindings(context.Background(), nil, all)
			require.NoError(t, err)
			require.Len(t, outs, 2)
			assert.False(t, outs[0].IsValid(), "logits stay in their binding")
			assert.False(t, outs[1].IsValid(), "h_out stays in its binding")
			l, err := logits.Download()
			require.NoError(t, err)
			got, err := tensor.TensorOf[float32](l)
			require.NoError(t, err)
			require.Equal(t, wantLogits[i], got, "step %d: the same kernels give the same bits", i)
			require.NoError(t, tok.Upload(tensor.MustTensor([]int64{1}, []int64{int64(argmax(got))})))
		}
		memo := b.DecodeMemoCounts()
		assert.Equal(t, DecodeMemoCounts{Primed: 1, Replayed: steps - 1}, memo)
		views := b.DecodeViewPlanCounts()
		assert.Equal(t, uint64(2*(steps-1)), views.DispatchElided, "two Reshapes a replay")
		assert.Equal(t, views.DispatchElided, views.ViewsReused)

		// Allocation counts: three bindings, those outputs are written to double-buffered.
		a := b.DeviceAllocationCounts()
		assert.Equal(t, AllocationCount{Count: 5, Bytes: 8 + 2*4*int64(lm.h) + 2*4*int64(lm.v)}, a.Bindings)
		assert.Equal(t, 1, a.Scratch.Count, "one plan instance")
		assert.Positive(t, a.Scratch.Bytes)
		assert.Positive(t, a.Graphs.Count)
		assert.Positive(t, a.Weights.Count)
		assert.GreaterOrEqual(t, a.Weights.Bytes, int64(4*(lm.v*lm.h+lm.h*lm.h+lm.h*lm.v)))
		require.NoError(t, h.Destroy())
		a2 := b.DeviceAllocationCounts()
		assert.Equal(t, AllocationCount{Count: 3, Bytes: 8 + 2*4*int64(lm.v)}, a2.Bindings)
		require.NoError(t, b.Close())
		assert.Equal(t, DeviceAllocations{}, b.DeviceAllocationCounts())
	})
}

// An aliased binding's output that outgrows its capacity is refused, naming it, and leaves
// the binding as it was; Upload, Download, SetLogicalShape and Reallocate keep the value.
func TestDeviceBindingCapacityAndLogicalShape(t *testing.T) {
	rnd := inferRand()
	// y = Concat(x, x) along axis 0: the output of a step is twice its input.
	g := &graph.Graph{Name: "grow"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("N"), graph.DimOf(2)}))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.Nodes = []*graph.Node{graph.NewNode("cat", "Concat", []string{"x", "x"}, []string{"y"}, graph.IntAttr("axis", 0))}
	m, err := graph.FromGraph("grow", g, map[string]int64{"": 14})
	require.NoError(t, err)
	forBindingProviders(t, func(t *testing.T, opts []LoadOption) {
		s, err := FromGraph(m, opts...)
		require.NoError(t, err)
		defer s.Close()
		x, err := s.AllocateDeviceBinding("x", "y", graph.Float, []int64{8, 2}, []int64{1, 2})
		require.NoError(t, err)
		v := randomF32(rnd, 2)
		require.NoError(t, x.Upload(tensor.MustTensor([]int64{1, 2}, v)))
		want := v
		for range 3 {
			outs, err := s.RunWithDeviceBindings(context.Background(), nil, []*DeviceBinding{x})
			require.NoError(t, err)
			assert.False(t, outs[0].IsValid())
			want = append(append([]float32{}, want...), want...)
			got, err := x.Download()
			require.NoError(t, err)
			require.Equal(t, []int64{int64(len(want) / 2), 2}, got.Shape())
			require.Equal(t, want, got.Data())
		}
		// 8 rows would become 16: refused, the binding unchanged.
		_, err = s.RunWithDeviceBindings(context.Background(), nil, []*DeviceBinding{x})
		requireKind(t, err, ErrInvalidArgument, `output "y" float[16,2] does not fit the binding of input "x" aliased by output "y"`)
		got, err := x.Download()
		require.NoError(t, err)
		require.Equal(t, want, got.Data())
		// Rewind: a shorter logical shape keeps the leading rows.
		require.NoError(t, x.SetLogicalShape([]int64{2, 2}))
		got, err = x.Download()
		require.NoError(t, err)
		require.Equal(t, want[:4], got.Data())
		// Reallocate keeps the value that fits.
		require.NoError(t, x.Reallocate([]int64{32, 2}))
		got, err = x.Download()
		require.NoError(t, err)
		require.Equal(t, want[:4], got.Data())
		assert.Equal(t, []int64{32, 2}, x.PhysicalShape())
		requireKind(t, x.Reallocate([]int64{32, 3}), ErrInvalidArgument, "dimension 1 is 3")
	})
}

// Steps with bindings, plain runs and a capture run side by side; Close then waits for them
// and destroys the bindings (under the race detector in CI).
func TestDeviceBindingsConcurrentWithRunAndClose(t *testing.T) {
	rnd := inferRand()
	lm := newRNNLM(t, rnd, 16, 8, false)
	s, err := FromGraph(lm.model, sameKernels([]LoadOption{WithExecutionProvider(ProviderHost)})...) // captured at the end
	require.NoError(t, err)
	b := newLMBindings(t, s, lm, 2)
	ctx := context.Background()
	errs := make(chan error, 3)
	go func() {
		for range 40 {
			if _, err := s.RunWithDeviceBindings(ctx, nil, b.all()); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	go func() {
		h := tensor.MustTensor([]int64{1, 8}, make([]float32, 8))
		for range 40 {
			if _, err := s.Run(ctx, []NamedTensor{{Name: "tok", Tensor: tensor.MustTensor([]int64{1}, []int64{1})}, {Name: "h", Tensor: h}}); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	go func() {
		for range 20 {
			_ = s.DeviceAllocationCounts()
			_ = s.DecodeMemoCounts()
			if _, err := b.h.Download(); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	for range 3 {
		require.NoError(t, <-errs)
	}
	res, err := s.TryCaptureWithDeviceBindings(ctx, nil, b.all())
	require.NoError(t, err)
	require.True(t, res.Captured, res.Reason)
	require.NoError(t, s.Close())
	_, err = s.ReplayDeviceGraph(b.all())
	requireKind(t, err, ErrClosed, "")
	_, err = b.h.Download()
	requireKind(t, err, ErrClosed, "")
	assert.Equal(t, 0, s.CapturedGraphSegmentCount())
}

// Device bindings' buffers are charged to the session's memory budget: an allocation or a
// reallocation over it fails with ErrOverBudget and changes nothing, a physical shape beyond
// any memory is refused, and Destroy, Reallocate and Close give the bytes back.
func TestDeviceBindingsAreChargedToTheMemoryBudget(t *testing.T) {
	forBindingProviders(t, func(t *testing.T, opts []LoadOption) {
		g := &graph.Graph{Name: "relu_rows"}
		g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("n"), graph.Dim{Value: 4}}))}
		g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
		g.Nodes = []*graph.Node{graph.NewNode("relu", "Relu", []string{"x"}, []string{"y"})}
		m, err := graph.FromGraph(g.Name, g, map[string]int64{"": 21})
		require.NoError(t, err)
		const budget = 1 << 20
		s, err := FromGraph(m, append(opts[:len(opts):len(opts)], WithMemoryBudget(budget))...)
		require.NoError(t, err)
		defer s.Close()
		held := func() uint64 { _, h := s.MemoryBudget(); return h }
		base := held()

		x, err := s.AllocateDeviceBinding("x", "", graph.Float, []int64{16, 4}, []int64{2, 4})
		require.NoError(t, err)
		require.Equal(t, base+16*4*4, held(), "one buffer of 16 x 4 floats")
		y, err := s.AllocateDeviceOutputBinding("y", graph.Float, []int64{16, 4}, []int64{2, 4})
		require.NoError(t, err)
		require.Equal(t, base+3*16*4*4, held(), "an output binding holds two buffers")

		// Over the budget: refused, nothing charged, nothing allocated.
		_, err = s.AllocateDeviceBinding("x", "", graph.Float, []int64{1 << 20, 4}, []int64{1, 4})
		requireKind(t, err, ErrOverBudget, `the binding of input "x"'s buffers would take 16.0 MiB`)
		require.Equal(t, base+3*16*4*4, held())
		// Beyond any memory (the element count or the bytes overflow): refused as invalid.
		_, err = s.AllocateDeviceBinding("x", "", graph.Float, []int64{1 << 62, 4}, []int64{1, 4})
		requireKind(t, err, ErrInvalidArgument, "too large to allocate")
		_, err = s.AllocateDeviceBinding("x", "", graph.Float, []int64{1 << 58, 4}, []int64{1, 4})
		requireKind(t, err, ErrInvalidArgument, "too large to allocate")
		require.Equal(t, base+3*16*4*4, held())

		// A reallocation over the budget keeps the binding as it was.
		r := inferRand()
		v := tensor.MustTensor([]int64{2, 4}, randomF32(r, 8))
		require.NoError(t, x.Upload(v))
		requireKind(t, x.Reallocate([]int64{1 << 20, 4}), ErrOverBudget, "would take 16.0 MiB")
		requireKind(t, x.Reallocate([]int64{1 << 61, 4}), ErrInvalidArgument, "too large to allocate")
		require.Equal(t, []int64{16, 4}, x.PhysicalShape())
		got, err := x.Download()
		require.NoError(t, err)
		require.Equal(t, tensor.Float64s(v), tensor.Float64s(got))
		require.Equal(t, base+3*16*4*4, held())
		// One that fits moves the charge to the new size.
		require.NoError(t, x.Reallocate([]int64{64, 4}))
		require.Equal(t, base+64*4*4+2*16*4*4, held())
		out, err := s.RunWithDeviceBindings(context.Background(), nil, []*DeviceBinding{x, y})
		require.NoError(t, err)
		require.Len(t, out, 1)
		require.False(t, out[0].IsValid(), "y is in its binding")
		relu, err := y.Download()
		require.NoError(t, err)
		for i, e := range tensor.Float64s(v) {
			require.Equal(t, max(e, 0), tensor.Float64s(relu)[i])
		}
		// Destroy gives a binding's bytes back (once), Close the rest (the run's plan holds
		// its arena in the budget meanwhile).
		ran := held()
		require.NoError(t, x.Destroy())
		require.NoError(t, x.Destroy())
		require.Equal(t, ran-64*4*4, held())
		require.NoError(t, s.Close())
		require.Equal(t, base, held(), "a closed session holds nothing of its budget")
	})
}
