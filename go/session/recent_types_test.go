package session_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session"
)

// The narrow element types of ONNX 1.22 (float8 x 5, float4e2m1, int4, uint4, int2, uint2)
// run wherever the session runs: interpreted, through compiled plans, and on the cuda
// stand-in (whose plans keep values in device memory), one byte per element in memory and
// packed in models.

// narrowExecutors are the ways a test model runs: interpreted, planned, and planned on the
// cuda stand-in.
var narrowExecutors = []struct {
	name string
	opts []session.LoadOption
}{
	{"interpreted", []session.LoadOption{session.WithExecutionProvider(session.ProviderHost), session.WithOption(session.OptionRunPlan, "0")}},
	{"planned", []session.LoadOption{session.WithExecutionProvider(session.ProviderHost)}},
	{"cuda stand-in", []session.LoadOption{session.WithExecutionProvider(session.ProviderCUDA), session.WithOption(session.OptionCUDAStandIn, "1")}},
}

var narrowTypes = []graph.DataType{graph.Float8E4M3FN, graph.Float8E4M3FNUZ, graph.Float8E5M2, graph.Float8E5M2FNUZ,
	graph.Float8E8M0, graph.Float4E2M1, graph.Int4, graph.Uint4, graph.Int2, graph.Uint2}

func narrowRand(t *testing.T) *rand.Rand {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 5))
}

// runNarrow loads g at opset 25 with each executor and runs feeds three times (the first run
// of a plan is traced, later ones replay it), passing every result to check.
func runNarrow(t *testing.T, g *graph.Graph, feeds []session.NamedTensor, check func(exec string, outs []session.Tensor)) {
	t.Helper()
	m, err := graph.FromGraph(g.Name, g, map[string]int64{"": 25})
	require.NoError(t, err)
	require.NoError(t, m.Check())
	data, err := m.Marshal()
	require.NoError(t, err)
	for _, e := range narrowExecutors {
		s, err := session.LoadBytes(data, e.opts...)
		require.NoError(t, err, e.name)
		for range 3 {
			outs, err := s.Run(context.Background(), feeds)
			require.NoError(t, err, e.name)
			check(e.name, outs)
		}
		require.NoError(t, s.Close())
	}
}

// An initializer of each type (packed in the model) reaches the output unchanged through
// Identity and Transpose, and its values are go/graph's decoding of the packed data.
func TestNarrowInitializersRun(t *testing.T) {
	rnd := narrowRand(t)
	for _, dt := range narrowTypes {
		bits := dt.BitSize()
		n := int64(2 * 5)
		raw := make([]byte, dt.ByteSize(n))
		for i := range raw {
			raw[i] = byte(rnd.Uint32())
		}
		w, err := graph.NewTensor("w", dt, []int64{2, 5}, raw)
		require.NoError(t, err)
		want, err := w.Float64s()
		require.NoError(t, err)
		g := &graph.Graph{Name: "narrow_" + dt.String(),
			Inputs:  []*graph.Value{graph.Input("s", graph.TensorType(graph.Float, graph.Shape{}))},
			Outputs: []*graph.Value{graph.Output("id", graph.Type{}), graph.Output("tr", graph.Type{})},
			Nodes: []*graph.Node{graph.NewNode("id", "Identity", []string{"w"}, []string{"id"}),
				graph.NewNode("tr", "Transpose", []string{"w"}, []string{"tr"}, graph.IntsAttr("perm", 1, 0))}}
		g.AddInitializer(w)
		feeds := []session.NamedTensor{{Name: "s", Tensor: session.MustTensor([]int64{}, []float32{1})}}
		runNarrow(t, g, feeds, func(exec string, outs []session.Tensor) {
			for o, out := range outs {
				require.Equal(t, dt, out.DType(), "%s %s output %d", exec, dt, o)
				got := out.Float64s()
				for i := range n {
					j := i
					if o == 1 { // transposed: got (c, r) = w (r, c)
						j = (i%2)*5 + i/2
					}
					if math.IsNaN(want[j]) {
						assert.True(t, math.IsNaN(got[i]), "%s %s output %d element %d", exec, dt, o, i)
					} else {
						assert.Equal(t, want[j], got[i], "%s %s output %d element %d", exec, dt, o, i)
					}
				}
				// Packing the output again gives the model's bits back (the identity).
				if o == 0 {
					gt, err := session.ToGraphTensor("y", out)
					require.NoError(t, err)
					for i := range raw {
						mask := byte(0xFF)
						if bits < 8 && int64(i) == int64(len(raw))-1 && n*int64(bits)%8 != 0 {
							mask = byte(1<<(n*int64(bits)%8) - 1)
						}
						require.Equal(t, raw[i]&mask, gt.Raw[i], "%s %s byte %d", exec, dt, i)
					}
				}
			}
		})
	}
}

// float -> narrow -> (Transpose) -> float through Cast, with saturate on and off, against the
// type's encoder (whose rounding internal/tensor checks against a brute-force search).
func TestNarrowCastsRun(t *testing.T) {
	rnd := narrowRand(t)
	const rows, cols = 3, 7
	for _, dt := range narrowTypes {
		for _, sat := range []int64{1, 0} {
			attrs := []*graph.Attribute{graph.IntAttr("to", int64(dt)), graph.IntAttr("saturate", sat)}
			if dt == graph.Float8E8M0 {
				attrs = append(attrs, graph.StringAttr("round_mode", "nearest"))
			}
			g := &graph.Graph{Name: "cast_" + dt.String(),
				Inputs:  []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(rows, cols)))},
				Outputs: []*graph.Value{graph.Output("y", graph.Type{}), graph.Output("n", graph.Type{})},
				Nodes: []*graph.Node{graph.NewNode("to", "Cast", []string{"x"}, []string{"n"}, attrs...),
					graph.NewNode("tr", "Transpose", []string{"n"}, []string{"t"}, graph.IntsAttr("perm", 1, 0)),
					graph.NewNode("back", "Cast", []string{"t"}, []string{"y"}, graph.IntAttr("to", int64(graph.Float)))}}
			x := make([]float32, rows*cols)
			for i := range x {
				// Magnitudes from tiny to past every type's range; some infinities and a NaN.
				x[i] = float32(math.Ldexp(rnd.Float64()*2-1, rnd.IntN(24)-8))
			}
			x[0], x[1], x[2] = float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())
			if dt == graph.Float8E8M0 {
				for i := range x {
					x[i] = float32(math.Abs(float64(x[i]))) // negative values are undefined for e8m0
				}
			}
			feeds := []session.NamedTensor{{Name: "x", Tensor: session.MustTensor([]int64{rows, cols}, x)}}
			want := make([]float64, len(x)) // the narrow values, not transposed
			for i, v := range x {
				want[i] = narrowDecode(t, dt, session.EncodeNarrow(dt, float64(v), session.NarrowCast{Saturate: sat != 0, RoundMode: "nearest"}))
			}
			runNarrow(t, g, feeds, func(exec string, outs []session.Tensor) {
				y, err := session.TensorOf[float32](outs[0])
				require.NoError(t, err)
				narrow := outs[1].Float64s()
				require.Equal(t, dt, outs[1].DType())
				for r := range rows {
					for c := range cols {
						w, gotN, gotY := want[r*cols+c], narrow[r*cols+c], float64(y[c*rows+r])
						if math.IsNaN(w) {
							assert.True(t, math.IsNaN(gotN) && math.IsNaN(gotY), "%s %s sat %d x=%v", exec, dt, sat, x[r*cols+c])
							continue
						}
						assert.Equal(t, w, gotN, "%s %s sat %d x=%v", exec, dt, sat, x[r*cols+c])
						assert.Equal(t, float64(float32(w)), gotY, "%s %s sat %d x=%v", exec, dt, sat, x[r*cols+c])
					}
				}
			})
		}
	}
}

func narrowDecode(t *testing.T, dt graph.DataType, b byte) float64 {
	gt, err := graph.NewTensor("b", dt, []int64{1}, []byte{b})
	require.NoError(t, err)
	v, err := gt.Float64s()
	require.NoError(t, err)
	return v[0]
}

// Blocked QuantizeLinear to int4 / uint4 / int2 / uint2 with a zero point, and
// DequantizeLinear back, against the formula computed here: y = clamp(round_even(x / s) + zp).
func TestNarrowBlockedQuantization(t *testing.T) {
	rnd := narrowRand(t)
	const rows, cols, block = 4, 6, 4 // blocks of 4 along axis 1: 2 per row, the last one short
	const nb = (cols + block - 1) / block
	for _, dt := range []graph.DataType{graph.Int4, graph.Uint4, graph.Int2, graph.Uint2} {
		lo, hi := 0.0, float64(int(1)<<dt.BitSize()-1)
		if dt == graph.Int4 || dt == graph.Int2 {
			lo, hi = -(hi+1)/2, (hi-1)/2
		}
		scale := make([]float32, rows*nb)
		zp := make([]float64, rows*nb)
		zpRaw := make([]byte, rows*nb)
		for i := range scale {
			scale[i] = 0.05 + rnd.Float32()
			z := lo + float64(rnd.IntN(int(hi-lo)+1))
			zp[i], zpRaw[i] = z, byte(int(z))&byte(1<<dt.BitSize()-1)
		}
		packed := make([]byte, dt.ByteSize(rows*nb))
		per := 8 / dt.BitSize()
		for i, b := range zpRaw {
			packed[i/per] |= b << (dt.BitSize() * (i % per))
		}
		zpt, err := graph.NewTensor("zp", dt, []int64{rows, nb}, packed)
		require.NoError(t, err)
		st := graph.TensorFromFloat32("s", []int64{rows, nb}, scale)
		q := []*graph.Attribute{graph.IntAttr("axis", 1), graph.IntAttr("block_size", block)}
		g := &graph.Graph{Name: "quant_" + dt.String(),
			Inputs:  []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(rows, cols)))},
			Outputs: []*graph.Value{graph.Output("q", graph.Type{}), graph.Output("y", graph.Type{})},
			Nodes: []*graph.Node{graph.NewNode("q", "QuantizeLinear", []string{"x", "s", "zp"}, []string{"q"}, q...),
				graph.NewNode("dq", "DequantizeLinear", []string{"q", "s", "zp"}, []string{"y"}, q...)}}
		g.AddInitializer(zpt)
		g.AddInitializer(st)
		x := make([]float32, rows*cols)
		for i := range x {
			x[i] = float32(rnd.NormFloat64() * 2)
		}
		feeds := []session.NamedTensor{{Name: "x", Tensor: session.MustTensor([]int64{rows, cols}, x)}}
		runNarrow(t, g, feeds, func(exec string, outs []session.Tensor) {
			require.Equal(t, dt, outs[0].DType())
			qv := outs[0].Float64s()
			y, err := session.TensorOf[float32](outs[1])
			require.NoError(t, err)
			for r := range rows {
				for c := range cols {
					i, p := r*cols+c, r*nb+c/block
					want := math.Max(lo, math.Min(hi, math.RoundToEven(float64(x[i]/scale[p]))+zp[p]))
					require.Equal(t, want, qv[i], "%s %s element (%d, %d)", exec, dt, r, c)
					require.InDelta(t, (want-zp[p])*float64(scale[p]), float64(y[i]), 1e-6, "%s %s element (%d, %d)", exec, dt, r, c)
				}
			}
		})
	}
}

// BitCast between the 4-bit types reinterprets the nibble: int4 -1 is uint4 15, and float4e2m1
// 0b1010 (-1) is int4 -6.
func TestNarrowBitCast(t *testing.T) {
	w, err := graph.NewTensor("w", graph.Int4, []int64{3}, []byte{0xF7, 0x0A}) // 7, -1, -6
	require.NoError(t, err)
	g := &graph.Graph{Name: "bitcast",
		Inputs:  []*graph.Value{graph.Input("s", graph.TensorType(graph.Float, graph.Shape{}))},
		Outputs: []*graph.Value{graph.Output("u", graph.Type{}), graph.Output("f", graph.Type{})},
		Nodes: []*graph.Node{graph.NewNode("u", "BitCast", []string{"w"}, []string{"u"}, graph.IntAttr("to", int64(graph.Uint4))),
			graph.NewNode("f", "BitCast", []string{"w"}, []string{"f"}, graph.IntAttr("to", int64(graph.Float4E2M1)))}}
	g.AddInitializer(w)
	m, err := graph.FromGraph(g.Name, g, map[string]int64{"": 26})
	require.NoError(t, err)
	s, err := session.FromGraph(m)
	require.NoError(t, err)
	defer s.Close()
	outs, err := s.Run(context.Background(), []session.NamedTensor{{Name: "s", Tensor: session.MustTensor([]int64{}, []float32{1})}})
	require.NoError(t, err)
	assert.Equal(t, []float64{7, 15, 10}, outs[0].Float64s())
	assert.Equal(t, []float64{6, -6, -1}, outs[1].Float64s())
}

// A tensor of a narrow type made with NewTensor is an input like any other.
func TestNarrowInputs(t *testing.T) {
	g := &graph.Graph{Name: "dq_input",
		Inputs:  []*graph.Value{graph.Input("q", graph.TensorType(graph.Int4, graph.ShapeOf(4))), graph.Input("s", graph.TensorType(graph.Float, graph.Shape{}))},
		Outputs: []*graph.Value{graph.Output("y", graph.Type{})},
		Nodes:   []*graph.Node{graph.NewNode("dq", "DequantizeLinear", []string{"q", "s"}, []string{"y"})}}
	q := session.MustTensor([]int64{4}, []session.Int4{session.ToInt4(-8), session.ToInt4(-1), session.ToInt4(3), session.ToInt4(7)})
	feeds := []session.NamedTensor{{Name: "q", Tensor: q}, {Name: "s", Tensor: session.MustTensor([]int64{}, []float32{0.5})}}
	runNarrow(t, g, feeds, func(exec string, outs []session.Tensor) {
		y, err := session.TensorOf[float32](outs[0])
		require.NoError(t, err)
		assert.Equal(t, []float32{-4, -0.5, 1.5, 3.5}, y, exec)
	})
	assert.Equal(t, graph.Int4, session.DTypeOf[session.Int4]())
	_, err := session.TensorOf[uint8](q)
	require.Error(t, err, "an int4 tensor is not a uint8 one")
}

// Cast refuses a round_mode it does not know, naming the node.
func TestNarrowCastRefusesBadRoundMode(t *testing.T) {
	g := &graph.Graph{Name: "g", Inputs: []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(4)))},
		Outputs: []*graph.Value{graph.Output("y", graph.Type{})},
		Nodes: []*graph.Node{graph.NewNode("c", "Cast", []string{"x"}, []string{"y"}, graph.IntAttr("to", int64(graph.Float8E8M0)),
			graph.StringAttr("round_mode", "sideways"))}}
	m, err := graph.FromGraph("m", g, map[string]int64{"": 25})
	require.NoError(t, err)
	s, err := session.FromGraph(m)
	if err == nil {
		defer s.Close()
		_, err = s.Run(context.Background(), []session.NamedTensor{{Name: "x", Tensor: session.MustTensor([]int64{4}, []float32{1, 2, 3, 4})}})
	}
	require.Error(t, err)
	assert.True(t, errors.Is(err, session.ErrInvalidArgument), "%v", err)
	assert.Contains(t, err.Error(), `"c"`)
	assert.Contains(t, err.Error(), `round_mode "sideways"`)
}
