package kernelops

import (
	"math"
	"strconv"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/nn"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Resize (opsets 10-19) and Upsample as Loom kernels (kernels/resize.loom) for float32
// tensors of rank <= 4 with static scales or sizes: nearest (every nearest_mode) on any axes,
// linear on the last two axes; coordinate modes half_pixel, half_pixel_symmetric,
// pytorch_half_pixel, align_corners, asymmetric and tf_half_pixel_for_nn. Cubic, antialias
// and tf_crop_and_resize run on the host.

func init() {
	ops.RegisterKernelOp("Resize", PlanResize, hostFallback("Resize"))
	ops.RegisterKernelOp("Upsample", planUpsample, hostFallback("Upsample"))
}

var resizeCoordCodes = map[string]int{"half_pixel": 0, "half_pixel_symmetric": 1, "pytorch_half_pixel": 2,
	"align_corners": 3, "asymmetric": 4, "tf_half_pixel_for_nn": 5}

var resizeNearestCodes = map[string]int{"round_prefer_floor": 0, "round_prefer_ceil": 1, "floor": 2, "ceil": 3}

// resizeStaticFloats reads input i's values: ok is false when the input is present but not known
// before the run; absent (or empty) inputs give nil.
func resizeStaticFloats(in []ops.ValueInfo, i int) (vals []float64, ok bool) {
	if i >= len(in) || !in[i].Present {
		return nil, true
	}
	if !in[i].Static.IsValid() {
		return nil, false
	}
	return tensor.Float64s(in[i].Static), true
}

func resizeStaticInts(in []ops.ValueInfo, i int) (vals []int64, ok bool) {
	if i >= len(in) || !in[i].Present {
		return nil, true
	}
	if !in[i].Static.IsValid() {
		return nil, false
	}
	return tensor.Int64s(in[i].Static), true
}

func PlanResize(nd *graph.Node, opset int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if len(in) < 1 || !allFloat32(in, 0) {
		return nil, declineType(in), nil
	}
	x := in[0].Shape
	r := len(x)
	mode := nd.AttrString("mode", "nearest")
	coord := nd.AttrString("coordinate_transformation_mode", "half_pixel")
	nearest := nd.AttrString("nearest_mode", "round_prefer_floor")
	if nd.AttrInt("antialias", 0) != 0 {
		return nil, "host: antialias is not covered", nil
	}
	var scales []float64
	var sizes []int64
	var ok, ok2 bool
	if opset < 11 {
		coord, nearest = "asymmetric", "floor"
		scales, ok = resizeStaticFloats(in, 1)
		ok2 = true
	} else {
		scales, ok = resizeStaticFloats(in, 2)
		sizes, ok2 = resizeStaticInts(in, 3)
	}
	if !ok || !ok2 {
		return nil, "host: scales or sizes are not known before the run", nil
	}
	axes, err := nn.ResizeAxes(nd, r)
	if err != nil {
		return nil, "", err
	}
	outShape := append([]int64{}, x...)
	full := make([]float64, r)
	for i := range full {
		full[i] = 1
	}
	switch {
	case len(sizes) > 0:
		if len(scales) > 0 {
			return nil, "", ops.OpErr("Resize: only one of scales and sizes may be given")
		}
		if len(sizes) != len(axes) {
			return nil, "", ops.OpErr("Resize: sizes has %d elements for %d axes", len(sizes), len(axes))
		}
		policy := nd.AttrString("keep_aspect_ratio_policy", "stretch")
		if policy != "stretch" {
			s := 0.0
			for i, ax := range axes {
				q := float64(sizes[i]) / float64(x[ax])
				switch {
				case i == 0:
					s = q
				case policy == "not_larger":
					s = math.Min(s, q)
				case policy == "not_smaller":
					s = math.Max(s, q)
				default:
					return nil, "host: keep_aspect_ratio_policy " + policy + " is not covered", nil
				}
			}
			for _, ax := range axes {
				full[ax] = s
				outShape[ax] = int64(math.Round(s * float64(x[ax])))
			}
			break
		}
		for i, ax := range axes {
			outShape[ax] = sizes[i]
			full[ax] = float64(sizes[i]) / float64(x[ax])
		}
	case len(scales) > 0:
		if len(scales) != len(axes) {
			return nil, "", ops.OpErr("Resize: scales has %d elements for %d axes", len(scales), len(axes))
		}
		for i, ax := range axes {
			if scales[i] <= 0 {
				return nil, "", ops.OpErr("Resize: scale %g on axis %d must be positive", scales[i], ax)
			}
			full[ax] = scales[i]
			outShape[ax] = int64(math.Floor(float64(x[ax]) * scales[i]))
		}
	default:
		return nil, "", ops.OpErr("Resize: neither scales nor sizes given")
	}
	return resizePlan(x, outShape, full, mode, coord, nearest)
}

func planUpsample(nd *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if len(in) < 1 || !allFloat32(in, 0) {
		return nil, declineType(in), nil
	}
	x := in[0].Shape
	sc, ok := resizeStaticFloats(in, 1)
	if !ok {
		return nil, "host: scales are not known before the run", nil
	}
	if sc == nil {
		for _, f := range nd.AttrFloats("scales") {
			sc = append(sc, float64(f))
		}
	}
	if len(sc) != len(x) {
		return nil, "", ops.OpErr("Upsample: scales has %d elements for rank %d", len(sc), len(x))
	}
	mode := nd.AttrString("mode", "nearest")
	if mode == "bilinear" {
		mode = "linear"
	}
	out := make([]int64, len(sc))
	for i, s := range sc {
		if s < 1 {
			return nil, "", ops.OpErr("Upsample scale %g on axis %d is below 1", s, i)
		}
		out[i] = int64(math.Floor(float64(x[i]) * s))
	}
	return resizePlan(x, out, sc, mode, "asymmetric", "floor")
}

// resizePlan is the table kernel and the gather of nearest or linear resizing of x to out
// with per-axis scales. An axis keeps its coordinates (is not resized) when its size and
// scale are unchanged, as the host function does.
func resizePlan(x, out []int64, scales []float64, mode, coord, nearest string) (*ops.KernelPlan, string, error) {
	r := len(x)
	coordCode, ok := resizeCoordCodes[coord]
	if !ok {
		return nil, "host: coordinate_transformation_mode " + coord + " is not covered", nil
	}
	nearestCode, ok := resizeNearestCodes[nearest]
	if mode == "nearest" && !ok {
		return nil, "host: nearest_mode " + nearest + " is not covered", nil
	}
	if mode != "nearest" && mode != "linear" {
		return nil, "host: mode " + mode + " is not covered", nil
	}
	if r == 0 || r > 4 {
		return nil, "host: the resize kernels cover ranks 1 to 4", nil
	}
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: append([]int64{}, out...)}}, Reason: reasonFloat32 + ", " + mode + ", rank <= 4"}
	if ops.Numel(out) == 0 {
		return p, "", nil
	}
	if ops.Numel(x) == 0 {
		return nil, "host: an empty input", nil
	}
	// Pad to rank 4 with unresized leading axes.
	var in4, out4 [4]int
	var sc4 [4]float64
	var id4 [4]int
	for i := range 4 {
		in4[i], out4[i], sc4[i], id4[i] = 1, 1, 1, 1
	}
	for i := range r {
		j := 4 - r + i
		in4[j], out4[j], sc4[j] = int(x[i]), int(out[i]), scales[i]
		if x[i] != out[i] || scales[i] != 1 {
			id4[j] = 0
		}
	}
	linear := mode == "linear"
	if linear && (id4[0] == 0 || id4[1] == 0) {
		return nil, "host: linear resizing is covered on the last two axes only", nil
	}
	total := out4[0] + out4[1] + out4[2] + out4[3]
	p.Scratch = []int64{int64(8 * total), int64(4 * total)} // taps ([2, total] i32), weights (f32)
	modeCode := 0
	if linear {
		modeCode = 1
	}
	args := []uint64{U(total), U(in4[0]), U(in4[1]), U(in4[2]), U(in4[3]), U(out4[0]), U(out4[1]), U(out4[2]), U(out4[3]),
		math.Float64bits(sc4[0]), math.Float64bits(sc4[1]), math.Float64bits(sc4[2]), math.Float64bits(sc4[3]),
		U(id4[0]), U(id4[1]), U(id4[2]), U(id4[3])}
	p.Calls = append(p.Calls, ops.KernelCall{File: "resize.loom", Symbol: "resize_table",
		Config: map[string]string{"MODE": strconv.Itoa(modeCode), "COORD": strconv.Itoa(coordCode), "NEAREST": strconv.Itoa(nearestCode)},
		Args:   args, Workload: args[:1], Bind: []ops.KernelBinding{ops.WriteOf(ops.ScratchOperand(0)), ops.WriteOf(ops.ScratchOperand(1))}})
	t1, t2, t3 := out4[0], out4[0]+out4[1], out4[0]+out4[1]+out4[2]
	o01 := out4[0] * out4[1]
	if linear {
		args := []uint64{U(out4[3]), U(out4[2]), U(o01), U(in4[2]), U(in4[3]), U(total), U(t2), U(t3)}
		p.Calls = append(p.Calls, ops.KernelCall{File: "resize.loom", Symbol: "resize_linear", Args: args, Workload: args[:3],
			Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.ReadOf(ops.ScratchOperand(0)), ops.ReadOf(ops.ScratchOperand(1)), ops.WriteOf(ops.OutputOperand(0))}})
		return p, "", nil
	}
	args = []uint64{U(out4[3]), U(out4[2]), U(o01), U(out4[1]), U(in4[0]), U(in4[1]), U(in4[2]), U(in4[3]), U(total), U(t1), U(t2), U(t3)}
	p.Calls = append(p.Calls, ops.KernelCall{File: "resize.loom", Symbol: "resize_nearest", Args: args, Workload: args[:3],
		Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.ReadOf(ops.ScratchOperand(0)), ops.WriteOf(ops.OutputOperand(0))}})
	return p, "", nil
}
