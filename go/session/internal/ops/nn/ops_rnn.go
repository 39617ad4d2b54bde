package nn

import (
	"fmt"
	"math"
	"strings"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Host functions for the recurrent operators RNN, GRU and LSTM (forward, reverse and
// bidirectional; sequence_lens; clip; layout 0 and 1; the spec's activation functions; LSTM
// peepholes). Gate order follows the spec: GRU z, r, h; LSTM i, o, f, c.

type rnnActivation func(float64) float64

// rnnActivations resolves the node's activations list (count per direction) with defaults,
// consuming activation_alpha/beta in order for the functions that take them.
func rnnActivations(n *graph.Node, dirs int, defaults []string) ([][]rnnActivation, error) {
	names := defaults
	if a := n.Attr("activations"); a != nil && len(a.Strings) > 0 {
		names = nil
		for _, s := range a.Strings {
			names = append(names, string(s))
		}
		if len(names) == len(defaults) && dirs == 2 {
			names = append(names, names...)
		}
	} else if dirs == 2 {
		names = append(append([]string{}, defaults...), defaults...)
	}
	if len(names) != len(defaults)*dirs {
		return nil, fmt.Errorf("activations has %d entries, want %d", len(names), len(defaults)*dirs)
	}
	alphas, betas := n.AttrFloats("activation_alpha"), n.AttrFloats("activation_beta")
	ai, bi := 0, 0
	param := func(list []float32, i *int, def float64) float64 {
		if *i < len(list) {
			*i++
			return float64(list[*i-1])
		}
		return def
	}
	out := make([][]rnnActivation, dirs)
	for k, name := range names {
		var f rnnActivation
		switch strings.ToLower(name) {
		case "sigmoid":
			f = func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
		case "tanh":
			f = math.Tanh
		case "relu":
			f = func(x float64) float64 { return math.Max(0, x) }
		case "softsign":
			f = func(x float64) float64 { return x / (1 + math.Abs(x)) }
		case "softplus":
			f = func(x float64) float64 { return math.Log1p(math.Exp(x)) }
		case "leakyrelu":
			a := param(alphas, &ai, 0.01)
			f = func(x float64) float64 {
				if x < 0 {
					return a * x
				}
				return x
			}
		case "thresholdedrelu":
			a := param(alphas, &ai, 1)
			f = func(x float64) float64 {
				if x > a {
					return x
				}
				return 0
			}
		case "elu":
			a := param(alphas, &ai, 1)
			f = func(x float64) float64 {
				if x < 0 {
					return a * (math.Exp(x) - 1)
				}
				return x
			}
		case "hardsigmoid":
			a, b := param(alphas, &ai, 0.2), param(betas, &bi, 0.5)
			f = func(x float64) float64 { return math.Max(0, math.Min(1, a*x+b)) }
		case "affine":
			a, b := param(alphas, &ai, 1), param(betas, &bi, 0)
			f = func(x float64) float64 { return a*x + b }
		case "scaledtanh":
			a, b := param(alphas, &ai, 1), param(betas, &bi, 1)
			f = func(x float64) float64 { return a * math.Tanh(b*x) }
		default:
			return nil, fmt.Errorf("activation %q is not supported", name)
		}
		out[k/len(defaults)] = append(out[k/len(defaults)], f)
	}
	return out, nil
}

// rnnInputs are the shared operands of the recurrent ops, in layout 0.
type rnnInputs struct {
	seq, batch, inSize, hidden, dirs, gates int
	x, w, r, b                              []float64 // b: (dirs, 2*gates*hidden), zeros when absent
	lens                                    []int64
	h0                                      []float64 // (dirs, batch, hidden)
	clip                                    float64   // 0: none
	reverseOnly                             bool
}

func rnnPrepare(n *graph.Node, in []tensor.Tensor, gates int) (*rnnInputs, error) {
	x, w, r := in[0], in[1], in[2]
	if len(x.Dims()) != 3 || len(w.Dims()) != 3 || len(r.Dims()) != 3 {
		return nil, fmt.Errorf("X %v, W %v and R %v must all be rank 3", x.Dims(), w.Dims(), r.Dims())
	}
	layout := n.AttrInt("layout", 0)
	if layout == 1 {
		s, idx := ops.TransposeIndex(x.Dims(), []int{1, 0, 2})
		x = tensor.Take(x, s, idx)
	}
	p := &rnnInputs{seq: int(x.Dims()[0]), batch: int(x.Dims()[1]), inSize: int(x.Dims()[2]), gates: gates}
	switch dir := n.AttrString("direction", "forward"); dir {
	case "forward":
		p.dirs = 1
	case "reverse":
		p.dirs, p.reverseOnly = 1, true
	case "bidirectional":
		p.dirs = 2
	default:
		return nil, fmt.Errorf("direction %q is not forward, reverse or bidirectional", dir)
	}
	p.hidden = int(n.AttrInt("hidden_size", r.Dims()[2]))
	gh := gates * p.hidden
	if int(w.Dims()[0]) != p.dirs || int(w.Dims()[1]) != gh || int(w.Dims()[2]) != p.inSize {
		return nil, fmt.Errorf("W shape %v, want [%d %d %d]", w.Dims(), p.dirs, gh, p.inSize)
	}
	if int(r.Dims()[0]) != p.dirs || int(r.Dims()[1]) != gh || int(r.Dims()[2]) != p.hidden {
		return nil, fmt.Errorf("R shape %v, want [%d %d %d]", r.Dims(), p.dirs, gh, p.hidden)
	}
	p.x, p.w, p.r = tensor.Float64s(x), tensor.Float64s(w), tensor.Float64s(r)
	p.b = make([]float64, p.dirs*2*gh)
	if b := ops.Optional(in, 3); b.IsValid() {
		if b.Len() != len(p.b) {
			return nil, fmt.Errorf("B has %d elements, want %d", b.Len(), len(p.b))
		}
		p.b = tensor.Float64s(b)
	}
	p.lens = make([]int64, p.batch)
	for i := range p.lens {
		p.lens[i] = int64(p.seq)
	}
	if l := ops.Optional(in, 4); l.IsValid() {
		if l.Len() != p.batch {
			return nil, fmt.Errorf("sequence_lens has %d elements for batch %d", l.Len(), p.batch)
		}
		p.lens = tensor.Int64s(l)
		for _, v := range p.lens {
			if v < 0 || v > int64(p.seq) {
				return nil, fmt.Errorf("sequence length %d outside [0, %d]", v, p.seq)
			}
		}
	}
	p.h0 = make([]float64, p.dirs*p.batch*p.hidden)
	if h := ops.Optional(in, 5); h.IsValid() {
		hv, err := rnnState(h, layout, p)
		if err != nil {
			return nil, fmt.Errorf("initial_h: %v", err)
		}
		p.h0 = hv
	}
	p.clip = float64(n.AttrFloat("clip", 0))
	return p, nil
}

// rnnState reads a (dirs, batch, hidden) state, transposing it from layout 1.
func rnnState(t tensor.Tensor, layout int64, p *rnnInputs) ([]float64, error) {
	if t.Len() != p.dirs*p.batch*p.hidden {
		return nil, fmt.Errorf("shape %v, want %d elements", t.Dims(), p.dirs*p.batch*p.hidden)
	}
	if layout == 1 {
		s, idx := ops.TransposeIndex(t.Dims(), []int{1, 0, 2})
		t = tensor.Take(t, s, idx)
	}
	return tensor.Float64s(t), nil
}

// gatesAt computes, for direction d, batch b and step t, the pre-activations
// X_t W^T + Wb (xs) and H R^T + Rb (hs) for every gate unit.
func (p *rnnInputs) project(d, b, t int, h []float64, xs, hs []float64) {
	gh := p.gates * p.hidden
	xo := (t*p.batch + b) * p.inSize
	for u := 0; u < gh; u++ {
		s := p.b[d*2*gh+u]
		wo := (d*gh + u) * p.inSize
		for k := 0; k < p.inSize; k++ {
			s += p.x[xo+k] * p.w[wo+k]
		}
		xs[u] = s
		s = p.b[d*2*gh+gh+u]
		ro := (d*gh + u) * p.hidden
		for k := 0; k < p.hidden; k++ {
			s += h[k] * p.r[ro+k]
		}
		hs[u] = s
	}
}

func (p *rnnInputs) clipped(v float64) float64 {
	if p.clip > 0 {
		return math.Max(-p.clip, math.Min(p.clip, v))
	}
	return v
}

// run drives the recurrence; step updates state (h, and c for LSTM) for one time step.
// It returns Y (seq, dirs, batch, hidden) and the final states.
func (p *rnnInputs) run(stateCount int, init [][]float64, step func(d, b, t int, state [][]float64)) ([]float64, [][]float64) {
	hsz := p.hidden
	y := make([]float64, p.seq*p.dirs*p.batch*hsz)
	final := make([][]float64, stateCount)
	for s := range final {
		final[s] = make([]float64, p.dirs*p.batch*hsz)
	}
	for d := 0; d < p.dirs; d++ {
		reverse := d == 1 || p.reverseOnly
		for b := 0; b < p.batch; b++ {
			state := make([][]float64, stateCount)
			for s := range state {
				state[s] = append([]float64{}, init[s][(d*p.batch+b)*hsz:(d*p.batch+b+1)*hsz]...)
			}
			l := int(p.lens[b])
			for i := 0; i < l; i++ {
				t := i
				if reverse {
					t = l - 1 - i
				}
				step(d, b, t, state)
				copy(y[((t*p.dirs+d)*p.batch+b)*hsz:], state[0])
			}
			for s := range state {
				copy(final[s][(d*p.batch+b)*hsz:], state[s])
			}
		}
	}
	return y, final
}

// rnnOutputs converts Y and the final states to the output dtype and layout.
func rnnOutputs(n *graph.Node, dt tensor.DType, p *rnnInputs, y []float64, finals [][]float64) ([]tensor.Tensor, error) {
	layout := n.AttrInt("layout", 0)
	yt, err := tensor.FromFloat64s(dt, []int64{int64(p.seq), int64(p.dirs), int64(p.batch), int64(p.hidden)}, y)
	if err != nil {
		return nil, err
	}
	if layout == 1 {
		s, idx := ops.TransposeIndex(yt.Dims(), []int{2, 0, 1, 3})
		yt = tensor.Take(yt, s, idx)
	}
	out := []tensor.Tensor{yt}
	for _, f := range finals {
		t, err := tensor.FromFloat64s(dt, []int64{int64(p.dirs), int64(p.batch), int64(p.hidden)}, f)
		if err != nil {
			return nil, err
		}
		if layout == 1 {
			s, idx := ops.TransposeIndex(t.Dims(), []int{1, 0, 2})
			t = tensor.Take(t, s, idx)
		}
		out = append(out, t)
	}
	return out, nil
}

func opRNN(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	p, err := rnnPrepare(n, in, 1)
	if err != nil {
		return nil, err
	}
	acts, err := rnnActivations(n, p.dirs, []string{"Tanh"})
	if err != nil {
		return nil, err
	}
	xs, hs := make([]float64, p.hidden), make([]float64, p.hidden)
	y, finals := p.run(1, [][]float64{p.h0}, func(d, b, t int, st [][]float64) {
		p.project(d, b, t, st[0], xs, hs)
		for u := range st[0] {
			st[0][u] = acts[d][0](p.clipped(xs[u] + hs[u]))
		}
	})
	return rnnOutputs(n, in[0].DType(), p, y, finals)
}

func opGRU(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	p, err := rnnPrepare(n, in, 3)
	if err != nil {
		return nil, err
	}
	acts, err := rnnActivations(n, p.dirs, []string{"Sigmoid", "Tanh"})
	if err != nil {
		return nil, err
	}
	linearBeforeReset := n.AttrInt("linear_before_reset", 0) != 0
	hd := p.hidden
	xs, hs := make([]float64, 3*hd), make([]float64, 3*hd)
	rh := make([]float64, hd)
	y, finals := p.run(1, [][]float64{p.h0}, func(d, b, t int, st [][]float64) {
		h := st[0]
		p.project(d, b, t, h, xs, hs)
		f, g := acts[d][0], acts[d][1]
		z, r := make([]float64, hd), make([]float64, hd)
		for u := 0; u < hd; u++ {
			z[u] = f(p.clipped(xs[u] + hs[u]))
			r[u] = f(p.clipped(xs[hd+u] + hs[hd+u]))
		}
		if !linearBeforeReset {
			// (r ⊙ H) R_h^T + Rb_h replaces the projection of H for the h gate.
			for k := range rh {
				rh[k] = r[k] * h[k]
			}
			gh := 3 * hd
			for u := 0; u < hd; u++ {
				s := p.b[d*2*gh+gh+2*hd+u]
				ro := (d*gh + 2*hd + u) * hd
				for k := 0; k < hd; k++ {
					s += rh[k] * p.r[ro+k]
				}
				hs[2*hd+u] = s
			}
		}
		for u := 0; u < hd; u++ {
			var cand float64
			if linearBeforeReset {
				cand = g(p.clipped(xs[2*hd+u] + r[u]*hs[2*hd+u]))
			} else {
				cand = g(p.clipped(xs[2*hd+u] + hs[2*hd+u]))
			}
			h[u] = (1-z[u])*cand + z[u]*h[u]
		}
	})
	return rnnOutputs(n, in[0].DType(), p, y, finals)
}

func opLSTM(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
	if n.AttrInt("input_forget", 0) != 0 {
		return nil, fmt.Errorf("input_forget=1 is not supported")
	}
	p, err := rnnPrepare(n, in, 4)
	if err != nil {
		return nil, err
	}
	acts, err := rnnActivations(n, p.dirs, []string{"Sigmoid", "Tanh", "Tanh"})
	if err != nil {
		return nil, err
	}
	hd := p.hidden
	c0 := make([]float64, p.dirs*p.batch*hd)
	if c := ops.Optional(in, 6); c.IsValid() {
		if c0, err = rnnState(c, n.AttrInt("layout", 0), p); err != nil {
			return nil, fmt.Errorf("initial_c: %v", err)
		}
	}
	peep := make([]float64, p.dirs*3*hd)
	if pt := ops.Optional(in, 7); pt.IsValid() {
		if pt.Len() != len(peep) {
			return nil, fmt.Errorf("P has %d elements, want %d", pt.Len(), len(peep))
		}
		peep = tensor.Float64s(pt)
	}
	xs, hs := make([]float64, 4*hd), make([]float64, 4*hd)
	y, finals := p.run(2, [][]float64{p.h0, c0}, func(d, b, t int, st [][]float64) {
		h, c := st[0], st[1]
		p.project(d, b, t, h, xs, hs)
		f, g, hact := acts[d][0], acts[d][1], acts[d][2]
		pi, po, pf := peep[d*3*hd:], peep[d*3*hd+hd:], peep[d*3*hd+2*hd:]
		for u := 0; u < hd; u++ {
			ig := f(p.clipped(xs[u] + hs[u] + pi[u]*c[u]))
			fg := f(p.clipped(xs[2*hd+u] + hs[2*hd+u] + pf[u]*c[u]))
			cc := g(p.clipped(xs[3*hd+u] + hs[3*hd+u]))
			c[u] = fg*c[u] + ig*cc
			og := f(p.clipped(xs[hd+u] + hs[hd+u] + po[u]*c[u]))
			h[u] = og * hact(c[u])
		}
	})
	return rnnOutputs(n, in[0].DType(), p, y, finals)
}

func init() {
	ops.HostOps["RNN"] = opRNN
	ops.HostOps["GRU"] = opGRU
	ops.HostOps["LSTM"] = opLSTM
}
