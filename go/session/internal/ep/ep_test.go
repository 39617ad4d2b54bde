package ep

import (
	"testing"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/native"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHostProvider(t *testing.T) {
	var p Provider = HostProvider{}
	assert.Equal(t, Host, p.Name())
	assert.Empty(t, p.Available())
	assert.Equal(t, native.BackendHost, p.Backend())
	assert.Equal(t, HostVisible, p.Memory())
	assert.True(t, p.Plans())
	dev, err := p.Open(1)
	require.NoError(t, err)
	require.NoError(t, dev.Close())

	body := &graph.Graph{}
	ifNode := &graph.Node{Name: "if", OpType: "If", Attrs: []*graph.Attribute{{Name: "then_branch", Graph: body}}}
	fused := &graph.Node{Name: "f", OpType: "FusedConv", Domain: graph.LoomDomain}
	unknown := &graph.Node{Name: "u", OpType: "NoSuchOp"}

	c := p.Capability(ifNode)
	assert.Equal(t, Placement{Provider: Host, Cause: CauseControlFlow,
		Reason: "control flow runs on the host; its body's ops are placed on their own"}, c)
	assert.Equal(t, "host: "+c.Reason, c.HostReason())
	assert.Equal(t, Placement{Provider: Host, Kernel: true, Cause: CauseKernel}, p.Capability(fused))
	assert.Equal(t, "host: no Loom kernel for this op", p.Capability(fused).HostReason())
	assert.Equal(t, Placement{Provider: Host, Cause: CauseNoKernel, Reason: "no Loom kernel for NoSuchOp"}, p.Capability(unknown))
}

func TestCUDAProvider(t *testing.T) {
	fused := &graph.Node{Name: "f", OpType: "FusedConv", Domain: graph.LoomDomain}
	unknown := &graph.Node{Name: "u", OpType: "NoSuchOp"}
	var p Provider = CUDAProvider{}
	assert.Equal(t, CUDA, p.Name())
	assert.Equal(t, native.BackendCUDA, p.Backend())
	assert.Equal(t, DeviceMemory, p.Memory())
	assert.True(t, p.Plans(), "plans run on CUDA with device arenas")
	assert.Equal(t, Placement{Provider: CUDA, Kernel: true, Cause: CauseKernel}, p.Capability(fused))
	assert.Equal(t, "no Loom kernel for this op: it runs as a Go host function", p.Capability(unknown).Fallback)
	assert.Equal(t, Host, p.Capability(unknown).Provider)

	off := CUDAProvider{Unavailable: "CUDA unavailable: no driver"}
	assert.Equal(t, Placement{Provider: Host, Kernel: true, Cause: CauseKernel, Fallback: off.Unavailable}, off.Capability(fused))
}

func TestSelect(t *testing.T) {
	placer, runsOn := Select(Host, false)
	assert.Equal(t, Host, placer.Name())
	assert.Equal(t, Host, runsOn.Name())

	cuda := NewCUDA()
	placer, runsOn = Select(CUDA, false)
	assert.Equal(t, CUDA, placer.Name(), "a session that asked for CUDA is placed by the CUDA provider")
	placerAuto, runsOnAuto := Select(Auto, false)
	if cuda.Available() == "" {
		assert.Equal(t, CUDA, runsOn.Name())
		assert.Equal(t, CUDA, placerAuto.Name())
		assert.Equal(t, CUDA, runsOnAuto.Name())
		return
	}
	assert.Equal(t, Host, runsOn.Name(), "without CUDA (%s) the session runs on the host", cuda.Available())
	assert.Equal(t, cuda.Available(), placer.Available())
	assert.Equal(t, Host, placerAuto.Name())
	assert.Equal(t, Host, runsOnAuto.Name())
}

// The stand-in places as CUDA does where CUDA is available and runs on a discrete host device.
func TestCUDAStandIn(t *testing.T) {
	placer, runsOn := Select(CUDA, true)
	require.Equal(t, CUDAStandIn{}, placer)
	require.Equal(t, CUDAStandIn{}, runsOn)
	host, _ := Select(Host, true)
	assert.Equal(t, Host, host.Name(), "the stand-in only stands in for CUDA")
	auto, _ := Select(Auto, true)
	assert.NotEqual(t, Name(""), auto.Name())
	assert.NotEqual(t, CUDAStandIn{}, auto, "auto never picks the stand-in")

	var p Provider = CUDAStandIn{}
	assert.Equal(t, CUDA, p.Name())
	assert.Equal(t, "", p.Available())
	assert.Equal(t, native.BackendHost, p.Backend())
	assert.Equal(t, DeviceMemory, p.Memory())
	assert.Equal(t, CUDAProvider{}.Plans(), p.Plans())
	for _, n := range []*graph.Node{{OpType: "Add"}, {OpType: "NoSuchOp"}, {OpType: "If"}, {Domain: graph.LoomDomain, OpType: "FusedConv"}} {
		assert.Equal(t, CUDAProvider{}.Capability(n), p.Capability(n), n.OpType)
	}
	dev, err := p.Open(1)
	require.NoError(t, err)
	defer dev.Close()
	assert.True(t, dev.Discrete())
	assert.Equal(t, native.BackendHost, dev.Backend())
}

func TestPlaceGraph(t *testing.T) {
	inner := &graph.Graph{Nodes: []*graph.Node{{Name: "in", OpType: "NoSuchOp"}}}
	outer := &graph.Node{Name: "if", OpType: "If", Attrs: []*graph.Attribute{{Name: "then_branch", Graph: inner}}}
	g := &graph.Graph{Nodes: []*graph.Node{outer}}
	ps := PlaceGraph(g, HostProvider{})
	require.Len(t, ps, 2, "the subgraph's nodes are placed too")
	assert.Equal(t, CauseControlFlow, ps.Of(outer).Cause)
	assert.Equal(t, CauseNoKernel, ps.Of(inner.Nodes[0]).Cause)
	stranger := &graph.Node{Name: "x", OpType: "NoSuchOp"}
	assert.Equal(t, HostProvider{}.Capability(stranger), ps.Of(stranger), "a node of no placed graph is placed on the host's terms")
}
