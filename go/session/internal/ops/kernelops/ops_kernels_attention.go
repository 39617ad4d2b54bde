package kernelops

import (
	"math"
	"slices"
	"strconv"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/nn"
)

// Loom's fused Attention as kernels (kernels/attention.loom, bmm.loom) for float32 Q, K, V
// of rank >= 2 with numpy-broadcast batch axes: S = Q·Kᵀ (bmm_nt, or bmm when K comes
// transposed), the scaled and masked softmax of S in place (attn_softmax), then P·V (bmm). loomAttention
// (ops_loom.go), which composes the ai.onnx ops, is the host fallback.

func init() {
	ops.RegisterKernelOp(graph.LoomDomain+":Attention", PlanAttention, nn.LoomAttention)
	ops.RegisterGPUKernelPlanner(graph.LoomDomain+":Attention", attnSoftmaxRows.planner(PlanAttention))
}

func PlanAttention(nd *graph.Node, _ int64, in []ops.ValueInfo) (*ops.KernelPlan, string, error) {
	if len(in) < 3 || !allFloat32(in, 0, 1, 2) {
		return nil, declineType(in), nil
	}
	q, k, v := in[0].Shape, in[1].Shape, in[2].Shape
	if len(k) < 2 {
		return nil, "", ops.OpErr("Attention: K must have rank 2 or more, got %v", k)
	}
	if len(q) < 2 || len(v) < 2 {
		return nil, "host: the kernels cover Q and V of rank 2 or more", nil
	}
	kt := nd.AttrInt("k_transposed", 0) != 0
	lq, dk := int(q[len(q)-2]), int(q[len(q)-1])
	lk, dkk := int(k[len(k)-2]), int(k[len(k)-1])
	if kt {
		lk, dkk = dkk, lk
	}
	lv, dv := int(v[len(v)-2]), int(v[len(v)-1])
	if dk != dkk || lk != lv {
		return nil, "", ops.OpErr("Attention: Q %v, K %v (k_transposed=%v) and V %v do not multiply", q, k, kt, v)
	}
	qb, kb, vb := q[:len(q)-2], k[:len(k)-2], v[:len(v)-2]
	sb, err := ops.BroadcastShapes(qb, kb)
	if err != nil {
		return nil, "", err
	}
	ob, err := ops.BroadcastShapes(sb, vb)
	if err != nil {
		return nil, "", err
	}
	scoreShape := append(append([]int64{}, sb...), int64(lq), int64(lk))
	outShape := append(append([]int64{}, ob...), int64(lq), int64(dv))

	mode := nd.AttrInt("mask_mode", 0)
	hasMask := len(in) > 3 && in[3].Present
	if mode != 0 && !hasMask {
		return nil, "", ops.OpErr("Attention: mask_mode %d without a mask input", mode)
	}
	var maskStrides []int
	switch mode {
	case 0:
	case 1, 2, 3:
		want := graph.Float
		if mode != 1 {
			want = graph.Bool
		}
		if in[3].Dtype != want {
			return nil, "host: mask_mode " + strconv.FormatInt(mode, 10) + " is covered for a " + want.String() + " mask", nil
		}
		full, err := ops.BroadcastShapes(scoreShape, in[3].Shape)
		if err != nil {
			return nil, "", err
		}
		if !slices.Equal(full, scoreShape) {
			return nil, "host: the mask broadcasts beyond the scores", nil
		}
		if maskStrides, err = ops.BroadcastStrides(in[3].Shape, scoreShape); err != nil {
			return nil, "", err
		}
	default:
		return nil, "", ops.OpErr("Attention: unknown mask_mode %d", mode)
	}

	p := &ops.KernelPlan{Outputs: []ops.ValueType{{Dtype: graph.Float, Shape: outShape}}, Reason: reasonFloat32 + ", bmm + masked softmax + bmm"}
	if ops.Numel(outShape) == 0 {
		return p, "", nil
	}
	if lk == 0 || ops.Numel(scoreShape) == 0 {
		return nil, "host: no keys", nil
	}
	const sScores = 0
	p.Scratch = []int64{4 * int64(ops.Numel(scoreShape))}

	// S = Q·Kᵀ: bmm_nt reads K [.., Lk, dk] as it is, bmm reads a given Kᵀ [.., dk, Lk].
	sbi := toInts(sb)
	qs, err := batchStrides(qb, lq*dk, sb)
	if err != nil {
		return nil, "", err
	}
	ks, err := batchStrides(kb, dk*lk, sb)
	if err != nil {
		return nil, "", err
	}
	ss := ops.StridesOf(sb)
	for i := range ss {
		ss[i] *= lq * lk
	}
	dims, st, ok := foldBatch(sbi, qs, ks, ss)
	if !ok {
		return nil, "host: the batch axes do not fold into three", nil
	}
	qk := bmmSpec{m: lq, n: lk, k: dk, dims: dims, as0: dk, as1: 1, aBatch: st[0], bBatch: st[1], cBatch: st[2],
		a: ops.InputOperand(0), b: ops.InputOperand(1), c: ops.ScratchOperand(sScores)}
	if kt {
		qk.bs0 = lk
		p.Calls = append(p.Calls, qk.call())
	} else {
		qk.bs0 = dk
		p.Calls = append(p.Calls, qk.callNT())
	}

	// softmax(S·scale ⊕ mask) in place.
	ms := make([]int, len(sb))
	msq, msk := 0, 0
	if maskStrides != nil {
		copy(ms, maskStrides[:len(sb)])
		msq, msk = maskStrides[len(sb)], maskStrides[len(sb)+1]
	}
	sdims, sst, ok := foldBatch(sbi, ops.StridesOf(sb), ms)
	if !ok {
		return nil, "host: the batch axes do not fold into three", nil
	}
	mf, mb := ops.InputOperand(0), ops.InputOperand(0) // not read without a mask
	switch mode {
	case 1:
		mf = ops.InputOperand(3)
	case 2, 3:
		mb = ops.InputOperand(3)
	}
	args := []uint64{U(lq), U(sdims[2]), U(sdims[0] * sdims[1]), U(sdims[1]), U(lk), U(sst[1][0]), U(sst[1][1]), U(sst[1][2]),
		U(msq), U(msk), uint64(math.Float32bits(nd.AttrFloat("scale", 1))), uint64(math.Float32bits(nd.AttrFloat("mask_fill", 0)))}
	p.Calls = append(p.Calls, ops.KernelCall{File: "attention.loom", Symbol: "attn_softmax", Config: map[string]string{"MASK": strconv.FormatInt(mode, 10)},
		Args: args, Workload: args[:3], Bind: []ops.KernelBinding{ops.ReadWriteOf(ops.ScratchOperand(sScores)), ops.ReadOf(mf), ops.ReadOf(mb)}})

	// O = P·V.
	ps, err := batchStrides(sb, lq*lk, ob)
	if err != nil {
		return nil, "", err
	}
	vs, err := batchStrides(vb, lk*dv, ob)
	if err != nil {
		return nil, "", err
	}
	cs := ops.StridesOf(ob)
	for i := range cs {
		cs[i] *= lq * dv
	}
	dims, st, ok = foldBatch(toInts(ob), ps, vs, cs)
	if !ok {
		return nil, "host: the batch axes do not fold into three", nil
	}
	p.Calls = append(p.Calls, bmmSpec{m: lq, n: dv, k: lk, dims: dims, as0: lk, as1: 1, bs0: dv,
		aBatch: st[0], bBatch: st[1], cBatch: st[2], a: ops.ScratchOperand(sScores), b: ops.InputOperand(2), c: ops.OutputOperand(0)}.call())
	return p, "", nil
}
