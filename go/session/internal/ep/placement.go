package ep

import "github.com/loomrt/loom/go/graph"

// Placement: where each node of an InferenceSession runs is decided once, when the session is
// built (Select, then PlaceGraph), by asking the session's provider about every node of the
// graph and of its subgraphs. The decision is static: the provider, whether a kernel planner
// may run the node, and if not why its Go host function runs. Every report reads it:
//
//   - ExecutionProviderFallbackReport lists the top-level nodes whose placement is not on the
//     requested provider, with the placement's fallback reason;
//   - an op span's loom.variant and loom.reason take the placement's reason for a node no
//     kernel can run; for the others the run refines it (a planner declining the inputs'
//     types or shapes, empty tensors, a kernel neither shipped nor compilable);
//   - a compiled run plan only asks the kernel planner of a node placed on a kernel, gives a
//     host step of a node placed on the host the placement's reason, and PlanReport.Nodes
//     reports each planned node's placement beside what the plan made of it.

// Cause is why a node runs where its placement says.
type Cause uint8

const (
	// CauseKernel: a kernel planner (or a fused Loom op) may run the node; the run decides.
	CauseKernel Cause = iota
	// CauseNoKernel: no Loom kernel exists for the op; its Go host function runs.
	CauseNoKernel
	// CauseControlFlow: the node runs subgraphs, on the host on every provider.
	CauseControlFlow
)

// Placement is where one node runs, decided when the session is built.
type Placement struct {
	// Provider is where the node runs: the session's provider for a node a kernel may run,
	// the host otherwise.
	Provider Name
	// Kernel says whether a kernel planner may run the node; when false its Go host function
	// always runs and Reason says why.
	Kernel bool
	Cause  Cause
	// Reason says why the node runs as its Go host function ("" when Kernel).
	Reason string
	// Fallback says why the node does not run on the provider the session asked for; "" when
	// it does (or when the session asked for none: host, or auto without CUDA).
	Fallback string
}

// HostReason is the placement's reason as a trace span or a plan's host step says it.
func (p Placement) HostReason() string {
	if p.Reason == "" {
		return "host: no Loom kernel for this op"
	}
	return "host: " + p.Reason
}

// Placements are the placements of a graph's nodes (its subgraphs' too).
type Placements map[*graph.Node]Placement

// PlaceGraph places every node of g and of its subgraphs on p.
func PlaceGraph(g *graph.Graph, p Provider) Placements {
	out := Placements{}
	g.Walk(func(sg *graph.Graph) {
		for _, n := range sg.Nodes {
			out[n] = p.Capability(n)
		}
	})
	return out
}

// Of is n's placement. A node the placements were not made for (none of the graph's) is
// placed on the host provider's terms.
func (ps Placements) Of(n *graph.Node) Placement {
	if p, ok := ps[n]; ok {
		return p
	}
	return HostProvider{}.Capability(n)
}
