package session

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// No model or input takes the process down (issue 18): a bad value fed to an op is an error
// naming the node, a panic inside an op is recovered as one, a size over the element limit is
// refused before anything is allocated, and a closed session keeps nothing alive.

// hostileSession is a host session running executor over a model of the one node n, every
// present input a graph input of its value's type and shape; it returns the session and the
// feeds of in.
func hostileSession(t *testing.T, executor string, n *graph.Node, opset int64, in []tensor.Tensor, more ...LoadOption) (*InferenceSession, []tensor.NamedTensor) {
	t.Helper()
	s := singleNodeSession(t, executor, n, opset, in, func(v tensor.Tensor) graph.Type {
		return graph.TensorType(v.DType(), graph.ShapeOf(v.Dims()...))
	}, more...)
	return s, feedsOf(in)
}

// singleNodeSession is a host session running executor over a model of the one node n, every
// present input of in a graph input of the type typeOf gives it.
func singleNodeSession(t *testing.T, executor string, n *graph.Node, opset int64, in []tensor.Tensor, typeOf func(tensor.Tensor) graph.Type, more ...LoadOption) *InferenceSession {
	t.Helper()
	s, err := nodeSessionWith(t, executor, n, map[string]int64{"": opset}, in, typeOf, more...)
	require.NoError(t, err)
	return s
}

// nodeSessionWith is singleNodeSession with the model's opset imports given, returning the load
// error (nil session) rather than failing.
func nodeSessionWith(t *testing.T, executor string, n *graph.Node, imports map[string]int64, in []tensor.Tensor, typeOf func(tensor.Tensor) graph.Type, more ...LoadOption) (*InferenceSession, error) {
	t.Helper()
	g := &graph.Graph{Name: "one_node"}
	node := *n
	node.Inputs = make([]string, len(in))
	for i, v := range in {
		if !v.IsValid() {
			continue
		}
		node.Inputs[i] = fmt.Sprintf("in%d", i)
		g.Inputs = append(g.Inputs, graph.Input(node.Inputs[i], typeOf(v)))
	}
	for _, o := range node.Outputs {
		g.Outputs = append(g.Outputs, graph.Output(o, graph.Type{}))
	}
	g.Nodes = []*graph.Node{&node}
	m, err := graph.FromGraph(g.Name, g, imports)
	if err != nil {
		return nil, err
	}
	s, err := FromGraph(m, tracedOptions(nil, executor, more...)...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, nil
}

func feedsOf(in []tensor.Tensor) []tensor.NamedTensor {
	var feeds []tensor.NamedTensor
	for i, v := range in {
		if v.IsValid() {
			feeds = append(feeds, tensor.NamedTensor{Name: fmt.Sprintf("in%d", i), Tensor: v})
		}
	}
	return feeds
}

func f32Scalar(v float32) tensor.Tensor { return tensor.MustTensor([]int64{}, []float32{v}) }

// hostileCase is a one-node model fed good inputs (which must run) and bad ones (which must
// fail with an *Error of kind want naming the node, whose text holds every string of says).
type hostileCase struct {
	name      string
	node      *graph.Node
	opset     int64
	good, bad []tensor.Tensor
	want      error
	says      []string
	opts      []LoadOption
}

// runHostileCases runs each case on both executors: good inputs twice (the compiled plan's
// executor plans them), the bad ones, then the good ones again on the same session.
func runHostileCases(t *testing.T, cases []hostileCase) {
	for _, c := range cases {
		for _, executor := range traceExecutors {
			t.Run(c.name+"/"+executor, func(t *testing.T) {
				s, _ := hostileSession(t, executor, c.node, c.opset, c.good, c.opts...)
				checkHostileCase(t, s, c)
			})
		}
	}
}

// checkHostileCase runs c on s: its good inputs twice, its bad ones (an *Error of kind c.want
// naming the node and saying c.says), then the good ones again.
func checkHostileCase(t *testing.T, s *InferenceSession, c hostileCase) {
	t.Helper()
	good := feedsOf(c.good)
	for range 2 {
		_, err := s.Run(context.Background(), good)
		require.NoError(t, err, "good inputs")
	}
	_, err := s.Run(context.Background(), feedsOf(c.bad))
	require.Error(t, err)
	var e *tensor.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, c.node.Name, e.Node, "%v", err)
	assert.Equal(t, c.node.OpType, e.OpType)
	assert.ErrorIs(t, err, c.want, "%v", err)
	assert.NotErrorIs(t, err, tensor.ErrInternal, "%v", err)
	for _, want := range c.says {
		assert.Contains(t, err.Error(), want)
	}
	_, err = s.Run(context.Background(), good)
	require.NoError(t, err, "the session still runs good inputs")
}

// The inputs that panicked inside host functions (ScatterND's index out of range, OneHot's
// negative depth, Range's NaN or infinite limit) are errors naming the node, the input and
// the value.
func TestHostOpsRefuseBadValues(t *testing.T) {
	x := tensor.MustTensor([]int64{4, 3}, make([]float32, 12))
	upd := tensor.MustTensor([]int64{1, 3}, []float32{1, 2, 3})
	scatter := func(idx int64) []tensor.Tensor {
		return []tensor.Tensor{x, tensor.MustTensor([]int64{1, 1}, []int64{idx}), upd}
	}
	oneHot := func(depth int64) []tensor.Tensor {
		return []tensor.Tensor{tensor.MustTensor([]int64{3}, []int64{0, 1, 2}), tensor.MustTensor([]int64{}, []int64{depth}),
			tensor.MustTensor([]int64{2}, []float32{0, 1})}
	}
	rng := func(limit float32) []tensor.Tensor {
		return []tensor.Tensor{f32Scalar(0), f32Scalar(limit), f32Scalar(1)}
	}
	scatterNode := graph.NewNode("scatter", "ScatterND", nil, []string{"y"})
	oneHotNode := graph.NewNode("onehot", "OneHot", nil, []string{"y"})
	rangeNode := graph.NewNode("range", "Range", nil, []string{"y"})
	inv := tensor.ErrInvalidArgument
	runHostileCases(t, []hostileCase{
		{"scatternd_index_4", scatterNode, 18, scatter(1), scatter(4), inv, []string{"index 4", "indices"}, nil},
		{"scatternd_index_-5", scatterNode, 18, scatter(-1), scatter(-5), inv, []string{"index -5", "indices"}, nil},
		{"scatternd_index_2^40", scatterNode, 18, scatter(3), scatter(1 << 40), inv, []string{"index 1099511627776", "indices"}, nil},
		{"onehot_depth_-3", oneHotNode, 11, oneHot(3), oneHot(-3), inv, []string{"depth (input 1) is -3"}, nil},
		{"range_limit_nan", rangeNode, 11, rng(5), rng(float32(math.NaN())), inv, []string{"limit", "NaN"}, nil},
		{"range_limit_inf", rangeNode, 11, rng(5), rng(float32(math.Inf(1))), inv, []string{"limit", "+Inf"}, nil},
		{"range_limit_-inf", rangeNode, 11, rng(5), rng(float32(math.Inf(-1))), inv, []string{"limit", "-Inf"}, nil},
	})
}

// Sizes: a negative dimension is an error naming the node; a tensor over the element limit
// (the loader's, graph.Limits.MaxElements, 2^34 by default, or WithLimits') is refused
// before it is allocated, naming the node and the size asked for.
func TestShapeOpsRefuseBadSizes(t *testing.T) {
	i64 := func(v ...int64) tensor.Tensor { return tensor.MustTensor([]int64{int64(len(v))}, v) }
	i64Scalar := func(v int64) tensor.Tensor { return tensor.MustTensor([]int64{}, []int64{v}) }
	one := tensor.MustTensor([]int64{1, 1}, []float32{7})
	two := tensor.MustTensor([]int64{2, 1}, []float32{7, 8})
	small := WithLimits(graph.Limits{MaxElements: 1 << 28})
	cos := graph.NewNode("cos", "ConstantOfShape", nil, []string{"y"})
	rangeNode := graph.NewNode("range", "Range", nil, []string{"y"})
	oneHot := func(depth int64) []tensor.Tensor {
		return []tensor.Tensor{i64(0), i64Scalar(depth), tensor.MustTensor([]int64{2}, []float32{0, 1})}
	}
	expand := graph.NewNode("expand", "Expand", nil, []string{"y"})
	tile := graph.NewNode("tile", "Tile", nil, []string{"y"})
	inv, over := tensor.ErrInvalidArgument, tensor.ErrOverBudget
	runHostileCases(t, []hostileCase{
		{"constantofshape_negative", cos, 18, []tensor.Tensor{i64(2, 3)}, []tensor.Tensor{i64(-5, -5)}, inv, []string{"[-5 -5]", "negative"}, nil},
		{"constantofshape_1e12", cos, 18, []tensor.Tensor{i64(2, 3)}, []tensor.Tensor{i64(1e6, 1e6)}, over, []string{"1000000000000 elements", "limit of 17179869184"}, nil},
		{"range_1e12", rangeNode, 11, []tensor.Tensor{i64Scalar(0), i64Scalar(10), i64Scalar(1)}, []tensor.Tensor{i64Scalar(0), i64Scalar(1e12), i64Scalar(1)},
			over, []string{"1000000000000 elements"}, nil},
		{"onehot_depth_1e11", graph.NewNode("onehot", "OneHot", nil, []string{"y"}), 11, oneHot(4), oneHot(1e11), over, []string{"100000000000 elements"}, nil},
		{"expand_4e10", expand, 13, []tensor.Tensor{one, i64(2, 3)}, []tensor.Tensor{one, i64(2e5, 2e5)}, over, []string{"40000000000 elements"}, nil},
		{"expand_60000x60000", expand, 13, []tensor.Tensor{one, i64(2, 3)}, []tensor.Tensor{one, i64(60000, 60000)}, over,
			[]string{"3600000000 elements", "limit of 268435456"}, []LoadOption{small}},
		{"expand_negative", expand, 13, []tensor.Tensor{one, i64(2, 3)}, []tensor.Tensor{one, i64(1, -3)}, inv, []string{"-3"}, nil},
		{"tile_4e10", tile, 13, []tensor.Tensor{one, i64(2, 3)}, []tensor.Tensor{one, i64(2e5, 2e5)}, over, []string{"40000000000 elements"}, nil},
		{"tile_30000x30000", tile, 13, []tensor.Tensor{one, i64(2, 3)}, []tensor.Tensor{one, i64(30000, 30000)}, over,
			[]string{"900000000 elements", "limit of 268435456"}, []LoadOption{small}},
		{"tile_negative", tile, 13, []tensor.Tensor{one, i64(2, 3)}, []tensor.Tensor{one, i64(2, -3)}, inv, []string{"-3"}, nil},
		{"tile_overflow", tile, 13, []tensor.Tensor{two, i64(2, 3)}, []tensor.Tensor{two, i64(1<<62, 1)}, inv, []string{"overflows"}, nil},
	})
	_, err := FromGraph(mlpModel(t, randomF32(inferRand(), 4), randomF32(inferRand(), 2), 2, 2), WithLimits(graph.Limits{MaxElements: -1}))
	assert.ErrorIs(t, err, tensor.ErrInvalidArgument, "negative limits are refused")
}

// A panic inside an op's function fails the run with an *Error of kind ErrInternal naming the
// node, with the panic value and stack in its *PanicError cause, on both executors (the
// interpreter and a compiled plan's host step), and the next run of the session succeeds.
func TestRunRecoversOpPanic(t *testing.T) {
	var panicking atomic.Bool
	restore := exec.WrapRun("Det", func(det exec.RunFunc) exec.RunFunc {
		return func(rc *exec.RunCtx, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
			if panicking.Load() {
				var none []int
				_ = none[len(in)] // index out of range
			}
			return det(rc, n, in)
		}
	})
	defer restore()
	x := tensor.MustTensor([]int64{2, 2}, []float32{1, 2, 3, 4}) // det -2
	for _, executor := range traceExecutors {
		t.Run(executor, func(t *testing.T) {
			s, feeds := hostileSession(t, executor, graph.NewNode("det", "Det", nil, []string{"y"}), 13, []tensor.Tensor{x})
			check := func() {
				t.Helper()
				outs, err := s.Run(context.Background(), feeds)
				require.NoError(t, err)
				assert.InDelta(t, -2, tensor.Float64s(outs[0])[0], 1e-5)
			}
			check()
			check()
			panicking.Store(true)
			_, err := s.Run(context.Background(), feeds)
			panicking.Store(false)
			require.Error(t, err)
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, "det", e.Node)
			assert.Equal(t, "Det", e.OpType)
			assert.ErrorIs(t, err, ErrInternal)
			var p *PanicError
			require.ErrorAs(t, err, &p)
			assert.Contains(t, fmt.Sprint(p.Value), "index out of range")
			var re runtime.Error
			assert.ErrorAs(t, err, &re, "the runtime error is in the chain")
			assert.Contains(t, string(p.Stack), "robustness_test.go", "the stack reaches the panic")
			assert.Contains(t, err.Error(), `node "det" (Det)`)
			check()
			if executor == exec.ExecutorPlan {
				plans := s.ExecutionPlans()
				require.Len(t, plans, 1)
				assert.True(t, plans[0].Planned, "the panic ran in the plan's host step: %s", plans[0].Reason)
			}
		})
	}
}

// Closed sessions keep nothing alive: loading, running and closing a model many times leaves
// the heap where it was, and the model's graph is collected (a global cache of the
// interpreter keyed by graph kept every model ever run).
func TestClosedSessionsRetainNothing(t *testing.T) {
	// y = Max(x, w) in double: host functions only (no kernel to load per session), and a
	// 64 KiB weight, so that a model kept per cycle shows at once.
	const n = 8192
	rnd := inferRand()
	w := make([]float64, n)
	for i := range w {
		w[i] = rnd.Float64()
	}
	g := &graph.Graph{Name: "max"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Double, graph.ShapeOf(n)))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.AddInitializer(graph.TensorFromFloat64("w", []int64{n}, w))
	g.Nodes = []*graph.Node{graph.NewNode("max", "Max", []string{"x", "w"}, []string{"y"})}
	m, err := graph.FromGraph("max", g, map[string]int64{"": 13})
	require.NoError(t, err)
	data, err := m.Marshal()
	require.NoError(t, err)
	x := []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{n}, make([]float64, n))}}
	cycle := func() weak.Pointer[graph.Graph] {
		s, err := LoadBytes(data, WithExecutionProvider(ProviderHost), WithIntraOpThreads(1))
		require.NoError(t, err)
		for range 2 { // traced, then planned
			outs, err := s.Run(context.Background(), x)
			require.NoError(t, err)
			require.Equal(t, w, tensor.Float64s(outs[0]))
		}
		g := weak.Make(s.Graph().Graph)
		require.NoError(t, s.Close())
		return g
	}
	heap := func() uint64 {
		var ms runtime.MemStats
		for range 3 {
			runtime.GC()
		}
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	start := time.Now()
	for range 20 {
		cycle()
	}
	before := heap()
	const cycles = 2000
	var last weak.Pointer[graph.Graph]
	for range cycles {
		last = cycle()
	}
	after := heap()
	t.Logf("%d cycles in %v; heap %d -> %d bytes", cycles, time.Since(start), before, after)
	assert.Nil(t, last.Value(), "a closed session's graph is collected")
	// A model kept per cycle is over 64 KiB (125 MiB in all); allow 4 MiB of noise.
	assert.Less(t, int64(after)-int64(before), int64(4<<20), "the heap grew by %d bytes over %d cycles", int64(after)-int64(before), cycles)
}

// Recycling a tensor twice hands its memory to the session once: two later outputs never
// share memory, and an output keeps its values after the next run.
func TestRecycleTwiceIsANoOp(t *testing.T) {
	const n = 2048
	rnd := inferRand()
	s, err := FromGraph(floatGraph(t, "add", map[string][]int64{"a": {n}, "b": {n}}, []string{"y"},
		graph.NewNode("add", "Add", []string{"a", "b"}, []string{"y"})), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	run := func() (tensor.Tensor, []float32) {
		a, b := randomF32(rnd, n), randomF32(rnd, n)
		outs, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "a", Tensor: tensor.MustTensor([]int64{n}, a)}, {Name: "b", Tensor: tensor.MustTensor([]int64{n}, b)}})
		require.NoError(t, err)
		want := make([]float32, n)
		for i := range want {
			want[i] = a[i] + b[i]
		}
		return outs[0], want
	}
	run()
	y, _ := run() // from the plan
	s.Recycle(y)
	s.Recycle(y)      // already held: ignored
	s.Recycle(y, y)   // so is this
	u, uWant := run() // into y's memory
	v, vWant := run() // not into it again
	w, wWant := run() // nor this
	assert.True(t, sameMemory(u, y), "the recycled memory was used")
	assert.False(t, sameMemory(u, v), "two outputs share memory")
	assert.False(t, sameMemory(u, w), "two outputs share memory")
	for _, c := range []struct {
		got  tensor.Tensor
		want []float32
	}{{u, uWant}, {v, vWant}, {w, wWant}} {
		got, err := tensor.TensorOf[float32](c.got)
		require.NoError(t, err)
		require.Equal(t, c.want, got, "an output kept its values")
	}
}

// Feeding only an unknown name reports the unknown name beside the missing input.
func TestUnknownInputIsNamed(t *testing.T) {
	s, err := FromGraph(mlpModel(t, randomF32(inferRand(), 4), randomF32(inferRand(), 2), 2, 2), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Run(context.Background(), []tensor.NamedTensor{{Name: "X", Tensor: tensor.MustTensor([]int64{1, 2}, []float32{1, 2})}})
	require.Error(t, err)
	assert.ErrorIs(t, err, tensor.ErrInvalidArgument)
	assert.Contains(t, err.Error(), `missing input "x"`)
	assert.Contains(t, err.Error(), `"X"`, "the unknown name is named")
}

// A model that lists one output twice is refused when the session is made, from bytes or
// from a graph built in memory.
func TestDuplicateGraphOutputRefused(t *testing.T) {
	m := floatGraph(t, "dup", map[string][]int64{"a": {4}}, []string{"y"}, graph.NewNode("relu", "Relu", []string{"a"}, []string{"y"}))
	m.Graph.Outputs = append(m.Graph.Outputs, graph.Output("y", graph.Type{}))
	data, err := m.Marshal()
	require.NoError(t, err)
	_, err = LoadBytes(data, WithExecutionProvider(ProviderHost))
	require.Error(t, err)
	assert.ErrorIs(t, err, tensor.ErrInvalidArgument)
	assert.Contains(t, err.Error(), `value "y": graph output is listed twice`)
	_, err = FromGraph(m, WithExecutionProvider(ProviderHost))
	require.Error(t, err)
	assert.ErrorIs(t, err, tensor.ErrInvalidArgument)
	assert.Contains(t, err.Error(), `value "y": graph output is listed twice`)
}

// DepthToSpace and SpaceToDepth check their blocksize against the input at run time (a model
// with dynamic shapes reaches them unchecked by loading): a blocksize below 1, or one the
// input's axes are not multiples of, is an error, not a division by zero or a bad reshape.
func TestSpaceDepthRefuseBadBlocksizes(t *testing.T) {
	x := tensor.MustTensor([]int64{1, 8, 6, 6}, make([]float32, 288))
	for _, c := range []struct {
		op   string
		bs   int64
		want string
	}{
		{"DepthToSpace", 0, "blocksize 0"},
		{"DepthToSpace", -2, "blocksize -2"},
		{"DepthToSpace", 3, "multiple of blocksize² = 9"},
		{"DepthToSpace", 1 << 32, "multiple of blocksize²"},
		{"SpaceToDepth", 0, "blocksize 0"},
		{"SpaceToDepth", 4, "multiples of blocksize 4"},
	} {
		n := graph.NewNode("n", c.op, []string{"x"}, []string{"y"})
		n.Attrs = append(n.Attrs, graph.IntAttr("blocksize", c.bs))
		_, err := ops.HostOps[c.op](nil, n, []tensor.Tensor{x})
		require.Error(t, err, "%s blocksize %d", c.op, c.bs)
		assert.Contains(t, err.Error(), c.want, "%s blocksize %d", c.op, c.bs)
	}
	n := graph.NewNode("n", "DepthToSpace", []string{"x"}, []string{"y"})
	n.Attrs = append(n.Attrs, graph.IntAttr("blocksize", 2))
	out, err := ops.HostOps["DepthToSpace"](nil, n, []tensor.Tensor{x})
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 2, 12, 12}, out[0].Dims())
}

// An index out of range fed to Gather names the tensor and the index: the interpreter's
// planner sees the indices and names the index; a compiled plan's kernel (planned before the
// indices are known) fails its bounds check, and since the indices are the run's own input
// the plan runs the node again through the interpreter, whose planner names the index.
func TestGatherOutOfRangeIsNamed(t *testing.T) {
	x := tensor.MustTensor([]int64{4, 3}, make([]float32, 12))
	good := []tensor.Tensor{x, tensor.MustTensor([]int64{2}, []int64{3, -4})}
	bad := feedsOf([]tensor.Tensor{x, tensor.MustTensor([]int64{2}, []int64{1, 9})})
	for executor, want := range map[string]string{
		exec.ExecutorInterpreter: "index 9 out of range [-4, 4)",
		exec.ExecutorPlan:        "index 9 out of range [-4, 4)",
	} {
		s, feeds := hostileSession(t, executor, graph.NewNode("gather", "Gather", nil, []string{"y"}), 13, good)
		for range 2 {
			_, err := s.Run(context.Background(), feeds)
			require.NoError(t, err, executor)
		}
		_, err := s.Run(context.Background(), bad)
		require.ErrorIs(t, err, tensor.ErrInvalidArgument, executor)
		assert.Contains(t, err.Error(), want, executor)
		assert.Contains(t, err.Error(), `node "gather"`, executor)
	}
}

// A Loop's scan outputs are checked against the element limit as they grow, so a trip count
// of 10^12 stops at the limit instead of growing until memory runs out (issue 18 finding 5),
// on both executors; the session then runs a short loop.
func TestLoopScanOutputsStayWithinTheLimit(t *testing.T) {
	k, w := []float32{0.5, 0.5, 0.5, 0.5}, []float32{1, 2, 3, 4}
	x := tensor.MustTensor([]int64{4}, []float32{1, 1, 1, 1})
	trip := func(n int64) []tensor.NamedTensor {
		return []tensor.NamedTensor{{Name: "n", Tensor: tensor.MustTensor([]int64{}, []int64{n})}, {Name: "x", Tensor: x}}
	}
	for _, executor := range traceExecutors {
		s, err := FromGraph(loopModel(t, k, w), tracedOptions(nil, executor, WithLimits(graph.Limits{MaxElements: 4096}))...)
		require.NoError(t, err)
		_, err = s.Run(context.Background(), trip(3))
		require.NoError(t, err, executor)
		start := time.Now()
		_, err = s.Run(context.Background(), trip(1e12))
		require.ErrorIs(t, err, tensor.ErrOverBudget, executor)
		assert.Contains(t, err.Error(), "Loop scan output 0 after 1025 iterations would have 4100 elements", executor)
		assert.Contains(t, err.Error(), `node "loop"`, executor)
		assert.Less(t, time.Since(start), time.Minute, executor)
		outs, err := s.Run(context.Background(), trip(2))
		require.NoError(t, err, executor)
		assert.Equal(t, []int64{2, 4}, outs[1].Dims(), executor)
		require.NoError(t, s.Close())
	}
}
