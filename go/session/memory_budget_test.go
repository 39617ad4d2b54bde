package session

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// The session memory budget (WithMemoryBudget) and the loop limit (WithMaxLoopIterations),
// issue 18 findings 2 and 5.

const testBudget = 64 << 20

// totalAlloc is the bytes the Go heap has allocated since the process started.
func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// Sizes that come from the inputs' values or shapes are checked against the budget before
// anything is allocated for them: each bad run fails with ErrOverBudget naming the node, the
// size and the budget, allocates (nearly) nothing, gives back what it held, and the session
// then runs good inputs. The element limit alone (2^34 by default) lets every one of these
// through.
func TestMemoryBudgetRefusesBeforeAllocating(t *testing.T) {
	i64 := func(v ...int64) tensor.Tensor { return tensor.MustTensor([]int64{int64(len(v))}, v) }
	i64Scalar := func(v int64) tensor.Tensor { return tensor.MustTensor([]int64{}, []int64{v}) }
	one := tensor.MustTensor([]int64{1, 1}, []float32{7})
	col := func(n int64) tensor.Tensor { return tensor.MustTensor([]int64{n, 1}, randomF32(inferRand(), int(n))) }
	row := func(n int64) tensor.Tensor { return tensor.MustTensor([]int64{1, n}, randomF32(inferRand(), int(n))) }
	oneHot := func(depth int64) []tensor.Tensor {
		return []tensor.Tensor{tensor.MustTensor([]int64{1000}, make([]int64, 1000)), i64Scalar(depth), tensor.MustTensor([]int64{2}, []float32{0, 1})}
	}
	budget := []LoadOption{WithMemoryBudget(testBudget)}
	over := tensor.ErrOverBudget
	says := []string{"would take", "over the session's memory budget (WithMemoryBudget) of 64.0 MiB"}
	cases := []hostileCase{
		{"constantofshape_1e4x1e4", graph.NewNode("cos", "ConstantOfShape", nil, []string{"y"}), 18,
			[]tensor.Tensor{i64(2, 3)}, []tensor.Tensor{i64(1e4, 1e4)}, over, append(says, "the output would take 381.5 MiB"), budget},
		{"expand_8000x8000", graph.NewNode("expand", "Expand", nil, []string{"y"}), 13,
			[]tensor.Tensor{one, i64(2, 3)}, []tensor.Tensor{one, i64(8000, 8000)}, over, says, budget},
		{"tile_5000x5000", graph.NewNode("tile", "Tile", nil, []string{"y"}), 13,
			[]tensor.Tensor{one, i64(2, 3)}, []tensor.Tensor{one, i64(5000, 5000)}, over, says, budget},
		{"range_1e8", graph.NewNode("range", "Range", nil, []string{"y"}), 11,
			[]tensor.Tensor{i64Scalar(0), i64Scalar(10), i64Scalar(1)}, []tensor.Tensor{i64Scalar(0), i64Scalar(1e8), i64Scalar(1)}, over, says, budget},
		{"onehot_depth_1e5", graph.NewNode("onehot", "OneHot", nil, []string{"y"}), 11, oneHot(4), oneHot(1e5), over, says, budget},
	}
	runHostileCases(t, cases)
	// Broadcasting: inputs of any shape ([N, 1] and [1, N], kernel-planned ops).
	for _, op := range []string{"Add", "MatMul"} {
		cases = append(cases, hostileCase{name: op + "_outer_8192", node: graph.NewNode("big", op, nil, []string{"y"}), opset: 13,
			good: []tensor.Tensor{col(16), row(16)}, bad: []tensor.Tensor{col(8192), row(8192)}, want: over, says: says, opts: budget})
		for _, executor := range traceExecutors {
			c := cases[len(cases)-1]
			s, good := dynamicSession(t, executor, c.node, 13, c.good, c.opts...), feedsOf(c.good)
			for range 2 {
				_, err := s.Run(context.Background(), good)
				require.NoError(t, err)
			}
			_, err := s.Run(context.Background(), feedsOf(c.bad))
			require.ErrorIs(t, err, over, "%s/%s", c.name, executor)
			assert.Contains(t, err.Error(), `node "big"`)
			assert.Contains(t, err.Error(), "output 0 would take 256.0 MiB")
			_, err = s.Run(context.Background(), good)
			require.NoError(t, err)
		}
	}
	// Before allocating: the bad run allocates far less than the tensor it asked for.
	for i, c := range cases {
		for _, executor := range traceExecutors {
			s, good := hostileSession(t, executor, c.node, c.opset, c.good, c.opts...)
			if i >= len(cases)-2 {
				s, good = dynamicSession(t, executor, c.node, 13, c.good, c.opts...), feedsOf(c.good)
			}
			_, err := s.Run(context.Background(), good)
			require.NoError(t, err)
			_, held := s.MemoryBudget()
			bad := feedsOf(c.bad)
			before := totalAlloc()
			_, err = s.Run(context.Background(), bad)
			allocated := totalAlloc() - before
			require.ErrorIs(t, err, over)
			assert.Less(t, allocated, uint64(8<<20), "%s/%s allocated %d bytes before refusing", c.name, executor, allocated)
			_, after := s.MemoryBudget()
			assert.Equal(t, held, after, "%s/%s: the failed run gave back what it held", c.name, executor)
		}
	}
}

// chainModel is x -> n unary nodes in a row -> y, and, when keep, y = Sum of every
// intermediate (all of them live at once).
func chainModel(t *testing.T, size int64, n int, keep bool) *graph.Model {
	ops := []string{"Relu", "Neg", "Abs", "Sigmoid"}
	var nodes []*graph.Node
	prev := "x"
	var all []string
	for i := range n {
		out := fmt.Sprintf("v%d", i)
		nodes = append(nodes, graph.NewNode(fmt.Sprintf("n%d", i), ops[i%len(ops)], []string{prev}, []string{out}))
		all = append(all, out)
		prev = out
	}
	if keep {
		nodes = append(nodes, graph.NewNode("sum", "Sum", all, []string{"y"}))
	} else {
		nodes = append(nodes, graph.NewNode("last", "Relu", []string{prev}, []string{"y"}))
	}
	return floatGraph(t, "chain", map[string][]int64{"x": {size}}, []string{"y"}, nodes...)
}

// The budget follows liveness: a chain of 16 nodes of 16 MiB tensors runs in 64 MiB (each
// value is given back once no later node reads it), the same nodes all read by one Sum fail
// where they stop fitting, naming the node; after every run the session holds what it held
// before (the plan's arena), also under concurrent runs.
func TestMemoryBudgetFollowsLiveness(t *testing.T) {
	const size = 4 << 20 // float32: 16 MiB a tensor
	x := []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{size}, randomF32(inferRand(), size))}}
	for _, executor := range traceExecutors {
		t.Run(executor, func(t *testing.T) {
			s, err := FromGraph(chainModel(t, size, 16, false), tracedOptions(nil, executor, WithMemoryBudget(testBudget))...)
			require.NoError(t, err)
			defer s.Close()
			outs, err := s.Run(context.Background(), x)
			require.NoError(t, err, "a chain whose live values fit runs")
			want := outs[0].Data().([]float32)
			_, held := s.MemoryBudget()
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 2 {
						outs, err := s.Run(context.Background(), x)
						if err != nil && !errors.Is(err, tensor.ErrOverBudget) {
							errs <- err
						} else if err == nil && !assert.Equal(t, want, outs[0].Data().([]float32)) {
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			_, after := s.MemoryBudget()
			if executor == "interpreter" {
				assert.Equal(t, held, after, "every run gave back what it held")
			} else {
				// Concurrent runs may make more plan instances (arenas), held from then on,
				// or none at all: two builders can each reserve half of the budget and both
				// fail on the rest. One run alone makes the instance it needs.
				_, err = s.Run(context.Background(), x)
				require.NoError(t, err)
				_, after = s.MemoryBudget()
			}
			_, err = s.Run(context.Background(), x)
			require.NoError(t, err)
			_, again := s.MemoryBudget()
			assert.Equal(t, after, again, "a run gives back what it held")

			kept, err := FromGraph(chainModel(t, size, 16, true), tracedOptions(nil, executor, WithMemoryBudget(testBudget))...)
			require.NoError(t, err)
			defer kept.Close()
			_, err = kept.Run(context.Background(), x)
			require.ErrorIs(t, err, tensor.ErrOverBudget)
			assert.Contains(t, err.Error(), `node "n3"`, "the fourth 16 MiB value does not fit 64 MiB")
			assert.Contains(t, err.Error(), "over the session's memory budget (WithMemoryBudget) of 64.0 MiB")
			_, h := kept.MemoryBudget()
			assert.Zero(t, h, "the failed run gave back everything")
		})
	}
}

// Loop, Scan and SequenceMap stop at the session's iteration limit with ErrOverBudget naming
// the node, and a cancelled context stops a Loop even when its body has no node.
func TestLoopIterationLimitAndCancel(t *testing.T) {
	k, w := []float32{0.5, 0.5, 0.5, 0.5}, []float32{1, 2, 3, 4}
	x := tensor.MustTensor([]int64{4}, []float32{1, 1, 1, 1})
	trip := func(n int64) []tensor.NamedTensor {
		return []tensor.NamedTensor{{Name: "n", Tensor: tensor.MustTensor([]int64{}, []int64{n})}, {Name: "x", Tensor: x}}
	}
	for _, executor := range traceExecutors {
		s, err := FromGraph(loopModel(t, k, w), tracedOptions(nil, executor, WithMaxLoopIterations(100))...)
		require.NoError(t, err)
		_, err = s.Run(context.Background(), trip(100))
		require.NoError(t, err, executor)
		_, err = s.Run(context.Background(), trip(1e12))
		require.ErrorIs(t, err, tensor.ErrOverBudget, executor)
		assert.Contains(t, err.Error(), "Loop would run more than 100 iterations, the session's limit (WithMaxLoopIterations)", executor)
		assert.Contains(t, err.Error(), `node "loop"`, executor)
		require.NoError(t, s.Close())
	}

	// A body that only passes its inputs through: no node would see the context.
	body := &graph.Graph{Name: "body"}
	body.Inputs = []*graph.Value{
		graph.Input("iter", graph.TensorType(graph.Int64, graph.Shape{})),
		graph.Input("cond_in", graph.TensorType(graph.Bool, graph.Shape{})),
		graph.Input("x_in", graph.TensorType(graph.Float, graph.ShapeOf(4))),
	}
	body.Outputs = []*graph.Value{
		graph.Output("cond_in", graph.TensorType(graph.Bool, graph.Shape{})),
		graph.Output("x_in", graph.TensorType(graph.Float, graph.ShapeOf(4))),
	}
	g := &graph.Graph{Name: "spin"}
	g.Inputs = []*graph.Value{
		graph.Input("n", graph.TensorType(graph.Int64, graph.Shape{})),
		graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(4))),
	}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.Nodes = []*graph.Node{graph.NewNode("loop", "Loop", []string{"n", "", "x"}, []string{"y"},
		&graph.Attribute{Name: "body", Type: graph.AttrGraph, Graph: body})}
	m, err := graph.FromGraph("spin", g, map[string]int64{"": 13})
	require.NoError(t, err)
	s, err := FromGraph(m, WithExecutionProvider(ProviderHost), WithMaxLoopIterations(1<<50))
	require.NoError(t, err)
	defer s.Close()
	outs, err := s.Run(context.Background(), trip(3))
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 1, 1, 1}, outs[0].Data().([]float32))
	_, held := s.MemoryBudget()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.Run(ctx, trip(1e15))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), `node "loop"`)
	assert.Less(t, time.Since(start), 10*time.Second, "the loop stopped soon after the deadline")
	_, after := s.MemoryBudget()
	assert.Equal(t, held, after, "the cancelled run gave back what it held")
}

// The options refuse nonsense, and the default budget is a fraction of this machine's memory.
func TestMemoryBudgetOptions(t *testing.T) {
	m := floatGraph(t, "relu", map[string][]int64{"x": {4}}, []string{"y"}, graph.NewNode("relu", "Relu", []string{"x"}, []string{"y"}))
	_, err := FromGraph(m, WithMemoryBudget(0))
	assert.ErrorIs(t, err, tensor.ErrInvalidArgument)
	_, err = FromGraph(m, WithMaxLoopIterations(0))
	assert.ErrorIs(t, err, tensor.ErrInvalidArgument)
	s, err := FromGraph(m, WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	limit, _ := s.MemoryBudget()
	assert.Equal(t, DefaultMemoryBudget(), limit)
	if runtime.GOOS == "linux" {
		phys := device.PhysicalMemory()
		require.NotZero(t, phys)
		assert.LessOrEqual(t, limit, phys/4*3)
		assert.Greater(t, limit, uint64(64<<20))
	}
	u, err := FromGraph(floatGraph(t, "relu", map[string][]int64{"x": {4}}, []string{"y"}, graph.NewNode("relu", "Relu", []string{"x"}, []string{"y"})),
		WithExecutionProvider(ProviderHost), WithMemoryBudget(Unlimited))
	require.NoError(t, err)
	defer u.Close()
	limit, _ = u.MemoryBudget()
	assert.Equal(t, Unlimited, limit)
}

// A large elementwise op costs its output and nothing more (issue 18 finding 8: a 1 GB + 1 GB
// Add peaked at 5.2 GB, the interpreter copying both inputs to the device, allocating the
// output there and reading it back into a Go tensor): on the host the kernels read the inputs
// and write the output where the run holds them, so a 32 MiB + 32 MiB Add runs in a budget
// of 40 MiB in the interpreter, allocating about one output of Go memory per run. (A compiled
// plan's arena still has a slot for every value, the bound inputs and outputs that its runs
// read and write in place included: 96 MiB here.)
func TestLargeAddCostsOneOutput(t *testing.T) {
	const n = 8 << 20 // 32 MiB of float32
	rnd := inferRand()
	a, b := randomF32(rnd, n), randomF32(rnd, n)
	feeds := []tensor.NamedTensor{{Name: "a", Tensor: tensor.MustTensor([]int64{n}, a)}, {Name: "b", Tensor: tensor.MustTensor([]int64{n}, b)}}
	for _, executor := range traceExecutors {
		t.Run(executor, func(t *testing.T) {
			budget := uint64(40 << 20)
			if executor == "plan" {
				budget += 96 << 20
			}
			s, err := FromGraph(floatGraph(t, "add", map[string][]int64{"a": {n}, "b": {n}}, []string{"y"},
				graph.NewNode("add", "Add", []string{"a", "b"}, []string{"y"})), tracedOptions(nil, executor, WithMemoryBudget(budget))...)
			require.NoError(t, err)
			defer s.Close()
			for i := range 3 { // traced (interpreted), then planned
				before := totalAlloc()
				outs, err := s.Run(context.Background(), feeds)
				allocated := totalAlloc() - before
				require.NoError(t, err, "run %d", i)
				y := outs[0].Data().([]float32)
				for j := 0; j < n; j += 4099 {
					require.Equal(t, a[j]+b[j], y[j], "element %d", j)
				}
				assert.Less(t, allocated, uint64(n*4+n), "run %d allocated %d bytes for a %d-byte output", i, allocated, n*4)
			}
		})
	}
}

// A panic of the run path outside any node (the input checks, a plan's execution) fails that
// run with an *Error of kind ErrInternal whose *PanicError holds the value and stack; the
// run's memory is given back and the session keeps running, on every entry point.
func TestRunRecoversPanicOutsideNodes(t *testing.T) {
	const n = 1024
	x := []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{n}, randomF32(inferRand(), n))}}
	for _, stage := range []string{"run", "execute"} {
		for _, executor := range traceExecutors {
			if stage == "execute" && executor == "interpreter" {
				continue
			}
			t.Run(stage+"/"+executor, func(t *testing.T) {
				s, err := FromGraph(chainModel(t, n, 3, false), tracedOptions(nil, executor)...)
				require.NoError(t, err)
				defer s.Close()
				for range 2 {
					_, err = s.Run(context.Background(), x)
					require.NoError(t, err)
				}
				_, held := s.MemoryBudget()
				runHook = func(at string) {
					if at == stage {
						panic("injected at " + at)
					}
				}
				defer func() { runHook = nil }()
				for _, run := range []func() error{
					func() error { _, err := s.Run(context.Background(), x); return err },
					func() error {
						_, err := s.RunInto(context.Background(), x, []tensor.NamedTensor{{Name: "y", Tensor: tensor.MustTensor([]int64{n}, make([]float32, n))}})
						return err
					},
					func() error {
						_, err := s.RunValues(context.Background(), []tensor.NamedValue{{Name: "x", Value: tensor.TensorValue(x[0].Tensor)}})
						return err
					},
				} {
					err := run()
					require.ErrorIs(t, err, tensor.ErrInternal)
					var p *tensor.PanicError
					require.ErrorAs(t, err, &p)
					assert.Equal(t, "injected at "+stage, p.Value)
					assert.Contains(t, string(p.Stack), "TestRunRecoversPanicOutsideNodes")
				}
				runHook = nil
				_, after := s.MemoryBudget()
				assert.Equal(t, held, after, "the failed runs gave back their memory")
				_, err = s.Run(context.Background(), x)
				require.NoError(t, err, "the session still runs")
			})
		}
	}
}

// A Loop that grows a sequence (SequenceInsert of the same tensor every iteration: no new
// tensor memory, only the sequence's own) is charged for it as it grows: a trip count of 10^9
// stops at a 1 MiB budget within seconds, naming the node, instead of running 2^24 iterations
// of ever longer copies.
func TestLoopGrowingASequenceIsCharged(t *testing.T) {
	body := &graph.Graph{Name: "body"}
	body.Inputs = []*graph.Value{
		graph.Input("iter", graph.TensorType(graph.Int64, graph.Shape{})),
		graph.Input("cond_in", graph.TensorType(graph.Bool, graph.Shape{})),
		graph.Input("s_in", graph.Type{Kind: graph.KindSequence, Elem: graph.Float}),
	}
	body.Outputs = []*graph.Value{graph.Output("cond_out", graph.Type{}), graph.Output("s_out", graph.Type{})}
	body.Nodes = []*graph.Node{
		graph.NewNode("keep", "Identity", []string{"cond_in"}, []string{"cond_out"}),
		graph.NewNode("insert", "SequenceInsert", []string{"s_in", "x"}, []string{"s_out"}),
	}
	g := &graph.Graph{Name: "grow"}
	g.Inputs = []*graph.Value{
		graph.Input("n", graph.TensorType(graph.Int64, graph.Shape{})),
		graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(1024))),
	}
	g.Outputs = []*graph.Value{graph.Output("len", graph.Type{})}
	g.Nodes = []*graph.Node{
		graph.NewNode("empty", "SequenceEmpty", nil, []string{"s0"}, &graph.Attribute{Name: "dtype", Type: graph.AttrInt, Int: int64(graph.Float)}),
		graph.NewNode("loop", "Loop", []string{"n", "", "s0"}, []string{"s"}, &graph.Attribute{Name: "body", Type: graph.AttrGraph, Graph: body}),
		graph.NewNode("length", "SequenceLength", []string{"s"}, []string{"len"}),
	}
	m, err := graph.FromGraph("grow", g, map[string]int64{"": 13})
	require.NoError(t, err)
	s, err := FromGraph(m, WithExecutionProvider(ProviderHost), WithMemoryBudget(1<<20))
	require.NoError(t, err)
	defer s.Close()
	x := tensor.MustTensor([]int64{1024}, randomF32(inferRand(), 1024))
	feeds := func(n int64) []tensor.NamedTensor {
		return []tensor.NamedTensor{{Name: "n", Tensor: tensor.MustTensor([]int64{}, []int64{n})}, {Name: "x", Tensor: x}}
	}
	outs, err := s.Run(context.Background(), feeds(100))
	require.NoError(t, err)
	assert.Equal(t, []int64{100}, outs[0].Data().([]int64))
	start := time.Now()
	_, err = s.Run(context.Background(), feeds(1e9))
	require.ErrorIs(t, err, tensor.ErrOverBudget)
	assert.Contains(t, err.Error(), "over the session's memory budget (WithMemoryBudget) of 1.0 MiB")
	assert.Regexp(t, `node "(insert|loop)"`, err.Error())
	assert.Less(t, time.Since(start), time.Minute)
	_, held := s.MemoryBudget()
	outs, err = s.Run(context.Background(), feeds(3))
	require.NoError(t, err)
	assert.Equal(t, []int64{3}, outs[0].Data().([]int64))
	_, after := s.MemoryBudget()
	assert.Equal(t, held, after)
}

// Host functions whose output size follows broadcasting, an index tensor or a size input
// (the int64 and Where broadcasts, Gather, Einsum's outer product, Pad's pads, Resize's
// scales) reserve it before allocating: over a 64 MiB budget each bad run fails naming the
// node, having allocated next to nothing, and the session runs good inputs after.
func TestHostFunctionsReserveBeforeAllocating(t *testing.T) {
	i64 := func(v ...int64) tensor.Tensor { return tensor.MustTensor([]int64{int64(len(v))}, v) }
	col := func(n int64) tensor.Tensor { return tensor.MustTensor([]int64{n, 1}, make([]int64, n)) }
	row := func(n int64) tensor.Tensor { return tensor.MustTensor([]int64{1, n}, make([]int64, n)) }
	vec := func(n int64) tensor.Tensor { return tensor.MustTensor([]int64{n}, randomF32(inferRand(), int(n))) }
	cond := func(n int64) tensor.Tensor { return tensor.MustTensor([]int64{n, 1}, make([]bool, n)) }
	img := tensor.MustTensor([]int64{1, 1, 2, 2}, []float32{1, 2, 3, 4})
	f32 := func(v ...float32) tensor.Tensor { return tensor.MustTensor([]int64{int64(len(v))}, v) }
	one := tensor.MustTensor([]int64{1, 1}, []float32{7})
	budget := WithMemoryBudget(testBudget)
	cases := []struct {
		name      string
		node      *graph.Node
		opset     int64
		symbolic  bool
		good, bad []tensor.Tensor
	}{
		{"add_int64_outer", graph.NewNode("big", "Add", nil, []string{"y"}), 13, true, []tensor.Tensor{col(4), row(4)}, []tensor.Tensor{col(8192), row(8192)}},
		{"where_int64_outer", graph.NewNode("big", "Where", nil, []string{"y"}), 13, true,
			[]tensor.Tensor{cond(4), row(4), row(1)}, []tensor.Tensor{cond(8192), row(8192), row(1)}},
		{"einsum_outer", graph.NewNode("big", "Einsum", nil, []string{"y"}, graph.StringAttr("equation", "i,j->ij")), 13, true,
			[]tensor.Tensor{vec(4), vec(4)}, []tensor.Tensor{vec(8192), vec(8192)}},
		{"gather_repeat", graph.NewNode("big", "Gather", nil, []string{"y"}), 13, true,
			[]tensor.Tensor{tensor.MustTensor([]int64{1, 4}, randomF32(inferRand(), 4)), tensor.MustTensor([]int64{4}, make([]int64, 4))},
			[]tensor.Tensor{tensor.MustTensor([]int64{1, 8192}, randomF32(inferRand(), 8192)), tensor.MustTensor([]int64{8192}, make([]int64, 8192))}},
		{"pad_5000", graph.NewNode("big", "Pad", nil, []string{"y"}), 13, false, []tensor.Tensor{one, i64(0, 0, 1, 1)}, []tensor.Tensor{one, i64(0, 0, 5000, 5000)}},
		{"resize_4000x", graph.NewNode("big", "Resize", nil, []string{"y"}), 13, false,
			[]tensor.Tensor{img, {}, f32(1, 1, 2, 2)}, []tensor.Tensor{img, {}, f32(1, 1, 4000, 4000)}},
	}
	for _, c := range cases {
		for _, executor := range traceExecutors {
			t.Run(c.name+"/"+executor, func(t *testing.T) {
				var s *InferenceSession
				var good []tensor.NamedTensor
				if c.symbolic {
					s, good = dynamicSession(t, executor, c.node, c.opset, c.good, budget), feedsOf(c.good)
				} else {
					s, good = hostileSession(t, executor, c.node, c.opset, c.good, budget)
				}
				for range 2 {
					_, err := s.Run(context.Background(), good)
					require.NoError(t, err)
				}
				_, held := s.MemoryBudget()
				before := totalAlloc()
				_, err := s.Run(context.Background(), feedsOf(c.bad))
				allocated := totalAlloc() - before
				require.ErrorIs(t, err, tensor.ErrOverBudget)
				assert.Contains(t, err.Error(), `node "big"`)
				assert.Contains(t, err.Error(), "memory budget")
				assert.Less(t, allocated, uint64(8<<20), "allocated %d bytes before refusing", allocated)
				_, after := s.MemoryBudget()
				assert.Equal(t, held, after)
				_, err = s.Run(context.Background(), good)
				require.NoError(t, err)
			})
		}
	}
}
