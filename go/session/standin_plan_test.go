package session

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// seamModel is y = CumSum(x·w, axis 1) + b: a kernel (MatMul), a host step (CumSum, which has
// no Loom kernel) and a kernel (Add), so that a device arena has one seam each way.
func seamModel(t *testing.T, w, b []float32, in, out int) *graph.Model {
	g := &graph.Graph{Name: "seam"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("N"), graph.DimOf(int64(in))}))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.AddInitializer(graph.TensorFromFloat32("w", []int64{int64(in), int64(out)}, w))
	g.AddInitializer(graph.TensorFromFloat32("b", []int64{int64(out)}, b))
	g.AddInitializer(graph.TensorFromInt64("axis", nil, []int64{1}))
	g.Nodes = []*graph.Node{
		graph.NewNode("mm", "MatMul", []string{"x", "w"}, []string{"h"}),
		graph.NewNode("cs", "CumSum", []string{"h", "axis"}, []string{"c"}),
		graph.NewNode("add", "Add", []string{"c", "b"}, []string{"y"}),
	}
	m, err := graph.FromGraph("seam", g, map[string]int64{"": 14})
	require.NoError(t, err)
	return m
}

func seamReference(x, w, b []float32, rows, in, out int) []float64 {
	y := make([]float64, rows*out)
	for r := range rows {
		acc := 0.0
		for c := range out {
			s := 0.0
			for k := range in {
				s += float64(x[r*in+k]) * float64(w[k*out+c])
			}
			acc += s
			y[r*out+c] = acc + float64(b[c])
		}
	}
	return y
}

// On the cuda stand-in, compiled plans keep their arena in device memory: the plan's report
// says so and names the host step's seams, and every run (interpreted, then planned, then
// through RunInto) matches the reference.
func TestCUDAStandInPlanKeepsValuesOnTheDevice(t *testing.T) {
	rnd := inferRand()
	const in, out = 7, 5
	w, b := randomF32(rnd, in*out), randomF32(rnd, out)
	s, err := FromGraph(seamModel(t, w, b, in, out), WithExecutionProvider(ProviderCUDA),
		WithOption(OptionCUDAStandIn, "1"), WithIntraOpThreads(2))
	require.NoError(t, err)
	defer s.Close()
	for round := range 6 {
		rows := 2 + round%2
		x := randomF32(rnd, rows*in)
		feed := []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{int64(rows), in}, x)}}
		var got []float32
		if round >= 4 {
			dst := tensor.MustTensor([]int64{int64(rows), out}, make([]float32, rows*out))
			_, err := s.RunInto(context.Background(), feed, []tensor.NamedTensor{{Name: "y", Tensor: dst}})
			require.NoError(t, err)
			got, err = tensor.TensorOf[float32](dst)
			require.NoError(t, err)
		} else {
			res, err := s.Run(context.Background(), feed)
			require.NoError(t, err)
			got, err = tensor.TensorOf[float32](res[0])
			require.NoError(t, err)
		}
		for i, v := range seamReference(x, w, b, rows, in, out) {
			require.InDelta(t, v, got[i], 1e-4, "round %d, element %d", round, i)
		}
	}
	plans := s.ExecutionPlans()
	require.Len(t, plans, 2, "one plan per row count")
	for _, p := range plans {
		require.True(t, p.Planned, p.Reason)
		assert.True(t, p.DeviceArena)
		assert.Equal(t, 2, p.KernelSteps, "MatMul and Add run as kernels")
		require.Len(t, p.HostSteps, 1)
		hs := p.HostSteps[0]
		assert.Equal(t, "cs", hs.Node)
		assert.Equal(t, []string{"h"}, hs.Downloads, "CumSum reads what MatMul wrote on the device")
		assert.Equal(t, []string{"c"}, hs.Uploads, "Add reads what CumSum wrote on the host")
	}

	// A traced planned run's host-step span names the seams.
	tp, rec := recordingProvider(t)
	traced, err := FromGraph(seamModel(t, w, b, in, out), WithExecutionProvider(ProviderCUDA),
		WithOption(OptionCUDAStandIn, "1"), WithTracerProvider(tp))
	require.NoError(t, err)
	defer traced.Close()
	tctx, _ := parentContext(t, tp)
	feed := []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{2, in}, randomF32(rnd, 2*in))}}
	for range 2 {
		_, err := traced.Run(tctx, feed)
		require.NoError(t, err)
	}
	var reasons []string
	for _, sp := range spansNamed(rec.Ended(), "CumSum") {
		if attrOf(sp, exec.AttrExecutor).AsString() == "plan" {
			reasons = append(reasons, attrOf(sp, exec.AttrReason).AsString())
		}
	}
	require.Len(t, reasons, 2, "both runs are the plan's (the first builds it from the signature's shapes)")
	for _, r := range reasons {
		assert.Contains(t, r, "(device seam: downloads h; uploads c)")
	}
	t.Logf("plan span reason: %s", reasons[0])
}
