package session

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// What the run-path fuzzers (fuzz_run_test.go) found, each fixed at its cause: inputs that
// panicked inside host functions, sizes the element limit did not bound, and wrong results.

// dynamicSession is hostileSession with every input declared without a shape (unranked), so
// that inputs of any shape reach the op at run time.
func dynamicSession(t *testing.T, executor string, n *graph.Node, opset int64, in []tensor.Tensor, more ...LoadOption) *InferenceSession {
	t.Helper()
	return singleNodeSession(t, executor, n, opset, in, func(v tensor.Tensor) graph.Type { return graph.UnrankedTensor(v.DType()) }, more...)
}

// runDynamicCases is runHostileCases over dynamicSession: good inputs (when given) run, bad
// ones fail with an *Error of kind want naming the node and saying each of says, and the
// session still runs the good ones.
func runDynamicCases(t *testing.T, cases []hostileCase) {
	for _, c := range cases {
		for _, executor := range traceExecutors {
			t.Run(c.name+"/"+executor, func(t *testing.T) {
				s := dynamicSession(t, executor, c.node, c.opset, c.bad, c.opts...)
				good := func() {
					if c.good == nil {
						return
					}
					for range 2 {
						_, err := s.Run(context.Background(), feedsOf(c.good))
						require.NoError(t, err, "good inputs")
					}
				}
				good()
				_, err := s.Run(context.Background(), feedsOf(c.bad))
				require.Error(t, err)
				var e *tensor.Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, c.node.Name, e.Node, "%v", err)
				assert.ErrorIs(t, err, c.want, "%v", err)
				assert.NotErrorIs(t, err, tensor.ErrInternal, "%v", err)
				for _, want := range c.says {
					assert.Contains(t, err.Error(), want)
				}
				good()
			})
		}
	}
}

func f32s(dims []int64, v ...float32) tensor.Tensor {
	if v == nil {
		v = make([]float32, numelOf(dims))
	}
	return tensor.MustTensor(dims, v)
}

func f64s(dims []int64, v ...float64) tensor.Tensor {
	if v == nil {
		v = make([]float64, numelOf(dims))
	}
	return tensor.MustTensor(dims, v)
}

func i64s(dims []int64, v ...int64) tensor.Tensor {
	if v == nil {
		v = make([]int64, numelOf(dims))
	}
	return tensor.MustTensor(dims, v)
}

func numelOf(dims []int64) int {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	return n
}

func withAttrs(n *graph.Node, attrs ...*graph.Attribute) *graph.Node {
	n.Attrs = append(n.Attrs, attrs...)
	return n
}

// Inputs that panicked inside host functions (index out of range, slice bounds, makeslice, an
// endless loop) are errors naming the node and what is wrong.
func TestFuzzFoundPanics(t *testing.T) {
	inv := tensor.ErrInvalidArgument
	v := func(n int) tensor.Tensor { return f32s([]int64{int64(n)}) }
	scalar := f32s([]int64{}, 1)
	d := func(n int) tensor.Tensor { return f64s([]int64{int64(n)}) }
	gnd := graph.NewNode("gnd", "GatherND", nil, []string{"y"})
	pad := withAttrs(graph.NewNode("pad", "Pad", nil, []string{"y"}), graph.StringAttr("mode", "wrap"))
	runDynamicCases(t, []hostileCase{
		// index out of range [-1]: scalar indices.
		{"gathernd_scalar_indices", gnd, 13, []tensor.Tensor{f32s([]int64{2, 2}), i64s([]int64{1, 2}, 1, 0)},
			[]tensor.Tensor{f32s([]int64{2, 2}), i64s([]int64{}, 0)}, inv, []string{"rank >= 1"}, nil},
		{"gathernd_long_tuples", gnd, 13, []tensor.Tensor{f32s([]int64{2, 2}), i64s([]int64{1, 2}, 1, 0)},
			[]tensor.Tensor{f32s([]int64{2, 2}), i64s([]int64{1, 3}, 1, 0, 0)}, inv, []string{"tuples of 3 indices"}, nil},
		{"gathernd_batch_dims_-1", withAttrs(graph.NewNode("gnd", "GatherND", nil, []string{"y"}), graph.IntAttr("batch_dims", -1)), 13, nil,
			[]tensor.Tensor{f32s([]int64{2, 2}), i64s([]int64{1, 2}, 1, 0)}, inv, []string{"batch_dims -1"}, nil},
		// index out of range [0] with length 0: indices of another rank than the data's.
		{"gatherelements_scalar_indices", graph.NewNode("ge", "GatherElements", nil, []string{"y"}), 13,
			[]tensor.Tensor{f32s([]int64{0, 1}), i64s([]int64{0, 1})}, []tensor.Tensor{f32s([]int64{0, 1}), i64s([]int64{}, 0)}, inv,
			[]string{"must have the rank of the data"}, nil},
		// makeslice: len out of range: an axis of size 1 split evenly into 3 (parts 1, 0, -1).
		{"split_axis_shorter_than_outputs", withAttrs(graph.NewNode("split", "Split", nil, []string{"a", "b", "c"}), graph.IntAttr("num_outputs", 3)), 18,
			[]tensor.Tensor{f64s([]int64{3})}, []tensor.Tensor{f64s([]int64{1})}, inv, []string{"axis 0 of size 1 cannot be split into [1 0 -1]"}, nil},
		// index out of range [0] with length 0: a scalar scattered into.
		{"scatterelements_scalar", graph.NewNode("se", "ScatterElements", nil, []string{"y"}), 13,
			[]tensor.Tensor{v(3), i64s([]int64{1}, 2), v(1)}, []tensor.Tensor{scalar, i64s([]int64{}, 0), scalar}, inv, []string{"rank >= 1"}, nil},
		// A scalar has no axis 0 (NormAxis took axis 0 of rank 0, then indexed it).
		{"meanvariancenormalization_scalar", graph.NewNode("mvn", "MeanVarianceNormalization", nil, []string{"y"}), 13,
			[]tensor.Tensor{f32s([]int64{1, 2, 2, 2})}, []tensor.Tensor{scalar}, inv, []string{"rank 0"}, nil},
		{"hardmax_scalar", withAttrs(graph.NewNode("hm", "Hardmax", nil, []string{"y"}), graph.IntAttr("axis", 0)), 13,
			[]tensor.Tensor{v(3)}, []tensor.Tensor{scalar}, inv, []string{"rank 0"}, nil},
		// index out of range [0] with length 0: an empty scalar input.
		{"cumsum_empty_axis", graph.NewNode("cumsum", "CumSum", nil, []string{"y"}), 14, []tensor.Tensor{v(3), i64s([]int64{}, 0)},
			[]tensor.Tensor{v(3), i64s([]int64{0})}, inv, []string{"the axis (input 1) must hold one value"}, nil},
		{"trilu_empty_k", graph.NewNode("trilu", "Trilu", nil, []string{"y"}), 14, []tensor.Tensor{f32s([]int64{2, 2}), i64s([]int64{}, 1)},
			[]tensor.Tensor{f32s([]int64{2, 2}), i64s([]int64{0})}, inv, []string{"k (input 1) must hold one value"}, nil},
		{"topk_empty_k", graph.NewNode("topk", "TopK", nil, []string{"y", "i"}), 11, []tensor.Tensor{v(3), i64s([]int64{1}, 2)},
			[]tensor.Tensor{v(3), i64s([]int64{0})}, inv, []string{"K (input 1) must hold one value"}, nil},
		{"clip_empty_min", graph.NewNode("clip", "Clip", nil, []string{"y"}), 13, []tensor.Tensor{d(3), f64s([]int64{}, 1)},
			[]tensor.Tensor{d(3), d(0)}, inv, []string{"min (input 1) must hold one value"}, nil},
		// makeslice: len out of range: pads that crop past the data (mode wrap: the host
		// function; the pad kernel's planner checks the other modes).
		{"pad_negative_output", pad, 19, []tensor.Tensor{v(4), i64s([]int64{2}, 1, 1)}, []tensor.Tensor{v(4), i64s([]int64{2}, -3, -3)}, inv,
			[]string{"the output would have the shape [-2]"}, nil},
		// index out of range: pads of the wrong length for the axes.
		{"pad_axes_short_pads", pad, 19, []tensor.Tensor{f32s([]int64{2, 2}), i64s([]int64{2}, 1, 1), tensor.Tensor{}, i64s([]int64{1}, 1)},
			[]tensor.Tensor{f32s([]int64{2, 2}), i64s([]int64{2}, 1, 1), tensor.Tensor{}, i64s([]int64{2}, 0, 1)}, inv, []string{"hold 2 values for the 2 axes"}, nil},
		// An axis of size 0 has nothing to wrap around (or reflect, where the host function
		// looped forever, or repeat at the edge).
		{"pad_wrap_empty_axis", pad, 19,
			[]tensor.Tensor{v(3), i64s([]int64{2}, 1, 1)}, []tensor.Tensor{v(0), i64s([]int64{2}, 1, 1)}, inv, []string{`mode "wrap" cannot pad axis 0 of size 0`}, nil},
	})
}

// The host functions of the normalizations and Conv check their per-channel inputs (the
// kernels' planners check theirs, but a model reaches the host functions where the planners
// decline: running statistics outputs, types other than float32, an old opset).
func TestFuzzFoundHostChannelChecks(t *testing.T) {
	d := func(n int) tensor.Tensor { return f64s([]int64{int64(n)}) }
	x := f64s([]int64{1, 3, 2})
	for _, c := range []struct {
		op   string
		in   []tensor.Tensor
		want []string
	}{
		// slice bounds out of range [2:0]: X's rank below 2.
		{"BatchNormalization", []tensor.Tensor{f64s([]int64{}, 1), d(1), d(1), d(1), d(1)}, []string{"rank >= 2"}},
		// index out of range: a scale shorter than the channels.
		{"BatchNormalization", []tensor.Tensor{x, d(2), d(3), d(3), d(3)}, []string{"scale (input 1, shape [2]) has 2 values", "3"}},
		{"InstanceNormalization", []tensor.Tensor{x, d(3), d(1)}, []string{"B (input 2, shape [1]) has 1 values"}},
		// index out of range: a bias shorter than the output channels.
		{"Conv", []tensor.Tensor{f64s([]int64{1, 1, 3, 3}), f64s([]int64{2, 1, 1, 1}), d(1)}, []string{"the bias B (input 2, shape [1]) has 1 values", "output channel: 2"}},
	} {
		_, err := ops.HostOps[c.op](nil, graph.NewNode("n", c.op, nil, []string{"y"}), c.in)
		require.Error(t, err, c.op)
		for _, want := range c.want {
			assert.Contains(t, err.Error(), want, c.op)
		}
	}
}

// Sizes the element limit did not bound: window generators (up to 2^28 whatever the limit),
// MelWeightMatrix (2^39 elements), Conv and the pools fed huge pads, Pad's output (in the host
// functions, which the kernels' planners leave doubles and Pad's wrap mode to).
func TestFuzzFoundUnboundedSizes(t *testing.T) {
	over := tensor.ErrOverBudget
	limit := []LoadOption{WithLimits(graph.Limits{MaxElements: 1 << 16})}
	// Doubles: the host functions (the kernels' planners bound float32 outputs already).
	x := f64s([]int64{1, 1, 2, 2})
	w := f64s([]int64{1, 1, 1, 1})
	pads := graph.IntsAttr("pads", 300, 300, 300, 300)
	runDynamicCases(t, []hostileCase{
		{"hannwindow_2^20", graph.NewNode("hann", "HannWindow", nil, []string{"y"}), 17, []tensor.Tensor{i64s([]int64{}, 8)},
			[]tensor.Tensor{i64s([]int64{}, 1<<20)}, over, []string{"the window would have the shape [1048576]"}, limit},
		{"melweightmatrix_2049x1024", graph.NewNode("mel", "MelWeightMatrix", nil, []string{"y"}), 17,
			[]tensor.Tensor{i64s([]int64{}, 8), i64s([]int64{}, 64), i64s([]int64{}, 16000), f32s([]int64{}, 0), f32s([]int64{}, 4000)},
			[]tensor.Tensor{i64s([]int64{}, 1024), i64s([]int64{}, 4096), i64s([]int64{}, 16000), f32s([]int64{}, 0), f32s([]int64{}, 4000)},
			over, []string{"[2049 1024]"}, limit},
		{"conv_pads_300", withAttrs(graph.NewNode("conv", "Conv", nil, []string{"y"}), pads), 11, nil, []tensor.Tensor{x, w}, over,
			[]string{"[1 1 602 602]"}, limit},
		{"maxpool_pads_300", withAttrs(graph.NewNode("pool", "MaxPool", nil, []string{"y"}), pads, graph.IntsAttr("kernel_shape", 1, 1)), 11, nil,
			[]tensor.Tensor{x}, over, []string{"[1 1 602 602]"}, limit},
		{"averagepool_pads_300", withAttrs(graph.NewNode("pool", "AveragePool", nil, []string{"y"}), pads, graph.IntsAttr("kernel_shape", 1, 1)), 11, nil,
			[]tensor.Tensor{x}, over, []string{"[1 1 602 602]"}, limit},
		{"pad_wrap_602x602", withAttrs(graph.NewNode("pad", "Pad", nil, []string{"y"}), graph.StringAttr("mode", "wrap")), 19, []tensor.Tensor{x, i64s([]int64{8})},
			[]tensor.Tensor{x, i64s([]int64{8}, 0, 0, 300, 300, 0, 0, 300, 300)}, over, []string{"[1 1 602 602]"}, limit},
	})
}

// Wrong results: a kernel_shape other than the weight's was used for the output's size;
// GlobalAveragePool (and its kin) of a rank-2 input averaged every value into one; Pad's
// "wrap" mode padded with the constant; LayerNormalization over an empty axis returned
// statistics whose shape held one value and whose data none.
func TestFuzzFoundWrongResults(t *testing.T) {
	runDynamicCases(t, []hostileCase{
		{"conv_kernel_shape_not_the_weights", withAttrs(graph.NewNode("conv", "Conv", nil, []string{"y"}), graph.IntsAttr("kernel_shape", 3, 3)), 11, nil,
			[]tensor.Tensor{f32s([]int64{1, 1, 3, 3}), f32s([]int64{1, 1, 1, 1})}, tensor.ErrInvalidArgument, []string{"kernel_shape [3 3] differs from the weight's spatial shape [1 1]"}, nil},
		{"globalaveragepool_rank_1", graph.NewNode("gap", "GlobalAveragePool", nil, []string{"y"}), 13, nil,
			[]tensor.Tensor{f32s([]int64{2}, 1, 2)}, tensor.ErrInvalidArgument, []string{"rank >= 2"}, nil},
	})
	run := func(t *testing.T, executor string, n *graph.Node, opset int64, in ...tensor.Tensor) []tensor.Tensor {
		t.Helper()
		outs, err := dynamicSession(t, executor, n, opset, in).Run(context.Background(), feedsOf(in))
		require.NoError(t, err)
		return outs
	}
	for _, executor := range traceExecutors {
		t.Run(executor, func(t *testing.T) {
			x := f32s([]int64{2, 1}, -2, 5)
			for op, want := range map[string][]float64{"GlobalAveragePool": {-2, 5}, "GlobalMaxPool": {-2, 5}, "GlobalLpPool": {2, 5}} {
				y := run(t, executor, graph.NewNode("g", op, nil, []string{"y"}), 13, x)[0]
				assert.Equal(t, []int64{2, 1}, y.Dims(), "%s of (N, C) pools each value alone", op)
				assert.InDeltaSlice(t, want, tensor.Float64s(y), 1e-6, op)
			}
			y := run(t, executor, withAttrs(graph.NewNode("pad", "Pad", nil, []string{"y"}), graph.StringAttr("mode", "wrap")), 19,
				f32s([]int64{3}, 1, 2, 3), i64s([]int64{2}, 2, 1))[0]
			assert.Equal(t, []float64{2, 3, 1, 2, 3, 1}, tensor.Float64s(y), "wrap pads with the other end")
			outs := run(t, executor, graph.NewNode("ln", "LayerNormalization", nil, []string{"y", "mean", "inv"}), 17,
				f64s([]int64{1, 2, 0}), f64s([]int64{0})) // doubles: the host function
			for _, stat := range outs[1:] {
				assert.Equal(t, []int64{1, 2, 1}, stat.Dims())
				assert.Len(t, tensor.Float64s(stat), 2, "one value per group")
			}
		})
	}
	_, err := tensor.FromFloat64s(graph.Float, []int64{1, 1}, nil)
	assert.ErrorIs(t, err, tensor.ErrInvalidArgument, "values that do not fill the shape are refused")
}

// TfIdfVectorizer's loops stop at the pool's longest gram and at the row, whatever
// max_gram_length and max_skip_count say (2^31 - 1 once ran for minutes, matching nothing),
// and a negative ngram_indexes entry is refused (it indexed outside the output row).
func TestTfIdfVectorizerBoundsItsLoops(t *testing.T) {
	attrs := func(indexes ...int64) *graph.Node {
		return graph.NewNode("tfidf", "TfIdfVectorizer", []string{"x"}, []string{"y"},
			graph.IntAttr("min_gram_length", 1), graph.IntAttr("max_gram_length", 1<<31-1), graph.IntAttr("max_skip_count", 1<<31-1),
			graph.StringAttr("mode", "TF"), graph.IntsAttr("ngram_counts", 0, 2), graph.IntsAttr("ngram_indexes", indexes...),
			graph.IntsAttr("pool_int64s", 2, 3, 5, 4))
	}
	x := i64s([]int64{5}, 2, 3, 5, 4, 2)
	for _, executor := range traceExecutors {
		s := dynamicSession(t, executor, attrs(0, 1, 2), 18, []tensor.Tensor{x})
		done := make(chan struct{})
		var outs []tensor.Tensor
		var err error
		go func() {
			defer close(done)
			outs, err = s.Run(context.Background(), feedsOf([]tensor.Tensor{x}))
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: TfIdfVectorizer with max_gram_length 2^31-1 still runs after 30 s", executor)
		}
		require.NoError(t, err, executor)
		// Unigrams 2 (twice) and 3; the bigram (5, 4) once (at skip 0; the skips pair other
		// tokens).
		assert.Equal(t, []float32{2, 1, 1}, outs[0].Data(), executor)
	}
	runDynamicCases(t, []hostileCase{{"tfidf_negative_index", attrs(0, -1, 2), 18, nil, []tensor.Tensor{x}, tensor.ErrInvalidArgument,
		[]string{"ngram_indexes holds -1"}, nil}})
}

// Gather with an empty output still checks the indices the run gives: a compiled plan has no
// kernel to run then (nothing to copy), and let an out-of-range index through where the
// interpreter refused it.
func TestGatherEmptyOutputChecksIndices(t *testing.T) {
	g := withAttrs(graph.NewNode("g", "Gather", nil, []string{"y"}), graph.IntAttr("axis", 1))
	empty := f32s([]int64{0, 1})
	runDynamicCases(t, []hostileCase{{"gather_empty_output_bad_index", g, 11,
		[]tensor.Tensor{empty, i64s([]int64{1}, 0)}, []tensor.Tensor{empty, i64s([]int64{1}, -2)},
		tensor.ErrInvalidArgument, []string{"index -2 out of range"}, nil}})
}

// A value the model leaves untyped gets its type from shape inference, and the operator that
// reads it is checked against that type as against a declared one: an int8 Div feeding a
// GlobalAveragePool (whose schema allows floating types only) is refused when the model
// loads, naming the node and the type, where it used to run (and give the interpreter's
// integer mean, not any defined result).
func TestInferredTypesMeetTheSchemas(t *testing.T) {
	model := func(dtype graph.DataType) *graph.Model {
		g := &graph.Graph{Name: "pool"}
		g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(dtype, graph.Shape{graph.DimOf(1), graph.DimOf(2), graph.DimOf(3)}))}
		g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
		g.Nodes = []*graph.Node{
			graph.NewNode("div", "Div", []string{"x", "x"}, []string{"q"}),
			graph.NewNode("gap", "GlobalAveragePool", []string{"q"}, []string{"y"}),
		}
		m, err := graph.FromGraph("pool", g, map[string]int64{"": 21})
		require.NoError(t, err)
		return m
	}
	m := model(graph.Int8)
	require.NoError(t, m.Check(), "as written, q's type is not known")
	_, err := FromGraph(m, WithExecutionProvider(ProviderHost))
	require.ErrorIs(t, err, tensor.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "inferred types")
	assert.Contains(t, err.Error(), `node "gap" (GlobalAveragePool) value "q": input "X" has type tensor(int8), not allowed`)

	// The same with float: it loads and runs.
	s, err := FromGraph(model(graph.Float), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	outs, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "x", Tensor: f32s([]int64{1, 2, 3}, 1, 2, 3, 4, 5, 6)}})
	require.NoError(t, err)
	assert.Equal(t, []float64{1, 1}, tensor.Float64s(outs[0]))
}
