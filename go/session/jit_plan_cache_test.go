package session

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/plan"
)

// sweepModel is y = relu(x) + x·x for x [1, W], W symbolic: one signature per width.
func sweepModel(t *testing.T) *graph.Model {
	t.Helper()
	g := &graph.Graph{Name: "sweep"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.DimOf(1), graph.SymDim("W")}))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.Nodes = []*graph.Node{
		graph.NewNode("relu", "Relu", []string{"x"}, []string{"r"}),
		graph.NewNode("sq", "Mul", []string{"x", "x"}, []string{"q"}),
		graph.NewNode("add", "Add", []string{"r", "q"}, []string{"y"}),
	}
	m, err := graph.FromGraph("sweep", g, map[string]int64{"": 13})
	require.NoError(t, err)
	return m
}

// runSweep runs width w on fresh random inputs and checks y; it returns an error rather than
// failing, for runs on other goroutines.
func runSweep(s *InferenceSession, rnd *rand.Rand, w int) error {
	x := randomF32(rnd, w)
	outs, err := s.Run(context.Background(), []NamedTensor{{Name: "x", Tensor: MustTensor([]int64{1, int64(w)}, x)}})
	if err != nil {
		return err
	}
	y := outs[0].Data().([]float32)
	if len(y) != w {
		return fmt.Errorf("width %d: %d outputs", w, len(y))
	}
	for i, v := range x {
		want := float64(max(v, 0)) + float64(v)*float64(v)
		if math.Abs(float64(y[i])-want) > 1e-6*math.Max(1, want) {
			return fmt.Errorf("width %d, element %d: %v, want %v", w, i, y[i], want)
		}
	}
	return nil
}

// plannedSignatures counts the session's plans that run (not the interpreter).
func plannedSignatures(s *InferenceSession) (planned, all int) {
	for _, r := range s.ExecutionPlans() {
		all++
		if r.Planned {
			planned++
		}
	}
	return planned, all
}

// A sweep over 40 widths plans every one (there used to be room for 16 signatures, the rest
// interpreted forever), concurrent runs of different widths included (go test -race); the
// outputs match the reference, and Close frees every arena (the memory budget holds nothing;
// TestMain checks the native handles).
func TestPlanCacheHoldsAWidthSweep(t *testing.T) {
	// It counts the instances' own arenas: small plans keep one (LOOM_TEST_SHARED_ARENA_MIN
	// may have moved every plan onto shared arenas).
	defer plan.SetSharedArenaMin(plan.SharedArenaMin)()
	rnd := inferRand()
	s, err := FromGraph(sweepModel(t))
	require.NoError(t, err)
	const widths = 40
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		r := rand.New(rand.NewPCG(rnd.Uint64(), uint64(g)))
		go func() {
			defer wg.Done()
			for i := range 3 * widths {
				if err := runSweep(s, r, 100+(i*7+g*13)%widths); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for w := 100; w < 100+widths; w++ {
		require.NoError(t, runSweep(s, rnd, w))
	}
	planned, all := plannedSignatures(s)
	require.Equal(t, widths, all)
	require.Equal(t, widths, planned)
	require.Zero(t, s.CacheStats().EvictedPlans)
	a := s.plans.Allocations(nil)
	require.GreaterOrEqual(t, a.Arenas, widths, "every signature made an instance")
	require.NoError(t, s.Close())
	_, held := s.MemoryBudget()
	require.Zero(t, held, "the closed session holds memory")
}

// Past the cache's bounds the least recently used idle plans are evicted: by count (maxPlans
// signatures), and by the arenas' share of the memory budget; an evicted signature is
// planned again, correctly, when it comes back, and the arenas held stay within the share.
func TestPlanCacheEvictsLeastRecentlyUsed(t *testing.T) {
	rnd := inferRand()
	t.Run("count", func(t *testing.T) {
		s, err := FromGraph(sweepModel(t))
		require.NoError(t, err)
		defer s.Close()
		const n = 300
		for w := 1; w <= n; w++ {
			require.NoError(t, runSweep(s, rnd, w))
			require.NoError(t, runSweep(s, rnd, w))
		}
		planned, all := plannedSignatures(s)
		require.Equal(t, 256, all)
		require.Equal(t, 256, planned)
		require.Equal(t, int64(n-256), s.CacheStats().EvictedPlans)
		// The first widths went first; the latest are still there, and an evicted one is
		// planned again.
		sigs := map[string]bool{}
		for _, r := range s.ExecutionPlans() {
			sigs[r.Signature] = true
		}
		require.False(t, sigs["x: tensor(float)[1,1]"])
		require.True(t, sigs[fmt.Sprintf("x: tensor(float)[1,%d]", n)])
		require.NoError(t, runSweep(s, rnd, 1))
		require.NoError(t, runSweep(s, rnd, 1))
		sigs = map[string]bool{}
		for _, r := range s.ExecutionPlans() {
			sigs[r.Signature] = r.Planned
		}
		require.True(t, sigs["x: tensor(float)[1,1]"], "the evicted signature is planned again")
	})
	t.Run("arena bytes", func(t *testing.T) {
		const budget = 1 << 20 // the arenas may hold a quarter: 256 KiB
		s, err := FromGraph(sweepModel(t), WithMemoryBudget(budget))
		require.NoError(t, err)
		defer s.Close()
		widths := []int{5000, 6000, 7000, 8000, 9000, 10000} // arenas of 40-80 KB, 360 KB in all
		for range 2 {
			for _, w := range widths {
				require.NoError(t, runSweep(s, rnd, w))
				require.NoError(t, runSweep(s, rnd, w))
				a := s.plans.Allocations(nil)
				live := int64(0)
				for _, r := range s.ExecutionPlans() {
					live += r.ArenaBytes
				}
				require.LessOrEqual(t, live, int64(budget/planArenaShare), "plans %d, arenas %+v", len(s.ExecutionPlans()), a)
			}
		}
		require.Positive(t, s.CacheStats().EvictedPlans)
		planned, _ := plannedSignatures(s)
		require.Positive(t, planned)
	})
}
