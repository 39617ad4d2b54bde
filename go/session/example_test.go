package session_test

import (
	"encoding/binary"
	"fmt"
	"log"
	"math"
	"math/rand/v2"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/session"
)

// denseLoom is a fully connected layer, y = x·w + b, optionally followed by ReLU: one thread
// per output element, one block row per input row.
const denseLoom = `
kernel dense[RELU i1 = false, BLOCK index = 64] {
	launch(rows index, cols index, inner index) {
		grid = (ceil_div(cols, BLOCK), rows, 1)
		block = (BLOCK, 1, 1)
		shared = 0
	}
	device(x buffer[f32] read, w buffer[f32] read, b buffer[f32] read, y buffer[f32] write,
		rows index, cols index, inner index) {
		X := view(x, [rows, inner])
		W := view(w, [inner, cols])
		Y := view(y, [rows, cols])
		c := block_id.x * BLOCK + thread_id.x
		r := block_id.y
		if c < cols {
			s := b[c]
			for k := range(inner) {
				s = fma(X[r, k], W[k, c], s)
			}
			if RELU {
				s = max(s, 0.0)
			}
			Y[r, c] = s
		}
	}
}
`

// Example_twoLayerMLP assembles a two-layer perceptron, relu(x·w1 + b1)·w2 + b2, from a Loom
// kernel compiled twice (with and without ReLU), random weights and a random batch of inputs;
// records it, replays it, and checks the result against the same computation in Go.
func Example_twoLayerMLP() {
	const batch, in, hidden, out = 4, 32, 48, 10
	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	random := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = rnd.Float32()*2 - 1
		}
		return v
	}
	w1, b1, w2, b2 := random(in*hidden), random(hidden), random(hidden*out), random(out)
	x := random(batch * in)

	s, err := session.Open(0)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	dense := func(relu bool) session.KernelSource {
		return session.KernelSource{Name: "dense.loom", Source: []byte(denseLoom),
			Specialization: loom.Specialization{Config: map[string]string{"RELU": fmt.Sprint(relu)}}}
	}
	kernels, err := s.Compile([]session.KernelSource{dense(true), dense(false)})
	if err != nil {
		log.Fatal(err)
	}
	denseReLU, denseLinear := kernels[0], kernels[1]

	must := func(r session.Region, err error) session.Region {
		if err != nil {
			log.Fatal(err)
		}
		return r
	}
	W1, B1 := must(s.Weight(f32Bytes(w1))), must(s.Weight(f32Bytes(b1)))
	W2, B2 := must(s.Weight(f32Bytes(w2))), must(s.Weight(f32Bytes(b2)))
	X := must(s.Allocate(4 * batch * in))
	H := must(s.Allocate(4 * batch * hidden))
	Y := must(s.AllocateShared(4 * batch * out))

	// Args are the scalars (rows, cols, inner); the launch program takes its workload from them.
	err = s.Record("mlp", []session.Command{
		session.Dispatch{Kernel: denseReLU, Args: []uint64{batch, hidden, in},
			Bindings: []session.Binding{X.Read(), W1.Read(), B1.Read(), H.Write()}},
		session.Dispatch{Kernel: denseLinear, Args: []uint64{batch, out, hidden},
			Bindings: []session.Binding{H.Read(), W2.Read(), B2.Read(), Y.Write()}},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Upload(X, f32Bytes(x)); err != nil {
		log.Fatal(err)
	}
	if err := s.Replay("mlp"); err != nil {
		log.Fatal(err)
	}
	result := make([]byte, 4*batch*out)
	if err := s.Read(Y, result); err != nil {
		log.Fatal(err)
	}

	want := reference(x, w1, b1, w2, b2, batch, in, hidden, out)
	worst := 0.0
	for i, v := range bytesF32(result) {
		worst = max(worst, math.Abs(float64(v-want[i])))
	}
	fmt.Printf("%d outputs, largest difference from Go below 1e-4: %v\n", len(want), worst < 1e-4)
	// Output: 40 outputs, largest difference from Go below 1e-4: true
}

// reference computes relu(x·w1 + b1)·w2 + b2 in Go.
func reference(x, w1, b1, w2, b2 []float32, batch, in, hidden, out int) []float32 {
	h := make([]float32, batch*hidden)
	for r := range batch {
		for c := range hidden {
			s := b1[c]
			for k := range in {
				s += x[r*in+k] * w1[k*hidden+c]
			}
			h[r*hidden+c] = max(s, 0)
		}
	}
	y := make([]float32, batch*out)
	for r := range batch {
		for c := range out {
			s := b2[c]
			for k := range hidden {
				s += h[r*hidden+k] * w2[k*out+c]
			}
			y[r*out+c] = s
		}
	}
	return y
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.NativeEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func bytesF32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.NativeEndian.Uint32(b[4*i:]))
	}
	return v
}
