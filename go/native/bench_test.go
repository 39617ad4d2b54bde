package native_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/native/internal/cabi"
)

// BenchmarkCgoCall is the floor: one cgo crossing into the shim (loom_abi_version).
func BenchmarkCgoCall(b *testing.B) {
	var sink uint32
	for b.Loop() {
		sink += cabi.ABIVersion()
	}
	_ = sink
}

var oneBlock = native.LaunchParams{Grid: native.Dim3{X: 1}, Block: native.Dim3{X: 1}}

// syncEvery bounds the queue a launch loop builds up, so the benchmark measures enqueueing
// rather than memory growth.
const syncEvery = 1024

// BenchmarkLaunchEmptyKernel is the cost of Stream.Launch of an empty host kernel: argument
// conversion, handle pinning and one cgo crossing into the shim's enqueue (the kernel runs on
// the stream's thread meanwhile; the loop synchronizes every 1024 launches).
func BenchmarkLaunchEmptyKernel(b *testing.B) {
	dev := openHost(b)
	noop := kernel(b, kernels(b, dev), "noop")
	s := newStream(b, dev)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := s.Launch(noop, oneBlock); err != nil {
			b.Fatal(err)
		}
		if i++; i%syncEvery == 0 {
			require.NoError(b, s.Synchronize())
		}
	}
	require.NoError(b, s.Synchronize())
}

// BenchmarkLaunchEmptyKernelWithBuffers adds three buffer bindings and a scalar blob.
func BenchmarkLaunchEmptyKernelWithBuffers(b *testing.B) {
	dev := openHost(b)
	noop := kernel(b, kernels(b, dev), "noop")
	s := newStream(b, dev)
	x := alloc(b, dev, native.DeviceMemory, 64)
	p := addParams(x, x, x, 16)
	p.Grid = native.Dim3{X: 1}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := s.Launch(noop, p); err != nil {
			b.Fatal(err)
		}
		if i++; i%syncEvery == 0 {
			require.NoError(b, s.Synchronize())
		}
	}
	require.NoError(b, s.Synchronize())
}

// BenchmarkRuntimeLaunchEmptyKernel is Runtime.Launch: admission and hazard tracking on top.
func BenchmarkRuntimeLaunchEmptyKernel(b *testing.B) {
	dev := openHost(b)
	noop := kernel(b, kernels(b, dev), "noop")
	rt := newRuntime(b, dev, nil)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := rt.Launch(noop, oneBlock); err != nil {
			b.Fatal(err)
		}
		if i++; i%syncEvery == 0 {
			require.NoError(b, rt.SynchronizeLane(native.Compute))
		}
	}
	require.NoError(b, rt.SynchronizeLane(native.Compute))
}

// noopGraph is 100 empty-kernel nodes: ten chains of ten, the first node of each chain
// depending on the previous chain's first node.
func noopGraph(b *testing.B, dev *native.Device, noop *native.Kernel) *native.GraphExec {
	g, err := dev.NewGraph()
	require.NoError(b, err)
	closeLater(b, g)
	var prevHead native.GraphNode
	for c := 0; c < 10; c++ {
		var deps []native.GraphNode
		if c > 0 {
			deps = []native.GraphNode{prevHead}
		}
		node, err := g.AddKernel(noop, oneBlock, deps...)
		require.NoError(b, err)
		prevHead = node
		for j := 1; j < 10; j++ {
			node, err = g.AddKernel(noop, oneBlock, node)
			require.NoError(b, err)
		}
	}
	require.Equal(b, 100, g.NodeCount())
	exec, err := g.Instantiate()
	require.NoError(b, err)
	closeLater(b, exec)
	return exec
}

// BenchmarkGraphLaunch100Nodes launches a 100-node graph of empty kernels and waits for it.
func BenchmarkGraphLaunch100Nodes(b *testing.B) {
	dev := openHost(b)
	exec := noopGraph(b, dev, kernel(b, kernels(b, dev), "noop"))
	s := newStream(b, dev)
	b.ReportAllocs()
	for b.Loop() {
		if err := exec.Launch(s); err != nil {
			b.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamLaunch100Kernels is the same work as BenchmarkGraphLaunch100Nodes as 100
// separate launches on one stream, for comparison.
func BenchmarkStreamLaunch100Kernels(b *testing.B) {
	dev := openHost(b)
	noop := kernel(b, kernels(b, dev), "noop")
	s := newStream(b, dev)
	b.ReportAllocs()
	for b.Loop() {
		for j := 0; j < 100; j++ {
			if err := s.Launch(noop, oneBlock); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGraphLaunch100NodesWork replays nativedemo's graph: 100 nodes doing real work over
// 1024-element vectors (10 chains of fill + 8 axpy, a join, 9 adds).
func BenchmarkGraphLaunch100NodesWork(b *testing.B) {
	r := newRand(b)
	dev := openHost(b)
	cg := buildChainGraph(b, r, dev, kernels(b, dev), 1024)
	exec, err := cg.graph.Instantiate()
	require.NoError(b, err)
	closeLater(b, exec)
	s := newStream(b, dev)
	require.NoError(b, s.Upload(cg.x, 0, u32Bytes(randomU32(r, 1024))))
	b.ReportAllocs()
	for b.Loop() {
		if err := exec.Launch(s); err != nil {
			b.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
}
