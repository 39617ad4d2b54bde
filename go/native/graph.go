package native

import (
	"math"
	"sync"

	"github.com/loomrt/loom/go/native/internal/cabi"
)

// GraphNode identifies a node of a Graph; ids are dense, in order of creation.
type GraphNode uint32

// Graph is a set of operations with dependency edges, built explicitly (Add*) or recorded by
// a stream capture. It runs only once instantiated (Instantiate). The buffers and kernels its
// nodes use cannot be closed while the graph is open.
type Graph struct {
	c   *core
	dev *Device
	h   cabi.Graph
}

// NewGraph creates an empty graph.
func (d *Device) NewGraph() (*Graph, error) {
	const op = "Device.NewGraph"
	if err := d.c.pin(op); err != nil {
		return nil, err
	}
	defer d.c.unpin()
	h, f := cabi.GraphCreate(d.h)
	if f != nil {
		return nil, fromFailure(op, f)
	}
	return d.wrapGraph(op, h)
}

func (d *Device) wrapGraph(op string, h cabi.Graph) (*Graph, error) {
	c, err := d.newChild(op, "graph", func() { cabi.GraphDestroy(h) })
	if err != nil {
		return nil, err
	}
	g := &Graph{c: c, dev: d, h: h}
	guard(g, c)
	return g, nil
}

// adoptGraph wraps a graph recorded by a capture, taking references to what it uses.
func (d *Device) adoptGraph(op string, h cabi.Graph, refs []capturedRef) (*Graph, error) {
	g, err := d.wrapGraph(op, h)
	if err != nil {
		return nil, err
	}
	for _, r := range refs {
		// The capturing stream holds these references until EndCapture returns, so they are
		// all still open.
		if err := g.c.attach(op, r.c, r.ref); err != nil {
			g.Close()
			return nil, err
		}
	}
	return g, nil
}

// NodeCount is the number of nodes in the graph.
func (g *Graph) NodeCount() int {
	if g.c.pin("Graph.NodeCount") != nil {
		return 0
	}
	defer g.c.unpin()
	return int(cabi.GraphNodeCount(g.h))
}

// nodeIDs converts dependencies without allocating for short lists.
func nodeIDs(deps []GraphNode, scratch *[16]uint32) []uint32 {
	var ids []uint32
	if len(deps) <= len(scratch) {
		ids = scratch[:len(deps)]
	} else {
		ids = make([]uint32, len(deps))
	}
	for i, d := range deps {
		ids[i] = uint32(d)
	}
	return ids
}

// reference pins b for a call on the graph and makes the graph depend on it.
func (g *Graph) reference(op string, b *Buffer) error {
	if b == nil {
		return newError(op, StatusInvalidArgument, "nil buffer")
	}
	if err := g.dev.checkOwner(op, b.c, b.dev); err != nil {
		return err
	}
	if err := b.c.pin(op); err != nil {
		return err
	}
	if err := g.c.attach(op, b.c, b); err != nil {
		b.c.unpin()
		return err
	}
	return nil
}

// AddKernel adds a launch of k with p, after the nodes deps.
func (g *Graph) AddKernel(k *Kernel, p LaunchParams, deps ...GraphNode) (GraphNode, error) {
	const op = "Graph.AddKernel"
	if k == nil {
		return 0, newError(op, StatusInvalidArgument, "nil kernel")
	}
	if err := g.dev.checkOwner(op, k.m.c, k.m.dev); err != nil {
		return 0, err
	}
	if err := p.check(op, g.dev); err != nil {
		return 0, err
	}
	if err := g.c.pin(op); err != nil {
		return 0, err
	}
	defer g.c.unpin()
	if err := k.m.c.pin(op); err != nil {
		return 0, err
	}
	defer k.m.c.unpin()
	if err := p.pin(op); err != nil {
		return 0, err
	}
	defer p.unpin()
	if err := attachLaunch(op, g.c, k, &p); err != nil {
		return 0, err
	}
	var bufs bindingBuffers
	var offs bindingOffsets
	l := p.toC(&bufs, &offs)
	var scratch [16]uint32
	n, f := cabi.GraphAddKernelNode(g.h, g.dev.h, k.h, &l, nodeIDs(deps, &scratch))
	return GraphNode(n), fromFailure(op, f)
}

// attachLaunch makes c depend on the launch's module and buffers (all pinned by the caller).
func attachLaunch(op string, c *core, k *Kernel, p *LaunchParams) error {
	if k != nil {
		if err := c.attach(op, k.m.c, k.m); err != nil {
			return err
		}
	}
	for i := range p.Buffers {
		if err := c.attach(op, p.Buffers[i].Buffer.c, p.Buffers[i].Buffer); err != nil {
			return err
		}
	}
	if p.Violation != nil {
		return c.attach(op, p.Violation.c, p.Violation)
	}
	return nil
}

// AddCopy adds a copy of bytes from src at srcOffset to dst at dstOffset, after deps.
func (g *Graph) AddCopy(dst *Buffer, dstOffset uint64, src *Buffer, srcOffset, bytes uint64, deps ...GraphNode) (GraphNode, error) {
	const op = "Graph.AddCopy"
	if err := g.c.pin(op); err != nil {
		return 0, err
	}
	defer g.c.unpin()
	if err := g.reference(op, dst); err != nil {
		return 0, err
	}
	defer dst.c.unpin()
	if err := g.reference(op, src); err != nil {
		return 0, err
	}
	defer src.c.unpin()
	var scratch [16]uint32
	n, f := cabi.GraphAddCopyNode(g.h, g.dev.h, dst.h, dstOffset, src.h, srcOffset, bytes, nodeIDs(deps, &scratch))
	return GraphNode(n), fromFailure(op, f)
}

// AddFill adds setting bytes of dst from offset to value, after deps.
func (g *Graph) AddFill(dst *Buffer, offset, bytes uint64, value byte, deps ...GraphNode) (GraphNode, error) {
	const op = "Graph.AddFill"
	if err := g.c.pin(op); err != nil {
		return 0, err
	}
	defer g.c.unpin()
	if err := g.reference(op, dst); err != nil {
		return 0, err
	}
	defer dst.c.unpin()
	var scratch [16]uint32
	n, f := cabi.GraphAddFillNode(g.h, g.dev.h, dst.h, offset, bytes, value, nodeIDs(deps, &scratch))
	return GraphNode(n), fromFailure(op, f)
}

// AddEmpty adds a node that does nothing: a join point of deps.
func (g *Graph) AddEmpty(deps ...GraphNode) (GraphNode, error) {
	const op = "Graph.AddEmpty"
	if err := g.c.pin(op); err != nil {
		return 0, err
	}
	defer g.c.unpin()
	var scratch [16]uint32
	n, f := cabi.GraphAddEmptyNode(g.h, g.dev.h, nodeIDs(deps, &scratch))
	return GraphNode(n), fromFailure(op, f)
}

// Instantiate makes an executable copy of the graph. The exec is independent of the graph
// (which may be closed or extended afterwards) but keeps the buffers and kernels it uses open.
func (g *Graph) Instantiate() (*GraphExec, error) {
	const op = "Graph.Instantiate"
	if err := g.c.pin(op); err != nil {
		return nil, err
	}
	defer g.c.unpin()
	h, f := cabi.GraphInstantiate(g.h, g.dev.h)
	if f != nil {
		return nil, fromFailure(op, f)
	}
	// The graph's parents (the device, its buffers and modules) are pinned open by the graph
	// itself, which is pinned here.
	g.c.mu.Lock()
	parents := append([]*core(nil), g.c.parents...)
	refs := append([]any(nil), g.c.parentRefs...)
	g.c.mu.Unlock()
	x := &GraphExec{dev: g.dev, h: h}
	x.c = newCore("graph exec", func() { cabi.GraphExecDestroy(h) })
	for i, p := range parents {
		if err := x.c.attach(op, p, refs[i]); err != nil {
			x.c.finish()
			return nil, err
		}
		if b, ok := refs[i].(*Buffer); ok {
			x.buffers = append(x.buffers, b)
		}
	}
	guard(x, x.c)
	return x, nil
}

// String names the graph ("graph #9").
func (g *Graph) String() string { return g.c.String() }

// Close destroys the graph (its execs stay valid). Idempotent.
func (g *Graph) Close() error { return g.c.close("Graph.Close") }

// GraphExec is an instantiated graph, launched as one operation on a stream. Close waits for
// the streams it was launched on.
type GraphExec struct {
	c   *core
	dev *Device
	h   cabi.GraphExec

	mu      sync.Mutex
	buffers []*Buffer // every buffer the exec may touch (Runtime hazard tracking)
}

// onStream runs call, which enqueues or runs the graph on s, with both handles pinned and the
// graph recorded as a user of s (for Launch and Run).
func (x *GraphExec) onStream(op string, s *Stream, call func() *cabi.Failure) error {
	if err := x.dev.checkOwner(op, s.s.c, s.dev); err != nil {
		return err
	}
	if err := x.c.pin(op); err != nil {
		return err
	}
	defer x.c.unpin()
	if err := s.s.c.pin(op); err != nil {
		return err
	}
	defer s.s.c.unpin()
	if err := s.s.record(op, x.c, x); err != nil {
		return err
	}
	return fromFailure(op, call())
}

// Launch enqueues the whole graph on s, respecting its edges; independent nodes may run
// concurrently.
func (x *GraphExec) Launch(s *Stream) error {
	const op = "GraphExec.Launch"
	if s == nil {
		return newError(op, StatusInvalidArgument, "nil stream")
	}
	return x.onStream(op, s, func() *cabi.Failure { return cabi.GraphExecLaunch(x.h, s.s.h) })
}

// Run runs the whole graph to completion before returning, after the work enqueued on s
// before it. The host backend runs the nodes on the calling goroutine's thread in node order,
// each kernel's blocks on at most maxThreads threads (the caller included; 0: the device's
// worker pool too), which for small graphs avoids the hand-offs of Launch + Synchronize. Other
// backends launch and synchronize.
func (x *GraphExec) Run(s *Stream, maxThreads int) error {
	const op = "GraphExec.Run"
	if s == nil {
		return newError(op, StatusInvalidArgument, "nil stream")
	}
	if maxThreads < 0 {
		return newError(op, StatusInvalidArgument, "maxThreads %d is negative", maxThreads)
	}
	return x.onStream(op, s, func() *cabi.Failure {
		return cabi.GraphExecRun(x.h, s.s.h, uint32(min(maxThreads, math.MaxUint32)))
	})
}

// RunBinding rebinds one kernel node's buffer binding for one RunBound: node Node's binding
// Index uses memory Arg of the run from byte Offset, Bytes long.
type RunBinding = cabi.BindSite

// MaxRunMemories is the most memories one RunBound passes (a bound on a run's list, not on
// what it costs: the first eight pass as direct arguments, the rest pinned for the call).
const MaxRunMemories = 1 << 16

// RunBound is Run with some kernel bindings moved, for this run only, onto memory of the
// caller's: bindings (sorted by node, then Index; each once) name the node, the binding and
// which of mem it uses; a binding whose memory is empty keeps its recorded buffer. This lets a
// recorded graph read its inputs from, and write its outputs to, the caller's slices without
// copying them through device memory. The kernels must only read memory that nothing writes
// during the call, and mem must not be touched by other goroutines until it returns; nothing
// keeps a reference to it afterwards. Host backend only (others fail with
// StatusNotSupported when any binding is used).
func (x *GraphExec) RunBound(s *Stream, maxThreads int, bindings []RunBinding, mem [][]byte) error {
	const op = "GraphExec.RunBound"
	if s == nil {
		return newError(op, StatusInvalidArgument, "nil stream")
	}
	if maxThreads < 0 {
		return newError(op, StatusInvalidArgument, "maxThreads %d is negative", maxThreads)
	}
	if len(mem) > MaxRunMemories {
		return newError(op, StatusInvalidArgument, "%d memories, more than %d", len(mem), MaxRunMemories)
	}
	for i := range bindings {
		b := &bindings[i]
		if int(b.Arg) >= len(mem) {
			return newError(op, StatusInvalidArgument, "binding %d uses memory %d of %d", i, b.Arg, len(mem))
		}
		m := mem[b.Arg]
		if len(m) == 0 {
			continue
		}
		if b.Bytes == 0 || b.Offset > uint64(len(m)) || b.Bytes > uint64(len(m))-b.Offset {
			return newError(op, StatusInvalidArgument, "binding %d (node %d, buffer %d) takes bytes [%d, +%d) of memory %d, which has %d",
				i, b.Node, b.Index, b.Offset, b.Bytes, b.Arg, len(m))
		}
	}
	return x.onStream(op, s, func() *cabi.Failure {
		return cabi.GraphExecRunBound(x.h, s.s.h, uint32(min(maxThreads, math.MaxUint32)), bindings, mem)
	})
}

// UpdateKernelNode replaces the launch parameters of kernel node n (same kernel) for later
// launches. Buffers it binds stay referenced by the exec until it is closed.
func (x *GraphExec) UpdateKernelNode(n GraphNode, p LaunchParams) error {
	const op = "GraphExec.UpdateKernelNode"
	if err := p.check(op, x.dev); err != nil {
		return err
	}
	if err := x.c.pin(op); err != nil {
		return err
	}
	defer x.c.unpin()
	if err := p.pin(op); err != nil {
		return err
	}
	defer p.unpin()
	if err := attachLaunch(op, x.c, nil, &p); err != nil {
		return err
	}
	x.mu.Lock()
	for i := range p.Buffers {
		x.addBuffer(p.Buffers[i].Buffer)
	}
	if p.Violation != nil {
		x.addBuffer(p.Violation)
	}
	x.mu.Unlock()
	var bufs bindingBuffers
	var offs bindingOffsets
	l := p.toC(&bufs, &offs)
	return fromFailure(op, cabi.GraphExecUpdateKernelNode(x.h, x.dev.h, uint32(n), &l))
}

func (x *GraphExec) addBuffer(b *Buffer) {
	for _, have := range x.buffers {
		if have == b {
			return
		}
	}
	x.buffers = append(x.buffers, b)
}

// bufferList is a snapshot of the buffers the exec may touch.
func (x *GraphExec) bufferList() []*Buffer {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]*Buffer(nil), x.buffers...)
}

// String names the exec ("graph exec #10").
func (x *GraphExec) String() string { return x.c.String() }

// Close destroys the exec once the streams it ran on are done. Idempotent.
func (x *GraphExec) Close() error { return x.c.close("GraphExec.Close") }
