package session

import (
	"fmt"
	"math"

	"github.com/loomrt/loom/go/graph"
)

// Host functions for the neural-network ops: the reference paths of the Loom-backed ops (for
// the types and shapes their kernels do not cover) and ops without a kernel yet.

func floatResult(dt DType, shape []int64, v []float64) ([]Tensor, error) {
	t, err := fromFloat64s(dt, shape, v)
	return []Tensor{t}, err
}

func matmulHost(a, b Tensor) (Tensor, error) {
	d, err := graph.MatMulShapes(a.shape, b.shape)
	if err != nil {
		return Tensor{}, err
	}
	ia, err := broadcastIndex(d.ABatch, d.Batch)
	if err != nil {
		return Tensor{}, err
	}
	ib, _ := broadcastIndex(d.BBatch, d.Batch)
	av, bv := a.float64s(), b.float64s()
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
	return fromFloat64s(a.dtype, d.Out, out)
}

func convHost(x, w, b Tensor, p convParams) (Tensor, error) {
	nb, c, m := int(x.shape[0]), int(x.shape[1]), int(w.shape[0])
	sp := x.shape[2:]
	cg, mg := c/p.group, m/p.group
	outShape := []int64{int64(nb), int64(m)}
	for _, o := range p.out {
		outShape = append(outShape, int64(o))
	}
	osp := outShape[2:]
	xv, wv := x.float64s(), w.float64s()
	var bv []float64
	if b.IsValid() {
		bv = b.float64s()
	}
	ksz := numel(w.shape[2:])
	kshape := w.shape[2:]
	isz, osz := numel(sp), numel(osp)
	out := make([]float64, nb*m*osz)
	ist := stridesOf(sp)
	kpos := make([][]int, 0, ksz)
	forEachIndex(kshape, func(_ int, pos []int) { kpos = append(kpos, append([]int{}, pos...)) })
	forEachIndex(osp, func(of int, opos []int) {
		// For each output position, the input offsets of every kernel tap (-1 in padding).
		offs := make([]int, ksz)
		for t, kp := range kpos {
			o := 0
			for d := range opos {
				q := opos[d]*p.strides[d] + kp[d]*p.dilations[d] - p.padBegin[d]
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
	return fromFloat64s(x.dtype, outShape, out)
}

func poolHost(x Tensor, p convParams, isMax, countPad bool, lp float64) (Tensor, error) {
	sp := x.shape[2:]
	nc := int(x.shape[0] * x.shape[1])
	outShape := []int64{x.shape[0], x.shape[1]}
	for _, o := range p.out {
		outShape = append(outShape, int64(o))
	}
	osp := outShape[2:]
	isz, osz := numel(sp), numel(osp)
	xv := x.float64s()
	out := make([]float64, nc*osz)
	kshape := make([]int64, len(p.kernel))
	for i, k := range p.kernel {
		kshape[i] = int64(k)
	}
	ist := stridesOf(sp)
	forEachIndex(osp, func(of int, opos []int) {
		var offs []int
		pad := 0
		forEachIndex(kshape, func(_ int, kp []int) {
			o := 0
			for d := range opos {
				q := opos[d]*p.strides[d] + kp[d]*p.dilations[d] - p.padBegin[d]
				if q < 0 || q >= int(sp[d]) {
					if q >= -p.padBegin[d] && q < int(sp[d])+p.padEnd[d] {
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
	return fromFloat64s(x.dtype, outShape, out)
}

// reduce folds the given axes (all when empty) of x.
func reduce(x Tensor, axes []int64, keep bool, init float64, f func(acc, v float64) float64, fin func(acc float64, n int) float64) (Tensor, error) {
	r := len(x.shape)
	red := make([]bool, r)
	if len(axes) == 0 {
		for i := range red {
			red[i] = true
		}
	}
	for _, a := range axes {
		ax, err := normAxis(a, r)
		if err != nil {
			return Tensor{}, err
		}
		red[ax] = true
	}
	var out, keptShape []int64
	cnt := 1
	for i, d := range x.shape {
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
	ost := stridesOf(keptShape)
	acc := make([]float64, numel(keptShape))
	for i := range acc {
		acc[i] = init
	}
	xv := x.float64s()
	forEachIndex(x.shape, func(flat int, pos []int) {
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
	return fromFloat64s(x.dtype, out, acc)
}

func reduceOp(since int64, init float64, f func(acc, v float64) float64, fin func(acc float64, n int) float64) opFunc {
	return func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		axes := axesOf(rc, n, in, 1, since)
		if len(axes) == 0 && rc.opset >= since && n.AttrInt("noop_with_empty_axes", 0) != 0 {
			return []Tensor{in[0]}, nil
		}
		out, err := reduce(in[0], axes, n.AttrInt("keepdims", 1) != 0, init, f, fin)
		return []Tensor{out}, err
	}
}

// softmaxHost computes Softmax, LogSoftmax or Hardmax over axis (opset 13) or over the
// flattened trailing axes from axis (before 13).
func softmaxHost(rc *runCtx, n *graph.Node, x Tensor, kind string) (Tensor, error) {
	r := len(x.shape)
	ax, err := normAxis(n.AttrInt("axis", softmaxDefaultAxis(rc.opset)), r)
	if err != nil {
		return Tensor{}, err
	}
	var outer, dim, inner int
	if rc.opset < 13 {
		outer, dim, inner = numel(x.shape[:ax]), numel(x.shape[ax:]), 1
	} else {
		outer, dim, inner = numel(x.shape[:ax]), int(x.shape[ax]), numel(x.shape[ax+1:])
	}
	v := x.float64s()
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
	return fromFloat64s(x.dtype, x.shape, out)
}

func init() {
	hostOps["MatMul"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		out, err := matmulHost(in[0], in[1])
		return []Tensor{out}, err
	}
	hostOps["Gemm"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		a, b := in[0], in[1]
		if len(a.shape) != 2 || len(b.shape) != 2 {
			return nil, fmt.Errorf("Gemm needs matrices, got %v and %v", a.shape, b.shape)
		}
		if n.AttrInt("transA", 0) != 0 {
			s, idx := transposeIndex(a.shape, []int{1, 0})
			a = take(a, s, idx)
		}
		if n.AttrInt("transB", 0) != 0 {
			s, idx := transposeIndex(b.shape, []int{1, 0})
			b = take(b, s, idx)
		}
		y, err := matmulHost(a, b)
		if err != nil {
			return nil, err
		}
		alpha, beta := float64(n.AttrFloat("alpha", 1)), float64(n.AttrFloat("beta", 1))
		yv := y.float64s()
		if len(in) > 2 && in[2].IsValid() {
			idx, err := broadcastIndex(in[2].shape, y.shape)
			if err != nil {
				return nil, err
			}
			cv := in[2].float64s()
			for i := range yv {
				yv[i] = alpha*yv[i] + beta*cv[idx[i]]
			}
		} else {
			for i := range yv {
				yv[i] *= alpha
			}
		}
		return floatResult(y.dtype, y.shape, yv)
	}
	hostOps["Conv"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x, w := in[0], in[1]
		if len(x.shape) < 3 {
			return nil, fmt.Errorf("Conv input of rank %d", len(x.shape))
		}
		p, err := convParamsOf(n, x.shape, w.shape)
		if err != nil {
			return nil, err
		}
		var b Tensor
		if len(in) > 2 {
			b = in[2]
		}
		out, err := convHost(x, w, b, p)
		return []Tensor{out}, err
	}
	pool := func(isMax bool, lp float64) opFunc {
		return func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
			x := in[0]
			if len(x.shape) < 3 {
				return nil, fmt.Errorf("pooling input of rank %d", len(x.shape))
			}
			p, err := poolParamsOf(n, x.shape)
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
			return []Tensor{out}, nil
		}
	}
	hostOps["MaxPool"] = pool(true, 0)
	hostOps["AveragePool"] = pool(false, 0)
	hostOps["LpPool"] = pool(false, 2)
	global := func(kind string) opFunc {
		return func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
			x := in[0]
			axes := make([]int64, 0, len(x.shape))
			for i := 2; i < len(x.shape); i++ {
				axes = append(axes, int64(i))
			}
			var out Tensor
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
			return []Tensor{out}, err
		}
	}
	hostOps["GlobalMaxPool"] = global("max")
	hostOps["GlobalAveragePool"] = global("avg")
	hostOps["GlobalLpPool"] = global("lp")
	for _, k := range []string{"Softmax", "LogSoftmax", "Hardmax"} {
		k := k
		hostOps[k] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
			out, err := softmaxHost(rc, n, in[0], k)
			return []Tensor{out}, err
		}
	}
	add := func(a, v float64) float64 { return a + v }
	hostOps["ReduceSum"] = reduceOp(13, 0, add, nil)
	hostOps["ReduceMean"] = reduceOp(18, 0, add, func(a float64, c int) float64 { return a / float64(c) })
	hostOps["ReduceMax"] = reduceOp(18, math.Inf(-1), math.Max, nil)
	hostOps["ReduceMin"] = reduceOp(18, math.Inf(1), math.Min, nil)
	hostOps["ReduceProd"] = reduceOp(18, 1, func(a, v float64) float64 { return a * v }, nil)
	hostOps["ReduceL1"] = reduceOp(18, 0, func(a, v float64) float64 { return a + math.Abs(v) }, nil)
	hostOps["ReduceL2"] = reduceOp(18, 0, func(a, v float64) float64 { return a + v*v }, func(a float64, _ int) float64 { return math.Sqrt(a) })
	hostOps["ReduceSumSquare"] = reduceOp(18, 0, func(a, v float64) float64 { return a + v*v }, nil)
	hostOps["ReduceLogSum"] = reduceOp(18, 0, add, func(a float64, _ int) float64 { return math.Log(a) })
	hostOps["ReduceLogSumExp"] = reduceOp(18, 0, func(a, v float64) float64 { return a + math.Exp(v) }, func(a float64, _ int) float64 { return math.Log(a) })
	for _, k := range []string{"ArgMax", "ArgMin"} {
		isMax := k == "ArgMax"
		hostOps[k] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
			x := in[0]
			ax, err := normAxis(n.AttrInt("axis", 0), len(x.shape))
			if err != nil {
				return nil, err
			}
			last := n.AttrInt("select_last_index", 0) != 0
			outer, dim, inner := numel(x.shape[:ax]), int(x.shape[ax]), numel(x.shape[ax+1:])
			v := x.float64s()
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
			shape := append([]int64{}, x.shape...)
			if n.AttrInt("keepdims", 1) != 0 {
				shape[ax] = 1
			} else {
				shape = append(shape[:ax], shape[ax+1:]...)
			}
			return []Tensor{i64Tensor(shape, out)}, nil
		}
	}
	hostOps["BatchNormalization"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x := in[0]
		eps := float64(n.AttrFloat("epsilon", 1e-5))
		sc, bi, mean, vr := in[1].float64s(), in[2].float64s(), in[3].float64s(), in[4].float64s()
		c, inner := int(x.shape[1]), numel(x.shape[2:])
		v := x.float64s()
		for i := range v {
			ch := (i / inner) % c
			v[i] = sc[ch]*(v[i]-mean[ch])/math.Sqrt(vr[ch]+eps) + bi[ch]
		}
		return floatResult(x.dtype, x.shape, v)
	}
	hostOps["InstanceNormalization"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x := in[0]
		eps := float64(n.AttrFloat("epsilon", 1e-5))
		sc, bi := in[1].float64s(), in[2].float64s()
		c, inner := int(x.shape[1]), numel(x.shape[2:])
		v := x.float64s()
		for g := 0; g < len(v)/max(inner, 1); g++ {
			seg := v[g*inner : (g+1)*inner]
			m, s := meanVar(seg)
			ch := g % c
			for i := range seg {
				seg[i] = sc[ch]*(seg[i]-m)/math.Sqrt(s+eps) + bi[ch]
			}
		}
		return floatResult(x.dtype, x.shape, v)
	}
	hostOps["LayerNormalization"] = func(rc *runCtx, n *graph.Node, in []Tensor) ([]Tensor, error) {
		x := in[0]
		ax, err := normAxis(n.AttrInt("axis", -1), len(x.shape))
		if err != nil {
			return nil, err
		}
		eps := float64(n.AttrFloat("epsilon", 1e-5))
		inner := numel(x.shape[ax:])
		sidx, err := broadcastIndex(in[1].shape, x.shape[ax:])
		if err != nil {
			return nil, err
		}
		sc := in[1].float64s()
		var bv []float64
		var bidx []int
		if len(in) > 2 && in[2].IsValid() {
			bv = in[2].float64s()
			if bidx, err = broadcastIndex(in[2].shape, x.shape[ax:]); err != nil {
				return nil, err
			}
		}
		v := x.float64s()
		outer := len(v) / max(inner, 1)
		means, invs := make([]float64, outer), make([]float64, outer)
		for g := 0; g < outer; g++ {
			seg := v[g*inner : (g+1)*inner]
			m, s := meanVar(seg)
			inv := 1 / math.Sqrt(s+eps)
			means[g], invs[g] = m, inv
			for i := range seg {
				seg[i] = (seg[i] - m) * inv * sc[sidx[i]]
				if bv != nil {
					seg[i] += bv[bidx[i]]
				}
			}
		}
		y, err := fromFloat64s(x.dtype, x.shape, v)
		if err != nil {
			return nil, err
		}
		stat := append([]int64{}, x.shape...)
		for i := ax; i < len(stat); i++ {
			stat[i] = 1
		}
		mt, _ := fromFloat64s(graph.Float, stat, means)
		it, _ := fromFloat64s(graph.Float, stat, invs)
		return []Tensor{y, mt, it}, nil
	}
}

func meanVar(v []float64) (float64, float64) {
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

// controlFlow runs If, Loop, Scan and SequenceMap with their subgraphs in a child scope. Loop
// carries sequences and optionals like tensors; its trip count, condition and scan outputs
// must be tensors.
func (rc *runCtx) controlFlow(n *graph.Node, in []Tensor, sc *scope) ([]Tensor, error) {
	switch n.OpType {
	case "If":
		if len(in) > 0 && in[0].box != nil {
			return nil, fmt.Errorf("If condition is %s (%s), not a tensor", in[0].article(), in[0])
		}
		if len(in) == 0 || !in[0].IsValid() || in[0].Len() != 1 {
			return nil, fmt.Errorf("If condition must be one element")
		}
		branch := "else_branch"
		if in[0].float64s()[0] != 0 {
			branch = "then_branch"
		}
		a := n.Attr(branch)
		if a == nil || a.Graph == nil {
			return nil, fmt.Errorf("If has no %s", branch)
		}
		return rc.evalBody(n.OpType, a.Graph, &scope{vals: map[string]Tensor{}, parent: sc})
	case "Loop":
		body := n.Attr("body")
		if body == nil || body.Graph == nil {
			return nil, fmt.Errorf("Loop has no body")
		}
		g := body.Graph
		if len(in) < 2 {
			return nil, fmt.Errorf("Loop needs the trip count and condition inputs (possibly empty)")
		}
		for i, what := range []string{"trip count", "condition"} {
			if in[i].box != nil {
				return nil, fmt.Errorf("Loop %s is %s (%s), not a tensor", what, in[i].article(), in[i])
			}
			if in[i].IsValid() && in[i].Len() != 1 {
				return nil, fmt.Errorf("Loop %s has %d elements, want 1", what, in[i].Len())
			}
		}
		maxTrip := int64(math.MaxInt64)
		if in[0].IsValid() {
			maxTrip = in[0].int64s()[0]
		}
		cond := true
		if in[1].IsValid() {
			cond = in[1].float64s()[0] != 0
		}
		carried := append([]Tensor{}, in[2:]...)
		nCarried := len(carried)
		if len(g.Inputs) != 2+nCarried {
			return nil, fmt.Errorf("Loop body has %d inputs for %d loop-carried values (want 2 + %d)", len(g.Inputs), nCarried, nCarried)
		}
		if len(g.Outputs) < 1+nCarried {
			return nil, fmt.Errorf("Loop body has %d outputs for %d loop-carried values (want at least 1 + %d)", len(g.Outputs), nCarried, nCarried)
		}
		var scans [][]Tensor
		for it := int64(0); it < maxTrip && cond; it++ {
			if it > 1<<24 {
				return nil, fmt.Errorf("Loop ran more than 2^24 iterations")
			}
			inner := &scope{vals: map[string]Tensor{}, parent: sc}
			inner.vals[g.Inputs[0].Name] = i64Tensor(nil, []int64{it})
			inner.vals[g.Inputs[1].Name] = raw(graph.Bool, nil, []bool{cond})
			for i, t := range carried {
				inner.vals[g.Inputs[2+i].Name] = t
			}
			outs, err := rc.evalBody(n.OpType, g, inner)
			if err != nil {
				return nil, err
			}
			if outs[0].box != nil || outs[0].Len() != 1 {
				return nil, fmt.Errorf("Loop body condition output is %s, want one element", outs[0])
			}
			cond = outs[0].float64s()[0] != 0
			carried = outs[1 : 1+nCarried]
			if scans == nil {
				scans = make([][]Tensor, len(outs)-1-nCarried)
			}
			for i, t := range outs[1+nCarried:] {
				if t.box != nil {
					return nil, fmt.Errorf("Loop scan output %d is %s (%s); scan outputs must be tensors", i, t.article(), t)
				}
				scans[i] = append(scans[i], t)
			}
		}
		res := append([]Tensor{}, carried...)
		for i := range len(n.Outputs) - nCarried {
			if i >= len(scans) || len(scans[i]) == 0 {
				return nil, fmt.Errorf("Loop produced no iterations for scan output %d", i)
			}
			joined, err := concatFlat(scans[i]...)
			if err != nil {
				return nil, err
			}
			res = append(res, joined.reshaped(append([]int64{int64(len(scans[i]))}, scans[i][0].shape...)))
		}
		return res, nil
	case "Scan":
		return rc.scan(n, in, sc)
	case "SequenceMap":
		return rc.sequenceMap(n, in, sc)
	}
	return nil, fmt.Errorf("%s is not supported", n.OpType)
}

func init() {
	hostOps["If"] = func(*runCtx, *graph.Node, []Tensor) ([]Tensor, error) { return nil, nil }
	hostOps["Loop"] = hostOps["If"]
}
