package nn

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Operators of ONNX opset 23 that transformer exports use: RMSNormalization and
// RotaryEmbedding.

func init() {
	// RMSNormalization-23: X / sqrt(mean(X^2 over the axes from axis on) + epsilon) * scale,
	// the scale broadcast to the normalized axes. stash_type 1 (float) is the only one.
	ops.HostOps["RMSNormalization"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		if st := n.AttrInt("stash_type", 1); st != 1 {
			return nil, fmt.Errorf("stash_type %d is not supported (only 1, float)", st)
		}
		ax, err := ops.NormAxis(n.AttrInt("axis", -1), len(x.Dims()))
		if err != nil {
			return nil, err
		}
		eps := float64(n.AttrFloat("epsilon", 1e-5))
		sidx, err := ops.BroadcastIndex(in[1].Dims(), x.Dims()[ax:])
		if err != nil {
			return nil, fmt.Errorf("the scale (input 1, shape %v) does not broadcast to the normalized axes %v: %v", in[1].Dims(), x.Dims()[ax:], err)
		}
		sc := tensor.Float64s(in[1])
		v := tensor.Float64s(x)
		inner := ops.Numel(x.Dims()[ax:])
		for g := 0; g < ops.Numel(x.Dims()[:ax]); g++ {
			seg := v[g*inner : (g+1)*inner]
			sum := 0.0
			for _, e := range seg {
				sum += e * e
			}
			inv := 1 / math.Sqrt(sum/float64(max(inner, 1))+eps)
			for i := range seg {
				seg[i] = seg[i] * inv * sc[sidx[i]]
			}
		}
		return ops.FloatResult(x.DType(), x.Dims(), v)
	}
	ops.HostOps["RotaryEmbedding"] = rotaryEmbedding
}

// rotaryEmbedding is RotaryEmbedding-23: X (batch, heads, seq, head_size), or (batch, seq,
// hidden) with the num_heads attribute, rotated pairwise by the angles whose cosines and sines
// the caches hold: cos_cache and sin_cache (positions, rotary_dim/2) indexed by position_ids
// (batch, seq), or (batch, seq, rotary_dim/2) without them. The first rotary_embedding_dim
// (default: all) features of each head rotate, as halves or, interleaved, as even/odd pairs.
func rotaryEmbedding(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x, cosT, sinT := in[0], in[1], in[2]
	pos := ops.Optional(in, 3)
	d := x.Dims()
	var batch, heads, seq, hs int
	// xAt is the flat index of feature f of head h at (b, s).
	var xAt func(b, s, h, f int) int
	switch len(d) {
	case 4:
		batch, heads, seq, hs = int(d[0]), int(d[1]), int(d[2]), int(d[3])
		xAt = func(b, s, h, f int) int { return ((b*heads+h)*seq+s)*hs + f }
	case 3:
		nh := n.AttrInt("num_heads", 0)
		if nh <= 0 || d[2]%nh != 0 {
			return nil, fmt.Errorf("input X of shape %v (batch, seq, hidden) needs num_heads dividing the hidden size, got num_heads=%d", d, nh)
		}
		batch, seq, heads, hs = int(d[0]), int(d[1]), int(nh), int(d[2]/nh)
		xAt = func(b, s, h, f int) int { return ((b*seq+s)*heads+h)*hs + f }
	default:
		return nil, fmt.Errorf("input X has shape %v; want rank 3 (batch, seq, hidden) or 4 (batch, heads, seq, head_size)", d)
	}
	rd := int(n.AttrInt("rotary_embedding_dim", 0))
	if rd == 0 {
		rd = hs
	}
	if rd < 0 || rd > hs || rd%2 != 0 {
		return nil, fmt.Errorf("rotary_embedding_dim %d must be even and at most the head size %d", rd, hs)
	}
	half := rd / 2
	cd := cosT.Dims()
	if len(cd) == 0 || int(cd[len(cd)-1]) != half || len(sinT.Dims()) != len(cd) || sinT.Len() != cosT.Len() {
		return nil, fmt.Errorf("the caches' shapes %v and %v must end in rotary_embedding_dim/2 = %d and agree", cd, sinT.Dims(), half)
	}
	cv, sv := tensor.Float64s(cosT), tensor.Float64s(sinT)
	// row(b, s) is the cache row of position (b, s).
	var row func(b, s int) (int, error)
	if pos.IsValid() {
		if len(cd) != 2 || !equalDims(pos.Dims(), batch, seq) {
			return nil, fmt.Errorf("with position_ids (shape %v, want [%d %d]) the caches must be (max_position, %d), got %v", pos.Dims(), batch, seq, half, cd)
		}
		p := tensor.Int64s(pos)
		row = func(b, s int) (int, error) {
			r := p[b*seq+s]
			if r < 0 || r >= cd[0] {
				return 0, fmt.Errorf("position_ids[%d][%d] = %d is outside the caches' %d positions", b, s, r, cd[0])
			}
			return int(r), nil
		}
	} else {
		if len(cd) != 3 || int(cd[0]) != batch || int(cd[1]) != seq {
			return nil, fmt.Errorf("without position_ids the caches must be (batch, seq, %d) = [%d %d %d], got %v", half, batch, seq, half, cd)
		}
		row = func(b, s int) (int, error) { return b*seq + s, nil }
	}
	interleaved := n.AttrInt("interleaved", 0) != 0
	v := tensor.Float64s(x)
	out := append([]float64(nil), v...)
	for b := 0; b < batch; b++ {
		for s := 0; s < seq; s++ {
			r, err := row(b, s)
			if err != nil {
				return nil, err
			}
			c, sn := cv[r*half:(r+1)*half], sv[r*half:(r+1)*half]
			for h := 0; h < heads; h++ {
				for i := 0; i < half; i++ {
					f1, f2 := i, i+half
					if interleaved {
						f1, f2 = 2*i, 2*i+1
					}
					x1, x2 := v[xAt(b, s, h, f1)], v[xAt(b, s, h, f2)]
					out[xAt(b, s, h, f1)] = c[i]*x1 - sn[i]*x2
					out[xAt(b, s, h, f2)] = sn[i]*x1 + c[i]*x2
				}
			}
		}
	}
	return ops.FloatResult(x.DType(), d, out)
}

func equalDims(d []int64, want ...int) bool {
	if len(d) != len(want) {
		return false
	}
	for i, w := range want {
		if int(d[i]) != w {
			return false
		}
	}
	return true
}

func init() {
	// LpNormalization: x / ||x||_p along the axis (p 1 or 2), 0 where the norm is 0.
	ops.HostOps["LpNormalization"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		ax, err := ops.NormAxis(n.AttrInt("axis", -1), len(x.Dims()))
		if err != nil {
			return nil, err
		}
		p := n.AttrInt("p", 2)
		if p != 1 && p != 2 {
			return nil, fmt.Errorf("p is %d; LpNormalization takes 1 or 2", p)
		}
		outer, dim, inner := ops.Numel(x.Dims()[:ax]), ops.Numel(x.Dims()[ax:ax+1]), ops.Numel(x.Dims()[ax+1:])
		v := tensor.Float64s(x)
		for o := 0; o < outer; o++ {
			for j := 0; j < inner; j++ {
				norm := 0.0
				for t := 0; t < dim; t++ {
					e := v[(o*dim+t)*inner+j]
					if p == 1 {
						norm += math.Abs(e)
					} else {
						norm += e * e
					}
				}
				if p == 2 {
					norm = math.Sqrt(norm)
				}
				for t := 0; t < dim; t++ {
					at := (o*dim+t)*inner + j
					if norm == 0 {
						v[at] = 0
					} else {
						v[at] /= norm
					}
				}
			}
		}
		return ops.FloatResult(x.DType(), x.Dims(), v)
	}
	// GroupNormalization (18, 21): X (N, C, ...) normalized over each of num_groups groups of
	// C/num_groups channels and their spatial positions, then scaled and shifted per channel
	// (opset 21) or per group (opset 18).
	ops.HostOps["GroupNormalization"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		d := x.Dims()
		g := n.AttrInt("num_groups", 0)
		if len(d) < 2 || g <= 0 || d[1]%g != 0 {
			return nil, fmt.Errorf("input X of shape %v (N, C, ...) needs num_groups (%d) dividing C", d, g)
		}
		if st := n.AttrInt("stash_type", 1); st != 1 {
			return nil, fmt.Errorf("stash_type %d is not supported (only 1, float)", st)
		}
		c := d[1]
		perChannel := rc.OpsetVersion() >= 21
		want := g
		if perChannel {
			want = c
		}
		if int64(in[1].Len()) != want || int64(in[2].Len()) != want {
			return nil, fmt.Errorf("scale and bias (inputs 1 and 2, shapes %v and %v) must hold %d values each", in[1].Dims(), in[2].Dims(), want)
		}
		eps := float64(n.AttrFloat("epsilon", 1e-5))
		sc, bi := tensor.Float64s(in[1]), tensor.Float64s(in[2])
		v := tensor.Float64s(x)
		spatial := ops.Numel(d[2:])
		cg := int(c / g)
		size := cg * spatial
		for b := 0; b < int(d[0]); b++ {
			for k := 0; k < int(g); k++ {
				seg := v[(b*int(g)+k)*size : (b*int(g)+k+1)*size]
				m, s := MeanVar(seg)
				inv := 1 / math.Sqrt(s+eps)
				for i := range seg {
					p := k
					if perChannel {
						p = k*cg + i/spatial
					}
					seg[i] = (seg[i]-m)*inv*sc[p] + bi[p]
				}
			}
		}
		return ops.FloatResult(x.DType(), d, v)
	}
}
