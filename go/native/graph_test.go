package native_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/native"
)

// chainGraph is a 100-node graph over n-element vectors: ten independent chains, each a fill
// of its accumulator and eight axpy steps (acc += alpha * x), then an empty join node and nine
// adds that sum the accumulators into total. It mirrors nativedemo's graph.
type chainGraph struct {
	graph  *native.Graph
	alphas [10][8]uint32
	// axpyNodes[c][j] is the node of chain c's j-th axpy step.
	axpyNodes [10][8]native.GraphNode
	x, total  *native.Buffer
	accs      [10]*native.Buffer
}

func buildChainGraph(t testing.TB, r *rand.Rand, dev *native.Device, m *native.Module, n int) *chainGraph {
	t.Helper()
	axpy, add := kernel(t, m, "axpy_u32"), kernel(t, m, "add_u32")
	cg := &chainGraph{}
	// Buffers first: cleanups run last-in first-out, and the graph must go before them.
	cg.x = alloc(t, dev, native.DeviceMemory, uint64(4*n))
	cg.total = alloc(t, dev, native.DeviceMemory, uint64(4*n))
	for c := range cg.accs {
		cg.accs[c] = alloc(t, dev, native.DeviceMemory, uint64(4*n))
	}
	g, err := dev.NewGraph()
	require.NoError(t, err)
	closeLater(t, g)
	cg.graph = g
	var ends []native.GraphNode
	for c := range cg.accs {
		prev, err := g.AddFill(cg.accs[c], 0, uint64(4*n), 0)
		require.NoError(t, err)
		for j := range cg.alphas[c] {
			cg.alphas[c][j] = r.Uint32()
			prev, err = g.AddKernel(axpy, axpyParams(cg.x, cg.accs[c], cg.alphas[c][j], n), prev)
			require.NoError(t, err)
			cg.axpyNodes[c][j] = prev
		}
		ends = append(ends, prev)
	}
	join, err := g.AddEmpty(ends...)
	require.NoError(t, err)
	prev, err := g.AddKernel(add, addParams(cg.accs[0], cg.accs[1], cg.total, n), join)
	require.NoError(t, err)
	for c := 2; c < 10; c++ {
		prev, err = g.AddKernel(add, addParams(cg.total, cg.accs[c], cg.total, n), prev)
		require.NoError(t, err)
	}
	require.Equal(t, 100, g.NodeCount())
	return cg
}

// want is the graph's result for input x, computed in Go.
func (cg *chainGraph) want(x []uint32) []uint32 {
	out := make([]uint32, len(x))
	for i, v := range x {
		for c := range cg.alphas {
			for _, a := range cg.alphas[c] {
				out[i] += a * v
			}
		}
	}
	return out
}

// chainSetup opens a host device, a stream and a chain graph over 1-700 elements with its exec.
func chainSetup(t *testing.T) (*rand.Rand, *native.Stream, int, *chainGraph, *native.GraphExec) {
	t.Helper()
	r := newRand(t)
	dev := openHost(t)
	m := kernels(t, dev)
	s := newStream(t, dev)
	n := 1 + r.IntN(700)
	cg := buildChainGraph(t, r, dev, m, n)
	exec, err := cg.graph.Instantiate()
	require.NoError(t, err)
	closeLater(t, exec)
	return r, s, n, cg, exec
}

func TestGraphOf100NodesMatchesGo(t *testing.T) {
	r, s, n, cg, exec := chainSetup(t)
	// The exec is independent of the graph.
	require.NoError(t, cg.graph.Close())

	for round := 0; round < 3; round++ {
		x := randomU32(r, n)
		require.NoError(t, s.Upload(cg.x, 0, u32Bytes(x)))
		require.NoError(t, exec.Launch(s))
		require.Equal(t, cg.want(x), bytesU32(download(t, s, cg.total)), "round %d", round)
	}

	// Replace one axpy step's alpha; later launches use it.
	cg.alphas[3][5] = r.Uint32()
	require.NoError(t, exec.UpdateKernelNode(cg.axpyNodes[3][5], axpyParams(cg.x, cg.accs[3], cg.alphas[3][5], n)))
	x := randomU32(r, n)
	require.NoError(t, s.Upload(cg.x, 0, u32Bytes(x)))
	require.NoError(t, exec.Launch(s))
	require.Equal(t, cg.want(x), bytesU32(download(t, s, cg.total)))
}

func TestGraphCopyFillEmptyNodes(t *testing.T) {
	r := newRand(t)
	dev := openHost(t)
	s := newStream(t, dev)
	a := alloc(t, dev, native.DeviceMemory, 64)
	b := alloc(t, dev, native.DeviceMemory, 64)
	v := byte(1 + r.IntN(255))
	g, err := dev.NewGraph()
	require.NoError(t, err)
	closeLater(t, g)
	fillA, err := g.AddFill(a, 0, 64, v)
	require.NoError(t, err)
	fillB, err := g.AddFill(b, 0, 64, 0)
	require.NoError(t, err)
	join, err := g.AddEmpty(fillA, fillB)
	require.NoError(t, err)
	_, err = g.AddCopy(b, 8, a, 0, 16, join)
	require.NoError(t, err)
	_, err = g.AddEmpty(native.GraphNode(99))
	require.ErrorIs(t, err, native.ErrInvalidArgument, "a dependency on a node that does not exist")
	exec, err := g.Instantiate()
	require.NoError(t, err)
	closeLater(t, exec)
	require.NoError(t, exec.Launch(s))
	want := make([]byte, 64)
	for i := 8; i < 24; i++ {
		want[i] = v
	}
	require.Equal(t, want, download(t, s, b))

	// The graph and the exec keep the buffers they use open.
	err = a.Close()
	require.ErrorIs(t, err, native.ErrInUse)
	assert.Contains(t, err.Error(), g.String())
	assert.Contains(t, err.Error(), exec.String())
}

func TestStreamCaptureRecordsAGraph(t *testing.T) {
	r := newRand(t)
	dev := openHost(t)
	m := kernels(t, dev)
	axpy := kernel(t, m, "axpy_u32")
	s := newStream(t, dev)
	n := 1 + r.IntN(1000)
	x := alloc(t, dev, native.DeviceMemory, uint64(4*n))
	y := alloc(t, dev, native.DeviceMemory, uint64(4*n))
	alphas := randomU32(r, 5)

	require.NoError(t, s.BeginCapture())
	assert.True(t, s.IsCapturing())
	require.NoError(t, s.Fill(y, 0, uint64(4*n), 0))
	for _, a := range alphas {
		require.NoError(t, s.Launch(axpy, axpyParams(x, y, a, n)))
	}
	// What captured work uses cannot be closed mid-capture.
	require.ErrorIs(t, y.Close(), native.ErrInUse)
	g, err := s.EndCapture()
	require.NoError(t, err)
	closeLater(t, g)
	assert.False(t, s.IsCapturing())
	assert.Equal(t, 1+len(alphas), g.NodeCount())
	exec, err := g.Instantiate()
	require.NoError(t, err)
	closeLater(t, exec)

	for round := 0; round < 2; round++ {
		xv := randomU32(r, n)
		require.NoError(t, s.Upload(x, 0, u32Bytes(xv)))
		require.NoError(t, exec.Launch(s))
		got := bytesU32(download(t, s, y))
		for i := range xv {
			var want uint32
			for _, a := range alphas {
				want += a * xv[i]
			}
			require.Equal(t, want, got[i])
		}
	}
}

func TestCaptureRefusesHostCopies(t *testing.T) {
	dev := openHost(t)
	s := newStream(t, dev)
	b, err := dev.Alloc(native.DeviceMemory, 16)
	require.NoError(t, err)
	require.NoError(t, s.BeginCapture())
	require.ErrorIs(t, s.BeginCapture(), native.ErrCapture)
	require.NoError(t, s.Fill(b, 0, 16, 1))
	err = s.Upload(b, 0, make([]byte, 16))
	require.ErrorIs(t, err, native.ErrCapture)
	assert.Contains(t, err.Error(), "not allowed during stream capture")
	_, err = s.EndCapture()
	require.ErrorIs(t, err, native.ErrCapture, "the capture was invalidated")
	_, err = s.EndCapture()
	require.ErrorIs(t, err, native.ErrCapture, "no capture to end")
	// Usable again, and the failed capture let go of the buffer.
	require.NoError(t, s.Fill(b, 0, 16, 1))
	require.NoError(t, s.Synchronize())
	require.NoError(t, b.Close())
}

// Run executes the graph on the calling thread: results equal Launch's, it is ordered after
// work enqueued before it, any thread limit gives the same result, and a failed stream refuses
// it for good.
func TestGraphRunInlineMatchesLaunch(t *testing.T) {
	r, s, n, cg, exec := chainSetup(t)
	for _, threads := range []int{1, 2, 0} {
		x := randomU32(r, n)
		// The upload is enqueued, not waited for: Run must wait for it.
		require.NoError(t, s.Upload(cg.x, 0, u32Bytes(x)))
		require.NoError(t, exec.Run(s, threads))
		require.Equal(t, cg.want(x), bytesU32(download(t, s, cg.total)), "max threads %d", threads)
	}
	require.ErrorIs(t, exec.Run(nil, 1), native.ErrInvalidArgument)
	require.ErrorIs(t, exec.Run(s, -1), native.ErrInvalidArgument)

	require.NoError(t, s.InjectFault(native.FaultNextOperation))
	require.ErrorIs(t, exec.Run(s, 1), native.ErrDevice, "the injected fault fails the run")
	require.ErrorIs(t, exec.Run(s, 1), native.ErrDevice, "and the stream stays failed")
}

// RunBound runs the recorded kernels on the caller's memory for that run only: every axpy
// reads x from a Go slice and the adds write total into another, the device's x and total
// buffers are neither read nor written, and the next Run uses them again; memories past the
// eight passed as direct arguments (pinned for the call) work the same. Bad binding lists are
// refused before anything runs.
func TestGraphRunBoundUsesCallerMemory(t *testing.T) {
	r, s, n, cg, exec := chainSetup(t)
	// Node ids: chain c is its fill (9c) and axpy steps (9c+1..9c+8); the join is 90 and the
	// adds 91..99 (the first reads accs 0 and 1; each writes total at binding 2, and the others
	// read it at binding 0).
	bytes := uint64(4 * n)
	var bindings []native.RunBinding
	for c := range cg.axpyNodes {
		for j := range cg.axpyNodes[c] {
			bindings = append(bindings, native.RunBinding{Node: uint32(cg.axpyNodes[c][j]), Index: 0, Arg: 0, Bytes: bytes})
		}
	}
	bindings = append(bindings, native.RunBinding{Node: 91, Index: 2, Arg: 1, Bytes: bytes})
	for node := uint32(92); node < 100; node++ {
		bindings = append(bindings, native.RunBinding{Node: node, Index: 0, Arg: 1, Bytes: bytes},
			native.RunBinding{Node: node, Index: 2, Arg: 1, Bytes: bytes})
	}
	deviceX := randomU32(r, n)
	require.NoError(t, s.Upload(cg.x, 0, u32Bytes(deviceX)))
	sentinel := randomU32(r, n)
	require.NoError(t, s.Upload(cg.total, 0, u32Bytes(sentinel)))
	// moved uses memories xa and ta for x and total.
	moved := func(xa, ta uint32) []native.RunBinding {
		out := append([]native.RunBinding{}, bindings...)
		for i := range out {
			if out[i].Arg == 0 {
				out[i].Arg = xa
			} else {
				out[i].Arg = ta
			}
		}
		return out
	}
	for _, args := range [][2]uint32{{0, 1}, {9, 40}, {3, 70}} {
		for _, threads := range []int{1, 0} {
			x := randomU32(r, n)
			out := make([]byte, bytes)
			mem := make([][]byte, args[1]+1)
			mem[args[0]], mem[args[1]] = u32Bytes(x), out
			require.NoError(t, exec.RunBound(s, threads, moved(args[0], args[1]), mem))
			require.Equal(t, cg.want(x), bytesU32(out), "memories %v, max threads %d", args, threads)
			require.Equal(t, sentinel, bytesU32(download(t, s, cg.total)), "the recorded total is untouched")
			require.Equal(t, deviceX, bytesU32(download(t, s, cg.x)))
		}
	}
	// A memory left nil keeps the recorded buffers; so does a plain Run.
	require.NoError(t, exec.RunBound(s, 1, bindings, make([][]byte, 2)))
	require.Equal(t, cg.want(deviceX), bytesU32(download(t, s, cg.total)))
	require.NoError(t, exec.RunBound(s, 1, moved(20, 30), make([][]byte, 31)))
	require.Equal(t, cg.want(deviceX), bytesU32(download(t, s, cg.total)))

	short := make([]byte, bytes-4)
	mem := [][]byte{short, make([]byte, bytes)}
	err := exec.RunBound(s, 1, bindings, mem)
	require.ErrorIs(t, err, native.ErrInvalidArgument)
	require.ErrorContains(t, err, "memory 0")
	mem[0] = u32Bytes(deviceX)
	bad := append([]native.RunBinding{}, bindings...)
	bad[0], bad[1] = bad[1], bad[0]
	require.ErrorContains(t, exec.RunBound(s, 1, bad, mem), "out of order")
	bad = append([]native.RunBinding{}, bindings...)
	bad[0].Arg = 2
	require.ErrorIs(t, exec.RunBound(s, 1, bad, mem), native.ErrInvalidArgument, "memory 2 of 2")
	require.ErrorIs(t, exec.RunBound(s, 1, bindings, make([][]byte, native.MaxRunMemories+1)), native.ErrInvalidArgument)
	bad = []native.RunBinding{{Node: 0, Index: 0, Arg: 0, Bytes: bytes}} // node 0 is a fill
	require.ErrorContains(t, exec.RunBound(s, 1, bad, mem), "not a kernel node")
	require.ErrorIs(t, exec.RunBound(nil, 1, bindings, mem), native.ErrInvalidArgument)
	require.ErrorIs(t, exec.RunBound(s, 1, bindings, nil), native.ErrInvalidArgument, "no memories for the bindings")
	// Refusals run nothing and fail nothing.
	require.NoError(t, exec.Run(s, 1))
	require.Equal(t, cg.want(deviceX), bytesU32(download(t, s, cg.total)))
}

// BenchmarkGraphRun100Inline runs a 100-node graph of small kernels (4 blocks each) on the
// calling thread alone and with the pool's helpers (threads=0), which fork once per run and
// step through the nodes together: the per-launch cost of a multi-threaded run.
func BenchmarkGraphRun100Inline(b *testing.B) {
	for _, threads := range []int{1, 0} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			dev := openHost(b)
			m := kernels(b, dev)
			s := newStream(b, dev)
			cg := buildChainGraph(b, r, dev, m, 256)
			exec, err := cg.graph.Instantiate()
			require.NoError(b, err)
			closeLater(b, exec)
			b.ReportAllocs()
			for b.Loop() {
				if err := exec.Run(s, threads); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/node")
		})
	}
}

// An inline stream runs each operation before the enqueue returns, in order, with the same
// results and failure rules as a threaded stream.
func TestInlineStreamRunsOnEnqueue(t *testing.T) {
	r := newRand(t)
	dev := openHost(t)
	m := kernels(t, dev)
	for _, threads := range []int{1, 0} {
		s, err := dev.NewStreamWith(native.StreamOptions{Inline: true, MaxThreads: threads})
		require.NoError(t, err)
		closeLater(t, s)
		n := 1 + r.IntN(500)
		cg := buildChainGraph(t, r, dev, m, n)
		exec, err := cg.graph.Instantiate()
		require.NoError(t, err)
		closeLater(t, exec)
		x := randomU32(r, n)
		require.NoError(t, s.Upload(cg.x, 0, u32Bytes(x)))
		require.NoError(t, exec.Launch(s))
		require.Equal(t, cg.want(x), bytesU32(download(t, s, cg.total)), "max threads %d", threads)
		require.NoError(t, exec.Run(s, threads))
		require.Equal(t, cg.want(x), bytesU32(download(t, s, cg.total)))
		require.NoError(t, s.InjectFault(native.FaultNextOperation))
		require.NoError(t, exec.Launch(s), "the fault shows at the next synchronize")
		require.ErrorIs(t, s.Synchronize(), native.ErrDevice)
	}
	_, err := dev.NewStreamWith(native.StreamOptions{MaxThreads: -1})
	require.ErrorIs(t, err, native.ErrInvalidArgument)
}
