package conformance

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
)

func freshRand() *rand.Rand { return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())) }

// draw makes runs of n values from sample.
func draw(runs, n int, sample func(i int) float64) [][]float64 {
	out := make([][]float64, runs)
	for r := range out {
		out[r] = make([]float64, n)
		for i := range out[r] {
			out[r][i] = sample(i)
		}
	}
	return out
}

func TestBernoulliLawAcceptsDrawsAndRejectsWrongOnes(t *testing.T) {
	rnd := freshRand()
	// Probabilities away from 1/2 in pairs p, 1-p (so drawing with 1-p keeps the mean and only
	// the per-element frequencies can tell), plus the exact ends.
	p := make([]float64, 10)
	for i := range 5 {
		p[i] = 0.05 + 0.2*rnd.Float64()
		if rnd.IntN(2) == 0 {
			p[i] = 1 - p[i]
		}
		p[i+5] = 1 - p[i]
	}
	p[3], p[8] = 0, 1
	law := bernoulliLaw{p: p, of: "x"}
	bern := func(q float64) float64 {
		if rnd.Float64() < q {
			return 1
		}
		return 0
	}
	assert.Empty(t, law.judge(draw(400, 10, func(i int) float64 { return bern(p[i]) }), graph.Float))
	assert.Empty(t, law.judge(draw(1, 10, func(i int) float64 { return bern(p[i]) }), graph.Float), "one seeded run")

	flipped := draw(400, 10, func(i int) float64 { return bern(1 - p[i]) })
	assert.Contains(t, law.judge(flipped, graph.Float), "though p is", "p = 0 drew 1")
	q := append([]float64{}, p...)
	q[3], q[8] = 0.5, 0.5 // lift the exact rules so that the frequencies must catch it
	assert.Contains(t, bernoulliLaw{p: q}.judge(draw(400, 10, func(i int) float64 {
		if i == 3 || i == 8 {
			return bern(0.5)
		}
		return bern(1 - p[i])
	}), graph.Float), "runs, want p")

	bad := draw(1, 10, func(i int) float64 { return bern(p[i]) })
	bad[0][5] = 2
	assert.Contains(t, law.judge(bad, graph.Float), "not 0 or 1")
	// Mostly ones from p around 0.1: the mean check fails even on one large run.
	low := bernoulliLaw{p: []float64{0.1}}
	assert.Contains(t, low.judge(draw(1, 4000, func(int) float64 { return bern(0.3) }), graph.Float), "mean of 4000 draws")
}

func TestUniformLawBounds(t *testing.T) {
	rnd := freshRand()
	lo := rnd.Float64()*4 - 2
	hi := lo + 0.5 + rnd.Float64()*3
	law := uniformLaw{low: lo, high: hi}
	uniform := func(a, b float64) func(int) float64 {
		return func(int) float64 { return float64(float32(a + (b-a)*rnd.Float64())) }
	}
	good := draw(400, 10, uniform(lo, hi))
	for _, run := range good { // float32 rounding may reach hi; the op redraws those
		for i := range run {
			if run[i] >= hi {
				run[i] = lo
			}
		}
	}
	assert.Empty(t, law.judge(good, graph.Float))
	assert.Contains(t, law.judge(draw(400, 10, uniform(lo, lo+0.8*(hi-lo))), graph.Float), "mean")
	narrow := draw(400, 10, func(int) float64 { return (lo+hi)/2 + (hi-lo)/4*(rnd.Float64()-0.5) })
	assert.Contains(t, law.judge(narrow, graph.Double), "variance")
	edge := draw(1, 10, uniform(lo, hi))
	edge[0][4] = hi
	assert.Contains(t, law.judge(edge, graph.Float), "outside")
	constant := draw(1, 10, func(int) float64 { return (lo + hi) / 2 })
	assert.Contains(t, law.judge(constant, graph.Float), "constant")
	// float16 in a range of a few representable values: a constant run is no evidence.
	assert.Empty(t, uniformLaw{low: 1, high: 1.004}.judge([][]float64{{1, 1, 1}}, graph.Float16))
	assert.Less(t, law.coincidence(10, graph.Float), falseFailure)
}

func TestNormalLawBounds(t *testing.T) {
	rnd := freshRand()
	mean, scale := rnd.Float64()*6-3, 0.5+rnd.Float64()*2
	law := normalLaw{mean: mean, scale: scale}
	normal := func(m, s float64) func(int) float64 {
		return func(int) float64 { return float64(float32(m + s*rnd.NormFloat64())) }
	}
	assert.Empty(t, law.judge(draw(400, 10, normal(mean, scale)), graph.Float))
	assert.Empty(t, law.judge(draw(1, 10, normal(mean, scale)), graph.Float), "one seeded run")
	assert.Contains(t, law.judge(draw(400, 10, normal(mean, 1.2*scale)), graph.Float), "standard deviation")
	assert.Contains(t, law.judge(draw(400, 10, normal(mean, 0.8*scale)), graph.Float), "standard deviation")
	assert.Contains(t, law.judge(draw(400, 10, normal(mean+0.3*scale, scale)), graph.Float), "mean")
	assert.Contains(t, law.judge(draw(1, 10, func(int) float64 { return mean + scale/3 }), graph.Float), "constant")
	// Ten values from a scale 30 times too large: the chi-square upper bound or the extremes catch
	// it (such a generator escapes both with probability below 1e-9).
	assert.Contains(t, law.judge(draw(1, 10, normal(mean, 30*scale)), graph.Float), "standard deviation")
	far := draw(1, 10, normal(mean, scale))
	far[0][2] = mean + 50*scale
	assert.Contains(t, law.judge(far, graph.Float), "standard deviations out")
	assert.Contains(t, law.judge([][]float64{{mean, math.NaN()}}, graph.Float), "NaN")
	assert.Empty(t, normalLaw{mean: mean}.judge([][]float64{{float64(float32(mean))}}, graph.Float), "scale 0")
}

func TestMultinomialLawFrequencies(t *testing.T) {
	rnd := freshRand()
	probs := [][]float64{{0.5, 0.3, 0.2, 0}, {0.1, 0.1, 0.1, 0.7}}
	law := multinomialLaw{probs: probs, of: "x"}
	pick := func(p []float64) float64 {
		u := rnd.Float64()
		for k, q := range p {
			if u < q {
				return float64(k)
			}
			u -= q
		}
		return float64(len(p) - 1)
	}
	const samples = 20
	sample := func(ps [][]float64) func(int) float64 {
		return func(i int) float64 { return pick(ps[i/samples]) }
	}
	assert.Empty(t, law.judge(draw(200, 2*samples, sample(probs)), graph.Int64))
	swapped := [][]float64{{0.3, 0.5, 0.2, 0}, probs[1]}
	assert.Contains(t, law.judge(draw(200, 2*samples, sample(swapped)), graph.Int64), "row 0 drew class")
	zero := draw(1, 2*samples, sample(probs))
	zero[0][1] = 3
	assert.Contains(t, law.judge(zero, graph.Int64), "probability is 0")
	zero[0][1] = 4
	assert.Contains(t, law.judge(zero, graph.Int64), "not a class index")
}

func TestDropoutOutputLaw(t *testing.T) {
	rnd := freshRand()
	x := make([]float64, 10)
	for i := range x {
		x[i] = float64(float32(rnd.Float64() + 0.5))
	}
	x[4] = 0 // tells nothing: must stay 0
	law := dropoutOutput{x: x, scale: 4, mask: bernoulliLaw{p: []float64{0.25}}, of: "x"}
	drop := func(keep float64) func(int) float64 {
		return func(i int) float64 {
			if rnd.Float64() < keep {
				return float64(float32(x[i] * 4))
			}
			return 0
		}
	}
	assert.Empty(t, law.judge(draw(400, 10, drop(0.25)), graph.Float))
	assert.Contains(t, law.judge(draw(400, 10, drop(0.75)), graph.Float), "mean")
	wrong := draw(1, 10, drop(0.25))
	wrong[0][2] = x[2] * 2
	assert.Contains(t, law.judge(wrong, graph.Float), "neither 0 nor")
}

// testCase writes a node-test directory: the model, one input and an expected output.
type testCase struct {
	nodes   []*graph.Node
	input   []float32 // x, float; none when nil
	dims    []int64   // x's shape; [len(input)] when nil
	outputs []*expected
}

type expected struct {
	name  string
	dtype graph.DataType
	dims  []int64
	data  []byte // nil: zeros
}

func elementSize(dt graph.DataType) int {
	switch dt {
	case graph.Double, graph.Int64:
		return 8
	case graph.Float, graph.Int32:
		return 4
	case graph.Float16:
		return 2
	}
	return 1
}

// tensorProto encodes a TensorProto: dims, data_type, name and raw_data.
func tensorProto(name string, dt graph.DataType, dims []int64, raw []byte) []byte {
	var b []byte
	for _, d := range dims {
		b = binary.AppendUvarint(append(b, 0x08), uint64(d))
	}
	b = binary.AppendUvarint(append(b, 0x10), uint64(dt))
	b = append(b, field(8, []byte(name))...)
	return append(b, field(9, raw)...)
}

func (c testCase) write(t *testing.T, dir string) string {
	g := &graph.Graph{Name: "random"}
	dims := c.dims
	if dims == nil {
		dims = []int64{int64(len(c.input))}
	}
	if c.input != nil {
		g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(dims...)))}
	}
	for _, o := range c.outputs {
		g.Outputs = append(g.Outputs, graph.Output(o.name, graph.Type{}))
	}
	g.Nodes = c.nodes
	m, err := graph.FromGraph("random", g, map[string]int64{"": 15})
	require.NoError(t, err)
	b, err := m.Marshal()
	m.Close()
	require.NoError(t, err)
	set := filepath.Join(dir, "test_data_set_0")
	require.NoError(t, os.MkdirAll(set, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.onnx"), b, 0o644))
	if c.input != nil {
		require.NoError(t, os.WriteFile(filepath.Join(set, "input_0.pb"), tensorProto("x", graph.Float, dims, float32Bytes(c.input)), 0o644))
	}
	for i, o := range c.outputs {
		n := 1
		for _, d := range o.dims {
			n *= int(d)
		}
		data := o.data
		if data == nil {
			data = make([]byte, n*elementSize(o.dtype))
		}
		require.NoError(t, os.WriteFile(filepath.Join(set, "output_"+string(rune('0'+i))+".pb"), tensorProto(o.name, o.dtype, o.dims, data), 0o644))
	}
	return dir
}

func runCase(t *testing.T, c testCase) Result {
	dir := c.write(t, filepath.Join(t.TempDir(), "test_case"))
	rs := Run([]string{dir}, Options{}, nil)
	require.Len(t, rs, 1)
	return rs[0]
}

// TestRandomModelsJudgedByDistribution runs every random operator through the runner: correct
// types and shapes pass by distribution whatever the expected values; a wrong type or shape, a
// random output the runner cannot derive a law for, and a deterministic output that differs
// fail.
func TestRandomModelsJudgedByDistribution(t *testing.T) {
	rnd := freshRand()
	x := make([]float32, 12)
	for i := range x {
		x[i] = rnd.Float32()
	}
	f, i64 := graph.Float, graph.Int64
	pass := map[string]testCase{
		"uniform double": {nodes: []*graph.Node{graph.NewNode("u", "RandomUniform", nil, []string{"y"},
			graph.IntsAttr("shape", 3, 4), graph.IntAttr("dtype", int64(graph.Double)), graph.FloatAttr("low", -2), graph.FloatAttr("high", 5))},
			outputs: []*expected{{"y", graph.Double, []int64{3, 4}, nil}}},
		"uniform seeded": {nodes: []*graph.Node{graph.NewNode("u", "RandomUniform", nil, []string{"y"},
			graph.IntsAttr("shape", 7), graph.FloatAttr("seed", 3))},
			outputs: []*expected{{"y", f, []int64{7}, nil}}},
		"normal like": {input: x, nodes: []*graph.Node{graph.NewNode("n", "RandomNormalLike", []string{"x"}, []string{"y"},
			graph.FloatAttr("mean", 10), graph.FloatAttr("scale", 0.5))},
			outputs: []*expected{{"y", f, []int64{12}, nil}}},
		"bernoulli bool": {input: x, nodes: []*graph.Node{graph.NewNode("b", "Bernoulli", []string{"x"}, []string{"y"},
			graph.IntAttr("dtype", int64(graph.Bool)))},
			outputs: []*expected{{"y", graph.Bool, []int64{12}, nil}}},
		"multinomial": {input: x, dims: []int64{3, 4}, nodes: []*graph.Node{
			graph.NewNode("m", "Multinomial", []string{"x"}, []string{"y"}, graph.IntAttr("sample_size", 6), graph.IntAttr("dtype", int64(i64)))},
			outputs: []*expected{{"y", i64, []int64{3, 6}, nil}}},
		"less expansion and a value output": {input: x, nodes: []*graph.Node{
			graph.NewNode("u", "RandomUniformLike", []string{"x"}, []string{"u"}),
			graph.NewNode("l", "Less", []string{"u", "x"}, []string{"b"}),
			graph.NewNode("c", "Cast", []string{"b"}, []string{"y"}, graph.IntAttr("to", int64(f))),
			graph.NewNode("i", "Identity", []string{"x"}, []string{"z"})},
			outputs: []*expected{{"y", f, []int64{12}, nil}, {"z", f, []int64{12}, float32Bytes(x)}}},
	}
	on, err := graph.TensorFromValues("", graph.Bool, nil, []float64{1})
	require.NoError(t, err)
	pass["training dropout"] = testCase{input: x, nodes: []*graph.Node{
		graph.NewNode("r", "Constant", nil, []string{"r"}, graph.TensorAttr("value", graph.TensorFromFloat32("", nil, []float32{0.3}))),
		graph.NewNode("t", "Constant", nil, []string{"t"}, graph.TensorAttr("value", on)),
		graph.NewNode("d", "Dropout", []string{"x", "r", "t"}, []string{"y", "z"})},
		outputs: []*expected{{"y", f, []int64{12}, nil}, {"z", graph.Bool, []int64{12}, nil}}}
	for name, c := range pass {
		r := runCase(t, c)
		assert.Equal(t, Pass, r.Status, "%s: %s", name, r.Message)
		assert.Contains(t, r.Message, "checked by distribution", name)
	}
	fail := map[string]struct {
		c    testCase
		want string
	}{
		"shape": {testCase{nodes: []*graph.Node{graph.NewNode("u", "RandomUniform", nil, []string{"y"}, graph.IntsAttr("shape", 3, 4))},
			outputs: []*expected{{"y", f, []int64{4, 3}, nil}}}, "shape [3 4], want [4 3]"},
		"type": {testCase{nodes: []*graph.Node{graph.NewNode("u", "RandomUniform", nil, []string{"y"}, graph.IntsAttr("shape", 3, 4))},
			outputs: []*expected{{"y", graph.Double, []int64{3, 4}, nil}}}, "element type float, want double"},
		"underived": {testCase{input: x, nodes: []*graph.Node{
			graph.NewNode("u", "RandomUniformLike", []string{"x"}, []string{"u"}),
			graph.NewNode("a", "Add", []string{"u", "x"}, []string{"y"})},
			outputs: []*expected{{"y", f, []int64{12}, nil}}}, "cannot judge by distribution"},
		"value output": {testCase{input: x, nodes: []*graph.Node{
			graph.NewNode("u", "RandomUniformLike", []string{"x"}, []string{"y"}),
			graph.NewNode("i", "Identity", []string{"x"}, []string{"z"})},
			outputs: []*expected{{"y", f, []int64{12}, nil}, {"z", f, []int64{12}, nil}}}, "output 1 (z): 12 of 12 elements differ"},
	}
	for name, c := range fail {
		r := runCase(t, c.c)
		assert.Equal(t, Fail, r.Status, name)
		assert.Contains(t, r.Message, c.want, name)
	}
}

func float32Bytes(v []float32) []byte {
	raw := make([]byte, 0, 4*len(v))
	for _, x := range v {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(x))
	}
	return raw
}

// TestNodeRandomTestsPassByDistribution runs libonnx-testdata's random-op tests, when
// installed.
func TestNodeRandomTestsPassByDistribution(t *testing.T) {
	if _, err := os.Stat(nodeTests); err != nil {
		t.Skipf("%s is absent: %v", nodeTests, err)
	}
	tests, err := Discover([]string{nodeTests})
	require.NoError(t, err)
	rs := Run(tests, Options{Filter: regexp.MustCompile(`^test_(bernoulli|training_dropout)`)}, nil)
	require.NotEmpty(t, rs)
	for _, r := range rs {
		assert.Equal(t, Pass, r.Status, "%s: %s", r.Name, r.Message)
		assert.Contains(t, r.Message, "checked by distribution", r.Name)
	}
}
