package session

import (
	"github.com/loomrt/loom/go/graph"
)

// fallbackReport lists the top-level nodes whose placement is not on the requested provider.
func (s *InferenceSession) fallbackReport() []FallbackEntry {
	out := []FallbackEntry{}
	for _, n := range s.eng.Model.Graph.Nodes {
		if p := s.eng.Placements.Of(n); p.Fallback != "" {
			out = append(out, FallbackEntry{Node: n.Name, Op: n.OpType, Provider: p.Provider, Reason: p.Fallback})
		}
	}
	return out
}

// PlanStepKind is what a compiled run plan made of a node.
type PlanStepKind string

// The plan step kinds of PlanNode.Step.
const (
	// PlanKernel: the node runs as Loom kernels, in a segment.
	PlanKernel PlanStepKind = "kernel"
	// PlanHost: the node runs as its Go host function (a host step).
	PlanHost PlanStepKind = "host"
	// PlanFolded: the node was computed once, when the plan was built.
	PlanFolded PlanStepKind = "folded"
	// PlanAlias: the node only views its input in another shape; it does not run.
	PlanAlias PlanStepKind = "alias"
	// PlanInlined: an If replaced by the nodes of the branch its fixed condition takes.
	PlanInlined PlanStepKind = "inlined"
)

// PlanNode is one node of a compiled run plan: its placement, decided once when the session
// was built, and what the plan made of it.
type PlanNode struct {
	Node, OpType string
	// Provider is where the node's placement puts it; Kernel whether a kernel planner may run
	// it; Placement why it runs as its Go host function when no kernel may ("" when one may).
	Provider  ExecutionProvider
	Kernel    bool
	Placement string
	// Step is what the plan made of the node; Reason, for a kernel or host step, why (as
	// HostSteps says it for a host step).
	Step   PlanStepKind
	Reason string
}

// planNodeOf reports node n of a plan, which made step of it for reason.
func (pe *planEnv) planNodeOf(n *graph.Node, step PlanStepKind, reason string) PlanNode {
	p := pe.eng.Placements.Of(n)
	return PlanNode{Node: n.Name, OpType: n.OpType, Provider: p.Provider, Kernel: p.Kernel, Placement: p.Reason,
		Step: step, Reason: reason}
}
