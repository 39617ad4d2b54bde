package session

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/plan"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// widthModel is a small recognizer over images [1, 3, 8, W], W symbolic: a padded 3x3
// convolution and Relu, a host step (CumSum has no kernel), a reshape to [W, 8·4] whose
// shape is computed from the input's shape at run time (Shape, Gather, Concat: folded by
// the plan), a matrix product with a bias, and a Softmax over the last axis.
func widthModel(t *testing.T, w, b, wp []float32) *graph.Model {
	g := &graph.Graph{Name: "width"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.DimOf(1), graph.DimOf(3), graph.DimOf(8), graph.SymDim("W")}))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.AddInitializer(graph.TensorFromFloat32("w", []int64{4, 3, 3, 3}, w))
	g.AddInitializer(graph.TensorFromFloat32("b", []int64{4}, b))
	g.AddInitializer(graph.TensorFromFloat32("wp", []int64{32, 5}, wp))
	g.AddInitializer(graph.TensorFromInt64("axis", nil, []int64{2}))
	g.AddInitializer(graph.TensorFromInt64("three", []int64{1}, []int64{3}))
	g.AddInitializer(graph.TensorFromInt64("cols", []int64{1}, []int64{32}))
	g.Nodes = []*graph.Node{
		graph.NewNode("conv", "Conv", []string{"x", "w", "b"}, []string{"c"}, graph.IntsAttr("pads", 1, 1, 1, 1)),
		graph.NewNode("relu", "Relu", []string{"c"}, []string{"r"}),
		graph.NewNode("cs", "CumSum", []string{"r", "axis"}, []string{"s"}),
		graph.NewNode("tr", "Transpose", []string{"s"}, []string{"t"}, graph.IntsAttr("perm", 0, 3, 1, 2)),
		graph.NewNode("shape", "Shape", []string{"x"}, []string{"xs"}),
		graph.NewNode("width", "Gather", []string{"xs", "three"}, []string{"wd"}, graph.IntAttr("axis", 0)),
		graph.NewNode("cat", "Concat", []string{"wd", "cols"}, []string{"rs"}, graph.IntAttr("axis", 0)),
		graph.NewNode("reshape", "Reshape", []string{"t", "rs"}, []string{"f"}),
		graph.NewNode("mm", "MatMul", []string{"f", "wp"}, []string{"h"}),
		graph.NewNode("sm", "Softmax", []string{"h"}, []string{"y"}, graph.IntAttr("axis", -1)),
	}
	m, err := graph.FromGraph("width", g, map[string]int64{"": 14})
	require.NoError(t, err)
	return m
}

// widthReference computes widthModel in float64.
func widthReference(x, w, b, wp []float32, wd int) []float64 {
	const ci, co, h = 3, 4, 8
	c := make([]float64, co*h*wd)
	for o := range co {
		for y := range h {
			for xx := range wd {
				s := float64(b[o])
				for i := range ci {
					for ky := range 3 {
						for kx := range 3 {
							yy, xi := y+ky-1, xx+kx-1
							if yy < 0 || yy >= h || xi < 0 || xi >= wd {
								continue
							}
							s += float64(x[(i*h+yy)*wd+xi]) * float64(w[((o*ci+i)*3+ky)*3+kx])
						}
					}
				}
				c[(o*h+y)*wd+xx] = math.Max(s, 0)
			}
		}
	}
	for o := range co { // CumSum along H
		for xx := range wd {
			acc := 0.0
			for y := range h {
				acc += c[(o*h+y)*wd+xx]
				c[(o*h+y)*wd+xx] = acc
			}
		}
	}
	out := make([]float64, wd*5)
	for xx := range wd {
		row := make([]float64, 5)
		mx := math.Inf(-1)
		for j := range 5 {
			s := 0.0
			for o := range co {
				for y := range h {
					s += c[(o*h+y)*wd+xx] * float64(wp[(o*h+y)*5+j])
				}
			}
			row[j] = s
			mx = math.Max(mx, s)
		}
		sum := 0.0
		for j := range row {
			row[j] = math.Exp(row[j] - mx)
			sum += row[j]
		}
		for j := range row {
			out[xx*5+j] = row[j] / sum
		}
	}
	return out
}

// TestShapePlanRunsTheFirstRunPlanned: with shape plans (the default) every width's first run
// runs planned, built from shape inference over the signature (the folded shape arithmetic
// computed, the host step's and the reshape's shapes inferred), with the reference's outputs;
// with the option off the first run is interpreted, as before.
func TestShapePlanRunsTheFirstRunPlanned(t *testing.T) {
	rnd := inferRand()
	w, b, wp := randomF32(rnd, 4*3*9), randomF32(rnd, 4), randomF32(rnd, 32*5)
	for _, shapePlans := range []string{"1", "0"} {
		t.Run("shape_plans="+shapePlans, func(t *testing.T) {
			tp, rec := recordingProvider(t)
			s, err := FromGraph(widthModel(t, w, b, wp), WithExecutionProvider(ProviderHost), WithTracerProvider(tp),
				WithOption(OptionShapePlans, shapePlans))
			require.NoError(t, err)
			defer s.Close()
			widths := []int{1, 2, 5, 16, 17, 18 + rnd.IntN(40)}
			ctx, _ := parentContext(t, tp)
			for _, wd := range widths {
				x := randomF32(rnd, 3*8*wd)
				for run := range 2 {
					outs, err := s.Run(ctx, []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{1, 3, 8, int64(wd)}, x)}})
					require.NoError(t, err)
					require.Len(t, outs, 1)
					require.Equal(t, []int64{int64(wd), 5}, outs[0].Dims())
					got, want := tensor.Float64s(outs[0]), widthReference(x, w, b, wp, wd)
					for j := range want {
						require.InDelta(t, want[j], got[j], 1e-4, "width %d run %d element %d", wd, run, j)
					}
				}
			}
			runs := spansNamed(rec.Ended(), "loom.Run")
			require.Len(t, runs, 2*len(widths))
			for i, run := range runs {
				want := exec.ExecutorPlan
				if i%2 == 0 && shapePlans == "0" {
					want = exec.ExecutorInterpreter
				}
				require.Equal(t, want, attrOf(run, exec.AttrExecutor).AsString(), "run %d (width %d, its run %d)", i, widths[i/2], i%2)
			}
			plans := s.ExecutionPlans()
			require.Len(t, plans, len(widths))
			for _, p := range plans {
				require.True(t, p.Planned, p.Reason)
				require.Len(t, p.HostSteps, 1, "CumSum")
				require.Equal(t, 3, p.Folded, "Shape, Gather and Concat")
			}
		})
	}
}

// TestShapePlanDeclinesDataDependentShapes: NonZero's output size comes from the data, which
// shape inference cannot know: the first run is interpreted and traced as before (and the
// plan's guard then catches a changed count), with the interpreter's results.
func TestShapePlanDeclinesDataDependentShapes(t *testing.T) {
	tp, rec := recordingProvider(t)
	s, err := FromGraph(nonZeroModel(t), WithExecutionProvider(ProviderHost), WithTracerProvider(tp))
	require.NoError(t, err)
	defer s.Close()
	ref, err := FromGraph(nonZeroModel(t), WithExecutionProvider(ProviderHost), WithOption(OptionRunPlan, "0"))
	require.NoError(t, err)
	defer ref.Close()
	rnd := inferRand()
	ctx, _ := parentContext(t, tp)
	for range 3 {
		x := make([]float32, 8)
		for i := range x {
			x[i] = rnd.Float32()*2 - 1
		}
		feeds := []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{8}, x)}}
		want, err := ref.Run(context.Background(), feeds)
		require.NoError(t, err)
		got, err := s.Run(ctx, feeds)
		require.NoError(t, err)
		require.Equal(t, want[0].Dims(), got[0].Dims())
		require.Equal(t, tensor.Float64s(want[0]), tensor.Float64s(got[0]))
	}
	runs := spansNamed(rec.Ended(), "loom.Run")
	require.NotEmpty(t, runs)
	require.Equal(t, exec.ExecutorInterpreter, attrOf(runs[0], exec.AttrExecutor).AsString(), "no shape plan: NonZero's size is the data's")
}

// TestShapePlanSweepMatchesInterpreter runs the batch-symbolic MLP over many batch sizes, each
// first run planned from shapes, against the interpreter.
func TestShapePlanSweepMatchesInterpreter(t *testing.T) {
	rnd := inferRand()
	const in, out = 7, 5
	w, b := randomF32(rnd, in*out), randomF32(rnd, out)
	planned, interpreted := planPair(t, func(opts ...LoadOption) (*InferenceSession, error) {
		return FromGraph(mlpModel(t, w, b, in, out), opts...)
	})
	for _, rows := range []int{1, 2, 3, 4, 7, 8, 9, 15, 16, 31, 64} {
		t.Run(fmt.Sprint(rows), func(t *testing.T) {
			x := randomF32(rnd, rows*in)
			feeds := []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{int64(rows), in}, x)}}
			want, err := interpreted.Run(context.Background(), feeds)
			require.NoError(t, err)
			got, err := planned.Run(context.Background(), feeds)
			require.NoError(t, err)
			require.Equal(t, want[0].Dims(), got[0].Dims())
			wv, gv := tensor.Float64s(want[0]), tensor.Float64s(got[0])
			ref := mlpReference(x, w, b, rows, in, out)
			for j := range wv {
				require.InDelta(t, wv[j], gv[j], 1e-5, "element %d", j)
				require.InDelta(t, float64(ref[j]), gv[j], 1e-5, "element %d", j)
			}
		})
	}
	for _, p := range planned.ExecutionPlans() {
		require.True(t, p.Planned, p.Reason)
	}
}

// churnSession is an MLP session over x (rows, 6) and runRows, which runs rows fresh random
// rows, checks the outputs against the reference and returns the executor that ran them.
func churnSession(t *testing.T) (*InferenceSession, func(rows int) string) {
	rnd := inferRand()
	const in, out = 6, 3
	w, b := randomF32(rnd, in*out), randomF32(rnd, out)
	tp, rec := recordingProvider(t)
	s, err := FromGraph(mlpModel(t, w, b, in, out), WithExecutionProvider(ProviderHost), WithTracerProvider(tp))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	ctx, _ := parentContext(t, tp)
	runRows := func(rows int) string {
		t.Helper()
		x := randomF32(rnd, rows*in)
		outs, err := s.Run(ctx, []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{int64(rows), in}, x)}})
		require.NoError(t, err)
		want := mlpReference(x, w, b, rows, in, out)
		got := tensor.Float64s(outs[0])
		for j := range want {
			require.InDelta(t, float64(want[j]), got[j], 1e-5)
		}
		runs := spansNamed(rec.Ended(), "loom.Run")
		return attrOf(runs[len(runs)-1], exec.AttrExecutor).AsString()
	}
	return s, runRows
}

// TestPlanTieringInterpretsChurn: a session whose every run brings a new signature (a decode
// loop over a growing cache) stops building plans once plan.TieringWindow plans in a row ran only
// once, and interprets new signatures; a signature that comes back gets its plan, and from then
// on plans are built on first sight again. Outputs match the reference throughout.
func TestPlanTieringInterpretsChurn(t *testing.T) {
	s, runRows := churnSession(t)
	// Churn: every run a new signature.
	for rows := 1; rows <= plan.TieringWindow+1; rows++ {
		require.Equal(t, exec.ExecutorPlan, runRows(rows), "rows %d: planned on first sight", rows)
	}
	// Planning once is made to look dearer than any interpreted run (on this tiny model it
	// may well be cheaper: TestPlanTieringPlansOnceWhenThatPays covers that mode).
	for range 4 {
		s.tiering.RanPlanned(time.Hour) // in plan.TierSecondSight: noted, no change of mode
	}
	require.Len(t, s.ExecutionPlans(), plan.TieringWindow+1)
	for rows := plan.TieringWindow + 2; rows <= plan.TieringWindow+6; rows++ {
		require.Equal(t, exec.ExecutorInterpreter, runRows(rows), "rows %d: churn, interpreted", rows)
	}
	require.Len(t, s.ExecutionPlans(), plan.TieringWindow+1, "no plan built while no plan is used twice")
	// A signature comes back: its plan is built now, and plans are built on first sight again.
	require.Equal(t, exec.ExecutorPlan, runRows(plan.TieringWindow+3))
	require.Equal(t, exec.ExecutorPlan, runRows(plan.TieringWindow+3))
	require.Equal(t, exec.ExecutorPlan, runRows(100), "planned on first sight again")
	require.Len(t, s.ExecutionPlans(), plan.TieringWindow+3)
}

// TestPlanTieringPlansOnceWhenThatPays: under churn, where building a plan and running it once
// costs less than interpreting (made so here: the interpreted runs look an hour long), new
// signatures run planned and their plans are dropped after the run (the cache does not grow);
// a signature that comes back is cached again. Outputs match the reference throughout.
func TestPlanTieringPlansOnceWhenThatPays(t *testing.T) {
	s, runRows := churnSession(t)
	mode := s.tiering.Mode
	for rows := 1; rows <= plan.TieringWindow+1; rows++ {
		require.Equal(t, exec.ExecutorPlan, runRows(rows), "rows %d: planned on first sight", rows)
	}
	require.Equal(t, plan.TierSecondSight, mode())
	require.Equal(t, exec.ExecutorInterpreter, runRows(plan.TieringWindow+2))
	// Two interpreted runs measure the interpreter; they are made to look an hour long.
	s.tiering.RanInterpreted(time.Hour)
	s.tiering.RanInterpreted(time.Hour)
	require.Equal(t, plan.TierOnce, mode(), "planning once costs less than interpreting")
	plans := len(s.ExecutionPlans())
	for rows := plan.TieringWindow + 3; rows <= plan.TieringWindow+8; rows++ {
		require.Equal(t, exec.ExecutorPlan, runRows(rows), "rows %d: planned once", rows)
	}
	require.Len(t, s.ExecutionPlans(), plans, "plans run once are not kept")
	// A signature comes back: plans are cached again.
	require.Equal(t, exec.ExecutorPlan, runRows(plan.TieringWindow+5))
	require.Equal(t, plan.TierCache, mode())
	require.Equal(t, exec.ExecutorPlan, runRows(plan.TieringWindow+5))
	require.Len(t, s.ExecutionPlans(), plans+1)
}

// The tiering's decisions from synthetic costs: churn sends new signatures to the interpreter,
// planning once takes over when it costs less, and goes back to the interpreter when it
// costs more; a signature coming back restores the plan cache.
func TestPlanTieringModes(t *testing.T) {
	var pt plan.Tiering
	used := func(runs int64) *plan.Template {
		t := &plan.Template{}
		t.Runs.Store(runs)
		return t
	}
	for i := range plan.TieringWindow + 1 {
		require.Equal(t, plan.TierCache, pt.Decide(fmt.Sprint("k", i)))
		pt.RanPlanned(10 * time.Millisecond)
		pt.Built(used(1))
	}
	require.Equal(t, plan.TierSecondSight, pt.Mode(), "a window of plans run once")
	require.Equal(t, plan.TierSecondSight, pt.Decide("a"))
	pt.RanInterpreted(12 * time.Millisecond)
	require.Equal(t, plan.TierSecondSight, pt.Mode(), "one interpreted run is not enough to judge")
	require.Equal(t, plan.TierSecondSight, pt.Decide("b"))
	pt.RanInterpreted(13 * time.Millisecond)
	require.Equal(t, plan.TierOnce, pt.Mode(), "10 ms planned against 12.5 ms interpreted")
	require.Equal(t, plan.TierOnce, pt.Decide("c"))
	for range 3 {
		pt.RanPlanned(20 * time.Millisecond)
	}
	require.Equal(t, plan.TierSecondSight, pt.Mode(), "planning once now costs more than interpreting")
	require.Zero(t, pt.InterpretedRuns(), "the interpreter is timed anew")
	require.Equal(t, plan.TierCache, pt.Decide("b"), "a signature came back")
	require.Equal(t, plan.TierCache, pt.Decide("a"), "nothing is remembered in the cache mode")
	// Plans that are used again keep the cache on.
	var pc plan.Tiering
	for i := range 3 * plan.TieringWindow {
		pc.Decide(fmt.Sprint("k", i))
		pc.Built(used(int64(1 + i%2)))
	}
	require.Equal(t, plan.TierCache, pc.Mode())
	// Equal costs (within 5%) keep the interpreter.
	var pe plan.Tiering
	for range plan.TieringWindow + 1 {
		pe.RanPlanned(10 * time.Millisecond)
		pe.Built(used(1))
	}
	pe.RanInterpreted(10 * time.Millisecond)
	pe.RanInterpreted(10400 * time.Microsecond)
	require.Equal(t, plan.TierSecondSight, pe.Mode())
}

// TestShapePlanConcurrentFirstRuns: several goroutines bring the same new signatures at once;
// each run gives the reference's outputs, one plan is kept per signature, and Close frees it
// all (the test's leak check).
func TestShapePlanConcurrentFirstRuns(t *testing.T) {
	rnd := inferRand()
	w, b, wp := randomF32(rnd, 4*3*9), randomF32(rnd, 4), randomF32(rnd, 32*5)
	s, err := FromGraph(widthModel(t, w, b, wp), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	widths := []int{3, 9, 27}
	xs := make([][]float32, len(widths))
	for i, wd := range widths {
		xs[i] = randomF32(rnd, 3*8*wd)
	}
	errs := make(chan error, 8*len(widths))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range widths {
				i := (g + k) % len(widths)
				wd := widths[i]
				outs, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{1, 3, 8, int64(wd)}, xs[i])}})
				if err != nil {
					errs <- err
					return
				}
				got, want := tensor.Float64s(outs[0]), widthReference(xs[i], w, b, wp, wd)
				for j := range want {
					if math.Abs(got[j]-want[j]) > 1e-4 {
						errs <- fmt.Errorf("width %d element %d: %g, want %g", wd, j, got[j], want[j])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, s.ExecutionPlans(), len(widths))
}
