package session

import "github.com/loomrt/loom/go/session/internal/plan"

// The compiled run plans' public names, re-exported from internal/plan.

// PlanStepKind is what a compiled run plan made of a node.
type PlanStepKind = plan.PlanStepKind

// The plan step kinds of PlanNode.Step.
const (
	// PlanKernel: the node runs as Loom kernels, in a segment.
	PlanKernel PlanStepKind = plan.PlanKernel
	// PlanHost: the node runs as its Go host function (a host step).
	PlanHost PlanStepKind = plan.PlanHost
	// PlanFolded: the node was computed once, when the plan was built.
	PlanFolded PlanStepKind = plan.PlanFolded
	// PlanAlias: the node only views its input in another shape; it does not run.
	PlanAlias PlanStepKind = plan.PlanAlias
	// PlanInlined: an If replaced by the nodes of the branch its fixed condition takes.
	PlanInlined PlanStepKind = plan.PlanInlined
)

// PlanNode is one node of a compiled run plan: its placement, decided once when the session
// was built, and what the plan made of it.
type PlanNode = plan.PlanNode
