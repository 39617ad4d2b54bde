// Package ep holds the execution providers of an InferenceSession, in the spirit of ONNX
// Runtime's IExecutionProvider and ggml's backend table: a Provider says, node by node, whether
// it takes the node and why not (Capability), which device backend it opens and what memory
// its runs see (Open, Memory), and whether compiled run plans replay on it (Plans). A session
// asks its provider once, when it is built (PlaceGraph), and every report (the fallback report,
// a run's trace, PlanReport) reads the answers from there.
//
// Adding a provider is one file here: a type implementing Provider and a case in Select.
package ep

import (
	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/ops"
)

// Name names an execution provider (session.ExecutionProvider).
type Name string

// The execution providers' names.
const (
	// Host runs everything on the host backend.
	Host Name = "host"
	// CUDA runs Loom kernels on CUDA device 0; without a driver or device a session falls
	// back to the host and its placements say why.
	CUDA Name = "cuda"
	// Auto is CUDA when a driver and a device exist, else the host.
	Auto Name = "auto"
)

// Memory is the kind of memory a provider's device allocates.
type Memory uint8

const (
	// HostVisible memory is the host's: the Go side reads and writes it in place.
	HostVisible Memory = iota
	// DeviceMemory is the device's own: data crosses with uploads and downloads.
	DeviceMemory
)

// Provider is one execution provider.
type Provider interface {
	// Name is the provider's name.
	Name() Name
	// Available is "" when the provider can run on this machine, else why not.
	Available() string
	// Capability places node n: on this provider (Placement.Provider == Name()), or on the
	// host with the reason in Placement.Fallback. The host provider takes every node.
	Capability(n *graph.Node) Placement
	// Backend is the go/native backend of the provider's device.
	Backend() native.Backend
	// Open opens the provider's device with workers host worker threads (0: the default).
	Open(workers int) (*native.Device, error)
	// Memory is the kind of memory the device allocates; data transfer between the Go side
	// and the device is a view (HostVisible) or an upload and a download (DeviceMemory).
	Memory() Memory
	// Plans reports whether compiled run plans (an arena of the device's memory per instance,
	// segments replayed as device graphs; host steps view a host-visible arena in place and
	// copy across the seams of a DeviceMemory one) run on the provider.
	Plans() bool
	// SaveKernel is the provider's save step for an EP context partition (save.go): the
	// module image of a kernel it compiled, which RestoreKernel loads back without compiling.
	SaveKernel(a *loom.Artifact) ([]byte, error)
	// RestoreKernel is the restore step: a copy of a that device.LoadArtifact loads from
	// image; dir is a private directory for files the device loads from (see NeedsDir).
	RestoreKernel(a loom.Artifact, image []byte, dir string) (*loom.Artifact, error)
	// NeedsDir reports whether RestoreKernel writes files into its directory.
	NeedsDir() bool
}

// HostProvider is the host provider: Loom kernels on the host backend where a kernel planner
// exists for the op, the op's Go host function otherwise. It takes every node.
type HostProvider struct{}

// Name is Host.
func (HostProvider) Name() Name { return Host }

// Available is always "": the host runs anywhere.
func (HostProvider) Available() string { return "" }

// Capability places n on the host: on a kernel when a planner exists for its op.
func (HostProvider) Capability(n *graph.Node) Placement {
	switch {
	case HostNatured(n):
		return Placement{Provider: Host, Cause: CauseControlFlow,
			Reason: "control flow runs on the host; its body's ops are placed on their own"}
	case !KernelCapable(n):
		return Placement{Provider: Host, Cause: CauseNoKernel, Reason: "no Loom kernel for " + n.OpType}
	}
	return Placement{Provider: Host, Kernel: true, Cause: CauseKernel}
}

// Backend is the host backend.
func (HostProvider) Backend() native.Backend { return native.BackendHost }

// Open opens host device 0 with workers pool threads.
func (p HostProvider) Open(workers int) (*native.Device, error) { return open(p.Backend(), workers) }

// Memory is HostVisible.
func (HostProvider) Memory() Memory { return HostVisible }

// Plans is true: compiled run plans run on the host.
func (HostProvider) Plans() bool { return true }

// CUDAProvider is the CUDA provider: the nodes with a Loom kernel run on CUDA device 0;
// host-natured ops (control flow) and the ops without a kernel run on the host. Unavailable,
// when not "", is why CUDA cannot be used: then every node runs on the host.
type CUDAProvider struct{ Unavailable string }

// NewCUDA probes for a CUDA driver and device.
func NewCUDA() CUDAProvider {
	n, err := native.Devices(native.BackendCUDA)
	switch {
	case err != nil:
		return CUDAProvider{Unavailable: "CUDA unavailable: " + err.Error()}
	case n == 0:
		return CUDAProvider{Unavailable: "CUDA driver present but no CUDA device"}
	}
	return CUDAProvider{}
}

// Name is CUDA.
func (CUDAProvider) Name() Name { return CUDA }

// Available is "" when a driver and a device were found, else why not.
func (c CUDAProvider) Available() string { return c.Unavailable }

// Capability places n on CUDA when a kernel may run it and CUDA is available, else on the
// host with the reason in Fallback.
func (c CUDAProvider) Capability(n *graph.Node) Placement {
	p := HostProvider{}.Capability(n)
	switch {
	case c.Unavailable != "":
		p.Fallback = c.Unavailable
	case p.Cause == CauseControlFlow:
		p.Fallback = p.Reason
	case p.Cause == CauseNoKernel:
		p.Fallback = "no Loom kernel for this op: it runs as a Go host function"
	default:
		p.Provider = CUDA
	}
	return p
}

// Backend is the CUDA backend.
func (CUDAProvider) Backend() native.Backend { return native.BackendCUDA }

// Open opens CUDA device 0 (workers is the host pool's size for the backend's host work).
func (p CUDAProvider) Open(workers int) (*native.Device, error) { return open(p.Backend(), workers) }

// Memory is DeviceMemory.
func (CUDAProvider) Memory() Memory { return DeviceMemory }

// Plans is true: compiled run plans keep their arenas in device memory there (values stay on
// the device between kernel steps; copies only at the graph's inputs and outputs and at the
// seams around host steps, see internal/plan's seams.go) and replay their kernel segments as
// device graphs.
func (CUDAProvider) Plans() bool { return true }

func open(b native.Backend, workers int) (*native.Device, error) {
	return native.Open(b, 0, &native.OpenOptions{WorkerThreads: workers})
}

// CUDAStandIn is the CUDA provider on a machine without a GPU, for tests: it places every
// node as CUDAProvider does where CUDA is available (Name is CUDA, and so are the placements
// and the reports that read them), and runs on a host device in discrete-memory mode
// (native.OpenOptions.Discrete): data crosses between the Go side and the device only by
// uploads and downloads, weights are device copies, the stream runs asynchronously as a GPU's
// does, and fresh device memory holds 0xFF bytes. A missing or misplaced transfer on the CUDA
// path then fails here rather than on the first GPU. Its kernels are the host target's builds
// of the same Loom sources and specializations.
type CUDAStandIn struct{}

// Name is CUDA.
func (CUDAStandIn) Name() Name { return CUDA }

// Available is always "": the stand-in runs anywhere.
func (CUDAStandIn) Available() string { return "" }

// Capability is CUDAProvider's where CUDA is available.
func (CUDAStandIn) Capability(n *graph.Node) Placement { return CUDAProvider{}.Capability(n) }

// Backend is the host backend.
func (CUDAStandIn) Backend() native.Backend { return native.BackendHost }

// Open opens host device 0 in discrete-memory mode with workers pool threads.
func (CUDAStandIn) Open(workers int) (*native.Device, error) {
	return native.Open(native.BackendHost, 0, &native.OpenOptions{WorkerThreads: workers, Discrete: true})
}

// Memory is DeviceMemory, as CUDA's.
func (CUDAStandIn) Memory() Memory { return DeviceMemory }

// Plans is CUDAProvider's.
func (CUDAStandIn) Plans() bool { return CUDAProvider{}.Plans() }

// Select is the provider of a session that asked for requested (Host, CUDA or Auto), which
// places its nodes, and the provider the session runs on: CUDA when asked for (or Auto) and
// available, else the host. A session that asked for CUDA keeps the CUDA provider for its
// placements even when CUDA is unavailable, so that they say why every node runs on the host.
// With standIn, a session that asked for CUDA places and runs on CUDAStandIn instead
// (whether or not a GPU exists).
func Select(requested Name, standIn bool) (placer, runsOn Provider) {
	if requested == CUDA && standIn {
		return CUDAStandIn{}, CUDAStandIn{}
	}
	if requested == Host {
		return HostProvider{}, HostProvider{}
	}
	cuda := NewCUDA()
	switch {
	case cuda.Available() == "":
		return cuda, cuda
	case requested == CUDA:
		return cuda, HostProvider{}
	}
	return HostProvider{}, HostProvider{}
}

// HostNatured reports whether n runs on the host on every provider: control flow (If, Loop,
// Scan, SequenceMap and any node carrying subgraphs).
func HostNatured(n *graph.Node) bool {
	return n.Traits().ControlFlow || n.HasSubgraphs()
}

// KernelCapable reports whether a Loom kernel may run n: the ops with a kernel planner
// (ops.KernelPlanners) and Loom's fused ops, which compose kernel-backed ops. Whether one
// does for a given run is decided then (the planner may decline the inputs).
func KernelCapable(n *graph.Node) bool {
	if n.Domain == graph.LoomDomain {
		return true
	}
	_, ok := ops.KernelPlanners[ops.PlannerKey(n)]
	return ok
}
