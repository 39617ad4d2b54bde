package session

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/kernelops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// movementRand makes tensors of any type the movement kernels copy, with fresh random
// elements (never all zeros).
type movementRand struct{ rnd *rand.Rand }

func (m movementRand) f32(shape ...int64) tensor.Tensor {
	return tensor.MustTensor(shape, randomF32(m.rnd, ops.Numel(shape)))
}

func (m movementRand) of(dt tensor.DType, shape ...int64) tensor.Tensor {
	n := ops.Numel(shape)
	switch dt {
	case graph.Float:
		return m.f32(shape...)
	case graph.Double:
		v := make([]float64, n)
		for i := range v {
			v[i] = m.rnd.NormFloat64()
		}
		return tensor.MustTensor(shape, v)
	case graph.Int64:
		v := make([]int64, n)
		for i := range v {
			v[i] = m.rnd.Int64() >> m.rnd.IntN(64)
		}
		return tensor.MustTensor(shape, v)
	case graph.Int32:
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(m.rnd.Uint32()) >> m.rnd.IntN(32)
		}
		return tensor.MustTensor(shape, v)
	case graph.Int8:
		v := make([]int8, n)
		for i := range v {
			v[i] = int8(m.rnd.Uint32())
		}
		return tensor.MustTensor(shape, v)
	case graph.Uint8:
		v := make([]uint8, n)
		for i := range v {
			v[i] = uint8(m.rnd.Uint32())
		}
		return tensor.MustTensor(shape, v)
	case graph.Float16:
		v := make([]tensor.Float16, n)
		for i := range v {
			v[i] = tensor.ToFloat16(m.rnd.Float32()*8 - 4)
		}
		return tensor.MustTensor(shape, v)
	case graph.Bool:
		v := make([]bool, n)
		for i := range v {
			v[i] = m.rnd.IntN(2) == 1
		}
		return tensor.MustTensor(shape, v)
	}
	panic("movementRand: unsupported type " + dt.String())
}

func int64Tensor(shape []int64, v ...int64) tensor.Tensor { return tensor.MustTensor(shape, v) }

func int64Vec(v ...int64) tensor.Tensor { return tensor.MustTensor([]int64{int64(len(v))}, v) }

func kernelNode(op string, attrs ...*graph.Attribute) *graph.Node {
	return graph.NewNode("n", op, nil, []string{"y"}, attrs...)
}

type kernelCase struct {
	name  string
	node  *graph.Node
	opset int64
	in    []tensor.Tensor
	atol  float64
	rtol  float64
}

func runKernelCases(t *testing.T, cases []kernelCase) {
	t.Helper()
	s := kernelCheckSession(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opset := c.opset
			if opset == 0 {
				opset = 18
			}
			checkKernelOp(t, s, c.node, opset, c.in, nil, c.atol, c.rtol)
		})
	}
}

func TestKernelMovementOps(t *testing.T) {
	r := movementRand{inferRand()}
	perm := func(p ...int64) *graph.Attribute { return graph.IntsAttr("perm", p...) }
	cases := []kernelCase{
		{name: "transpose_scalar", node: kernelNode("Transpose"), in: []tensor.Tensor{r.f32()}},
		{name: "transpose_vector", node: kernelNode("Transpose"), in: []tensor.Tensor{r.f32(37)}},
		{name: "transpose_matrix_default", node: kernelNode("Transpose"), in: []tensor.Tensor{r.f32(33, 70)}},
		{name: "transpose_keep_last", node: kernelNode("Transpose", perm(1, 0, 2)), in: []tensor.Tensor{r.f32(5, 7, 300)}},
		{name: "transpose_small_inner", node: kernelNode("Transpose", perm(0, 2, 3, 1)), in: []tensor.Tensor{r.f32(2, 3, 9, 11)}},
		{name: "transpose_rank6", node: kernelNode("Transpose", perm(5, 3, 1, 0, 2, 4)), in: []tensor.Tensor{r.f32(2, 3, 2, 4, 3, 5)}},
		{name: "transpose_size1_dims", node: kernelNode("Transpose", perm(2, 0, 1, 3)), in: []tensor.Tensor{r.f32(1, 6, 1, 5)}},
		{name: "transpose_empty", node: kernelNode("Transpose", perm(1, 0)), in: []tensor.Tensor{r.f32(0, 4)}},
		{name: "transpose_int64", node: kernelNode("Transpose", perm(1, 2, 0)), in: []tensor.Tensor{r.of(graph.Int64, 3, 4, 5)}},
		{name: "transpose_bool", node: kernelNode("Transpose"), in: []tensor.Tensor{r.of(graph.Bool, 17, 3)}},
		{name: "transpose_f16", node: kernelNode("Transpose"), in: []tensor.Tensor{r.of(graph.Float16, 4, 9)}},

		{name: "concat_axis0", node: kernelNode("Concat", graph.IntAttr("axis", 0)), in: []tensor.Tensor{r.f32(2, 3), r.f32(4, 3)}},
		{name: "concat_axis1_three", node: kernelNode("Concat", graph.IntAttr("axis", 1)), in: []tensor.Tensor{r.f32(2, 3, 4), r.f32(2, 1, 4), r.f32(2, 5, 4)}},
		{name: "concat_negative_axis", node: kernelNode("Concat", graph.IntAttr("axis", -1)), in: []tensor.Tensor{r.f32(3, 2), r.f32(3, 40)}},
		{name: "concat_empty_part", node: kernelNode("Concat", graph.IntAttr("axis", 0)), in: []tensor.Tensor{r.f32(0, 5), r.f32(2, 5)}},
		{name: "concat_int64_vectors", node: kernelNode("Concat", graph.IntAttr("axis", 0)), in: []tensor.Tensor{r.of(graph.Int64, 1), r.of(graph.Int64, 3)}},
		{name: "concat_bool", node: kernelNode("Concat", graph.IntAttr("axis", 1)), in: []tensor.Tensor{r.of(graph.Bool, 2, 2), r.of(graph.Bool, 2, 3)}},

		{name: "slice_basic", node: kernelNode("Slice"), in: []tensor.Tensor{r.f32(10, 20), int64Vec(1, 2), int64Vec(8, 18)}},
		{name: "slice_axes_steps", node: kernelNode("Slice"), in: []tensor.Tensor{r.f32(6, 7, 8), int64Vec(1, -7), int64Vec(100, -1), int64Vec(0, -1), int64Vec(2, 3)}},
		{name: "slice_negative_step_inner", node: kernelNode("Slice"), in: []tensor.Tensor{r.f32(4, 30), int64Vec(-1), int64Vec(-1000), int64Vec(1), int64Vec(-1)}},
		{name: "slice_negative_steps_all", node: kernelNode("Slice"), in: []tensor.Tensor{r.f32(5, 6, 7), int64Vec(4, 5, 6), int64Vec(-10, 0, -10), int64Vec(0, 1, 2), int64Vec(-2, -1, -3)}},
		{name: "slice_empty", node: kernelNode("Slice"), in: []tensor.Tensor{r.f32(5, 6), int64Vec(3), int64Vec(2), int64Vec(0)}},
		{name: "slice_int32_params", node: kernelNode("Slice"), in: []tensor.Tensor{r.of(graph.Int64, 9), tensor.MustTensor([]int64{1}, []int32{2}), tensor.MustTensor([]int64{1}, []int32{7})}},
		{name: "slice_opset9_attrs", node: kernelNode("Slice", graph.IntsAttr("starts", 1, 0), graph.IntsAttr("ends", 3, -1), graph.IntsAttr("axes", 0, 2)),
			opset: 9, in: []tensor.Tensor{r.f32(4, 3, 5)}},

		{name: "gather_axis0", node: kernelNode("Gather"), in: []tensor.Tensor{r.f32(10, 33), int64Vec(3, 0, -1, 9, 3)}},
		{name: "gather_axis1_int32", node: kernelNode("Gather", graph.IntAttr("axis", 1)), in: []tensor.Tensor{r.f32(3, 8, 5), tensor.MustTensor([]int64{2, 2}, []int32{7, -8, 0, 1})}},
		{name: "gather_last_axis", node: kernelNode("Gather", graph.IntAttr("axis", -1)), in: []tensor.Tensor{r.f32(4, 6), int64Vec(5, 5, 0)}},
		{name: "gather_scalar_index", node: kernelNode("Gather"), in: []tensor.Tensor{r.of(graph.Int64, 7), int64Tensor(nil, -2)}},
		{name: "gather_1d_many", node: kernelNode("Gather"), in: []tensor.Tensor{r.f32(50), int64Vec(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 49, -50)}},
		{name: "gather_bool_rows", node: kernelNode("Gather"), in: []tensor.Tensor{r.of(graph.Bool, 5, 3), int64Vec(4, 1)}},
		{name: "gather_empty_indices", node: kernelNode("Gather"), in: []tensor.Tensor{r.f32(5, 3), tensor.MustTensor([]int64{0}, []int64{})}},

		{name: "expand_column", node: kernelNode("Expand"), in: []tensor.Tensor{r.f32(3, 1), int64Vec(2, 3, 4)}},
		{name: "expand_scalar", node: kernelNode("Expand"), in: []tensor.Tensor{r.f32(), int64Vec(2, 2)}},
		{name: "expand_smaller_shape", node: kernelNode("Expand"), in: []tensor.Tensor{r.of(graph.Int64, 2, 1, 5), int64Vec(3, 1)}},
		{name: "expand_middle", node: kernelNode("Expand"), in: []tensor.Tensor{r.f32(4, 1, 70), int64Vec(4, 3, 70)}},

		{name: "tile_matrix", node: kernelNode("Tile"), in: []tensor.Tensor{r.f32(2, 3), int64Vec(2, 2)}},
		{name: "tile_rank3", node: kernelNode("Tile"), in: []tensor.Tensor{r.f32(2, 3, 4), int64Vec(1, 3, 2)}},
		{name: "tile_rank4_ones", node: kernelNode("Tile"), in: []tensor.Tensor{r.of(graph.Int32, 2, 1, 3, 2), int64Vec(1, 4, 1, 1)}},
		{name: "tile_zero", node: kernelNode("Tile"), in: []tensor.Tensor{r.f32(2, 3), int64Vec(0, 2)}},

		{name: "where_broadcast", node: kernelNode("Where"), in: []tensor.Tensor{r.of(graph.Bool, 2, 1, 4), r.f32(3, 1), r.f32()}},
		{name: "where_same_shape", node: kernelNode("Where"), in: []tensor.Tensor{r.of(graph.Bool, 5, 40), r.f32(5, 40), r.f32(5, 40)}},
		{name: "where_int64", node: kernelNode("Where"), in: []tensor.Tensor{r.of(graph.Bool, 3), r.of(graph.Int64, 2, 3), r.of(graph.Int64, 2, 1)}},
		{name: "where_bool_values", node: kernelNode("Where"), in: []tensor.Tensor{r.of(graph.Bool, 4, 4), r.of(graph.Bool, 4), r.of(graph.Bool, 4, 1)}},

		{name: "pad_constant", node: kernelNode("Pad"), in: []tensor.Tensor{r.f32(3, 4), int64Vec(1, 2, 0, 3), r.f32()}},
		{name: "pad_constant_default", node: kernelNode("Pad"), in: []tensor.Tensor{r.f32(2, 3, 5), int64Vec(0, 1, 1, 1, 0, 2)}},
		{name: "pad_reflect", node: kernelNode("Pad", graph.StringAttr("mode", "reflect")), in: []tensor.Tensor{r.f32(2, 5, 6), int64Vec(0, 2, 3, 0, 4, 5)}},
		{name: "pad_edge", node: kernelNode("Pad", graph.StringAttr("mode", "edge")), in: []tensor.Tensor{r.f32(1, 3, 4, 4), int64Vec(0, 0, 2, 1, 0, 1, 3, 2)}},
		{name: "pad_negative_crop", node: kernelNode("Pad"), in: []tensor.Tensor{r.f32(5, 6), int64Vec(-1, 2, -2, 0)}},
		{name: "pad_axes", node: kernelNode("Pad", graph.StringAttr("mode", "edge")), in: []tensor.Tensor{r.f32(3, 4, 5), int64Vec(1, 2, 2, 0), tensor.Tensor{}, int64Vec(0, -1)}},
		{name: "pad_int64_value", node: kernelNode("Pad"), in: []tensor.Tensor{r.of(graph.Int64, 4), int64Vec(2, 3), r.of(graph.Int64)}},
		{name: "pad_opset2_attrs", node: kernelNode("Pad", graph.IntsAttr("pads", 1, 0, 0, 2)), opset: 2, in: []tensor.Tensor{r.f32(2, 2)}},

		{name: "cast_f32_i64", node: kernelNode("Cast", graph.IntAttr("to", int64(graph.Int64))), in: []tensor.Tensor{r.f32(4, 5)}},
		{name: "cast_i64_f32", node: kernelNode("Cast", graph.IntAttr("to", int64(graph.Float))), in: []tensor.Tensor{r.of(graph.Int64, 30)}},
		{name: "cast_f32_bool", node: kernelNode("Cast", graph.IntAttr("to", int64(graph.Bool))), in: []tensor.Tensor{r.f32(10)}},
		{name: "cast_bool_f32", node: kernelNode("Cast", graph.IntAttr("to", int64(graph.Float))), in: []tensor.Tensor{r.of(graph.Bool, 3, 3)}},
		{name: "cast_i32_i64", node: kernelNode("Cast", graph.IntAttr("to", int64(graph.Int64))), in: []tensor.Tensor{r.of(graph.Int32, 2, 7)}},
		{name: "cast_i64_i32", node: kernelNode("Cast", graph.IntAttr("to", int64(graph.Int32))), in: []tensor.Tensor{r.of(graph.Int32, 2, 7)}},
		{name: "cast_f32_i32", node: kernelNode("Cast", graph.IntAttr("to", int64(graph.Int32))), in: []tensor.Tensor{r.f32(300)}},
		{name: "cast_f64_f32", node: kernelNode("Cast", graph.IntAttr("to", int64(graph.Float))), in: []tensor.Tensor{r.of(graph.Double, 6)}},
		{name: "cast_i8_bool", node: kernelNode("Cast", graph.IntAttr("to", int64(graph.Bool))), in: []tensor.Tensor{r.of(graph.Int8, 6)}},
		{name: "cast_same_type", node: kernelNode("Cast", graph.IntAttr("to", int64(graph.Float))), in: []tensor.Tensor{r.f32(3, 2)}},
		{name: "cast_scalar", node: kernelNode("Cast", graph.IntAttr("to", int64(graph.Double))), in: []tensor.Tensor{r.f32()}},
	}
	runKernelCases(t, cases)
}

// TestKernelGatherOutOfRange runs the gather kernel on indices it did not see before the run
// (as a compiled run plan does): an index outside the axis must not read memory, and the run
// fails naming the bounds check (the kernel's violation word) rather than returning rows of
// zeros; with the indices known before the run the planner refuses them.
func TestKernelGatherOutOfRange(t *testing.T) {
	s := kernelCheckSession(t)
	r := movementRand{inferRand()}
	x := r.f32(4, 3)
	idx := int64Vec(2, 4, -5, -1, 1<<40)
	n := kernelNode("Gather")
	p, reason, err := kernelops.PlanGather(n, 18, ops.InfosOf([]tensor.Tensor{x, idx}))
	require.NoError(t, err)
	require.NotNil(t, p, reason)
	rc := testRunCtx(s, 18)
	defer rc.Close()
	_, err = rc.RunKernelPlan(p, []tensor.Tensor{x, idx})
	require.ErrorContains(t, err, "gather")
	require.ErrorContains(t, err, "failed a bounds check")
	require.ErrorContains(t, err, "accesses outside input 0 were skipped (an index out of range)")
	// In range, the same plan gathers.
	ok := int64Vec(2, -1, 0, 3, -4)
	got, err := rc.RunKernelPlan(p, []tensor.Tensor{x, ok})
	require.NoError(t, err)
	xv, yv := x.Data().([]float32), got[0].Data().([]float32)
	for row, g := range []int{2, 3, 0, 3, 0} {
		for j := range 3 {
			require.Equal(t, xv[g*3+j], yv[row*3+j], "row %d column %d", row, j)
		}
	}
	_, _, err = kernelops.PlanGather(n, 18, ops.InfosOfStatic([]tensor.Tensor{x, idx}))
	require.ErrorContains(t, err, "out of range")
}

// TestKernelMovementDeclines checks the cases the movement planners leave to the host.
func TestKernelMovementDeclines(t *testing.T) {
	r := movementRand{inferRand()}
	strs := tensor.Raw(graph.String, []int64{2}, []string{"a", "b"})
	for _, c := range []struct {
		name    string
		planner ops.KernelPlanner
		node    *graph.Node
		in      []ops.ValueInfo
	}{
		{"transpose_strings", kernelops.PlanTranspose, kernelNode("Transpose"), ops.InfosOf([]tensor.Tensor{strs})},
		{"slice_dynamic_starts", kernelops.PlanSlice, kernelNode("Slice"), ops.InfosOf([]tensor.Tensor{r.f32(4), int64Vec(1), int64Vec(3)})},
		{"slice_repeated_axes", kernelops.PlanSlice, kernelNode("Slice"), ops.InfosOfStatic([]tensor.Tensor{r.f32(4, 4), int64Vec(0, 1), int64Vec(2, 3), int64Vec(0, 0)})},
		{"expand_dynamic_shape", kernelops.PlanExpand, kernelNode("Expand"), ops.InfosOf([]tensor.Tensor{r.f32(4), int64Vec(2, 4)})},
		{"gather_float_indices", kernelops.PlanGather, kernelNode("Gather"), ops.InfosOf([]tensor.Tensor{r.f32(4), r.f32(2)})},
		{"pad_wrap", kernelops.PlanPad, kernelNode("Pad", graph.StringAttr("mode", "wrap")), ops.InfosOfStatic([]tensor.Tensor{r.f32(4), int64Vec(1, 1)})},
		{"pad_rank7", kernelops.PlanPad, kernelNode("Pad"), ops.InfosOfStatic([]tensor.Tensor{r.f32(1, 1, 1, 1, 1, 1, 2), int64Vec(0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1)})},
		{"cast_float_to_unsigned", kernelops.PlanCast, kernelNode("Cast", graph.IntAttr("to", int64(graph.Uint8))), ops.InfosOf([]tensor.Tensor{r.f32(3)})},
		{"cast_to_string", kernelops.PlanCast, kernelNode("Cast", graph.IntAttr("to", int64(graph.String))), ops.InfosOf([]tensor.Tensor{r.f32(3)})},
		{"transpose_rank7_strided", kernelops.PlanTranspose, kernelNode("Transpose", graph.IntsAttr("perm", 6, 5, 4, 3, 2, 1, 0)),
			ops.InfosOf([]tensor.Tensor{r.f32(2, 2, 2, 2, 2, 2, 2)})},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, reason, err := c.planner(c.node, 18, c.in)
			require.NoError(t, err)
			require.Nil(t, p)
			require.Contains(t, reason, "host:")
		})
	}
}

// TestKernelMovementErrors checks that invalid inputs are errors naming the fault.
func TestKernelMovementErrors(t *testing.T) {
	r := movementRand{inferRand()}
	for _, c := range []struct {
		name    string
		planner ops.KernelPlanner
		node    *graph.Node
		in      []tensor.Tensor
		msg     string
	}{
		{"transpose_bad_perm", kernelops.PlanTranspose, kernelNode("Transpose", graph.IntsAttr("perm", 0, 0)), []tensor.Tensor{r.f32(2, 3)}, "not a permutation"},
		{"concat_mismatch", kernelops.PlanConcat, kernelNode("Concat", graph.IntAttr("axis", 0)), []tensor.Tensor{r.f32(2, 3), r.f32(2, 4)}, "differ off axis"},
		{"concat_types", kernelops.PlanConcat, kernelNode("Concat"), []tensor.Tensor{r.f32(2), r.of(graph.Int64, 2)}, "types"},
		{"slice_step0", kernelops.PlanSlice, kernelNode("Slice"), []tensor.Tensor{r.f32(4), int64Vec(0), int64Vec(3), int64Vec(0), int64Vec(0)}, "step 0"},
		{"tile_bad_reps", kernelops.PlanTile, kernelNode("Tile"), []tensor.Tensor{r.f32(2, 3), int64Vec(2)}, "repeats"},
		{"where_not_bool", kernelops.PlanWhere, kernelNode("Where"), []tensor.Tensor{r.f32(2), r.f32(2), r.f32(2)}, "condition"},
		{"expand_incompatible", kernelops.PlanExpand, kernelNode("Expand"), []tensor.Tensor{r.f32(3), int64Vec(4)}, "broadcast"},
		{"pad_too_negative", kernelops.PlanPad, kernelNode("Pad"), []tensor.Tensor{r.f32(3), int64Vec(-2, -2)}, "below zero"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := c.planner(c.node, 18, ops.InfosOfStatic(c.in))
			require.ErrorContains(t, err, c.msg)
		})
	}
}
