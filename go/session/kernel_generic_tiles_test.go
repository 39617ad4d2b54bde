package session

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// genericActs are FusedConv's activations with the parameters the generic-tile tests give
// them, as Go functions (the references).
var genericActs = map[string]func(v, p0, p1 float64) float64{
	"":            func(v, _, _ float64) float64 { return v },
	"Relu":        func(v, _, _ float64) float64 { return math.Max(v, 0) },
	"Sigmoid":     func(v, _, _ float64) float64 { return 1 / (1 + math.Exp(-v)) },
	"Tanh":        func(v, _, _ float64) float64 { return math.Tanh(v) },
	"LeakyRelu":   func(v, p0, _ float64) float64 { return ops.MathSelect(v < 0, p0*v, v) },
	"HardSigmoid": func(v, p0, p1 float64) float64 { return math.Max(0, math.Min(1, p0*v+p1)) },
	"Clip":        func(v, p0, p1 float64) float64 { return math.Min(math.Max(v, p0), p1) },
	"HardSwish":   func(v, _, _ float64) float64 { return v * math.Max(0, math.Min(1, v/6+0.5)) },
	"Swish":       func(v, p0, _ float64) float64 { return v / (1 + math.Exp(-p0*v)) },
}

// genericTileFusedNode is a FusedConv with activation act (parameters 0.3, 0.4), output_scale and
// output_shift, and the convolution attributes attrs.
func genericTileFusedNode(act string, scale, shift float32, attrs ...*graph.Attribute) *graph.Node {
	attrs = append(attrs, graph.StringAttr("activation", act), graph.FloatAttr("output_scale", scale), graph.FloatAttr("output_shift", shift),
		&graph.Attribute{Name: "activation_params", Type: graph.AttrFloats, Floats: []float32{0.3, 0.4}})
	n := graph.NewNode("n", "FusedConv", nil, []string{"y"}, attrs...)
	n.Domain = graph.LoomDomain
	return n
}

// genericTileFusedRef is FusedConv's reference: Conv's host function (pure Go) with the same
// convolution attributes, then the activation and the affine map in float64.
func genericTileFusedRef(act string, scale, shift float64, attrs ...*graph.Attribute) ops.OpFunc {
	conv := graph.NewNode("n", "Conv", nil, []string{"y"}, attrs...)
	f := genericActs[act]
	return func(rc ops.OpRun, _ *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		raw, err := ops.HostOps["Conv"](rc, conv, in)
		if err != nil {
			return nil, err
		}
		v := tensor.Float64s(raw[0])
		out := make([]float32, len(v))
		for i := range v {
			out[i] = float32(scale*f(v[i], 0.3, 0.4) + shift)
		}
		return []tensor.Tensor{tensor.MustTensor(raw[0].Dims(), out)}, nil
	}
}

// genericTileMatMulAddRef is Loom's MatMulAdd reference: MatMul's host function, plus C, then GELU
// (exact, or its tanh form) when gelu is set.
func genericTileMatMulAddRef(gelu, tanhForm bool) ops.OpFunc {
	mm := graph.NewNode("n", "MatMul", nil, []string{"y"})
	return func(rc ops.OpRun, _ *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		p, err := ops.HostOps["MatMul"](rc, mm, in[:2])
		if err != nil {
			return nil, err
		}
		v, c := tensor.Float64s(p[0]), tensor.Float64s(in[2])
		out := make([]float32, len(v))
		for i := range v {
			t := v[i] + c[i%len(c)]
			switch {
			case gelu && tanhForm:
				t = 0.5 * t * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(t+0.044715*t*t*t)))
			case gelu:
				t = 0.5 * t * (1 + math.Erf(t/math.Sqrt2))
			}
			out[i] = float32(t)
		}
		return []tensor.Tensor{tensor.MustTensor(p[0].Dims(), out)}, nil
	}
}

// TestShapeGenericTilesWithoutACompiler runs, with no C compiler, the shapes the shape-generic
// shipped kernels serve since the JIT-less plans were made fast: gemm_nn's register tiles
// (8x32, one row in partial sums, 8x8, 8x1) with every kind of epilogue (GELU and C rows;
// FusedConv's activations with output_scale and output_shift), depthwise convolutions
// (generic.loom's conv_dw over conv_pad_any, every row-width path, strides, dilations and
// padding, every FusedConv epilogue) and pooling windows inside the image and leaving it
// (pool2d_pad, pool2d). Each
// runs as Loom kernels in the interpreter and the compiled run plan and matches a Go
// reference on fresh random inputs (runWithoutACompiler).
func TestShapeGenericTilesWithoutACompiler(t *testing.T) {
	t.Setenv("CC", filepath.Join(t.TempDir(), "no-cc"))
	t.Setenv("LOOM_CACHE_DIR", t.TempDir())
	rnd := inferRand()
	f32 := func(shape ...int64) tensor.Tensor {
		return tensor.MustTensor(shape, randomF32(rnd, ops.Numel(shape)))
	}
	dim := func(lo, hi int) int64 { return int64(lo + rand.IntN(hi-lo+1)) }
	var cases []genericCase

	// gemm_nn's tiles, by product shape: m >= 8 and n >= 32; m < 8; n in [8, 32); n < 8.
	matmul := graph.NewNode("n", "MatMul", nil, []string{"y"})
	shapes := [][3]int64{{dim(8, 40), dim(1, 70), dim(32, 90)}, {dim(1, 7), dim(1, 70), dim(32, 200)},
		{dim(8, 40), dim(1, 70), dim(8, 31)}, {dim(8, 40), dim(1, 70), dim(1, 7)}}
	for _, s := range shapes {
		m, k, n := s[0], s[1], s[2]
		cases = append(cases, genericCase{fmt.Sprintf("matmul_%dx%dx%d", m, k, n), matmul, 18,
			[]tensor.Tensor{f32(m, k), f32(k, n)}, nil, ops.HostOps["MatMul"]})
		for _, ap := range []string{"none", "tanh"} {
			mma := graph.NewNode("n", "MatMulAdd", nil, []string{"y"}, graph.StringAttr("activation", "Gelu"), graph.StringAttr("approximate", ap))
			mma.Domain = graph.LoomDomain
			cases = append(cases, genericCase{fmt.Sprintf("matmuladd_gelu_%s_%dx%dx%d", ap, m, k, n), mma, 18,
				[]tensor.Tensor{f32(m, k), f32(k, n), f32(m, n)}, []int{1}, genericTileMatMulAddRef(true, ap == "tanh")})
		}
		// A 1x1 FusedConv with an activation, output_scale and output_shift: y = W·x, m output
		// channels, k input channels, n pixels.
		act := []string{"HardSwish", "Clip", "LeakyRelu", "Sigmoid"}[len(cases)%4]
		cases = append(cases, genericCase{fmt.Sprintf("fusedconv1x1_%s_affine_%dx%dx%d", act, m, k, n), genericTileFusedNode(act, 0.5, 0.25), 17,
			[]tensor.Tensor{f32(1, k, 1, n), f32(m, k, 1, 1), f32(m)}, []int{1, 2}, genericTileFusedRef(act, 0.5, 0.25)})
	}

	// Depthwise convolutions: rows of at least 64 outputs, 16..63, 4..15 and fewer than 4.
	widths := [][2]int{{1, 3}, {4, 15}, {16, 63}, {64, 130}}
	for i := range 8 {
		kh, kw := dim(1, 5), dim(1, 5)
		sh, sw := dim(1, 2), dim(1, 3)
		dh, dw := dim(1, 2), dim(1, 2)
		pads := []int64{dim(0, 2), dim(0, 2), dim(0, 2), dim(0, 2)}
		want := widths[i%4]
		ow := dim(want[0], want[1])
		w := (ow-1)*sw + (kw-1)*dw + 1 - pads[1] - pads[3]
		if w < 1 {
			w, pads[1], pads[3] = (ow-1)*sw+(kw-1)*dw+1, 0, 0
		}
		h := max((kh-1)*dh+1-pads[0]-pads[2], 1) + dim(0, 9)
		c := dim(1, 6)
		attrs := []*graph.Attribute{graph.IntsAttr("kernel_shape", kh, kw), graph.IntsAttr("strides", sh, sw),
			graph.IntsAttr("dilations", dh, dw), graph.IntsAttr("pads", pads...), graph.IntAttr("group", c)}
		node := graph.NewNode("n", "Conv", nil, []string{"y"}, attrs...)
		in := []tensor.Tensor{f32(dim(1, 2), c, h, w), f32(c, 1, kh, kw)}
		if i%2 == 0 {
			in = append(in, f32(c))
		}
		cases = append(cases, genericCase{fmt.Sprintf("depthwise_k%dx%d_s%dx%d_d%dx%d_p%v_%v", kh, kw, sh, sw, dh, dw, pads, in[0].Dims()),
			node, 17, in, []int{1}, ops.HostOps["Conv"]})
	}
	// Every FusedConv epilogue of conv_dw, with and without the affine map.
	i := 0
	for act := range genericActs {
		scale, shift := float32(1), float32(0)
		if i%2 == 0 {
			scale, shift = 0.5, -0.25
		}
		i++
		attrs := []*graph.Attribute{graph.IntsAttr("kernel_shape", 3, 3), graph.IntsAttr("strides", 1, int64(1+i%2)),
			graph.IntsAttr("pads", 1, 1, 1, 1), graph.IntAttr("group", 5)}
		cases = append(cases, genericCase{fmt.Sprintf("depthwise_fused_%q_scale%g", act, scale), genericTileFusedNode(act, scale, shift, attrs...), 17,
			[]tensor.Tensor{f32(1, 5, dim(3, 12), dim(5, 90)), f32(5, 1, 3, 3), f32(5)}, []int{1, 2},
			genericTileFusedRef(act, float64(scale), float64(shift), attrs...)})
	}

	// Pooling windows inside the image (pool2d_window and pool2d_rows, shape-specialized).
	for _, op := range []string{"MaxPool", "AveragePool"} {
		for _, w := range []int64{dim(6, 30), dim(64, 120)} {
			node := graph.NewNode("n", op, nil, []string{"y"}, graph.IntsAttr("kernel_shape", 3, 2), graph.IntsAttr("strides", 3, 2))
			cases = append(cases, genericCase{fmt.Sprintf("%s_3x2_s3x2_w%d", op, w), node, 17, []tensor.Tensor{f32(dim(1, 2), dim(1, 9), dim(3, 12), w)},
				nil, ops.HostOps[op]})
		}
	}

	// Windows that leave the image: padding (count_include_pad either way), ceil_mode's
	// overhang, column strides 1 and 2 (pool2d_pad with the window at run time) and 3 (pool2d).
	padded := []struct {
		op             string
		k, s, pads     []int64
		ceil, countPad int64
		h, w           int64
	}{
		{"MaxPool", []int64{3, 3}, []int64{2, 2}, []int64{1, 1, 1, 1}, 0, 0, dim(8, 20), dim(30, 90)},
		{"AveragePool", []int64{3, 3}, []int64{1, 1}, []int64{1, 1, 1, 1}, 0, 0, dim(3, 12), dim(9, 40)},
		{"AveragePool", []int64{3, 2}, []int64{1, 2}, []int64{1, 0, 2, 1}, 1, 1, dim(3, 12), dim(9, 40)},
		{"MaxPool", []int64{2, 2}, []int64{2, 2}, []int64{0, 0, 0, 0}, 1, 0, dim(3, 12), dim(17, 41)},
		{"MaxPool", []int64{5, 5}, []int64{1, 1}, []int64{2, 2, 2, 2}, 0, 0, dim(5, 12), dim(5, 30)},
		{"MaxPool", []int64{3, 3}, []int64{3, 3}, []int64{1, 1, 1, 1}, 0, 0, dim(5, 12), dim(5, 30)},
	}
	for _, c := range padded {
		attrs := []*graph.Attribute{graph.IntsAttr("kernel_shape", c.k...), graph.IntsAttr("strides", c.s...),
			graph.IntsAttr("pads", c.pads...), graph.IntAttr("ceil_mode", c.ceil)}
		if c.op == "AveragePool" {
			attrs = append(attrs, graph.IntAttr("count_include_pad", c.countPad))
		}
		node := graph.NewNode("n", c.op, nil, []string{"y"}, attrs...)
		cases = append(cases, genericCase{fmt.Sprintf("%s_%v_s%v_p%v_ceil%d_cp%d_%dx%d", c.op, c.k, c.s, c.pads, c.ceil, c.countPad, c.h, c.w), node, 17,
			[]tensor.Tensor{f32(dim(1, 2), dim(1, 9), c.h, c.w)}, nil, ops.HostOps[c.op]})
	}

	unshipped := runWithoutACompiler(t, rnd, cases)
	require.Positive(t, unshipped, "no case picked a variant the corpus lacks")
	t.Logf("%d of %d cases re-planned with shape-generic kernels", unshipped, len(cases))
}
