package session

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/kernelops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// TestResizeKernelsAgainstHost checks Resize and Upsample kernels against the host functions.
// Nearest copies input elements (the index tables are computed in float64 as the host does),
// so it must match exactly; linear interpolates in float32 (1e-6).
func TestResizeKernelsAgainstHost(t *testing.T) {
	s := kernelCheckSession(t)
	rnd := inferRand()
	f32 := func(shape ...int64) tensor.Tensor {
		return tensor.MustTensor(shape, randomF32(rnd, ops.Numel(shape)))
	}
	scales := func(v ...float32) tensor.Tensor { return tensor.MustTensor([]int64{int64(len(v))}, v) }
	sizes := func(v ...int64) tensor.Tensor { return tensor.MustTensor([]int64{int64(len(v))}, v) }
	type rcase struct {
		name  string
		opset int64
		attrs []*graph.Attribute
		in    []tensor.Tensor
	}
	var cases []rcase
	coords := []string{"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"}
	for _, coord := range coords {
		for _, nm := range []string{"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"} {
			cases = append(cases, rcase{fmt.Sprintf("nearest_%s_%s_up", coord, nm), 19,
				[]*graph.Attribute{graph.StringAttr("mode", "nearest"), graph.StringAttr("coordinate_transformation_mode", coord), graph.StringAttr("nearest_mode", nm)},
				[]tensor.Tensor{f32(2, 3, 5, 7), {}, scales(1, 1, 2, 1.5)}})
			cases = append(cases, rcase{fmt.Sprintf("nearest_%s_%s_sizes", coord, nm), 19,
				[]*graph.Attribute{graph.StringAttr("mode", "nearest"), graph.StringAttr("coordinate_transformation_mode", coord), graph.StringAttr("nearest_mode", nm)},
				[]tensor.Tensor{f32(1, 2, 9, 8), {}, {}, sizes(1, 2, 4, 13)}})
		}
		cases = append(cases, rcase{"linear_" + coord + "_scales", 19,
			[]*graph.Attribute{graph.StringAttr("mode", "linear"), graph.StringAttr("coordinate_transformation_mode", coord)},
			[]tensor.Tensor{f32(2, 3, 6, 5), {}, scales(1, 1, 1.7, 0.6)}})
		cases = append(cases, rcase{"linear_" + coord + "_sizes", 19,
			[]*graph.Attribute{graph.StringAttr("mode", "linear"), graph.StringAttr("coordinate_transformation_mode", coord)},
			[]tensor.Tensor{f32(1, 2, 4, 4), {}, {}, sizes(1, 2, 8, 3)}})
	}
	cases = append(cases,
		rcase{"nearest_all_axes_rank3", 13, []*graph.Attribute{graph.StringAttr("mode", "nearest")},
			[]tensor.Tensor{f32(3, 4, 5), f32(0), scales(2, 0.5, 3)}},
		rcase{"nearest_rank1", 13, []*graph.Attribute{graph.StringAttr("mode", "nearest"), graph.StringAttr("nearest_mode", "ceil")},
			[]tensor.Tensor{f32(11), {}, scales(2.5)}},
		rcase{"linear_rank2", 13, []*graph.Attribute{graph.StringAttr("mode", "linear"), graph.StringAttr("coordinate_transformation_mode", "align_corners")},
			[]tensor.Tensor{f32(5, 6), {}, {}, sizes(9, 4)}},
		rcase{"linear_axes_not_larger", 18, []*graph.Attribute{graph.StringAttr("mode", "linear"), graph.IntsAttr("axes", 2, 3),
			graph.StringAttr("keep_aspect_ratio_policy", "not_larger")},
			[]tensor.Tensor{f32(1, 3, 6, 8), {}, {}, sizes(9, 10)}},
		rcase{"nearest_axes_not_smaller", 18, []*graph.Attribute{graph.StringAttr("mode", "nearest"), graph.IntsAttr("axes", -1, 1),
			graph.StringAttr("keep_aspect_ratio_policy", "not_smaller")},
			[]tensor.Tensor{f32(2, 3, 5, 4), {}, {}, sizes(7, 5)}},
		rcase{"resize10_nearest", 10, []*graph.Attribute{graph.StringAttr("mode", "nearest")}, []tensor.Tensor{f32(1, 2, 3, 4), scales(1, 1, 2, 3)}},
		rcase{"resize10_linear", 10, []*graph.Attribute{graph.StringAttr("mode", "linear")}, []tensor.Tensor{f32(2, 1, 3, 5), scales(1, 1, 2.5, 1.5)}},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tol := 0.0
			if c.attrs[0].String != nil && string(c.attrs[0].String) == "linear" {
				tol = 1e-6
			}
			checkKernelOp(t, s, graph.NewNode("n", "Resize", nil, []string{"y"}, c.attrs...), c.opset, c.in, nil, tol, tol)
		})
	}
	t.Run("upsample_nearest_input_scales", func(t *testing.T) {
		checkKernelOp(t, s, graph.NewNode("n", "Upsample", nil, []string{"y"}), 9, []tensor.Tensor{f32(1, 2, 3, 5), scales(1, 1, 2, 3.5)}, nil, 0, 0)
	})
	t.Run("upsample_bilinear_attr_scales", func(t *testing.T) {
		checkKernelOp(t, s, graph.NewNode("n", "Upsample", nil, []string{"y"}, graph.StringAttr("mode", "bilinear"),
			&graph.Attribute{Name: "scales", Type: graph.AttrFloats, Floats: []float32{1, 1, 2, 2.5}}), 7, []tensor.Tensor{f32(2, 3, 4, 3)}, nil, 1e-6, 1e-6)
	})
}

// TestResizeKernelsDecline checks what the Resize planner leaves to the host.
func TestResizeKernelsDecline(t *testing.T) {
	rnd := inferRand()
	x := tensor.MustTensor([]int64{1, 2, 4, 4}, randomF32(rnd, 32))
	sc := tensor.MustTensor([]int64{4}, []float32{1, 2, 2, 2})
	for _, c := range []struct {
		attrs  []*graph.Attribute
		in     []tensor.Tensor
		static bool
		reason string
	}{
		{[]*graph.Attribute{graph.StringAttr("mode", "cubic")}, []tensor.Tensor{x, {}, sc}, true, "mode cubic"},
		{[]*graph.Attribute{graph.StringAttr("mode", "linear")}, []tensor.Tensor{x, {}, sc}, true, "last two axes"},
		{[]*graph.Attribute{graph.StringAttr("coordinate_transformation_mode", "tf_crop_and_resize")}, []tensor.Tensor{x, {}, sc}, true, "tf_crop_and_resize"},
		{[]*graph.Attribute{graph.IntAttr("antialias", 1)}, []tensor.Tensor{x, {}, sc}, true, "antialias"},
		{nil, []tensor.Tensor{x, {}, sc}, false, "not known before the run"},
	} {
		infos := ops.InfosOf(c.in)
		if c.static {
			infos = ops.InfosOfStatic(c.in)
		}
		p, reason, err := kernelops.PlanResize(graph.NewNode("n", "Resize", nil, []string{"y"}, c.attrs...), 19, infos)
		require.NoError(t, err)
		require.Nil(t, p)
		require.Contains(t, reason, c.reason)
	}
	_, _, err := kernelops.PlanResize(graph.NewNode("n", "Resize", nil, []string{"y"}), 19, ops.InfosOfStatic([]tensor.Tensor{x, {}, tensor.MustTensor([]int64{2}, []float32{2, 2})}))
	require.ErrorContains(t, err, "scales has 2 elements for 4 axes")
}
