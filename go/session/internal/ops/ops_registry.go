package ops

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// opFunc computes a node's outputs from its inputs (an omitted optional input is the zero
// Tensor) for the run rc. Host functions never modify their inputs.
type OpFunc func(rc OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error)

// opRun is what an op's function may ask of the run executing it: the model's opset, the
// run of another op through its kernels (the fused operators compose kernel-backed ops), and
// the most elements a tensor it makes may have (see CheckShape). The interpreter's run state
// implements it.
type OpRun interface {
	OpsetVersion() int64
	KernelOp(op string, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error)
	MaxElements() int64
	// Reserve charges bytes for what (a tensor the op is about to allocate, named in the
	// error) to the session's memory budget until the op returns; over the budget it is an
	// error of kind ErrOverBudget, and nothing is reserved. Without a budget it does nothing.
	Reserve(what string, bytes uint64) error
}

// hostOps holds the Go host functions by ai.onnx op type.
var HostOps = map[string]OpFunc{}

// opErr formats an op error; evalGraph makes it the cause of an *Error naming the node.
func OpErr(format string, args ...any) error { return fmt.Errorf(format, args...) }

// DeadAfter lists, by node index, the values produced by g's nodes that no later node of g
// (nor a subgraph of one) reads and that are not outputs of g: after node i they can go. It
// caches nothing (a global cache by graph kept every session's model alive): the interpreter
// keeps the lists per session (exec.Engine.DeadAfter).
func DeadAfter(g *graph.Graph) [][]string {
	last := map[string]int{}
	for i, n := range g.Nodes {
		for _, out := range n.Outputs {
			if out != "" {
				last[out] = i
			}
		}
	}
	for i, n := range g.Nodes {
		for _, in := range n.Inputs {
			if _, ok := last[in]; ok {
				last[in] = max(last[in], i)
			}
		}
		for _, in := range n.ImplicitInputs() {
			if _, ok := last[in]; ok {
				last[in] = max(last[in], i)
			}
		}
	}
	for _, v := range g.Outputs {
		delete(last, v.Name)
	}
	dead := make([][]string, len(g.Nodes))
	for name, i := range last {
		dead[i] = append(dead[i], name)
	}
	return dead
}

// maxElementsOf is rc's element limit, the default one without a run.
func maxElementsOf(rc OpRun) int64 {
	if rc != nil {
		if m := rc.MaxElements(); m > 0 {
			return m
		}
	}
	return graph.DefaultLimits().MaxElements
}

// CheckShape checks the shape of a tensor an op is about to allocate, before it does: a
// negative dimension is an error of kind ErrInvalidArgument, more elements than rc's limit
// (the element limit of loading, graph.Limits.MaxElements, which WithLimits sets) one of kind
// ErrOverBudget naming the count asked for. what names the tensor ("the output", say). The
// run adds the node to the error.
func CheckShape(rc OpRun, what string, shape []int64) error {
	for i, d := range shape {
		if d < 0 {
			return tensor.NewError("Run", tensor.ErrInvalidArgument, "%s would have the shape %v, whose dimension %d is negative", what, shape, i)
		}
	}
	n, overflow := uint64(1), false
	for _, d := range shape {
		if d == 0 {
			return nil
		}
		hi, lo := bits.Mul64(n, uint64(d))
		overflow = overflow || hi != 0 || lo > math.MaxInt64
		n = lo
	}
	if limit := maxElementsOf(rc); overflow || int64(n) > limit {
		asked := fmt.Sprintf("%d elements", n)
		if overflow {
			asked = "more than 2^63 elements"
		}
		return tensor.NewError("Run", tensor.ErrOverBudget, "%s would have the shape %v: %s, over the limit of %d elements per tensor (graph.Limits.MaxElements)", what, shape, asked, limit)
	}
	return nil
}

// CheckCount is CheckShape for a tensor of n elements (a float, for counts computed in
// floating point that may be huge or not finite).
func CheckCount(rc OpRun, what string, n float64) error {
	if math.IsNaN(n) || n < 0 {
		return tensor.NewError("Run", tensor.ErrInvalidArgument, "%s would have %v elements", what, n)
	}
	if limit := maxElementsOf(rc); n > float64(limit) {
		asked := fmt.Sprintf("%.0f", n)
		if n >= 1e18 {
			asked = fmt.Sprintf("%.3g", n)
		}
		return tensor.NewError("Run", tensor.ErrOverBudget, "%s would have %s elements, over the limit of %d elements per tensor (graph.Limits.MaxElements)", what, asked, limit)
	}
	return nil
}

// ReserveShape checks the shape of a tensor an op is about to allocate as CheckShape does,
// then reserves its bytes as dtype elements, with perElem more bytes an element for what the
// op builds beside it (an index of ints, say), from the run's memory budget (OpRun.Reserve).
func ReserveShape(rc OpRun, what string, dtype tensor.DType, shape []int64, perElem int) error {
	if err := CheckShape(rc, what, shape); err != nil {
		return err
	}
	n := int64(1)
	for _, d := range shape {
		n *= d // within the element limit: no overflow
	}
	return reserveElems(rc, what, dtype, n, perElem)
}

// ReserveCount is ReserveShape for a tensor of n elements (a float, see CheckCount).
func ReserveCount(rc OpRun, what string, dtype tensor.DType, n float64, perElem int) error {
	if err := CheckCount(rc, what, n); err != nil {
		return err
	}
	return reserveElems(rc, what, dtype, int64(n), perElem)
}

func reserveElems(rc OpRun, what string, dtype tensor.DType, n int64, perElem int) error {
	if rc == nil || n == 0 {
		return nil
	}
	size := tensor.StorageBytes(dtype, n)
	if dtype == graph.String {
		size = n * 16
	}
	return rc.Reserve(what, uint64(size)+uint64(n)*uint64(perElem))
}

// loomOps holds the functions of the fused operators of graph.LoomDomain, which the graph
// optimizer (go/graph/opt) creates at the extended and all levels. Each composes the ai.onnx
// functions it fuses, so that it computes what the unfused graph did and runs the same Loom
// kernels where those cover the shapes.
var LoomOps = map[string]OpFunc{}
