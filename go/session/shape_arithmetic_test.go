package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// TestShapeArithmeticRunsAsHostFunctions checks that the interpreter (and so ShapeTrace's
// folding) runs an op whose inputs and outputs are all integer or bool tensors of at most 64
// elements as its host function, with the values its kernels compute, and that an op with a
// larger or a float tensor among them still runs its kernels.
func TestShapeArithmeticRunsAsHostFunctions(t *testing.T) {
	s := kernelCheckSession(t)
	r := movementRand{inferRand()}
	axis0 := graph.IntAttr("axis", 0)
	to := func(dt tensor.DType) *graph.Attribute { return graph.IntAttr("to", int64(dt)) }
	cases := []struct {
		name string
		node *graph.Node
		in   []tensor.Tensor
		host bool
	}{
		{"concat_int64", kernelNode("Concat", axis0), []tensor.Tensor{r.of(graph.Int64, 3), r.of(graph.Int64, 2)}, true},
		{"concat_int64_64", kernelNode("Concat", axis0), []tensor.Tensor{r.of(graph.Int64, 40), r.of(graph.Int64, 24)}, true},
		{"gather_int64", kernelNode("Gather"), []tensor.Tensor{r.of(graph.Int64, 4), int64Vec(0, 2, -1)}, true},
		{"slice_int64", kernelNode("Slice"), []tensor.Tensor{r.of(graph.Int64, 6), int64Vec(1), int64Vec(5)}, true},
		{"cast_int64_int32", kernelNode("Cast", to(graph.Int32)), []tensor.Tensor{r.of(graph.Int64, 4)}, true},
		{"equal_int64", kernelNode("Equal"), []tensor.Tensor{r.of(graph.Int64, 5), r.of(graph.Int64, 5)}, true},
		{"where_bool_int32", kernelNode("Where"), []tensor.Tensor{r.of(graph.Bool, 7), r.of(graph.Int32, 7), r.of(graph.Int32, 7)}, true},
		// One element past the limit, in the output only.
		{"concat_int64_65", kernelNode("Concat", axis0), []tensor.Tensor{r.of(graph.Int64, 40), r.of(graph.Int64, 25)}, false},
		// Few elements, but a float among the values.
		{"concat_float", kernelNode("Concat", axis0), []tensor.Tensor{r.f32(3), r.f32(2)}, false},
		{"cast_int64_float", kernelNode("Cast", to(graph.Float)), []tensor.Tensor{r.of(graph.Int64, 4)}, false},
		{"where_bool_float", kernelNode("Where"), []tensor.Tensor{r.of(graph.Bool, 7), r.f32(7), r.f32(7)}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, ok := exec.LookupOp(c.node)
			require.True(t, ok)
			rc := testRunCtx(s, 18)
			defer rc.Close()
			got, err := f(rc, c.node, c.in)
			require.NoError(t, err)
			if c.host {
				require.Equal(t, exec.VariantHost, rc.KernelVariant)
				require.Contains(t, rc.KernelReason, "shape arithmetic")
			} else {
				require.Contains(t, rc.KernelVariant, ".loom", "ran %s: %s", rc.KernelVariant, rc.KernelReason)
			}
			// The kernels' values (checkKernelOp holds them to the host function's), exactly.
			want := checkKernelOp(t, s, c.node, 18, c.in, nil, 0, 0)
			require.Len(t, got, len(want))
			for i := range want {
				require.Equal(t, want[i].Dims(), got[i].Dims(), "output %d", i)
				require.Equal(t, want[i].DType(), got[i].DType(), "output %d", i)
				require.Equal(t, want[i].Data(), got[i].Data(), "output %d", i)
			}
		})
	}
}
