package session

import (
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
