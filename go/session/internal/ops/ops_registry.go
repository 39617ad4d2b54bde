package ops

import (
	"fmt"
	"sync"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// opFunc computes a node's outputs from its inputs (an omitted optional input is the zero
// Tensor) for the run rc. Host functions never modify their inputs.
type OpFunc func(rc OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error)

// opRun is what an op's function may ask of the run executing it: the model's opset, and the
// run of another op through its kernels (the fused operators compose kernel-backed ops). The
// interpreter's run state implements it.
type OpRun interface {
	OpsetVersion() int64
	KernelOp(op string, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error)
}

// hostOps holds the Go host functions by ai.onnx op type.
var HostOps = map[string]OpFunc{}

// opErr formats an op error; evalGraph makes it the cause of an *Error naming the node.
func OpErr(format string, args ...any) error { return fmt.Errorf(format, args...) }

// deadAfterCache holds deadAfter's result by graph (graphs do not change once loaded).
var deadAfterCache sync.Map // *graph.Graph -> [][]string

// deadAfter lists, by node index, the values produced by g's nodes that no later node of g
// (nor a subgraph of one) reads and that are not outputs of g: after node i they can go.
func DeadAfter(g *graph.Graph) [][]string {
	if v, ok := deadAfterCache.Load(g); ok {
		return v.([][]string)
	}
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
	v, _ := deadAfterCache.LoadOrStore(g, dead)
	return v.([][]string)
}

// loomOps holds the functions of the fused operators of graph.LoomDomain, which the graph
// optimizer (go/graph/opt) creates at the extended and all levels. Each composes the ai.onnx
// functions it fuses, so that it computes what the unfused graph did and runs the same Loom
// kernels where those cover the shapes.
var LoomOps = map[string]OpFunc{}
