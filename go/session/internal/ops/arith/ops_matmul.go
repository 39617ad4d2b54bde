package arith

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for the matrix products MatMul and Gemm (the reference paths of the Loom
// kernels, for the types and shapes they do not cover), and Det.

func init() {
	ops.HostOps["MatMul"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		out, err := ops.MatmulHost(in[0], in[1])
		return []tensor.Tensor{out}, err
	}
	ops.HostOps["Gemm"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		a, b := in[0], in[1]
		if len(a.Dims()) != 2 || len(b.Dims()) != 2 {
			return nil, fmt.Errorf("Gemm needs matrices, got %v and %v", a.Dims(), b.Dims())
		}
		if n.AttrInt("transA", 0) != 0 {
			s, idx := ops.TransposeIndex(a.Dims(), []int{1, 0})
			a = tensor.Take(a, s, idx)
		}
		if n.AttrInt("transB", 0) != 0 {
			s, idx := ops.TransposeIndex(b.Dims(), []int{1, 0})
			b = tensor.Take(b, s, idx)
		}
		y, err := ops.MatmulHost(a, b)
		if err != nil {
			return nil, err
		}
		alpha, beta := float64(n.AttrFloat("alpha", 1)), float64(n.AttrFloat("beta", 1))
		yv := tensor.Float64s(y)
		if len(in) > 2 && in[2].IsValid() {
			idx, err := ops.BroadcastIndex(in[2].Dims(), y.Dims())
			if err != nil {
				return nil, err
			}
			cv := tensor.Float64s(in[2])
			for i := range yv {
				yv[i] = alpha*yv[i] + beta*cv[idx[i]]
			}
		} else {
			for i := range yv {
				yv[i] *= alpha
			}
		}
		return ops.FloatResult(y.DType(), y.Dims(), yv)
	}
	ops.HostOps["Det"] = opDet
}

func opDet(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	r := len(x.Dims())
	if r < 2 || x.Dims()[r-1] != x.Dims()[r-2] {
		return nil, fmt.Errorf("Det needs (..., M, M), got shape %v", x.Dims())
	}
	m := int(x.Dims()[r-1])
	v := tensor.Float64s(x)
	batch := ops.Numel(x.Dims()[:r-2])
	out := make([]float64, batch)
	a := make([]float64, m*m)
	for b := range batch {
		copy(a, v[b*m*m:(b+1)*m*m])
		det := 1.0
		// Gaussian elimination with partial pivoting.
		for c := 0; c < m; c++ {
			p := c
			for i := c + 1; i < m; i++ {
				if math.Abs(a[i*m+c]) > math.Abs(a[p*m+c]) {
					p = i
				}
			}
			if a[p*m+c] == 0 {
				det = 0
				break
			}
			if p != c {
				for j := 0; j < m; j++ {
					a[p*m+j], a[c*m+j] = a[c*m+j], a[p*m+j]
				}
				det = -det
			}
			det *= a[c*m+c]
			for i := c + 1; i < m; i++ {
				f := a[i*m+c] / a[c*m+c]
				for j := c; j < m; j++ {
					a[i*m+j] -= f * a[c*m+j]
				}
			}
		}
		out[b] = det
	}
	return ops.FloatResult(x.DType(), x.Dims()[:r-2], out)
}
