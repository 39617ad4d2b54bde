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
// elements, with integer values float64 holds exactly, as its host function, with the values
// its kernels compute, and that an op with a larger or a float tensor among them, or an int64
// past 2^53, still runs its kernels.
func TestShapeArithmeticRunsAsHostFunctions(t *testing.T) {
	s := kernelCheckSession(t)
	r := movementRand{inferRand()}
	// int64 values float64 holds exactly (|v| <= 2^53, the bounds among them), of every
	// magnitude below: the host functions compute in float64.
	exact := func(n int64) tensor.Tensor {
		v := make([]int64, n)
		for i := range v {
			v[i] = (r.rnd.Int64N(1<<54+1) - 1<<53) >> r.rnd.IntN(54)
		}
		v[r.rnd.IntN(int(n))] = 1 << 53 * (2*int64(r.rnd.IntN(2)) - 1)
		return tensor.MustTensor([]int64{n}, v)
	}
	beyond := func(n int64) tensor.Tensor { // one element just past 2^53
		x := exact(n)
		x.Data().([]int64)[r.rnd.IntN(int(n))] = 1<<53 + 1
		return x
	}
	shaped := func(x tensor.Tensor, dims ...int64) tensor.Tensor { return tensor.MustTensor(dims, x.Data().([]int64)) }
	axis0 := graph.IntAttr("axis", 0)
	to := func(dt tensor.DType) *graph.Attribute { return graph.IntAttr("to", int64(dt)) }
	cases := []struct {
		name string
		node *graph.Node
		in   []tensor.Tensor
		host bool
		// lossy: the host function's float64 does not hold every input (its values differ
		// from the kernels': why such an op runs its kernels).
		lossy bool
	}{
		{"concat_int64", kernelNode("Concat", axis0), []tensor.Tensor{exact(3), exact(2)}, true, false},
		{"concat_int64_64", kernelNode("Concat", axis0), []tensor.Tensor{exact(40), exact(24)}, true, false},
		{"gather_int64", kernelNode("Gather"), []tensor.Tensor{exact(4), int64Vec(0, 2, -1)}, true, false},
		{"slice_int64", kernelNode("Slice"), []tensor.Tensor{exact(6), int64Vec(1), int64Vec(5)}, true, false},
		{"cast_int64_int32", kernelNode("Cast", to(graph.Int32)), []tensor.Tensor{exact(16)}, true, false},
		{"cast_int64_uint8", kernelNode("Cast", to(graph.Uint8)), []tensor.Tensor{exact(16)}, true, false},
		{"cast_int64_int8", kernelNode("Cast", to(graph.Int8)), []tensor.Tensor{exact(16)}, true, false},
		{"cast_int64_bool", kernelNode("Cast", to(graph.Bool)), []tensor.Tensor{exact(16)}, true, false},
		{"cast_int32_int64", kernelNode("Cast", to(graph.Int64)), []tensor.Tensor{r.of(graph.Int32, 16)}, true, false},
		{"cast_uint8_int16", kernelNode("Cast", to(graph.Int16)), []tensor.Tensor{r.of(graph.Uint8, 16)}, true, false},
		{"equal_int64", kernelNode("Equal"), []tensor.Tensor{exact(5), exact(5)}, true, false},
		{"less_int32", kernelNode("Less"), []tensor.Tensor{r.of(graph.Int32, 9), r.of(graph.Int32, 9)}, true, false},
		{"where_bool_int32", kernelNode("Where"), []tensor.Tensor{r.of(graph.Bool, 7), r.of(graph.Int32, 7), r.of(graph.Int32, 7)}, true, false},
		// Broadcast to 64 elements: shape arithmetic, known before planning.
		{"equal_broadcast_64", kernelNode("Equal"), []tensor.Tensor{shaped(exact(4), 4, 1), shaped(exact(16), 1, 16)}, true, false},
		// 80 elements by the bound taken before planning (data's times the indices'), 5 by
		// the plan's outputs: host, decided after planning.
		{"gather_int64_bound", kernelNode("Gather"), []tensor.Tensor{exact(16), int64Vec(0, 3, 5, -1, 2)}, true, false},
		// An int64 past 2^53: float64 does not hold it (not a shape).
		{"cast_int64_int32_beyond", kernelNode("Cast", to(graph.Int32)), []tensor.Tensor{beyond(16)}, false, true},
		{"equal_int64_beyond", kernelNode("Equal"), []tensor.Tensor{beyond(5), exact(5)}, false, true},
		// One element past the limit, in the output only.
		{"concat_int64_65", kernelNode("Concat", axis0), []tensor.Tensor{exact(40), exact(25)}, false, false},
		{"equal_broadcast_65", kernelNode("Equal"), []tensor.Tensor{shaped(exact(5), 5, 1), shaped(exact(13), 1, 13)}, false, false},
		// Few elements, but a float among the values.
		{"concat_float", kernelNode("Concat", axis0), []tensor.Tensor{r.f32(3), r.f32(2)}, false, false},
		{"cast_int64_float", kernelNode("Cast", to(graph.Float)), []tensor.Tensor{exact(4)}, false, false},
		{"where_bool_float", kernelNode("Where"), []tensor.Tensor{r.of(graph.Bool, 7), r.f32(7), r.f32(7)}, false, false},
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
			if c.lossy {
				return
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
