package exec

import (
	"encoding/binary"
	"strconv"
	"unsafe"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/kernelops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// ServablePlan returns p when its kernels can run here; otherwise a plan of the same op with
// the shape-generic shipped kernels when those can, and else p with the reason the op runs
// as its host function (counted in CacheStats.NotShipped). Under the background JIT policy
// it also returns the shape-generic plan while p's kernels, which the JIT serves, are
// compiled in the background (see deferPlan and Substitutes).
func (c *KernelCache) ServablePlan(ctx *device.ModelContext, n *graph.Node, opset int64, in []ops.ValueInfo, p *ops.KernelPlan) (*ops.KernelPlan, string) {
	return c.servablePlanAs(ctx, ops.PlannerKey(n), n, opset, in, p, false)
}

// servablePlanAs is ServablePlan for a plan made by the planner registered under key, which
// need not be plannerKey(n): host functions run other ops' kernels on their own node (FusedConv
// runs Conv's with the FusedConv node, Attention MatMul's), and the re-plan must use the
// generic planner of the op that was planned. (Keyed by the node, FusedConv's convolution was
// re-planned with FusedConv's generic planner, which fuses the activation, and the host function
// then applied it a second time: wrong for all but the idempotent Relu and Clip.) warm says
// the run is a Warmup, which compiles what it needs on the run path whatever the policy.
func (c *KernelCache) servablePlanAs(ctx *device.ModelContext, key string, n *graph.Node, opset int64, in []ops.ValueInfo, p *ops.KernelPlan, warm bool) (*ops.KernelPlan, string) {
	why := c.unservable(ctx, p.Calls)
	if why == "" {
		return c.deferPlan(ctx, key, n, opset, in, p, warm), ""
	}
	if g := kernelops.GenericPlan(key, n, opset, in, p); g != nil && c.unservable(ctx, g.Calls) == "" {
		return g, ""
	}
	c.Mu.Lock()
	c.NotShipped++
	c.Mu.Unlock()
	return p, why
}

// RunKernelPlan runs p once on the run's device: uploads the inputs the calls read, allocates
// outputs and scratch, issues the calls as one command list and reads the outputs back.
func (rc *RunCtx) RunKernelPlan(p *ops.KernelPlan, in []tensor.Tensor) ([]tensor.Tensor, error) {
	return rc.RunKernelPlanFor(nil, p, in)
}

// RunKernelPlanFor is RunKernelPlan for node n, whose operands a failed bounds check names.
func (rc *RunCtx) RunKernelPlanFor(n *graph.Node, p *ops.KernelPlan, in []tensor.Tensor) ([]tensor.Tensor, error) {
	outs := make([]tensor.Tensor, len(p.Outputs))
	for i, o := range p.Outputs {
		t, err := tensor.Zeros(o.Dtype, o.Shape)
		if err != nil {
			return nil, err
		}
		outs[i] = t
	}
	if len(p.Calls) == 0 {
		return outs, nil
	}
	rc.noteKernelVariant(p)
	// On the host's own device the kernels read the inputs and write the outputs where the
	// run holds them (WrapHost): no upload, no read back, no second copy of either.
	written := map[ops.Operand]bool{}
	for _, c := range p.Calls {
		for _, b := range c.Bind {
			if b.Access != device.AccessRead {
				written[b.Operand] = true
			}
		}
	}
	wrapped := map[ops.Operand]bool{}
	regions := map[ops.Operand]device.Region{}
	region := func(o ops.Operand) (device.Region, error) {
		if r, ok := regions[o]; ok {
			return r, nil
		}
		ms, err := rc.device()
		if err != nil {
			return device.Region{}, err
		}
		if raw, ok := wrappable(ms, o, p, in, outs, written[o]); ok {
			r, err := device.WrapHost(ms, raw, o.Kind == ops.OperandOutput)
			if err != nil {
				return device.Region{}, err
			}
			regions[o], wrapped[o] = r, true
			return r, nil
		}
		var r device.Region
		switch o.Kind {
		case ops.OperandInput, ops.OperandConst:
			v := p.Consts
			if o.Kind == ops.OperandInput {
				v = in
			}
			if o.Index >= len(v) || !v[o.Index].IsValid() {
				return device.Region{}, ops.OpErr("kernel plan binds %s, which is absent", o)
			}
			raw, ok := ops.RawBytes(v[o.Index])
			if !ok {
				return device.Region{}, ops.OpErr("kernel plan binds %s of type %s, which has no raw bytes", o, v[o.Index].DType())
			}
			if r, err = ms.Allocate(uint64(max(len(raw), 4))); err != nil {
				return device.Region{}, err
			}
			if len(raw) > 0 {
				if err := ms.Upload(r, raw); err != nil {
					return device.Region{}, err
				}
			}
		case ops.OperandOutput:
			if o.Index >= len(outs) {
				return device.Region{}, ops.OpErr("kernel plan binds %s of %d", o, len(outs))
			}
			if r, err = ms.Allocate(uint64(max(ops.Bytes(p.Outputs[o.Index]), 4))); err != nil {
				return device.Region{}, err
			}
		case ops.OperandScratch:
			if o.Index >= len(p.Scratch) {
				return device.Region{}, ops.OpErr("kernel plan binds %s of %d", o, len(p.Scratch))
			}
			if r, err = ms.Allocate(uint64(max(p.Scratch[o.Index], 4))); err != nil {
				return device.Region{}, err
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
	viol, err := ms.AllocateShared(uint64(4 * len(p.Calls)))
	if err != nil {
		return nil, err
	}
	words := make([]byte, 4*len(p.Calls))
	if err := ms.Upload(viol, words); err != nil {
		return nil, err
	}
	cmds := make([]device.Command, 0, len(p.Calls))
	for ci, c := range p.Calls {
		_, kid, err := rc.Compile(c.File, c.Symbol, c.Config)
		if err != nil {
			return nil, err
		}
		word, err := viol.Slice(uint64(4*ci), 4)
		if err != nil {
			return nil, err
		}
		d := device.Dispatch{Kernel: kid, Args: c.Args, Workload: c.Workload, Violation: word}
		for _, b := range c.Bind {
			r, err := region(b.Operand)
			if err != nil {
				return nil, err
			}
			d.Bindings = append(d.Bindings, device.Binding{Region: r, Access: b.Access})
		}
		cmds = append(cmds, d)
	}
	if err := rc.run(cmds); err != nil {
		return nil, err
	}
	var reads []device.ReadRequest
	for i := range outs {
		r, ok := regions[ops.OutputOperand(i)]
		if wrapped[ops.OutputOperand(i)] {
			continue // written in place
		}
		if !ok {
			if outs[i].Len() > 0 {
				return nil, ops.OpErr("kernel plan never writes output %d", i)
			}
			continue
		}
		raw, _ := ops.RawBytes(outs[i])
		if len(raw) > 0 {
			part, err := r.Slice(0, uint64(len(raw)))
			if err != nil {
				return nil, err
			}
			reads = append(reads, device.ReadRequest{Region: part, Dst: raw})
		}
	}
	reads = append(reads, device.ReadRequest{Region: viol, Dst: words})
	if err := rc.ms.ReadMany(reads); err != nil {
		return nil, err
	}
	done := make([]device.Region, 0, len(regions)+1)
	for _, r := range regions {
		done = append(done, r)
	}
	if err := device.ReleaseRegions(rc.ms, append(done, viol)); err != nil {
		return nil, err
	}
	for ci, c := range p.Calls {
		if bits := binary.LittleEndian.Uint32(words[4*ci:]); bits != 0 {
			return nil, ops.OpErr("kernel %s failed a bounds check: %s", ops.Describe(c), ops.ViolationReason(n, c, bits))
		}
	}
	return outs, nil
}

// noteKernelVariant lets the op's trace span name the kernels that ran (see tracing).
func (rc *RunCtx) noteKernelVariant(p *ops.KernelPlan) {
	rc.KernelVariant, rc.KernelReason = ops.Variant(p), p.Reason
}

// kernelRun is how the interpreter runs an op with a kernel planner: through its kernels when
// the planner covers the inputs and they can be loaded here, else through fallback.
func kernelRun(key string, fallback ops.OpFunc) RunFunc {
	bound := shapeArithmeticBounds[key]
	if fallback == nil {
		bound = nil
	}
	return func(rc *RunCtx, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		if bound != nil && shapeArithmeticInputs(in) {
			// Shape arithmetic known so before planning (see shapeArithmeticBounds).
			if b := bound(n, in); b >= 0 && b <= shapeArithmeticElements {
				outs, err := fallback(rc, n, in)
				if err == nil && shapeArithmeticOutputs(outs) {
					rc.KernelVariant, rc.KernelReason = VariantHost, shapeArithmeticReason
					return outs, nil
				}
				// A float output (a Cast), or an error: the general path below decides and
				// reports, as for any op (what the host function reserved is a few bytes).
			}
		}
		infos := ops.InfosOfStatic(in)
		planner, _ := ops.PlannerFor(rc.Eng.PlanTarget(), key)
		p, _, err := planner(n, rc.Opset, infos)
		if err != nil {
			return nil, err
		}
		if p == nil {
			if fallback == nil {
				return nil, ops.OpErr("no Loom kernel covers these inputs and %s has no host function", n.OpType)
			}
			return fallback(rc, n, in)
		}
		if fallback != nil && shapeArithmetic(in, p.Outputs) {
			outs, err := fallback(rc, n, in)
			rc.KernelVariant, rc.KernelReason = VariantHost, shapeArithmeticReason
			return outs, err
		}
		// The outputs' shapes are checked against the element limit, and their bytes reserved
		// from the memory budget, before anything is compiled or allocated for them.
		for i, o := range p.Outputs {
			if err := ops.ReserveShape(rc, "output "+strconv.Itoa(i), o.Dtype, o.Shape, 0); err != nil {
				return nil, err
			}
		}
		p, why := rc.Eng.Kernels.servablePlanAs(rc.Eng.Ctx, key, n, rc.Opset, infos, p, rc.Phase == PhaseWarmup)
		if why != "" && fallback != nil {
			outs, err := fallback(rc, n, in)
			rc.KernelVariant, rc.KernelReason = VariantHost, why
			return outs, err
		}
		return rc.RunKernelPlanFor(n, p, in)
	}
}

// Shape arithmetic runs as host functions. A model exported from a framework computes its
// Reshape targets, slice bounds and the like from Shape through Gather, Slice, Concat and Cast
// of a few int64 elements; where those run the op's kernels, each costs a kernel plan, a
// device session's uploads and a launch (35-170 us each on two loaded cores, 2026-12-07), the
// host function 1.5-5 us (Concat 11-37 us, most of it the kernel planner that gives the
// output's shape). PP-OCRv4 rec folds 19 such nodes for every new image
// width (ShapeTrace), a few milliseconds of its first run at that width. The result is the
// same: the ops with integer kernels move, cast and compare values (integer arithmetic has
// no kernels), and the host functions, which compute in float64, do so exactly for integers
// of at most 2^53 in magnitude; an int64 or uint64 input beyond that (not a shape) takes the
// kernels (a host Cast of a random int64 to int32 came out 4 off the kernel's wrapped value).

// shapeArithmeticElements is the most elements an input or output of an op may have for it to
// run as shape arithmetic.
const shapeArithmeticElements = 64

// shapeArithmeticReason is the reason the trace gives such an op.
var shapeArithmeticReason = "host: integer values of at most " + strconv.Itoa(shapeArithmeticElements) +
	" elements (shape arithmetic) run as the host function"

// shapeArithmetic reports whether an op reading in and writing outs (its kernel plan's
// outputs) is shape arithmetic: every present input and every output an integer (of 8 to 64
// bits) or bool tensor of at most shapeArithmeticElements elements, the inputs' values held
// in Go memory and exact in float64.
func shapeArithmetic(in []tensor.Tensor, outs []ops.ValueType) bool {
	if !shapeArithmeticInputs(in) {
		return false
	}
	for _, o := range outs {
		if !smallInteger(o.Dtype, ops.Numel(o.Shape)) {
			return false
		}
	}
	return len(outs) > 0
}

// smallInteger reports whether n elements of dt can be shape arithmetic: an integer of 8 to
// 64 bits or bool, at most shapeArithmeticElements of them.
func smallInteger(dt tensor.DType, n int) bool {
	switch dt {
	case graph.Bool, graph.Int8, graph.Uint8, graph.Int16, graph.Uint16, graph.Int32, graph.Uint32, graph.Int64, graph.Uint64:
		return n >= 0 && n <= shapeArithmeticElements
	}
	return false
}

// shapeArithmeticInputs reports whether every present input in is a small integer tensor
// (smallInteger) in Go memory whose values float64 holds exactly.
func shapeArithmeticInputs(in []tensor.Tensor) bool {
	for _, t := range in {
		if !t.IsValid() {
			continue // an omitted optional input (as the planners take it)
		}
		if tensor.Box(t) != nil || !smallInteger(t.DType(), t.Len()) || !exactInFloat64(t) {
			return false
		}
	}
	return true
}

// shapeArithmeticOutputs is shapeArithmetic's test of a host function's outputs.
func shapeArithmeticOutputs(outs []tensor.Tensor) bool {
	for _, o := range outs {
		if !o.IsValid() || tensor.Box(o) != nil || !smallInteger(o.DType(), o.Len()) {
			return false
		}
	}
	return len(outs) > 0
}

// shapeArithmeticBounds holds, for the ops a model's shape arithmetic is made of, a bound on
// the elements of the op's output from its inputs' shapes alone (-1: none, as for inputs
// that do not broadcast). Where the inputs are shape arithmetic's and the bound is within
// shapeArithmeticElements, kernelRun runs the host function without asking the kernel planner
// for the outputs' types first: the planner's kernel calls are not used there, and planning a
// Concat or a Gather cost 5-10 times its host function (a new signature's shape trace of a
// small encoder folds 82 such nodes: 0.25 ms of 1.2). The outputs are checked after (an
// integer Cast to float is not shape arithmetic: the general path then runs it). Only ops
// with a kernel planner whose kernels take integers are here (they move, cast, compare and
// select; views such as Unsqueeze and Reshape have no planner and run as host functions): integer
// arithmetic (Add, Mul, ...) has no kernels, its planner declines at once, and the run reports
// that reason as before. Ops that make shapes from values (ConstantOfShape, Range, Expand,
// Tile) are not here either: their outputs are not bounded by their inputs' sizes, and the
// planner checks them against the limits first.
var shapeArithmeticBounds = func() map[string]func(n *graph.Node, in []tensor.Tensor) int {
	first := func(_ *graph.Node, in []tensor.Tensor) int { // as many elements as input 0 at most
		if len(in) == 0 || !in[0].IsValid() {
			return -1
		}
		return in[0].Len()
	}
	m := map[string]func(n *graph.Node, in []tensor.Tensor) int{
		"Concat": func(_ *graph.Node, in []tensor.Tensor) int {
			total := 0
			for _, t := range in {
				if t.IsValid() {
					total += t.Len()
				}
			}
			return total
		},
		"Gather": func(_ *graph.Node, in []tensor.Tensor) int {
			// indices' elements times a slice of data's: at most their product.
			if len(in) != 2 || !in[0].IsValid() || !in[1].IsValid() {
				return -1
			}
			return in[0].Len() * in[1].Len()
		},
	}
	for _, op := range []string{"Cast", "Slice", "Transpose"} {
		m[op] = first
	}
	for _, op := range []string{"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Where"} {
		m[op] = broadcastElements
	}
	return m
}()

// broadcastElements is the elements of in's shapes broadcast together (ops.BroadcastShapes),
// -1 where they do not broadcast.
func broadcastElements(_ *graph.Node, in []tensor.Tensor) int {
	var out []int64
	for _, t := range in {
		if !t.IsValid() {
			continue
		}
		var err error
		if out, err = ops.BroadcastShapes(out, t.Dims()); err != nil {
			return -1
		}
	}
	return ops.Numel(out)
}

// exactInFloat64 reports whether t's values are in Go memory and float64 holds each exactly:
// always for the integers of 32 bits or fewer and bool, for int64 and uint64 those of at most
// 2^53 in magnitude.
func exactInFloat64(t tensor.Tensor) bool {
	const limit = 1 << 53
	switch v := t.Data().(type) {
	case []int64:
		for _, e := range v {
			if e > limit || e < -limit {
				return false
			}
		}
		return true
	case []uint64:
		for _, e := range v {
			if e > limit {
				return false
			}
		}
		return true
	case []bool, []int8, []uint8, []int16, []uint16, []int32, []uint32:
		return true
	}
	return false
}

// wrappable returns the memory of operand o (an input, a constant or an output of p) when
// the kernels can use it in place on ms's device (device.CanWrapHost): an input or constant
// no call writes, or an output, of at least 64 bytes, a whole number of 4-byte words, aligned
// for its elements.
func wrappable(ms *device.ModelSession, o ops.Operand, p *ops.KernelPlan, in, outs []tensor.Tensor, written bool) ([]byte, bool) {
	var v []tensor.Tensor
	switch o.Kind {
	case ops.OperandInput:
		v = in
	case ops.OperandConst:
		v = p.Consts
	case ops.OperandOutput:
		v = outs
	default:
		return nil, false
	}
	if o.Index >= len(v) || !v[o.Index].IsValid() || written && o.Kind != ops.OperandOutput || !device.CanWrapHost(ms) {
		return nil, false
	}
	raw, ok := ops.RawBytes(v[o.Index])
	if !ok || len(raw) < 64 || len(raw)%4 != 0 {
		return nil, false
	}
	align := min(max(v[o.Index].DType().BitSize()/8, 1), 8)
	if uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%uintptr(align) != 0 {
		return nil, false
	}
	return raw, true
}
