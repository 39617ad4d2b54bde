package session

import (
	"context"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// boundModel has three outputs of a [n] float input pair: y = a + b and r = Relu(a) (kernel
// outputs a plan binds in place) and s = Shape(a) (an int64 constant the plan folds).
func boundModel(t *testing.T, n int64) *graph.Model {
	return floatGraph(t, "bound", map[string][]int64{"a": {n}, "b": {n}}, []string{"y", "r", "s"},
		graph.NewNode("add", "Add", []string{"a", "b"}, []string{"y"}),
		graph.NewNode("relu", "Relu", []string{"a"}, []string{"r"}),
		graph.NewNode("shape", "Shape", []string{"a"}, []string{"s"}))
}

func sameMemory(a, b tensor.Tensor) bool {
	ab, _ := ops.RawBytes(a)
	bb, _ := ops.RawBytes(b)
	return len(ab) == len(bb) && len(ab) > 0 && unsafe.SliceData(ab) == unsafe.SliceData(bb)
}

// RunInto writes the bound outputs into the caller's tensors (the tensors it returns are
// those, the same memory) on both executors, with the values Run gives on random inputs; the
// outputs not bound come back as from Run.
func TestRunIntoFillsCallerTensors(t *testing.T) {
	const n = 2048 // 8 KiB outputs: each run's are allocated alone (not carved from blocks)
	rnd := inferRand()
	for _, executor := range traceExecutors {
		t.Run(executor, func(t *testing.T) {
			s, err := FromGraph(boundModel(t, n), tracedOptions(nil, executor)...)
			require.NoError(t, err)
			defer s.Close()
			for run := range 4 { // the plan's signature is traced by the first run
				feeds := []tensor.NamedTensor{{Name: "a", Tensor: tensor.MustTensor([]int64{n}, randomF32(rnd, n))}, {Name: "b", Tensor: tensor.MustTensor([]int64{n}, randomF32(rnd, n))}}
				want, err := s.Run(context.Background(), feeds)
				require.NoError(t, err)
				y := tensor.MustTensor([]int64{n}, make([]float32, n))
				sh := tensor.MustTensor([]int64{1}, []int64{-1})
				bound := []tensor.NamedTensor{{Name: "s", Tensor: sh}, {Name: "y", Tensor: y}}
				if run%2 == 1 { // r bound too
					bound = append(bound, tensor.NamedTensor{Name: "r", Tensor: tensor.MustTensor([]int64{n}, make([]float32, n))})
				}
				got, err := s.RunInto(context.Background(), feeds, bound)
				require.NoError(t, err)
				require.Len(t, got, 3)
				assert.True(t, sameMemory(got[0], y), "y is the caller's tensor")
				assert.True(t, sameMemory(got[2], sh), "s is the caller's tensor")
				if run%2 == 1 {
					assert.True(t, sameMemory(got[1], bound[2].Tensor), "r is the caller's tensor")
				}
				for i := range want {
					require.Equal(t, want[i].Data(), got[i].Data(), "output %d", i)
					require.Equal(t, want[i].Shape(), got[i].Shape())
				}
				ys, _ := tensor.TensorOf[float32](y)
				require.Equal(t, want[0].Data(), ys, "the values are in the caller's slice")
				require.Equal(t, []int64{n}, sh.Data())
			}
			if executor == exec.ExecutorPlan {
				tmpl, _ := onlyPlan(t, s)
				require.GreaterOrEqual(t, tmpl.BindOut[0], 0, "a kernel writes y in place")
				feeds := []tensor.NamedTensor{{Name: "a", Tensor: tensor.MustTensor([]int64{n}, randomF32(rnd, n))}, {Name: "b", Tensor: tensor.MustTensor([]int64{n}, randomF32(rnd, n))}}
				y := tensor.MustTensor([]int64{n}, make([]float32, n))
				r := tensor.MustTensor([]int64{n}, make([]float32, n))
				bound := []tensor.NamedTensor{{Name: "y", Tensor: y}, {Name: "r", Tensor: r}}
				run := testing.AllocsPerRun(20, func() { _, _ = s.Run(context.Background(), feeds) })
				into := testing.AllocsPerRun(20, func() { _, _ = s.RunInto(context.Background(), feeds, bound) })
				t.Logf("allocations per run: Run %.0f, RunInto %.0f", run, into)
				assert.Less(t, into, run, "the plan writes bound outputs into the caller's memory instead of allocating")
			}
		})
	}
}

// RunInto refuses bound outputs that cannot take the run's result, naming the output.
func TestRunIntoRefusesMismatches(t *testing.T) {
	rnd := inferRand()
	for _, executor := range traceExecutors {
		t.Run(executor, func(t *testing.T) {
			s, err := FromGraph(mlpModel(t, randomF32(rnd, 8*3), randomF32(rnd, 3), 8, 3), tracedOptions(nil, executor)...)
			require.NoError(t, err)
			defer s.Close()
			x := tensor.MustTensor([]int64{2, 8}, randomF32(rnd, 16))
			feeds := []tensor.NamedTensor{{Name: "x", Tensor: x}}
			for range 2 {
				_, err := s.Run(context.Background(), feeds)
				require.NoError(t, err)
			}
			for _, c := range []struct {
				name  string
				bound []tensor.NamedTensor
				msg   string
			}{
				{"dtype", []tensor.NamedTensor{{Name: "y", Tensor: tensor.MustTensor([]int64{2, 3}, make([]float64, 6))}}, `output "y"`},
				{"rank", []tensor.NamedTensor{{Name: "y", Tensor: tensor.MustTensor([]int64{6}, make([]float32, 6))}}, `output "y"`},
				{"fixed dimension", []tensor.NamedTensor{{Name: "y", Tensor: tensor.MustTensor([]int64{2, 4}, make([]float32, 8))}}, `output "y"`},
				{"run's shape", []tensor.NamedTensor{{Name: "y", Tensor: tensor.MustTensor([]int64{3, 3}, make([]float32, 9))}}, `output "y": the bound tensor is float[3,3], the run produce`},
				{"name", []tensor.NamedTensor{{Name: "z", Tensor: tensor.MustTensor([]int64{2, 3}, make([]float32, 6))}}, `no output named "z"`},
				{"twice", []tensor.NamedTensor{{Name: "y", Tensor: tensor.MustTensor([]int64{2, 3}, make([]float32, 6))}, {Name: "y", Tensor: tensor.MustTensor([]int64{2, 3}, make([]float32, 6))}}, `output "y" bound twice`},
				{"empty", []tensor.NamedTensor{{Name: "y"}}, `output "y": empty tensor`},
				{"input memory", []tensor.NamedTensor{{Name: "y", Tensor: x.Reshaped(2, 8)}}, `output "y"`},
			} {
				if c.name == "input memory" {
					xs, _ := tensor.TensorOf[float32](x)
					c.bound[0].Tensor = tensor.MustTensor([]int64{2, 3}, xs[:6])
					c.msg = `output "y": the bound tensor's memory overlaps input "x"`
				}
				_, err := s.RunInto(context.Background(), feeds, c.bound)
				require.Error(t, err, c.name)
				assert.ErrorIs(t, err, tensor.ErrInvalidArgument, c.name)
				var e *tensor.Error
				require.ErrorAs(t, err, &e, c.name)
				assert.Contains(t, err.Error(), c.msg, c.name)
			}
			got, err := s.RunInto(context.Background(), feeds, nil)
			require.NoError(t, err, "no bound outputs is Run")
			require.Len(t, got, 1)
		})
	}
}
