package ops

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// An op that runs as Loom kernels describes its work as a kernelPlan: the launches, over the
// op's operands (its inputs, its outputs and private scratch memory), that compute the outputs
// for inputs of given types and shapes. The description is independent of where the operands
// live, so the same plan runs in two ways:
//
//   - the interpreter (runKernelPlan) uploads the inputs, allocates the outputs and scratch,
//     issues the launches once and reads the outputs back;
//   - a compiled run plan (plan.go) places every operand in the plan's arena once, records the
//     launches of consecutive kernel steps into one device graph and replays it per run.
//
// A planner looks at types, shapes and, for inputs the plan builder knows before the run
// (initializers, constants, values folded from them), their values; it never sees dynamic
// data. When the kernels do not cover the case it returns a nil plan and a reason, and the op
// runs as its Go host function.

// operandKind says which of an op's values a binding names.
type operandKind uint8

const (
	OperandInput operandKind = iota
	OperandOutput
	OperandScratch
	// operandConst is a tensor the planner derived from inputs known before the run (a weight
	// in the layout a kernel reads best): bound like an initializer, uploaded once a plan.
	OperandConst
)

// operand names one value of an op: its i-th input, output or scratch area.
type Operand struct {
	Kind  operandKind
	Index int
}

func InputOperand(i int) Operand   { return Operand{OperandInput, i} }
func OutputOperand(i int) Operand  { return Operand{OperandOutput, i} }
func ScratchOperand(i int) Operand { return Operand{OperandScratch, i} }
func ConstOperand(i int) Operand   { return Operand{OperandConst, i} }

func (o Operand) String() string {
	return fmt.Sprintf("%s %d", [...]string{"input", "output", "scratch", "constant"}[o.Kind], o.Index)
}

// kernelBinding binds one buffer parameter of a kernel to an operand.
type KernelBinding struct {
	Operand Operand
	Access  device.Access
}

func ReadOf(o Operand) KernelBinding      { return KernelBinding{o, device.AccessRead} }
func WriteOf(o Operand) KernelBinding     { return KernelBinding{o, device.AccessWrite} }
func ReadWriteOf(o Operand) KernelBinding { return KernelBinding{o, device.AccessReadWrite} }

// kernelCall is one launch: a kernel of the op library (file under kernels/, symbol,
// specialization), its scalar arguments and launch workload as bits (see Dispatch), and its
// buffer bindings in parameter order.
type KernelCall struct {
	File     string
	Symbol   string
	Config   map[string]string
	Args     []uint64
	Workload []uint64
	Bind     []KernelBinding
}

// describe names the kernel as traces and reports do: kernels/FILE:SYMBOL[K=V,...].
func Describe(c KernelCall) string {
	keys := make([]string, 0, len(c.Config))
	for k := range c.Config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "kernels/%s:%s", c.File, c.Symbol)
	if len(keys) > 0 {
		b.WriteByte('[')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s=%s", k, c.Config[k])
		}
		b.WriteByte(']')
	}
	return b.String()
}

// valueType is a tensor's element type and shape.
type ValueType struct {
	Dtype tensor.DType
	Shape []int64
}

func (v ValueType) elements() int64 { return int64(Numel(v.Shape)) }

func Bytes(v ValueType) int64 { return tensor.StorageBytes(v.Dtype, v.elements()) }

// kernelPlan is how an op runs as Loom kernels for one set of input types and shapes. Calls
// run in order; each output must be written completely by them (an output with no elements
// needs no call). Scratch areas are private to one execution of the op, uninitialized.
type KernelPlan struct {
	Outputs []ValueType
	Scratch []int64         // bytes
	Consts  []tensor.Tensor // the constant operands
	Calls   []KernelCall
	// reason says why these kernels serve the op (for traces and reports).
	Reason string
	// Views, when set (one per output), says that output i is input 0's elements from
	// Views[i] on, in order and of input 0's type: a contiguous range (a Slice of leading
	// indices, a Split's part, a copy that changes nothing). A compiled run plan may then view
	// that range instead of running Calls.
	Views []int64
}

// variant names the kernels of the plan, as "kernels/a.loom:x[...] + ...".
func Variant(p *KernelPlan) string {
	if len(p.Calls) == 0 {
		return "loom:(no launch: empty output)"
	}
	parts := make([]string, len(p.Calls))
	for i, c := range p.Calls {
		parts[i] = Describe(c)
	}
	return "loom:" + strings.Join(parts, " + ")
}

// valueInfo is what a planner knows of an input: its type and shape, and its value when the
// value is known before the run (static is then valid). An omitted optional input has
// present false.
type ValueInfo struct {
	ValueType
	Present bool
	Static  tensor.Tensor
	// Derived, when set, says Static is the same at every run the plan serves (a weight or
	// a folded constant, not a value the interpreter happens to know): a planner may then
	// change its layout once, keeping the result in Derived, which every plan of the
	// session shares (see DerivedConsts).
	Derived *DerivedConsts
}

// kernelPlanner plans an op as Loom kernels. It returns (nil, reason, nil) when its kernels
// do not cover the case, and an error when the inputs are invalid for the op.
type KernelPlanner func(n *graph.Node, opset int64, in []ValueInfo) (*KernelPlan, string, error)

// kernelPlanners holds the planners by op type: "Add" for ai.onnx, "ai.loom:FusedConv" for
// Loom's domain (see plannerKey).
var KernelPlanners = map[string]KernelPlanner{}

// KernelKey spells out a kernel request: the session's kernel cache key, which also orders an
// EP context blob's kernels. The configuration's keys are sorted so the same specialization
// always maps to the same entry.
func KernelKey(file, symbol string, config map[string]string) string {
	var buf [256]byte
	return string(AppendKernelKey(buf[:0], file, symbol, config))
}

// AppendKernelKey appends KernelKey(file, symbol, config) to b. A lookup with it spells the
// key in the caller's buffer (m[string(b)] allocates nothing): a new shape's plan looks up
// every call's kernel several times.
func AppendKernelKey(b []byte, file, symbol string, config map[string]string) []byte {
	// The pairs on the stack (a convolution's configuration has about 20), each value taken
	// with its key rather than looked up again.
	type pair struct{ k, v string }
	var small [32]pair
	kv := small[:0]
	for k, v := range config {
		kv = append(kv, pair{k, v})
	}
	// Insertion sort: a configuration has a handful of keys (sort.Strings allocated).
	for i := 1; i < len(kv); i++ {
		for j := i; j > 0 && kv[j].k < kv[j-1].k; j-- {
			kv[j], kv[j-1] = kv[j-1], kv[j]
		}
	}
	b = append(b, file...)
	b = append(b, 0)
	b = append(b, symbol...)
	for _, p := range kv {
		b = append(b, 0)
		b = append(b, p.k...)
		b = append(b, '=')
		b = append(b, p.v...)
	}
	return b
}

func PlannerKey(n *graph.Node) string {
	if n.Domain == graph.LoomDomain {
		return graph.LoomDomain + ":" + n.OpType
	}
	if n.Domain != "" && n.Domain != "ai.onnx" {
		return n.Domain + ":" + n.OpType
	}
	return n.OpType
}

// infosOf describes run-time tensors to a planner; none of them counts as static, so a
// planner that needs a static input declines and the host function runs.
func InfosOf(in []tensor.Tensor) []ValueInfo {
	out := make([]ValueInfo, len(in))
	for i, t := range in {
		if t.IsValid() {
			out[i] = ValueInfo{ValueType: ValueType{Dtype: t.DType(), Shape: t.Dims()}, Present: true}
		}
	}
	return out
}

// registerKernelOp registers planner for the op named by key (see plannerKey), with fallback
// (usually its host function) for when the planner declines. The op's ai.onnx host function
// stays registered too; the interpreter prefers the planner (kernelRuns). The planner's
// launches are re-tiled to the devices' limits (see fitted).
func RegisterKernelOp(key string, planner KernelPlanner, fallback OpFunc) {
	KernelPlanners[key] = fitted(planner)
	KernelFallbacks[key] = fallback
}

// PlanTarget is the kind of device a planner shapes its kernels for.
type PlanTarget int

const (
	// PlanHost is the host backend's shape: few threads a block, many accumulators and
	// vectors along rows in each.
	PlanHost PlanTarget = iota
	// PlanGPU is a GPU's (the cuda provider's, on a GPU or on the cuda stand-in): blocks of
	// at least a warp, adjacent threads on adjacent elements (coalesced), reductions across
	// a block's threads.
	PlanGPU
)

// GPUKernelPlanners holds, by planner key, the planners of GPU-shaped kernels (see
// RegisterGPUKernelPlanner and PlannerFor): each tries the GPU planner and, where it declines
// the inputs, the op's kernel planner.
var GPUKernelPlanners = map[string]KernelPlanner{}

// RegisterGPUKernelPlanner registers the GPU-shaped planner of an op that has a kernel
// planner already (RegisterKernelOp); its launches are re-tiled to the devices' limits too.
func RegisterGPUKernelPlanner(key string, planner KernelPlanner) {
	base, ok := KernelPlanners[key]
	if !ok {
		panic("ops: a GPU planner for " + key + ", which has no kernel planner")
	}
	gpu := fitted(planner)
	GPUKernelPlanners[key] = func(n *graph.Node, opset int64, in []ValueInfo) (*KernelPlan, string, error) {
		if p, reason, err := gpu(n, opset, in); err != nil || p != nil {
			return p, reason, err
		}
		return base(n, opset, in)
	}
}

// PlannerFor is the planner of the op named by key (see PlannerKey) for target: for PlanGPU
// the op's GPU planner where it has one, and where that declines the inputs, its kernel
// planner; otherwise its kernel planner. Every path that plans kernels (the run plans, the
// interpreter) asks here, so an op's kernels for a session depend on its provider alone.
func PlannerFor(target PlanTarget, key string) (KernelPlanner, bool) {
	if target == PlanGPU {
		if gpu, ok := GPUKernelPlanners[key]; ok {
			return gpu, true
		}
	}
	base, ok := KernelPlanners[key]
	return base, ok
}

// kernelFallbacks holds, by planner key, the function that runs an op when its planner
// declines (usually its host function; nil for none).
var KernelFallbacks = map[string]OpFunc{}

// infosOfStatic describes the interpreter's tensors with their values: in the interpreter
// every value is known when the op runs, so planners may read any of them (the run plan
// passes values only for inputs that are fixed across runs).
func InfosOfStatic(in []tensor.Tensor) []ValueInfo {
	out := InfosOf(in)
	for i, t := range in {
		if t.IsValid() {
			out[i].Static = t
		}
	}
	return out
}

// RawBytes views a numeric tensor's elements as bytes (not copied); strings have none.
func RawBytes(t tensor.Tensor) ([]byte, bool) { return tensor.RawBytes(t.Data()) }

// clone copies p deeply enough for rewrites: its slices and the calls' configurations.
func Clone(p *KernelPlan) *KernelPlan {
	g := *p
	g.Scratch = append([]int64(nil), p.Scratch...)
	g.Consts = append([]tensor.Tensor(nil), p.Consts...)
	g.Calls = make([]KernelCall, len(p.Calls))
	for i, c := range p.Calls {
		c.Config = maps.Clone(c.Config)
		c.Args = append([]uint64(nil), c.Args...)
		c.Workload = c.Args[:len(p.Calls[i].Workload)]
		if !sameBacking(p.Calls[i].Args, p.Calls[i].Workload) {
			c.Workload = append([]uint64(nil), p.Calls[i].Workload...)
		}
		c.Bind = append([]KernelBinding(nil), c.Bind...)
		g.Calls[i] = c
	}
	return &g
}

// sameBacking says whether w is a prefix of args (the planners' workload is args[:n]).
func sameBacking(args, w []uint64) bool {
	return len(w) <= len(args) && (len(w) == 0 || &args[0] == &w[0])
}

// agreesWith checks the planner's output types and shapes against the traced outputs.
func AgreesWith(p *KernelPlan, traced []tensor.Tensor) string {
	if len(p.Outputs) > len(traced) {
		return fmt.Sprintf("the kernel plan has %d outputs, the op produced %d", len(p.Outputs), len(traced))
	}
	for i, o := range p.Outputs {
		if tensor.Box(traced[i]) != nil || o.Dtype != traced[i].DType() || !slices.Equal(o.Shape, traced[i].Dims()) {
			return fmt.Sprintf("the kernel plan's output %d is %s%v, the op produced %s", i, o.Dtype, o.Shape, traced[i])
		}
	}
	return ""
}

// ViolationReason says what a launch's violation word reports (docs/loom.md, "Bounds and the
// violation word"), naming the operands of node n (nil: by position only) that call c binds:
// an access to a binding skipped because it fell outside the tensor, a view that does not fit
// its operand, an assumption about the operands that does not hold, a launch that does not
// match the kernel's geometry.
func ViolationReason(n *graph.Node, c KernelCall, bits uint32) string {
	operand := func(b int) string {
		if b >= len(c.Bind) {
			return fmt.Sprintf("binding %d", b)
		}
		o := c.Bind[b].Operand
		var names []string
		if n != nil {
			switch o.Kind {
			case OperandInput:
				names = n.Inputs
			case OperandOutput:
				names = n.Outputs
			}
		}
		if o.Index < len(names) && names[o.Index] != "" {
			return fmt.Sprintf("%s (%q)", o, names[o.Index])
		}
		return o.String()
	}
	return device.DescribeViolation(bits, operand)
}
