package mskernels

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/kernelops"
)

// GroupQueryAttention on kernels/gqa.loom (planGroupQueryAttention).

const gqaFile = "gqa.loom"

// gqaMaxGrid bounds the grid axes gqa.loom's launches put the heads and the sequences on (grid
// y and z, ops.KernelLimits); larger inputs run as the host function.
const gqaMaxGrid = 65535

func init() {
	key := graph.MSDomain + ":GroupQueryAttention"
	ops.RegisterKernelOp(key, planGroupQueryAttention, kernelops.HostFallback(key))
}

// gqaShape is what planGroupQueryAttention reads from the inputs' types and shapes.
type gqaShape struct {
	batch, seq, nh, kvh, hs int
	packed                  bool
	pastBuf                 int // past_key's length (0: no past)
	rotary                  bool
	cacheRows, half         int // cos_cache and sin_cache (max_position, rotary_dim/2)
	it                      string
}

// gqaShapeOf checks the inputs the kernels take; reason says why they do not (the host
// function then runs, refusing invalid inputs with its errors).
func gqaShapeOf(n *graph.Node, in []ops.ValueInfo) (g gqaShape, reason string) {
	if !kernelops.AllFloat32(in, 0) {
		return g, kernelops.DeclineType(in)
	}
	for i := 9; i < len(in); i++ {
		if kernelops.NeedInput(in, i) {
			return g, "host: position_ids, attention_bias or head_sink"
		}
	}
	g.nh, g.kvh = int(n.AttrInt("num_heads", 0)), int(n.AttrInt("kv_num_heads", 0))
	if g.nh <= 0 || g.kvh <= 0 || g.nh%g.kvh != 0 {
		return g, "host: num_heads is not a positive multiple of kv_num_heads"
	}
	q := in[0].Shape
	if len(q) != 3 {
		return g, "host: the query's rank is not 3"
	}
	g.batch, g.seq = int(q[0]), int(q[1])
	hasK, hasV := kernelops.NeedInput(in, 1), kernelops.NeedInput(in, 2)
	switch {
	case hasK != hasV:
		return g, "host: key without value, or value without key"
	case hasK:
		if q[2]%int64(g.nh) != 0 {
			return g, "host: num_heads does not divide the query's hidden size"
		}
		g.hs = int(q[2]) / g.nh
		if !kernelops.AllFloat32(in, 1, 2) {
			return g, kernelops.DeclineType(in)
		}
		want := []int64{q[0], q[1], int64(g.kvh * g.hs)}
		if !ops.SameShape(in[1].Shape, want) || !ops.SameShape(in[2].Shape, want) {
			return g, "host: key and value do not fit the query"
		}
	default:
		w := int64(g.nh + 2*g.kvh)
		if q[2]%w != 0 {
			return g, "host: the packed query's hidden size is not a multiple of num_heads + 2·kv_num_heads"
		}
		g.packed, g.hs = true, int(q[2]/w)
	}
	if hasPK, hasPV := kernelops.NeedInput(in, 3), kernelops.NeedInput(in, 4); hasPK || hasPV {
		if !hasPK || !hasPV || !kernelops.AllFloat32(in, 3, 4) {
			return g, "host: past_key and past_value are not both given as float32"
		}
		p := in[3].Shape
		if len(p) != 4 || int(p[0]) != g.batch || int(p[1]) != g.kvh || int(p[3]) != g.hs || !ops.SameShape(p, in[4].Shape) {
			return g, "host: past_key and past_value do not fit the query"
		}
		g.pastBuf = int(p[2])
	}
	if !kernelops.NeedInput(in, 5) || !kernelops.NeedInput(in, 6) {
		return g, "host: seqlens_k or total_sequence_length is missing"
	}
	switch sl := in[5].Dtype; {
	case sl == graph.Int32 && in[6].Dtype == graph.Int32:
		g.it = "i32"
	case sl == graph.Int64 && in[6].Dtype == graph.Int64:
		g.it = "i64"
	default:
		return g, "host: seqlens_k and total_sequence_length are not both int32 (or both int64)"
	}
	if ops.Numel(in[5].Shape) != g.batch || ops.Numel(in[6].Shape) != 1 {
		return g, "host: seqlens_k does not hold one value per sequence, or total_sequence_length one value"
	}
	if n.AttrInt("do_rotary", 0) != 0 {
		if !kernelops.AllFloat32(in, 7, 8) {
			return g, "host: do_rotary without float32 cos_cache and sin_cache"
		}
		c := in[7].Shape
		if len(c) != 2 || !ops.SameShape(c, in[8].Shape) || 2*int(c[1]) > g.hs {
			return g, "host: the caches do not fit the head size"
		}
		g.rotary, g.cacheRows, g.half = true, int(c[0]), int(c[1])
	}
	if g.batch*g.seq*g.hs == 0 {
		return g, "host: an empty query"
	}
	if g.nh > gqaMaxGrid || 3*g.batch > gqaMaxGrid {
		return g, fmt.Sprintf("host: more than %d heads or %d sequences", gqaMaxGrid, gqaMaxGrid/3)
	}
	return g, ""
}

// gqaLengthsOK checks seqlens_k's values as the host function does (and the rotary positions
// they put the new tokens at), for a planner that sees them: the interpreter's, or a plan's
// diagnosis of a failed run. Bad values make the planner decline, so that the host function
// reports them in its words.
func gqaLengthsOK(g gqaShape, lens []int64, total int64, present int) bool {
	first := g.seq > 1 && int64(g.seq) == total
	for _, l := range lens {
		t := l + 1
		if t < 1 || t > total || t > int64(present) {
			return false
		}
		past := int64(0)
		if !first {
			past = t - int64(g.seq)
			if past < 0 || past > int64(g.pastBuf) {
				return false
			}
		}
		if g.rotary && past+int64(g.seq) > int64(g.cacheRows) {
			return false
		}
	}
	return true
}

// planGroupQueryAttention plans com.microsoft GroupQueryAttention (float32; separate or packed
// QKV; past KV or none; do_rotary, interleaved or not; local_window_size, softcap,
// smooth_softmax; num_heads a multiple of kv_num_heads) as gqa.loom's gqa_kv, which writes
// present_key and present_value (each sequence's past, then its new keys, rotated, and
// values) and the rotated query, and gqa_attn, the attention of each query row with its kv
// head's keys, the causal and local-window mask bounding the keys it reads.
//
// The kernels read seqlens_k and total_sequence_length where they are bound, when they run:
// only the present outputs' length, max(past buffer, total_sequence_length), is fixed by the
// plan, so the planner needs total_sequence_length's value (a compiled plan specializes on it:
// internal/plan's msControlPositions) and declines without it. seqlens_k is read at run time
// only: gqa_kv checks it against total_sequence_length and the buffers as the host function
// does, and a bad value fails the run through the violation word, naming the node and
// seqlens_k (a plan whose node reads graph inputs then runs the node through the interpreter,
// where this planner, seeing the values, declines and the host function reports them in its
// words). Sequences past 21,845 or heads past 65,535 (grid limits), and inputs of other types,
// run as the host function.
func planGroupQueryAttention(n *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	g, reason := gqaShapeOf(n, in)
	if reason != "" {
		return nil, reason, nil
	}
	totals, ok := kernelops.StaticInts(in, 6)
	if !ok {
		return nil, "host: total_sequence_length is not known when planning (it sets the present outputs' length)", nil
	}
	total := totals[0]
	if total < 1 || total > math.MaxInt32 {
		return nil, "host: total_sequence_length is out of range", nil
	}
	pres := max(g.pastBuf, int(total))
	if lens, ok := kernelops.StaticInts(in, 5); ok && !gqaLengthsOK(g, lens, total, pres) {
		return nil, "host: seqlens_k is out of range (the host function reports it)", nil
	}
	B, S, nh, kvh, hs := g.batch, g.seq, g.nh, g.kvh, g.hs
	presShape := []int64{int64(B), int64(kvh), int64(pres), int64(hs)}
	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: []int64{int64(B), int64(S), int64(nh * hs)}}},
		Reason: kernelops.ReasonFloat32 + ", present KV written and attention over the run-time lengths (gqa.loom)"}
	// The present buffers: the outputs, or scratch when the node leaves them unnamed.
	var present [2]ops.Operand
	for j := 1; j <= 2 && j < len(n.Outputs); j++ {
		if named(n, j) {
			p.Outputs = append(p.Outputs, ops.ValueType{Dtype: graph.Float, Shape: presShape})
		} else {
			p.Outputs = append(p.Outputs, ops.ValueType{Dtype: graph.Float, Shape: []int64{0}})
		}
	}
	for j := 1; j <= 2; j++ {
		present[j-1] = ops.OutputOperand(j)
		if !named(n, j) {
			present[j-1] = plannerScratch(p, ops.Numel(presShape))
		}
	}
	q0 := ops.InputOperand(0)
	kOp, vOp := ops.InputOperand(1), ops.InputOperand(2)
	qrs, krs, vrs := nh*hs, kvh*hs, kvh*hs
	qoff, koff, voff := 0, 0, 0
	if g.packed {
		w := (nh + 2*kvh) * hs
		kOp, vOp = q0, q0
		qrs, krs, vrs = w, w, w
		koff, voff = nh*hs, (nh+kvh)*hs
	}
	pkOp, pvOp := q0, q0
	if kernelops.NeedInput(in, 3) {
		pkOp, pvOp = ops.InputOperand(3), ops.InputOperand(4)
	}
	csOp, snOp := q0, q0
	crows, half := 0, 0
	qAttn, qaRS, qaOff := q0, qrs, qoff
	var qr ops.Operand
	inter := false
	if g.rotary {
		csOp, snOp = ops.InputOperand(7), ops.InputOperand(8)
		crows, half = g.cacheRows, g.half
		inter = n.AttrInt("rotary_interleaved", 0) != 0
		qr = plannerScratch(p, B*S*nh*hs)
		qAttn, qaRS, qaOff = qr, nh*hs, 0
	} else {
		qr = plannerScratch(p, 1) // bound, never written
	}
	parts := 2
	if g.rotary {
		parts = 3
	}
	kvArgs := []uint64{kernelops.U(max(pres, S)), kernelops.U(nh), kernelops.U(parts * B), kernelops.U(B), kernelops.U(S), kernelops.U(kvh),
		kernelops.U(hs), kernelops.U(pres), kernelops.U(g.pastBuf), kernelops.U(qrs), kernelops.U(qoff), kernelops.U(krs), kernelops.U(koff),
		kernelops.U(vrs), kernelops.U(voff), kernelops.U(crows), kernelops.U(half)}
	sl, tt := ops.InputOperand(5), ops.InputOperand(6)
	p.Calls = append(p.Calls, ops.KernelCall{File: gqaFile, Symbol: "gqa_kv",
		Config: map[string]string{"IT": g.it, "ROT": fmt.Sprint(g.rotary), "INTER": fmt.Sprint(inter)},
		Args:   kvArgs, Workload: kvArgs[:3],
		Bind: []ops.KernelBinding{ops.ReadOf(q0), ops.ReadOf(kOp), ops.ReadOf(vOp), ops.ReadOf(pkOp), ops.ReadOf(pvOp),
			ops.ReadOf(sl), ops.ReadOf(tt), ops.ReadOf(csOp), ops.ReadOf(snOp),
			ops.WriteOf(present[0]), ops.WriteOf(present[1]), ops.WriteOf(qr)}})
	scale := float64(n.AttrFloat("scale", 0))
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(hs))
	}
	softcap := n.AttrFloat("softcap", 0)
	// A window that covers every position is no window (and stays a small kernel argument).
	window := n.AttrInt("local_window_size", -1)
	if window <= 0 || window > int64(pres+S) {
		window = 0
	}
	attnArgs := []uint64{kernelops.U(S), kernelops.U(nh), kernelops.U(B), kernelops.U(kvh), kernelops.U(hs), kernelops.U(pres),
		kernelops.U(qaRS), kernelops.U(qaOff), bits64(window), f32bits(float32(scale)), f32bits(max(softcap, 0))}
	p.Calls = append(p.Calls, ops.KernelCall{File: gqaFile, Symbol: "gqa_attn",
		Config: map[string]string{"IT": g.it, "SOFTCAP": fmt.Sprint(softcap > 0), "SMOOTH": fmt.Sprint(n.AttrInt("smooth_softmax", 0) != 0)},
		Args:   attnArgs, Workload: attnArgs[:3],
		Bind: []ops.KernelBinding{ops.ReadOf(qAttn), ops.ReadOf(present[0]), ops.ReadOf(present[1]), ops.ReadOf(sl), ops.ReadOf(tt),
			ops.ReadWriteOf(ops.OutputOperand(0))}})
	return p, "", nil
}
