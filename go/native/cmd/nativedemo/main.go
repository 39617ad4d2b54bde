// Command nativedemo exercises go/native end to end on the host backend: it builds a 100-node
// graph of kernels that do real work, replays it many times, checks the result against the
// same computation in Go, and prints the timing. Then it tries the CUDA backend: without a
// driver it prints the backend's error (which names the libraries it tried); with a device it
// runs a small NVRTC-compiled kernel and checks it.
//
// The graph over n-element uint32 vectors: ten chains, each a fill of its accumulator and
// eight axpy steps (acc += alpha * x); chain c's end and the previous reduction step feed
// grand += acc_c. grand is not reset between replays, so after R replays it holds R times one
// replay's sum: a replay that ran twice, or not at all, shows.
//
//	go run ./go/native/cmd/nativedemo [-replays 10000] [-n 1024] [-workers 0]
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/native/internal/testkernels"
)

func main() {
	replays := flag.Int("replays", 10000, "graph replays")
	n := flag.Int("n", 1024, "vector length")
	workers := flag.Int("workers", 0, "host worker threads (0: hardware concurrency)")
	flag.Parse()
	if *replays < 1 || *n < 1 {
		fmt.Fprintln(os.Stderr, "nativedemo: -replays and -n must be positive")
		os.Exit(2)
	}
	if err := runHost(*replays, *n, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "nativedemo: host:", err)
		os.Exit(1)
	}
	if err := runCUDA(); err != nil {
		fmt.Fprintln(os.Stderr, "nativedemo: cuda:", err)
		os.Exit(1)
	}
}

// closer collects Close calls to run in reverse order, joining their errors into *err.
type closer []func() error

func (c *closer) add(f func() error) { *c = append(*c, f) }

func (c closer) closeAll(err *error) {
	for i := len(c) - 1; i >= 0; i-- {
		*err = errors.Join(*err, c[i]())
	}
}

func runHost(replays, n, workers int) (err error) {
	var cl closer
	defer cl.closeAll(&err)
	dev, err := native.Open(native.BackendHost, 0, &native.OpenOptions{WorkerThreads: workers})
	if err != nil {
		return err
	}
	cl.add(dev.Close)
	p := dev.Props()
	fmt.Printf("host device: %s, target %s, %d worker threads\n", p.Name, p.Target, p.ComputeUnits)

	mod, err := testkernels.Load(dev)
	if err != nil {
		return err
	}
	cl.add(mod.Close)
	axpy, err := mod.Kernel("axpy_u32")
	if err != nil {
		return err
	}
	add, err := mod.Kernel("add_u32")
	if err != nil {
		return err
	}
	stream, err := dev.NewStream()
	if err != nil {
		return err
	}
	cl.add(stream.Close)

	bytes := uint64(4 * n)
	newBuffer := func() (*native.Buffer, error) {
		b, err := dev.Alloc(native.DeviceMemory, bytes)
		if err == nil {
			cl.add(b.Close)
		}
		return b, err
	}
	x, err := newBuffer()
	if err != nil {
		return err
	}
	grand, err := newBuffer()
	if err != nil {
		return err
	}
	var accs [10]*native.Buffer
	for c := range accs {
		if accs[c], err = newBuffer(); err != nil {
			return err
		}
	}

	r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	grid, block := native.Dim3{X: uint32((n + 63) / 64)}, native.Dim3{X: 64}
	var alphas [10][8]uint32
	graph, err := dev.NewGraph()
	if err != nil {
		return err
	}
	cl.add(graph.Close)
	var reduce native.GraphNode
	for c := range accs {
		prev, err := graph.AddFill(accs[c], 0, bytes, 0)
		if err != nil {
			return err
		}
		for j := range alphas[c] {
			alphas[c][j] = r.Uint32()
			prev, err = graph.AddKernel(axpy, native.LaunchParams{
				Grid: grid, Block: block,
				Buffers: []native.Binding{{Buffer: x}, {Buffer: accs[c]}},
				Scalars: new(native.Scalars).Uint32(alphas[c][j]).Uint32(uint32(n)).Bytes(),
			}, prev)
			if err != nil {
				return err
			}
		}
		deps := []native.GraphNode{prev}
		if c > 0 {
			deps = append(deps, reduce)
		}
		reduce, err = graph.AddKernel(add, native.LaunchParams{
			Grid: grid, Block: block,
			Buffers: []native.Binding{{Buffer: grand}, {Buffer: accs[c]}, {Buffer: grand}},
			Scalars: new(native.Scalars).Uint32(uint32(n)).Bytes(),
		}, deps...)
		if err != nil {
			return err
		}
	}
	exec, err := graph.Instantiate()
	if err != nil {
		return err
	}
	cl.add(exec.Close)
	fmt.Printf("graph: %d nodes (10 chains of fill + 8 axpy, 10 reduction adds) over %d elements\n", graph.NodeCount(), n)

	xs := make([]uint32, n)
	for i := range xs {
		xs[i] = r.Uint32()
	}
	xb := make([]byte, bytes)
	for i, v := range xs {
		binary.NativeEndian.PutUint32(xb[4*i:], v)
	}
	if err := stream.Upload(x, 0, xb); err != nil {
		return err
	}
	if err := stream.Fill(grand, 0, bytes, 0); err != nil {
		return err
	}
	if err := stream.Synchronize(); err != nil {
		return err
	}

	start := time.Now()
	for i := 1; i <= replays; i++ {
		if err := exec.Launch(stream); err != nil {
			return err
		}
		if i%100 == 0 || i == replays {
			if err := stream.Synchronize(); err != nil {
				return err
			}
		}
	}
	elapsed := time.Since(start)

	out := make([]byte, bytes)
	if err := stream.Download(out, grand, 0); err != nil {
		return err
	}
	if err := stream.Synchronize(); err != nil {
		return err
	}
	var alphaSum uint32
	for c := range alphas {
		for _, a := range alphas[c] {
			alphaSum += a
		}
	}
	for i, v := range xs {
		want := uint32(replays) * alphaSum * v
		if got := binary.NativeEndian.Uint32(out[4*i:]); got != want {
			return fmt.Errorf("element %d after %d replays: got %d, want %d", i, replays, got, want)
		}
	}
	fmt.Printf("replayed %d times in %v (%.1f µs per replay, %.0f ns per node); result matches Go\n",
		replays, elapsed.Round(time.Millisecond), float64(elapsed.Microseconds())/float64(replays),
		float64(elapsed.Nanoseconds())/float64(replays*100))
	return nil
}

const cudaAdd = `extern "C" __global__ void add_u32(const unsigned* x, const unsigned* y, unsigned* z,
                                   unsigned* violation, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = x[i] + y[i];
}`

func runCUDA() (err error) {
	count, err := native.Devices(native.BackendCUDA)
	if err != nil {
		if errors.Is(err, native.ErrNoDriver) {
			fmt.Printf("CUDA backend unavailable: %v\n", err)
			return nil
		}
		return err
	}
	if count == 0 {
		fmt.Println("CUDA backend: driver present, no devices")
		return nil
	}
	var cl closer
	defer cl.closeAll(&err)
	dev, err := native.Open(native.BackendCUDA, 0, nil)
	if err != nil {
		return err
	}
	cl.add(dev.Close)
	fmt.Printf("CUDA device: %s (%s)\n", dev.Props().Name, dev.Target())
	mod, err := dev.LoadCUDASource("nativedemo_add.cu", []byte(cudaAdd), "")
	if err != nil {
		return err
	}
	cl.add(mod.Close)
	k, err := mod.Kernel("add_u32")
	if err != nil {
		return err
	}
	s, err := dev.NewStream()
	if err != nil {
		return err
	}
	cl.add(s.Close)
	const n = 1 << 20
	var bufs [3]*native.Buffer
	for i := range bufs {
		if bufs[i], err = dev.Alloc(native.DeviceMemory, 4*n); err != nil {
			return err
		}
		cl.add(bufs[i].Close)
	}
	xs, ys := make([]byte, 4*n), make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.NativeEndian.PutUint32(xs[4*i:], rand.Uint32())
		binary.NativeEndian.PutUint32(ys[4*i:], rand.Uint32())
	}
	if err := s.Upload(bufs[0], 0, xs); err != nil {
		return err
	}
	if err := s.Upload(bufs[1], 0, ys); err != nil {
		return err
	}
	start := time.Now()
	if err := s.Launch(k, native.LaunchParams{
		Grid: native.Dim3{X: n / 256}, Block: native.Dim3{X: 256},
		Buffers: []native.Binding{{Buffer: bufs[0]}, {Buffer: bufs[1]}, {Buffer: bufs[2]}},
		Scalars: new(native.Scalars).Uint32(n).Bytes(),
	}); err != nil {
		return err
	}
	out := make([]byte, 4*n)
	if err := s.Download(out, bufs[2], 0); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	elapsed := time.Since(start)
	for i := 0; i < n; i++ {
		want := binary.NativeEndian.Uint32(xs[4*i:]) + binary.NativeEndian.Uint32(ys[4*i:])
		if got := binary.NativeEndian.Uint32(out[4*i:]); got != want {
			return fmt.Errorf("CUDA add: element %d: got %d, want %d", i, got, want)
		}
	}
	fmt.Printf("CUDA add of %d elements (launch + download) in %v; result matches Go\n", n, elapsed.Round(time.Microsecond))
	return nil
}
