package session

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"unsafe"

	"github.com/loomrt/loom/go/graph"
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
	operandInput operandKind = iota
	operandOutput
	operandScratch
	// operandConst is a tensor the planner derived from inputs known before the run (a weight
	// in the layout a kernel reads best): bound like an initializer, uploaded once a plan.
	operandConst
)

// operand names one value of an op: its i-th input, output or scratch area.
type operand struct {
	kind  operandKind
	index int
}

func inputOperand(i int) operand   { return operand{operandInput, i} }
func outputOperand(i int) operand  { return operand{operandOutput, i} }
func scratchOperand(i int) operand { return operand{operandScratch, i} }
func constOperand(i int) operand   { return operand{operandConst, i} }

func (o operand) String() string {
	return fmt.Sprintf("%s %d", [...]string{"input", "output", "scratch", "constant"}[o.kind], o.index)
}

// kernelBinding binds one buffer parameter of a kernel to an operand.
type kernelBinding struct {
	operand operand
	access  Access
}

func readOf(o operand) kernelBinding      { return kernelBinding{o, AccessRead} }
func writeOf(o operand) kernelBinding     { return kernelBinding{o, AccessWrite} }
func readWriteOf(o operand) kernelBinding { return kernelBinding{o, AccessReadWrite} }

// kernelCall is one launch: a kernel of the op library (file under kernels/, symbol,
// specialization), its scalar arguments and launch workload as bits (see Dispatch), and its
// buffer bindings in parameter order.
type kernelCall struct {
	file     string
	symbol   string
	config   map[string]string
	args     []uint64
	workload []uint64
	bind     []kernelBinding
}

// describe names the kernel as traces and reports do: kernels/FILE:SYMBOL[K=V,...].
func (c kernelCall) describe() string {
	keys := make([]string, 0, len(c.config))
	for k := range c.config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "kernels/%s:%s", c.file, c.symbol)
	if len(keys) > 0 {
		b.WriteByte('[')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s=%s", k, c.config[k])
		}
		b.WriteByte(']')
	}
	return b.String()
}

// valueType is a tensor's element type and shape.
type valueType struct {
	dtype DType
	shape []int64
}

func (v valueType) elements() int64 { return int64(numel(v.shape)) }

func (v valueType) bytes() int64 { return v.dtype.ByteSize(v.elements()) }

// kernelPlan is how an op runs as Loom kernels for one set of input types and shapes. Calls
// run in order; each output must be written completely by them (an output with no elements
// needs no call). Scratch areas are private to one execution of the op, uninitialized.
type kernelPlan struct {
	outputs []valueType
	scratch []int64  // bytes
	consts  []Tensor // the constant operands
	calls   []kernelCall
	// reason says why these kernels serve the op (for traces and reports).
	reason string
}

// variant names the kernels of the plan, as "kernels/a.loom:x[...] + ...".
func (p *kernelPlan) variant() string {
	if len(p.calls) == 0 {
		return "loom:(no launch: empty output)"
	}
	parts := make([]string, len(p.calls))
	for i, c := range p.calls {
		parts[i] = c.describe()
	}
	return "loom:" + strings.Join(parts, " + ")
}

// valueInfo is what a planner knows of an input: its type and shape, and its value when the
// value is known before the run (static is then valid). An omitted optional input has
// present false.
type valueInfo struct {
	valueType
	present bool
	static  Tensor
}

// kernelPlanner plans an op as Loom kernels. It returns (nil, reason, nil) when its kernels
// do not cover the case, and an error when the inputs are invalid for the op.
type kernelPlanner func(n *graph.Node, opset int64, in []valueInfo) (*kernelPlan, string, error)

// kernelPlanners holds the planners by op type: "Add" for ai.onnx, "ai.loom:FusedConv" for
// Loom's domain (see plannerKey).
var kernelPlanners = map[string]kernelPlanner{}

func plannerKey(n *graph.Node) string {
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
func infosOf(in []Tensor) []valueInfo {
	out := make([]valueInfo, len(in))
	for i, t := range in {
		if t.IsValid() {
			out[i] = valueInfo{valueType: valueType{t.dtype, t.shape}, present: true}
		}
	}
	return out
}

// registerKernelOp makes op run through planner in the interpreter, falling back to fallback
// (usually its host function) when the planner declines. The op's ai.onnx host function stays
// registered too; kernelOps takes precedence in lookupOp. The planner's launches are re-tiled
// to the devices' limits (see fitted).
func registerKernelOp(key string, planner kernelPlanner, fallback opFunc) {
	planner = fitted(planner)
	kernelPlanners[key] = planner
	f := func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		infos := infosOfStatic(in)
		p, _, err := planner(n, rc.opset, infos)
		if err != nil {
			return nil, err
		}
		if p == nil {
			if fallback == nil {
				return nil, opErr("no Loom kernel covers these inputs and %s has no host function", n.OpType)
			}
			return fallback(rc, n, in)
		}
		p, why := rc.s.kernels.servablePlanAs(rc.s.ctx, key, n, rc.opset, infos, p)
		if why != "" && fallback != nil {
			outs, err := fallback(rc, n, in)
			rc.kernelVariant, rc.kernelReason = variantHost, why
			return outs, err
		}
		return rc.runKernelPlan(p, in)
	}
	if strings.HasPrefix(key, graph.LoomDomain+":") {
		loomOps[strings.TrimPrefix(key, graph.LoomDomain+":")] = f
	} else {
		kernelOps[key] = f
	}
}

// infosOfStatic describes the interpreter's tensors with their values: in the interpreter
// every value is known when the op runs, so planners may read any of them (the run plan
// passes values only for inputs that are fixed across runs).
func infosOfStatic(in []Tensor) []valueInfo {
	out := infosOf(in)
	for i, t := range in {
		if t.IsValid() {
			out[i].static = t
		}
	}
	return out
}

// runKernelPlan runs p once on the run's device: uploads the inputs the calls read, allocates
// outputs and scratch, issues the calls as one command list and reads the outputs back.
func (rc *runCtx) runKernelPlan(p *kernelPlan, in []Tensor) ([]Tensor, error) {
	outs := make([]Tensor, len(p.outputs))
	for i, o := range p.outputs {
		t, err := Zeros(o.dtype, o.shape)
		if err != nil {
			return nil, err
		}
		outs[i] = t
	}
	if len(p.calls) == 0 {
		return outs, nil
	}
	rc.noteKernelVariant(p)
	regions := map[operand]Region{}
	region := func(o operand) (Region, error) {
		if r, ok := regions[o]; ok {
			return r, nil
		}
		ms, err := rc.device()
		if err != nil {
			return Region{}, err
		}
		var r Region
		switch o.kind {
		case operandInput, operandConst:
			v := p.consts
			if o.kind == operandInput {
				v = in
			}
			if o.index >= len(v) || !v[o.index].IsValid() {
				return Region{}, opErr("kernel plan binds %s, which is absent", o)
			}
			raw, ok := rawBytes(v[o.index])
			if !ok {
				return Region{}, opErr("kernel plan binds %s of type %s, which has no raw bytes", o, v[o.index].dtype)
			}
			if r, err = ms.Allocate(uint64(max(len(raw), 4))); err != nil {
				return Region{}, err
			}
			if len(raw) > 0 {
				if err := ms.Upload(r, raw); err != nil {
					return Region{}, err
				}
			}
		case operandOutput:
			if o.index >= len(outs) {
				return Region{}, opErr("kernel plan binds %s of %d", o, len(outs))
			}
			if r, err = ms.Allocate(uint64(max(p.outputs[o.index].bytes(), 4))); err != nil {
				return Region{}, err
			}
		case operandScratch:
			if o.index >= len(p.scratch) {
				return Region{}, opErr("kernel plan binds %s of %d", o, len(p.scratch))
			}
			if r, err = ms.Allocate(uint64(max(p.scratch[o.index], 4))); err != nil {
				return Region{}, err
			}
		}
		regions[o] = r
		return r, nil
	}
	ms, err := rc.device()
	if err != nil {
		return nil, err
	}
	// One violation word per launch: a kernel that stops a block at a bounds check fails the
	// op instead of leaving part of its output unwritten.
	viol, err := ms.AllocateShared(uint64(4 * len(p.calls)))
	if err != nil {
		return nil, err
	}
	words := make([]byte, 4*len(p.calls))
	if err := ms.Upload(viol, words); err != nil {
		return nil, err
	}
	cmds := make([]Command, 0, len(p.calls))
	for ci, c := range p.calls {
		_, kid, err := rc.compile(c.file, c.symbol, c.config)
		if err != nil {
			return nil, err
		}
		word, err := viol.Slice(uint64(4*ci), 4)
		if err != nil {
			return nil, err
		}
		d := Dispatch{Kernel: kid, Args: c.args, Workload: c.workload, Violation: word}
		for _, b := range c.bind {
			r, err := region(b.operand)
			if err != nil {
				return nil, err
			}
			d.Bindings = append(d.Bindings, Binding{Region: r, Access: b.access})
		}
		cmds = append(cmds, d)
	}
	if err := rc.run(cmds); err != nil {
		return nil, err
	}
	var reads []ReadRequest
	for i := range outs {
		r, ok := regions[outputOperand(i)]
		if !ok {
			if outs[i].Len() > 0 {
				return nil, opErr("kernel plan never writes output %d", i)
			}
			continue
		}
		raw, _ := rawBytes(outs[i])
		if len(raw) > 0 {
			part, err := r.Slice(0, uint64(len(raw)))
			if err != nil {
				return nil, err
			}
			reads = append(reads, ReadRequest{Region: part, Dst: raw})
		}
	}
	reads = append(reads, ReadRequest{Region: viol, Dst: words})
	if err := rc.ms.ReadMany(reads); err != nil {
		return nil, err
	}
	done := make([]Region, 0, len(regions)+1)
	for _, r := range regions {
		done = append(done, r)
	}
	if err := rc.ms.release(append(done, viol)); err != nil {
		return nil, err
	}
	for ci, c := range p.calls {
		if bits := binary.LittleEndian.Uint32(words[4*ci:]); bits != 0 {
			return nil, opErr("kernel %s failed a bounds check (violation bits 0x%x; an index out of range, or an assumption about the operands that does not hold)",
				kernelCall{file: c.file, symbol: c.symbol, config: c.config}.describe(), bits)
		}
	}
	return outs, nil
}

// noteKernelVariant lets the op's trace span name the kernels that ran (see tracing).
func (rc *runCtx) noteKernelVariant(p *kernelPlan) {
	rc.kernelVariant, rc.kernelReason = p.variant(), p.reason
}

// rawBytes views a numeric tensor's elements as bytes (not copied); strings have none.
func rawBytes(t Tensor) ([]byte, bool) {
	switch d := t.data.(type) {
	case []float32:
		return sliceBytes(d), true
	case []float64:
		return sliceBytes(d), true
	case []Float16:
		return sliceBytes(d), true
	case []BFloat16:
		return sliceBytes(d), true
	case []int8:
		return sliceBytes(d), true
	case []int16:
		return sliceBytes(d), true
	case []int32:
		return sliceBytes(d), true
	case []int64:
		return sliceBytes(d), true
	case []uint8:
		return d, true
	case []uint16:
		return sliceBytes(d), true
	case []uint32:
		return sliceBytes(d), true
	case []uint64:
		return sliceBytes(d), true
	case []bool:
		return sliceBytes(d), true
	}
	return nil, false
}

func sliceBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return []byte{}
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(zero)))
}
