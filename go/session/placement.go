package session

import "github.com/loomrt/loom/go/graph"

// Placement: where each node of an InferenceSession runs is decided once, when the session is
// built (chooseProvider → placeGraph), by asking the session's execution provider
// (provider.go) about every node of the graph and of its subgraphs. The decision is static:
// the provider, whether a kernel planner may run the node, and if not why its Go host
// function runs. Every report reads it:
//
//   - ExecutionProviderFallbackReport lists the top-level nodes whose placement is not on the
//     requested provider, with the placement's fallback reason;
//   - an op span's loom.variant and loom.reason (deriveVariant) take the placement's reason
//     for a node no kernel can run; for the others the run refines it (a planner declining
//     the inputs' types or shapes, empty tensors, a kernel neither shipped nor compilable);
//   - a compiled run plan only asks the kernel planner of a node placed on a kernel, gives a
//     host step of a node placed on the host the placement's reason, and PlanReport.Nodes
//     reports each planned node's placement beside what the plan made of it.

// placementCause is why a node runs where its placement says.
type placementCause uint8

const (
	// causeKernel: a kernel planner (or a fused Loom op) may run the node; the run decides.
	causeKernel placementCause = iota
	// causeNoKernel: no Loom kernel exists for the op; its Go host function runs.
	causeNoKernel
	// causeControlFlow: the node runs subgraphs, on the host on every provider.
	causeControlFlow
)

// placement is where one node runs, decided when the session is built.
type placement struct {
	// provider is where the node runs: the session's provider for a node a kernel may run,
	// the host otherwise.
	provider ExecutionProvider
	// kernel says whether a kernel planner may run the node; when false its Go host function
	// always runs and reason says why.
	kernel bool
	cause  placementCause
	// reason says why the node runs as its Go host function ("" when kernel).
	reason string
	// fallback says why the node does not run on the provider the session asked for; "" when
	// it does (or when the session asked for none: host, or auto without CUDA).
	fallback string
}

// hostReason is the placement's reason as a trace span or a plan's host step says it.
func (p placement) hostReason() string {
	if p.reason == "" {
		return "host: no Loom kernel for this op"
	}
	return "host: " + p.reason
}

// placeGraph places every node of g and of its subgraphs on ep.
func placeGraph(g *graph.Graph, ep epProvider) map[*graph.Node]placement {
	out := map[*graph.Node]placement{}
	g.Walk(func(sg *graph.Graph) {
		for _, n := range sg.Nodes {
			out[n] = ep.Capability(n)
		}
	})
	return out
}

// placementOf is n's placement. A node the session was not built with (none of its graph's)
// is placed on the host provider's terms.
func (s *InferenceSession) placementOf(n *graph.Node) placement {
	if p, ok := s.placements[n]; ok {
		return p
	}
	return hostEP{}.Capability(n)
}

// fallbackReport lists the top-level nodes whose placement is not on the requested provider.
func (s *InferenceSession) fallbackReport() []FallbackEntry {
	out := []FallbackEntry{}
	for _, n := range s.model.Graph.Nodes {
		if p := s.placementOf(n); p.fallback != "" {
			out = append(out, FallbackEntry{Node: n.Name, Op: n.OpType, Provider: p.provider, Reason: p.fallback})
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
func (s *InferenceSession) planNodeOf(n *graph.Node, step PlanStepKind, reason string) PlanNode {
	p := s.placementOf(n)
	return PlanNode{Node: n.Name, OpType: n.OpType, Provider: p.provider, Kernel: p.kernel, Placement: p.reason,
		Step: step, Reason: reason}
}
