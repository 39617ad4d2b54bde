package kernelops

import (
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
// does not pay). With inPlace the panels reuse w's memory when they fit it exactly (n a
// multiple of the panel width), so that relaying allocates nothing the session keeps: the
// caller must own w's elements then, with no other view of them.
func (r *Relayer) Relay(w tensor.Tensor, inPlace, transposed bool) (_ tensor.Tensor, ok bool) {
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
	var packed []float32
	if size := ceilDiv(g.n, nr) * g.k * nr; inPlace && size == len(b) {
		if cap(r.scratch) < size {
			r.scratch = make([]float32, size)
		}
		g.packInto(r.scratch[:size], b, nr)
		copy(b, r.scratch[:size])
		packed = b
	} else {
		packed = make([]float32, size)
		g.packInto(packed, b, nr)
	}
	k, n := g.k, g.n
	unpack := func(p, dst []float32) { unpackPanels(p, dst, k, n, nr) }
	if transposed {
		unpack = func(p, dst []float32) { unpackPanelsT(p, dst, k, n, nr) }
	}
	t, err := tensor.NewRelaid(dims, g.packedLayout(nr), packed, unpack)
	return t, err == nil
}

// unpackPanelsT writes Bᵀ [n, k] (row-major: B as Gemm with transB stores it) from B's panels
// of nr columns.
func unpackPanelsT(packed, dst []float32, k, n, nr int) {
	for t := range ceilDiv(n, nr) {
		j0 := min(t*nr, n-nr)
		for p := range k {
			for c, v := range packed[(t*k+p)*nr : (t*k+p+1)*nr] {
				dst[(j0+c)*k+p] = v
			}
		}
	}
}

// unpackPanels writes B [k, n] (row-major) from its panels of nr columns (see packB).
func unpackPanels(packed, dst []float32, k, n, nr int) {
	for t := range ceilDiv(n, nr) {
		j0 := min(t*nr, n-nr)
		for p := range k {
			copy(dst[p*n+j0:p*n+j0+nr], packed[(t*k+p)*nr:(t*k+p+1)*nr])
		}
	}
}
