package hostops

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/infer"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for the neural-network ops: the reference paths of the Loom-backed ops (for
// the types and shapes their kernels do not cover) and ops without a kernel yet.

func floatResult(dt tensor.DType, shape []int64, v []float64) ([]tensor.Tensor, error) {
	t, err := tensor.FromFloat64s(dt, shape, v)
	return []tensor.Tensor{t}, err
}

func MatmulHost(a, b tensor.Tensor) (tensor.Tensor, error) {
	d, err := infer.MatMulShapes(a.Dims(), b.Dims())
	if err != nil {
		return tensor.Tensor{}, err
	}
	ia, err := ops.BroadcastIndex(d.ABatch, d.Batch)
	if err != nil {
		return tensor.Tensor{}, err
	}
	ib, _ := ops.BroadcastIndex(d.BBatch, d.Batch)
	av, bv := tensor.Float64s(a), tensor.Float64s(b)
	mm, kk, nn := int(d.M), int(d.K), int(d.N)
	out := make([]float64, len(ia)*mm*nn)
	for bi := range ia {
		ao, bo, oo := ia[bi]*mm*kk, ib[bi]*kk*nn, bi*mm*nn
		for i := 0; i < mm; i++ {
			for p := 0; p < kk; p++ {
				x := av[ao+i*kk+p]
				if x == 0 {
					continue
				}
				for j := 0; j < nn; j++ {
					out[oo+i*nn+j] += x * bv[bo+p*nn+j]
				}
			}
		}
	}
	return tensor.FromFloat64s(a.DType(), d.Out, out)
}

func ConvHost(x, w, b tensor.Tensor, p ops.ConvParams) (tensor.Tensor, error) {
	nb, c, m := int(x.Dims()[0]), int(x.Dims()[1]), int(w.Dims()[0])
	sp := x.Dims()[2:]
	cg, mg := c/p.Group, m/p.Group
	outShape := []int64{int64(nb), int64(m)}
	for _, o := range p.Out {
		outShape = append(outShape, int64(o))
	}
	osp := outShape[2:]
	xv, wv := tensor.Float64s(x), tensor.Float64s(w)
	var bv []float64
	if b.IsValid() {
		bv = tensor.Float64s(b)
	}
	ksz := ops.Numel(w.Dims()[2:])
	kshape := w.Dims()[2:]
	isz, osz := ops.Numel(sp), ops.Numel(osp)
	out := make([]float64, nb*m*osz)
	ist := ops.StridesOf(sp)
	kpos := make([][]int, 0, ksz)
	ops.ForEachIndex(kshape, func(_ int, pos []int) { kpos = append(kpos, append([]int{}, pos...)) })
	ops.ForEachIndex(osp, func(of int, opos []int) {
		// For each output position, the input offsets of every kernel tap (-1 in padding).
		offs := make([]int, ksz)
		for t, kp := range kpos {
			o := 0
			for d := range opos {
				q := opos[d]*p.Strides[d] + kp[d]*p.Dilations[d] - p.PadBegin[d]
				if q < 0 || q >= int(sp[d]) {
					o = -1
					break
				}
				o += q * ist[d]
			}
			offs[t] = o
		}
		for bn := 0; bn < nb; bn++ {
			for oc := 0; oc < m; oc++ {
				g := oc / mg
				s := 0.0
				if bv != nil {
					s = bv[oc]
				}
				for ic := 0; ic < cg; ic++ {
					xb := (bn*c + g*cg + ic) * isz
					wb := (oc*cg + ic) * ksz
					for t, o := range offs {
						if o >= 0 {
							s += xv[xb+o] * wv[wb+t]
						}
					}
				}
				out[(bn*m+oc)*osz+of] = s
			}
		}
	})
	return tensor.FromFloat64s(x.DType(), outShape, out)
}

func poolHost(x tensor.Tensor, p ops.ConvParams, isMax, countPad bool, lp float64) (tensor.Tensor, error) {
	sp := x.Dims()[2:]
	nc := int(x.Dims()[0] * x.Dims()[1])
	outShape := []int64{x.Dims()[0], x.Dims()[1]}
	for _, o := range p.Out {
		outShape = append(outShape, int64(o))
	}
	osp := outShape[2:]
	isz, osz := ops.Numel(sp), ops.Numel(osp)
	xv := tensor.Float64s(x)
	out := make([]float64, nc*osz)
	kshape := make([]int64, len(p.Kernel))
	for i, k := range p.Kernel {
		kshape[i] = int64(k)
	}
	ist := ops.StridesOf(sp)
	ops.ForEachIndex(osp, func(of int, opos []int) {
		var offs []int
		pad := 0
		ops.ForEachIndex(kshape, func(_ int, kp []int) {
			o := 0
			for d := range opos {
				q := opos[d]*p.Strides[d] + kp[d]*p.Dilations[d] - p.PadBegin[d]
				if q < 0 || q >= int(sp[d]) {
					if q >= -p.PadBegin[d] && q < int(sp[d])+p.PadEnd[d] {
						pad++
					}
					o = -1
					break
				}
				o += q * ist[d]
			}
			if o >= 0 {
				offs = append(offs, o)
			}
		})
		for ch := 0; ch < nc; ch++ {
			base := ch * isz
			var r float64
			switch {
			case isMax:
				r = math.Inf(-1)
				for _, o := range offs {
					r = math.Max(r, xv[base+o])
				}
			case lp > 0:
				for _, o := range offs {
					r += math.Pow(math.Abs(xv[base+o]), lp)
				}
				r = math.Pow(r, 1/lp)
			default:
				for _, o := range offs {
					r += xv[base+o]
				}
				cnt := len(offs)
				if countPad {
					cnt += pad
				}
				r /= float64(max(cnt, 1))
			}
			out[ch*osz+of] = r
		}
	})
	return tensor.FromFloat64s(x.DType(), outShape, out)
}

// reduce folds the given axes (all when empty) of x.
func reduce(x tensor.Tensor, axes []int64, keep bool, init float64, f func(acc, v float64) float64, fin func(acc float64, n int) float64) (tensor.Tensor, error) {
	r := len(x.Dims())
	red := make([]bool, r)
	if len(axes) == 0 {
		for i := range red {
			red[i] = true
		}
	}
	for _, a := range axes {
		ax, err := ops.NormAxis(a, r)
		if err != nil {
			return tensor.Tensor{}, err
		}
		red[ax] = true
	}
	var out, keptShape []int64
	cnt := 1
	for i, d := range x.Dims() {
		if red[i] {
			cnt *= int(d)
			keptShape = append(keptShape, 1)
			if keep {
				out = append(out, 1)
			}
		} else {
			keptShape = append(keptShape, d)
			out = append(out, d)
		}
	}
	ost := ops.StridesOf(keptShape)
	acc := make([]float64, ops.Numel(keptShape))
	for i := range acc {
		acc[i] = init
	}
	xv := tensor.Float64s(x)
	ops.ForEachIndex(x.Dims(), func(flat int, pos []int) {
		o := 0
		for k, p := range pos {
			if !red[k] {
				o += p * ost[k]
			}
		}
		acc[o] = f(acc[o], xv[flat])
	})
	if fin != nil {
		for i := range acc {
			acc[i] = fin(acc[i], cnt)
		}
	}
	return tensor.FromFloat64s(x.DType(), out, acc)
}

func reduceOp(since int64, init float64, f func(acc, v float64) float64, fin func(acc float64, n int) float64) ops.OpFunc {
	return func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		axes := axesOf(rc, n, in, 1, since)
		if len(axes) == 0 && rc.OpsetVersion() >= since && n.AttrInt("noop_with_empty_axes", 0) != 0 {
			return []tensor.Tensor{in[0]}, nil
		}
		out, err := reduce(in[0], axes, n.AttrInt("keepdims", 1) != 0, init, f, fin)
		return []tensor.Tensor{out}, err
	}
}

// softmaxHost computes Softmax, LogSoftmax or Hardmax over axis (opset 13) or over the
// flattened trailing axes from axis (before 13).
func softmaxHost(rc ops.OpRun, n *graph.Node, x tensor.Tensor, kind string) (tensor.Tensor, error) {
	r := len(x.Dims())
	ax, err := ops.NormAxis(n.AttrInt("axis", ops.SoftmaxDefaultAxis(rc.OpsetVersion())), r)
	if err != nil {
		return tensor.Tensor{}, err
	}
	var outer, dim, inner int
	if rc.OpsetVersion() < 13 {
		outer, dim, inner = ops.Numel(x.Dims()[:ax]), ops.Numel(x.Dims()[ax:]), 1
	} else {
		outer, dim, inner = ops.Numel(x.Dims()[:ax]), int(x.Dims()[ax]), ops.Numel(x.Dims()[ax+1:])
	}
	v := tensor.Float64s(x)
	out := make([]float64, len(v))
	for o := 0; o < outer; o++ {
		for j := 0; j < inner; j++ {
			at := func(i int) int { return (o*dim+i)*inner + j }
			m, arg := math.Inf(-1), 0
			for i := 0; i < dim; i++ {
				if v[at(i)] > m {
					m, arg = v[at(i)], i
				}
			}
			s := 0.0
			for i := 0; i < dim; i++ {
				s += math.Exp(v[at(i)] - m)
			}
			for i := 0; i < dim; i++ {
				switch kind {
				case "Softmax":
					out[at(i)] = math.Exp(v[at(i)]-m) / s
				case "LogSoftmax":
					out[at(i)] = v[at(i)] - m - math.Log(s)
				default:
					out[at(i)] = b2f(i == arg)
				}
			}
		}
	}
	return tensor.FromFloat64s(x.DType(), x.Dims(), out)
}

func init() {
	ops.HostOps["MatMul"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		out, err := MatmulHost(in[0], in[1])
		return []tensor.Tensor{out}, err
	}
	ops.HostOps["Gemm"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		a, b := in[0], in[1]
		if len(a.Dims()) != 2 || len(b.Dims()) != 2 {
			return nil, fmt.Errorf("Gemm needs matrices, got %v and %v", a.Dims(), b.Dims())
		}
		if n.AttrInt("transA", 0) != 0 {
			s, idx := TransposeIndex(a.Dims(), []int{1, 0})
			a = tensor.Take(a, s, idx)
		}
		if n.AttrInt("transB", 0) != 0 {
			s, idx := TransposeIndex(b.Dims(), []int{1, 0})
			b = tensor.Take(b, s, idx)
		}
		y, err := MatmulHost(a, b)
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
		return floatResult(y.DType(), y.Dims(), yv)
	}
	ops.HostOps["Conv"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x, w := in[0], in[1]
		if len(x.Dims()) < 3 {
			return nil, fmt.Errorf("Conv input of rank %d", len(x.Dims()))
		}
		p, err := ops.ConvParamsOf(n, x.Dims(), w.Dims())
		if err != nil {
			return nil, err
		}
		var b tensor.Tensor
		if len(in) > 2 {
			b = in[2]
		}
		out, err := ConvHost(x, w, b, p)
		return []tensor.Tensor{out}, err
	}
	pool := func(isMax bool, lp float64) ops.OpFunc {
		return func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
			x := in[0]
			if len(x.Dims()) < 3 {
				return nil, fmt.Errorf("pooling input of rank %d", len(x.Dims()))
			}
			p, err := ops.PoolParamsOf(n, x.Dims())
			if err != nil {
				return nil, err
			}
			if lp > 0 {
				lp = float64(n.AttrInt("p", 2))
			}
			out, err := poolHost(x, p, isMax, n.AttrInt("count_include_pad", 0) != 0, lp)
			if err != nil {
				return nil, err
			}
			if len(n.Outputs) > 1 && n.Outputs[1] != "" {
				return nil, fmt.Errorf("MaxPool indices output not supported")
			}
			return []tensor.Tensor{out}, nil
		}
	}
	ops.HostOps["MaxPool"] = pool(true, 0)
	ops.HostOps["AveragePool"] = pool(false, 0)
	ops.HostOps["LpPool"] = pool(false, 2)
	global := func(kind string) ops.OpFunc {
		return func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
			x := in[0]
			axes := make([]int64, 0, len(x.Dims()))
			for i := 2; i < len(x.Dims()); i++ {
				axes = append(axes, int64(i))
			}
			var out tensor.Tensor
			var err error
			switch kind {
			case "max":
				out, err = reduce(x, axes, true, math.Inf(-1), math.Max, nil)
			case "avg":
				out, err = reduce(x, axes, true, 0, func(a, v float64) float64 { return a + v }, func(a float64, c int) float64 { return a / float64(c) })
			default:
				p := float64(n.AttrInt("p", 2))
				out, err = reduce(x, axes, true, 0, func(a, v float64) float64 { return a + math.Pow(math.Abs(v), p) }, func(a float64, _ int) float64 { return math.Pow(a, 1/p) })
			}
			return []tensor.Tensor{out}, err
		}
	}
	ops.HostOps["GlobalMaxPool"] = global("max")
	ops.HostOps["GlobalAveragePool"] = global("avg")
	ops.HostOps["GlobalLpPool"] = global("lp")
	for _, k := range []string{"Softmax", "LogSoftmax", "Hardmax"} {
		k := k
		ops.HostOps[k] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
			out, err := softmaxHost(rc, n, in[0], k)
			return []tensor.Tensor{out}, err
		}
	}
	add := func(a, v float64) float64 { return a + v }
	ops.HostOps["ReduceSum"] = reduceOp(13, 0, add, nil)
	ops.HostOps["ReduceMean"] = reduceOp(18, 0, add, func(a float64, c int) float64 { return a / float64(c) })
	ops.HostOps["ReduceMax"] = reduceOp(18, math.Inf(-1), math.Max, nil)
	ops.HostOps["ReduceMin"] = reduceOp(18, math.Inf(1), math.Min, nil)
	ops.HostOps["ReduceProd"] = reduceOp(18, 1, func(a, v float64) float64 { return a * v }, nil)
	ops.HostOps["ReduceL1"] = reduceOp(18, 0, func(a, v float64) float64 { return a + math.Abs(v) }, nil)
	ops.HostOps["ReduceL2"] = reduceOp(18, 0, func(a, v float64) float64 { return a + v*v }, func(a float64, _ int) float64 { return math.Sqrt(a) })
	ops.HostOps["ReduceSumSquare"] = reduceOp(18, 0, func(a, v float64) float64 { return a + v*v }, nil)
	ops.HostOps["ReduceLogSum"] = reduceOp(18, 0, add, func(a float64, _ int) float64 { return math.Log(a) })
	ops.HostOps["ReduceLogSumExp"] = reduceOp(18, 0, func(a, v float64) float64 { return a + math.Exp(v) }, func(a float64, _ int) float64 { return math.Log(a) })
	for _, k := range []string{"ArgMax", "ArgMin"} {
		isMax := k == "ArgMax"
		ops.HostOps[k] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
			x := in[0]
			ax, err := ops.NormAxis(n.AttrInt("axis", 0), len(x.Dims()))
			if err != nil {
				return nil, err
			}
			last := n.AttrInt("select_last_index", 0) != 0
			outer, dim, inner := ops.Numel(x.Dims()[:ax]), int(x.Dims()[ax]), ops.Numel(x.Dims()[ax+1:])
			v := tensor.Float64s(x)
			out := make([]int64, outer*inner)
			for o := 0; o < outer; o++ {
				for j := 0; j < inner; j++ {
					best, bi := 0.0, -1
					for i := 0; i < dim; i++ {
						e := v[(o*dim+i)*inner+j]
						better := bi < 0 || (isMax && (e > best || (last && e == best))) || (!isMax && (e < best || (last && e == best)))
						if better {
							best, bi = e, i
						}
					}
					out[o*inner+j] = int64(bi)
				}
			}
			shape := append([]int64{}, x.Dims()...)
			if n.AttrInt("keepdims", 1) != 0 {
				shape[ax] = 1
			} else {
				shape = append(shape[:ax], shape[ax+1:]...)
			}
			return []tensor.Tensor{I64Tensor(shape, out)}, nil
		}
	}
	ops.HostOps["BatchNormalization"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
		eps := float64(n.AttrFloat("epsilon", 1e-5))
		sc, bi, mean, vr := tensor.Float64s(in[1]), tensor.Float64s(in[2]), tensor.Float64s(in[3]), tensor.Float64s(in[4])
		c, inner := int(x.Dims()[1]), ops.Numel(x.Dims()[2:])
		v := tensor.Float64s(x)
		for i := range v {
			ch := (i / inner) % c
			v[i] = sc[ch]*(v[i]-mean[ch])/math.Sqrt(vr[ch]+eps) + bi[ch]
		}
		return floatResult(x.DType(), x.Dims(), v)
	}
	ops.HostOps["InstanceNormalization"] = func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
		x := in[0]
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
		return floatResult(x.DType(), x.Dims(), v)
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
		outer := len(v) / max(inner, 1)
		means, invs := make([]float64, outer), make([]float64, outer)
		for g := 0; g < outer; g++ {
			seg := v[g*inner : (g+1)*inner]
			m, s := MeanVar(seg)
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
		mt, _ := tensor.FromFloat64s(graph.Float, stat, means)
		it, _ := tensor.FromFloat64s(graph.Float, stat, invs)
		return []tensor.Tensor{y, mt, it}, nil
	}
}

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

func init() {
	ops.HostOps["If"] = func(ops.OpRun, *graph.Node, []tensor.Tensor) ([]tensor.Tensor, error) { return nil, nil }
	ops.HostOps["Loop"] = ops.HostOps["If"]
}
