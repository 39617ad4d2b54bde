package nn

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// ONNX Runtime's contrib operators (domain com.microsoft) that its transformer tools and GenAI
// exports emit, as host functions computing in float64: SkipLayerNormalization,
// SkipSimplifiedLayerNormalization, FastGelu, BiasGelu, RotaryEmbedding, MultiHeadAttention
// and GroupQueryAttention; and SimplifiedLayerNormalization, which ONNX Runtime registers in
// the ai.onnx domain. The semantics are those of ONNX Runtime's CPU kernels (checked against
// ONNX Runtime 1.30 by go/session's TestMSOpsAgainstORT).

func init() {
	ms := graph.MSDomain + ":"
	ops.HostOps[ms+"SkipLayerNormalization"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		return skipNorm(rc, n, in, false)
	}
	ops.HostOps[ms+"SkipSimplifiedLayerNormalization"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		return skipNorm(rc, n, in, true)
	}
	ops.HostOps["SimplifiedLayerNormalization"] = SimplifiedLayerNorm
	ops.HostOps[ms+"FastGelu"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		return biasActivation(n, in, true)
	}
	ops.HostOps[ms+"BiasGelu"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		if !ops.Optional(in, 1).IsValid() {
			return nil, fmt.Errorf("BiasGelu needs the bias B (input 1)")
		}
		return biasActivation(n, in, false)
	}
	ops.HostOps[ms+"RotaryEmbedding"] = msRotaryEmbedding
	ops.HostOps[ms+"MultiHeadAttention"] = multiHeadAttention
	ops.HostOps[ms+"GroupQueryAttention"] = groupQueryAttention
}

// GeluTanh is GELU's tanh approximation (FastGelu's), GeluErf the exact one (BiasGelu's).
func GeluTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// GeluErf is GELU, x·Φ(x).
func GeluErf(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }

// biasActivation is FastGelu (tanh) or BiasGelu (erf): GELU(X + bias), the bias a vector over
// X's last axis.
func biasActivation(n *graph.Node, in []tensor.Tensor, tanh bool) ([]tensor.Tensor, error) {
	x := in[0]
	d := x.Dims()
	if !isFloat(x.DType()) {
		return nil, fmt.Errorf("input 0 is %s; want a float tensor", x.DType())
	}
	v := tensor.Float64s(x)
	if b := ops.Optional(in, 1); b.IsValid() {
		if len(d) == 0 || len(b.Dims()) != 1 || b.Dims()[0] != d[len(d)-1] {
			return nil, fmt.Errorf("the bias (input 1) has shape %v; want one value per element of the last axis of X %v", b.Dims(), d)
		}
		bv := tensor.Float64s(b)
		for i := range v {
			v[i] += bv[i%len(bv)]
		}
	}
	f := GeluErf
	if tanh {
		f = GeluTanh
	}
	for i, e := range v {
		v[i] = f(e)
	}
	return ops.FloatResult(x.DType(), d, v)
}

func isFloat(dt tensor.DType) bool {
	return dt == graph.Float || dt == graph.Float16 || dt == graph.BFloat16 || dt == graph.Double
}

// hiddenVector checks that input i, when given, is a vector of h values and returns them.
func hiddenVector(in []tensor.Tensor, i int, h int64, what string) ([]float64, error) {
	t := ops.Optional(in, i)
	if !t.IsValid() {
		return nil, nil
	}
	if len(t.Dims()) != 1 || t.Dims()[0] != h {
		return nil, fmt.Errorf("%s (input %d) has shape %v; want [%d], one value per hidden element", what, i, t.Dims(), h)
	}
	return tensor.Float64s(t), nil
}

// skipNorm is SkipLayerNormalization (rms false) and SkipSimplifiedLayerNormalization (rms
// true): s = input + skip (+ bias), normalized over the hidden (last) axis, scaled by gamma and,
// for the layer norm, shifted by beta. The skip is input's shape or broadcasts to it from its
// trailing (seq, hidden) axes. Outputs: the result, the mean and 1/stddev of each row
// (shape of input with the hidden axis 1), and s.
func skipNorm(rc ops.OpRun, n *graph.Node, in []tensor.Tensor, rms bool) ([]tensor.Tensor, error) {
	x, skip, gamma := in[0], in[1], in[2]
	d := x.Dims()
	if len(d) != 2 && len(d) != 3 {
		return nil, fmt.Errorf("input (input 0) has shape %v; want rank 3 (batch, seq, hidden) or 2 (tokens, hidden)", d)
	}
	if !isFloat(x.DType()) || skip.DType() != x.DType() || gamma.DType() != x.DType() {
		return nil, fmt.Errorf("input, skip and gamma are %s, %s and %s; want the same float type", x.DType(), skip.DType(), gamma.DType())
	}
	h := d[len(d)-1]
	sd := skip.Dims()
	sidx, err := ops.BroadcastIndex(sd, d)
	if err != nil || len(sd) < 2 || sd[len(sd)-1] != h {
		return nil, fmt.Errorf("skip (input 1) has shape %v; want the input's %v or its trailing axes", sd, d)
	}
	g, err := hiddenVector(in, 2, h, "gamma")
	if err != nil {
		return nil, err
	}
	biasIn := 4
	var beta []float64
	if !rms {
		if beta, err = hiddenVector(in, 3, h, "beta"); err != nil {
			return nil, err
		}
	} else {
		biasIn = 3
	}
	bias, err := hiddenVector(in, biasIn, h, "bias")
	if err != nil {
		return nil, err
	}
	eps := float64(n.AttrFloat("epsilon", 1e-12))
	xv, sv := tensor.Float64s(x), tensor.Float64s(skip)
	sum := make([]float64, len(xv))
	for i := range xv {
		sum[i] = xv[i] + sv[sidx[i]]
		if bias != nil {
			sum[i] += bias[i%int(h)]
		}
	}
	y, mean, inv := normRows(sum, int(h), eps, rms, g, beta)
	stat := append([]int64{}, d...)
	stat[len(stat)-1] = 1
	return floatOutputs(n, x.DType(), []floatOut{{y, d}, {mean, stat}, {inv, stat}, {sum, d}})
}

// normRows normalizes each row of h values of v: to zero mean and unit variance (rms false), or
// by the root mean square (rms true, the mean reported as 0), then scales by g and shifts by
// beta (nil: none).
func normRows(v []float64, h int, eps float64, rms bool, g, beta []float64) (y, mean, inv []float64) {
	rows := 0
	if h > 0 {
		rows = len(v) / h
	}
	y = make([]float64, len(v))
	mean, inv = make([]float64, rows), make([]float64, rows)
	for r := 0; r < rows; r++ {
		seg := v[r*h : (r+1)*h]
		m := 0.0
		if !rms {
			for _, e := range seg {
				m += e
			}
			m /= float64(h)
		}
		ss := 0.0
		for _, e := range seg {
			ss += (e - m) * (e - m)
		}
		iv := 1 / math.Sqrt(ss/float64(h)+eps)
		mean[r], inv[r] = m, iv
		for i, e := range seg {
			o := (e - m) * iv * g[i%len(g)]
			if beta != nil {
				o += beta[i]
			}
			y[r*h+i] = o
		}
	}
	return y, mean, inv
}

type floatOut struct {
	v     []float64
	shape []int64
}

// floatOutputs converts an op's outputs, leaving out (invalid) those the node does not name
// after the first.
func floatOutputs(n *graph.Node, dt tensor.DType, outs []floatOut) ([]tensor.Tensor, error) {
	res := make([]tensor.Tensor, 0, len(outs))
	for i, o := range outs {
		if i > 0 && (i >= len(n.Outputs) || n.Outputs[i] == "") {
			res = append(res, tensor.Tensor{})
			continue
		}
		t, err := tensor.FromFloat64s(dt, o.shape, o.v)
		if err != nil {
			return nil, err
		}
		res = append(res, t)
	}
	return res, nil
}

// SimplifiedLayerNorm is ONNX Runtime's SimplifiedLayerNormalization (RMS normalization, in
// the ai.onnx domain): X / sqrt(mean(X² over the axes from axis on) + epsilon) · scale, and
// the 1/rms of each row (X's shape with the normalized axes 1) as the optional second output.
func SimplifiedLayerNorm(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x, scale := in[0], in[1]
	if !isFloat(x.DType()) {
		return nil, fmt.Errorf("X (input 0) is %s; want a float tensor", x.DType())
	}
	d := x.Dims()
	ax, err := ops.NormAxis(n.AttrInt("axis", -1), len(d))
	if err != nil {
		return nil, err
	}
	norm := d[ax:]
	if !ops.SameShape(scale.Dims(), norm) && !(ops.Numel(scale.Dims()) == ops.Numel(norm) && len(scale.Dims()) == 1) {
		return nil, fmt.Errorf("scale (input 1) has shape %v; want the normalized shape %v", scale.Dims(), norm)
	}
	y, _, inv := normRows(tensor.Float64s(x), ops.Numel(norm), float64(n.AttrFloat("epsilon", 1e-5)), true, tensor.Float64s(scale), nil)
	stat := append([]int64{}, d...)
	for k := ax; k < len(stat); k++ {
		stat[k] = 1
	}
	return floatOutputs(n, x.DType(), []floatOut{{y, d}, {inv, stat}})
}

// rotaryPositions returns the cache row of token (b, s) for com.microsoft's position_ids:
// (batch, seq) explicit positions, or one value, the position of the first token (the rest
// follow it).
func rotaryPositions(pos tensor.Tensor, batch, seq int, rows int64) (func(b, s int) (int, error), error) {
	p := tensor.Int64s(pos)
	at := func(b, s int) int64 { return p[0] + int64(s) }
	switch {
	case len(pos.Dims()) == 2 && int(pos.Dims()[0]) == batch && int(pos.Dims()[1]) == seq:
		at = func(b, s int) int64 { return p[b*seq+s] }
	case len(p) == 1 && len(pos.Dims()) <= 1:
	default:
		return nil, fmt.Errorf("position_ids (input 1) has shape %v; want (batch %d, seq %d) or one start position", pos.Dims(), batch, seq)
	}
	return func(b, s int) (int, error) {
		r := at(b, s)
		if r < 0 || r >= rows {
			return 0, fmt.Errorf("position %d of batch %d, token %d is out of range: the caches hold %d positions", r, b, s, rows)
		}
		return int(r), nil
	}, nil
}

// rotate rotates the first 2·half features of one head (x, in place) by the angles of one
// cache row: halves, or even/odd pairs when interleaved.
func rotate(x, c, sn []float64, half int, interleaved bool) {
	for i := 0; i < half; i++ {
		f1, f2 := i, i+half
		if interleaved {
			f1, f2 = 2*i, 2*i+1
		}
		x1, x2 := x[f1], x[f2]
		x[f1] = c[i]*x1 - sn[i]*x2
		x[f2] = sn[i]*x1 + c[i]*x2
	}
}

// msRotaryEmbedding is com.microsoft's RotaryEmbedding: input (batch, seq, hidden) with
// num_heads (or hidden/head size from the caches when num_heads is 0 and the rotary dimension
// is the whole head), or (batch, heads, seq, head_size); position_ids (batch, seq) or a start
// position; cos_cache and sin_cache (max_position, rotary_dim/2). The first rotary_dim
// features of each head rotate.
func msRotaryEmbedding(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x, pos, cosT, sinT := in[0], in[1], in[2], in[3]
	if n.AttrInt("is_packed_batching", 0) != 0 {
		return nil, fmt.Errorf("is_packed_batching=1 is not supported")
	}
	if s := n.AttrFloat("scale", 1); s != 1 {
		return nil, fmt.Errorf("scale %g is not supported (only 1)", s)
	}
	if !isFloat(x.DType()) {
		return nil, fmt.Errorf("input (input 0) is %s; want a float tensor", x.DType())
	}
	cd := cosT.Dims()
	if len(cd) != 2 || !ops.SameShape(cd, sinT.Dims()) {
		return nil, fmt.Errorf("cos_cache %v and sin_cache %v must both be (max_position, rotary_dim/2)", cd, sinT.Dims())
	}
	half := int(cd[1])
	d := x.Dims()
	var batch, heads, seq, hs int
	var xAt func(b, s, h int) int // offset of head h of token (b, s)
	switch len(d) {
	case 4:
		batch, heads, seq, hs = int(d[0]), int(d[1]), int(d[2]), int(d[3])
		xAt = func(b, s, h int) int { return ((b*heads+h)*seq + s) * hs }
	case 3:
		nh := n.AttrInt("num_heads", 0)
		rd := n.AttrInt("rotary_embedding_dim", 0)
		if nh == 0 && rd == 0 && half > 0 {
			nh = d[2] / int64(2*half) // the rotary dimension is the head size
		}
		if nh <= 0 || d[2]%nh != 0 {
			return nil, fmt.Errorf("input of shape %v (batch, seq, hidden) needs num_heads dividing the hidden size, got num_heads=%d", d, nh)
		}
		batch, seq, heads, hs = int(d[0]), int(d[1]), int(nh), int(d[2]/nh)
		xAt = func(b, s, h int) int { return ((b*seq+s)*heads + h) * hs }
	default:
		return nil, fmt.Errorf("input has shape %v; want rank 3 (batch, seq, hidden) or 4 (batch, heads, seq, head_size)", d)
	}
	rd := int(n.AttrInt("rotary_embedding_dim", 0))
	if rd == 0 {
		rd = 2 * half
	}
	if rd != 2*half || rd > hs || rd <= 0 {
		return nil, fmt.Errorf("rotary dimension %d (rotary_embedding_dim, or twice the caches' %d columns) must be twice the caches' columns and at most the head size %d", rd, half, hs)
	}
	row, err := rotaryPositions(pos, batch, seq, cd[0])
	if err != nil {
		return nil, err
	}
	cv, sv := tensor.Float64s(cosT), tensor.Float64s(sinT)
	v := tensor.Float64s(x)
	interleaved := n.AttrInt("interleaved", 0) != 0
	for b := 0; b < batch; b++ {
		for s := 0; s < seq; s++ {
			r, err := row(b, s)
			if err != nil {
				return nil, err
			}
			for h := 0; h < heads; h++ {
				o := xAt(b, s, h)
				rotate(v[o:o+hs], cv[r*half:(r+1)*half], sv[r*half:(r+1)*half], half, interleaved)
			}
		}
	}
	return ops.FloatResult(x.DType(), d, v)
}

// heads is a (batch, heads, seq, size) view of an attention operand.
type heads struct {
	b, h, s, d int
	v          []float64
	bsnh       bool // laid out (batch, seq, heads, size) rather than (batch, heads, seq, size)
}

func (w heads) at(b, h, s, e int) int {
	if w.bsnh {
		return ((b*w.s+s)*w.h+h)*w.d + e
	}
	return ((b*w.h+h)*w.s+s)*w.d + e
}

// splitHeads views a (batch, seq, heads·size) tensor as nh heads.
func splitHeads(t tensor.Tensor, nh int, what string) (heads, error) {
	d := t.Dims()
	if len(d) != 3 || nh <= 0 || d[2]%int64(nh) != 0 {
		return heads{}, fmt.Errorf("%s has shape %v; want (batch, seq, hidden) with the hidden size a multiple of %d heads", what, d, nh)
	}
	return heads{b: int(d[0]), h: nh, s: int(d[1]), d: int(d[2]) / nh, v: tensor.Float64s(t), bsnh: true}, nil
}

// withPast is (past ++ cur) along the sequence for each (batch, head), as BNSH: the present
// key or value. past may be invalid (none).
func withPast(past tensor.Tensor, cur heads, what string) (heads, error) {
	ps := 0
	var pv []float64
	if past.IsValid() {
		pd := past.Dims()
		if len(pd) != 4 || int(pd[0]) != cur.b || int(pd[1]) != cur.h || int(pd[3]) != cur.d {
			return heads{}, fmt.Errorf("%s has shape %v; want (batch %d, heads %d, past, %d)", what, pd, cur.b, cur.h, cur.d)
		}
		ps, pv = int(pd[2]), tensor.Float64s(past)
	}
	out := heads{b: cur.b, h: cur.h, s: ps + cur.s, d: cur.d}
	out.v = make([]float64, out.b*out.h*out.s*out.d)
	for b := 0; b < out.b; b++ {
		for h := 0; h < out.h; h++ {
			copy(out.v[out.at(b, h, 0, 0):], pv[((b*out.h+h)*ps)*out.d:((b*out.h+h)*ps+ps)*out.d])
			for s := 0; s < cur.s; s++ {
				for e := 0; e < cur.d; e++ {
					out.v[out.at(b, h, ps+s, e)] = cur.v[cur.at(b, h, s, e)]
				}
			}
		}
	}
	return out, nil
}

// attendRow computes one query row's attention: softmax over the keys of scores (the masked
// ones -Inf), optionally with an extra zero logit (smooth), then the weighted sum of V's rows
// for key head kh into y.
func attendRow(scores []float64, V heads, b, kh int, y []float64, smooth bool) {
	mx := math.Inf(-1)
	for _, x := range scores {
		mx = math.Max(mx, x)
	}
	if smooth {
		mx = math.Max(mx, 0)
	}
	sum := 0.0
	if smooth {
		sum = math.Exp(-mx)
	}
	for j, x := range scores {
		if math.IsInf(x, -1) {
			scores[j] = 0
			continue
		}
		scores[j] = math.Exp(x - mx)
		sum += scores[j]
	}
	for e := range y {
		y[e] = 0
	}
	if sum == 0 {
		return
	}
	for j, p := range scores {
		if p == 0 {
			continue
		}
		p /= sum
		for e := range y {
			y[e] += p * V.v[V.at(b, kh, j, e)]
		}
	}
}

func dot(Q heads, b, h, i int, K heads, kh, j int) float64 {
	s := 0.0
	for e := 0; e < Q.d; e++ {
		s += Q.v[Q.at(b, h, i, e)] * K.v[K.at(b, kh, j, e)]
	}
	return s
}

// multiHeadAttention is com.microsoft's MultiHeadAttention: query (batch, seq, hidden); key
// and value (batch, kv_seq, hidden) projected with the bias, or already split (batch, heads,
// kv_seq, head_size); the optional bias (3·hidden: q, k, v), key_padding_mask (batch, total)
// of 1 to keep and 0 to mask, or (batch) valid lengths, attention_bias (batch or 1, heads or 1,
// seq, total), past_key and past_value (batch, heads, past, head_size) before the new keys and
// values. A masked score gets mask_filter_value added; unidirectional masks the keys after
// past + i for query i. Outputs: (batch, seq, heads·v_head_size), present_key, present_value.
func multiHeadAttention(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	q := in[0]
	k, v := ops.Optional(in, 1), ops.Optional(in, 2)
	bias, kpm, ab := ops.Optional(in, 3), ops.Optional(in, 4), ops.Optional(in, 5)
	pastK, pastV := ops.Optional(in, 6), ops.Optional(in, 7)
	for i := 8; i < len(in); i++ {
		if in[i].IsValid() {
			return nil, fmt.Errorf("input %d (past_sequence_length / cache_indirection) is not supported", i)
		}
	}
	nh := int(n.AttrInt("num_heads", 0))
	if nh <= 0 {
		return nil, fmt.Errorf("num_heads must be positive, got %d", nh)
	}
	if !k.IsValid() || !v.IsValid() {
		return nil, fmt.Errorf("packed QKV or KV (key or value missing) is not supported: give query, key and value")
	}
	if !isFloat(q.DType()) || k.DType() != q.DType() || v.DType() != q.DType() {
		return nil, fmt.Errorf("query, key and value are %s, %s and %s; want the same float type", q.DType(), k.DType(), v.DType())
	}
	Q, err := splitHeads(q, nh, "query (input 0)")
	if err != nil {
		return nil, err
	}
	var K, V heads
	split := len(k.Dims()) == 4
	if split {
		kd, vd := k.Dims(), v.Dims()
		if len(vd) != 4 || int(kd[0]) != Q.b || int(kd[1]) != nh || int(kd[3]) != Q.d || int(vd[0]) != Q.b || int(vd[1]) != nh || vd[2] != kd[2] {
			return nil, fmt.Errorf("key %v and value %v (batch, heads, kv_seq, head_size) disagree with query %v and num_heads %d", kd, vd, q.Dims(), nh)
		}
		K = heads{b: Q.b, h: nh, s: int(kd[2]), d: int(kd[3]), v: tensor.Float64s(k)}
		V = heads{b: Q.b, h: nh, s: int(vd[2]), d: int(vd[3]), v: tensor.Float64s(v)}
		if pastK.IsValid() || pastV.IsValid() {
			return nil, fmt.Errorf("past_key and past_value need key and value of shape (batch, kv_seq, hidden), not already split into heads")
		}
	} else {
		if K, err = splitHeads(k, nh, "key (input 1)"); err != nil {
			return nil, err
		}
		if V, err = splitHeads(v, nh, "value (input 2)"); err != nil {
			return nil, err
		}
		if K.b != Q.b || V.b != Q.b || K.s != V.s || K.d != Q.d {
			return nil, fmt.Errorf("query %v, key %v and value %v disagree: want the same batch, key and value the same sequence, query and key the same hidden size", q.Dims(), k.Dims(), v.Dims())
		}
	}
	if bias.IsValid() {
		bd := bias.Dims()
		want := int64(Q.h*Q.d + K.h*K.d + V.h*V.d)
		if len(bd) != 1 || bd[0] != want {
			return nil, fmt.Errorf("bias (input 3) has shape %v; want [%d] (query, key and value hidden sizes)", bd, want)
		}
		bv := tensor.Float64s(bias)
		addBias := func(w heads, off int) {
			for i := range w.v {
				w.v[i] += bv[off+i%(w.h*w.d)]
			}
		}
		addBias(Q, 0)
		if !split {
			addBias(K, Q.h*Q.d)
			addBias(V, Q.h*Q.d+K.h*K.d)
		}
	}
	if pastK.IsValid() != pastV.IsValid() {
		return nil, fmt.Errorf("past_key and past_value (inputs 6 and 7) must be given together")
	}
	PK, err := withPast(pastK, K, "past_key (input 6)")
	if err != nil {
		return nil, err
	}
	PV, err := withPast(pastV, V, "past_value (input 7)")
	if err != nil {
		return nil, err
	}
	total, past := PK.s, PK.s-K.s
	if err := ops.ReserveShape(rc, "the attention scores", graph.Double, []int64{int64(Q.b), int64(Q.h), int64(Q.s), int64(total)}, 0); err != nil {
		return nil, err
	}
	filter := float64(n.AttrFloat("mask_filter_value", -10000))
	// keep(b, j) says key j of batch b is not padding.
	keep := func(b, j int) bool { return true }
	if kpm.IsValid() {
		kd := kpm.Dims()
		m := tensor.Int64s(kpm)
		switch {
		case len(kd) == 2 && int(kd[0]) == Q.b && int(kd[1]) == total:
			keep = func(b, j int) bool { return m[b*total+j] != 0 }
		case len(kd) == 1 && int(kd[0]) == Q.b:
			keep = func(b, j int) bool { return int64(j) < m[b] }
		default:
			return nil, fmt.Errorf("key_padding_mask (input 4) has shape %v; want (batch %d, total %d) or (batch %d)", kd, Q.b, total, Q.b)
		}
	}
	var abv []float64
	var abIdx []int
	if ab.IsValid() {
		target := []int64{int64(Q.b), int64(Q.h), int64(Q.s), int64(total)}
		if len(ab.Dims()) != 4 {
			return nil, fmt.Errorf("attention_bias (input 5) has shape %v; want rank 4, broadcast to %v", ab.Dims(), target)
		}
		if abIdx, err = ops.BroadcastIndex(ab.Dims(), target); err != nil {
			return nil, fmt.Errorf("attention_bias (input 5) has shape %v, which does not broadcast to %v", ab.Dims(), target)
		}
		abv = tensor.Float64s(ab)
	}
	scale := float64(n.AttrFloat("scale", 0))
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(Q.d))
	}
	causal := n.AttrInt("unidirectional", 0) != 0
	vd := PV.d
	y := make([]float64, Q.b*Q.s*Q.h*vd)
	row := make([]float64, total)
	for b := 0; b < Q.b; b++ {
		for h := 0; h < Q.h; h++ {
			for i := 0; i < Q.s; i++ {
				for j := 0; j < total; j++ {
					s := dot(Q, b, h, i, PK, h, j) * scale
					if !keep(b, j) {
						s += filter
					}
					if causal && j > past+i {
						s += filter
					}
					if abv != nil {
						s += abv[abIdx[((b*Q.h+h)*Q.s+i)*total+j]]
					}
					row[j] = s
				}
				o := ((b*Q.s+i)*Q.h + h) * vd
				attendRow(row, PV, b, h, y[o:o+vd], false)
			}
		}
	}
	shape := func(w heads) []int64 { return []int64{int64(w.b), int64(w.h), int64(w.s), int64(w.d)} }
	return floatOutputs(n, q.DType(), []floatOut{{y, []int64{int64(Q.b), int64(Q.s), int64(Q.h * vd)}}, {PK.v, shape(PK)}, {PV.v, shape(PV)}})
}

// groupQueryAttention is com.microsoft's GroupQueryAttention: query (batch, seq, heads·head)
// and key and value (batch, seq, kv_heads·head), or packed in query alone (batch, seq,
// (heads + 2·kv_heads)·head); past_key and past_value (batch, kv_heads, past_buffer, head);
// seqlens_k (batch) the total length minus 1 of each sequence; total_sequence_length; and,
// with do_rotary, cos_cache and sin_cache (positions, rotary_dim/2) that rotate the query and
// the new keys at their positions. The new keys and values go after each sequence's past ones
// in present_key and present_value (batch, kv_heads, max(past_buffer, total), head); query i
// of a sequence at position p sees the keys up to p (and, with local_window_size w > 0, the
// last w of them: from p - w + 1 on, as ONNX Runtime's kernels do); each group of heads/kv_heads query heads shares one key/value head. softcap
// bounds the scaled scores (softcap·tanh(s/softcap)); smooth_softmax adds a zero logit.
func groupQueryAttention(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	q := in[0]
	k, v := ops.Optional(in, 1), ops.Optional(in, 2)
	pastK, pastV := ops.Optional(in, 3), ops.Optional(in, 4)
	seqlens, totalT := ops.Optional(in, 5), ops.Optional(in, 6)
	cosT, sinT := ops.Optional(in, 7), ops.Optional(in, 8)
	for i := 9; i < len(in); i++ {
		if in[i].IsValid() {
			return nil, fmt.Errorf("input %d (position_ids, attention_bias or head_sink) is not supported", i)
		}
	}
	nh, kvh := int(n.AttrInt("num_heads", 0)), int(n.AttrInt("kv_num_heads", 0))
	if nh <= 0 || kvh <= 0 || nh%kvh != 0 {
		return nil, fmt.Errorf("num_heads %d must be a positive multiple of kv_num_heads %d", nh, kvh)
	}
	if !seqlens.IsValid() || !totalT.IsValid() {
		return nil, fmt.Errorf("seqlens_k (input 5) and total_sequence_length (input 6) are required")
	}
	if !isFloat(q.DType()) {
		return nil, fmt.Errorf("query (input 0) is %s; want a float tensor", q.DType())
	}
	qd := q.Dims()
	if len(qd) != 3 {
		return nil, fmt.Errorf("query (input 0) has shape %v; want (batch, seq, hidden)", qd)
	}
	var Q, K, V heads
	var err error
	if k.IsValid() != v.IsValid() {
		return nil, fmt.Errorf("key and value (inputs 1 and 2) must be given together, or both left out for packed QKV")
	}
	if k.IsValid() {
		if Q, err = splitHeads(q, nh, "query (input 0)"); err != nil {
			return nil, err
		}
		if K, err = splitHeads(k, kvh, "key (input 1)"); err != nil {
			return nil, err
		}
		if V, err = splitHeads(v, kvh, "value (input 2)"); err != nil {
			return nil, err
		}
		if K.b != Q.b || V.b != Q.b || K.s != Q.s || V.s != Q.s || K.d != Q.d || V.d != Q.d {
			return nil, fmt.Errorf("query %v, key %v and value %v disagree for %d heads and %d kv heads: want the same batch, sequence and head size", qd, k.Dims(), v.Dims(), nh, kvh)
		}
	} else {
		w := nh + 2*kvh
		if qd[2]%int64(w) != 0 {
			return nil, fmt.Errorf("packed query (input 0) of shape %v: the hidden size must be (num_heads + 2·kv_num_heads)·head_size = %d·head_size", qd, w)
		}
		hs := int(qd[2]) / w
		all := tensor.Float64s(q)
		b, s := int(qd[0]), int(qd[1])
		part := func(off, h int) heads {
			t := heads{b: b, h: h, s: s, d: hs, bsnh: true, v: make([]float64, b*s*h*hs)}
			for r := 0; r < b*s; r++ {
				copy(t.v[r*h*hs:(r+1)*h*hs], all[r*w*hs+off*hs:r*w*hs+(off+h)*hs])
			}
			return t
		}
		Q, K, V = part(0, nh), part(nh, kvh), part(nh+kvh, kvh)
	}
	total, err := ops.OneInt(in, 6, "total_sequence_length (input 6)")
	if err != nil {
		return nil, err
	}
	lens := tensor.Int64s(seqlens)
	if len(lens) != Q.b {
		return nil, fmt.Errorf("seqlens_k (input 5) has %d values for a batch of %d", len(lens), Q.b)
	}
	if pastK.IsValid() != pastV.IsValid() {
		return nil, fmt.Errorf("past_key and past_value (inputs 3 and 4) must be given together")
	}
	pastBuf := 0
	var pkv, pvv []float64
	if pastK.IsValid() {
		for _, p := range []tensor.Tensor{pastK, pastV} {
			pd := p.Dims()
			if len(pd) != 4 || int(pd[0]) != Q.b || int(pd[1]) != kvh || int(pd[3]) != Q.d || !ops.SameShape(pd, pastK.Dims()) {
				return nil, fmt.Errorf("past_key %v and past_value %v must both be (batch %d, kv_num_heads %d, past, head_size %d)", pastK.Dims(), pastV.Dims(), Q.b, kvh, Q.d)
			}
		}
		pastBuf = int(pastK.Dims()[2])
		pkv, pvv = tensor.Float64s(pastK), tensor.Float64s(pastV)
	}
	presentLen := max(pastBuf, int(total))
	firstPrompt := Q.s > 1 && int64(Q.s) == total
	// Each sequence's past length (where its new tokens go) and total length.
	pastOf := make([]int, Q.b)
	for b, l := range lens {
		t := int(l) + 1
		if t < 1 || int64(t) > total || t > presentLen {
			return nil, fmt.Errorf("seqlens_k[%d] = %d is outside [0, total_sequence_length %d)", b, l, total)
		}
		if !firstPrompt {
			pastOf[b] = t - Q.s
			if pastOf[b] < 0 {
				return nil, fmt.Errorf("seqlens_k[%d] = %d is shorter than the %d new tokens", b, l, Q.s)
			}
			if pastOf[b] > pastBuf {
				return nil, fmt.Errorf("seqlens_k[%d] = %d needs %d past tokens, past_key holds %d", b, l, pastOf[b], pastBuf)
			}
		}
	}
	if n.AttrInt("do_rotary", 0) != 0 {
		if !cosT.IsValid() || !sinT.IsValid() {
			return nil, fmt.Errorf("do_rotary needs cos_cache and sin_cache (inputs 7 and 8)")
		}
		cd := cosT.Dims()
		if len(cd) != 2 || !ops.SameShape(cd, sinT.Dims()) || int(cd[1])*2 > Q.d {
			return nil, fmt.Errorf("cos_cache %v and sin_cache %v must both be (max_position, rotary_dim/2) with rotary_dim at most the head size %d", cd, sinT.Dims(), Q.d)
		}
		half := int(cd[1])
		cv, sv := tensor.Float64s(cosT), tensor.Float64s(sinT)
		inter := n.AttrInt("rotary_interleaved", 0) != 0
		for b := 0; b < Q.b; b++ {
			for s := 0; s < Q.s; s++ {
				p := pastOf[b] + s
				if int64(p) >= cd[0] {
					return nil, fmt.Errorf("position %d of batch %d is outside the caches' %d positions", p, b, cd[0])
				}
				c, sn := cv[p*half:(p+1)*half], sv[p*half:(p+1)*half]
				for _, w := range []heads{Q, K} {
					for h := 0; h < w.h; h++ {
						o := w.at(b, h, s, 0)
						rotate(w.v[o:o+w.d], c, sn, half, inter)
					}
				}
			}
		}
	}
	// present (batch, kv_heads, presentLen, head): each sequence's past, then its new tokens.
	present := func(pv []float64, cur heads) heads {
		out := heads{b: Q.b, h: kvh, s: presentLen, d: Q.d, v: make([]float64, Q.b*kvh*presentLen*Q.d)}
		for b := 0; b < Q.b; b++ {
			for h := 0; h < kvh; h++ {
				if pv != nil {
					src := ((b*kvh + h) * pastBuf) * Q.d
					copy(out.v[out.at(b, h, 0, 0):out.at(b, h, pastOf[b], 0)], pv[src:src+pastOf[b]*Q.d])
				}
				for s := 0; s < Q.s && pastOf[b]+s < presentLen; s++ {
					for e := 0; e < Q.d; e++ {
						out.v[out.at(b, h, pastOf[b]+s, e)] = cur.v[cur.at(b, h, s, e)]
					}
				}
			}
		}
		return out
	}
	if err := ops.ReserveShape(rc, "the present key and value", graph.Double, []int64{2, int64(Q.b), int64(kvh), int64(presentLen), int64(Q.d)}, 0); err != nil {
		return nil, err
	}
	PK, PV := present(pkv, K), present(pvv, V)
	scale := float64(n.AttrFloat("scale", 0))
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(Q.d))
	}
	softcap := float64(n.AttrFloat("softcap", 0))
	window := int(n.AttrInt("local_window_size", -1))
	smooth := n.AttrInt("smooth_softmax", 0) != 0
	reps := nh / kvh
	y := make([]float64, Q.b*Q.s*nh*Q.d)
	row := make([]float64, presentLen)
	for b := 0; b < Q.b; b++ {
		for h := 0; h < nh; h++ {
			kh := h / reps
			for i := 0; i < Q.s; i++ {
				p := pastOf[b] + i
				last := min(p, int(lens[b])) // the last key the query sees
				for j := range row {
					if j > last || (window > 0 && j <= p-window) {
						row[j] = math.Inf(-1)
						continue
					}
					s := dot(Q, b, h, i, PK, kh, j) * scale
					if softcap > 0 {
						s = softcap * math.Tanh(s/softcap)
					}
					row[j] = s
				}
				o := ((b*Q.s+i)*nh + h) * Q.d
				attendRow(row, PV, b, kh, y[o:o+Q.d], smooth)
			}
		}
	}
	pshape := []int64{int64(Q.b), int64(kvh), int64(presentLen), int64(Q.d)}
	return floatOutputs(n, q.DType(), []floatOut{{y, []int64{int64(Q.b), int64(Q.s), int64(nh * Q.d)}}, {PK.v, pshape}, {PV.v, pshape}})
}
