package session

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// rnnCase is one recurrent-op check: the op, its geometry and which optional inputs it has.
type rnnCase struct {
	op                       string
	seq, batch, in, hidden   int
	dir                      string
	layout                   int64
	bias, h0, c0, peep, lens bool
	linearBeforeReset        bool
	clip                     float32
	activations              []string
}

func (c rnnCase) name() string {
	return fmt.Sprintf("%s_%s_l%d_s%d_b%d_i%d_h%d_B%v_h0%v_c0%v_P%v_lens%v_lbr%v_clip%v", c.op, c.dir, c.layout, c.seq, c.batch,
		c.in, c.hidden, c.bias, c.h0, c.c0, c.peep, c.lens, c.linearBeforeReset, c.clip)
}

// build returns the node and fresh random inputs (sequence lengths in [0, seq], at least one
// shorter than seq when lens).
func (c rnnCase) build(rnd *rand.Rand) (*graph.Node, []tensor.Tensor) {
	gates := map[string]int{"RNN": 1, "GRU": 3, "LSTM": 4}[c.op]
	dirs := 1
	if c.dir == "bidirectional" {
		dirs = 2
	}
	f32 := func(shape ...int64) tensor.Tensor {
		return tensor.MustTensor(shape, randomF32(rnd, ops.Numel(shape)))
	}
	x := f32(int64(c.seq), int64(c.batch), int64(c.in))
	state := []int64{int64(dirs), int64(c.batch), int64(c.hidden)}
	if c.layout == 1 {
		x = f32(int64(c.batch), int64(c.seq), int64(c.in))
		state = []int64{int64(c.batch), int64(dirs), int64(c.hidden)}
	}
	gh := int64(gates * c.hidden)
	in := []tensor.Tensor{x, f32(int64(dirs), gh, int64(c.in)), f32(int64(dirs), gh, int64(c.hidden)), {}, {}, {}}
	if c.bias {
		in[3] = f32(int64(dirs), 2*gh)
	}
	if c.lens {
		l := make([]int32, c.batch)
		for i := range l {
			l[i] = int32(rnd.IntN(c.seq + 1))
		}
		l[rnd.IntN(c.batch)] = int32(rnd.IntN(c.seq))
		in[4] = tensor.MustTensor([]int64{int64(c.batch)}, l)
	}
	if c.h0 {
		in[5] = f32(state...)
	}
	if c.op == "LSTM" {
		in = append(in, tensor.Tensor{}, tensor.Tensor{})
		if c.c0 {
			in[6] = f32(state...)
		}
		if c.peep {
			in[7] = f32(int64(dirs), 3*int64(c.hidden))
		}
	}
	attrs := []*graph.Attribute{graph.IntAttr("hidden_size", int64(c.hidden)), graph.StringAttr("direction", c.dir),
		graph.IntAttr("layout", c.layout)}
	if c.linearBeforeReset {
		attrs = append(attrs, graph.IntAttr("linear_before_reset", 1))
	}
	if c.clip > 0 {
		attrs = append(attrs, graph.FloatAttr("clip", c.clip))
	}
	if len(c.activations) > 0 {
		a := &graph.Attribute{Name: "activations", Type: graph.AttrStrings}
		for _, name := range c.activations {
			a.Strings = append(a.Strings, []byte(name))
		}
		attrs = append(attrs, a)
	}
	outs := []string{"y", "yh"}
	if c.op == "LSTM" {
		outs = append(outs, "yc")
	}
	return graph.NewNode("n", c.op, nil, outs, attrs...), in
}

// TestRNNKernelsAgainstHost checks the recurrent kernels against the float64 host functions.
// The kernels compute in float32 with a different summation order, and the state feeds back
// through every step, so errors grow with the sequence: 2e-5 + 2e-5·|want| covers sequences
// of up to 20 steps with 40 units (gates are squashed by sigmoid/tanh, so errors do not
// compound exponentially; observed worst cases are a few 1e-6).
func TestRNNKernelsAgainstHost(t *testing.T) {
	s := kernelCheckSession(t)
	rnd := inferRand()
	cases := []rnnCase{
		{op: "LSTM", seq: 1, batch: 1, in: 128, hidden: 128, dir: "forward", bias: true, h0: true, c0: true}, // Silero VAD v5
		{op: "LSTM", seq: 7, batch: 3, in: 5, hidden: 20, dir: "forward"},
		{op: "LSTM", seq: 6, batch: 2, in: 9, hidden: 17, dir: "reverse", bias: true, h0: true, c0: true},
		{op: "LSTM", seq: 5, batch: 4, in: 3, hidden: 16, dir: "bidirectional", bias: true, h0: true, c0: true, peep: true, lens: true},
		{op: "LSTM", seq: 9, batch: 2, in: 6, hidden: 33, dir: "bidirectional", layout: 1, bias: true, h0: true, clip: 0.7},
		{op: "LSTM", seq: 4, batch: 3, in: 8, hidden: 5, dir: "forward", layout: 1, c0: true, lens: true, activations: []string{"sigmoid", "tanh", "tanh"}},
		{op: "LSTM", seq: 3, batch: 2, in: 0, hidden: 4, dir: "forward", bias: true},
		{op: "GRU", seq: 8, batch: 3, in: 5, hidden: 20, dir: "forward"},
		{op: "GRU", seq: 6, batch: 2, in: 7, hidden: 40, dir: "reverse", bias: true, h0: true, linearBeforeReset: true},
		{op: "GRU", seq: 5, batch: 5, in: 4, hidden: 9, dir: "bidirectional", bias: true, h0: true, lens: true},
		{op: "GRU", seq: 20, batch: 2, in: 3, hidden: 18, dir: "bidirectional", layout: 1, bias: true, linearBeforeReset: true, lens: true, clip: 1.5},
		{op: "RNN", seq: 6, batch: 3, in: 4, hidden: 19, dir: "bidirectional", bias: true, h0: true, lens: true},
		{op: "RNN", seq: 4, batch: 2, in: 5, hidden: 8, dir: "forward", layout: 1, clip: 0.5},
	}
	for _, c := range cases {
		t.Run(c.name(), func(t *testing.T) {
			n, in := c.build(rnd)
			checkKernelOp(t, s, n, 14, in, nil, 2e-5, 2e-5)
		})
	}
}

// TestRNNKernelsDecline checks that the planner leaves what its kernels do not cover to the
// host functions, and rejects invalid shapes.
func TestRNNKernelsDecline(t *testing.T) {
	rnd := inferRand()
	plan := func(n *graph.Node, in []tensor.Tensor, static bool) (*ops.KernelPlan, string, error) {
		infos := ops.InfosOf(in)
		if static {
			infos = ops.InfosOfStatic(in)
		}
		return ops.KernelPlanners[n.OpType](n, 14, infos)
	}
	c := rnnCase{op: "LSTM", seq: 3, batch: 2, in: 4, hidden: 5, dir: "forward", lens: true}
	n, in := c.build(rnd)
	p, reason, err := plan(n, in, false)
	require.NoError(t, err)
	require.Nil(t, p)
	require.Contains(t, reason, "sequence_lens is not known")

	c = rnnCase{op: "GRU", seq: 3, batch: 2, in: 4, hidden: 5, dir: "forward", activations: []string{"Relu", "Tanh"}}
	n, in = c.build(rnd)
	p, reason, err = plan(n, in, true)
	require.NoError(t, err)
	require.Nil(t, p)
	require.Contains(t, reason, "default activations")

	c = rnnCase{op: "RNN", seq: 3, batch: 2, in: 4, hidden: 5, dir: "forward"}
	n, in = c.build(rnd)
	in[2] = tensor.MustTensor([]int64{1, 5, 4}, randomF32(rnd, 20))
	_, _, err = plan(n, in, true)
	require.ErrorContains(t, err, "R shape")
}
