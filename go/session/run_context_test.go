package session

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/plan"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// spinModel is y = Loop(Cast(n)){x = x*k + w} + x over x [4]: the trip count comes from a
// float input, so that a compiled plan runs the Loop as a host step whatever n is (a float
// input is not specialized), followed by a kernel segment (the Add).
func spinModel(t testing.TB) *graph.Model {
	body := &graph.Graph{Name: "body"}
	body.Inputs = []*graph.Value{
		graph.Input("iter", graph.TensorType(graph.Int64, graph.Shape{})),
		graph.Input("cond_in", graph.TensorType(graph.Bool, graph.Shape{})),
		graph.Input("x_in", graph.TensorType(graph.Float, graph.ShapeOf(4))),
	}
	body.Outputs = []*graph.Value{
		graph.Output("cond_out", graph.TensorType(graph.Bool, graph.Shape{})),
		graph.Output("x_out", graph.TensorType(graph.Float, graph.ShapeOf(4))),
	}
	body.AddInitializer(graph.TensorFromFloat32("k", []int64{4}, []float32{0.5, 0.25, -0.5, 1}))
	body.Nodes = []*graph.Node{
		graph.NewNode("keep", "Identity", []string{"cond_in"}, []string{"cond_out"}),
		graph.NewNode("scale", "Mul", []string{"x_in", "k"}, []string{"xk"}),
		graph.NewNode("shift", "Add", []string{"xk", "w"}, []string{"x_out"}),
	}
	g := &graph.Graph{Name: "spin"}
	g.Inputs = []*graph.Value{
		graph.Input("n", graph.TensorType(graph.Float, graph.Shape{})),
		graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(4))),
	}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.AddInitializer(graph.TensorFromFloat32("w", []int64{4}, []float32{1, -1, 0.5, 0}))
	g.Nodes = []*graph.Node{
		graph.NewNode("trips", "Cast", []string{"n"}, []string{"m"}, graph.IntAttr("to", int64(graph.Int64))),
		graph.NewNode("loop", "Loop", []string{"m", "", "x"}, []string{"l"},
			&graph.Attribute{Name: "body", Type: graph.AttrGraph, Graph: body}),
		graph.NewNode("residual", "Add", []string{"l", "x"}, []string{"y"}),
	}
	m, err := graph.FromGraph("spin", g, map[string]int64{"": 13})
	require.NoError(t, err)
	return m
}

func spinFeeds(n float32, x []float32) []tensor.NamedTensor {
	return []tensor.NamedTensor{{Name: "n", Tensor: tensor.MustTensor([]int64{}, []float32{n})}, {Name: "x", Tensor: tensor.MustTensor([]int64{4}, x)}}
}

// resources is what a session holds between runs: its context's sessions and bytes, and
// whether every plan instance is idle.
type resources struct {
	users   int
	charged uint64
}

func sessionResources(t *testing.T, s *InferenceSession) resources {
	t.Helper()
	s.plans.Mu.Lock()
	for key, e := range s.plans.Entries {
		if e.Template != nil {
			require.Len(t, e.Idle, e.Count, "every instance of plan %s is back", key)
		}
	}
	s.plans.Mu.Unlock()
	return resources{users: device.ContextUsers(s.eng.Ctx), charged: s.eng.Ctx.Charged()}
}

// requireCanceled checks a cancelled run's error: an *Error matching want (context.Canceled
// or context.DeadlineExceeded).
func requireCanceled(t *testing.T, err error, want error) *tensor.Error {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, want)
	var e *tensor.Error
	require.ErrorAs(t, err, &e)
	return e
}

// A run cancelled while a Loop spins stops between the body's iterations, on both executors
// (the plan runs the Loop as a host step; a new signature's first run is interpreted and
// traced), and leaves the session as it was: the next runs give the right outputs and hold
// no more sessions or memory than before.
func TestRunCancelStopsBetweenOps(t *testing.T) {
	for _, executor := range traceExecutors {
		t.Run(executor, func(t *testing.T) {
			s, err := FromGraph(spinModel(t), tracedOptions(nil, executor)...)
			require.NoError(t, err)
			defer s.Close()
			rnd := inferRand()
			x := randomF32(rnd, 4)
			want, err := s.Run(context.Background(), spinFeeds(3, x))
			require.NoError(t, err)
			_, err = s.Run(context.Background(), spinFeeds(3, x)) // the plan's first run
			require.NoError(t, err)
			before := sessionResources(t, s)

			for _, c := range []struct {
				name string
				ctx  func() (context.Context, context.CancelFunc)
				want error
			}{
				{"cancel", func() (context.Context, context.CancelFunc) {
					ctx, cancel := context.WithCancel(context.Background())
					time.AfterFunc(20*time.Millisecond, cancel)
					return ctx, cancel
				}, context.Canceled},
				{"deadline", func() (context.Context, context.CancelFunc) {
					return context.WithTimeout(context.Background(), 20*time.Millisecond)
				}, context.DeadlineExceeded},
			} {
				ctx, cancel := c.ctx()
				start := time.Now()
				_, err := s.Run(ctx, spinFeeds(1e15, x))
				cancel()
				e := requireCanceled(t, err, c.want)
				assert.Less(t, time.Since(start), 10*time.Second, c.name)
				// The node the run stopped before: the Loop's, or one of its body's.
				assert.Contains(t, []string{"loop", "keep", "scale", "shift"}, e.Node, "the Loop was running: %v", err)
				assert.Contains(t, err.Error(), "context")

				got, err := s.Run(context.Background(), spinFeeds(3, x))
				require.NoError(t, err, "the session is usable after a cancelled run")
				require.Equal(t, want[0].Data(), got[0].Data())
				assert.Equal(t, before, sessionResources(t, s), "a cancelled run leaks no plan instance, run session or memory")
			}
			if executor == exec.ExecutorPlan {
				plans := s.ExecutionPlans()
				require.Len(t, plans, 1)
				require.True(t, plans[0].Planned, "a cancelled run does not unplan the signature: %s", plans[0].Reason)
			}
		})
	}
}

// A run whose context is done before it starts fails at once, through Run (the plan's fast
// path), RunInto, RunValues (the general path) and Warmup, with the cause of a context
// cancelled with one.
func TestRunCanceledBeforeStart(t *testing.T) {
	for _, executor := range traceExecutors {
		t.Run(executor, func(t *testing.T) {
			rnd := inferRand()
			s, err := FromGraph(mlpModel(t, randomF32(rnd, 8*3), randomF32(rnd, 3), 8, 3), tracedOptions(nil, executor)...)
			require.NoError(t, err)
			defer s.Close()
			feeds := []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{2, 8}, randomF32(rnd, 16))}}
			for range 2 {
				_, err := s.Run(context.Background(), feeds)
				require.NoError(t, err)
			}
			before := sessionResources(t, s)
			stop := errors.New("shutting down")
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(stop)

			_, err = s.Run(ctx, feeds)
			requireCanceled(t, err, context.Canceled)
			require.ErrorIs(t, err, stop, "the cancel cause")
			_, err = s.RunInto(ctx, feeds, []tensor.NamedTensor{{Name: "y", Tensor: tensor.MustTensor([]int64{2, 3}, make([]float32, 6))}})
			requireCanceled(t, err, context.Canceled)
			_, err = s.RunValues(ctx, []tensor.NamedValue{{Name: "x", Value: tensor.TensorValue(feeds[0].Tensor)}})
			requireCanceled(t, err, context.Canceled)
			err = s.Warmup(ctx, map[string][]int64{"x": {1, 8}})
			e := requireCanceled(t, err, context.Canceled)
			assert.Equal(t, "Warmup", e.Op)

			expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			defer cancel2()
			_, err = s.Run(expired, feeds)
			requireCanceled(t, err, context.DeadlineExceeded)

			_, err = s.Run(context.Background(), feeds)
			require.NoError(t, err)
			assert.Equal(t, before, sessionResources(t, s))
		})
	}
}

// A compiled plan checks its run's context before every segment and host step, naming the
// node it stopped before.
func TestPlanStopsBetweenSegments(t *testing.T) {
	s, err := FromGraph(spinModel(t), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	x := randomF32(inferRand(), 4)
	for range 2 {
		_, err := s.Run(context.Background(), spinFeeds(2, x))
		require.NoError(t, err)
	}
	tmpl, inst := onlyPlan(t, s)
	require.GreaterOrEqual(t, len(tmpl.Items), 2, "the Loop's host step and the Add's segment")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ins := []tensor.Tensor{spinFeeds(2, x)[0].Tensor, spinFeeds(2, x)[1].Tensor}
	rc := exec.NewRunCtx(ctx, s.eng, exec.PhaseRun)
	_, err = tmpl.Execute(s.pe, rc, inst, ins, nil)
	rc.Close()
	e := requireCanceled(t, err, context.Canceled)
	assert.Equal(t, tmpl.ItemNode(tmpl.Items[0]).Name, e.Node)
}

// Concurrent runs, some cancelled at random moments, leave every run that was not cancelled
// correct and the session whole (go test -race checks the sharing).
func TestRunCancelConcurrent(t *testing.T) {
	for _, executor := range traceExecutors {
		t.Run(executor, func(t *testing.T) {
			s, err := FromGraph(spinModel(t), tracedOptions(nil, executor)...)
			require.NoError(t, err)
			defer s.Close()
			x := randomF32(inferRand(), 4)
			want, err := s.Run(context.Background(), spinFeeds(5, x))
			require.NoError(t, err)
			var wg sync.WaitGroup
			const runners, perRunner = 4, 6
			errs := make(chan error, runners*perRunner)
			for r := range runners {
				wg.Go(func() {
					for i := range perRunner {
						if (r+i)%2 == 0 {
							got, err := s.Run(context.Background(), spinFeeds(5, x))
							if err == nil && !assert.Equal(t, want[0].Data(), got[0].Data()) {
								err = errors.New("wrong output")
							}
							errs <- err
							continue
						}
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+i)*time.Millisecond)
						_, err := s.Run(ctx, spinFeeds(1e15, x))
						cancel()
						if !errors.Is(err, context.DeadlineExceeded) {
							errs <- errors.Join(errors.New("a spinning run was not stopped"), err)
							continue
						}
						errs <- nil
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			sessionResources(t, s) // every plan instance is back
			got, err := s.Run(context.Background(), spinFeeds(5, x))
			require.NoError(t, err)
			require.Equal(t, want[0].Data(), got[0].Data())
		})
	}
}

// BenchmarkPlanTinyAddCancelable is BenchmarkPlanTinyAdd in a context that can be cancelled
// (never is): what checking it between a plan's segments costs.
func BenchmarkPlanTinyAddCancelable(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	benchmarkPlanTinyAdd(b, ctx)
}

// BenchmarkRunContextChecks is what a planned run pays for its context, by kind of context:
// taking Done and looking for a span once per run, then one check before each of its items
// (two here).
func BenchmarkRunContextChecks(b *testing.B) {
	cancelable, cancel := context.WithCancel(context.Background())
	defer cancel()
	deadline, cancel2 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"background", context.Background()}, {"cancelable", cancelable}, {"deadline", deadline}} {
		b.Run(c.name, func(b *testing.B) {
			rc := testRunCtx(nil, 0)
			stopped := 0
			for b.Loop() {
				if exec.Traced(c.ctx) {
					b.Fatal("traced")
				}
				*rc = exec.RunCtx{Ctx: c.ctx, Done: c.ctx.Done()}
				for range 2 {
					if rc.Done != nil && plan.IsDone(rc.Done) {
						stopped++
					}
				}
			}
			if stopped != 0 {
				b.Fatal("stopped")
			}
		})
	}
}
