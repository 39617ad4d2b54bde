package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Operators of ONNX opset 27 for linear-attention and state-space language models (Gated
// DeltaNet, Mamba): LinearAttention, the recurrent form of linear attention with a state per
// key/value head carried from step to step, and CausalConvWithState, the depthwise causal
// convolution those models run before it, with its last k-1 inputs carried as state. Both
// compute in float64 and return the element types of their inputs.

func init() {
	ops.HostOps["LinearAttention"] = linearAttention
	ops.HostOps["CausalConvWithState"] = causalConvWithState
}

// linearAttention is LinearAttention-27. query (B, T, Hq·dk), key (B, T, Hkv·dk) and value
// (B, T, Hkv·dv) hold the heads in their last axis; past_state (B, Hkv, dk, dv) is the state S
// of each key/value head before the first token (zeros when omitted). For each token t, in
// order, with k, v, q that token's rows of one head:
//
//	linear:      S = S + k ⊗ v
//	gated:       S = exp(g)·S + k ⊗ v
//	delta:       S = S + k ⊗ β·(v - Sᵀk)
//	gated_delta: S = exp(g)·S, then S = S + k ⊗ β·(v - Sᵀk)
//
// and the output of each query head is scale·qᵀS of its key/value head (query head h reads
// head h / (Hq/Hkv)). decay g is (B, T, Hkv) (one per head) or (B, T, Hkv·dk) (one per key
// row of S); beta β is (B, T, Hkv) or (B, T, 1). scale 0 means 1/√dk. Outputs: (B, T, Hq·dv)
// and the last state, present_state, of past_state's element type (query's without one).
// chunk_size is a hint for chunked implementations and changes nothing here.
func linearAttention(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	q, k, v := in[0], in[1], in[2]
	past, decay, beta := ops.Optional(in, 3), ops.Optional(in, 4), ops.Optional(in, 5)
	rule := n.AttrString("update_rule", "gated_delta")
	gated, delta := false, false
	switch rule {
	case "linear":
	case "gated":
		gated = true
	case "delta":
		delta = true
	case "gated_delta":
		gated, delta = true, true
	default:
		return nil, fmt.Errorf("update_rule %q: want linear, gated, delta or gated_delta", rule)
	}
	hq, hkv := int(n.AttrInt("q_num_heads", 0)), int(n.AttrInt("kv_num_heads", 0))
	if hq <= 0 || hkv <= 0 || hq%hkv != 0 {
		return nil, fmt.Errorf("q_num_heads %d must be a positive multiple of kv_num_heads %d", hq, hkv)
	}
	if !isFloat(q.DType()) || k.DType() != q.DType() || v.DType() != q.DType() {
		return nil, fmt.Errorf("query, key and value are %s, %s and %s; want one float type", q.DType(), k.DType(), v.DType())
	}
	qd, kd, vd := q.Dims(), k.Dims(), v.Dims()
	if len(qd) != 3 || len(kd) != 3 || len(vd) != 3 {
		return nil, fmt.Errorf("query %v, key %v and value %v must be rank 3 (batch, sequence, heads·size)", qd, kd, vd)
	}
	if qd[2]%int64(hq) != 0 || vd[2]%int64(hkv) != 0 {
		return nil, fmt.Errorf("query's last axis %d must split into %d heads and value's %d into %d", qd[2], hq, vd[2], hkv)
	}
	B, T := int(qd[0]), int(qd[1])
	dk, dv := int(qd[2])/hq, int(vd[2])/hkv
	if kd[0] != qd[0] || vd[0] != qd[0] || kd[1] != qd[1] || vd[1] != qd[1] || kd[2] != int64(hkv*dk) {
		return nil, fmt.Errorf("query %v, key %v and value %v disagree: want one batch and sequence, and key (…, %d·%d)", qd, kd, vd, hkv, dk)
	}
	// The decay's and beta's values per token and head (gWidth: 1, or dk for a decay per key
	// row of S) or per token (bWidth: 1 for all heads, or one a head).
	gWidth, bWidth := 0, 0
	if gated != decay.IsValid() {
		return nil, fmt.Errorf("update_rule %s %s the decay (input 4)", rule, map[bool]string{true: "needs", false: "takes no"}[gated])
	}
	if delta != beta.IsValid() {
		return nil, fmt.Errorf("update_rule %s %s beta (input 5)", rule, map[bool]string{true: "needs", false: "takes no"}[delta])
	}
	if gated {
		dd := decay.Dims()
		switch {
		case decay.DType() != q.DType() || len(dd) != 3 || dd[0] != qd[0] || dd[1] != qd[1]:
			return nil, fmt.Errorf("the decay (input 4) is %s%v; want %s (batch %d, sequence %d, %d or %d)", decay.DType(), dd, q.DType(), B, T, hkv, hkv*dk)
		case dd[2] == int64(hkv):
			gWidth = 1
		case dd[2] == int64(hkv*dk):
			gWidth = dk
		default:
			return nil, fmt.Errorf("the decay's last axis (input 4, shape %v) must be kv_num_heads %d or kv_num_heads·head size %d", dd, hkv, hkv*dk)
		}
	}
	if delta {
		bd := beta.Dims()
		if beta.DType() != q.DType() || len(bd) != 3 || bd[0] != qd[0] || bd[1] != qd[1] || (bd[2] != int64(hkv) && bd[2] != 1) {
			return nil, fmt.Errorf("beta (input 5) is %s%v; want %s (batch %d, sequence %d, %d or 1)", beta.DType(), bd, q.DType(), B, T, hkv)
		}
		bWidth = int(bd[2])
	}
	stateShape := []int64{int64(B), int64(hkv), int64(dk), int64(dv)}
	stateType := q.DType()
	if past.IsValid() {
		if !isFloat(past.DType()) || !slices.Equal(past.Dims(), stateShape) {
			return nil, fmt.Errorf("past_state (input 3) is %s%v; want a float tensor of shape %v (batch, kv heads, key size, value size)", past.DType(), past.Dims(), stateShape)
		}
		stateType = past.DType()
	}
	outShape := []int64{int64(B), int64(T), int64(hq * dv)}
	if err := ops.ReserveShape(rc, "the output", graph.Double, outShape, 0); err != nil {
		return nil, err
	}
	if err := ops.ReserveShape(rc, "the state", graph.Double, stateShape, 0); err != nil {
		return nil, err
	}
	scale := float64(n.AttrFloat("scale", 0))
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(dk))
	}
	qv, kv, vv := tensor.Float64s(q), tensor.Float64s(k), tensor.Float64s(v)
	var gv, bv []float64
	if gated {
		gv = tensor.Float64s(decay)
	}
	if delta {
		bv = tensor.Float64s(beta)
	}
	state := make([]float64, B*hkv*dk*dv)
	if past.IsValid() {
		copy(state, tensor.Float64s(past))
	}
	out := make([]float64, B*T*hq*dv)
	group := hq / hkv
	u := make([]float64, dv)
	for b := 0; b < B; b++ {
		for h := 0; h < hkv; h++ {
			S := state[(b*hkv+h)*dk*dv : (b*hkv+h+1)*dk*dv]
			for t := 0; t < T; t++ {
				row := b*T + t
				kr := kv[(row*hkv+h)*dk : (row*hkv+h+1)*dk]
				vr := vv[(row*hkv+h)*dv : (row*hkv+h+1)*dv]
				if gated {
					g := gv[(row*hkv+h)*gWidth : (row*hkv+h+1)*gWidth]
					for d := 0; d < dk; d++ {
						f := math.Exp(g[min(d, gWidth-1)])
						for m := range dv {
							S[d*dv+m] *= f
						}
					}
				}
				copy(u, vr)
				if delta {
					bt := bv[row*bWidth+min(h, bWidth-1)]
					for m := range dv {
						r := 0.0
						for d := 0; d < dk; d++ {
							r += S[d*dv+m] * kr[d]
						}
						u[m] = bt * (vr[m] - r)
					}
				}
				for d := 0; d < dk; d++ {
					for m := range dv {
						S[d*dv+m] += kr[d] * u[m]
					}
				}
				for j := 0; j < group; j++ {
					qh := h*group + j
					qr := qv[(row*hq+qh)*dk : (row*hq+qh+1)*dk]
					o := out[(row*hq+qh)*dv : (row*hq+qh+1)*dv]
					for m := range dv {
						s := 0.0
						for d := 0; d < dk; d++ {
							s += qr[d] * S[d*dv+m]
						}
						o[m] = scale * s
					}
				}
			}
		}
	}
	y, err := tensor.FromFloat64s(q.DType(), outShape, out)
	if err != nil {
		return nil, err
	}
	present, err := tensor.FromFloat64s(stateType, stateShape, state)
	if err != nil {
		return nil, err
	}
	return []tensor.Tensor{y, present}, nil
}

// causalConvWithState is CausalConvWithState-27: input (B, C, L) convolved along L, each
// channel with its own kernel of weight (C, 1, K), over the input preceded by past_state
// (B, C, K-1) (zeros when omitted), so that output position l sees inputs l-K+1 .. l; plus
// bias (C); then SiLU (x·sigmoid(x)) when activation is "silu" or "swish". Outputs: (B, C, L)
// and present_state, the last K-1 positions of past_state followed by the input.
func causalConvWithState(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x, w := in[0], in[1]
	bias, past := ops.Optional(in, 2), ops.Optional(in, 3)
	act := n.AttrString("activation", "none")
	if act != "none" && act != "silu" && act != "swish" {
		return nil, fmt.Errorf("activation %q: want none, silu or swish", act)
	}
	if !isFloat(x.DType()) || w.DType() != x.DType() {
		return nil, fmt.Errorf("the input and the weight are %s and %s; want one float type", x.DType(), w.DType())
	}
	xd, wd := x.Dims(), w.Dims()
	if len(xd) != 3 {
		return nil, fmt.Errorf("the input (input 0, shape %v) must be rank 3 (batch, channels, length)", xd)
	}
	B, C, L := int(xd[0]), int(xd[1]), int(xd[2])
	if len(wd) != 3 || wd[0] != xd[1] || wd[1] != 1 || wd[2] < 1 {
		return nil, fmt.Errorf("the weight (input 1, shape %v) must be (channels %d, 1, kernel size >= 1)", wd, C)
	}
	K := int(wd[2])
	if bias.IsValid() && (bias.DType() != x.DType() || !slices.Equal(bias.Dims(), []int64{int64(C)})) {
		return nil, fmt.Errorf("the bias (input 2) is %s%v; want %s [%d]", bias.DType(), bias.Dims(), x.DType(), C)
	}
	stateShape := []int64{int64(B), int64(C), int64(K - 1)}
	if past.IsValid() && (past.DType() != x.DType() || !slices.Equal(past.Dims(), stateShape)) {
		return nil, fmt.Errorf("past_state (input 3) is %s%v; want %s %v (batch, channels, kernel size - 1)", past.DType(), past.Dims(), x.DType(), stateShape)
	}
	if err := ops.ReserveShape(rc, "the output", graph.Double, xd, 0); err != nil {
		return nil, err
	}
	xv, wv := tensor.Float64s(x), tensor.Float64s(w)
	var bv, pv []float64
	if bias.IsValid() {
		bv = tensor.Float64s(bias)
	}
	if past.IsValid() {
		pv = tensor.Float64s(past)
	}
	out := make([]float64, B*C*L)
	state := make([]float64, B*C*(K-1))
	padded := make([]float64, K-1+L)
	for b := 0; b < B; b++ {
		for c := 0; c < C; c++ {
			bc := b*C + c
			clear(padded[:K-1])
			if pv != nil {
				copy(padded, pv[bc*(K-1):(bc+1)*(K-1)])
			}
			copy(padded[K-1:], xv[bc*L:(bc+1)*L])
			kern := wv[c*K : (c+1)*K]
			for l := 0; l < L; l++ {
				s := 0.0
				if bv != nil {
					s = bv[c]
				}
				for j, wj := range kern {
					s += wj * padded[l+j]
				}
				if act != "none" {
					s /= 1 + math.Exp(-s)
				}
				out[bc*L+l] = s
			}
			copy(state[bc*(K-1):(bc+1)*(K-1)], padded[L:])
		}
	}
	y, err := tensor.FromFloat64s(x.DType(), xd, out)
	if err != nil {
		return nil, err
	}
	present, err := tensor.FromFloat64s(x.DType(), stateShape, state)
	if err != nil {
		return nil, err
	}
	return []tensor.Tensor{y, present}, nil
}
