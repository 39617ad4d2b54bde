package nn

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// ONNX's Attention (opsets 23 and 24), the op LLM exports at those opsets use, as a host
// function computing in float64:
//
//	Y = softmax(softcap(Q·Kᵀ·scale) + bias) · V
//
// over Q (batch, q_heads, q_seq, head) and K, V (batch, kv_heads, kv_seq, head | v_head), or
// their 3-D forms (batch, seq, heads·head) with q_num_heads and kv_num_heads. past_key and
// past_value (batch, kv_heads, past, ...) are prepended to K and V, which the present_key and
// present_value outputs return. Grouped-query attention repeats each KV head for
// q_heads/kv_heads consecutive query heads. The bias is the attention mask (a boolean one:
// false is -inf; a float one added; either broadcast to (batch, q_heads, q_seq, total) and,
// when shorter than total, padded with masked positions), the causal mask (is_causal: query i
// sees the past and the keys up to past+i) and, at opset 24, nonpad_kv_seqlen (keys from a
// batch's length on are masked). The optional fourth output is qk_matmul_output_mode's: 0 the
// scaled (and soft-capped) product, 1 the same, 2 with the bias added, 3 the softmax.
func init() {
	ops.HostOps["Attention"] = onnxAttention
}

func onnxAttention(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	q, k, v := in[0], in[1], in[2]
	mask, pastK, pastV, nonpad := ops.Optional(in, 3), ops.Optional(in, 4), ops.Optional(in, 5), ops.Optional(in, 6)
	rank := len(q.Dims())
	if rank != len(k.Dims()) || rank != len(v.Dims()) || (rank != 3 && rank != 4) {
		return nil, fmt.Errorf("Q, K and V have shapes %v, %v and %v; want all of rank 4 (batch, heads, seq, head) or all of rank 3 (batch, seq, hidden)", q.Dims(), k.Dims(), v.Dims())
	}
	// Each operand as (batch, heads, seq, size) with an index function.
	type view struct {
		b, h, s, d int
		v          []float64
		at         func(b, h, s, d int) int
	}
	asHeads := func(t tensor.Tensor, heads int64, what string) (view, error) {
		d := t.Dims()
		if rank == 4 {
			w := view{b: int(d[0]), h: int(d[1]), s: int(d[2]), d: int(d[3]), v: tensor.Float64s(t)}
			w.at = func(b, h, s, e int) int { return ((b*w.h+h)*w.s+s)*w.d + e }
			return w, nil
		}
		if heads <= 0 || d[2]%heads != 0 {
			return view{}, fmt.Errorf("%s of shape %v (batch, seq, hidden) needs its number of heads dividing the hidden size, got %d (q_num_heads, kv_num_heads)", what, d, heads)
		}
		w := view{b: int(d[0]), h: int(heads), s: int(d[1]), d: int(d[2] / heads), v: tensor.Float64s(t)}
		w.at = func(b, h, s, e int) int { return ((b*w.s+s)*w.h+h)*w.d + e }
		return w, nil
	}
	qh, kvh := n.AttrInt("q_num_heads", 0), n.AttrInt("kv_num_heads", 0)
	Q, err := asHeads(q, qh, "Q (input 0)")
	if err != nil {
		return nil, err
	}
	K, err := asHeads(k, kvh, "K (input 1)")
	if err != nil {
		return nil, err
	}
	V, err := asHeads(v, kvh, "V (input 2)")
	if err != nil {
		return nil, err
	}
	if K.b != Q.b || V.b != Q.b || K.h != V.h || K.s != V.s || K.d != Q.d {
		return nil, fmt.Errorf("Q %v, K %v and V %v disagree: want the same batch, K and V the same heads and sequence, Q and K the same head size", q.Dims(), k.Dims(), v.Dims())
	}
	if K.h == 0 || Q.h%K.h != 0 {
		return nil, fmt.Errorf("%d query heads for %d key/value heads: the query heads must be a multiple", Q.h, K.h)
	}
	// The KV cache: past (batch, kv_heads, past, size) before the new keys and values.
	past := 0
	cat := func(p tensor.Tensor, cur view, what string) (view, []int64, error) {
		out := view{b: cur.b, h: cur.h, s: cur.s, d: cur.d}
		var pv []float64
		if p.IsValid() {
			pd := p.Dims()
			if len(pd) != 4 || int(pd[0]) != cur.b || int(pd[1]) != cur.h || int(pd[3]) != cur.d {
				return view{}, nil, fmt.Errorf("%s has shape %v; want (batch %d, kv heads %d, past, %d)", what, pd, cur.b, cur.h, cur.d)
			}
			out.s += int(pd[2])
			pv = tensor.Float64s(p)
		}
		ps := out.s - cur.s
		out.v = make([]float64, out.b*out.h*out.s*out.d)
		out.at = func(b, h, s, e int) int { return ((b*out.h+h)*out.s+s)*out.d + e }
		for b := 0; b < out.b; b++ {
			for h := 0; h < out.h; h++ {
				for s := 0; s < out.s; s++ {
					for e := 0; e < out.d; e++ {
						if s < ps {
							out.v[out.at(b, h, s, e)] = pv[((b*out.h+h)*ps+s)*out.d+e]
						} else {
							out.v[out.at(b, h, s, e)] = cur.v[cur.at(b, h, s-ps, e)]
						}
					}
				}
			}
		}
		return out, []int64{int64(out.b), int64(out.h), int64(out.s), int64(out.d)}, nil
	}
	if pastK.IsValid() != pastV.IsValid() {
		return nil, fmt.Errorf("past_key and past_value (inputs 4 and 5) must be given together")
	}
	if pastK.IsValid() {
		past = int(pastK.Dims()[min(2, len(pastK.Dims())-1)])
	}
	PK, pkShape, err := cat(pastK, K, "past_key (input 4)")
	if err != nil {
		return nil, err
	}
	PV, pvShape, err := cat(pastV, V, "past_value (input 5)")
	if err != nil {
		return nil, err
	}
	total := PK.s
	// What the op computes in (float64: the bias, the scores, the output), reserved before it
	// is allocated.
	for _, t := range []struct {
		what  string
		shape []int64
	}{
		{"the attention bias", []int64{int64(Q.b), int64(Q.h), int64(Q.s), int64(total)}},
		{"the attention scores", []int64{int64(Q.b), int64(Q.h), int64(Q.s), int64(total)}},
		{"the output", []int64{int64(Q.b), int64(Q.h), int64(Q.s), int64(PV.d)}},
	} {
		if err := ops.ReserveShape(rc, t.what, graph.Double, t.shape, 0); err != nil {
			return nil, err
		}
	}
	// The bias (batch, q_heads, q_seq, total): the mask, causal masking, the padding lengths.
	bias := make([]float64, Q.b*Q.h*Q.s*total)
	biasAt := func(b, h, i, j int) int { return ((b*Q.h+h)*Q.s+i)*total + j }
	if mask.IsValid() {
		md := append([]int64{}, mask.Dims()...)
		if len(md) == 0 || len(md) > 4 {
			return nil, fmt.Errorf("attn_mask (input 3) has shape %v; want rank 2 to 4, broadcast to (batch, heads, q_seq, total)", md)
		}
		width := int(md[len(md)-1])
		if width > total {
			return nil, fmt.Errorf("attn_mask (input 3) of shape %v covers %d keys, more than the %d there are", md, width, total)
		}
		full := append([]int64{}, md...)
		full[len(full)-1] = int64(total)
		target := []int64{int64(Q.b), int64(Q.h), int64(Q.s), int64(total)}
		idx, err := ops.BroadcastIndex(full, target)
		if err != nil {
			return nil, fmt.Errorf("attn_mask (input 3) of shape %v does not broadcast to %v: %v", md, target, err)
		}
		mv := tensor.Float64s(mask)
		isBool := mask.DType() == graph.Bool
		for f, src := range idx {
			// src indexes the mask padded to total keys: its row and column in the real one.
			r, c := src/total, src%total
			if c >= width {
				bias[f] = math.Inf(-1)
				continue
			}
			m := mv[r*width+c]
			switch {
			case isBool && m == 0:
				bias[f] = math.Inf(-1)
			case !isBool:
				bias[f] = m
			}
		}
	}
	if n.AttrInt("is_causal", 0) != 0 {
		for b := 0; b < Q.b; b++ {
			for h := 0; h < Q.h; h++ {
				for i := 0; i < Q.s; i++ {
					for j := past + i + 1; j < total; j++ {
						bias[biasAt(b, h, i, j)] = math.Inf(-1)
					}
				}
			}
		}
	}
	if nonpad.IsValid() {
		lens := tensor.Int64s(nonpad)
		if len(lens) != Q.b {
			return nil, fmt.Errorf("nonpad_kv_seqlen (input 6) has %d lengths for a batch of %d", len(lens), Q.b)
		}
		for b, l := range lens {
			for h := 0; h < Q.h; h++ {
				for i := 0; i < Q.s; i++ {
					for j := int(max(l, 0)); j < total; j++ {
						bias[biasAt(b, h, i, j)] = math.Inf(-1)
					}
				}
			}
		}
	}
	scale := float64(n.AttrFloat("scale", 0))
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(Q.d))
	}
	softcap := float64(n.AttrFloat("softcap", 0))
	mode := n.AttrInt("qk_matmul_output_mode", 0)
	if mode < 0 || mode > 3 {
		return nil, fmt.Errorf("qk_matmul_output_mode %d is not 0, 1, 2 or 3", mode)
	}
	reps := Q.h / K.h
	vd := PV.d
	y := make([]float64, Q.b*Q.h*Q.s*vd)
	qk := make([]float64, Q.b*Q.h*Q.s*total)
	row := make([]float64, total)
	for b := 0; b < Q.b; b++ {
		for h := 0; h < Q.h; h++ {
			kh := h / reps
			for i := 0; i < Q.s; i++ {
				for j := 0; j < total; j++ {
					s := 0.0
					for e := 0; e < Q.d; e++ {
						s += Q.v[Q.at(b, h, i, e)] * PK.v[PK.at(b, kh, j, e)]
					}
					s *= scale
					if softcap > 0 {
						s = softcap * math.Tanh(s/softcap)
					}
					qk[biasAt(b, h, i, j)] = s
					row[j] = s + bias[biasAt(b, h, i, j)]
					if mode == 2 {
						qk[biasAt(b, h, i, j)] = row[j]
					}
				}
				mx := math.Inf(-1)
				for _, x := range row {
					mx = math.Max(mx, x)
				}
				sum := 0.0
				for j, x := range row {
					row[j] = math.Exp(x - mx)
					sum += row[j]
				}
				for j := range row {
					row[j] /= sum
					if mode == 3 {
						qk[biasAt(b, h, i, j)] = row[j]
					}
				}
				for e := 0; e < vd; e++ {
					s := 0.0
					for j, p := range row {
						s += p * PV.v[PV.at(b, kh, j, e)]
					}
					y[((b*Q.h+h)*Q.s+i)*vd+e] = s
				}
			}
		}
	}
	yShape := []int64{int64(Q.b), int64(Q.h), int64(Q.s), int64(vd)}
	if rank == 3 {
		// (batch, heads, seq, v) -> (batch, seq, heads·v)
		t := make([]float64, len(y))
		for b := 0; b < Q.b; b++ {
			for h := 0; h < Q.h; h++ {
				for i := 0; i < Q.s; i++ {
					copy(t[((b*Q.s+i)*Q.h+h)*vd:][:vd], y[((b*Q.h+h)*Q.s+i)*vd:][:vd])
				}
			}
		}
		y, yShape = t, []int64{int64(Q.b), int64(Q.s), int64(Q.h) * int64(vd)}
	}
	var outs []tensor.Tensor
	for i, r := range []struct {
		v     []float64
		shape []int64
	}{{y, yShape}, {PK.v, pkShape}, {PV.v, pvShape}, {qk, []int64{int64(Q.b), int64(Q.h), int64(Q.s), int64(total)}}} {
		if i > 0 && (i >= len(n.Outputs) || n.Outputs[i] == "") {
			outs = append(outs, tensor.Tensor{})
			continue
		}
		o, err := ops.FloatResult(q.DType(), r.shape, r.v)
		if err != nil {
			return nil, err
		}
		outs = append(outs, o[0])
	}
	return outs, nil
}
