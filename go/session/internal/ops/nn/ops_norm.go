package nn

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for the normalizations: BatchNormalization (inference, and training mode with
// batch statistics plus updated running mean and variance), InstanceNormalization,
// LayerNormalization, MeanVarianceNormalization and LRN.

func init() {
	ops.HostOps["BatchNormalization"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		if err := checkChannels(x, in[1:5], "scale", "B", "input_mean", "input_var"); err != nil {
			return nil, err
		}
		eps := float64(n.AttrFloat("epsilon", 1e-5))
		sc, bi, mean, vr := tensor.Float64s(in[1]), tensor.Float64s(in[2]), tensor.Float64s(in[3]), tensor.Float64s(in[4])
		c, inner := int(x.Dims()[1]), ops.Numel(x.Dims()[2:])
		v := tensor.Float64s(x)
		for i := range v {
			ch := (i / inner) % c
			v[i] = sc[ch]*(v[i]-mean[ch])/math.Sqrt(vr[ch]+eps) + bi[ch]
		}
		return ops.FloatResult(x.DType(), x.Dims(), v)
	}
	ops.HostOps["InstanceNormalization"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		if err := checkChannels(x, in[1:3], "scale", "B"); err != nil {
			return nil, err
		}
		eps := float64(n.AttrFloat("epsilon", 1e-5))
		sc, bi := tensor.Float64s(in[1]), tensor.Float64s(in[2])
		c, inner := int(x.Dims()[1]), ops.Numel(x.Dims()[2:])
		v := tensor.Float64s(x)
		for g := 0; g < len(v)/max(inner, 1); g++ {
			seg := v[g*inner : (g+1)*inner]
			m, s := MeanVar(seg)
			ch := g % c
			for i := range seg {
				seg[i] = sc[ch]*(seg[i]-m)/math.Sqrt(s+eps) + bi[ch]
			}
		}
		return ops.FloatResult(x.DType(), x.Dims(), v)
	}
	ops.HostOps["LayerNormalization"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		ax, err := ops.NormAxis(n.AttrInt("axis", -1), len(x.Dims()))
		if err != nil {
			return nil, err
		}
		eps := float64(n.AttrFloat("epsilon", 1e-5))
		inner := ops.Numel(x.Dims()[ax:])
		sidx, err := ops.BroadcastIndex(in[1].Dims(), x.Dims()[ax:])
		if err != nil {
			return nil, err
		}
		sc := tensor.Float64s(in[1])
		var bv []float64
		var bidx []int
		if len(in) > 2 && in[2].IsValid() {
			bv = tensor.Float64s(in[2])
			if bidx, err = ops.BroadcastIndex(in[2].Dims(), x.Dims()[ax:]); err != nil {
				return nil, err
			}
		}
		v := tensor.Float64s(x)
		outer := ops.Numel(x.Dims()[:ax]) // one mean and one inverse deviation per group, empty or not
		means, invs := make([]float64, outer), make([]float64, outer)
		for g := 0; g < outer; g++ {
			seg := v[g*inner : (g+1)*inner]
			m, s := MeanVar(seg) // 0 and 0 for an empty group, as the Loom kernel's
			inv := 1 / math.Sqrt(s+eps)
			means[g], invs[g] = m, inv
			for i := range seg {
				seg[i] = (seg[i] - m) * inv * sc[sidx[i]]
				if bv != nil {
					seg[i] += bv[bidx[i]]
				}
			}
		}
		y, err := tensor.FromFloat64s(x.DType(), x.Dims(), v)
		if err != nil {
			return nil, err
		}
		stat := append([]int64{}, x.Dims()...)
		for i := ax; i < len(stat); i++ {
			stat[i] = 1
		}
		mt, err := tensor.FromFloat64s(graph.Float, stat, means)
		if err != nil {
			return nil, err
		}
		it, err := tensor.FromFloat64s(graph.Float, stat, invs)
		if err != nil {
			return nil, err
		}
		return []tensor.Tensor{y, mt, it}, nil
	}
	ops.HostOps["MeanVarianceNormalization"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		axes := n.AttrInts("axes")
		if axes == nil {
			axes = []int64{0, 2, 3}
		}
		x := in[0]
		add := func(a, v float64) float64 { return a + v }
		mean, err := ops.Reduce(x, axes, true, 0, add, func(a float64, c int) float64 { return a / float64(c) })
		if err != nil {
			return nil, err
		}
		idx, _ := ops.BroadcastIndex(mean.Dims(), x.Dims())
		mv, xv := tensor.Float64s(mean), tensor.Float64s(x)
		dev := make([]float64, len(xv))
		for i := range xv {
			dev[i] = xv[i] - mv[idx[i]]
		}
		sq := make([]float64, len(xv))
		for i := range dev {
			sq[i] = dev[i] * dev[i]
		}
		sqT, _ := tensor.FromFloat64s(graph.Double, x.Dims(), sq)
		vr, err := ops.Reduce(sqT, axes, true, 0, add, func(a float64, c int) float64 { return a / float64(c) })
		if err != nil {
			return nil, err
		}
		vv := tensor.Float64s(vr)
		for i := range dev {
			dev[i] /= ops.Sqrt(vv[idx[i]]) + 1e-9
		}
		return ops.FloatResult(x.DType(), x.Dims(), dev)
	}
	ops.HostOps["LRN"] = opLRN
	inference := ops.HostOps["BatchNormalization"]
	ops.HostOps["BatchNormalization"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		if n.AttrInt("training_mode", 0) != 0 {
			return batchNormTraining(n, in)
		}
		return inference(rc, n, in)
	}
}

// checkChannels checks a normalization's input x, of shape (N, C, ...), and its per-channel
// inputs (params, inputs 1, 2... named names): each must hold C values.
func checkChannels(x tensor.Tensor, params []tensor.Tensor, names ...string) error {
	if len(x.Dims()) < 2 {
		return fmt.Errorf("the input X (input 0, shape %v) must be (N, C, ...): rank >= 2", x.Dims())
	}
	c := x.Dims()[1]
	for i, p := range params {
		if got := int64(p.Len()); got != c {
			return fmt.Errorf("%s (input %d, shape %v) has %d values, want one per channel: %d (axis 1 of X, shape %v)", names[i], i+1, p.Dims(), got, c, x.Dims())
		}
	}
	return nil
}

// MeanVar is the mean and the population variance of v (0 and 0 when v is empty).
func MeanVar(v []float64) (float64, float64) {
	m := 0.0
	for _, e := range v {
		m += e
	}
	m /= float64(max(len(v), 1))
	s := 0.0
	for _, e := range v {
		s += (e - m) * (e - m)
	}
	return m, s / float64(max(len(v), 1))
}

func opLRN(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	if len(x.Dims()) < 3 {
		return nil, fmt.Errorf("LRN needs (N, C, ...), got shape %v", x.Dims())
	}
	size := int(n.AttrInt("size", 0))
	if size <= 0 {
		return nil, fmt.Errorf("size must be positive, got %d", size)
	}
	alpha, beta, bias := float64(n.AttrFloat("alpha", 1e-4)), float64(n.AttrFloat("beta", 0.75)), float64(n.AttrFloat("bias", 1))
	nb, c, inner := int(x.Dims()[0]), int(x.Dims()[1]), ops.Numel(x.Dims()[2:])
	lo, hi := (size-1)/2, (size-1)-(size-1)/2
	v := tensor.Float64s(x)
	out := make([]float64, len(v))
	for b := 0; b < nb; b++ {
		for ch := 0; ch < c; ch++ {
			for j := 0; j < inner; j++ {
				s := 0.0
				for k := max(0, ch-lo); k <= min(c-1, ch+hi); k++ {
					e := v[(b*c+k)*inner+j]
					s += e * e
				}
				i := (b*c+ch)*inner + j
				out[i] = v[i] / math.Pow(bias+alpha/float64(size)*s, beta)
			}
		}
	}
	return ops.FloatResult(x.DType(), x.Dims(), out)
}

// batchNormTraining normalizes with the batch's own per-channel mean and (population) variance
// and returns the running statistics blended with them by momentum.
func batchNormTraining(n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0]
	if len(x.Dims()) < 2 {
		return nil, fmt.Errorf("BatchNormalization: X %v must be (N, C, ...)", x.Dims())
	}
	eps := float64(n.AttrFloat("epsilon", 1e-5))
	momentum := float64(n.AttrFloat("momentum", 0.9))
	c, inner := int(x.Dims()[1]), ops.Numel(x.Dims()[2:])
	sc, bi, runMean, runVar := tensor.Float64s(in[1]), tensor.Float64s(in[2]), tensor.Float64s(in[3]), tensor.Float64s(in[4])
	for i, v := range [][]float64{sc, bi, runMean, runVar} {
		if len(v) != c {
			return nil, fmt.Errorf("BatchNormalization: input %d has %d elements, want %d channels", i+1, len(v), c)
		}
	}
	v := tensor.Float64s(x)
	count := float64(len(v) / max(c, 1))
	mean, variance := make([]float64, c), make([]float64, c)
	for i, e := range v {
		mean[(i/inner)%c] += e
	}
	for ch := range mean {
		mean[ch] /= count
	}
	for i, e := range v {
		d := e - mean[(i/inner)%c]
		variance[(i/inner)%c] += d * d
	}
	for ch := range variance {
		variance[ch] /= count
	}
	for i := range v {
		ch := (i / inner) % c
		v[i] = sc[ch]*(v[i]-mean[ch])/math.Sqrt(variance[ch]+eps) + bi[ch]
	}
	y, err := tensor.FromFloat64s(x.DType(), x.Dims(), v)
	if err != nil {
		return nil, err
	}
	newMean, newVar := make([]float64, c), make([]float64, c)
	for ch := 0; ch < c; ch++ {
		newMean[ch] = runMean[ch]*momentum + mean[ch]*(1-momentum)
		newVar[ch] = runVar[ch]*momentum + variance[ch]*(1-momentum)
	}
	m, err := tensor.FromFloat64s(in[3].DType(), in[3].Dims(), newMean)
	if err != nil {
		return nil, err
	}
	vr, err := tensor.FromFloat64s(in[4].DType(), in[4].Dims(), newVar)
	if err != nil {
		return nil, err
	}
	return []tensor.Tensor{y, m, vr}, nil
}
