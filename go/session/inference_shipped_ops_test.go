package session

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// TestManifestOpsWithoutACompiler runs ops whose kernels kernels/aot/manifest.txt declares
// for every case their planners pick (Pow by a tensor, comparisons of every element type the
// planner covers, Resize's index tables) with no C compiler: each runs as Loom kernels and
// matches the host function.
func TestManifestOpsWithoutACompiler(t *testing.T) {
	t.Setenv("CC", filepath.Join(t.TempDir(), "no-cc"))
	t.Setenv("LOOM_CACHE_DIR", t.TempDir())
	rnd := inferRand()
	f32 := func(shape ...int64) tensor.Tensor {
		return tensor.MustTensor(shape, randomF32(rnd, ops.Numel(shape)))
	}
	var cases []genericCase
	pos := freshLike(rnd, tensor.MustTensor([]int64{4, 1, 6}, []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}))
	cases = append(cases, genericCase{"pow_tensor", graph.NewNode("n", "Pow", nil, []string{"y"}), 15, []tensor.Tensor{pos, f32(3, 1)}, nil, ops.HostOps["Pow"]})
	for _, op := range []string{"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"} {
		for _, like := range []tensor.Tensor{tensor.MustTensor([]int64{1}, []float32{0}), tensor.MustTensor([]int64{1}, []float64{0}), tensor.MustTensor([]int64{1}, []int32{0}), tensor.MustTensor([]int64{1}, []int64{0})} {
			a := freshLike(rnd, Zeros2(t, like.DType(), []int64{3, 5}))
			b := freshLike(rnd, Zeros2(t, like.DType(), []int64{5}))
			cases = append(cases, genericCase{op + "_" + like.DType().String(), graph.NewNode("n", op, nil, []string{"y"}), 16, []tensor.Tensor{a, b}, nil, ops.HostOps[op]})
		}
	}
	for _, mode := range []string{"nearest", "linear"} {
		for _, coord := range []string{"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"} {
			n := graph.NewNode("n", "Resize", nil, []string{"y"}, graph.StringAttr("mode", mode), graph.StringAttr("coordinate_transformation_mode", coord),
				graph.StringAttr("nearest_mode", "floor"))
			cases = append(cases, genericCase{"resize_" + mode + "_" + coord, n, 19,
				[]tensor.Tensor{f32(2, 3, 5, 7), {}, tensor.MustTensor([]int64{4}, []float32{1, 1, 1.7, 0.6})}, []int{2}, ops.HostOps["Resize"]})
		}
	}
	runWithoutACompiler(t, rnd, cases)
}

// Zeros2 is Zeros for a test.
func Zeros2(t *testing.T, dt tensor.DType, shape []int64) tensor.Tensor {
	z, err := tensor.Zeros(dt, shape)
	if err != nil {
		t.Fatal(err)
	}
	return z
}

// TestManifestMovementOpsWithoutACompiler runs the movement kernels the manifest ships beyond
// the common float32/int64 cases with no C compiler: conversions to and from float64, int8 and
// int32 to bool, bool to int32 and float64, Gather of 1-byte elements, constant Pad of 8-byte
// elements with and without a value, and Slice's reversed copies. Each runs as one Loom kernel
// and matches the host function.
func TestManifestMovementOpsWithoutACompiler(t *testing.T) {
	t.Setenv("CC", filepath.Join(t.TempDir(), "no-cc"))
	t.Setenv("LOOM_CACHE_DIR", t.TempDir())
	rnd := inferRand()
	of := func(dt tensor.DType, shape ...int64) tensor.Tensor { return freshLike(rnd, Zeros2(t, dt, shape)) }
	i8 := tensor.MustTensor([]int64{2, 5}, []int8{0, 3, -1, 0, 5, 0, -128, 127, 0, 1})
	bools := tensor.MustTensor([]int64{5, 3}, []bool{true, false, false, true, true, false, false, false, true, true, false, true, false, true, true})
	var cases []genericCase
	cast := func(name string, x tensor.Tensor, to tensor.DType) {
		n := graph.NewNode("n", "Cast", nil, []string{"y"}, graph.IntAttr("to", int64(to)))
		cases = append(cases, genericCase{"cast_" + name, n, 19, []tensor.Tensor{x}, nil, ops.HostOps["Cast"]})
	}
	cast("f64_to_f32", of(graph.Double, 3, 7), graph.Float)
	cast("f64_to_i64", of(graph.Double, 3, 7), graph.Int64)
	cast("f64_to_i32", of(graph.Double, 40), graph.Int32)
	cast("f32_to_f64", of(graph.Float, 3, 7), graph.Double)
	cast("i64_to_f64", of(graph.Int64, 9), graph.Double)
	cast("i32_to_f64", of(graph.Int32, 9), graph.Double)
	cast("i8_to_bool", i8, graph.Bool)
	cast("i32_to_bool", of(graph.Int32, 4, 6), graph.Bool)
	cast("f64_to_bool", of(graph.Double, 4, 6), graph.Bool)
	cast("bool_to_i32", bools, graph.Int32)
	cast("bool_to_f64", bools, graph.Double)
	gather := graph.NewNode("n", "Gather", nil, []string{"y"})
	gather1 := graph.NewNode("n", "Gather", nil, []string{"y"}, graph.IntAttr("axis", 1))
	cases = append(cases,
		genericCase{"gather_bool_rows", gather, 13, []tensor.Tensor{bools, int64Vec(4, 0, 2, 2)}, []int{1}, ops.HostOps["Gather"]},
		genericCase{"gather_i8_columns_i32", gather1, 13, []tensor.Tensor{i8, tensor.MustTensor([]int64{3}, []int32{4, -1, 0})}, []int{1}, ops.HostOps["Gather"]})
	pad := graph.NewNode("n", "Pad", nil, []string{"y"})
	cases = append(cases,
		genericCase{"pad_i64_value", pad, 18, []tensor.Tensor{of(graph.Int64, 3, 4), int64Vec(1, 0, 2, 3), tensor.MustTensor([]int64{}, []int64{7})}, []int{1}, ops.HostOps["Pad"]},
		genericCase{"pad_f64_zero", pad, 18, []tensor.Tensor{of(graph.Double, 2, 3, 5), int64Vec(0, 1, 0, 1, 2, 0)}, []int{1}, ops.HostOps["Pad"]})
	slice := graph.NewNode("n", "Slice", nil, []string{"y"})
	cases = append(cases,
		genericCase{"slice_reverse_inner_f32", slice, 13, []tensor.Tensor{of(graph.Float, 4, 30), int64Vec(-1), int64Vec(-1000), int64Vec(1), int64Vec(-1)}, []int{1, 2, 3, 4}, ops.HostOps["Slice"]},
		genericCase{"slice_reverse_rows_i64", slice, 13, []tensor.Tensor{of(graph.Int64, 40, 3), int64Vec(-1), int64Vec(-1000), int64Vec(0), int64Vec(-1)}, []int{1, 2, 3, 4}, ops.HostOps["Slice"]},
		genericCase{"slice_reverse_both_f64", slice, 13, []tensor.Tensor{of(graph.Double, 3, 4, 7), int64Vec(-1, -2), int64Vec(-1000, -1000), int64Vec(1, 2), int64Vec(-1, -1)}, []int{1, 2, 3, 4}, ops.HostOps["Slice"]})
	runWithoutACompiler(t, rnd, cases)
}

// TestInnerStrideVariantsWithoutACompiler runs binary, compare and where over every pairing of
// inner strides their planners pick (AS5, BS5, CS5: an operand contiguous along the inner axis,
// 1, or broadcast along it, 0; a variadic Sum's chained launches), on shapes that take each of
// the four movement tiles, with no C compiler: each must run as its shipped kernel and match
// the host function.
func TestInnerStrideVariantsWithoutACompiler(t *testing.T) {
	t.Setenv("CC", filepath.Join(t.TempDir(), "no-cc"))
	t.Setenv("LOOM_CACHE_DIR", t.TempDir())
	rnd := inferRand()
	f32 := func(shape ...int64) tensor.Tensor {
		return tensor.MustTensor(shape, randomF32(rnd, ops.Numel(shape)))
	}
	cond := func(shape ...int64) tensor.Tensor {
		v := make([]bool, ops.Numel(shape))
		for i := range v {
			v[i] = rnd.IntN(2) == 1
		}
		return tensor.MustTensor(shape, v)
	}
	node := func(op string) *graph.Node { return graph.NewNode("n", op, nil, []string{"y"}) }
	var cases []genericCase
	// [rows, cols] for pickTile's 256x1, 32x8, 16x16 and 1x256 tiles.
	for _, rc := range [][2]int64{{3, 512}, {16, 96}, {16, 48}, {256, 3}} {
		r, c := rc[0], rc[1]
		name := fmt.Sprintf("%dx%d", r, c)
		cases = append(cases,
			genericCase{"add_row_vector_" + name, node("Add"), 14, []tensor.Tensor{f32(r, c), f32(c)}, nil, ops.HostOps["Add"]},
			genericCase{"mul_per_row_" + name, node("Mul"), 14, []tensor.Tensor{f32(r, c), f32(r, 1)}, nil, ops.HostOps["Mul"]},
			genericCase{"sub_per_row_first_" + name, node("Sub"), 14, []tensor.Tensor{f32(r, 1), f32(r, c)}, nil, ops.HostOps["Sub"]},
			genericCase{"sum_chained_" + name, node("Sum"), 13, []tensor.Tensor{f32(r, c), f32(r, 1), f32(c)}, nil, ops.HostOps["Sum"]},
			genericCase{"less_per_row_" + name, node("Less"), 13, []tensor.Tensor{f32(r, c), f32(r, 1)}, nil, ops.HostOps["Less"]},
			genericCase{"greater_per_row_first_" + name, node("Greater"), 13, []tensor.Tensor{f32(r, 1), f32(r, c)}, nil, ops.HostOps["Greater"]},
			genericCase{"where_rows_cols_" + name, node("Where"), 16, []tensor.Tensor{cond(r, c), f32(r, 1), f32(c)}, nil, ops.HostOps["Where"]},
			genericCase{"where_per_row_cond_" + name, node("Where"), 16, []tensor.Tensor{cond(r, 1), f32(r, c), f32(1)}, nil, ops.HostOps["Where"]},
			genericCase{"where_values_only_b_" + name, node("Where"), 16, []tensor.Tensor{cond(r, 1), f32(r, 1), f32(r, c)}, nil, ops.HostOps["Where"]},
		)
	}
	// One element: every stride is given as 1.
	cases = append(cases,
		genericCase{"less_one_element", node("Less"), 13, []tensor.Tensor{f32(1), f32(1, 1)}, nil, ops.HostOps["Less"]},
		genericCase{"where_one_element", node("Where"), 16, []tensor.Tensor{cond(1), f32(1), f32(1, 1)}, nil, ops.HostOps["Where"]},
	)
	runWithoutACompiler(t, rnd, cases)
}
