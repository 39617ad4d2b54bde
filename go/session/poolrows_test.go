package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// pool2d_rows (linalg.loom) pools narrow images in vectors along each output row, the last
// vector of a row overlapping the one before it, and blocks of channels. Each case pins the
// kernel and its vector width and checks it against the Go host function on fresh random
// inputs.
func TestPoolRowsAgainstHost(t *testing.T) {
	s := kernelCheckSession(t)
	f32 := f32Rand(t)
	pool := func(op string, kernel, strides []int64) *graph.Node {
		return graph.NewNode("n", op, []string{"x"}, []string{"y"}, graph.IntsAttr("kernel_shape", kernel...),
			graph.IntsAttr("strides", strides...))
	}
	cases := []struct {
		name string
		node *graph.Node
		in   tensor.Tensor
		vl   string
		tol  float64
	}{
		// MNIST's pools: 14 columns as two overlapping vectors of 8; 4 columns, stride 3.
		{"mnist_pool1", pool("MaxPool", []int64{2, 2}, []int64{2, 2}), f32(1, 8, 28, 28), "8", 0},
		{"mnist_pool2", pool("MaxPool", []int64{3, 3}, []int64{3, 3}), f32(1, 16, 14, 14), "4", 0},
		// Overlapping windows, unused trailing columns and rows, several blocks of channels
		// (the last one shorter).
		{"overlap_stride1", pool("MaxPool", []int64{3, 2}, []int64{1, 1}), f32(3, 7, 9, 20), "16", 0},
		{"many_channels", pool("MaxPool", []int64{2, 2}, []int64{2, 2}), f32(1, 91, 23, 21), "8", 0},
		{"stride_cols_3", pool("MaxPool", []int64{2, 3}, []int64{2, 3}), f32(1, 4, 9, 31), "8", 0},
		// One and three output columns (vectors of 1 and 2 lanes).
		{"one_column", pool("MaxPool", []int64{2, 2}, []int64{2, 2}), f32(1, 5, 6, 3), "1", 0},
		{"three_columns", pool("AveragePool", []int64{2, 2}, []int64{1, 2}), f32(2, 3, 5, 7), "2", 1e-6},
		{"average_3x3", pool("AveragePool", []int64{3, 3}, []int64{2, 2}), f32(1, 6, 17, 29), "8", 1e-6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, reason, err := ops.KernelPlanners[ops.PlannerKey(c.node)](c.node, 18, ops.InfosOf([]tensor.Tensor{c.in}))
			require.NoError(t, err)
			require.NotNil(t, p, reason)
			require.Len(t, p.Calls, 1)
			require.Equal(t, "pool2d_rows", p.Calls[0].Symbol)
			require.Equal(t, c.vl, p.Calls[0].Config["VL"])
			checkKernelOp(t, s, c.node, 18, []tensor.Tensor{c.in}, nil, c.tol, c.tol)
		})
	}
}
