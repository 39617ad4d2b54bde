package session

import (
	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/ops"
)

// Execution providers, in the spirit of ONNX Runtime's IExecutionProvider and ggml's backend
// table: each says, node by node, whether it takes the node (Capability). An InferenceSession
// asks its provider once, when it is built (placeGraph, placement.go), and every report
// reads the answers from there.

// epProvider is one execution provider of an InferenceSession.
type epProvider interface {
	// Name is the provider's ExecutionProvider.
	Name() ExecutionProvider
	// Available is "" when the provider can run on this machine, else why not.
	Available() string
	// Capability places node n: on this provider (placement.provider == Name()), or on the
	// host with the reason in placement.fallback. The host provider takes every node.
	Capability(n *graph.Node) placement
}

// hostEP is the host provider: Loom kernels on the host backend where a kernel planner
// exists for the op, the op's Go host function otherwise. It takes every node.
type hostEP struct{}

func (hostEP) Name() ExecutionProvider { return ProviderHost }

func (hostEP) Available() string { return "" }

func (hostEP) Capability(n *graph.Node) placement {
	switch {
	case hostNatured(n):
		return placement{provider: ProviderHost, cause: causeControlFlow,
			reason: "control flow runs on the host; its body's ops are placed on their own"}
	case !kernelCapable(n):
		return placement{provider: ProviderHost, cause: causeNoKernel, reason: "no Loom kernel for " + n.OpType}
	}
	return placement{provider: ProviderHost, kernel: true, cause: causeKernel}
}

// cudaEP is the CUDA provider: the nodes with a Loom kernel run on CUDA device 0; host-natured
// ops (control flow) and the ops without a kernel run on the host. unavailable, when not
// "", is why CUDA cannot be used: then every node runs on the host.
type cudaEP struct{ unavailable string }

// newCUDAEP probes for a CUDA driver and device.
func newCUDAEP() cudaEP {
	n, err := native.Devices(native.BackendCUDA)
	switch {
	case err != nil:
		return cudaEP{unavailable: "CUDA unavailable: " + err.Error()}
	case n == 0:
		return cudaEP{unavailable: "CUDA driver present but no CUDA device"}
	}
	return cudaEP{}
}

func (cudaEP) Name() ExecutionProvider { return ProviderCUDA }

func (c cudaEP) Available() string { return c.unavailable }

func (c cudaEP) Capability(n *graph.Node) placement {
	p := hostEP{}.Capability(n)
	switch {
	case c.unavailable != "":
		p.fallback = c.unavailable
	case p.cause == causeControlFlow:
		p.fallback = p.reason
	case p.cause == causeNoKernel:
		p.fallback = "no Loom kernel for this op: it runs as a Go host function"
	default:
		p.provider = ProviderCUDA
	}
	return p
}

// selectProvider is the provider of a session that asked for requested (host, cuda or auto),
// and the provider the session runs on: cuda when asked for (or auto) and available, else
// the host. A session that asked for cuda keeps the cuda provider even when CUDA is
// unavailable, so that its placements say why every node runs on the host.
func selectProvider(requested ExecutionProvider) (ep epProvider, runsOn ExecutionProvider) {
	if requested == ProviderHost {
		return hostEP{}, ProviderHost
	}
	cuda := newCUDAEP()
	switch {
	case cuda.Available() == "":
		return cuda, ProviderCUDA
	case requested == ProviderCUDA:
		return cuda, ProviderHost
	}
	return hostEP{}, ProviderHost
}

// hostNatured reports whether n runs on the host on every provider: control flow (If, Loop,
// Scan, SequenceMap and any node carrying subgraphs).
func hostNatured(n *graph.Node) bool {
	return n.Traits().ControlFlow || hasSubgraph(n)
}

// kernelCapable reports whether a Loom kernel may run n: the ops with a kernel planner
// (kernelPlanners) and Loom's fused ops, which compose kernel-backed ops. Whether one does
// for a given run is decided then (the planner may decline the inputs).
func kernelCapable(n *graph.Node) bool {
	if n.Domain == graph.LoomDomain {
		return true
	}
	_, ok := ops.KernelPlanners[ops.PlannerKey(n)]
	return ok
}
