package session

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/plan"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// onlyPlan is the single plan of s, with an idle instance of it.
func onlyPlan(t *testing.T, s *InferenceSession) (*plan.Template, *plan.Instance) {
	t.Helper()
	s.plans.Mu.Lock()
	defer s.plans.Mu.Unlock()
	require.Len(t, s.plans.Entries, 1)
	for _, e := range s.plans.Entries {
		require.NotNil(t, e.Template, e.Reason)
		require.NotEmpty(t, e.Idle)
		return e.Template, e.Idle[0]
	}
	return nil, nil
}

func floatGraph(t *testing.T, name string, inputs map[string][]int64, outputs []string, nodes ...*graph.Node) *graph.Model {
	t.Helper()
	g := &graph.Graph{Name: name}
	for _, in := range slices.Sorted(func(yield func(string) bool) {
		for k := range inputs {
			if !yield(k) {
				return
			}
		}
	}) {
		g.Inputs = append(g.Inputs, graph.Input(in, graph.TensorType(graph.Float, graph.ShapeOf(inputs[in]...))))
	}
	for _, out := range outputs {
		g.Outputs = append(g.Outputs, graph.Output(out, graph.Type{}))
	}
	g.Nodes = nodes
	m, err := graph.FromGraph(name, g, map[string]int64{"": 13})
	require.NoError(t, err)
	return m
}

// A plan's kernels read inputs from, and write outputs into, the caller's memory: the
// arena's slots for them are never touched, the inputs stay as they were, and the outputs
// match the interpreter's on fresh inputs every run.
func TestPlanBindsInputsAndOutputsInPlace(t *testing.T) {
	// It looks into the instance's own arena: small plans keep one (LOOM_TEST_SHARED_ARENA_MIN
	// may have moved every plan onto shared arenas).
	defer plan.SetSharedArenaMin(plan.SharedArenaMin)()
	rnd := inferRand()
	model := floatGraph(t, "bind", map[string][]int64{"a": {300}, "b": {300}}, []string{"y", "z"},
		graph.NewNode("add", "Add", []string{"a", "b"}, []string{"y"}),
		graph.NewNode("mul", "Mul", []string{"y", "a"}, []string{"z"}))
	planned, interpreted := planPair(t, func(opts ...LoadOption) (*InferenceSession, error) { return FromGraph(model, opts...) })
	feeds := func() []tensor.NamedTensor {
		return []tensor.NamedTensor{{Name: "a", Tensor: tensor.MustTensor([]int64{300}, randomF32(rnd, 300))},
			{Name: "b", Tensor: tensor.MustTensor([]int64{300}, randomF32(rnd, 300))}}
	}
	requireSameOutputs(t, planned, interpreted, feeds(), 0)
	tmpl, inst := onlyPlan(t, planned)
	require.Equal(t, []int{0, 1}, tmpl.BindIn)
	require.Equal(t, []int{2, 3}, tmpl.BindOut)
	const sentinel = 0xA5
	for i := range inst.Mem {
		inst.Mem[i] = sentinel
	}
	for range 3 {
		in := feeds()
		kept := make([]tensor.Tensor, 2)
		for i := range kept {
			c, err := tensor.CopyOut(in[i].Tensor)
			require.NoError(t, err)
			kept[i] = c
		}
		want, err := interpreted.Run(context.Background(), in)
		require.NoError(t, err)
		got, err := planned.Run(context.Background(), in)
		require.NoError(t, err)
		require.Equal(t, want[0].Data(), got[0].Data())
		require.Equal(t, want[1].Data(), got[1].Data())
		require.Equal(t, kept[0].Data(), in[0].Tensor.Data(), "inputs are read, never written")
		require.Equal(t, kept[1].Data(), in[1].Tensor.Data())
	}
	for _, s := range []int{tmpl.Inputs[0].Ref.Slot, tmpl.Inputs[1].Ref.Slot, tmpl.Outputs[0].Slot, tmpl.Outputs[1].Slot} {
		sl := tmpl.Slots[s]
		for _, v := range inst.Mem[sl.Offset : sl.Offset+sl.Bytes] {
			require.Equal(t, byte(sentinel), v, "slot %d went through the arena", s)
		}
	}
}

// Models with many inputs and outputs (a decode step's KV cache: 25 of each) bind them all:
// the first eight memories pass to the shim as direct arguments, the rest pinned for the call.
// 12 Concats of a past and a new slice: 24 inputs and 12 outputs read and written in place,
// matching the interpreter on fresh inputs every run.
func TestPlanBindsManyInputsAndOutputsInPlace(t *testing.T) {
	defer plan.SetSharedArenaMin(plan.SharedArenaMin)() // it looks into the instance's own arena
	rnd := inferRand()
	const pairs = 12
	inputs := map[string][]int64{}
	var outputs []string
	var nodes []*graph.Node
	for i := range pairs {
		p, n, o := fmt.Sprintf("past%02d", i), fmt.Sprintf("new%02d", i), fmt.Sprintf("present%02d", i)
		inputs[p], inputs[n] = []int64{2, 7, 40}, []int64{2, 1, 40}
		outputs = append(outputs, o)
		nodes = append(nodes, graph.NewNode("concat"+o, "Concat", []string{p, n}, []string{o}, graph.IntAttr("axis", 1)))
	}
	model := floatGraph(t, "kv", inputs, outputs, nodes...)
	planned, interpreted := planPair(t, func(opts ...LoadOption) (*InferenceSession, error) { return FromGraph(model, opts...) })
	feeds := func() []tensor.NamedTensor {
		var f []tensor.NamedTensor
		for name, shape := range inputs {
			f = append(f, tensor.NamedTensor{Name: name, Tensor: tensor.MustTensor(shape, randomF32(rnd, int(shape[0]*shape[1]*shape[2])))})
		}
		return f
	}
	requireSameOutputs(t, planned, interpreted, feeds(), 0)
	tmpl, inst := onlyPlan(t, planned)
	args := map[int]bool{}
	for _, a := range slices.Concat(tmpl.BindIn, tmpl.BindOut) {
		require.GreaterOrEqual(t, a, 0, "every input and output is bound: %v %v", tmpl.BindIn, tmpl.BindOut)
		args[a] = true
	}
	require.Len(t, args, 3*pairs, "each its own memory")
	const sentinel = 0x5A
	for i := range inst.Mem {
		inst.Mem[i] = sentinel
	}
	for range 3 {
		in := feeds()
		want, err := interpreted.Run(context.Background(), in)
		require.NoError(t, err)
		got, err := planned.Run(context.Background(), in)
		require.NoError(t, err)
		for i := range want {
			require.Equal(t, want[i].Data(), got[i].Data(), "output %d", i)
		}
	}
	for _, in := range tmpl.Inputs {
		sl := tmpl.Slots[in.Ref.Slot]
		for _, v := range inst.Mem[sl.Offset : sl.Offset+sl.Bytes] {
			require.Equal(t, byte(sentinel), v, "input slot %d went through the arena", in.Ref.Slot)
		}
	}
	for _, o := range tmpl.Outputs {
		sl := tmpl.Slots[o.Slot]
		for _, v := range inst.Mem[sl.Offset : sl.Offset+sl.Bytes] {
			require.Equal(t, byte(sentinel), v, "output slot %d went through the arena", o.Slot)
		}
	}
}

// Values a plan cannot bind go through the arena, with the same results: an input that is
// also a graph output (through Identity), an output two graph outputs share, an input a
// host step reads, and a host step's output.
func TestPlanCopiesValuesItCannotBind(t *testing.T) {
	rnd := inferRand()
	model := floatGraph(t, "nobind", map[string][]int64{"a": {64}, "c": {8}}, []string{"y", "w", "w2", "nz"},
		graph.NewNode("id", "Identity", []string{"a"}, []string{"y"}),
		graph.NewNode("relu", "Relu", []string{"a"}, []string{"w"}),
		graph.NewNode("id2", "Identity", []string{"w"}, []string{"w2"}),
		graph.NewNode("nz", "NonZero", []string{"c"}, []string{"nz"}))
	planned, interpreted := planPair(t, func(opts ...LoadOption) (*InferenceSession, error) { return FromGraph(model, opts...) })
	nonZero := func(n int) []float32 { // NonZero's output shape stays the same: no zeros
		v := randomF32(rnd, n)
		for i := range v {
			v[i] += 2
		}
		return v
	}
	for range 3 {
		feeds := []tensor.NamedTensor{{Name: "a", Tensor: tensor.MustTensor([]int64{64}, randomF32(rnd, 64))},
			{Name: "c", Tensor: tensor.MustTensor([]int64{8}, nonZero(8))}}
		requireSameOutputs(t, planned, interpreted, feeds, 0)
	}
	tmpl, _ := onlyPlan(t, planned)
	require.Equal(t, []int{-1, -1}, tmpl.BindIn)
	require.Equal(t, []int{-1, -1, -1, -1}, tmpl.BindOut)
}

// Recycled outputs are written again by later runs (same memory, new values), from any
// number of goroutines at once; things that cannot be recycled are ignored.
func TestRecycledOutputsAreReused(t *testing.T) {
	rnd := inferRand()
	for _, n := range []int{1024, 5000} { // carved from shared blocks; allocated alone
		model := floatGraph(t, "add", map[string][]int64{"a": {int64(n)}, "b": {int64(n)}}, []string{"y"},
			graph.NewNode("add", "Add", []string{"a", "b"}, []string{"y"}))
		s, err := FromGraph(model, WithExecutionProvider(ProviderHost), WithIntraOpThreads(1))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		run := func(r *rand.Rand) []tensor.Tensor {
			a, b := randomF32(r, n), randomF32(r, n)
			outs, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "a", Tensor: tensor.MustTensor([]int64{int64(n)}, a)}, {Name: "b", Tensor: tensor.MustTensor([]int64{int64(n)}, b)}})
			require.NoError(t, err)
			y := outs[0].Data().([]float32)
			for i := range y {
				if y[i] != a[i]+b[i] {
					require.Equal(t, a[i]+b[i], y[i], "element %d", i)
				}
			}
			return outs
		}
		run(rnd) // traced
		outs := run(rnd)
		first := &outs[0].Data().([]float32)[0]
		s.Recycle(outs...)
		s.Recycle(tensor.MustTensor([]int64{1}, []string{"x"}), tensor.Tensor{}, tensor.MustTensor([]int64{3}, []float32{1, 2, 3}))
		again := run(rnd)
		require.Same(t, first, &again[0].Data().([]float32)[0], "the recycled memory holds the next output")
		s.Recycle(again...)

		var wg sync.WaitGroup
		for g := range 4 {
			r := rand.New(rand.NewPCG(rnd.Uint64(), uint64(g)))
			wg.Go(func() {
				for range 30 {
					s.Recycle(run(r)...)
				}
			})
		}
		wg.Wait()
	}
}

// The fast path follows the inputs' shapes: alternating batch sizes run their own plans.
func TestPlanFastPathFollowsShapeChanges(t *testing.T) {
	rnd := inferRand()
	w, b := randomF32(rnd, 8*5), randomF32(rnd, 5)
	planned, interpreted := planPair(t, func(opts ...LoadOption) (*InferenceSession, error) {
		return FromGraph(mlpModel(t, w, b, 8, 5), opts...)
	})
	for range 3 {
		for _, rows := range []int{2, 3, 1} {
			feeds := []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{int64(rows), 8}, randomF32(rnd, rows*8))}}
			requireSameOutputs(t, planned, interpreted, feeds, 1e-6)
		}
	}
}

// A decode-style loop through Run (each step's output, one row longer, fed back as the next
// step's input) that recycles each step's input, the output of the step before: planned
// outputs of 64 KiB or more are allocated an eighth larger, so a recycled one takes the next,
// longer output in place, until it has grown past that; every step's values stay right.
func TestRecycledOutputsTakeGrowingOutputs(t *testing.T) {
	rnd := inferRand()
	const cols = 1024 // 4 KiB a row: 64 KiB from 16 rows
	g := &graph.Graph{Name: "grow"}
	g.Inputs = append(g.Inputs, graph.Input("past", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("L"), graph.DimOf(cols)})),
		graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(1, cols))))
	g.Outputs = append(g.Outputs, graph.Output("present", graph.Type{}))
	g.Nodes = []*graph.Node{graph.NewNode("cat", "Concat", []string{"past", "x"}, []string{"present"}, graph.IntAttr("axis", 0))}
	model, err := graph.FromGraph("grow", g, map[string]int64{"": 13})
	require.NoError(t, err)
	s, err := FromGraph(model, WithExecutionProvider(ProviderHost), WithIntraOpThreads(1))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })

	rows := 32
	want := randomF32(rnd, rows*cols)
	past := tensor.MustTensor([]int64{int64(rows), cols}, slices.Clone(want))
	reused, fresh := 0, 0
	var recycled []*float32
	for step := range 40 {
		// Every step is a new signature: keep them planned (planned once, as a decode loop
		// whose interpreted steps cost more runs), since interpreted runs allocate outputs
		// of their own.
		if s.tiering.Mode() == plan.TierSecondSight {
			s.tiering.RanInterpreted(time.Hour)
			s.tiering.RanInterpreted(time.Hour)
		}
		x := randomF32(rnd, cols)
		outs, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "past", Tensor: past}, {Name: "x", Tensor: tensor.MustTensor([]int64{1, cols}, x)}})
		require.NoError(t, err)
		want = append(want, x...)
		rows++
		require.Equal(t, []int64{int64(rows), cols}, outs[0].Dims())
		got := outs[0].Data().([]float32)
		require.Equal(t, len(want), len(got))
		for i := range want {
			if got[i] != want[i] {
				require.Equal(t, want[i], got[i], "step %d element %d", step, i)
			}
		}
		require.Equal(t, len(got), cap(got), "an output's room to grow is out of the caller's reach")
		if slices.Contains(recycled, &got[0]) {
			reused++
		} else {
			fresh++
		}
		if step > 0 {
			s.Recycle(past) // the output of the step before
			recycled = append(recycled, &past.Data().([]float32)[0])
		}
		past = outs[0]
	}
	// Rows 33 to 72: each allocation holds an eighth more, so most steps reuse one.
	require.Greater(t, reused, 25, "outputs written into recycled, smaller outputs' memory (%d fresh)", fresh)
	require.Greater(t, fresh, 1, "an output past a recycled buffer's room is allocated anew")
}
