package session

import (
	"math"
	"strconv"

	"github.com/loomrt/loom/go/graph"
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
var compareTypes = map[DType]string{graph.Float: "f32", graph.Double: "f64", graph.Int32: "i32", graph.Int64: "i64"}

// variadicOps maps the variadic ops to the binary kernel's OP code.
var variadicOps = map[string]string{"Sum": kernels.VariadicAdd, "Mean": kernels.VariadicAdd, "Max": kernels.VariadicMax,
	"Min": kernels.VariadicMin}

func init() {
	registerKernelOp("LayerNormalization", planLayerNorm, hostFallback("LayerNormalization"))
	registerKernelOp(graph.LoomDomain+":LayerNormalization", planLayerNorm, hostFallback("LayerNormalization"))
	registerKernelOp("InstanceNormalization", planInstanceNorm, hostFallback("InstanceNormalization"))
	registerKernelOp("BatchNormalization", planBatchNorm, hostFallback("BatchNormalization"))
	for op, a := range activationOps {
		registerKernelOp(op, activationPlanner(a.code, a.params), hostFallback(op))
	}
	registerKernelOp("Gelu", planGelu, hostFallback("Gelu"))
	registerKernelOp(graph.LoomDomain+":Gelu", planGelu, hostFallback("Gelu"))
	// The optimizer's HardSwish for models before opset 14 (go/graph/opt FuseHardSwish).
	registerKernelOp(graph.LoomDomain+":HardSwish", activationPlanner(activationOps["HardSwish"].code, nil), hostFallback("HardSwish"))
	registerKernelOp("Clip", planClip, hostFallback("Clip"))
	registerKernelOp("Pow", planPow, hostFallback("Pow"))
	for op, code := range compareOps {
		registerKernelOp(op, comparePlanner(code), hostFallback(op))
	}
	for op, code := range variadicOps {
		registerKernelOp(op, variadicPlanner(op, code), hostFallback(op))
	}
}

func f32bits(v float32) uint64 { return uint64(math.Float32bits(v)) }

// activationCall runs the activation kernel with OP code over count elements of input 0.
func activationCall(code string, p0, p1 float32, count int) kernelCall {
	return kernelCall{file: normFile, symbol: "activation", config: map[string]string{"OP": code},
		args: []uint64{f32bits(p0), f32bits(p1), u(count)}, workload: []uint64{u(count)},
		bind: []kernelBinding{readOf(inputOperand(0)), writeOf(outputOperand(0))}}
}

// unaryPlan is the plan of an elementwise op on a float32 input 0 with output shape out
// (which has as many elements as the input).
func unaryPlan(in []valueInfo, out []int64, code string, p0, p1 float32) (*kernelPlan, string) {
	if !needInput(in, 0) || in[0].dtype != graph.Float {
		return nil, declineType(in)
	}
	p := &kernelPlan{outputs: []valueType{{graph.Float, out}}, reason: reasonFloat32}
	if count := numel(out); count > 0 {
		p.calls = []kernelCall{activationCall(code, p0, p1, count)}
	}
	return p, ""
}

func activationPlanner(code string, params func(*graph.Node) (float32, float32)) kernelPlanner {
	return func(n *graph.Node, _ int64, in []valueInfo) (*kernelPlan, string, error) {
		var p0, p1 float32
		if params != nil {
			p0, p1 = params(n)
		}
		if !needInput(in, 0) {
			return nil, "", opErr("%s needs an input", n.OpType)
		}
		p, reason := unaryPlan(in, append([]int64{}, in[0].shape...), code, p0, p1)
		return p, reason, nil
	}
}

func planGelu(n *graph.Node, _ int64, in []valueInfo) (*kernelPlan, string, error) {
	if !needInput(in, 0) {
		return nil, "", opErr("Gelu needs an input")
	}
	code := kernels.ActivationGeluErf
	switch a := n.AttrString("approximate", "none"); a {
	case "none":
	case "tanh":
		code = kernels.ActivationGeluTanh
	default:
		return nil, "", opErr("Gelu: unknown approximate=%q (want none or tanh)", a)
	}
	p, reason := unaryPlan(in, append([]int64{}, in[0].shape...), code, 0, 0)
	return p, reason, nil
}

func planClip(n *graph.Node, opset int64, in []valueInfo) (*kernelPlan, string, error) {
	if !needInput(in, 0) {
		return nil, "", opErr("Clip needs an input")
	}
	x := in[0]
	if x.dtype != graph.Float {
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
			if in[i+1].dtype != graph.Float || numel(in[i+1].shape) != 1 {
				return nil, "", opErr("Clip: bound %d must be one float, got %s%v", i+1, in[i+1].dtype, in[i+1].shape)
			}
			*has = true
		}
	}
	p := &kernelPlan{outputs: []valueType{{graph.Float, append([]int64{}, x.shape...)}}, reason: reasonFloat32}
	count := numel(x.shape)
	if count == 0 {
		return p, "", nil
	}
	lov, hiv := inputOperand(0), inputOperand(0) // not read without HASLO / HASHI
	if hasLo {
		lov = inputOperand(1)
	}
	if hasHi {
		hiv = inputOperand(2)
	}
	p.calls = []kernelCall{{file: normFile, symbol: "clip",
		config: map[string]string{"HASLO": strconv.FormatBool(hasLo), "HASHI": strconv.FormatBool(hasHi)},
		args:   []uint64{f32bits(lo), f32bits(hi), u(count)}, workload: []uint64{u(count)},
		bind: []kernelBinding{readOf(inputOperand(0)), readOf(lov), readOf(hiv), writeOf(outputOperand(0))}}}
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

// binaryCall is one launch of the binary kernel: y = OP(a or y, b) over out, with the
// operands' broadcast strides.
func binaryCall(code string, out []int64, a, b []int64, acc, scaled bool, scale float32, opA, opB operand) (kernelCall, bool) {
	as, err := broadcastStrides(a, out)
	if err != nil {
		return kernelCall{}, false
	}
	bs, err := broadcastStrides(b, out)
	if err != nil {
		return kernelCall{}, false
	}
	dims, st, ok := broadcastAxes(out, as, bs)
	if !ok {
		return kernelCall{}, false
	}
	args := append(rank6Args(dims, st), f32bits(scale))
	cfg := pickTile(dims[4], dims[5]).config(map[string]string{"OP": code, "ACC": strconv.FormatBool(acc), "SCALE": strconv.FormatBool(scaled)})
	// y is read_write in every launch (only ACC launches read it).
	return kernelCall{file: normFile, symbol: "binary", config: cfg, args: args, workload: args[:movementRank],
		bind: []kernelBinding{readOf(opA), readOf(opB), readWriteOf(outputOperand(0))}}, true
}

func planPow(n *graph.Node, _ int64, in []valueInfo) (*kernelPlan, string, error) {
	if !needInput(in, 0) || !needInput(in, 1) {
		return nil, "", opErr("Pow needs a base and an exponent")
	}
	x, e := in[0], in[1]
	if x.dtype != graph.Float || e.dtype != graph.Float {
		return nil, "host: the pow kernels cover float32 bases and exponents", nil
	}
	out, err := broadcastShapes(x.shape, e.shape)
	if err != nil {
		return nil, "", err
	}
	if e.static.IsValid() && numel(e.shape) == 1 {
		// A constant scalar exponent: one unary pass (x·x for the common square).
		v := e.static.data.([]float32)[0]
		code := kernels.ActivationPow
		if v == 2 {
			code = kernels.ActivationSquare
		}
		p, reason := unaryPlan(in[:1], out, code, v, 0)
		return p, reason, nil
	}
	p := &kernelPlan{outputs: []valueType{{graph.Float, out}}, reason: reasonFloat32 + ", broadcast by strides"}
	if numel(out) == 0 {
		return p, "", nil
	}
	call, ok := binaryCall("3", out, x.shape, e.shape, false, false, 1, inputOperand(0), inputOperand(1))
	if !ok {
		return nil, "host: the binary kernel covers 6 axes after merging", nil
	}
	p.calls = []kernelCall{call}
	return p, "", nil
}

func comparePlanner(code string) kernelPlanner {
	return func(n *graph.Node, _ int64, in []valueInfo) (*kernelPlan, string, error) {
		if !needInput(in, 0) || !needInput(in, 1) {
			return nil, "", opErr("%s needs two operands", n.OpType)
		}
		a, b := in[0], in[1]
		t, ok := compareTypes[a.dtype]
		if !ok || a.dtype != b.dtype {
			return nil, "host: the compare kernel covers two float32, float64, int32 or int64 operands", nil
		}
		out, err := broadcastShapes(a.shape, b.shape)
		if err != nil {
			return nil, "", err
		}
		p := &kernelPlan{outputs: []valueType{{graph.Bool, out}}, reason: "Loom kernel: broadcast comparison"}
		if numel(out) == 0 {
			return p, "", nil
		}
		as, _ := broadcastStrides(a.shape, out)
		bs, _ := broadcastStrides(b.shape, out)
		dims, st, ok := broadcastAxes(out, as, bs)
		if !ok {
			return nil, "host: the compare kernel covers 6 axes after merging", nil
		}
		args := rank6Args(dims, st)
		p.calls = []kernelCall{{file: normFile, symbol: "compare",
			config: pickTile(dims[4], dims[5]).config(map[string]string{"T": t, "OP": code}), args: args, workload: args[:movementRank],
			bind: []kernelBinding{readOf(inputOperand(0)), readOf(inputOperand(1)), writeOf(outputOperand(0))}}}
		return p, "", nil
	}
}

// variadicPlanner: the first two operands combine into the output, each further one is
// folded into it (ACC); Mean scales the last launch by 1/count.
func variadicPlanner(op, code string) kernelPlanner {
	return func(n *graph.Node, _ int64, in []valueInfo) (*kernelPlan, string, error) {
		var parts []int
		for i, v := range in {
			if v.present {
				if v.dtype != graph.Float {
					return nil, declineType(in), nil
				}
				parts = append(parts, i)
			}
		}
		if len(parts) == 0 {
			return nil, "", opErr("%s needs at least one input", op)
		}
		if len(parts) == 1 {
			p, reason := identityCopyPlan(in[parts[0]], reasonFloat32+", one operand: copy")
			return p, reason, nil
		}
		out := in[parts[0]].shape
		for _, i := range parts[1:] {
			var err error
			if out, err = broadcastShapes(out, in[i].shape); err != nil {
				return nil, "", err
			}
		}
		p := &kernelPlan{outputs: []valueType{{graph.Float, out}}, reason: reasonFloat32 + ", broadcast by strides"}
		if numel(out) == 0 {
			return p, "", nil
		}
		scale := float32(1)
		if op == "Mean" {
			scale = float32(1 / float64(len(parts)))
		}
		for k := 1; k < len(parts); k++ {
			last := k == len(parts)-1
			a, opA := in[parts[0]].shape, inputOperand(parts[0])
			if k > 1 {
				// The kernel reads y instead of a: bind the operand as a broadcast scalar.
				a, opA = []int64{}, inputOperand(parts[k])
			}
			call, ok := binaryCall(code, out, a, in[parts[k]].shape, k > 1, last && op == "Mean", scale, opA, inputOperand(parts[k]))
			if !ok {
				return nil, "host: the binary kernel covers 6 axes after merging", nil
			}
			p.calls = append(p.calls, call)
		}
		return p, "", nil
	}
}

// normScaleMode says how a LayerNormalization scale or bias of shape s applies over the
// normalized shape norm: per element ("column"), one value for all ("scalar"); ok is false
// for other broadcasts.
func normScaleMode(s, norm []int64) (column, ok bool) {
	st, err := broadcastStrides(s, norm)
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

func planLayerNorm(n *graph.Node, _ int64, in []valueInfo) (*kernelPlan, string, error) {
	if !needInput(in, 0) || !needInput(in, 1) {
		return nil, "", opErr("LayerNormalization needs X and Scale")
	}
	x := in[0]
	hasBias := needInput(in, 2)
	if !allFloat32(in, 0, 1) || (hasBias && in[2].dtype != graph.Float) {
		return nil, declineType(in), nil
	}
	ax, err := normAxis(n.AttrInt("axis", -1), len(x.shape))
	if err != nil {
		return nil, "", err
	}
	norm := x.shape[ax:]
	scol, ok := normScaleMode(in[1].shape, norm)
	if !ok {
		return nil, "host: the norm kernel takes a scale per normalized element or one for all", nil
	}
	bias := "0"
	if hasBias {
		bcol, ok := normScaleMode(in[2].shape, norm)
		if !ok {
			return nil, "host: the norm kernel takes a bias per normalized element or one for all", nil
		}
		bias = map[bool]string{true: "1", false: "2"}[bcol]
	}
	wantMean, wantInv, ok := statsOutputs(n)
	if !ok {
		return nil, "host: InvStdDev without Mean", nil
	}
	stat := append([]int64{}, x.shape...)
	for k := ax; k < len(stat); k++ {
		stat[k] = 1
	}
	rows, cols := numel(x.shape[:ax]), numel(norm)
	p := &kernelPlan{outputs: []valueType{{graph.Float, append([]int64{}, x.shape...)}}, reason: reasonFloat32 + ", one thread per row"}
	meanOp, invOp := scratchOperand(0), scratchOperand(1)
	if wantMean {
		p.outputs = append(p.outputs, valueType{graph.Float, stat})
		meanOp = outputOperand(1)
	} else {
		p.scratch = append(p.scratch, int64(rows)*4)
	}
	if wantInv {
		p.outputs = append(p.outputs, valueType{graph.Float, append([]int64{}, stat...)})
		invOp = outputOperand(2)
	} else {
		p.scratch = append(p.scratch, int64(rows)*4)
		invOp = scratchOperand(len(p.scratch) - 1)
	}
	if rows == 0 {
		return p, "", nil
	}
	b := inputOperand(0) // not read without a bias
	if hasBias {
		b = inputOperand(2)
	}
	args := []uint64{u(rows), u(cols), 1, 1, f32bits(n.AttrFloat("epsilon", 1e-5))}
	p.calls = []kernelCall{{file: normFile, symbol: "norm_rows",
		config: map[string]string{"SCOL": strconv.FormatBool(scol), "BIAS": bias}, args: args, workload: args[:1],
		bind: []kernelBinding{readOf(inputOperand(0)), readOf(inputOperand(1)), readOf(b), writeOf(outputOperand(0)),
			writeOf(meanOp), writeOf(invOp)}}}
	return p, "", nil
}

// channelParams checks that inputs from..to-1 are float32 vectors of c elements.
func channelParams(op string, in []valueInfo, from, to int, c int64) error {
	for i := from; i < to; i++ {
		if !needInput(in, i) {
			return opErr("%s needs input %d", op, i)
		}
		if int64(numel(in[i].shape)) != c {
			return opErr("%s: input %d has shape %v, want %d elements (one per channel)", op, i, in[i].shape, c)
		}
	}
	return nil
}

func planInstanceNorm(n *graph.Node, _ int64, in []valueInfo) (*kernelPlan, string, error) {
	if !needInput(in, 0) {
		return nil, "", opErr("InstanceNormalization needs an input")
	}
	x := in[0]
	if len(x.shape) < 2 {
		return nil, "", opErr("InstanceNormalization input of rank %d", len(x.shape))
	}
	if err := channelParams("InstanceNormalization", in, 1, 3, x.shape[1]); err != nil {
		return nil, "", err
	}
	if !allFloat32(in, 0, 1, 2) {
		return nil, declineType(in), nil
	}
	rows, cols := numel(x.shape[:2]), numel(x.shape[2:])
	p := &kernelPlan{outputs: []valueType{{graph.Float, append([]int64{}, x.shape...)}},
		scratch: []int64{int64(rows) * 4, int64(rows) * 4}, reason: reasonFloat32 + ", one thread per instance"}
	if rows == 0 {
		return p, "", nil
	}
	c := u(int(x.shape[1]))
	args := []uint64{u(rows), u(cols), c, c, f32bits(n.AttrFloat("epsilon", 1e-5))}
	p.calls = []kernelCall{{file: normFile, symbol: "norm_rows", config: map[string]string{"SCOL": "false", "BIAS": "2"},
		args: args, workload: args[:1],
		bind: []kernelBinding{readOf(inputOperand(0)), readOf(inputOperand(1)), readOf(inputOperand(2)), writeOf(outputOperand(0)),
			writeOf(scratchOperand(0)), writeOf(scratchOperand(1))}}}
	return p, "", nil
}

func planBatchNorm(n *graph.Node, _ int64, in []valueInfo) (*kernelPlan, string, error) {
	if n.AttrInt("training_mode", 0) != 0 {
		return nil, "host: BatchNormalization in training mode", nil
	}
	for j, name := range n.Outputs {
		if j > 0 && name != "" {
			return nil, "host: BatchNormalization with running statistics outputs", nil
		}
	}
	if !needInput(in, 0) {
		return nil, "", opErr("BatchNormalization needs an input")
	}
	x := in[0]
	if len(x.shape) < 2 {
		return nil, "", opErr("BatchNormalization input of rank %d", len(x.shape))
	}
	if err := channelParams("BatchNormalization", in, 1, 5, x.shape[1]); err != nil {
		return nil, "", err
	}
	if !allFloat32(in, 0, 1, 2, 3, 4) {
		return nil, declineType(in), nil
	}
	rows, cols := int64(numel(x.shape[:2])), int64(numel(x.shape[2:]))
	p := &kernelPlan{outputs: []valueType{{graph.Float, append([]int64{}, x.shape...)}}, reason: reasonFloat32 + ", inference mode"}
	if rows*cols == 0 {
		return p, "", nil
	}
	args := []uint64{bits64(rows), bits64(cols), bits64(x.shape[1]), f32bits(n.AttrFloat("epsilon", 1e-5))}
	p.calls = []kernelCall{{file: normFile, symbol: "batch_norm", config: pickTile(rows, cols).config(map[string]string{}),
		args: args, workload: args[:2],
		bind: []kernelBinding{readOf(inputOperand(0)), readOf(inputOperand(1)), readOf(inputOperand(2)), readOf(inputOperand(3)),
			readOf(inputOperand(4)), writeOf(outputOperand(0))}}}
	return p, "", nil
}
