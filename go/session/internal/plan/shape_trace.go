package plan

import (
	"fmt"
	"maps"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/infer"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Plans without an interpreted run. A signature's plan is built from a trace of the model's
// nodes (BuildTemplate): the values of the nodes whose outputs do not depend on the inputs'
// data (the plan folds them), and the type and shape of every other node's outputs. The
// interpreter's first run of the signature makes such a trace as it goes (tracePlan in
// go/session), but it runs every op unplanned: its own allocations, kernel plans made per op,
// no arena, several times a planned run's time. ShapeTrace makes the same trace without
// running the nodes that depend on the data: it runs only the folded nodes (shape arithmetic,
// mostly) and takes the other nodes' output types from shape inference over the signature
// (go/graph/infer, the rules the session's load already checked the model with), so that the
// signature's first run can already run as a plan. Where inference leaves an output's shape
// open (a data-dependent size: NonZero, a loop's trip count), or the model has control flow,
// ShapeTrace declines and the interpreter traces the run as before. The kernel planners'
// output shapes are checked against the inferred ones when the plan is built (a disagreement
// declines the plan), and a host step's outputs are checked against its slots on every run
// (ErrPlanGuard), so a wrong inferred shape costs a re-plan, never a wrong result.

// ShapeTrace returns the trace of fed's signature made without running the nodes that depend
// on the inputs' data, or why it cannot (the caller then traces an interpreted run).
func (pe *Env) ShapeTrace(rc *exec.RunCtx, fed map[string]tensor.Tensor) ([]TracedNode, string) {
	m := pe.Eng.Model
	g := m.Graph
	for _, n := range g.Nodes {
		if len(n.Subgraphs()) > 0 || n.Traits().ControlFlow {
			return nil, fmt.Sprintf("node %q has subgraphs", n.Name)
		}
	}
	if len(fed) != len(pe.Eng.InputNames) {
		return nil, "the run overrides an initializer"
	}
	control := pe.ControlInputs()
	// The session's model was resolved when it was loaded and optimized, and nothing changes
	// its nodes after: the copy inference writes its types into need not be resolved again.
	sig := infer.Signature{Shapes: map[string]graph.Shape{}, Values: map[string]*graph.Tensor{}, Resolved: true}
	vals := make(map[string]tensor.Tensor, len(g.Nodes)+len(fed))
	dyn := map[string]bool{}
	for _, name := range pe.Eng.InputNames {
		v, ok := fed[name]
		if !ok || tensor.Box(v) != nil || v.DType() == graph.String {
			return nil, fmt.Sprintf("input %q is not a numeric tensor", name)
		}
		if control[name] && Specializes(v) {
			raw, ok := ops.RawBytes(v)
			if !ok {
				return nil, fmt.Sprintf("input %q has no raw bytes", name)
			}
			gt, err := graph.NewTensor(name, v.DType(), v.Dims(), raw)
			if err != nil {
				return nil, err.Error()
			}
			sig.Values[name] = gt
			vals[name] = v
			continue
		}
		shape := make(graph.Shape, len(v.Dims()))
		for i, d := range v.Dims() {
			shape[i] = graph.DimOf(d)
		}
		sig.Shapes[name] = shape
		vals[name] = tensor.Raw(v.DType(), v.Dims(), nil)
		dyn[name] = true
	}
	// Inference writes the types it finds into the graph's value records: it runs on a copy
	// of those records (the nodes and weights are shared, read only).
	cm := cloneForInference(m)
	if err := infer.ShapesFor(cm, sig); err != nil {
		return nil, fmt.Sprintf("shape inference over the signature: %v", err)
	}
	for name, w := range pe.Eng.Weights {
		if _, fedToo := vals[name]; !fedToo {
			vals[name] = w
		}
	}
	// weightOnly are the values computed from the weights alone: the same for every signature.
	weightOnly := make(map[string]bool, len(pe.Eng.Weights))
	for name := range pe.Eng.Weights {
		if _, fedToo := fed[name]; !fedToo {
			weightOnly[name] = true
		}
	}
	limit := rc.MaxElements()
	scope := &exec.Scope{Vals: vals}
	trace := make([]TracedNode, 0, len(g.Nodes))
	for _, n := range g.Nodes {
		if err := rc.Canceled(n); err != nil {
			return nil, err.Error()
		}
		in := make([]tensor.Tensor, len(n.Inputs))
		for i, name := range n.Inputs {
			if name == "" {
				continue
			}
			v, ok := vals[name]
			if !ok {
				return nil, fmt.Sprintf("node %q reads %q, which has no value", n.Name, name)
			}
			in[i] = v
		}
		if !DependsOnData(n, func(name string) bool { return dyn[name] }) {
			// Folded by the plan: run now, as the interpreter would (Shape and Size read only
			// their input's shape, which a data-free input has).
			f, ok := exec.LookupOp(n)
			if !ok {
				return nil, fmt.Sprintf("node %q: operator %s is not supported", n.Name, n.OpType)
			}
			for i, v := range in {
				if v.DType() != graph.Undefined && !v.IsValid() && !readsShapesOnly(n) {
					return nil, fmt.Sprintf("node %q reads %q, which has no value", n.Name, n.Inputs[i])
				}
			}
			fromWeights := !n.Traits().Nondeterministic && !readsShapesOnly(n)
			for _, name := range n.Inputs {
				if name != "" && !weightOnly[name] {
					fromWeights = false
				}
			}
			var outs []tensor.Tensor
			if cached, ok := pe.constFolds.Load(n); ok && fromWeights {
				outs = cached.([]tensor.Tensor)
			} else {
				var err error
				if outs, err = rc.RunNode(f, n, in, scope); err != nil {
					return nil, fmt.Sprintf("node %q: %v", n.Name, err)
				}
				if len(outs) < len(n.Outputs) {
					return nil, fmt.Sprintf("node %q produced %d outputs", n.Name, len(outs))
				}
				if fromWeights {
					pe.constFolds.Store(n, outs)
					pe.holdFolds(outs)
				}
			}
			for i, name := range n.Outputs {
				if name != "" {
					vals[name] = outs[i]
					weightOnly[name] = fromWeights
				}
			}
			trace = append(trace, TracedNode{Graph: g, Node: n, Out: outs})
			continue
		}
		outs := make([]tensor.Tensor, len(n.Outputs))
		for i, name := range n.Outputs {
			if name == "" {
				continue
			}
			// What inference derived itself, not what the model declares: a declared shape
			// may be the exporter's example's.
			v := cm.Graph.Values[name]
			if v == nil || v.Inferred.Kind != graph.KindTensor || !v.Inferred.Ranked || v.Inferred.Elem == graph.Undefined || v.Inferred.Elem == graph.String {
				return nil, fmt.Sprintf("node %q: inference leaves the type of %q open", n.Name, name)
			}
			dims, ok := v.Inferred.Shape.Ints()
			if !ok {
				return nil, fmt.Sprintf("node %q: inference leaves the shape of %q open (%v)", n.Name, name, v.Inferred.Shape)
			}
			if e := ops.Numel(dims); e < 0 || limit > 0 && int64(e) > limit {
				return nil, fmt.Sprintf("node %q: %q would have %d elements", n.Name, name, e)
			}
			outs[i] = tensor.Raw(v.Inferred.Elem, dims, nil)
			vals[name] = outs[i]
			dyn[name] = true
		}
		if n.Traits().View && len(outs) == 1 && len(in) > 0 && ops.Numel(outs[0].Dims()) != ops.Numel(in[0].Dims()) {
			return nil, fmt.Sprintf("node %q: inferred %v for a view of %v", n.Name, outs[0].Dims(), in[0].Dims())
		}
		trace = append(trace, TracedNode{Graph: g, Node: n, Out: outs})
	}
	return trace, ""
}

// cloneForInference is m with the value records of its main graph that inference writes (the
// graph's inputs and outputs and the nodes' outputs) copied; the nodes, initializers and every
// other record shared. infer.ShapesFor assigns those records' Type and Inferred, new types
// every time (it clones what it merges and never writes a shape in place, which
// TestShapeTraceLeavesTheModelAlone checks), and only reads the others (a weight's record), so
// the copies are shallow. The caller has checked that the graph has no subgraphs (inference
// would write theirs too). Every new signature's trace makes this copy: deep copies of every
// record were a quarter of a small encoder's trace.
func cloneForInference(m *graph.Model) *graph.Model {
	cm := *m
	g := *m.Graph
	g.Values = maps.Clone(m.Graph.Values)
	n := len(m.Graph.Inputs) + len(m.Graph.Outputs)
	for _, nd := range m.Graph.Nodes {
		n += len(nd.Outputs)
	}
	copies := make([]graph.Value, 0, n)
	copyOf := func(v *graph.Value) *graph.Value {
		inMap := m.Graph.Values[v.Name] == v
		if c := g.Values[v.Name]; inMap && c != v {
			return c // copied already (an input that is also an output)
		}
		copies = append(copies, *v)
		c := &copies[len(copies)-1]
		if inMap {
			g.Values[v.Name] = c
		}
		return c
	}
	g.Inputs = make([]*graph.Value, len(m.Graph.Inputs))
	for i, v := range m.Graph.Inputs {
		g.Inputs[i] = copyOf(v)
	}
	g.Outputs = make([]*graph.Value, len(m.Graph.Outputs))
	for i, v := range m.Graph.Outputs {
		g.Outputs[i] = copyOf(v)
	}
	for _, nd := range m.Graph.Nodes {
		for _, name := range nd.Outputs {
			if v := m.Graph.Values[name]; v != nil && name != "" {
				copyOf(v)
			}
		}
	}
	g.OuterRefs = nil
	cm.Graph = &g
	return &cm
}
