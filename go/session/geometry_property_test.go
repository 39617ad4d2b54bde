package session

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/nn"
	"github.com/loomrt/loom/go/session/internal/sessiontest"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// The kernel planners' launch geometry against the devices' limits (geometry.go): every
// planner, over random shapes, must pick launches that sm_90 could run, and its kernels must
// agree with the op's host function.

// sm90Limits are an sm_90 device's launch limits with static shared memory only.
var sm90Limits = loom.Limits{
	MaxThreadsPerBlock:      1024,
	MaxBlockDim:             [3]uint32{1024, 1024, 64},
	MaxGridDim:              [3]uint32{1<<31 - 1, 65535, 65535},
	MaxSharedMemoryPerBlock: 48 << 10,
}

// geomInput is one input of a random case: a type and shape whose elements are drawn when the
// case runs, or a fixed value (axes, pads, indices: what the planner reads), or absent.
type geomInput struct {
	dtype    tensor.DType
	shape    []int64
	value    tensor.Tensor
	positive bool // draw elements in [0.1, 1.1]
	absent   bool
}

func fin(shape ...int64) geomInput { return geomInput{dtype: graph.Float, shape: shape} }
func finPos(shape ...int64) geomInput {
	return geomInput{dtype: graph.Float, shape: shape, positive: true}
}
func fixedIn(t tensor.Tensor) geomInput {
	return geomInput{dtype: t.DType(), shape: t.Dims(), value: t}
}
func absentIn() geomInput                           { return geomInput{absent: true} }
func typedIn(dt tensor.DType, s ...int64) geomInput { return geomInput{dtype: dt, shape: s} }

// geomCase is a random node and its inputs; host is the reference (nil: hostOps[op]).
type geomCase struct {
	name  string
	node  *graph.Node
	opset int64
	in    []geomInput
	host  ops.OpFunc
	tol   float64
}

func (c geomCase) infos() []ops.ValueInfo {
	out := make([]ops.ValueInfo, len(c.in))
	for i, v := range c.in {
		if v.absent {
			continue
		}
		out[i] = ops.ValueInfo{ValueType: ops.ValueType{Dtype: v.dtype, Shape: v.shape}, Present: true}
		if v.value.IsValid() {
			out[i].Static = v.value
		}
	}
	return out
}

// tensors draws the inputs' elements.
func (c geomCase) tensors(r *rand.Rand) []tensor.Tensor {
	out := make([]tensor.Tensor, len(c.in))
	for i, v := range c.in {
		switch {
		case v.absent:
		case v.value.IsValid():
			out[i] = v.value
		case v.dtype == graph.Bool:
			out[i] = tensor.MustTensor(v.shape, randomBools(r, ops.Numel(v.shape)))
		case v.dtype == graph.Float:
			x := randomF32(r, ops.Numel(v.shape))
			if v.positive {
				for j := range x {
					x[j] = x[j]*x[j] + 0.1
				}
			}
			out[i] = tensor.MustTensor(v.shape, x)
		default:
			out[i] = movementRand{r}.of(v.dtype, v.shape...)
		}
	}
	return out
}

// geomGen draws shapes: dims from 1 to 5,000 (log-uniform, often small), with the product
// capped at budget elements.
type geomGen struct {
	r      *rand.Rand
	budget int64
}

func satProd(s []int64) int64 {
	p := int64(1)
	for _, d := range s {
		if d != 0 && p > math.MaxInt64/4/d {
			return math.MaxInt64 / 4
		}
		p *= d
	}
	return p
}

func (g *geomGen) dim() int64 {
	if g.r.IntN(4) == 0 {
		return 1 + g.r.Int64N(4)
	}
	return min(max(int64(math.Exp(g.r.Float64()*math.Log(5000))), 1), 5000)
}

// shapeIn draws a shape of rank dims whose product is at most budget (halving random dims
// until it fits, which leaves some axes long and others short).
func (g *geomGen) shapeIn(rank int, budget int64) []int64 {
	s := make([]int64, rank)
	for i := range s {
		s[i] = g.dim()
	}
	for satProd(s) > budget {
		j := g.pick(rank)
		for s[j] == 1 {
			j = (j + 1) % rank
		}
		s[j] = (s[j] + 1) / 2
	}
	return s
}

func (g *geomGen) shape(rank int) []int64 { return g.shapeIn(rank, g.budget) }

func (g *geomGen) pick(n int) int { return g.r.IntN(n) }

func (g *geomGen) oneOf(v ...string) string { return v[g.r.IntN(len(v))] }

// broadcastOf is a shape that broadcasts to s: a suffix of it with some dims set to 1.
func (g *geomGen) broadcastOf(s []int64) []int64 {
	out := slices.Clone(s[g.pick(len(s)+1):])
	for i := range out {
		if g.pick(3) == 0 {
			out[i] = 1
		}
	}
	return out
}

func node(op string, attrs ...*graph.Attribute) *graph.Node {
	return graph.NewNode("n", op, nil, []string{"y"}, attrs...)
}

// geomGenerators draw a random case of each op family with a kernel planner.
var geomGenerators = map[string]func(g *geomGen) geomCase{
	"binary": func(g *geomGen) geomCase {
		op := g.oneOf("Add", "Sub", "Mul", "Div")
		a := g.shape(g.pick(5))
		b := g.broadcastOf(a)
		in := []geomInput{fin(a...), fin(b...)}
		if op == "Div" {
			in[1] = finPos(b...)
		}
		if g.pick(2) == 0 {
			in[0], in[1] = in[1], in[0]
		}
		return geomCase{node: node(op), opset: 18, in: in, tol: 1e-5}
	},
	"unary": func(g *geomGen) geomCase {
		op := g.oneOf("Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Abs", "Neg", "Floor", "Ceil", "Sin", "Cos", "LeakyRelu", "Reciprocal")
		return geomCase{node: node(op), opset: 18, in: []geomInput{finPos(g.shape(g.pick(6))...)}, tol: 1e-5}
	},
	"activation": func(g *geomGen) geomCase {
		op := g.oneOf("Erf", "Softplus", "Elu", "Selu", "HardSigmoid", "Gelu", "Mish")
		return geomCase{node: node(op), opset: 20, in: []geomInput{fin(g.shape(1 + g.pick(5))...)}, tol: 2e-6}
	},
	"clip_pow": func(g *geomGen) geomCase {
		s := g.shape(1 + g.pick(4))
		if g.pick(2) == 0 {
			return geomCase{node: node("Clip"), opset: 13, in: []geomInput{fin(s...), fixedIn(tensor.MustTensor([]int64{}, []float32{-0.3})),
				fixedIn(tensor.MustTensor([]int64{}, []float32{0.5}))}}
		}
		return geomCase{node: node("Pow"), opset: 15, in: []geomInput{finPos(s...), fin(g.broadcastOf(s)...)}, tol: 1e-5}
	},
	"compare_variadic": func(g *geomGen) geomCase {
		s := g.shape(1 + g.pick(4))
		if g.pick(2) == 0 {
			op := g.oneOf("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual")
			return geomCase{node: node(op), opset: 16, in: []geomInput{fin(s...), fin(g.broadcastOf(s)...)}}
		}
		op := g.oneOf("Sum", "Mean", "Max", "Min")
		return geomCase{node: node(op), opset: 13, in: []geomInput{fin(s...), fin(g.broadcastOf(s)...), fin(g.broadcastOf(s)...)}, tol: 1e-6}
	},
	"matmul": func(g *geomGen) geomCase {
		mnk := g.shapeIn(3, g.budget)
		m, n, k := mnk[0], mnk[1], mnk[2]
		batch := g.shapeIn(g.pick(3), max(g.budget/max(m*k, k*n, m*n), 1))
		a := append(slices.Clone(batch), m, k)
		b := append(g.broadcastOf(batch), k, n)
		if g.pick(4) == 0 {
			a = []int64{k}
		}
		if g.pick(4) == 0 {
			b = []int64{k, n}
		}
		return geomCase{node: node("MatMul"), opset: 13, in: []geomInput{fin(a...), fin(b...)}, tol: 2e-4}
	},
	"matmul_add": func(g *geomGen) geomCase {
		mnk := g.shapeIn(3, g.budget)
		m, n, k := mnk[0], mnk[1], mnk[2]
		nd := node("MatMulAdd")
		nd.Domain = graph.LoomDomain
		host := func(rc ops.OpRun, n *graph.Node, in []tensor.Tensor) ([]tensor.Tensor, error) {
			p, err := ops.HostOps["MatMul"](rc, n, in[:2])
			if err != nil {
				return nil, err
			}
			return ops.HostOps["Add"](rc, n, []tensor.Tensor{p[0], in[2]})
		}
		return geomCase{node: nd, opset: 13, in: []geomInput{fin(m, k), fin(k, n), fin(n)}, host: host, tol: 2e-4}
	},
	"gemm": func(g *geomGen) geomCase {
		mnk := g.shapeIn(3, g.budget)
		m, n, k := mnk[0], mnk[1], mnk[2]
		ta, tb := g.pick(2), g.pick(2)
		a, b := []int64{m, k}, []int64{k, n}
		if ta == 1 {
			a = []int64{k, m}
		}
		if tb == 1 {
			b = []int64{n, k}
		}
		in := []geomInput{fin(a...), fin(b...)}
		if g.pick(2) == 0 {
			in = append(in, fin(g.broadcastOf([]int64{m, n})...))
		}
		return geomCase{node: node("Gemm", graph.IntAttr("transA", int64(ta)), graph.IntAttr("transB", int64(tb)),
			graph.FloatAttr("alpha", 0.5), graph.FloatAttr("beta", 1.5)), opset: 13, in: in, tol: 2e-4}
	},
	"conv":       func(g *geomGen) geomCase { return g.conv(false) },
	"fused_conv": func(g *geomGen) geomCase { return g.conv(true) },
	"conv_transpose": func(g *geomGen) geomCase {
		rank := 1 + g.pick(2)
		groups := int64(1 + g.pick(2))
		kern := make([]int64, rank)
		var str, pads []int64
		for i := range kern {
			kern[i] = int64(1 + g.pick(3))
			str = append(str, int64(1+g.pick(2)))
		}
		for range 2 * rank {
			pads = append(pads, 0)
		}
		cm := g.shapeIn(2, 64)
		c, m := cm[0]*groups, cm[1]
		sp := g.shapeIn(rank+1, max(g.budget/(c*m*satProd(kern)), 1))
		x := append([]int64{sp[0], c}, sp[1:]...)
		w := append([]int64{c, m}, kern...)
		in := []geomInput{fin(x...), fin(w...)}
		if g.pick(2) == 0 {
			in = append(in, fin(m*groups))
		}
		return geomCase{node: node("ConvTranspose", graph.IntsAttr("strides", str...), graph.IntsAttr("pads", pads...), graph.IntAttr("group", groups)),
			opset: 17, in: in, tol: 1e-4}
	},
	"pool": func(g *geomGen) geomCase {
		op := g.oneOf("MaxPool", "AveragePool")
		kern := []int64{int64(1 + g.pick(3)), int64(1 + g.pick(3))}
		str := []int64{int64(1 + g.pick(3)), int64(1 + g.pick(3))}
		pads := []int64{0, 0, 0, 0}
		if g.pick(2) == 0 {
			for i := range pads {
				pads[i] = int64(g.pick(int(kern[i%2])))
			}
		}
		x := g.shape(4)
		x[2], x[3] = max(x[2], kern[0]), max(x[3], kern[1])
		attrs := []*graph.Attribute{graph.IntsAttr("kernel_shape", kern...), graph.IntsAttr("strides", str...), graph.IntsAttr("pads", pads...)}
		if g.pick(3) == 0 {
			attrs = append(attrs, graph.IntAttr("ceil_mode", 1))
		}
		if op == "AveragePool" && g.pick(2) == 0 {
			attrs = append(attrs, graph.IntAttr("count_include_pad", 1))
		}
		return geomCase{node: node(op, attrs...), opset: 18, in: []geomInput{fin(x...)}, tol: 1e-5}
	},
	"global_pool": func(g *geomGen) geomCase {
		return geomCase{node: node(g.oneOf("GlobalAveragePool", "GlobalMaxPool")), opset: 13, in: []geomInput{fin(g.shape(3 + g.pick(2))...)}, tol: 1e-4}
	},
	"softmax": func(g *geomGen) geomCase {
		op := g.oneOf("Softmax", "LogSoftmax")
		x := g.shape(1 + g.pick(4))
		if g.pick(2) == 0 {
			return geomCase{node: node(op, graph.IntAttr("axis", int64(g.pick(len(x))))), opset: 11, in: []geomInput{fin(x...)}, tol: 1e-5}
		}
		return geomCase{node: node(op), opset: 13, in: []geomInput{fin(x...)}, tol: 1e-5}
	},
	"reduce": func(g *geomGen) geomCase {
		op := g.oneOf("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare")
		x := g.shape(1 + g.pick(4))
		var axes []int64
		for i := range x {
			if g.pick(2) == 0 {
				axes = append(axes, int64(i))
			}
		}
		in := []geomInput{fin(x...)}
		if len(axes) > 0 {
			in = append(in, fixedIn(int64Vec(axes...)))
		}
		return geomCase{node: node(op, graph.IntAttr("keepdims", int64(g.pick(2)))), opset: 18, in: in, tol: 1e-4}
	},
	"arg_reduce": func(g *geomGen) geomCase {
		x := g.shape(1 + g.pick(4))
		return geomCase{node: node(g.oneOf("ArgMax", "ArgMin"), graph.IntAttr("axis", int64(g.pick(len(x)))), graph.IntAttr("keepdims", int64(g.pick(2))),
			graph.IntAttr("select_last_index", int64(g.pick(2)))), opset: 13, in: []geomInput{fin(x...)}}
	},
	"layer_norm": func(g *geomGen) geomCase {
		x := g.shape(1 + g.pick(4))
		axis := g.pick(len(x))
		n := graph.NewNode("n", "LayerNormalization", nil, []string{"y", "mean", "inv"}, graph.IntAttr("axis", int64(axis)))
		in := []geomInput{fin(x...), fin(x[axis:]...)}
		if g.pick(2) == 0 {
			in = append(in, fin(x[axis:]...))
		}
		return geomCase{node: n, opset: 17, in: in, tol: 1e-4}
	},
	"instance_norm": func(g *geomGen) geomCase {
		x := g.shape(3 + g.pick(2))
		return geomCase{node: node("InstanceNormalization"), opset: 6, in: []geomInput{fin(x...), fin(x[1]), fin(x[1])}, tol: 1e-4}
	},
	"batch_norm": func(g *geomGen) geomCase {
		x := g.shape(2 + g.pick(3))
		c := x[1]
		return geomCase{node: node("BatchNormalization"), opset: 15, in: []geomInput{fin(x...), fin(c), fin(c), fin(c), finPos(c)}, tol: 1e-5}
	},
	"transpose": func(g *geomGen) geomCase {
		x := g.shape(1 + g.pick(6))
		perm := make([]int64, len(x))
		for i, p := range g.r.Perm(len(x)) {
			perm[i] = int64(p)
		}
		return geomCase{node: node("Transpose", graph.IntsAttr("perm", perm...)), opset: 13, in: []geomInput{fin(x...)}}
	},
	"concat": func(g *geomGen) geomCase {
		x := g.shape(1 + g.pick(4))
		axis := g.pick(len(x))
		var in []geomInput
		for range 1 + g.pick(3) {
			s := slices.Clone(x)
			s[axis] = max(1, s[axis]/int64(1+g.pick(3)))
			in = append(in, fin(s...))
		}
		return geomCase{node: node("Concat", graph.IntAttr("axis", int64(axis))), opset: 13, in: in}
	},
	"slice": func(g *geomGen) geomCase {
		x := g.shape(1 + g.pick(4))
		var starts, ends, axes, steps []int64
		for i, d := range x {
			if g.pick(2) == 0 {
				continue
			}
			a := g.r.Int64N(d)
			b := a + 1 + g.r.Int64N(d-a)
			step := int64(1 + g.pick(3))
			if g.pick(3) == 0 { // backwards from b-1 down to a
				a, b, step = b-1, a-1, -step
				if b < 0 {
					b = -d - 1
				}
			}
			starts, ends, axes, steps = append(starts, a), append(ends, b), append(axes, int64(i)), append(steps, step)
		}
		if len(axes) == 0 {
			starts, ends, axes, steps = []int64{0}, []int64{x[0]}, []int64{0}, []int64{1}
		}
		return geomCase{node: node("Slice"), opset: 13, in: []geomInput{fin(x...), fixedIn(int64Vec(starts...)), fixedIn(int64Vec(ends...)),
			fixedIn(int64Vec(axes...)), fixedIn(int64Vec(steps...))}}
	},
	"gather": func(g *geomGen) geomCase {
		x := g.shape(1 + g.pick(3))
		axis := g.pick(len(x))
		is := g.shapeIn(g.pick(3), max(g.budget/satProd(x)*x[axis], 1))
		idx := make([]int64, ops.Numel(is))
		for i := range idx {
			idx[i] = g.r.Int64N(2*x[axis]) - x[axis]
		}
		return geomCase{node: node("Gather", graph.IntAttr("axis", int64(axis))), opset: 13, in: []geomInput{fin(x...), fixedIn(tensor.MustTensor(is, idx))}}
	},
	"expand_tile": func(g *geomGen) geomCase {
		out := g.shape(1 + g.pick(4))
		x := g.broadcastOf(out)
		if g.pick(2) == 0 {
			return geomCase{node: node("Expand"), opset: 13, in: []geomInput{fin(x...), fixedIn(int64Vec(out...))}}
		}
		reps := make([]int64, len(out))
		base := slices.Clone(out)
		for i := range reps {
			reps[i] = int64(1 + g.pick(3))
			base[i] = max(1, base[i]/reps[i])
		}
		return geomCase{node: node("Tile"), opset: 13, in: []geomInput{fin(base...), fixedIn(int64Vec(reps...))}}
	},
	"where": func(g *geomGen) geomCase {
		out := g.shape(1 + g.pick(5))
		return geomCase{node: node("Where"), opset: 16, in: []geomInput{typedIn(graph.Bool, g.broadcastOf(out)...), fin(out...), fin(g.broadcastOf(out)...)}}
	},
	"pad": func(g *geomGen) geomCase {
		x := g.shape(1 + g.pick(4))
		mode := g.oneOf("constant", "reflect", "edge")
		pads := make([]int64, 2*len(x))
		for i := range pads {
			lim := int64(4)
			if mode == "reflect" {
				lim = min(lim, x[i%len(x)]-1)
			}
			if lim > 0 {
				pads[i] = g.r.Int64N(lim + 1)
			}
		}
		return geomCase{node: node("Pad", graph.StringAttr("mode", mode)), opset: 18, in: []geomInput{fin(x...), fixedIn(int64Vec(pads...))}}
	},
	"cast": func(g *geomGen) geomCase {
		to := []tensor.DType{graph.Double, graph.Float16, graph.Bool, graph.Int32}[g.pick(4)]
		return geomCase{node: node("Cast", graph.IntAttr("to", int64(to))), opset: 19, in: []geomInput{fin(g.shape(1 + g.pick(4))...)}}
	},
	"resize": func(g *geomGen) geomCase {
		mode := g.oneOf("nearest", "linear")
		sc := []float32{1, 1, float32(1+g.pick(4)) / 2, float32(1+g.pick(4)) / 2}
		x := g.shapeIn(4, max(g.budget/int64(math.Ceil(float64(sc[2]*sc[3]))), 1))
		return geomCase{node: node("Resize", graph.StringAttr("mode", mode)), opset: 19,
			in: []geomInput{fin(x...), absentIn(), fixedIn(tensor.MustTensor([]int64{4}, sc))}, tol: 1e-5}
	},
	"rnn": func(g *geomGen) geomCase {
		op := g.oneOf("RNN", "GRU", "LSTM")
		s := g.shapeIn(4, max(g.budget/8, 1))
		c := rnnCase{op: op, seq: int(min(s[0], 8)), batch: int(s[1]), in: int(min(s[2], 64)), hidden: int(min(s[3], 64)),
			dir: g.oneOf("forward", "reverse", "bidirectional"), layout: int64(g.pick(2)), bias: g.pick(2) == 0, h0: g.pick(2) == 0}
		n, in := c.build(g.r)
		var gi []geomInput
		for _, t := range in {
			if !t.IsValid() {
				gi = append(gi, absentIn())
			} else if t.DType() == graph.Float {
				gi = append(gi, fin(t.Dims()...))
			} else {
				gi = append(gi, fixedIn(t))
			}
		}
		return geomCase{node: n, opset: 14, in: gi, tol: 1e-4}
	},
	"attention": func(g *geomGen) geomCase {
		s := g.shapeIn(5, g.budget)
		b, h, lq, lk, d := s[0], s[1], s[2], s[3], min(s[4], 64)
		n := node("Attention", graph.FloatAttr("scale", 0.3))
		n.Domain = graph.LoomDomain
		return geomCase{node: n, opset: 18, in: []geomInput{fin(b, h, lq, d), fin(b, h, lk, d), fin(b, h, lk, d)}, host: nn.LoomAttention, tol: 1e-4}
	},
}

// conv draws a 1-D or 2-D Conv (FusedConv with fused) with groups, pads, strides and
// dilations.
func (g *geomGen) conv(fused bool) geomCase {
	rank := 1 + g.pick(2)
	groups := int64(1)
	switch g.pick(3) {
	case 0:
		groups = int64(1 + g.pick(4))
	}
	cm := g.shapeIn(2, 128)
	cg, mg := cm[0], cm[1]
	depthwise := g.pick(4) == 0
	if depthwise {
		cg, mg, groups = 1, 1, g.shapeIn(1, 512)[0]
	}
	kern := make([]int64, rank)
	var str, dil, pads []int64
	for i := range kern {
		kern[i] = []int64{1, 2, 3, 5}[g.pick(4)]
		str = append(str, int64(1+g.pick(2)))
		dil = append(dil, int64(1+g.pick(2)))
	}
	for i := range 2 * rank {
		pads = append(pads, int64(g.pick(int(kern[i%rank]))))
	}
	c, m := cg*groups, mg*groups
	sp := g.shapeIn(rank+1, max(g.budget/c, 1))
	x := append([]int64{sp[0], c}, sp[1:]...)
	for i := range rank {
		x[2+i] = max(x[2+i], (kern[i]-1)*dil[i]+1)
	}
	w := append([]int64{m, cg}, kern...)
	attrs := []*graph.Attribute{graph.IntsAttr("strides", str...), graph.IntsAttr("dilations", dil...), graph.IntsAttr("pads", pads...),
		graph.IntAttr("group", groups)}
	in := []geomInput{fin(x...), fin(w...)}
	if g.pick(2) == 0 {
		in = append(in, fin(m))
	}
	if !fused {
		return geomCase{node: node("Conv", attrs...), opset: 18, in: in, tol: 2e-4}
	}
	n := node("FusedConv", append(attrs, graph.StringAttr("activation", g.oneOf("Relu", "Sigmoid", "Tanh")))...)
	n.Domain = graph.LoomDomain
	return geomCase{node: n, opset: 18, in: in, host: nn.FusedConvHost, tol: 2e-4}
}

// geomEdgeCases are shapes at the limits, checked (geometry only) before the random ones:
// those that failed before the planners kept to the limits (conv2d_direct's block z of 256
// for a depthwise convolution over 258 channels) and, for each kernel with grid y or z axes,
// an axis beyond 65,535 there.
// geomRegressions are cases a random seed once failed, run (kernels against the host
// function) on every run.
func geomRegressions() []geomCase {
	avg := func(attrs ...*graph.Attribute) *graph.Node { return node("AveragePool", attrs...) }
	return []geomCase{
		// seed 1446218549329678024: a ceil_mode window past the end padding divides by the
		// cells inside the padded input (2 here), not by the window's 3.
		{name: "averagepool ceil_mode count_include_pad overhang", node: avg(graph.IntsAttr("kernel_shape", 3, 1),
			graph.IntsAttr("strides", 2, 3), graph.IntAttr("ceil_mode", 1), graph.IntAttr("count_include_pad", 1)),
			opset: 19, in: []geomInput{fin(1, 6, 118, 9)}, tol: 1e-5},
		{name: "averagepool ceil_mode count_include_pad overhang with pads and dilation", node: avg(graph.IntsAttr("kernel_shape", 3, 2),
			graph.IntsAttr("strides", 2, 2), graph.IntsAttr("pads", 1, 0, 0, 1), graph.IntsAttr("dilations", 1, 2),
			graph.IntAttr("ceil_mode", 1), graph.IntAttr("count_include_pad", 1)),
			opset: 19, in: []geomInput{fin(2, 3, 8, 9)}, tol: 1e-5},
	}
}

func geomEdgeCases() []geomCase {
	attn := node("Attention", graph.FloatAttr("scale", 0.3))
	attn.Domain = graph.LoomDomain
	lstm := graph.NewNode("n", "LSTM", nil, []string{"y", "yh", "yc"}, graph.IntAttr("hidden_size", 2), graph.StringAttr("direction", "bidirectional"))
	return []geomCase{
		{name: "conv1d depthwise 258", node: node("Conv", graph.IntAttr("group", 258)), opset: 18, in: []geomInput{fin(1, 258, 10), fin(258, 1, 3)}},
		{name: "conv1d depthwise 258 positions", node: node("Conv", graph.IntAttr("group", 258), graph.IntsAttr("pads", 1, 1)), opset: 18,
			in: []geomInput{fin(1, 258, 258), fin(258, 1, 3), fin(258)}},
		{name: "conv direct batch beyond grid z", node: node("Conv"), opset: 18, in: []geomInput{fin(70000, 1, 1, 40), fin(1, 1, 1, 3)}},
		{name: "conv cout batch beyond grid z", node: node("Conv"), opset: 18, in: []geomInput{fin(70000, 4, 6, 6), fin(16, 4, 3, 3)}},
		{name: "maxpool channels beyond grid y", node: node("MaxPool", graph.IntsAttr("kernel_shape", 2, 2), graph.IntsAttr("pads", 1, 1, 1, 1)), opset: 18,
			in: []geomInput{fin(2, 35000, 2, 2)}},
		{name: "maxpool window channels beyond grid z", node: node("MaxPool", graph.IntsAttr("kernel_shape", 2, 2), graph.IntsAttr("strides", 2, 2)), opset: 18,
			in: []geomInput{fin(1, 70000, 2, 64)}},
		// binary launches all its blocks along grid x: a batch or rows past 65,535 need no fold.
		{name: "add batch past grid z", node: node("Add"), opset: 18, in: []geomInput{fin(70000, 1, 2), fin(70000, 3, 1)}},
		{name: "add rows past grid y", node: node("Add"), opset: 18, in: []geomInput{fin(70000, 1), fin(1, 3)}},
		{name: "sum rank 6 past grid z", node: node("Sum"), opset: 13, in: []geomInput{fin(70000, 1, 2, 1, 3, 1), fin(1, 2, 1, 2, 1, 2), fin(70000, 2, 1, 2, 3, 2)}},
		{name: "matmul batch beyond grid z", node: node("MatMul"), opset: 13, in: []geomInput{fin(70000, 2, 3), fin(70000, 3, 2)}},
		{name: "matmul broadcast batch beyond grid z", node: node("MatMul"), opset: 13, in: []geomInput{fin(70000, 2, 3), fin(1, 3, 2)}},
		{name: "matmul rows beyond grid y", node: node("MatMul"), opset: 13, in: []geomInput{fin(1<<30, 2), fin(2, 2)}},
		{name: "gemm rows beyond grid y", node: node("Gemm", graph.IntAttr("transB", 1)), opset: 13, in: []geomInput{fin(1<<28, 64), fin(2, 64)}},
		{name: "resize nearest channels beyond grid z", node: node("Resize", graph.StringAttr("mode", "nearest")), opset: 19,
			in: []geomInput{fin(1, 70000, 1, 2), absentIn(), fixedIn(tensor.MustTensor([]int64{4}, []float32{1, 1, 2, 2}))}},
		{name: "resize linear rows beyond grid y", node: node("Resize", graph.StringAttr("mode", "linear")), opset: 19,
			in: []geomInput{fin(1, 1, 70000, 2), absentIn(), fixedIn(tensor.MustTensor([]int64{4}, []float32{1, 1, 1, 2}))}},
		{name: "attention heads beyond grid z", node: attn, opset: 18, in: []geomInput{fin(700, 100, 4, 8), fin(700, 100, 5, 8), fin(700, 100, 5, 8)}},
		{name: "convtranspose batch beyond grid z", node: node("ConvTranspose"), opset: 17, in: []geomInput{fin(70000, 1, 2, 2), fin(1, 1, 2, 2)}},
		{name: "lstm batch beyond grid y", node: lstm, opset: 14, in: []geomInput{fin(1, 70000, 2), fin(2, 8, 2), fin(2, 8, 2)}},
	}
}

// geomChecker checks launches against sm90Limits with the kernels' own launch programs
// (compiled for sm_90: the front end only, no C compiler) and kernelGeometry's mirror of them.
type geomChecker struct {
	comp             device.Compiler
	arts             map[string]*loom.Artifact
	launches, folded int // launches checked, of them folded
}

func newGeomChecker(t *testing.T, s *InferenceSession) *geomChecker {
	comp, err := s.eng.Ctx.Compiler()
	require.NoError(t, err)
	return &geomChecker{comp: comp, arts: map[string]*loom.Artifact{}}
}

func (g *geomChecker) check(t *testing.T, p *ops.KernelPlan, what string) {
	t.Helper()
	for _, c := range p.Calls {
		g.launches++
		if c.Config["FOLD"] == "true" {
			g.folded++
		}
		key := ops.KernelKey(c.File, c.Symbol, c.Config)
		a, ok := g.arts[key]
		if !ok {
			src, err := exec.SourceOf(c.File, c.Symbol, c.Config)
			require.NoError(t, err)
			a, err = g.comp.Loom.Compile(src, loom.MustParseTarget("sm_90"))
			require.NoError(t, err, "%s: %s", what, ops.Describe(c))
			g.arts[key] = a
		}
		geo, err := a.LaunchConfig(c.Workload, sm90Limits)
		require.NoError(t, err, "%s: %s: workload %v is not within sm_90's limits", what, ops.Describe(c), c.Workload)
		mirror, ok := ops.Geometry(c)
		require.True(t, ok, "kernelGeometry has no launch formula for %s", ops.Describe(c))
		var grid, block [3]uint32
		for d := range 3 {
			grid[d], block[d] = uint32(mirror.Grid[d]), uint32(mirror.Block[d])
		}
		if !geo.Empty() {
			require.Equal(t, geo.Grid, grid, "%s: kernelGeometry's grid of %s, workload %v", what, ops.Describe(c), c.Workload)
		}
		require.Equal(t, geo.Block, block, "%s: kernelGeometry's block of %s, workload %v", what, ops.Describe(c), c.Workload)
	}
}

// runGeomCase plans c (values known, as the interpreter plans) for the host and, where the op
// has a GPU planner, for a GPU, checks the launches' geometry and, with run, runs the kernels
// (a GPU's too, on the host backend) and the host function and compares them.
func runGeomCase(t *testing.T, s *InferenceSession, gc *geomChecker, r *rand.Rand, c geomCase, run bool) (planned bool) {
	t.Helper()
	planned = runGeomCaseFor(t, s, gc, r, c, run, ops.PlanHost)
	if _, ok := ops.GPUKernelPlanners[ops.PlannerKey(c.node)]; ok {
		g := c
		g.name += " (GPU planner)"
		planned = runGeomCaseFor(t, s, gc, r, g, run, ops.PlanGPU) || planned
	}
	return planned
}

func runGeomCaseFor(t *testing.T, s *InferenceSession, gc *geomChecker, r *rand.Rand, c geomCase, run bool, target ops.PlanTarget) (planned bool) {
	t.Helper()
	planner, ok := ops.PlannerFor(target, ops.PlannerKey(c.node))
	require.True(t, ok, "no kernel planner for %s", ops.PlannerKey(c.node))
	if !run {
		p, reason, err := planner(c.node, c.opset, c.infos())
		require.NoError(t, err, c.name)
		if p == nil {
			t.Logf("%s: declined: %s", c.name, reason)
			return false
		}
		gc.check(t, p, c.name)
		return true
	}
	in := c.tensors(r)
	p, reason, err := planner(c.node, c.opset, ops.InfosOfStatic(in))
	require.NoError(t, err, c.name)
	if p == nil {
		t.Logf("%s: declined: %s", c.name, reason)
		return false
	}
	gc.check(t, p, c.name)
	rc := testRunCtx(s, c.opset)
	defer rc.Close()
	got, err := rc.RunKernelPlan(p, in)
	require.NoError(t, err, "%s (%s)", c.name, ops.Variant(p))
	host := c.host
	if host == nil {
		host = ops.HostOps[c.node.OpType]
	}
	require.NotNil(t, host, "no host function for %s", c.node.OpType)
	want, err := host(rc, c.node, in)
	require.NoError(t, err, c.name)
	requireSameTensors(t, want, got, c.tol, fmt.Sprintf("%s (%s)", c.name, ops.Variant(p)))
	return true
}

func requireSameTensors(t *testing.T, want, got []tensor.Tensor, tol float64, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		require.Equal(t, want[i].DType(), got[i].DType(), "%s: output %d type", what, i)
		require.Equal(t, want[i].Dims(), got[i].Dims(), "%s: output %d shape", what, i)
		w, g := tensor.Float64s(want[i]), tensor.Float64s(got[i])
		for j := range w {
			if math.IsNaN(w[j]) {
				require.True(t, math.IsNaN(g[j]), "%s: output %d element %d: want NaN, got %v", what, i, j, g[j])
				continue
			}
			if math.Abs(w[j]-g[j]) > tol+tol*math.Abs(w[j]) {
				require.InDelta(t, w[j], g[j], tol+tol*math.Abs(w[j]), "%s: output %d element %d", what, i, j)
			}
		}
	}
}

// Budgets of the property test: elements per tensor of the cases that run (the host
// functions are the reference, slow under -race), and of the cases whose geometry alone is
// checked (large enough for batch·channels and rows beyond grid y and z).
const (
	geomRunBudget   = 1 << 13
	geomShapeBudget = 1 << 28
	geomRunCases    = 1  // per op family
	geomShapeCases  = 12 // per op family
)

// TestKernelGeometryProperty runs every op family with a kernel planner over random shapes
// (fresh seed, logged): each plan's launches must be valid on sm_90 and agree with
// kernelGeometry, and the cases small enough to run must match the host function.
func TestKernelGeometryProperty(t *testing.T) {
	s := kernelCheckSession(t)
	gc := newGeomChecker(t, s)
	seed := rand.Uint64()
	if geomSeed != 0 {
		seed = geomSeed
	}
	t.Logf("random seed %d (set geomSeed to replay)", seed)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	families := make([]string, 0, len(geomGenerators))
	for f := range geomGenerators {
		families = append(families, f)
	}
	sort.Strings(families)
	for _, c := range geomEdgeCases() {
		folded := gc.folded
		require.True(t, runGeomCase(t, s, gc, r, c, false), "%s: declined", c.name)
		if strings.Contains(c.name, "beyond") {
			require.Greater(t, gc.folded, folded, "%s: no launch folds its grid", c.name)
		}
	}
	for _, c := range geomRegressions() {
		require.True(t, runGeomCase(t, s, gc, r, c, true), "%s: declined", c.name)
	}
	start := time.Now()
	for _, f := range families {
		gen := geomGenerators[f]
		planned, fstart := 0, time.Now()
		for i := range geomRunCases + geomShapeCases {
			run := i < geomRunCases
			budget := int64(geomShapeBudget)
			if run {
				budget = geomRunBudget
			}
			c := gen(&geomGen{r: r, budget: budget})
			c.name = fmt.Sprintf("%s #%d: %s%s %s", f, i, c.node.OpType, describeAttrs(c.node), describeGeomInputs(c.in))
			cstart := time.Now()
			if runGeomCase(t, s, gc, r, c, run) {
				planned++
			}
			if d := time.Since(cstart); d > 2*time.Second {
				t.Logf("slow: %s run=%v %v", c.name, run, d)
			}
		}
		t.Logf("%s: %d of %d cases planned as kernels (%v)", f, planned, geomRunCases+geomShapeCases, time.Since(fstart).Round(time.Millisecond))
	}
	t.Logf("%d op families in %v: %d launches checked, %d of them folded", len(families), time.Since(start), gc.launches, gc.folded)
}

// geomSeed replays a failing run of TestKernelGeometryProperty (its logged seed); 0: fresh.
var geomSeed uint64 = 0

func describeGeomInputs(in []geomInput) string {
	var parts []string
	for _, v := range in {
		if v.absent {
			parts = append(parts, "-")
			continue
		}
		parts = append(parts, fmt.Sprint(v.shape))
	}
	return fmt.Sprint(parts)
}

// runGeomSession is how the geometry tests call InferenceSession.Run (one place to adapt when
// its signature changes).
func runGeomSession(s *InferenceSession, feeds []tensor.NamedTensor) ([]tensor.Tensor, error) {
	return s.Run(context.Background(), feeds)
}

// TestKernelGeometryRegressions are shapes that failed before the planners kept to the
// limits: a depthwise 1-D convolution over 258 channels (conv2d_direct's block z was 256, the
// limit is 64) and tensor axes beyond grid y or z (65,535), each run through the run plan and
// compared with the host function.
func TestKernelGeometryRegressions(t *testing.T) {
	rnd := sessiontest.NewRand(t)
	f32 := func(shape ...int64) tensor.Tensor {
		return tensor.MustTensor(shape, randomF32(rnd, ops.Numel(shape)))
	}
	cases := []struct {
		name   string
		node   *graph.Node
		opset  int64
		in     []tensor.Tensor
		static []int
		kernel string // a kernel the plan must launch
		tol    float64
	}{
		{"conv1d_depthwise_258", node("Conv", graph.IntAttr("group", 258)), 18, []tensor.Tensor{f32(1, 258, 10), f32(258, 1, 3)}, []int{1}, "conv2d_direct", 1e-5},
		{"conv1d_258_positions", node("Conv", graph.IntAttr("group", 258), graph.IntsAttr("pads", 1, 1)), 18,
			[]tensor.Tensor{f32(1, 258, 258), f32(258, 1, 3), f32(258)}, []int{1, 2}, "conv2d_direct", 1e-5},
		// Not a geometry failure, but one the property test found: padding at the end only.
		{"conv_end_pads_only_direct", node("Conv", graph.IntsAttr("pads", 0, 0, 1, 4), graph.IntsAttr("strides", 2, 1), graph.IntsAttr("dilations", 2, 1)), 18,
			[]tensor.Tensor{f32(1, 1, 6, 5), f32(2, 1, 2, 5), f32(2)}, []int{1, 2}, "conv2d_direct", 1e-5},
		{"conv_end_pads_only_cout", node("Conv", graph.IntsAttr("pads", 0, 0, 2, 2)), 18,
			[]tensor.Tensor{f32(1, 4, 6, 6), f32(16, 4, 3, 3), f32(16)}, []int{1, 2}, "conv2d_cout", 1e-5},
		{"maxpool_channels_beyond_grid_y", node("MaxPool", graph.IntsAttr("kernel_shape", 2, 2), graph.IntsAttr("pads", 1, 1, 1, 1)), 18,
			[]tensor.Tensor{f32(2, 35000, 2, 2)}, nil, "pool2d_pad", 0},
		{"maxpool_window_channels_beyond_grid_z", node("MaxPool", graph.IntsAttr("kernel_shape", 2, 2), graph.IntsAttr("strides", 2, 2)), 18,
			[]tensor.Tensor{f32(1, 70000, 2, 64)}, nil, "pool2d_window", 0},
		{"add_batch_beyond_grid_z", node("Add"), 18, []tensor.Tensor{f32(70000, 1, 2), f32(70000, 3, 1)}, nil, "binary", 0},
		{"add_rows_beyond_grid_y", node("Add"), 18, []tensor.Tensor{f32(70000, 1), f32(1, 3)}, nil, "binary", 0},
		{"matmul_batch_beyond_grid_z", node("MatMul"), 13, []tensor.Tensor{f32(70000, 2, 3), f32(70000, 3, 2)}, nil, "", 1e-5},
		{"resize_channels_beyond_grid_z", node("Resize", graph.StringAttr("mode", "nearest")), 19,
			[]tensor.Tensor{f32(1, 70000, 1, 2), {}, tensor.MustTensor([]int64{4}, []float32{1, 1, 2, 2})}, []int{2}, "resize_nearest", 0},
	}
	ks := kernelCheckSession(t)
	gc := newGeomChecker(t, ks)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			infos := ops.InfosOf(c.in)
			for _, i := range c.static {
				infos[i].Static = c.in[i]
			}
			for i, v := range c.in {
				if v.IsValid() && v.DType() != graph.Float {
					infos[i].Static = v
				}
			}
			p, reason, err := ops.KernelPlanners[ops.PlannerKey(c.node)](c.node, c.opset, infos)
			require.NoError(t, err)
			require.NotNil(t, p, reason)
			gc.check(t, p, c.name)
			if c.kernel != "" {
				require.True(t, slices.ContainsFunc(p.Calls, func(k ops.KernelCall) bool { return k.Symbol == c.kernel }), "%s launches no %s", ops.Variant(p), c.kernel)
			}
			s, feeds := oneNodeSession(t, c.node, c.opset, c.in, c.static...)
			got, err := runGeomSession(s, feeds)
			require.NoError(t, err)
			plans := s.ExecutionPlans()
			require.Len(t, plans, 1)
			require.True(t, plans[0].Planned, plans[0].Reason)
			rc := testRunCtx(s, c.opset)
			want, err := ops.HostOps[c.node.OpType](rc, c.node, c.in)
			rc.Close()
			require.NoError(t, err)
			requireSameTensors(t, want, got, c.tol, c.name)
		})
	}
}

// TestKernelGeometryFoldMatchesHost runs every kernel with a FOLD specialization folded (its
// grid y and z launched along x) on small shapes and compares with the host function, so that
// the folded code path, which only huge tensors take on their own, is checked.
func TestKernelGeometryFoldMatchesHost(t *testing.T) {
	s := kernelCheckSession(t)
	rnd := sessiontest.NewRand(t)
	f32 := func(shape ...int64) tensor.Tensor {
		return tensor.MustTensor(shape, randomF32(rnd, ops.Numel(shape)))
	}
	attn := func(kt bool) *graph.Node {
		n := node("Attention", graph.FloatAttr("scale", 0.3))
		if kt {
			n.Attrs = append(n.Attrs, graph.IntAttr("k_transposed", 1))
		}
		n.Domain = graph.LoomDomain
		return n
	}
	rnn, rnnIn := rnnCase{op: "RNN", seq: 3, batch: 3, in: 5, hidden: 7, dir: "bidirectional", bias: true, h0: true}.build(rnd)
	cases := []struct {
		name    string
		node    *graph.Node
		opset   int64
		in      []tensor.Tensor
		dynamic []int // inputs the planner does not see the values of
		host    ops.OpFunc
		tol     float64
	}{
		{"attention", attn(false), 18, []tensor.Tensor{f32(2, 3, 5, 8), f32(2, 3, 7, 8), f32(2, 3, 7, 6)}, nil, nn.LoomAttention, 1e-5},
		{"attention_kt", attn(true), 18, []tensor.Tensor{f32(2, 3, 5, 8), f32(2, 3, 8, 7), f32(2, 3, 7, 6)}, nil, nn.LoomAttention, 1e-5},
		{"attention_gpu", attn(false), 18, []tensor.Tensor{f32(2, 3, 5, 8), f32(2, 3, 40, 8), f32(2, 3, 40, 6)}, nil, nn.LoomAttention, 1e-5},
		{"conv_direct", convNode(padsAttr(1, 1)), 18, []tensor.Tensor{f32(2, 3, 40), f32(4, 3, 3), f32(4)}, nil, nil, 1e-5},
		{"conv_depthwise", convNode(groupAttr(6)), 18, []tensor.Tensor{f32(2, 6, 5, 33), f32(6, 1, 3, 3)}, nil, nil, 1e-5},
		{"conv_cols", convNode(), 18, []tensor.Tensor{f32(3, 16, 4, 4), f32(5, 16, 3, 3)}, nil, nil, 1e-5},
		{"conv_cout_wt", convNode(padsAttr(1, 1, 1, 1)), 18, []tensor.Tensor{f32(2, 4, 6, 6), f32(16, 4, 3, 3), f32(16)}, []int{1}, nil, 1e-5},
		{"conv_transpose", node("ConvTranspose", graph.IntsAttr("strides", 2, 2)), 17, []tensor.Tensor{f32(2, 3, 5, 4), f32(3, 2, 3, 3), f32(2)}, nil, nil, 1e-5},
		{"gemm_nn_batched", node("MatMul"), 13, []tensor.Tensor{f32(3, 2, 9, 20), f32(3, 2, 20, 40)}, nil, nil, 1e-5},
		{"gemm_nt_transpose", node("Gemm", graph.IntAttr("transA", 1), graph.IntAttr("transB", 1)), 13, []tensor.Tensor{f32(7, 5), f32(6, 7)}, nil, nil, 1e-5},
		{"gemm_nt", node("Gemm", graph.IntAttr("transB", 1)), 13, []tensor.Tensor{f32(5, 64), f32(6, 64)}, nil, nil, 1e-5},
		{"gemm_tiled_batched", node("MatMul"), 13, []tensor.Tensor{f32(3, 2, 70, 20), f32(3, 1, 20, 65)}, nil, nil, 1e-5},
		{"gemm_tiled_transposed", node("Gemm", graph.IntAttr("transA", 1), graph.IntAttr("transB", 1)), 13, []tensor.Tensor{f32(7, 5), f32(6, 7), f32(6)}, nil, nil, 1e-5},
		{"pool2d", node("MaxPool", graph.IntsAttr("kernel_shape", 3, 3), graph.IntsAttr("pads", 1, 1, 1, 1)), 18, []tensor.Tensor{f32(2, 3, 7, 6)}, nil, nil, 0},
		{"pool2d_window", node("MaxPool", graph.IntsAttr("kernel_shape", 2, 2), graph.IntsAttr("strides", 2, 2)), 18, []tensor.Tensor{f32(2, 3, 6, 80)}, nil, nil, 0},
		{"resize_nearest", node("Resize", graph.StringAttr("mode", "nearest")), 19, []tensor.Tensor{f32(2, 3, 5, 7), {}, tensor.MustTensor([]int64{4}, []float32{1, 1, 2, 1.5})}, nil, nil, 0},
		{"resize_linear", node("Resize", graph.StringAttr("mode", "linear")), 19, []tensor.Tensor{f32(2, 3, 5, 7), {}, tensor.MustTensor([]int64{4}, []float32{1, 1, 2, 1.5})}, nil, nil, 1e-6},
		{"rnn", rnn, 14, rnnIn, []int{1, 2}, nil, 1e-5},
	}
	// The cases planned by the GPU planners (the cuda provider's), whose kernels fold too.
	gpu := map[string]bool{"attention_gpu": true, "gemm_tiled_batched": true, "gemm_tiled_transposed": true, "pool2d": true}
	folded := map[string]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			infos := ops.InfosOfStatic(c.in)
			for _, i := range c.dynamic {
				infos[i].Static = tensor.Tensor{}
			}
			target := ops.PlanHost
			if gpu[c.name] {
				target = ops.PlanGPU
			}
			planner, ok := ops.PlannerFor(target, ops.PlannerKey(c.node))
			require.True(t, ok)
			p, reason, err := planner(c.node, c.opset, infos)
			require.NoError(t, err)
			require.NotNil(t, p, reason)
			for i, k := range p.Calls {
				if g, ok := ops.Geometry(k); ok && g.Foldable {
					k.Config = maps.Clone(k.Config)
					if k.Config == nil {
						k.Config = map[string]string{}
					}
					k.Config["FOLD"] = "true"
					p.Calls[i] = k
					folded[k.File+":"+k.Symbol] = true
				}
			}
			rc := testRunCtx(s, c.opset)
			defer rc.Close()
			got, err := rc.RunKernelPlan(p, c.in)
			require.NoError(t, err, ops.Variant(p))
			host := c.host
			if host == nil {
				host = ops.HostOps[c.node.OpType]
			}
			want, err := host(rc, c.node, c.in)
			require.NoError(t, err)
			requireSameTensors(t, want, got, c.tol, ops.Variant(p))
		})
	}
	for k, f := range ops.KernelGeometry {
		if f(make([]int64, 6), func(_ string, def int64) int64 { return def }).Foldable {
			require.True(t, folded[k], "no case runs %s folded", k)
		}
	}
}

func describeAttrs(n *graph.Node) string {
	var parts []string
	for _, a := range n.Attrs {
		switch {
		case len(a.Ints) > 0:
			parts = append(parts, fmt.Sprintf("%s=%v", a.Name, a.Ints))
		case a.Type == graph.AttrInt:
			parts = append(parts, fmt.Sprintf("%s=%d", a.Name, a.Int))
		case a.Type == graph.AttrFloat:
			parts = append(parts, fmt.Sprintf("%s=%g", a.Name, a.Float))
		case a.Type == graph.AttrString:
			parts = append(parts, fmt.Sprintf("%s=%s", a.Name, a.String))
		}
	}
	return fmt.Sprint(parts)
}

// A launch that no folding fits fails with an error that names the kernel (the interpreter
// adds the node: "node %q (%s): ..."), not a panic or a rejected dispatch.
func TestKernelGeometryUntileableIsAnError(t *testing.T) {
	relu := node("Relu")
	_, _, err := ops.KernelPlanners["Relu"](relu, 18, []ops.ValueInfo{{ValueType: ops.ValueType{Dtype: graph.Float, Shape: []int64{1 << 20, 1 << 20}}, Present: true}})
	require.ErrorContains(t, err, "kernel kernels/elementwise.loom:unary[OP=0] cannot launch workload [1099511627776] within the device limits")
	c := ops.KernelCall{File: "linalg.loom", Symbol: "pool2d_window", Config: map[string]string{"MAX": "true"}, Workload: []uint64{70000, 70000, 70000}}
	err = ops.FitCall(&c, ops.KernelLimits)
	require.ErrorContains(t, err, "kernels/linalg.loom:pool2d_window[MAX=true]")
	require.ErrorContains(t, err, "(grid y and z folded into x)")
	require.Empty(t, c.Config["FOLD"], "a launch that does not fit is left as it was")
}

// The host backend's launch limits are at least kernelLimits, so plans the planners keep
// within kernelLimits run on the host as on sm_90.
func TestKernelLimitsHoldOnHost(t *testing.T) {
	p := sessiontest.OpenHost(t, 1).Props()
	lim := ops.KernelLimits
	require.GreaterOrEqual(t, p.MaxThreadsPerBlock, lim.MaxThreadsPerBlock)
	for d := range 3 {
		require.GreaterOrEqual(t, p.MaxBlockDim[d], lim.MaxBlockDim[d], "block dim %d", d)
		require.GreaterOrEqual(t, p.MaxGridDim[d], lim.MaxGridDim[d], "grid dim %d", d)
	}
	require.GreaterOrEqual(t, p.MaxSharedMemoryPerBlock, lim.MaxSharedMemoryPerBlock)
	require.Equal(t, sm90Limits, ops.KernelLimits, "the planners' limits are sm_90's")
}

// TestGPUPlannersMatchTheHost runs the GPU planners' kernels (a block a row, block reductions
// through shared memory and barriers) on the host backend over random shapes, including rows
// shorter than a warp, a column, and long rows that are no power of two, against the ops' host
// functions.
func TestGPUPlannersMatchTheHost(t *testing.T) {
	s := kernelCheckSession(t)
	gc := newGeomChecker(t, s)
	r := sessiontest.NewRand(t)
	for i := range 24 {
		rows, cols := int64(1+r.IntN(40)), int64(1+r.IntN(700))
		switch i % 4 {
		case 0:
			cols = int64(1 + r.IntN(31))
		case 1:
			cols = 1
		}
		op := []string{"Softmax", "LogSoftmax"}[r.IntN(2)]
		c := geomCase{name: fmt.Sprintf("%s [%d %d]", op, rows, cols), node: node(op), opset: 13, in: []geomInput{fin(rows, cols)}, tol: 1e-5}
		require.True(t, runGeomCaseFor(t, s, gc, r, c, true, ops.PlanGPU), c.name)
	}
	// Reductions whose contiguous runs are at least a warp long (reduce_rows_block): over the
	// last axis, and over the last two ([a, b, c] reduced over b and c: R0 runs of R1).
	for i := range 16 {
		op := []string{"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
			"ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"}[r.IntN(10)]
		x := []int64{int64(1 + r.IntN(6)), int64(1 + r.IntN(5)), int64(32 + r.IntN(400))}
		axes := int64Vec(2)
		if i%2 == 1 {
			axes = int64Vec(1, 2)
		}
		in := []geomInput{fin(x...), fixedIn(axes)}
		if op == "ReduceLogSum" || op == "ReduceProd" {
			in[0] = finPos(x...)
		}
		c := geomCase{name: fmt.Sprintf("%s %v over the last %d axes (GPU planner)", op, x, 1+i%2), node: node(op), opset: 18, in: in, tol: 1e-4}
		require.True(t, runGeomCaseFor(t, s, gc, r, c, true, ops.PlanGPU), c.name)
	}
	// binary_flat with the GPU's geometry (blocks of 256 threads, 4 elements a thread): lengths
	// around a block's span of 1,024 elements and its multiples, a single element broadcast
	// either way, and every op that plans it.
	for i := range 24 {
		op := []string{"Add", "Sub", "Mul", "Div"}[i%4]
		n := []int64{1, 3, 255, 256, 257, 1023, 1024, 1025, 4096, 4097, int64(1 + r.IntN(20000))}[r.IntN(11)]
		a, b := fin(n), fin(n)
		switch i % 3 {
		case 1:
			b = fin(1)
		case 2:
			a = fin(1)
		}
		if op == "Div" {
			b.positive = true
		}
		c := geomCase{name: fmt.Sprintf("%s %v %v (GPU planner)", op, a.shape, b.shape), node: node(op), opset: 18, in: []geomInput{a, b}, tol: 1e-6}
		p, _, err := ops.GPUKernelPlanners[op](c.node, c.opset, c.infos())
		require.NoError(t, err, c.name)
		require.Equal(t, "4", p.Calls[0].Config["EPT"], "%s: %v", c.name, p.Calls[0])
		require.True(t, runGeomCaseFor(t, s, gc, r, c, true, ops.PlanGPU), c.name)
	}
	for _, f := range []string{"softmax", "layer_norm", "instance_norm", "reduce", "attention"} {
		for i := range 12 {
			c := geomGenerators[f](&geomGen{r: r, budget: geomRunBudget})
			c.name = fmt.Sprintf("%s #%d: %s%s %s (GPU planner)", f, i, c.node.OpType, describeAttrs(c.node), describeGeomInputs(c.in))
			_, gpu := ops.GPUKernelPlanners[ops.PlannerKey(c.node)]
			require.True(t, gpu, "%s has no GPU planner", c.name)
			runGeomCaseFor(t, s, gc, r, c, true, ops.PlanGPU)
		}
	}
}
