package kernelops

import (
	"math"
	"strconv"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/kernels"
)

// Reductions as Loom kernels (kernels/reduce.loom) on float32 tensors: the Reduce* family
// over any axes that form at most two runs of adjacent axes (after dropping axes of size 1),
// and ArgMax/ArgMin.

// reduceOps maps each op to the reduce kernels' OP code and the first opset in which its axes
// are an input rather than an attribute.
var reduceOps = map[string]struct {
	code  string
	since int64
}{
	"ReduceSum": {kernels.ReduceSum, 13}, "ReduceMean": {kernels.ReduceMean, 18}, "ReduceMax": {kernels.ReduceMax, 18},
	"ReduceMin": {kernels.ReduceMin, 18}, "ReduceProd": {kernels.ReduceProd, 18}, "ReduceL1": {kernels.ReduceL1, 18},
	"ReduceL2": {kernels.ReduceL2, 18}, "ReduceSumSquare": {kernels.ReduceSumSquare, 18},
	"ReduceLogSum": {kernels.ReduceLogSum, 18}, "ReduceLogSumExp": {kernels.ReduceLogSumExp, 18},
}

func init() {
	for op, r := range reduceOps {
		ops.RegisterKernelOp(op, reducePlanner(r.code, r.since), hostFallback(op))
		ops.RegisterGPUKernelPlanner(op, reduceRowsBlock.planner(reducePlanner(r.code, r.since)))
	}
	ops.RegisterKernelOp("GlobalAveragePool", globalPoolPlanner("ReduceMean"), hostFallback("GlobalAveragePool"))
	ops.RegisterKernelOp("GlobalMaxPool", globalPoolPlanner("ReduceMax"), hostFallback("GlobalMaxPool"))
	ops.RegisterKernelOp("ArgMax", argReducePlanner(true), hostFallback("ArgMax"))
	ops.RegisterKernelOp("ArgMin", argReducePlanner(false), hostFallback("ArgMin"))
}

const reduceFile = "reduce.loom"

// reduceForm is x seen as [K0, R0, K1, R1, K2], reduced over R0 and R1.
type reduceForm [5]int64

// reduceFormOf merges the axes of shape into the kernels' form; ok is false when the reduced
// axes form more than two runs.
func reduceFormOf(shape []int64, reduced []bool) (f reduceForm, ok bool) {
	type run struct {
		red bool
		n   int64
	}
	var runs []run
	for k, d := range shape {
		if d == 1 {
			continue
		}
		if m := len(runs) - 1; m >= 0 && runs[m].red == reduced[k] {
			runs[m].n *= d
			continue
		}
		runs = append(runs, run{reduced[k], d})
	}
	for i := range f {
		f[i] = 1
	}
	// Right-align the runs on the slots, which alternate kept (even) and reduced (odd).
	slot := 4
	if len(runs) > 0 && runs[len(runs)-1].red {
		slot = 3
	}
	for i := len(runs) - 1; i >= 0; i-- {
		if slot < 0 {
			return f, false
		}
		f[slot] = runs[i].n
		slot--
	}
	return f, true
}

func reducePlanner(code string, since int64) ops.KernelPlanner {
	return func(n *graph.Node, opset int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
		if !needInput(in, 0) {
			return nil, "", ops.OpErr("%s needs an input", n.OpType)
		}
		x := in[0]
		if x.Dtype != graph.Float {
			return nil, declineType(in[:1]), nil
		}
		var axes []int64
		if opset < since {
			axes = n.AttrInts("axes")
		} else if needInput(in, 1) {
			var ok bool
			if axes, ok = staticInts(in, 1); !ok {
				return nil, "host: the reduction axes must be known before the run", nil
			}
		}
		if len(axes) == 0 && opset >= since && n.AttrInt("noop_with_empty_axes", 0) != 0 {
			p, reason := identityCopyPlan(x, "Loom kernel: copy (no axes to reduce)")
			return p, reason, nil
		}
		r := len(x.Shape)
		reduced := make([]bool, r)
		for k := range reduced {
			reduced[k] = len(axes) == 0
		}
		for _, a := range axes {
			ax, err := ops.NormAxis(a, r)
			if err != nil {
				return nil, "", err
			}
			reduced[ax] = true
		}
		keep := n.AttrInt("keepdims", 1) != 0
		out := []int64{}
		count := int64(1)
		for k, d := range x.Shape {
			switch {
			case reduced[k]:
				count *= d
				if keep {
					out = append(out, 1)
				}
			default:
				out = append(out, d)
			}
		}
		f, ok := reduceFormOf(x.Shape, reduced)
		if !ok {
			return nil, "host: the reduce kernels cover at most two runs of reduced axes", nil
		}
		p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: out}}, Reason: reasonFloat32 + ", axes merged to [K0, R0, K1, R1, K2]"}
		if ops.Numel(out) == 0 {
			return p, "", nil
		}
		scale := uint64(math.Float32bits(float32(1 / float64(count))))
		bind := []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.WriteOf(ops.OutputOperand(0))}
		if f[4] > 1 {
			args := []uint64{bits64(f[0]), bits64(f[2]), bits64(f[4]), bits64(f[1]), bits64(f[3]), scale}
			p.Calls = []ops.KernelCall{{File: reduceFile, Symbol: "reduce_inner", Config: map[string]string{"OP": code},
				Args: args, Workload: args[:3], Bind: bind}}
		} else {
			args := []uint64{bits64(f[0] * f[2]), bits64(f[0]), bits64(f[2]), bits64(f[1]), bits64(f[3]), scale}
			p.Calls = []ops.KernelCall{{File: reduceFile, Symbol: "reduce_rows", Config: map[string]string{"OP": code},
				Args: args, Workload: args[:1], Bind: bind}}
		}
		return p, "", nil
	}
}

// globalPoolPlanner plans GlobalAveragePool and GlobalMaxPool as the reduction (ReduceMean,
// ReduceMax) over every spatial axis, kept as 1s.
func globalPoolPlanner(reduction string) ops.KernelPlanner {
	r := reduceOps[reduction]
	reduce := reducePlanner(r.code, r.since)
	return func(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
		if !needInput(in, 0) {
			return nil, "", ops.OpErr("%s needs an input", n.OpType)
		}
		rank := len(in[0].Shape)
		if rank < 3 {
			return nil, "host: global pooling wants [N, C, spatial...]", nil
		}
		axes := make([]int64, 0, rank-2)
		for a := 2; a < rank; a++ {
			axes = append(axes, int64(a))
		}
		// Opset 1 takes the axes from the attribute.
		as := graph.NewNode(n.Name, reduction, n.Inputs[:min(len(n.Inputs), 1)], n.Outputs, graph.IntsAttr("axes", axes...), graph.IntAttr("keepdims", 1))
		return reduce(as, 1, in[:1])
	}
}

func argReducePlanner(isMax bool) ops.KernelPlanner {
	return func(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
		if !needInput(in, 0) {
			return nil, "", ops.OpErr("%s needs an input", n.OpType)
		}
		x := in[0]
		if x.Dtype != graph.Float {
			return nil, declineType(in[:1]), nil
		}
		ax, err := ops.NormAxis(n.AttrInt("axis", 0), len(x.Shape))
		if err != nil {
			return nil, "", err
		}
		if len(x.Shape) == 0 {
			return nil, "", ops.OpErr("%s of a scalar", n.OpType)
		}
		out := append([]int64{}, x.Shape...)
		if n.AttrInt("keepdims", 1) != 0 {
			out[ax] = 1
		} else {
			out = append(out[:ax], out[ax+1:]...)
		}
		p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Int64, Shape: out}}, Reason: reasonFloat32}
		count := ops.Numel(out)
		if count == 0 {
			return p, "", nil
		}
		args := []uint64{U(count), U(ops.Numel(x.Shape[:ax])), bits64(x.Shape[ax]), U(ops.Numel(x.Shape[ax+1:]))}
		cfg := map[string]string{"MAX": strconv.FormatBool(isMax), "LAST": strconv.FormatBool(n.AttrInt("select_last_index", 0) != 0)}
		p.Calls = []ops.KernelCall{{File: reduceFile, Symbol: "arg_reduce", Config: cfg, Args: args, Workload: args[:1],
			Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.WriteOf(ops.OutputOperand(0))}}}
		return p, "", nil
	}
}
