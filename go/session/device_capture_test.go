package session

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// lmBindings are a decode loop's bindings for rnnLM: the token, the state (aliased by h_out)
// and the logits.
type lmBindings struct {
	tok, h, logits *DeviceBinding
}

func (b lmBindings) all() []*DeviceBinding { return []*DeviceBinding{b.tok, b.h, b.logits} }

func newLMBindings(t *testing.T, s *InferenceSession, lm *rnnLM, first int64) lmBindings {
	var b lmBindings
	var err error
	b.tok, err = s.AllocateDeviceBinding("tok", "", graph.Int64, []int64{1}, []int64{1})
	require.NoError(t, err)
	b.h, err = s.AllocateDeviceBinding("h", "h_out", graph.Float, []int64{1, int64(lm.h)}, []int64{1, int64(lm.h)})
	require.NoError(t, err)
	b.logits, err = s.AllocateDeviceOutputBinding("logits", graph.Float, []int64{1, int64(lm.v)}, []int64{1, int64(lm.v)})
	require.NoError(t, err)
	require.NoError(t, b.tok.Upload(tensor.MustTensor([]int64{1}, []int64{first})))
	return b
}

// nextToken reads the logits binding, uploads their argmax as the next token and returns the
// logits.
func (b lmBindings) nextToken(t *testing.T) (int64, []float32) {
	t.Helper()
	l, err := b.logits.Download()
	require.NoError(t, err)
	got, err := tensor.TensorOf[float32](l)
	require.NoError(t, err)
	tok := int64(argmax(got))
	require.NoError(t, b.tok.Upload(tensor.MustTensor([]int64{1}, []int64{tok})))
	return tok, got
}

// 32 greedy steps: two eager steps warm the plan, the third is captured, the rest replay;
// the tokens and logits are exactly the eager Run's, and the reference's.
func TestCapturedDecodeMatchesEager(t *testing.T) {
	for _, host := range []bool{false, true} {
		name := "one segment"
		if host {
			name = "host seam"
		}
		t.Run(name, func(t *testing.T) {
			forBindingProviders(t, func(t *testing.T, opts []LoadOption) {
				rnd := inferRand()
				lm := newRNNLM(t, rnd, 40, 24, host)
				const steps = 32
				first := int64(rnd.IntN(lm.v))
				eager, err := FromGraph(lm.model, opts...)
				require.NoError(t, err)
				defer eager.Close()
				wantToks, wantLogits, states := decodeEager(t, eager, lm, first, steps)
				checkReference(t, lm, first, wantToks, wantLogits, states)

				// Plans from an interpreted first run, so that the audit's "built but not run"
				// decline after it is seen (TestShapePlanCapturesAfterOneStep: the default).
				s, err := FromGraph(lm.model, append(slices.Clone(opts), WithOption(OptionShapePlans, "0"))...)
				require.NoError(t, err)
				defer s.Close()
				b := newLMBindings(t, s, lm, first)
				ctx := context.Background()
				// Not warmed: nothing captured, nothing ran.
				res, err := s.TryCaptureWithDeviceBindings(ctx, nil, b.all())
				require.NoError(t, err)
				require.False(t, res.Captured)
				require.Equal(t, SeamNotWarmed, res.Declines[0].SeamKind, res.Reason)
				assert.Equal(t, 0, s.CapturedGraphSegmentCount())
				assert.Equal(t, DecodeMemoCounts{}, s.DecodeMemoCounts(), "the audit runs nothing")
				var toks []int64
				for i := range steps {
					switch {
					case i < 2:
						_, err := s.RunWithDeviceBindings(ctx, nil, b.all())
						require.NoError(t, err)
						if i == 0 {
							res, err := s.TryCaptureWithDeviceBindings(ctx, nil, b.all())
							require.NoError(t, err)
							require.False(t, res.Captured, "the plan is built but has not run")
							require.Equal(t, SeamNotWarmed, res.Declines[0].SeamKind)
						}
					case i == 2:
						res, err := s.TryCaptureWithDeviceBindings(ctx, nil, b.all())
						require.NoError(t, err)
						require.True(t, res.Captured, res.Reason)
						require.Len(t, res.Outputs, 2)
						assert.False(t, res.Outputs[0].IsValid())
						if host {
							require.Equal(t, 2, s.CapturedGraphSegmentCount())
							require.Len(t, res.Declines, 1)
							d := res.Declines[0]
							assert.Equal(t, "cumsum", d.Node)
							assert.Equal(t, "CumSum", d.OpType)
							assert.Equal(t, SeamHostOp, d.SeamKind)
							// The reason is the plan's (and the host step's span's).
							plans := s.ExecutionPlans()
							require.Len(t, plans[0].HostSteps, 1)
							assert.True(t, strings.HasPrefix(d.Reason, plans[0].HostSteps[0].Reason), "%q vs %q", d.Reason, plans[0].HostSteps[0].Reason)
						} else {
							require.Equal(t, 1, s.CapturedGraphSegmentCount(), "the whole step is one graph")
							require.Empty(t, res.Declines)
						}
						assert.Equal(t, res.Declines, s.CaptureSegmentation())
					default:
						ok, err := s.ReplayDeviceGraph([]*DeviceBinding{b.logits, b.h, b.tok})
						require.NoError(t, err)
						require.True(t, ok)
					}
					tok, logits := b.nextToken(t)
					require.Equal(t, wantLogits[i], logits, "step %d", i)
					toks = append(toks, tok)
				}
				require.Equal(t, wantToks, toks)
				memo := s.DecodeMemoCounts()
				assert.Equal(t, DecodeMemoCounts{Primed: 1, Replayed: steps - 1}, memo)
				views := s.DecodeViewPlanCounts()
				assert.Equal(t, uint64(2*(steps-1)), views.DispatchElided)
				assert.Zero(t, s.CheckDeviceCaptureError())
			})
		})
	}
}

// TestShapePlanCapturesAfterOneStep: with shape plans (the default) the first eager step already
// runs the step's plan, so the second step is captured and the rest replay, with the eager
// run's tokens and logits.
func TestShapePlanCapturesAfterOneStep(t *testing.T) {
	forBindingProviders(t, func(t *testing.T, opts []LoadOption) {
		rnd := inferRand()
		lm := newRNNLM(t, rnd, 40, 24, false)
		const steps = 8
		first := int64(rnd.IntN(lm.v))
		eager, err := FromGraph(lm.model, opts...)
		require.NoError(t, err)
		defer eager.Close()
		wantToks, wantLogits, _ := decodeEager(t, eager, lm, first, steps)

		s, err := FromGraph(lm.model, opts...)
		require.NoError(t, err)
		defer s.Close()
		b := newLMBindings(t, s, lm, first)
		ctx := context.Background()
		var toks []int64
		for i := range steps {
			switch i {
			case 0:
				_, err := s.RunWithDeviceBindings(ctx, nil, b.all())
				require.NoError(t, err)
			case 1:
				res, err := s.TryCaptureWithDeviceBindings(ctx, nil, b.all())
				require.NoError(t, err)
				require.True(t, res.Captured, res.Reason)
				require.Equal(t, 1, s.CapturedGraphSegmentCount())
			default:
				ok, err := s.ReplayDeviceGraph([]*DeviceBinding{b.logits, b.h, b.tok})
				require.NoError(t, err)
				require.True(t, ok)
			}
			tok, logits := b.nextToken(t)
			require.Equal(t, wantLogits[i], logits, "step %d", i)
			toks = append(toks, tok)
		}
		require.Equal(t, wantToks, toks)
	})
}

// Replay refuses, with an error naming the binding, what would read stale memory or the wrong
// shapes; ResetDeviceGraph makes the session eager again.
func TestReplayDeviceGraphRefuses(t *testing.T) {
	forBindingProviders(t, func(t *testing.T, opts []LoadOption) {
		rnd := inferRand()
		lm := newRNNLM(t, rnd, 16, 8, false)
		s, err := FromGraph(lm.model, opts...)
		require.NoError(t, err)
		defer s.Close()
		ctx := context.Background()
		_, err = s.ReplayDeviceGraph(nil)
		requireKind(t, err, ErrNotCaptured, "no device graph is captured")
		b := newLMBindings(t, s, lm, 3)
		capture := func() {
			t.Helper()
			for range 2 {
				_, err := s.RunWithDeviceBindings(ctx, nil, b.all())
				require.NoError(t, err)
			}
			res, err := s.TryCaptureWithDeviceBindings(ctx, nil, b.all())
			require.NoError(t, err)
			require.True(t, res.Captured, res.Reason)
		}
		capture()
		_, err = s.TryCaptureWithDeviceBindings(ctx, nil, b.all())
		requireKind(t, err, ErrInvalidArgument, "already captured")
		_, err = s.ReplayDeviceGraph([]*DeviceBinding{b.tok, b.h})
		requireKind(t, err, ErrInvalidArgument, "2 bindings, the graph was captured with 3")
		other, err := s.AllocateDeviceBinding("h", "", graph.Float, []int64{1, 8}, []int64{1, 8})
		require.NoError(t, err)
		_, err = s.ReplayDeviceGraph([]*DeviceBinding{b.tok, other, b.logits})
		requireKind(t, err, ErrInvalidArgument, "not one the graph was captured with")
		// Reallocated: the graph's memory is gone.
		require.NoError(t, b.h.Reallocate([]int64{1, 8}))
		_, err = s.ReplayDeviceGraph(b.all())
		requireKind(t, err, ErrInvalidArgument, `the binding of input "h" aliased by output "h_out" was reallocated`)
		require.NoError(t, s.ResetDeviceGraph())
		assert.Equal(t, 0, s.CapturedGraphSegmentCount())
		_, err = s.ReplayDeviceGraph(b.all())
		requireKind(t, err, ErrNotCaptured, "")
		// Destroyed.
		capture()
		require.NoError(t, b.logits.Destroy())
		_, err = s.ReplayDeviceGraph(b.all())
		requireKind(t, err, ErrClosed, `the binding of output "logits" was destroyed`)
		require.NoError(t, s.ResetDeviceGraph())
		require.NoError(t, s.ResetDeviceGraph(), "idempotent")
		// A closed session.
		b = newLMBindings(t, s, lm, 3)
		capture()
		require.NoError(t, s.Close())
		_, err = s.ReplayDeviceGraph(b.all())
		requireKind(t, err, ErrClosed, "")
		_, err = s.TryCaptureWithDeviceBindings(ctx, nil, b.all())
		requireKind(t, err, ErrClosed, "")
	})
}

// A logical shape change after the capture is refused at replay; one before the capture is a
// growing shape, which the audit names.
func TestCaptureRefusesShapeChanges(t *testing.T) {
	g := &graph.Graph{Name: "grow"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("N"), graph.DimOf(2)}))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.AddInitializer(graph.TensorFromFloat32("one", []int64{1, 2}, []float32{1, 1}))
	g.Nodes = []*graph.Node{
		graph.NewNode("inc", "Add", []string{"x", "one"}, []string{"a"}),
		graph.NewNode("cat", "Concat", []string{"a", "one"}, []string{"y"}, graph.IntAttr("axis", 0)),
	}
	m, err := graph.FromGraph("grow", g, map[string]int64{"": 14})
	require.NoError(t, err)
	forBindingProviders(t, func(t *testing.T, opts []LoadOption) {
		s, err := FromGraph(m, opts...)
		require.NoError(t, err)
		defer s.Close()
		ctx := context.Background()
		x, err := s.AllocateDeviceBinding("x", "y", graph.Float, []int64{16, 2}, []int64{1, 2})
		require.NoError(t, err)
		for range 3 {
			_, err := s.RunWithDeviceBindings(ctx, nil, []*DeviceBinding{x})
			require.NoError(t, err)
		}
		res, err := s.TryCaptureWithDeviceBindings(ctx, nil, []*DeviceBinding{x})
		require.NoError(t, err)
		require.False(t, res.Captured)
		require.Contains(t, res.Reason, `input "x" [3 2] -> [4 2]`)
		var names []string
		for _, d := range res.Declines {
			assert.Equal(t, SeamGrowingShape, d.SeamKind)
			names = append(names, d.Node)
		}
		assert.Equal(t, []string{"inc", "cat"}, names, "both nodes' outputs grow")
		assert.Equal(t, uint64(2), s.DecodeMemoCounts().Rebuilt, "each step's shape is a new plan")
		// Rewound to a fixed length, warmed and captured: a shape change then is refused.
		require.NoError(t, x.SetLogicalShape([]int64{1, 2}))
		_ = x.Upload(tensor.MustTensor([]int64{1, 2}, []float32{0, 0}))
		s2, err := FromGraph(m, opts...)
		require.NoError(t, err)
		defer s2.Close()
		y, err := s2.AllocateDeviceBinding("x", "", graph.Float, []int64{4, 2}, []int64{2, 2})
		require.NoError(t, err)
		out, err := s2.AllocateDeviceOutputBinding("y", graph.Float, []int64{8, 2}, []int64{3, 2})
		require.NoError(t, err)
		for range 2 {
			_, err := s2.RunWithDeviceBindings(ctx, nil, []*DeviceBinding{y, out})
			require.NoError(t, err)
		}
		res, err = s2.TryCaptureWithDeviceBindings(ctx, nil, []*DeviceBinding{y, out})
		require.NoError(t, err)
		require.True(t, res.Captured, res.Reason)
		require.NoError(t, y.SetLogicalShape([]int64{3, 2}))
		_, err = s2.ReplayDeviceGraph([]*DeviceBinding{y, out})
		requireKind(t, err, ErrInvalidArgument, "logical shape [3 2], the graph was captured at [2 2]")
	})
}

// A bound control value that flips an If's branch retires the graph: the replay returns
// false with the step's result computed eagerly, and the caller captures again.
func TestReplayRetiresOnBranchFlip(t *testing.T) {
	forBindingProviders(t, func(t *testing.T, opts []LoadOption) {
		rnd := inferRand()
		w := randomF32(rnd, 4)
		s, err := FromGraph(ifModel(t, w), opts...)
		require.NoError(t, err)
		defer s.Close()
		ctx := context.Background()
		c, err := s.AllocateDeviceBinding("c", "", graph.Bool, []int64{}, []int64{})
		require.NoError(t, err)
		x, err := s.AllocateDeviceBinding("x", "", graph.Float, []int64{4}, []int64{4})
		require.NoError(t, err)
		y, err := s.AllocateDeviceOutputBinding("y", graph.Float, []int64{4}, []int64{4})
		require.NoError(t, err)
		all := []*DeviceBinding{c, x, y}
		xs := randomF32(rnd, 4)
		require.NoError(t, x.Upload(tensor.MustTensor([]int64{4}, xs)))
		require.NoError(t, c.Upload(tensor.MustTensor([]int64{}, []bool{true})))
		for range 2 {
			_, err := s.RunWithDeviceBindings(ctx, nil, all)
			require.NoError(t, err)
		}
		res, err := s.TryCaptureWithDeviceBindings(ctx, nil, all)
		require.NoError(t, err)
		require.True(t, res.Captured, res.Reason)
		check := func(plus bool) {
			t.Helper()
			got, err := y.Download()
			require.NoError(t, err)
			for i, v := range got.Data().([]float32) {
				want := xs[i] - w[i]
				if plus {
					want = xs[i] + w[i]
				}
				require.InDelta(t, want, v, 1e-6)
			}
		}
		check(true)
		ok, err := s.ReplayDeviceGraph(all)
		require.NoError(t, err)
		require.True(t, ok)
		check(true)
		require.NoError(t, c.Upload(tensor.MustTensor([]int64{}, []bool{false})))
		ok, err = s.ReplayDeviceGraph(all)
		require.NoError(t, err)
		require.False(t, ok, "the branch flipped")
		check(false)
		_, err = s.ReplayDeviceGraph(all)
		requireKind(t, err, ErrNotCaptured, "retired")
		require.NoError(t, s.ResetDeviceGraph())
		for range 2 {
			_, err := s.RunWithDeviceBindings(ctx, nil, all)
			require.NoError(t, err)
		}
		res, err = s.TryCaptureWithDeviceBindings(ctx, nil, all)
		require.NoError(t, err)
		require.True(t, res.Captured, res.Reason)
		check(false)
	})
}

// An error while capturing (here the context is done) leaves the session eager with nothing
// captured and the bindings as they were; a later capture works.
func TestCaptureAbortLeavesSessionEager(t *testing.T) {
	forBindingProviders(t, func(t *testing.T, opts []LoadOption) {
		rnd := inferRand()
		lm := newRNNLM(t, rnd, 16, 8, false)
		s, err := FromGraph(lm.model, opts...)
		require.NoError(t, err)
		defer s.Close()
		b := newLMBindings(t, s, lm, 5)
		ctx := context.Background()
		for range 2 {
			_, err := s.RunWithDeviceBindings(ctx, nil, b.all())
			require.NoError(t, err)
		}
		before, err := b.h.Download()
		require.NoError(t, err)
		done, cancel := context.WithCancel(ctx)
		cancel()
		_, err = s.TryCaptureWithDeviceBindings(done, nil, b.all())
		requireKind(t, err, context.Canceled, "")
		assert.Equal(t, 0, s.CapturedGraphSegmentCount())
		after, err := b.h.Download()
		require.NoError(t, err)
		require.Equal(t, before.Data(), after.Data(), "the state is unchanged")
		_, err = s.ReplayDeviceGraph(b.all())
		requireKind(t, err, ErrNotCaptured, "")
		_, err = s.RunWithDeviceBindings(ctx, nil, b.all())
		require.NoError(t, err)
		res, err := s.TryCaptureWithDeviceBindings(ctx, nil, b.all())
		require.NoError(t, err)
		require.True(t, res.Captured, res.Reason)
	})
}

// A token past the embedding table fails the Gather kernel's bounds check during a replay:
// the replay is an error naming the node, CheckDeviceCaptureError reports the bits (and keeps
// them until ResetDeviceGraph), and nothing outside the bindings' values changes: the state
// binding keeps the last good step's value.
func TestReplayBoundsViolationLatches(t *testing.T) {
	forBindingProviders(t, func(t *testing.T, opts []LoadOption) {
		rnd := inferRand()
		lm := newRNNLM(t, rnd, 16, 8, false)
		s, err := FromGraph(lm.model, opts...)
		require.NoError(t, err)
		defer s.Close()
		b := newLMBindings(t, s, lm, 5)
		ctx := context.Background()
		for range 2 {
			_, err := s.RunWithDeviceBindings(ctx, nil, b.all())
			require.NoError(t, err)
		}
		res, err := s.TryCaptureWithDeviceBindings(ctx, nil, b.all())
		require.NoError(t, err)
		require.True(t, res.Captured, res.Reason)
		h0, err := b.h.Download()
		require.NoError(t, err)
		l0, err := b.logits.Download()
		require.NoError(t, err)
		require.NoError(t, b.tok.Upload(tensor.MustTensor([]int64{1}, []int64{int64(lm.v) + 7})))
		_, err = s.ReplayDeviceGraph(b.all())
		requireKind(t, err, ErrInvalidArgument, `"embed"`)
		bits := s.CheckDeviceCaptureError()
		require.NotZero(t, bits)
		require.Equal(t, bits, s.CheckDeviceCaptureError(), "reading does not clear")
		h1, err := b.h.Download()
		require.NoError(t, err)
		require.Equal(t, h0.Data(), h1.Data())
		l1, err := b.logits.Download()
		require.NoError(t, err)
		require.Equal(t, l0.Data(), l1.Data())
		// The graph is still captured: a good token replays, the bits stay until the reset.
		require.NoError(t, b.tok.Upload(tensor.MustTensor([]int64{1}, []int64{1})))
		ok, err := s.ReplayDeviceGraph(b.all())
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, bits, s.CheckDeviceCaptureError())
		require.NoError(t, s.ResetDeviceGraph())
		require.Zero(t, s.CheckDeviceCaptureError())
	})
}

// The generated small GPT, whose KV length grows every step: 32 greedy steps with KV
// bindings (capacity 64) give the eager Run's tokens and the reference's; every capture is
// refused before anything runs, naming the nodes whose outputs grow (the present KV Concats
// among them), and every step builds its own plan (Rebuilt).
func TestGPTKVGrowingDecodeWithBindings(t *testing.T) {
	raw, err := os.ReadFile("testdata/models/gpt_ref.json")
	require.NoError(t, err)
	var ref struct {
		Prompt []int64 `json:"prompt"`
		Seq    []int64 `json:"seq"`
	}
	require.NoError(t, json.Unmarshal(raw, &ref))
	const steps, heads, headDim, capacity = 32, 4, 16, 64
	kv := []string{"k0", "v0", "k1", "v1"}
	forBindingProviders(t, func(t *testing.T, opts []LoadOption) {
		// Eager: Run, feeding each present back.
		eager, err := Load("testdata/models/tiny_gpt_kv.onnx", opts...)
		require.NoError(t, err)
		defer eager.Close()
		past := map[string]tensor.Tensor{}
		for _, n := range kv {
			past[n] = tensor.MustTensor([]int64{1, heads, 0, headDim}, []float32{})
		}
		ids := ref.Prompt
		var want []int64
		for range steps {
			feeds := []NamedTensor{{Name: "input_ids", Tensor: tensor.MustTensor([]int64{1, int64(len(ids))}, ids)}}
			for _, n := range kv {
				feeds = append(feeds, NamedTensor{Name: "past_" + n, Tensor: past[n]})
			}
			outs, err := eager.Run(context.Background(), feeds)
			require.NoError(t, err)
			logits := outs[0].Data().([]float32)
			next := int64(argmax(logits[len(logits)-512:]))
			want = append(want, next)
			for i, n := range kv {
				past[n] = outs[1+i]
			}
			ids = []int64{next}
		}
		require.Equal(t, ref.Seq[len(ref.Prompt):], want[:len(ref.Seq)-len(ref.Prompt)])

		s, err := Load("testdata/models/tiny_gpt_kv.onnx", opts...)
		require.NoError(t, err)
		defer s.Close()
		var bindings []*DeviceBinding
		for _, n := range kv {
			b, err := s.AllocateDeviceBinding("past_"+n, "present_"+n, graph.Float, []int64{1, heads, capacity, headDim}, []int64{1, heads, 0, headDim})
			require.NoError(t, err)
			bindings = append(bindings, b)
		}
		ids = ref.Prompt
		var got []int64
		ctx := context.Background()
		for i := range steps {
			feeds := []NamedTensor{{Name: "input_ids", Tensor: tensor.MustTensor([]int64{1, int64(len(ids))}, ids)}}
			if i >= 2 {
				res, err := s.TryCaptureWithDeviceBindings(ctx, feeds, bindings)
				require.NoError(t, err)
				require.False(t, res.Captured)
				require.NotEmpty(t, res.Declines)
				for _, d := range res.Declines {
					require.Equal(t, SeamGrowingShape, d.SeamKind, d.Reason)
				}
				if i == 4 { // the last two steps fed one token each: only the KV length grew
					var names []string
					for _, d := range res.Declines {
						names = append(names, d.OpType)
					}
					t.Logf("growing nodes at step %d: %d (%v)", i, len(res.Declines), names)
					require.Contains(t, names, "Concat", "the present KV concatenations grow")
					require.Contains(t, names, "Attention", "attention reads the growing KV")
					require.NotContains(t, names, "LayerNormalization", "a token's activations do not grow")
					require.NotEmpty(t, res.Declines[0].Node)
				}
			}
			outs, err := s.RunWithDeviceBindings(ctx, feeds, bindings)
			require.NoError(t, err)
			require.True(t, outs[0].IsValid(), "logits are not bound")
			for j := 1; j < len(outs); j++ {
				require.False(t, outs[j].IsValid())
			}
			logits := outs[0].Data().([]float32)
			next := int64(argmax(logits[len(logits)-512:]))
			got = append(got, next)
			for _, b := range bindings {
				require.Equal(t, []int64{1, heads, int64(len(ref.Prompt) + i), headDim}, b.LogicalShape())
			}
			ids = []int64{next}
		}
		require.Equal(t, want, got)
		memo := s.DecodeMemoCounts()
		t.Logf("decode memo: %+v", memo)
		assert.Equal(t, uint64(1), memo.Primed)
		assert.Positive(t, memo.Rebuilt)
		assert.Zero(t, memo.Replayed, "no shape repeats")
		assert.Equal(t, uint64(steps), memo.Primed+memo.Rebuilt+memo.Ineligible)
		assert.True(t, slices.ContainsFunc(s.CaptureSegmentation(), func(d CaptureDecline) bool { return d.SeamKind == SeamGrowingShape }))
	})
}

// Under the default loom.jit=background, a plan built while its exact kernels compile runs
// shape-generic stand-ins: the capture declines, naming the nodes that run them (SeamNotWarmed),
// while the compile is held in flight and again once the kernels are loaded but not yet planned
// with; the step's next run plans with them, and the graph captured then replays the exact
// kernels, bit for bit the results of a session that compiled them on the run path. (Host
// only: the cuda provider ships this model's kernels, shape-generic, and compiles nothing.)
func TestCaptureDeclinesBackgroundStandIns(t *testing.T) {
	opts := []LoadOption{WithExecutionProvider(ProviderHost), WithIntraOpThreads(1)}
	release := make(chan struct{})
	restore := exec.SetBackgroundHook(func(ctx context.Context) {
		select {
		case <-release:
		case <-ctx.Done():
		}
	})
	defer restore()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	rnd := inferRand()
	lm := newRNNLM(t, rnd, 40, 24, false)
	const steps = 8
	first := int64(rnd.IntN(lm.v))
	exact, err := FromGraph(lm.model, sameKernels(opts)...)
	require.NoError(t, err)
	defer exact.Close()
	wantToks, wantLogits, _ := decodeEager(t, exact, lm, first, steps)

	s, err := FromGraph(lm.model, opts...) // loom.jit=background, the default
	require.NoError(t, err)
	defer s.Close()
	b := newLMBindings(t, s, lm, first)
	ctx := context.Background()
	restart := func() { // the state and the token of step 0
		require.NoError(t, b.h.Upload(tensor.MustTensor([]int64{1, int64(lm.h)}, make([]float32, lm.h))))
		require.NoError(t, b.tok.Upload(tensor.MustTensor([]int64{1}, []int64{first})))
	}
	for range 2 {
		_, err := s.RunWithDeviceBindings(ctx, nil, b.all())
		require.NoError(t, err)
	}
	res, err := s.TryCaptureWithDeviceBindings(ctx, nil, b.all())
	require.NoError(t, err)
	require.False(t, res.Captured, "the plan runs stand-ins")
	require.NotEmpty(t, res.Declines)
	var nodes []string
	for _, d := range res.Declines {
		assert.Equal(t, SeamNotWarmed, d.SeamKind)
		assert.Contains(t, d.Reason, "compiles in the background")
		nodes = append(nodes, d.Node+" "+d.OpType)
	}
	assert.Equal(t, []string{"proj MatMul", "head MatMul"}, nodes)
	assert.Contains(t, res.Reason, `stand-ins for "proj", "head" while the exact kernels compile in the background`)
	assert.Equal(t, 0, s.CapturedGraphSegmentCount())
	_, err = s.ReplayDeviceGraph(b.all())
	requireKind(t, err, ErrNotCaptured, "")

	close(release)
	released = true
	require.NoError(t, s.waitBackground(ctx))
	res, err = s.TryCaptureWithDeviceBindings(ctx, nil, b.all())
	require.NoError(t, err)
	require.False(t, res.Captured, "the kernels are loaded but the plan still runs the stand-ins")
	assert.Contains(t, res.Reason, "are now loaded: run the step once more")
	require.Len(t, res.Declines, 2)
	assert.Contains(t, res.Declines[0].Reason, "is loaded and the step's next run plans with it")

	_, err = s.RunWithDeviceBindings(ctx, nil, b.all()) // plans the step with the exact kernels
	require.NoError(t, err)
	restart()
	var toks []int64
	for i := range steps {
		if i == 0 {
			res, err := s.TryCaptureWithDeviceBindings(ctx, nil, b.all())
			require.NoError(t, err)
			require.True(t, res.Captured, res.Reason)
			require.Empty(t, res.Declines)
		} else {
			ok, err := s.ReplayDeviceGraph(b.all())
			require.NoError(t, err)
			require.True(t, ok)
		}
		tok, logits := b.nextToken(t)
		require.Equal(t, wantLogits[i], logits, "step %d: not the exact kernels' result", i)
		toks = append(toks, tok)
	}
	require.Equal(t, wantToks, toks)
	st := s.CacheStats()
	assert.Equal(t, int64(1), st.ProvisionalPlans)
	assert.Equal(t, int64(1), st.ReplannedPlans)
}
