package kernelops

import (
	"math"
	"strconv"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
	"github.com/loomrt/loom/kernels"
)

// Normalizations, activations, Clip, Pow, comparisons and the variadic Sum/Mean/Max/Min as
// Loom kernels (kernels/norm.loom) on float32 tensors (comparisons also on int32, int64 and
// float64).

const normFile = "norm.loom"

// activationOps maps an op to the activation kernel's OP code and its parameters.
var activationOps = map[string]struct {
	code   string
	params func(n *graph.Node) (float32, float32)
}{
	"Erf":         {kernels.ActivationErf, nil},
	"HardSigmoid": {kernels.ActivationHardSigmoid, func(n *graph.Node) (float32, float32) { return n.AttrFloat("alpha", 0.2), n.AttrFloat("beta", 0.5) }},
	"HardSwish":   {kernels.ActivationHardSwish, nil},
	"Softplus":    {kernels.ActivationSoftplus, nil},
	"Softsign":    {kernels.ActivationSoftsign, nil},
	"Elu":         {kernels.ActivationElu, func(n *graph.Node) (float32, float32) { return n.AttrFloat("alpha", 1), 0 }},
	"Celu":        {kernels.ActivationCelu, func(n *graph.Node) (float32, float32) { return n.AttrFloat("alpha", 1), 0 }},
	"Selu": {kernels.ActivationSelu, func(n *graph.Node) (float32, float32) {
		return n.AttrFloat("alpha", 1.67326319217681884765625), n.AttrFloat("gamma", 1.05070102214813232421875)
	}},
	"Mish":            {kernels.ActivationMish, nil},
	"ThresholdedRelu": {kernels.ActivationThresholdedRelu, func(n *graph.Node) (float32, float32) { return n.AttrFloat("alpha", 1), 0 }},
}

// compareOps maps the comparison ops to the compare kernel's OP code.
var compareOps = map[string]string{"Equal": kernels.CompareEqual, "Less": kernels.CompareLess,
	"LessOrEqual": kernels.CompareLessOrEqual, "Greater": kernels.CompareGreater, "GreaterOrEqual": kernels.CompareGreaterOrEqual}

// compareTypes are the operand types the compare kernel is specialized for.
var compareTypes = map[tensor.DType]string{graph.Float: "f32", graph.Double: "f64", graph.Int32: "i32", graph.Int64: "i64"}

// variadicOps maps the variadic ops to elementwise.loom's binary OP code.
var variadicOps = map[string]string{"Sum": kernels.BinaryAdd, "Mean": kernels.BinaryAdd, "Max": kernels.BinaryMax,
	"Min": kernels.BinaryMin}

func init() {
	ops.RegisterKernelOp("LayerNormalization", PlanLayerNorm, hostFallback("LayerNormalization"))
	ops.RegisterKernelOp(graph.LoomDomain+":LayerNormalization", PlanLayerNorm, hostFallback("LayerNormalization"))
	ops.RegisterKernelOp("InstanceNormalization", planInstanceNorm, hostFallback("InstanceNormalization"))
	for _, key := range []string{"LayerNormalization", graph.LoomDomain + ":LayerNormalization"} {
		ops.RegisterGPUKernelPlanner(key, normRowsBlock.planner(PlanLayerNorm))
	}
	ops.RegisterGPUKernelPlanner("InstanceNormalization", normRowsBlock.planner(planInstanceNorm))
	ops.RegisterKernelOp("BatchNormalization", PlanBatchNorm, hostFallback("BatchNormalization"))
	for op, a := range activationOps {
		ops.RegisterKernelOp(op, activationPlanner(a.code, a.params), hostFallback(op))
	}
	ops.RegisterKernelOp("Gelu", PlanGelu, hostFallback("Gelu"))
	ops.RegisterKernelOp(graph.LoomDomain+":Gelu", PlanGelu, hostFallback("Gelu"))
	// The optimizer's HardSwish for models before opset 14 (go/graph/opt FuseHardSwish).
	ops.RegisterKernelOp(graph.LoomDomain+":HardSwish", activationPlanner(activationOps["HardSwish"].code, nil), hostFallback("HardSwish"))
	ops.RegisterKernelOp("Clip", planClip, hostFallback("Clip"))
	ops.RegisterKernelOp("Pow", planPow, hostFallback("Pow"))
	for op, code := range compareOps {
		ops.RegisterKernelOp(op, comparePlanner(code), hostFallback(op))
	}
	for op, code := range variadicOps {
		ops.RegisterKernelOp(op, variadicPlanner(op, code), hostFallback(op))
	}
}

func f32bits(v float32) uint64 { return uint64(math.Float32bits(v)) }

// activationCall runs the activation kernel with OP code over count elements of input 0.
func activationCall(code string, p0, p1 float32, count int) ops.KernelCall {
	return ops.KernelCall{File: normFile, Symbol: "activation", Config: map[string]string{"OP": code},
		Args: []uint64{f32bits(p0), f32bits(p1), U(count)}, Workload: []uint64{U(count)},
		Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.WriteOf(ops.OutputOperand(0))}}
}

// unaryPlan is the plan of an elementwise op on a float32 input 0 with output shape out
// (which has as many elements as the input).
func unaryPlan(in []ops.ValueInfo, out []int64, code string, p0, p1 float32) (*ops.KernelPlan, string) {
	if !needInput(in, 0) || in[0].Dtype != graph.Float {
		return nil, declineType(in)
	}
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: out}}, Reason: reasonFloat32}
	if count := ops.Numel(out); count > 0 {
		p.Calls = []ops.KernelCall{activationCall(code, p0, p1, count)}
	}
	return p, ""
}

func activationPlanner(code string, params func(*graph.Node) (float32, float32)) ops.KernelPlanner {
	return func(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
		var p0, p1 float32
		if params != nil {
			p0, p1 = params(n)
		}
		if !needInput(in, 0) {
			return nil, "", ops.OpErr("%s needs an input", n.OpType)
		}
		p, reason := unaryPlan(in, append([]int64{}, in[0].Shape...), code, p0, p1)
		return p, reason, nil
	}
}

func PlanGelu(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if !needInput(in, 0) {
		return nil, "", ops.OpErr("Gelu needs an input")
	}
	code := kernels.ActivationGeluErf
	switch a := n.AttrString("approximate", "none"); a {
	case "none":
	case "tanh":
		code = kernels.ActivationGeluTanh
	default:
		return nil, "", ops.OpErr("Gelu: unknown approximate=%q (want none or tanh)", a)
	}
	p, reason := unaryPlan(in, append([]int64{}, in[0].Shape...), code, 0, 0)
	return p, reason, nil
}

func planClip(n *graph.Node, opset int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if !needInput(in, 0) {
		return nil, "", ops.OpErr("Clip needs an input")
	}
	x := in[0]
	if x.Dtype != graph.Float {
		return nil, declineType(in[:1]), nil
	}
	lo, hi := float32(math.Inf(-1)), float32(math.Inf(1))
	hasLo, hasHi := false, false
	if opset < 11 {
		lo, hi = n.AttrFloat("min", lo), n.AttrFloat("max", hi)
	} else {
		for i, has := range []*bool{&hasLo, &hasHi} {
			if !needInput(in, i+1) {
				continue
			}
			if in[i+1].Dtype != graph.Float || ops.Numel(in[i+1].Shape) != 1 {
				return nil, "", ops.OpErr("Clip: bound %d must be one float, got %s%v", i+1, in[i+1].Dtype, in[i+1].Shape)
			}
			*has = true
		}
	}
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: append([]int64{}, x.Shape...)}}, Reason: reasonFloat32}
	count := ops.Numel(x.Shape)
	if count == 0 {
		return p, "", nil
	}
	lov, hiv := ops.InputOperand(0), ops.InputOperand(0) // not read without HASLO / HASHI
	if hasLo {
		lov = ops.InputOperand(1)
	}
	if hasHi {
		hiv = ops.InputOperand(2)
	}
	p.Calls = []ops.KernelCall{{File: normFile, Symbol: "clip",
		Config: map[string]string{"HASLO": strconv.FormatBool(hasLo), "HASHI": strconv.FormatBool(hasHi)},
		Args:   []uint64{f32bits(lo), f32bits(hi), U(count)}, Workload: []uint64{U(count)},
		Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.ReadOf(lov), ops.ReadOf(hiv), ops.WriteOf(ops.OutputOperand(0))}}}
	return p, "", nil
}

// rank6Args packs the dimensions and the strides of each operand for the rank-6 kernels.
func rank6Args(dims [movementRank]int64, st [][movementRank]int64) []uint64 {
	args := make([]uint64, 0, movementRank*(1+len(st)))
	for _, d := range dims {
		args = append(args, bits64(d))
	}
	for _, s := range st {
		for _, v := range s {
			args = append(args, bits64(v))
		}
	}
	return args
}

func planPow(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if !needInput(in, 0) || !needInput(in, 1) {
		return nil, "", ops.OpErr("Pow needs a base and an exponent")
	}
	x, e := in[0], in[1]
	if x.Dtype != graph.Float || e.Dtype != graph.Float {
		return nil, "host: the pow kernels cover float32 bases and exponents", nil
	}
	out, err := ops.BroadcastShapes(x.Shape, e.Shape)
	if err != nil {
		return nil, "", err
	}
	if e.Static.IsValid() && ops.Numel(e.Shape) == 1 {
		// A constant scalar exponent: one unary pass (x·x for the common square).
		v := e.Static.Data().([]float32)[0]
		code := kernels.ActivationPow
		if v == 2 {
			code = kernels.ActivationSquare
		}
		p, reason := unaryPlan(in[:1], out, code, v, 0)
		return p, reason, nil
	}
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: out}}, Reason: reasonFloat32 + ", broadcast by strides"}
	if ops.Numel(out) == 0 {
		return p, "", nil
	}
	call, ok := binaryCall(kernels.BinaryPow, out, x.Shape, e.Shape, false, false, 1, ops.InputOperand(0), ops.InputOperand(1))
	if !ok {
		return nil, "host: the binary kernel covers 6 axes after merging", nil
	}
	p.Calls = []ops.KernelCall{call}
	return p, "", nil
}

func comparePlanner(code string) ops.KernelPlanner {
	return func(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
		if !needInput(in, 0) || !needInput(in, 1) {
			return nil, "", ops.OpErr("%s needs two operands", n.OpType)
		}
		a, b := in[0], in[1]
		t, ok := compareTypes[a.Dtype]
		if !ok || a.Dtype != b.Dtype {
			return nil, "host: the compare kernel covers two float32, float64, int32 or int64 operands", nil
		}
		out, err := ops.BroadcastShapes(a.Shape, b.Shape)
		if err != nil {
			return nil, "", err
		}
		p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Bool, Shape: out}}, Reason: "Loom kernel: broadcast comparison"}
		if ops.Numel(out) == 0 {
			return p, "", nil
		}
		as, _ := ops.BroadcastStrides(a.Shape, out)
		bs, _ := ops.BroadcastStrides(b.Shape, out)
		dims, st, ok := broadcastAxes(out, as, bs)
		if !ok {
			return nil, "host: the compare kernel covers 6 axes after merging", nil
		}
		tl := pickTile(dims[4], dims[5])
		args := blockSplitArgs(rank6Args(dims, st), dims, tl.bx, tl.by)
		p.Calls = []ops.KernelCall{{File: normFile, Symbol: "compare",
			Config: tl.config(innerStrides(map[string]string{"T": t, "OP": code}, dims, st, "AS5", "BS5")), Args: args, Workload: args[:movementRank],
			Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.ReadOf(ops.InputOperand(1)), ops.WriteOf(ops.OutputOperand(0))}}}
		return p, "", nil
	}
}

// variadicPlanner: the first two operands combine into the output, each further one is
// folded into it (ACC); Mean scales the last launch by 1/count.
func variadicPlanner(op, code string) ops.KernelPlanner {
	return func(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
		var parts []int
		for i, v := range in {
			if v.Present {
				if v.Dtype != graph.Float {
					return nil, declineType(in), nil
				}
				parts = append(parts, i)
			}
		}
		if len(parts) == 0 {
			return nil, "", ops.OpErr("%s needs at least one input", op)
		}
		if len(parts) == 1 {
			p, reason := identityCopyPlan(in[parts[0]], reasonFloat32+", one operand: copy")
			return p, reason, nil
		}
		out := in[parts[0]].Shape
		for _, i := range parts[1:] {
			var err error
			if out, err = ops.BroadcastShapes(out, in[i].Shape); err != nil {
				return nil, "", err
			}
		}
		p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: out}}, Reason: reasonFloat32 + ", broadcast by strides"}
		if ops.Numel(out) == 0 {
			return p, "", nil
		}
		scale := float32(1)
		if op == "Mean" {
			scale = float32(1 / float64(len(parts)))
		}
		for k := 1; k < len(parts); k++ {
			last := k == len(parts)-1
			a, opA := in[parts[0]].Shape, ops.InputOperand(parts[0])
			if k > 1 {
				// The kernel reads y instead of a: bind the operand as a broadcast scalar.
				a, opA = []int64{}, ops.InputOperand(parts[k])
			}
			call, ok := binaryCall(code, out, a, in[parts[k]].Shape, k > 1, last && op == "Mean", scale, opA, ops.InputOperand(parts[k]))
			if !ok {
				return nil, "host: the binary kernel covers 6 axes after merging", nil
			}
			p.Calls = append(p.Calls, call)
		}
		return p, "", nil
	}
}

// normScaleMode says how a LayerNormalization scale or bias of shape s applies over the
// normalized shape norm: per element ("column"), one value for all ("scalar"); ok is false
// for other broadcasts.
func normScaleMode(s, norm []int64) (column, ok bool) {
	st, err := ops.BroadcastStrides(s, norm)
	if err != nil {
		return false, false
	}
	want := contiguousStrides(norm)
	full, zero := true, true
	for k, d := range norm {
		if d == 1 {
			continue
		}
		full = full && int64(st[k]) == want[k]
		zero = zero && st[k] == 0
	}
	switch {
	case full:
		return true, true
	case zero:
		return false, true
	}
	return false, false
}

// statsOutputs decides where LayerNormalization's Mean and InvStdDev go: to outputs 1 and 2
// when the node names them, otherwise to scratch. ok is false when only the second is named.
func statsOutputs(n *graph.Node) (mean, inv bool, ok bool) {
	named := func(j int) bool { return j < len(n.Outputs) && n.Outputs[j] != "" }
	mean, inv = named(1), named(2)
	return mean, inv, mean || !inv
}

func PlanLayerNorm(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if !needInput(in, 0) || !needInput(in, 1) {
		return nil, "", ops.OpErr("LayerNormalization needs X and Scale")
	}
	x := in[0]
	hasBias := needInput(in, 2)
	if !allFloat32(in, 0, 1) || (hasBias && in[2].Dtype != graph.Float) {
		return nil, declineType(in), nil
	}
	ax, err := ops.NormAxis(n.AttrInt("axis", -1), len(x.Shape))
	if err != nil {
		return nil, "", err
	}
	norm := x.Shape[ax:]
	scol, ok := normScaleMode(in[1].Shape, norm)
	if !ok {
		return nil, "host: the norm kernel takes a scale per normalized element or one for all", nil
	}
	bias := "0"
	if hasBias {
		bcol, ok := normScaleMode(in[2].Shape, norm)
		if !ok {
			return nil, "host: the norm kernel takes a bias per normalized element or one for all", nil
		}
		bias = map[bool]string{true: "1", false: "2"}[bcol]
	}
	wantMean, wantInv, ok := statsOutputs(n)
	if !ok {
		return nil, "host: InvStdDev without Mean", nil
	}
	stat := append([]int64{}, x.Shape...)
	for k := ax; k < len(stat); k++ {
		stat[k] = 1
	}
	rows, cols := ops.Numel(x.Shape[:ax]), ops.Numel(norm)
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: append([]int64{}, x.Shape...)}}, Reason: reasonFloat32 + ", one thread per row"}
	meanOp, invOp := ops.ScratchOperand(0), ops.ScratchOperand(1)
	if wantMean {
		p.Outputs = append(p.Outputs, ops.ValueType{Dtype: graph.Float, Shape: stat})
		meanOp = ops.OutputOperand(1)
	} else {
		p.Scratch = append(p.Scratch, int64(rows)*4)
	}
	if wantInv {
		p.Outputs = append(p.Outputs, ops.ValueType{Dtype: graph.Float, Shape: append([]int64{}, stat...)})
		invOp = ops.OutputOperand(2)
	} else {
		p.Scratch = append(p.Scratch, int64(rows)*4)
		invOp = ops.ScratchOperand(len(p.Scratch) - 1)
	}
	if rows == 0 {
		return p, "", nil
	}
	b := ops.InputOperand(0) // not read without a bias
	if hasBias {
		b = ops.InputOperand(2)
	}
	args := []uint64{U(rows), U(cols), 1, 1, f32bits(n.AttrFloat("epsilon", 1e-5))}
	p.Calls = []ops.KernelCall{{File: normFile, Symbol: "norm_rows",
		Config: map[string]string{"SCOL": strconv.FormatBool(scol), "BIAS": bias}, Args: args, Workload: args[:1],
		Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.ReadOf(ops.InputOperand(1)), ops.ReadOf(b), ops.WriteOf(ops.OutputOperand(0)),
			ops.WriteOf(meanOp), ops.WriteOf(invOp)}}}
	return p, "", nil
}

// channelParams checks that inputs from..to-1 are float32 vectors of c elements.
func channelParams(op string, in []ops.ValueInfo, from, to int, c int64) error {
	for i := from; i < to; i++ {
		if !needInput(in, i) {
			return ops.OpErr("%s needs input %d", op, i)
		}
		if int64(ops.Numel(in[i].Shape)) != c {
			return ops.OpErr("%s: input %d has shape %v, want %d elements (one per channel)", op, i, in[i].Shape, c)
		}
	}
	return nil
}

func planInstanceNorm(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if !needInput(in, 0) {
		return nil, "", ops.OpErr("InstanceNormalization needs an input")
	}
	x := in[0]
	if len(x.Shape) < 2 {
		return nil, "", ops.OpErr("InstanceNormalization input of rank %d", len(x.Shape))
	}
	if err := channelParams("InstanceNormalization", in, 1, 3, x.Shape[1]); err != nil {
		return nil, "", err
	}
	if !allFloat32(in, 0, 1, 2) {
		return nil, declineType(in), nil
	}
	rows, cols := ops.Numel(x.Shape[:2]), ops.Numel(x.Shape[2:])
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: append([]int64{}, x.Shape...)}},
		Scratch: []int64{int64(rows) * 4, int64(rows) * 4}, Reason: reasonFloat32 + ", one thread per instance"}
	if rows == 0 {
		return p, "", nil
	}
	c := U(int(x.Shape[1]))
	args := []uint64{U(rows), U(cols), c, c, f32bits(n.AttrFloat("epsilon", 1e-5))}
	p.Calls = []ops.KernelCall{{File: normFile, Symbol: "norm_rows", Config: map[string]string{"SCOL": "false", "BIAS": "2"},
		Args: args, Workload: args[:1],
		Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.ReadOf(ops.InputOperand(1)), ops.ReadOf(ops.InputOperand(2)), ops.WriteOf(ops.OutputOperand(0)),
			ops.WriteOf(ops.ScratchOperand(0)), ops.WriteOf(ops.ScratchOperand(1))}}}
	return p, "", nil
}

func PlanBatchNorm(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if n.AttrInt("training_mode", 0) != 0 {
		return nil, "host: BatchNormalization in training mode", nil
	}
	for j, name := range n.Outputs {
		if j > 0 && name != "" {
			return nil, "host: BatchNormalization with running statistics outputs", nil
		}
	}
	if !needInput(in, 0) {
		return nil, "", ops.OpErr("BatchNormalization needs an input")
	}
	x := in[0]
	if len(x.Shape) < 2 {
		return nil, "", ops.OpErr("BatchNormalization input of rank %d", len(x.Shape))
	}
	if err := channelParams("BatchNormalization", in, 1, 5, x.Shape[1]); err != nil {
		return nil, "", err
	}
	if !allFloat32(in, 0, 1, 2, 3, 4) {
		return nil, declineType(in), nil
	}
	rows, cols := int64(ops.Numel(x.Shape[:2])), int64(ops.Numel(x.Shape[2:]))
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: append([]int64{}, x.Shape...)}}, Reason: reasonFloat32 + ", inference mode"}
	if rows*cols == 0 {
		return p, "", nil
	}
	args := []uint64{bits64(rows), bits64(cols), bits64(x.Shape[1]), f32bits(n.AttrFloat("epsilon", 1e-5))}
	p.Calls = []ops.KernelCall{{File: normFile, Symbol: "batch_norm", Config: pickTile(rows, cols).config(map[string]string{}),
		Args: args, Workload: args[:2],
		Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.ReadOf(ops.InputOperand(1)), ops.ReadOf(ops.InputOperand(2)), ops.ReadOf(ops.InputOperand(3)),
			ops.ReadOf(ops.InputOperand(4)), ops.WriteOf(ops.OutputOperand(0))}}}
	return p, "", nil
}
