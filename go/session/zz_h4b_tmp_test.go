package session

import (
	"math"
	"testing"
)

func h4bMaxErr(t *testing.T, got, want []Tensor) float64 {
	m := 0.0
	for i := range want {
		w, g := want[i].float64s(), got[i].float64s()
		for j := range w {
			m = math.Max(m, math.Abs(w[j]-g[j])/(1+math.Abs(w[j])))
		}
	}
	return m
}

func TestH4bRNNErr(t *testing.T) {
	s := kernelCheckSession(t)
	rnd := inferRand()
	for _, c := range []rnnCase{
		{op: "RNN", seq: 6, batch: 3, in: 4, hidden: 19, dir: "bidirectional", bias: true, h0: true, lens: true},
		{op: "GRU", seq: 20, batch: 2, in: 3, hidden: 18, dir: "bidirectional", layout: 1, bias: true, linearBeforeReset: true, lens: true, clip: 1.5},
		{op: "LSTM", seq: 9, batch: 2, in: 6, hidden: 33, dir: "bidirectional", layout: 1, bias: true, h0: true, clip: 0.7},
	} {
		worst := 0.0
		for range 100 {
			n, in := c.build(rnd)
			got := checkKernelOp(t, s, n, 14, in, nil, 1, 1)
			rc := &runCtx{s: s, opset: 14}
			want, _ := hostOps[c.op](rc, n, in)
			worst = math.Max(worst, h4bMaxErr(t, got, want))
		}
		t.Logf("%s worst rel err %g", c.op, worst)
	}
}
