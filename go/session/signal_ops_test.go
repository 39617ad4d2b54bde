package session_test

import (
	"context"
	"errors"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session"
)

// DFT, STFT and the training optimizers (Adagrad, Adam, Momentum) against float64
// references written here (a direct O(n²) sum for the transforms), on fresh random inputs;
// the ONNX node suites check them against ONNX's reference too.

// naiveDFT transforms x (length n after padding or truncating to n) directly: forward
// e^{-2πikt/n}, inverse e^{+2πikt/n} / n.
func naiveDFT(x []complex128, n int, inverse bool) []complex128 {
	sign := -1.0
	if inverse {
		sign = 1
	}
	out := make([]complex128, n)
	for k := range n {
		var s complex128
		for t := range min(n, len(x)) {
			s += x[t] * cmplx.Rect(1, sign*2*math.Pi*float64(k*t%n)/float64(n))
		}
		if inverse {
			s /= complex(float64(n), 0)
		}
		out[k] = s
	}
	return out
}

// naiveIRFFT is numpy's irfft: the real signal of length n whose spectrum's first n/2+1
// bins are x (zero-padded or truncated), the imaginary parts of bin 0 and of the Nyquist
// bin (even n) ignored.
func naiveIRFFT(x []complex128, n int) []float64 {
	half := make([]complex128, n/2+1)
	copy(half, x)
	full := make([]complex128, n)
	for k := range n {
		switch {
		case k == 0 || (n%2 == 0 && k == n/2):
			full[k] = complex(real(half[k]), 0)
		case k < len(half):
			full[k] = half[k]
		default:
			full[k] = cmplx.Conj(half[n-k])
		}
	}
	out := make([]float64, n)
	for i, v := range naiveDFT(full, n, true) {
		out[i] = real(v)
	}
	return out
}

func runOne(t *testing.T, g *graph.Graph, opset int64, domains map[string]int64, feeds []session.NamedTensor) ([]session.Tensor, error) {
	t.Helper()
	imports := map[string]int64{"": opset}
	for d, v := range domains {
		imports[d] = v
	}
	m, err := graph.FromGraph(g.Name, g, imports)
	require.NoError(t, err)
	s, err := session.FromGraph(m, session.WithExecutionProvider(session.ProviderHost))
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var outs []session.Tensor
	for range 2 { // traced, then planned
		if outs, err = s.Run(context.Background(), feeds); err != nil {
			return nil, err
		}
	}
	return outs, nil
}

func TestDFTMatchesTheDirectSum(t *testing.T) {
	seed := rand.Uint64()
	rnd := rand.New(rand.NewPCG(seed, 17))
	t.Logf("seed %d", seed)
	for c := range 40 {
		opset := []int64{17, 20}[c%2]
		inverse, onesided := rnd.IntN(2) == 1, rnd.IntN(2) == 1
		irfft := inverse && onesided
		comps := int64(1 + rnd.IntN(2))
		if irfft {
			comps = 2
		}
		dims := []int64{1 + rnd.Int64N(3), 1 + rnd.Int64N(9), 1 + rnd.Int64N(3), comps}
		ax := rnd.IntN(3)
		dim := int(dims[ax])
		n := dim
		if irfft {
			n = max(2*(dim-1), 1)
		}
		var lengthIn []int64
		if rnd.IntN(2) == 0 || (irfft && dim == 1) { // IRFFT's default length of 2 (dim - 1) is 0 then
			n = 1 + rnd.IntN(12)
			lengthIn = []int64{int64(n)}
		}
		x := make([]float64, dims[0]*dims[1]*dims[2]*comps)
		for i := range x {
			x[i] = rnd.NormFloat64()
		}
		inputs := []string{"x", "", ""}
		feeds := []session.NamedTensor{{Name: "x", Tensor: session.MustTensor(dims, x)}}
		g := &graph.Graph{Name: "dft", Inputs: []*graph.Value{graph.Input("x", graph.TensorType(graph.Double, graph.ShapeOf(dims...)))},
			Outputs: []*graph.Value{graph.Output("y", graph.Type{})}}
		if lengthIn != nil {
			inputs[1] = "len"
			g.Inputs = append(g.Inputs, graph.Input("len", graph.TensorType(graph.Int64, graph.Shape{})))
			feeds = append(feeds, session.NamedTensor{Name: "len", Tensor: session.MustTensor([]int64{}, lengthIn)})
		}
		attrs := []*graph.Attribute{graph.IntAttr("inverse", b2i(inverse)), graph.IntAttr("onesided", b2i(onesided))}
		if opset == 17 {
			attrs = append(attrs, graph.IntAttr("axis", int64(ax)))
			inputs = inputs[:2]
		} else {
			inputs[2] = "axis"
			g.Inputs = append(g.Inputs, graph.Input("axis", graph.TensorType(graph.Int64, graph.Shape{})))
			feeds = append(feeds, session.NamedTensor{Name: "axis", Tensor: session.MustTensor([]int64{}, []int64{int64(ax - 4)})})
		}
		g.Nodes = []*graph.Node{graph.NewNode("dft", "DFT", inputs, []string{"y"}, attrs...)}
		outs, err := runOne(t, g, opset, nil, feeds)
		require.NoError(t, err, "case %d (seed %d)", c, seed)
		y, err := session.TensorOf[float64](outs[0])
		require.NoError(t, err)
		wantShape := append([]int64{}, dims...)
		bins := n
		switch {
		case irfft:
			wantShape[3] = 1
		case onesided:
			bins = n/2 + 1
			wantShape[3] = 2
		default:
			wantShape[3] = 2
		}
		wantShape[ax] = int64(bins)
		require.Equal(t, wantShape, outs[0].Shape(), "case %d", c)
		// Every line along the axis.
		st := []int{int(dims[1] * dims[2] * comps), int(dims[2] * comps), int(comps)}
		ost := []int{int(wantShape[1] * wantShape[2] * wantShape[3]), int(wantShape[2] * wantShape[3]), int(wantShape[3])}
		for i0 := range dims[0] {
			for i1 := range dims[1] {
				for i2 := range dims[2] {
					pos := []int{int(i0), int(i1), int(i2)}
					if pos[ax] != 0 {
						continue
					}
					line := make([]complex128, dim)
					for k := range dim {
						p := append([]int{}, pos...)
						p[ax] = k
						o := p[0]*st[0] + p[1]*st[1] + p[2]*st[2]
						line[k] = complex(x[o], 0)
						if comps == 2 {
							line[k] = complex(x[o], x[o+1])
						}
					}
					at := func(k int) int {
						p := append([]int{}, pos...)
						p[ax] = k
						return p[0]*ost[0] + p[1]*ost[1] + p[2]*ost[2]
					}
					if irfft {
						for k, v := range naiveIRFFT(line, n) {
							require.InDelta(t, v, y[at(k)], 1e-9*(1+math.Abs(v)), "case %d (seed %d) element %d", c, seed, k)
						}
						continue
					}
					for k, v := range naiveDFT(line, n, inverse)[:bins] {
						require.InDelta(t, real(v), y[at(k)], 1e-9*(1+cmplx.Abs(v)), "case %d (seed %d) bin %d", c, seed, k)
						require.InDelta(t, imag(v), y[at(k)+1], 1e-9*(1+cmplx.Abs(v)), "case %d (seed %d) bin %d", c, seed, k)
					}
				}
			}
		}
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func TestSTFTMatchesTheDirectSum(t *testing.T) {
	seed := rand.Uint64()
	rnd := rand.New(rand.NewPCG(seed, 19))
	t.Logf("seed %d", seed)
	for c := range 12 {
		batch, length := 1+rnd.IntN(2), 8+rnd.IntN(40)
		frame := 1 + rnd.IntN(length)
		step := 1 + rnd.IntN(6)
		onesided := c%2 == 0
		comps := 1
		if !onesided && rnd.IntN(2) == 0 {
			comps = 2
		}
		x := make([]float32, batch*length*comps)
		for i := range x {
			x[i] = float32(rnd.NormFloat64())
		}
		w := make([]float32, frame)
		for i := range w {
			w[i] = rnd.Float32()
		}
		withWindow := c%3 != 0
		inputs := []string{"x", "step", "", "len"}
		g := &graph.Graph{Name: "stft", Inputs: []*graph.Value{
			graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(int64(batch), int64(length), int64(comps)))),
			graph.Input("step", graph.TensorType(graph.Int64, graph.Shape{})), graph.Input("len", graph.TensorType(graph.Int64, graph.Shape{}))},
			Outputs: []*graph.Value{graph.Output("y", graph.Type{})}}
		feeds := []session.NamedTensor{{Name: "x", Tensor: session.MustTensor([]int64{int64(batch), int64(length), int64(comps)}, x)},
			{Name: "step", Tensor: session.MustTensor([]int64{}, []int64{int64(step)})},
			{Name: "len", Tensor: session.MustTensor([]int64{}, []int64{int64(frame)})}}
		if withWindow {
			inputs[2] = "w"
			g.Inputs = append(g.Inputs, graph.Input("w", graph.TensorType(graph.Float, graph.ShapeOf(int64(frame)))))
			feeds = append(feeds, session.NamedTensor{Name: "w", Tensor: session.MustTensor([]int64{int64(frame)}, w)})
		}
		g.Nodes = []*graph.Node{graph.NewNode("stft", "STFT", inputs, []string{"y"}, graph.IntAttr("onesided", b2i(onesided)))}
		outs, err := runOne(t, g, 17, nil, feeds)
		require.NoError(t, err, "case %d (seed %d)", c, seed)
		y, err := session.TensorOf[float32](outs[0])
		require.NoError(t, err)
		frames, bins := (length-frame)/step+1, frame
		if onesided {
			bins = frame/2 + 1
		}
		require.Equal(t, []int64{int64(batch), int64(frames), int64(bins), 2}, outs[0].Shape())
		for b := range batch {
			for f := range frames {
				line := make([]complex128, frame)
				for k := range frame {
					i := (b*length + f*step + k) * comps
					v := complex(float64(x[i]), 0)
					if comps == 2 {
						v = complex(float64(x[i]), float64(x[i+1]))
					}
					if withWindow {
						v *= complex(float64(w[k]), 0)
					}
					line[k] = v
				}
				for k, v := range naiveDFT(line, frame, false)[:bins] {
					o := ((b*frames+f)*bins + k) * 2
					tol := 1e-4 * (1 + cmplx.Abs(v))
					require.InDelta(t, real(v), float64(y[o]), tol, "case %d (seed %d) frame %d bin %d", c, seed, f, k)
					require.InDelta(t, imag(v), float64(y[o+1]), tol, "case %d (seed %d) frame %d bin %d", c, seed, f, k)
				}
			}
		}
	}
}

// Bad DFT and STFT inputs are refused with errors naming the node and the value, and a
// hostile dft_length is refused before memory is taken.
func TestSignalOpsRefuseBadInputs(t *testing.T) {
	dftModel := func(dims []int64, length int64, attrs ...*graph.Attribute) (*graph.Graph, []session.NamedTensor) {
		g := &graph.Graph{Name: "dft", Inputs: []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(dims...))),
			graph.Input("len", graph.TensorType(graph.Int64, graph.Shape{}))},
			Outputs: []*graph.Value{graph.Output("y", graph.Type{})},
			Nodes:   []*graph.Node{graph.NewNode("the_dft", "DFT", []string{"x", "len"}, []string{"y"}, attrs...)}}
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		return g, []session.NamedTensor{{Name: "x", Tensor: session.MustTensor(dims, make([]float32, n))},
			{Name: "len", Tensor: session.MustTensor([]int64{}, []int64{length})}}
	}
	stftModel := func(length, step, frame int64, comps int64, onesided int64) (*graph.Graph, []session.NamedTensor) {
		g := &graph.Graph{Name: "stft", Inputs: []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(1, length, comps))),
			graph.Input("step", graph.TensorType(graph.Int64, graph.Shape{})), graph.Input("len", graph.TensorType(graph.Int64, graph.Shape{}))},
			Outputs: []*graph.Value{graph.Output("y", graph.Type{})},
			Nodes:   []*graph.Node{graph.NewNode("the_stft", "STFT", []string{"x", "step", "", "len"}, []string{"y"}, graph.IntAttr("onesided", onesided))}}
		return g, []session.NamedTensor{{Name: "x", Tensor: session.MustTensor([]int64{1, length, comps}, make([]float32, length*comps))},
			{Name: "step", Tensor: session.MustTensor([]int64{}, []int64{step})}, {Name: "len", Tensor: session.MustTensor([]int64{}, []int64{frame})}}
	}
	for _, tc := range []struct {
		name  string
		model func() (*graph.Graph, []session.NamedTensor)
		want  []string
		opset int64 // 20 when 0
	}{
		{"dft zero length", func() (*graph.Graph, []session.NamedTensor) { return dftModel([]int64{2, 4, 1}, 0) }, []string{"the_dft", "dft_length 0 must be positive"}, 0},
		{"dft negative length", func() (*graph.Graph, []session.NamedTensor) { return dftModel([]int64{2, 4, 1}, -3) }, []string{"the_dft", "dft_length -3"}, 0},
		{"dft hostile length", func() (*graph.Graph, []session.NamedTensor) { return dftModel([]int64{2, 4, 1}, 1<<45) }, []string{"the_dft"}, 0},
		{"dft axis on the complex dimension", func() (*graph.Graph, []session.NamedTensor) {
			return dftModel([]int64{2, 4, 1}, 4, graph.IntAttr("axis", 2))
		}, []string{"the_dft", "axis 2 is the"}, 17},
		{"dft last dimension 3", func() (*graph.Graph, []session.NamedTensor) { return dftModel([]int64{2, 4, 3}, 4) }, []string{"the_dft", "last dimension of 3"}, 0},
		{"irfft of a real input", func() (*graph.Graph, []session.NamedTensor) {
			return dftModel([]int64{2, 4, 1}, 4, graph.IntAttr("inverse", 1), graph.IntAttr("onesided", 1))
		}, []string{"the_dft", "IRFFT"}, 0},
		{"stft zero step", func() (*graph.Graph, []session.NamedTensor) { return stftModel(16, 0, 4, 1, 1) }, []string{"the_stft", "frame_step 0"}, 0},
		{"stft frame past the signal", func() (*graph.Graph, []session.NamedTensor) { return stftModel(16, 2, 17, 1, 1) }, []string{"the_stft", "frame_length 17"}, 0},
		{"stft onesided complex", func() (*graph.Graph, []session.NamedTensor) { return stftModel(16, 2, 4, 2, 1) }, []string{"the_stft", "onesided"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, feeds := tc.model()
			opset := tc.opset
			if opset == 0 {
				opset = 20
			}
			_, err := runOne(t, g, opset, nil, feeds)
			require.Error(t, err)
			var e *session.Error
			require.True(t, errors.As(err, &e), "%v", err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// The optimizers update several tensors in one node (X..., G..., state...), each with its own
// state, and refuse mismatched groups and bad attributes.
func TestTrainingOptimizers(t *testing.T) {
	seed := rand.Uint64()
	rnd := rand.New(rand.NewPCG(seed, 23))
	t.Logf("seed %d", seed)
	vec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rnd.NormFloat64())
		}
		return v
	}
	const training = "ai.onnx.preview.training"
	type group struct{ x, g, s1, s2 []float32 }
	groups := []group{{vec(3), vec(3), vec(3), vec(3)}, {vec(5), vec(5), vec(5), vec(5)}}
	for _, a := range groups {
		for i := range a.s2 {
			a.s2[i] = float32(math.Abs(float64(a.s2[i]))) // squared-gradient accumulators are not negative
		}
	}
	r, step := 0.1+rnd.Float64(), int64(1+rnd.IntN(4))
	for _, op := range []string{"Adagrad", "Adam", "Momentum", "Nesterov"} {
		opType, attrs, states := op, []*graph.Attribute{graph.FloatAttr("norm_coefficient", 0.01)}, 1
		switch op {
		case "Adagrad":
			attrs = append(attrs, graph.FloatAttr("decay_factor", 0.1), graph.FloatAttr("epsilon", 1e-3))
		case "Adam":
			states = 2
			attrs = append(attrs, graph.FloatAttr("alpha", 0.8), graph.FloatAttr("beta", 0.95), graph.FloatAttr("norm_coefficient_post", 0.02), graph.FloatAttr("epsilon", 1e-3))
		default:
			opType = "Momentum"
			mode := "standard"
			if op == "Nesterov" {
				mode = "nesterov"
			}
			attrs = append(attrs, graph.FloatAttr("alpha", 0.7), graph.FloatAttr("beta", 0.4), graph.StringAttr("mode", mode))
		}
		g := &graph.Graph{Name: op, Outputs: nil}
		feeds := []session.NamedTensor{{Name: "R", Tensor: session.MustTensor([]int64{}, []float32{float32(r)})},
			{Name: "T", Tensor: session.MustTensor([]int64{}, []int64{step})}}
		g.Inputs = []*graph.Value{graph.Input("R", graph.TensorType(graph.Float, graph.Shape{})), graph.Input("T", graph.TensorType(graph.Int64, graph.Shape{}))}
		inputs, outputs := []string{"R", "T"}, []string{}
		add := func(prefix string, pick func(group) []float32) {
			for j, gr := range groups {
				name := prefix + string(rune('1'+j))
				v := pick(gr)
				g.Inputs = append(g.Inputs, graph.Input(name, graph.TensorType(graph.Float, graph.ShapeOf(int64(len(v))))))
				feeds = append(feeds, session.NamedTensor{Name: name, Tensor: session.MustTensor([]int64{int64(len(v))}, v)})
				inputs = append(inputs, name)
			}
		}
		add("X", func(gr group) []float32 { return gr.x })
		add("G", func(gr group) []float32 { return gr.g })
		if op == "Adam" {
			add("V", func(gr group) []float32 { return gr.s1 })
		}
		add("H", func(gr group) []float32 { return gr.s2 })
		for o := range 1 + states {
			for j := range groups {
				outputs = append(outputs, "out"+string(rune('0'+o))+string(rune('1'+j)))
				g.Outputs = append(g.Outputs, graph.Output(outputs[len(outputs)-1], graph.Type{}))
			}
		}
		g.Nodes = []*graph.Node{nodeIn(training, "opt", opType, inputs, outputs, attrs...)}
		outs, err := runOne(t, g, 20, map[string]int64{training: 1}, feeds)
		require.NoError(t, err, op)
		require.Len(t, outs, len(groups)*(1+states))
		for j, gr := range groups {
			for e := range gr.x {
				x, gg := float64(gr.x[e]), float64(gr.g[e])
				gr1 := 0.01*x + gg
				var wantX, wantS1, wantS2 float64
				switch op {
				case "Adagrad":
					h := float64(gr.s2[e]) + gr1*gr1
					wantX, wantS1 = x-r/(1+float64(step)*0.1)*gr1/(math.Sqrt(h)+1e-3), h
				case "Adam":
					v := 0.8*float64(gr.s1[e]) + 0.2*gr1
					h := 0.95*float64(gr.s2[e]) + 0.05*gr1*gr1
					rate := r * math.Sqrt(1-math.Pow(0.95, float64(step))) / (1 - math.Pow(0.8, float64(step)))
					wantX, wantS1, wantS2 = 0.98*(x-rate*v/(math.Sqrt(h)+1e-3)), v, h
				case "Momentum", "Nesterov":
					v := 0.7*float64(gr.s2[e]) + 0.4*gr1
					wantX, wantS1 = x-r*v, v
					if op == "Nesterov" {
						wantX = x - r*(gr1+0.7*v)
					}
				}
				got := func(o int) float64 {
					v, err := session.TensorOf[float32](outs[o*len(groups)+j])
					require.NoError(t, err)
					return float64(v[e])
				}
				assert.InDelta(t, wantX, got(0), 1e-5*(1+math.Abs(wantX)), "%s X%d[%d] (seed %d)", op, j+1, e, seed)
				assert.InDelta(t, wantS1, got(1), 1e-5*(1+math.Abs(wantS1)), "%s state %d[%d]", op, j+1, e)
				if states == 2 {
					assert.InDelta(t, wantS2, got(2), 1e-5*(1+math.Abs(wantS2)), "%s state 2 %d[%d]", op, j+1, e)
				}
			}
		}
	}
	// A gradient of another shape than its X, and Momentum without its mode.
	g := &graph.Graph{Name: "bad", Inputs: []*graph.Value{graph.Input("R", graph.TensorType(graph.Float, graph.Shape{})),
		graph.Input("T", graph.TensorType(graph.Int64, graph.Shape{})), graph.Input("X", graph.TensorType(graph.Float, graph.ShapeOf(3))),
		graph.Input("G", graph.TensorType(graph.Float, graph.ShapeOf(2))), graph.Input("H", graph.TensorType(graph.Float, graph.ShapeOf(3)))},
		Outputs: []*graph.Value{graph.Output("Xn", graph.Type{}), graph.Output("Hn", graph.Type{})},
		Nodes:   []*graph.Node{nodeIn(training, "opt", "Adagrad", []string{"R", "T", "X", "G", "H"}, []string{"Xn", "Hn"})}}
	feeds := []session.NamedTensor{{Name: "R", Tensor: session.MustTensor([]int64{}, []float32{1})}, {Name: "T", Tensor: session.MustTensor([]int64{}, []int64{0})},
		{Name: "X", Tensor: session.MustTensor([]int64{3}, vec(3))}, {Name: "G", Tensor: session.MustTensor([]int64{2}, vec(2))}, {Name: "H", Tensor: session.MustTensor([]int64{3}, vec(3))}}
	_, err := runOne(t, g, 20, map[string]int64{training: 1}, feeds)
	require.ErrorContains(t, err, "input 3 is tensor(float)[2]; want a float tensor of X's shape [3]")
	g.Nodes = []*graph.Node{nodeIn(training, "opt", "Momentum", []string{"R", "T", "X", "G", "H"}, []string{"Xn", "Hn"},
		graph.FloatAttr("alpha", 0.5), graph.FloatAttr("beta", 0.5), graph.FloatAttr("norm_coefficient", 0))}
	feeds[3] = session.NamedTensor{Name: "G", Tensor: session.MustTensor([]int64{2}, vec(2))}
	_, err = runOne(t, g, 20, map[string]int64{training: 1}, feeds)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"opt"`)
}

// nodeIn is graph.NewNode in another domain.
func nodeIn(domain, name, op string, inputs, outputs []string, attrs ...*graph.Attribute) *graph.Node {
	n := graph.NewNode(name, op, inputs, outputs, attrs...)
	n.Domain = domain
	return n
}
