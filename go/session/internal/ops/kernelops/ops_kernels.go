package kernelops

import (
	"cmp"
	"math"
	"slices"
	"strconv"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/nn"
	"github.com/loomrt/loom/go/session/internal/tensor"
	"github.com/loomrt/loom/kernels"
)

// The ops below run Loom kernels (kernels/) on float32 tensors in the shapes the
// kernels cover, described as kernel plans (kernel_plan.go), and their Go host functions
// otherwise.

func init() {
	for op, code := range map[string]string{"Add": kernels.BinaryAdd, "Sub": kernels.BinarySub, "Mul": kernels.BinaryMul, "Div": kernels.BinaryDiv} {
		ops.RegisterKernelOp(op, binaryPlanner(code), hostFallback(op))
		ops.RegisterGPUKernelPlanner(op, gpuFlat(binaryPlanner(code)))
	}
	unary := map[string]string{"Relu": kernels.UnaryRelu, "Sigmoid": kernels.UnarySigmoid, "Tanh": kernels.UnaryTanh,
		"Exp": kernels.UnaryExp, "Log": kernels.UnaryLog, "Sqrt": kernels.UnarySqrt, "Abs": kernels.UnaryAbs,
		"Neg": kernels.UnaryNeg, "Floor": kernels.UnaryFloor, "Ceil": kernels.UnaryCeil, "Sin": kernels.UnarySin,
		"Cos": kernels.UnaryCos, "LeakyRelu": kernels.UnaryLeakyRelu, "Reciprocal": kernels.UnaryReciprocal}
	for op, code := range unary {
		ops.RegisterKernelOp(op, unaryPlanner(code), hostFallback(op))
	}
	ops.RegisterKernelOp("MatMul", firstPlanner(planMatMul, PlanBatchedMatMul), hostFallback("MatMul"))
	ops.RegisterKernelOp("Gemm", planGemm, hostFallback("Gemm"))
	ops.RegisterKernelOp("Conv", convPlanner(false), hostFallback("Conv"))
	ops.RegisterKernelOp(graph.LoomDomain+":FusedConv", convPlanner(true), nn.FusedConvHost)
	ops.RegisterKernelOp(graph.LoomDomain+":MatMulAdd", planMatMulAdd, matMulAddHost)
	registerGPUGemmPlanners()
	for op, isMax := range map[string]bool{"MaxPool": true, "AveragePool": false} {
		ops.RegisterKernelOp(op, poolPlanner(isMax), hostFallback(op))
		ops.RegisterGPUKernelPlanner(op, gpuPoolPlanner(isMax))
	}
	for op, log := range map[string]string{"Softmax": "false", "LogSoftmax": "true"} {
		ops.RegisterKernelOp(op, softmaxPlanner(log), hostFallback(op))
		ops.RegisterGPUKernelPlanner(op, softmaxRows.planner(softmaxPlanner(log)))
	}
}

// firstPlanner tries planners in order: the first plan wins; the last reason is kept.
func firstPlanner(planners ...ops.KernelPlanner) ops.KernelPlanner {
	return func(n *graph.Node, opset int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
		var reason string
		for _, planner := range planners {
			p, why, err := planner(n, opset, in)
			if err != nil || p != nil {
				return p, why, err
			}
			reason = why
		}
		return nil, reason, nil
	}
}

// hostFallback runs op's host function, looked up when the op runs (host functions register
// in init functions of other files).
func hostFallback(op string) ops.OpFunc {
	return func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		f, ok := ops.HostOps[op]
		if !ok {
			return nil, ops.OpErr("no Loom kernel covers these inputs and %s has no host function", op)
		}
		return f(rc, n, in)
	}
}

const reasonFloat32 = "Loom kernel: float32 operands"

const elementwiseFile = "elementwise.loom"

func allFloat32(in []ops.ValueInfo, idx ...int) bool {
	for _, i := range idx {
		if i >= len(in) || !in[i].Present || in[i].Dtype != graph.Float {
			return false
		}
	}
	return true
}

func declineType(in []ops.ValueInfo) string {
	for _, v := range in {
		if v.Present && v.Dtype != graph.Float {
			return "host: the Loom kernels cover float32 only, got " + v.Dtype.String()
		}
	}
	return "host: the Loom kernels do not cover these inputs"
}

// binaryPlanner: elementwise.loom's kernels for float32 operands: binary_flat when neither
// operand needs a strided view, binary (broadcast by strides, six axes after merging) otherwise.
func binaryPlanner(code string) ops.KernelPlanner {
	return func(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
		if len(in) < 2 || !allFloat32(in, 0, 1) {
			return nil, declineType(in), nil
		}
		a, b := in[0], in[1]
		shape, err := ops.BroadcastShapes(a.Shape, b.Shape)
		if err != nil {
			return nil, "", err
		}
		p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: shape}}, Reason: reasonFloat32 + ", broadcast by strides"}
		total := ops.Numel(shape)
		if total == 0 {
			return p, "", nil
		}
		// Contiguous operands (or a single element against the rest) take the flat kernel.
		na, nb := ops.Numel(a.Shape), ops.Numel(b.Shape)
		if (na == total || na == 1) && (nb == total || nb == 1) {
			xs, ys := "0", "0"
			if na == 1 && total > 1 {
				xs = "1"
			}
			if nb == 1 && total > 1 {
				ys = "1"
			}
			p.Reason = reasonFloat32 + ", contiguous (a single element broadcast)"
			p.Calls = []ops.KernelCall{{File: elementwiseFile, Symbol: "binary_flat", Config: map[string]string{"OP": code, "XS": xs, "YS": ys},
				Args: []uint64{U(total)}, Workload: []uint64{U(total)},
				Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.ReadOf(ops.InputOperand(1)), ops.WriteOf(ops.OutputOperand(0))}}}
			return p, "", nil
		}
		call, ok := binaryCall(code, shape, a.Shape, b.Shape, false, false, 1, ops.InputOperand(0), ops.InputOperand(1))
		if !ok {
			return nil, "host: the binary kernel covers 6 axes after merging", nil
		}
		p.Calls = []ops.KernelCall{call}
		return p, "", nil
	}
}

// binaryCall is one launch of elementwise.loom's binary kernel: y = OP(a or y, b) over out,
// with the operands' broadcast strides (ACC: the first operand is y; SCALE: times scale);
// ok is false when more than six axes remain after merging.
func binaryCall(code string, out []int64, a, b []int64, acc, scaled bool, scale float32, opA, opB ops.Operand) (ops.KernelCall, bool) {
	as, err := ops.BroadcastStrides(a, out)
	if err != nil {
		return ops.KernelCall{}, false
	}
	bs, err := ops.BroadcastStrides(b, out)
	if err != nil {
		return ops.KernelCall{}, false
	}
	dims, st, ok := broadcastAxes(out, as, bs)
	if !ok {
		return ops.KernelCall{}, false
	}
	t := pickTile(dims[4], dims[5])
	args := blockSplitArgs(append(rank6Args(dims, st), f32bits(scale)), dims, t.bx, t.by)
	cfg := t.config(map[string]string{"OP": code, "ACC": strconv.FormatBool(acc), "SCALE": strconv.FormatBool(scaled)})
	aName := "AS5" // an ACC launch does not read a
	if acc {
		aName = ""
	}
	cfg = innerStrides(cfg, dims, st, aName, "BS5")
	// y is read_write in every launch (only ACC launches read it).
	return ops.KernelCall{File: elementwiseFile, Symbol: "binary", Config: cfg, Args: args, Workload: args[:movementRank],
		Bind: []ops.KernelBinding{ops.ReadOf(opA), ops.ReadOf(opB), ops.ReadWriteOf(ops.OutputOperand(0))}}, true
}

// unaryPlanner: the unary kernel over every element of a float32 tensor.
func unaryPlanner(code string) ops.KernelPlanner {
	return func(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
		if len(in) < 1 || !allFloat32(in, 0) {
			return nil, declineType(in), nil
		}
		x := in[0]
		p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: append([]int64{}, x.Shape...)}}, Reason: reasonFloat32}
		count := ops.Numel(x.Shape)
		if count == 0 {
			return p, "", nil
		}
		alpha := n.AttrFloat("alpha", 0.01)
		p.Calls = []ops.KernelCall{{File: elementwiseFile, Symbol: "unary", Config: map[string]string{"OP": code},
			Args: []uint64{uint64(math.Float32bits(alpha)), U(count)}, Workload: []uint64{U(count)},
			Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.WriteOf(ops.OutputOperand(0))}}}
		return p, "", nil
	}
}

// planMatMul: gemm_fast.loom's register-tiled kernels for float32 MatMul with numpy semantics
// (1-D operands, broadcast batch axes folded into two; a B without batch axes folds A's into
// rows).
func planMatMul(nd *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	return planMatMulOn(nd, in, false)
}

// planMatMulOn is planMatMul, with gemm_tiled for the product when gpu.
func planMatMulOn(nd *graph.Node, in []ops.ValueInfo, gpu bool) (*ops.KernelPlan, string, error) {
	if len(in) < 2 || !allFloat32(in, 0, 1) {
		return nil, declineType(in), nil
	}
	g, out, reason, err := matMulSpec(in[0].Shape, in[1].Shape)
	if err != nil || reason != "" {
		return nil, reason, err
	}
	g.gpu, g.bStatic, g.bDerived = gpu, in[1].Static, in[1].Derived
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: out}}, Reason: reasonFloat32 + ", register-tiled matrix product"}
	if ops.Numel(out) > 0 {
		g.emit(p, ops.OutputOperand(0))
	}
	return p, "", nil
}

// planMatMulAdd is Loom's fused MatMul + Add: the MatMul of planMatMul with B a matrix (A's
// batch axes folded into rows) and C, of rank <= 2, broadcast to the folded [M, N].
func planMatMulAdd(nd *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	return planMatMulAddOn(nd, in, false)
}

// planMatMulAddOn is planMatMulAdd, with gemm_tiled for the product when gpu.
func planMatMulAddOn(nd *graph.Node, in []ops.ValueInfo, gpu bool) (*ops.KernelPlan, string, error) {
	if len(in) != 3 || !allFloat32(in, 0, 1, 2) {
		return nil, declineType(in), nil
	}
	if len(in[0].Shape) < 2 || len(in[1].Shape) != 2 || len(in[2].Shape) > 2 {
		return nil, "host: the gemm kernels cover A [..., M, K] x B [K, N] + C of rank <= 2", nil
	}
	g, out, reason, err := matMulSpec(in[0].Shape, in[1].Shape)
	if err != nil || reason != "" {
		return nil, reason, err
	}
	full, err := ops.BroadcastShapes(out, in[2].Shape)
	if err != nil {
		return nil, "", err
	}
	if !slices.Equal(full, out) {
		return nil, "host: the bias broadcasts beyond the product", nil
	}
	st, err := ops.BroadcastStrides(in[2].Shape, []int64{int64(g.m), int64(g.n)})
	if err != nil {
		return nil, "host: the bias does not broadcast to [M, N] once A's axes are folded", nil
	}
	g.hasC, g.c, g.beta, g.cs = true, ops.InputOperand(2), 1, [4]int{0, 0, st[0], st[1]}
	g.gpu, g.bStatic, g.bDerived = gpu, in[1].Static, in[1].Derived
	act, err := MatMulAddActivation(nd)
	if err != nil {
		return nil, "", err
	}
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: out}}, Reason: reasonFloat32 + ", register-tiled matrix product, B a matrix, bias of rank <= 2"}
	if ops.Numel(out) == 0 {
		return p, "", nil
	}
	if act == "" || !gpu {
		g.act = cmp.Or(act, g.act)
		g.emit(p, ops.OutputOperand(0))
		return p, "", nil
	}
	// gemm_tiled has no GELU epilogue: the product goes to scratch, then the activation
	// kernel writes y.
	s := len(p.Scratch)
	p.Scratch = append(p.Scratch, int64(4*ops.Numel(out)))
	g.emit(p, ops.ScratchOperand(s))
	code := kernels.ActivationGeluErf
	if act == kernels.EpilogueGeluTanh {
		code = kernels.ActivationGeluTanh
	}
	c := activationCall(code, 0, 0, int(ops.Numel(out)))
	c.Bind[0] = ops.ReadOf(ops.ScratchOperand(s))
	p.Calls = append(p.Calls, c)
	return p, "", nil
}

// MatMulAddActivation is the gemm epilogue (ACT) of Loom's MatMulAdd node nd: "" for none,
// EpilogueGeluErf or EpilogueGeluTanh for activation "Gelu" (approximate "none" or "tanh",
// as ONNX's Gelu).
func MatMulAddActivation(nd *graph.Node) (string, error) {
	switch a := nd.AttrString("activation", ""); a {
	case "":
		return "", nil
	case "Gelu":
		switch ap := nd.AttrString("approximate", "none"); ap {
		case "none":
			return kernels.EpilogueGeluErf, nil
		case "tanh":
			return kernels.EpilogueGeluTanh, nil
		default:
			return "", ops.OpErr("MatMulAdd: unknown approximate=%q (want none or tanh)", ap)
		}
	default:
		return "", ops.OpErr("MatMulAdd: unknown activation %q (want Gelu, or none)", a)
	}
}

func matMulAddHost(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	if len(in) != 3 || !in[2].IsValid() {
		return nil, ops.OpErr("MatMulAdd needs inputs A, B and C, got %d", len(in))
	}
	act, err := MatMulAddActivation(n)
	if err != nil {
		return nil, err
	}
	p, err := rc.KernelOp("MatMul", n, in[:2])
	if err != nil {
		return nil, err
	}
	y, err := rc.KernelOp("Add", n, []tensor.Tensor{p[0], in[2]})
	if err != nil || act == "" {
		return y, err
	}
	// The node's approximate attribute is Gelu's.
	return rc.KernelOp("Gelu", n, y)
}

// planGemm: Gemm on float32 matrices with gemm_fast.loom's kernels; transposes are strides,
// C (rank <= 2) broadcasts by strides.
func planGemm(nd *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	return planGemmOn(nd, in, false)
}

// planGemmOn is planGemm, with gemm_tiled for the product when gpu.
func planGemmOn(nd *graph.Node, in []ops.ValueInfo, gpu bool) (*ops.KernelPlan, string, error) {
	if len(in) < 2 || !allFloat32(in, 0, 1) || (len(in) > 2 && in[2].Present && in[2].Dtype != graph.Float) {
		return nil, declineType(in), nil
	}
	a, b := in[0], in[1]
	hasC := len(in) > 2 && in[2].Present
	if len(a.Shape) != 2 || len(b.Shape) != 2 || (hasC && len(in[2].Shape) > 2) {
		return nil, "host: the gemm kernels cover matrices and C of rank <= 2", nil
	}
	ta, tb := nd.AttrInt("transA", 0) != 0, nd.AttrInt("transB", 0) != 0
	m, k, as := int(a.Shape[0]), int(a.Shape[1]), [2]int{int(a.Shape[1]), 1}
	if ta {
		m, k, as = k, m, [2]int{1, int(a.Shape[1])}
	}
	kb, n, bs := int(b.Shape[0]), int(b.Shape[1]), [2]int{int(b.Shape[1]), 1}
	if tb {
		kb, n, bs = n, kb, [2]int{1, int(b.Shape[1])}
	}
	if kb != k {
		return nil, "", ops.OpErr("inner dimensions differ: A gives %d, B gives %d", k, kb)
	}
	g := gemmSpec{m: m, n: n, k: k, nb0: 1, nb1: 1, a: ops.InputOperand(0), b: ops.InputOperand(1),
		as: [4]int{0, 0, as[0], as[1]}, bs: [4]int{0, 0, bs[0], bs[1]}, alpha: nd.AttrFloat("alpha", 1), act: "0", gpu: gpu,
		bStatic: in[1].Static, bDerived: in[1].Derived}
	if hasC {
		st, err := ops.BroadcastStrides(in[2].Shape, []int64{int64(m), int64(n)})
		if err != nil {
			return nil, "", err
		}
		g.hasC, g.c, g.beta, g.cs = true, ops.InputOperand(2), nd.AttrFloat("beta", 1), [4]int{0, 0, st[0], st[1]}
	}
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: []int64{int64(m), int64(n)}}}, Reason: reasonFloat32 + ", register-tiled matrix product"}
	if m*n > 0 {
		g.emit(p, ops.OutputOperand(0))
	}
	return p, "", nil
}

// convActivations maps FusedConv's activation attribute to the conv2d kernel's ACT code.
var convActivations = map[string]string{"": kernels.EpilogueNone, "Relu": kernels.EpilogueRelu,
	"Sigmoid": kernels.EpilogueSigmoid, "Tanh": kernels.EpilogueTanh, "LeakyRelu": kernels.EpilogueLeakyRelu,
	"HardSigmoid": kernels.EpilogueHardSigmoid, "Clip": kernels.EpilogueClip, "HardSwish": kernels.EpilogueHardSwish,
	"Swish": kernels.EpilogueSwish}

// convPlanner: gemm_fast.loom's and conv_fast.loom's kernels for 1-D and 2-D float32
// convolutions (see convPlan); fused adds the activation of Loom's FusedConv.
func convPlanner(fused bool) ops.KernelPlanner {
	return func(nd *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
		return convPlan(nd, in, fused, false)
	}
}

// poolPlanner: the pool kernels for 2-D max and average pooling without indices.
func poolPlanner(isMax bool) ops.KernelPlanner {
	return func(nd *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
		return poolPlan(nd, in, isMax, poolExact)
	}
}

// gpuPoolPlanner: pooling for the GPU planners, a thread an output (pool2d_window, pool2d).
func gpuPoolPlanner(isMax bool) ops.KernelPlanner {
	return func(nd *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
		return poolPlan(nd, in, isMax, poolGPU)
	}
}

// poolKind is what poolPlan plans for: the host with kernels compiled for the shapes
// (poolExact), the host with the shipped shape-generic ones (poolGeneric), or a GPU.
type poolKind int

const (
	poolExact poolKind = iota
	poolGeneric
	poolGPU
)

// poolPadStrides are the column strides pool2d_pad ships for (kernels/aot/manifest.txt, with
// no dilation); the generic plans of other strides or with dilation take pool2d.
var poolPadStrides = map[int]bool{1: true, 2: true}

// poolPlan plans 2-D pooling: pool2d_window or pool2d_rows (shape-specialized) for windows
// inside the image, and pool2d_pad for the others (padding, dilation, ceil_mode's overhang)
// on the host; pool2d_pad for every window with the shipped generic kernels; on a GPU
// pool2d_window for windows inside the image, else pool2d.
func poolPlan(nd *graph.Node, in []ops.ValueInfo, isMax bool, kind poolKind) (*ops.KernelPlan, string, error) {
	if len(in) < 1 || !allFloat32(in, 0) {
		return nil, declineType(in), nil
	}
	x := in[0]
	if len(x.Shape) != 4 || len(nd.Outputs) != 1 || nd.AttrInt("storage_order", 0) != 0 {
		return nil, "host: the pool2d kernel covers 2-D pooling without indices", nil
	}
	pr, err := ops.PoolParamsOf(nd, x.Shape)
	if err != nil {
		return nil, "host: " + err.Error(), nil
	}
	nc, h, wd := int(x.Shape[0]*x.Shape[1]), int(x.Shape[2]), int(x.Shape[3])
	oh, ow := pr.Out[0], pr.Out[1]
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: []int64{x.Shape[0], x.Shape[1], int64(oh), int64(ow)}}},
		Reason: reasonFloat32 + ", 2-D"}
	if nc*oh*ow == 0 {
		return p, "", nil
	}
	countPad := nd.AttrInt("count_include_pad", 0) != 0
	if w, ok := poolWindowCall(isMax, pr, nc, oh, ow, h, wd, kind == poolGPU); ok && kind != poolGeneric {
		p.Calls = []ops.KernelCall{w}
		p.Reason += ", windows inside the image"
		return p, "", nil
	}
	dilated := pr.Dilations[0] != 1 || pr.Dilations[1] != 1
	if kind == poolExact || (kind == poolGeneric && poolPadStrides[pr.Strides[1]] && !dilated) {
		p.Calls = []ops.KernelCall{poolPadCall(isMax, countPad, kind == poolGeneric, pr, nc, oh, ow, h, wd)}
		p.Reason += ", vectors over the outputs whose windows lie inside the image"
		return p, "", nil
	}
	cfg := map[string]string{"MAX": strconv.FormatBool(isMax), "COUNT_PAD": strconv.FormatBool(countPad)}
	args := []uint64{U(nc), U(oh), U(ow), U(h), U(wd), U(pr.Kernel[0]), U(pr.Kernel[1]), U(pr.Strides[0]), U(pr.Strides[1]),
		U(pr.PadBegin[0]), U(pr.PadBegin[1]), U(pr.Dilations[0]), U(pr.Dilations[1]),
		U(pr.PadBegin[0] + h + pr.PadEnd[0]), U(pr.PadBegin[1] + wd + pr.PadEnd[1])}
	p.Calls = []ops.KernelCall{{File: "linalg.loom", Symbol: "pool2d", Config: cfg, Args: args, Workload: args[:3],
		Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.WriteOf(ops.OutputOperand(0))}}}
	return p, "", nil
}

// poolRowsBlockInputs sizes pool2d_rows' blocks in window cells read (a few microseconds of
// work, against a block's fixed cost of its checks and views).
const poolRowsBlockInputs = 8192

// poolWindowCall is the pool2d_window (or, for narrow rows, pool2d_rows) launch for pooling
// whose windows all lie inside the image (no padding, dilation 1, small windows), or false.
func poolWindowCall(isMax bool, pr ops.ConvParams, nc, oh, ow, h, wd int, gpu bool) (ops.KernelCall, bool) {
	kh, kw, sh, sw := pr.Kernel[0], pr.Kernel[1], pr.Strides[0], pr.Strides[1]
	if pr.PadBegin[0] != 0 || pr.PadBegin[1] != 0 || pr.Dilations[0] != 1 || pr.Dilations[1] != 1 ||
		kh > 8 || kw > 8 || (oh-1)*sh+kh > h || (ow-1)*sw+kw > wd {
		return ops.KernelCall{}, false
	}
	args := []uint64{U(nc), U(oh), U(ow), U(h), U(wd)}
	if ow < 32 && !gpu {
		// Narrow rows as pool2d_rows' vectors along each row; blocks of channels reading
		// about poolRowsBlockInputs window cells each, balanced (MNIST's pools: one block).
		vl := vectorWidth(ow)
		ch := min(max(poolRowsBlockInputs/(oh*ow*kh*kw), 1), nc)
		ch = ceilDiv(nc, ceilDiv(nc, ch))
		cfg := map[string]string{"MAX": strconv.FormatBool(isMax), "KH": strconv.Itoa(kh), "KW": strconv.Itoa(kw),
			"SH": strconv.Itoa(sh), "SW": strconv.Itoa(sw), "VL": strconv.Itoa(vl), "CH": strconv.Itoa(ch)}
		return ops.KernelCall{File: "linalg.loom", Symbol: "pool2d_rows", Config: cfg, Args: args, Workload: args[:3],
			Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.WriteOf(ops.OutputOperand(0))}}, true
	}
	// Blocks of about 512 outputs: a block's fixed cost (its checks and views) is then small
	// next to its work, and small images take one block per channel.
	block := 64
	for block > 8 && block/2 >= ow {
		block /= 2
	}
	rows := max(1, min(oh, 512/block))
	cfg := map[string]string{"MAX": strconv.FormatBool(isMax), "KH": strconv.Itoa(kh), "KW": strconv.Itoa(kw),
		"SH": strconv.Itoa(sh), "SW": strconv.Itoa(sw), "BLOCK": strconv.Itoa(block), "ROWS": strconv.Itoa(rows)}
	return ops.KernelCall{File: "linalg.loom", Symbol: "pool2d_window", Config: cfg, Args: args, Workload: args[:3],
		Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.WriteOf(ops.OutputOperand(0))}}, true
}

// poolPadCall is pool2d_pad's launch for pooling with pr over x [nc, h, wd] into [nc, oh, ow],
// its window compiled in unless generic (then a run-time value, as are the padding and the
// strides but the column stride), blocks of channels reading about poolRowsBlockInputs window
// cells each.
func poolPadCall(isMax, countPad, generic bool, pr ops.ConvParams, nc, oh, ow, h, wd int) ops.KernelCall {
	ox0, ox1 := poolInterior(ow, wd, pr.Kernel[1], pr.Strides[1], pr.PadBegin[1], pr.Dilations[1])
	vl := 8
	if ox1-ox0 >= 16 {
		vl = 16
	}
	chb := min(max(poolRowsBlockInputs/max(oh*ow*pr.Kernel[0]*pr.Kernel[1], 1), 1), nc)
	chb = ceilDiv(nc, ceilDiv(nc, chb))
	args := []uint64{U(nc), U(oh), U(ow), U(chb), U(h), U(wd), U(pr.Kernel[0]), U(pr.Kernel[1]), U(pr.Strides[0]),
		U(pr.PadBegin[0]), U(pr.PadBegin[1]), U(pr.Dilations[0]), U(pr.Dilations[1]),
		U(pr.PadBegin[0] + h + pr.PadEnd[0]), U(pr.PadBegin[1] + wd + pr.PadEnd[1])}
	cfg := map[string]string{"MAX": strconv.FormatBool(isMax), "COUNT_PAD": strconv.FormatBool(countPad && !isMax),
		"SW": strconv.Itoa(pr.Strides[1]), "VL": strconv.Itoa(vl), "KH": "0", "KW": "0",
		"DILATED": strconv.FormatBool(pr.Dilations[0] != 1 || pr.Dilations[1] != 1)}
	if !generic {
		cfg["KH"], cfg["KW"] = strconv.Itoa(pr.Kernel[0]), strconv.Itoa(pr.Kernel[1])
	}
	return ops.KernelCall{File: "linalg.loom", Symbol: "pool2d_pad", Config: cfg, Args: args, Workload: args[:4],
		Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.WriteOf(ops.OutputOperand(0))}}
}

// poolInterior is the range [o0, o1) of the n outputs along an axis of extent size whose k taps
// (stride s, padding p before, dilation d) all lie inside the axis (pool2d_pad computes the
// same).
func poolInterior(n, size, k, s, p, d int) (o0, o1 int) {
	o0 = min(ceilDiv(p, s), n)
	if last := size - 1 + p - (k-1)*d; last >= 0 {
		o1 = min(last/s+1, n)
	}
	return o0, max(o1, o0)
}

// softmaxPlanner: the softmax kernel over a trailing block of axes (the last axis from
// opset 13 on; from axis on, flattened, before it).
func softmaxPlanner(log string) ops.KernelPlanner {
	return func(nd *graph.Node, opset int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
		if len(in) < 1 || !allFloat32(in, 0) {
			return nil, declineType(in), nil
		}
		x := in[0]
		r := len(x.Shape)
		axis := int(nd.AttrInt("axis", ops.SoftmaxDefaultAxis(opset)))
		if axis < 0 {
			axis += r
		}
		if ops.Numel(x.Shape) == 0 || axis < 0 || axis >= max(r, 1) || (opset >= 13 && axis != r-1) {
			return nil, "host: the softmax kernel covers a non-empty tensor over its last axis", nil
		}
		rows, cols := 1, 1
		for i, d := range x.Shape {
			if i < axis {
				rows *= int(d)
			} else {
				cols *= int(d)
			}
		}
		args := []uint64{U(rows), U(cols)}
		// One thread a row: blocks of fewer rows when rows are few and long, so that the
		// rows spread over the threads (PP-OCRv4's 40 rows of 6625 were one block).
		block := 64
		for block > 1 && ceilDiv(rows, block) < 8 && min(block, rows)*cols > 1<<14 {
			block /= 2
		}
		return &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: append([]int64{}, x.Shape...)}}, Reason: reasonFloat32,
			Calls: []ops.KernelCall{{File: "linalg.loom", Symbol: "softmax", Config: map[string]string{"LOG": log, "BLOCK": strconv.Itoa(block)}, Args: args, Workload: args,
				Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.ReadWriteOf(ops.OutputOperand(0))}}}}, "", nil
	}
}

func U(v int) uint64 { return uint64(v) }
