package kernelops

import (
	"unsafe"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Relayer packs weights into gemm_nn's column panels once, for a session to hold in place of
// the weights as stored (see Relay). Its zero value is ready; it is not safe for concurrent
// use.
type Relayer struct {
	scratch []float32
}

// Relay returns w, a float32 matrix [k, n] that MatMul, Loom's MatMulAdd or Gemm (transB 0)
// reads as B on the host, or with transposed a matrix [n, k] that Gemm with transB reads as
// B, packed into gemm_nn's column panels exactly as the host planners pack such a B
// (packPays, packB), as a tensor that holds the packed copy only (tensor.Relaid): the
// planners then read the panels as they are, and everything else sees the elements unpacked.
// ok is false when the host planners read such a B as stored (too small, or a layout that
// does not pay). With inPlace the panels reuse w's memory when they fit it (n a multiple of
// the panel width, or room, w's elements extended over spare memory behind them, holds the
// overlapping last panel too), so that relaying allocates nothing the session keeps: the
// caller must own w's elements and room then, with no other view of them. Packing in place
// takes a bitmap of one bit a panel row as its only scratch (a [k, n] weight rearranged by
// following the cycles of the permutation), so that a large weight (a vocabulary projection,
// 154 MB) is never held twice.
func (r *Relayer) Relay(w tensor.Tensor, inPlace, transposed bool) (_ tensor.Tensor, ok bool) {
	return r.RelayWithRoom(w, nil, inPlace, transposed)
}

// RelayWithRoom is Relay for a weight whose elements continue into room: room[:w.Len()] are
// w's elements (the same memory) and the rest is spare memory that the panels may take when
// packed in place (graph.Tensor.RawRoom). A nil room is w's elements alone.
func (r *Relayer) RelayWithRoom(w tensor.Tensor, room []float32, inPlace, transposed bool) (_ tensor.Tensor, ok bool) {
	dims := w.Dims()
	if w.DType() != graph.Float || len(dims) != 2 || tensor.RelaidOf(w) != nil || dims[0] < 1 || dims[1] < 1 {
		return tensor.Tensor{}, false
	}
	b, isF32 := w.Data().([]float32)
	if !isF32 || int64(len(b)) != dims[0]*dims[1] {
		return tensor.Tensor{}, false
	}
	g := gemmSpec{m: packedForRows, k: int(dims[0]), n: int(dims[1]), nb0: 1, nb1: 1,
		bs: [4]int{0, 0, int(dims[1]), 1}, bStatic: w}
	if transposed {
		g.k, g.n, g.bs = int(dims[1]), int(dims[0]), [4]int{0, 0, 1, int(dims[1])}
	}
	if g.n < vectorWidth(g.n) {
		return tensor.Tensor{}, false
	}
	nv, packs := g.packPays()
	if !packs {
		return tensor.Tensor{}, false
	}
	nr := nv * vectorWidth(g.n)
	if nr > g.n {
		return tensor.Tensor{}, false
	}
	if room == nil || len(room) < len(b) || unsafe.SliceData(room) != unsafe.SliceData(b) {
		room = b
	}
	var packed []float32
	// In place: into room when the panels fit it (a transposed B only when they fit B itself).
	if size := ceilDiv(g.n, nr) * g.k * nr; inPlace && (size == len(b) || !transposed && size <= len(room)) {
		packed = room[:size:size]
		if !transposed && size > relayScratchMax {
			g.packInPlace(packed, nr)
		} else {
			// Packed into scratch and copied back: sequential, several times faster than
			// following the cycles, for at most relayScratchMax elements of scratch.
			if cap(r.scratch) < size {
				r.scratch = make([]float32, size)
			}
			g.packInto(r.scratch[:size], b, nr)
			copy(packed, r.scratch[:size])
		}
	} else {
		packed = make([]float32, size)
		g.packInto(packed, b, nr)
	}
	k, n := g.k, g.n
	unpack := func(p, dst []float32) { tensor.UnpackPanels(p, dst, k, n, nr) }
	if transposed {
		unpack = func(p, dst []float32) { tensor.UnpackPanelsT(p, dst, k, n, nr) }
	}
	t, err := tensor.NewRelaid(dims, g.packedLayout(nr), packed, unpack)
	return t, err == nil
}

// relayScratchMax is the largest weight (elements) Relay packs in place through scratch; a
// larger one is rearranged where it lies (packInPlace), so that the scratch, held while the
// session relays its weights, stays small beside them.
const relayScratchMax = 4 << 20

// packInPlace lays B [k, n] (row-major), the first k·n elements of buf, out in panels of nr
// columns where it lies (tensor.PackPanelsInPlace); buf is as long as the panels.
func (g gemmSpec) packInPlace(buf []float32, nr int) { tensor.PackPanelsInPlace(buf, g.k, g.n, nr) }
