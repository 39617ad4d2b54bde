package session

import (
	"math"
	"slices"
	"strconv"

	"github.com/loomrt/loom/go/graph"
)

// Loom's fused Attention as kernels (kernels/attention.loom, bmm.loom) for float32 Q, K, V
// of rank >= 2 with numpy-broadcast batch axes: S = Q·Kᵀ (bmm_nt, or bmm when K comes
// transposed), the scaled and masked softmax of S in place (attn_softmax), then P·V (bmm). loomAttention
// (ops_loom.go), which composes the ai.onnx ops, is the host fallback.

func init() {
	registerKernelOp(graph.LoomDomain+":Attention", planAttention, loomAttention)
}

func planAttention(nd *graph.Node, _ int64, in []valueInfo) (*kernelPlan, string, error) {
	if len(in) < 3 || !allFloat32(in, 0, 1, 2) {
		return nil, declineType(in), nil
	}
	q, k, v := in[0].shape, in[1].shape, in[2].shape
	if len(k) < 2 {
		return nil, "", opErr("Attention: K must have rank 2 or more, got %v", k)
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
		return nil, "", opErr("Attention: Q %v, K %v (k_transposed=%v) and V %v do not multiply", q, k, kt, v)
	}
	qb, kb, vb := q[:len(q)-2], k[:len(k)-2], v[:len(v)-2]
	sb, err := broadcastShapes(qb, kb)
	if err != nil {
		return nil, "", err
	}
	ob, err := broadcastShapes(sb, vb)
	if err != nil {
		return nil, "", err
	}
	scoreShape := append(append([]int64{}, sb...), int64(lq), int64(lk))
	outShape := append(append([]int64{}, ob...), int64(lq), int64(dv))

	mode := nd.AttrInt("mask_mode", 0)
	hasMask := len(in) > 3 && in[3].present
	if mode != 0 && !hasMask {
		return nil, "", opErr("Attention: mask_mode %d without a mask input", mode)
	}
	var maskStrides []int
	switch mode {
	case 0:
	case 1, 2, 3:
		want := graph.Float
		if mode != 1 {
			want = graph.Bool
		}
		if in[3].dtype != want {
			return nil, "host: mask_mode " + strconv.FormatInt(mode, 10) + " is covered for a " + want.String() + " mask", nil
		}
		full, err := broadcastShapes(scoreShape, in[3].shape)
		if err != nil {
			return nil, "", err
		}
		if !slices.Equal(full, scoreShape) {
			return nil, "host: the mask broadcasts beyond the scores", nil
		}
		if maskStrides, err = broadcastStrides(in[3].shape, scoreShape); err != nil {
			return nil, "", err
		}
	default:
		return nil, "", opErr("Attention: unknown mask_mode %d", mode)
	}

	p := &kernelPlan{outputs: []valueType{{graph.Float, outShape}}, reason: reasonFloat32 + ", bmm + masked softmax + bmm"}
	if numel(outShape) == 0 {
		return p, "", nil
	}
	if lk == 0 || numel(scoreShape) == 0 {
		return nil, "host: no keys", nil
	}
	const sScores = 0
	p.scratch = []int64{4 * int64(numel(scoreShape))}

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
	ss := stridesOf(sb)
	for i := range ss {
		ss[i] *= lq * lk
	}
	dims, st, ok := foldBatch(sbi, qs, ks, ss)
	if !ok {
		return nil, "host: the batch axes do not fold into three", nil
	}
	qk := bmmSpec{m: lq, n: lk, k: dk, dims: dims, as0: dk, as1: 1, aBatch: st[0], bBatch: st[1], cBatch: st[2],
		a: inputOperand(0), b: inputOperand(1), c: scratchOperand(sScores)}
	if kt {
		qk.bs0 = lk
		p.calls = append(p.calls, qk.call())
	} else {
		qk.bs0 = dk
		p.calls = append(p.calls, qk.callNT())
	}

	// softmax(S·scale ⊕ mask) in place.
	ms := make([]int, len(sb))
	msq, msk := 0, 0
	if maskStrides != nil {
		copy(ms, maskStrides[:len(sb)])
		msq, msk = maskStrides[len(sb)], maskStrides[len(sb)+1]
	}
	sdims, sst, ok := foldBatch(sbi, stridesOf(sb), ms)
	if !ok {
		return nil, "host: the batch axes do not fold into three", nil
	}
	mf, mb := inputOperand(0), inputOperand(0) // not read without a mask
	switch mode {
	case 1:
		mf = inputOperand(3)
	case 2, 3:
		mb = inputOperand(3)
	}
	args := []uint64{u(lq), u(sdims[2]), u(sdims[0] * sdims[1]), u(sdims[1]), u(lk), u(sst[1][0]), u(sst[1][1]), u(sst[1][2]),
		u(msq), u(msk), uint64(math.Float32bits(nd.AttrFloat("scale", 1))), uint64(math.Float32bits(nd.AttrFloat("mask_fill", 0)))}
	p.calls = append(p.calls, kernelCall{file: "attention.loom", symbol: "attn_softmax", config: map[string]string{"MASK": strconv.FormatInt(mode, 10)},
		args: args, workload: args[:3], bind: []kernelBinding{readWriteOf(scratchOperand(sScores)), readOf(mf), readOf(mb)}})

	// O = P·V.
	ps, err := batchStrides(sb, lq*lk, ob)
	if err != nil {
		return nil, "", err
	}
	vs, err := batchStrides(vb, lk*dv, ob)
	if err != nil {
		return nil, "", err
	}
	cs := stridesOf(ob)
	for i := range cs {
		cs[i] *= lq * dv
	}
	dims, st, ok = foldBatch(toInts(ob), ps, vs, cs)
	if !ok {
		return nil, "host: the batch axes do not fold into three", nil
	}
	p.calls = append(p.calls, bmmSpec{m: lq, n: dv, k: lk, dims: dims, as0: lk, as1: 1, bs0: dv,
		aBatch: st[0], bBatch: st[1], cBatch: st[2], a: scratchOperand(sScores), b: inputOperand(2), c: outputOperand(0)}.call())
	return p, "", nil
}
