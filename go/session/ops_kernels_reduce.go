package session

import (
	"math"
	"strconv"

	"github.com/loomrt/loom/go/graph"
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
		registerKernelOp(op, reducePlanner(r.code, r.since), hostFallback(op))
	}
	registerKernelOp("GlobalAveragePool", globalPoolPlanner("ReduceMean"), hostFallback("GlobalAveragePool"))
	registerKernelOp("GlobalMaxPool", globalPoolPlanner("ReduceMax"), hostFallback("GlobalMaxPool"))
	registerKernelOp("ArgMax", argReducePlanner(true), hostFallback("ArgMax"))
	registerKernelOp("ArgMin", argReducePlanner(false), hostFallback("ArgMin"))
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

func reducePlanner(code string, since int64) kernelPlanner {
	return func(n *graph.Node, opset int64, in []valueInfo) (*kernelPlan, string, error) {
		if !needInput(in, 0) {
			return nil, "", opErr("%s needs an input", n.OpType)
		}
		x := in[0]
		if x.dtype != graph.Float {
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
		r := len(x.shape)
		reduced := make([]bool, r)
		for k := range reduced {
			reduced[k] = len(axes) == 0
		}
		for _, a := range axes {
			ax, err := normAxis(a, r)
			if err != nil {
				return nil, "", err
			}
			reduced[ax] = true
		}
		keep := n.AttrInt("keepdims", 1) != 0
		out := []int64{}
		count := int64(1)
		for k, d := range x.shape {
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
		f, ok := reduceFormOf(x.shape, reduced)
		if !ok {
			return nil, "host: the reduce kernels cover at most two runs of reduced axes", nil
		}
		p := &kernelPlan{outputs: []valueType{{graph.Float, out}}, reason: reasonFloat32 + ", axes merged to [K0, R0, K1, R1, K2]"}
		if numel(out) == 0 {
			return p, "", nil
		}
		scale := uint64(math.Float32bits(float32(1 / float64(count))))
		bind := []kernelBinding{readOf(inputOperand(0)), writeOf(outputOperand(0))}
		if f[4] > 1 {
			args := []uint64{bits64(f[0]), bits64(f[2]), bits64(f[4]), bits64(f[1]), bits64(f[3]), scale}
			p.calls = []kernelCall{{file: reduceFile, symbol: "reduce_inner", config: map[string]string{"OP": code},
				args: args, workload: args[:3], bind: bind}}
		} else {
			args := []uint64{bits64(f[0] * f[2]), bits64(f[0]), bits64(f[2]), bits64(f[1]), bits64(f[3]), scale}
			p.calls = []kernelCall{{file: reduceFile, symbol: "reduce_rows", config: map[string]string{"OP": code},
				args: args, workload: args[:1], bind: bind}}
		}
		return p, "", nil
	}
}

// globalPoolPlanner plans GlobalAveragePool and GlobalMaxPool as the reduction (ReduceMean,
// ReduceMax) over every spatial axis, kept as 1s.
func globalPoolPlanner(reduction string) kernelPlanner {
	r := reduceOps[reduction]
	reduce := reducePlanner(r.code, r.since)
	return func(n *graph.Node, _ int64, in []valueInfo) (*kernelPlan, string, error) {
		if !needInput(in, 0) {
			return nil, "", opErr("%s needs an input", n.OpType)
		}
		rank := len(in[0].shape)
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

func argReducePlanner(isMax bool) kernelPlanner {
	return func(n *graph.Node, _ int64, in []valueInfo) (*kernelPlan, string, error) {
		if !needInput(in, 0) {
			return nil, "", opErr("%s needs an input", n.OpType)
		}
		x := in[0]
		if x.dtype != graph.Float {
			return nil, declineType(in[:1]), nil
		}
		ax, err := normAxis(n.AttrInt("axis", 0), len(x.shape))
		if err != nil {
			return nil, "", err
		}
		if len(x.shape) == 0 {
			return nil, "", opErr("%s of a scalar", n.OpType)
		}
		out := append([]int64{}, x.shape...)
		if n.AttrInt("keepdims", 1) != 0 {
			out[ax] = 1
		} else {
			out = append(out[:ax], out[ax+1:]...)
		}
		p := &kernelPlan{outputs: []valueType{{graph.Int64, out}}, reason: reasonFloat32}
		count := numel(out)
		if count == 0 {
			return p, "", nil
		}
		args := []uint64{u(count), u(numel(x.shape[:ax])), bits64(x.shape[ax]), u(numel(x.shape[ax+1:]))}
		cfg := map[string]string{"MAX": strconv.FormatBool(isMax), "LAST": strconv.FormatBool(n.AttrInt("select_last_index", 0) != 0)}
		p.calls = []kernelCall{{file: reduceFile, symbol: "arg_reduce", config: cfg, args: args, workload: args[:1],
			bind: []kernelBinding{readOf(inputOperand(0)), writeOf(outputOperand(0))}}}
		return p, "", nil
	}
}
