package arith

import (
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for the reductions (ReduceSum and the other Reduce ops, ArgMax, ArgMin) and
// CumSum.

func reduceOp(since int64, init float64, f func(acc, v float64) float64, fin func(acc float64, n int) float64) ops.OpFunc {
	return func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		axes := ops.AxesOf(rc, n, in, 1, since)
		if len(axes) == 0 && rc.OpsetVersion() >= since && n.AttrInt("noop_with_empty_axes", 0) != 0 {
			return []tensor.Tensor{in[0]}, nil
		}
		out, err := ops.Reduce(in[0], axes, n.AttrInt("keepdims", 1) != 0, init, f, fin)
		return []tensor.Tensor{out}, err
	}
}

func init() {
	add := func(a, v float64) float64 { return a + v }
	ops.HostOps["ReduceSum"] = reduceOp(13, 0, add, nil)
	ops.HostOps["ReduceMean"] = reduceOp(18, 0, add, func(a float64, c int) float64 { return a / float64(c) })
	ops.HostOps["ReduceMax"] = reduceOp(18, math.Inf(-1), math.Max, nil)
	ops.HostOps["ReduceMin"] = reduceOp(18, math.Inf(1), math.Min, nil)
	ops.HostOps["ReduceProd"] = reduceOp(18, 1, func(a, v float64) float64 { return a * v }, nil)
	ops.HostOps["ReduceL1"] = reduceOp(18, 0, func(a, v float64) float64 { return a + math.Abs(v) }, nil)
	ops.HostOps["ReduceL2"] = reduceOp(18, 0, func(a, v float64) float64 { return a + v*v }, func(a float64, _ int) float64 { return math.Sqrt(a) })
	ops.HostOps["ReduceSumSquare"] = reduceOp(18, 0, func(a, v float64) float64 { return a + v*v }, nil)
	ops.HostOps["ReduceLogSum"] = reduceOp(18, 0, add, func(a float64, _ int) float64 { return math.Log(a) })
	ops.HostOps["ReduceLogSumExp"] = reduceOp(18, 0, func(a, v float64) float64 { return a + math.Exp(v) }, func(a float64, _ int) float64 { return math.Log(a) })
	for _, k := range []string{"ArgMax", "ArgMin"} {
		isMax := k == "ArgMax"
		ops.HostOps[k] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
			x := in[0]
			ax, err := ops.NormAxis(n.AttrInt("axis", 0), len(x.Dims()))
			if err != nil {
				return nil, err
			}
			last := n.AttrInt("select_last_index", 0) != 0
			outer, dim, inner := ops.Numel(x.Dims()[:ax]), int(x.Dims()[ax]), ops.Numel(x.Dims()[ax+1:])
			v := tensor.Float64s(x)
			out := make([]int64, outer*inner)
			for o := 0; o < outer; o++ {
				for j := 0; j < inner; j++ {
					best, bi := 0.0, -1
					for i := 0; i < dim; i++ {
						e := v[(o*dim+i)*inner+j]
						better := bi < 0 || (isMax && (e > best || (last && e == best))) || (!isMax && (e < best || (last && e == best)))
						if better {
							best, bi = e, i
						}
					}
					out[o*inner+j] = int64(bi)
				}
			}
			shape := append([]int64{}, x.Dims()...)
			if n.AttrInt("keepdims", 1) != 0 {
				shape[ax] = 1
			} else {
				shape = append(shape[:ax], shape[ax+1:]...)
			}
			return []tensor.Tensor{ops.I64Tensor(shape, out)}, nil
		}
	}
	// CumSum and CumProd (opset 26): the running sum or product along the axis (input 1),
	// exclusive (the element itself left out) and reversed as the attributes say.
	cumulative := func(init float64, combine func(a, v float64) float64) ops.OpFunc {
		return func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
			x := in[0]
			a, err := ops.OneInt(in, 1, "the axis (input 1)")
			if err != nil {
				return nil, err
			}
			ax, err := ops.NormAxis(a, len(x.Dims()))
			if err != nil {
				return nil, err
			}
			excl, rev := n.AttrInt("exclusive", 0) != 0, n.AttrInt("reverse", 0) != 0
			outer, dim, inner := ops.Numel(x.Dims()[:ax]), int(x.Dims()[ax]), ops.Numel(x.Dims()[ax+1:])
			v := tensor.Float64s(x)
			out := make([]float64, len(v))
			for o := 0; o < outer; o++ {
				for j := 0; j < inner; j++ {
					s := init
					for t := 0; t < dim; t++ {
						i := t
						if rev {
							i = dim - 1 - t
						}
						at := (o*dim+i)*inner + j
						if excl {
							out[at] = s
							s = combine(s, v[at])
						} else {
							s = combine(s, v[at])
							out[at] = s
						}
					}
				}
			}
			return ops.FloatResult(x.DType(), x.Dims(), out)
		}
	}
	ops.HostOps["CumSum"] = cumulative(0, func(a, v float64) float64 { return a + v })
	ops.HostOps["CumProd"] = cumulative(1, func(a, v float64) float64 { return a * v })
}
