package session

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops/movement"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

func seqType(elem graph.Type) graph.Type { return graph.Type{Kind: graph.KindSequence, Inner: &elem} }

func optType(inner graph.Type) graph.Type { return graph.Type{Kind: graph.KindOptional, Inner: &inner} }

var floatSeq = seqType(graph.UnrankedTensor(graph.Float))

// valueSession builds a host session over a graph of the given inputs, outputs and nodes at
// opset 18, closed when the test ends.
func valueSession(t *testing.T, inputs, outputs []*graph.Value, nodes []*graph.Node, inits ...*graph.Tensor) *InferenceSession {
	t.Helper()
	g := &graph.Graph{Name: "values", Inputs: inputs, Outputs: outputs, Nodes: nodes}
	for _, in := range inits {
		g.AddInitializer(in)
	}
	m, err := graph.FromGraph("values", g, map[string]int64{"": 18})
	require.NoError(t, err)
	s, err := FromGraph(m, WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// randomSeq is a sequence of 2..6 float tensors [2, c_i] with random widths and values.
func randomSeq(rnd *rand.Rand) []tensor.Tensor {
	elems := make([]tensor.Tensor, 2+rnd.IntN(5))
	for i := range elems {
		c := int64(1 + rnd.IntN(4))
		elems[i] = tensor.MustTensor([]int64{2, c}, randomF32(rnd, int(2*c)))
	}
	return elems
}

func mustSeq(t *testing.T, dtype tensor.DType, elems ...tensor.Tensor) tensor.Value {
	t.Helper()
	v, err := tensor.SequenceValue(dtype, elems...)
	require.NoError(t, err)
	return v
}

func i64Scalar(v int64) tensor.Tensor { return tensor.MustTensor([]int64{}, []int64{v}) }

// assertSeq checks that v is a sequence of exactly the tensors want (same shapes and elements).
func assertSeq(t *testing.T, want []tensor.Tensor, v tensor.Value, msg string) {
	t.Helper()
	got, err := v.Sequence()
	require.NoError(t, err, msg)
	require.Len(t, got, len(want), msg)
	for i := range want {
		assert.Equal(t, want[i].Shape(), got[i].Shape(), "%s element %d", msg, i)
		assert.Equal(t, want[i].Data(), got[i].Data(), "%s element %d", msg, i)
	}
}

// TestSequenceOpsMatchSlices runs SequenceLength, SequenceAt, SequenceInsert, SequenceErase and
// ConcatFromSequence on a random sequence at random (also negative) positions and compares
// them with the same edits on a Go slice.
func TestSequenceOpsMatchSlices(t *testing.T) {
	rnd := inferRand()
	elems := randomSeq(rnd)
	n := len(elems)
	extra := tensor.MustTensor([]int64{2, 3}, randomF32(rnd, 6))
	at := int64(rnd.IntN(2*n) - n)    // [-n, n-1]
	ins := int64(rnd.IntN(2*n+1) - n) // [-n, n]
	erase := int64(rnd.IntN(2*n) - n) // [-n, n-1]
	norm := func(p int64) int {
		if p < 0 {
			p += int64(n)
		}
		return int(p)
	}
	s := valueSession(t,
		[]*graph.Value{graph.Input("s", floatSeq), graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(2, 3))),
			graph.Input("at", graph.TensorType(graph.Int64, graph.Shape{})), graph.Input("ins", graph.TensorType(graph.Int64, graph.Shape{})),
			graph.Input("erase", graph.TensorType(graph.Int64, graph.Shape{}))},
		[]*graph.Value{graph.Output("len", graph.Type{}), graph.Output("elem", graph.Type{}), graph.Output("inserted", graph.Type{}),
			graph.Output("appended", graph.Type{}), graph.Output("erased", graph.Type{}), graph.Output("popped", graph.Type{}),
			graph.Output("cat", graph.Type{}), graph.Output("same", graph.Type{})},
		[]*graph.Node{
			graph.NewNode("len", "SequenceLength", []string{"s"}, []string{"len"}),
			graph.NewNode("at", "SequenceAt", []string{"s", "at"}, []string{"elem"}),
			graph.NewNode("ins", "SequenceInsert", []string{"s", "x", "ins"}, []string{"inserted"}),
			graph.NewNode("app", "SequenceInsert", []string{"s", "x"}, []string{"appended"}),
			graph.NewNode("erase", "SequenceErase", []string{"s", "erase"}, []string{"erased"}),
			graph.NewNode("pop", "SequenceErase", []string{"s"}, []string{"popped"}),
			graph.NewNode("cat", "ConcatFromSequence", []string{"s"}, []string{"cat"}, graph.IntAttr("axis", -1)),
			graph.NewNode("id", "Identity", []string{"s"}, []string{"same"}),
		})
	outs, err := s.RunValues(context.Background(), []tensor.NamedValue{
		{Name: "s", Value: mustSeq(t, graph.Float, elems...)}, {Name: "x", Value: tensor.TensorValue(extra)},
		{Name: "at", Value: tensor.TensorValue(i64Scalar(at))}, {Name: "ins", Value: tensor.TensorValue(i64Scalar(ins))}, {Name: "erase", Value: tensor.TensorValue(i64Scalar(erase))},
	})
	require.NoError(t, err)
	require.Len(t, outs, 8)

	l, err := outs[0].Tensor()
	require.NoError(t, err)
	assert.Equal(t, []int64{int64(n)}, l.Data())
	e, err := outs[1].Tensor()
	require.NoError(t, err)
	assert.Equal(t, elems[norm(at)].Data(), e.Data())

	p := int(ins) // the insertion position, in [0, n-1]
	if p < 0 {
		p += n
	}
	want := append(append(append([]tensor.Tensor{}, elems[:p]...), extra), elems[p:]...)
	assertSeq(t, want, outs[2], "SequenceInsert")
	assertSeq(t, append(append([]tensor.Tensor{}, elems...), extra), outs[3], "SequenceInsert without position")
	q := norm(erase)
	assertSeq(t, append(append([]tensor.Tensor{}, elems[:q]...), elems[q+1:]...), outs[4], "SequenceErase")
	assertSeq(t, elems[:n-1], outs[5], "SequenceErase without position")
	assertSeq(t, elems, outs[7], "Identity")

	// ConcatFromSequence along the last axis: row r is the rows r of the elements in turn.
	var rows [2][]float32
	width := int64(0)
	for _, el := range elems {
		v := el.Data().([]float32)
		c := int(el.Shape()[1])
		rows[0] = append(rows[0], v[:c]...)
		rows[1] = append(rows[1], v[c:]...)
		width += int64(c)
	}
	cat, err := outs[6].Tensor()
	require.NoError(t, err)
	assert.Equal(t, []int64{2, width}, cat.Shape())
	assert.Equal(t, append(rows[0], rows[1]...), cat.Data())

	// The input sequence was not changed by the edits.
	assertSeq(t, elems, outs[7], "input after the edits")

	// Positions out of range are refused naming the node.
	_, err = s.RunValues(context.Background(), []tensor.NamedValue{
		{Name: "s", Value: mustSeq(t, graph.Float, elems...)}, {Name: "x", Value: tensor.TensorValue(extra)},
		{Name: "at", Value: tensor.TensorValue(i64Scalar(int64(n)))}, {Name: "ins", Value: tensor.TensorValue(i64Scalar(ins))}, {Name: "erase", Value: tensor.TensorValue(i64Scalar(erase))},
	})
	assert.ErrorContains(t, err, `node "at"`)
	assert.ErrorContains(t, err, "out of range")
}

// TestSplitToSequenceAndConcat splits a random matrix every way SplitToSequence allows and
// checks the pieces, and that ConcatFromSequence (stacking for keepdims 0) rebuilds it.
func TestSplitToSequenceAndConcat(t *testing.T) {
	rnd := inferRand()
	rows, cols := int64(2+rnd.IntN(4)), int64(3+rnd.IntN(4))
	xv := randomF32(rnd, int(rows*cols))
	x := tensor.MustTensor([]int64{rows, cols}, xv)
	chunk := int64(2)
	first := int64(1 + rnd.IntN(int(cols-1)))
	sizes := []int64{first, cols - first}
	s := valueSession(t,
		[]*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(rows, cols)))},
		[]*graph.Value{graph.Output("rows", graph.Type{}), graph.Output("chunks", graph.Type{}), graph.Output("parts", graph.Type{}),
			graph.Output("stacked", graph.Type{}), graph.Output("joined", graph.Type{})},
		[]*graph.Node{
			graph.NewNode("rows", "SplitToSequence", []string{"x"}, []string{"rows"}, graph.IntAttr("keepdims", 0)),
			graph.NewNode("chunks", "SplitToSequence", []string{"x", "chunk"}, []string{"chunks"}, graph.IntAttr("axis", 1)),
			graph.NewNode("parts", "SplitToSequence", []string{"x", "sizes"}, []string{"parts"}, graph.IntAttr("axis", -1)),
			graph.NewNode("stack", "ConcatFromSequence", []string{"rows"}, []string{"stacked"}, graph.IntAttr("axis", 0), graph.IntAttr("new_axis", 1)),
			graph.NewNode("join", "ConcatFromSequence", []string{"chunks"}, []string{"joined"}, graph.IntAttr("axis", 1)),
		},
		graph.TensorFromInt64("chunk", nil, []int64{chunk}), graph.TensorFromInt64("sizes", []int64{2}, sizes))
	outs, err := s.RunValues(context.Background(), []tensor.NamedValue{{Name: "x", Value: tensor.TensorValue(x)}})
	require.NoError(t, err)

	var wantRows []tensor.Tensor
	for r := range rows {
		wantRows = append(wantRows, tensor.MustTensor([]int64{cols}, xv[r*cols:(r+1)*cols]))
	}
	assertSeq(t, wantRows, outs[0], "keepdims 0")
	columns := func(from, n int64) tensor.Tensor {
		v := make([]float32, 0, rows*n)
		for r := range rows {
			v = append(v, xv[r*cols+from:r*cols+from+n]...)
		}
		return tensor.MustTensor([]int64{rows, n}, v)
	}
	var wantChunks []tensor.Tensor
	for c := int64(0); c < cols; c += chunk {
		wantChunks = append(wantChunks, columns(c, min(chunk, cols-c)))
	}
	assertSeq(t, wantChunks, outs[1], "scalar split")
	assertSeq(t, []tensor.Tensor{columns(0, first), columns(first, cols-first)}, outs[2], "1-D split")
	for i, name := range []string{"stacked", "joined"} {
		got, err := outs[3+i].Tensor()
		require.NoError(t, err, name)
		assert.Equal(t, []int64{rows, cols}, got.Shape(), name)
		assert.Equal(t, xv, got.Data(), name)
	}
}

func TestSequenceEmptyConstructAndTypeErrors(t *testing.T) {
	rnd := inferRand()
	a, b := tensor.MustTensor([]int64{3}, randomF32(rnd, 3)), tensor.MustTensor([]int64{1, 2}, randomF32(rnd, 2))
	s := valueSession(t,
		[]*graph.Value{graph.Input("a", graph.UnrankedTensor(graph.Float)), graph.Input("b", graph.Type{})},
		[]*graph.Value{graph.Output("empty", graph.Type{}), graph.Output("n", graph.Type{}), graph.Output("pair", graph.Type{})},
		[]*graph.Node{
			graph.NewNode("empty", "SequenceEmpty", nil, []string{"empty"}, graph.IntAttr("dtype", int64(graph.Int64))),
			graph.NewNode("len", "SequenceLength", []string{"empty"}, []string{"n"}),
			graph.NewNode("pair", "SequenceConstruct", []string{"a", "b"}, []string{"pair"}),
		})
	outs, err := s.RunValues(context.Background(), []tensor.NamedValue{{Name: "a", Value: tensor.TensorValue(a)}, {Name: "b", Value: tensor.TensorValue(b)}})
	require.NoError(t, err)
	assert.Equal(t, tensor.ValueSequence, outs[0].Kind())
	assert.Equal(t, graph.Int64, outs[0].ElemType())
	empty, err := outs[0].Sequence()
	require.NoError(t, err)
	assert.Empty(t, empty)
	n, err := outs[1].Tensor()
	require.NoError(t, err)
	assert.Equal(t, []int64{0}, n.Data())
	assertSeq(t, []tensor.Tensor{a, b}, outs[2], "SequenceConstruct")

	// Construct refuses mixed element types, naming the node.
	_, err = s.RunValues(context.Background(), []tensor.NamedValue{{Name: "a", Value: tensor.TensorValue(a)}, {Name: "b", Value: tensor.TensorValue(tensor.MustTensor([]int64{1}, []int64{7}))}})
	assert.ErrorContains(t, err, `node "pair"`)
	assert.ErrorContains(t, err, "input 1 has element type int64")
}

// TestSequenceGivenToTensorOp checks that a tensor operator handed a sequence fails naming the
// node and the input, without running it.
func TestSequenceGivenToTensorOp(t *testing.T) {
	rnd := inferRand()
	s := valueSession(t,
		[]*graph.Value{graph.Input("s", graph.Type{}), graph.Input("x", graph.UnrankedTensor(graph.Float))},
		[]*graph.Value{graph.Output("y", graph.Type{})},
		[]*graph.Node{graph.NewNode("add", "Add", []string{"s", "x"}, []string{"y"})})
	x := tensor.MustTensor([]int64{2}, randomF32(rnd, 2))
	_, err := s.RunValues(context.Background(), []tensor.NamedValue{{Name: "s", Value: mustSeq(t, graph.Float, x)}, {Name: "x", Value: tensor.TensorValue(x)}})
	require.Error(t, err)
	assert.ErrorContains(t, err, `node "add" (Add): input 0 ("s") is a sequence`)
	assert.ErrorContains(t, err, "tensors only")
	_, err = s.RunValues(context.Background(), []tensor.NamedValue{{Name: "s", Value: tensor.NoneValue(graph.Float)}, {Name: "x", Value: tensor.TensorValue(x)}})
	assert.ErrorContains(t, err, "is an optional")
}

func TestOptionalOps(t *testing.T) {
	rnd := inferRand()
	x := tensor.MustTensor([]int64{2, 2}, randomF32(rnd, 4))
	tensorOpt := optType(graph.UnrankedTensor(graph.Float))
	s := valueSession(t,
		[]*graph.Value{graph.Input("x", graph.UnrankedTensor(graph.Float)), graph.Input("o", tensorOpt)},
		[]*graph.Value{graph.Output("wrapped", graph.Type{}), graph.Output("has", graph.Type{}), graph.Output("got", graph.Type{}),
			graph.Output("none", graph.Type{}), graph.Output("has_none", graph.Type{}), graph.Output("has_o", graph.Type{}),
			graph.Output("o_out", graph.Type{})},
		[]*graph.Node{
			graph.NewNode("wrap", "Optional", []string{"x"}, []string{"wrapped"}),
			graph.NewNode("has", "OptionalHasElement", []string{"wrapped"}, []string{"has"}),
			graph.NewNode("get", "OptionalGetElement", []string{"wrapped"}, []string{"got"}),
			graph.NewNode("none", "Optional", nil, []string{"none"}, &graph.Attribute{Name: "type", Type: graph.AttrTypeProto, TypeProto: &graph.Type{Kind: graph.KindTensor, Elem: graph.Int32}}),
			graph.NewNode("has_none", "OptionalHasElement", []string{"none"}, []string{"has_none"}),
			graph.NewNode("has_o", "OptionalHasElement", []string{"o"}, []string{"has_o"}),
			graph.NewNode("o_id", "Identity", []string{"o"}, []string{"o_out"}),
		})
	check := func(outs []tensor.Value, oHas bool) {
		t.Helper()
		assert.Equal(t, tensor.ValueOptional, outs[0].Kind())
		inner, ok := outs[0].Element()
		require.True(t, ok)
		got, err := inner.Tensor()
		require.NoError(t, err)
		assert.Equal(t, x.Data(), got.Data())
		for i, want := range map[int]bool{1: true, 4: false, 5: oHas} {
			b, err := outs[i].Tensor()
			require.NoError(t, err)
			assert.Equal(t, []bool{want}, b.Data(), "output %d", i)
		}
		g, err := outs[2].Tensor()
		require.NoError(t, err)
		assert.Equal(t, x.Data(), g.Data())
		assert.True(t, outs[3].IsNone())
		assert.Equal(t, graph.Int32, outs[3].ElemType())
		assert.Equal(t, !oHas, outs[6].IsNone())
	}
	// o fed none, fed holding a tensor, fed a bare tensor (an optional holding it), not fed.
	outs, err := s.RunValues(context.Background(), []tensor.NamedValue{{Name: "x", Value: tensor.TensorValue(x)}, {Name: "o", Value: tensor.NoneValue(graph.Float)}})
	require.NoError(t, err)
	check(outs, false)
	held, err := tensor.OptionalValue(tensor.TensorValue(x))
	require.NoError(t, err)
	outs, err = s.RunValues(context.Background(), []tensor.NamedValue{{Name: "x", Value: tensor.TensorValue(x)}, {Name: "o", Value: held}})
	require.NoError(t, err)
	check(outs, true)
	outs, err = s.RunValues(context.Background(), []tensor.NamedValue{{Name: "x", Value: tensor.TensorValue(x)}, {Name: "o", Value: tensor.TensorValue(x)}})
	require.NoError(t, err)
	check(outs, true)
	outs, err = s.RunValues(context.Background(), []tensor.NamedValue{{Name: "x", Value: tensor.TensorValue(x)}})
	require.NoError(t, err)
	check(outs, false)

	// The optional's content is checked against the declared element type.
	_, err = s.RunValues(context.Background(), []tensor.NamedValue{{Name: "x", Value: tensor.TensorValue(x)}, {Name: "o", Value: tensor.TensorValue(tensor.MustTensor([]int64{1}, []int64{1}))}})
	assert.ErrorContains(t, err, `input "o": optional content: element type int64`)

	// Opset 18 takes a tensor as an optional that holds it (the model checker here refuses
	// that at opset 18, so the host function is called directly); an omitted input is none.
	for _, c := range []struct {
		in   []tensor.Tensor
		want bool
	}{{[]tensor.Tensor{x}, true}, {[]tensor.Tensor{{}}, false}, {nil, false}} {
		has, err := movement.OpOptionalHasElement(testRunCtx(nil, 18), graph.NewNode("h", "OptionalHasElement", nil, []string{"y"}), c.in)
		require.NoError(t, err)
		assert.Equal(t, []bool{c.want}, has[0].Data())
	}
	got, err := movement.OpOptionalGetElement(testRunCtx(nil, 18), graph.NewNode("g", "OptionalGetElement", nil, []string{"y"}), []tensor.Tensor{x})
	require.NoError(t, err)
	assert.Equal(t, x.Data(), got[0].Data())

	// OptionalGetElement of none fails naming the node.
	g := valueSession(t, []*graph.Value{graph.Input("o", tensorOpt)}, []*graph.Value{graph.Output("y", graph.Type{})},
		[]*graph.Node{graph.NewNode("get", "OptionalGetElement", []string{"o"}, []string{"y"})})
	_, err = g.RunValues(context.Background(), []tensor.NamedValue{{Name: "o", Value: tensor.NoneValue(graph.Float)}})
	assert.ErrorContains(t, err, `node "get"`)
	assert.ErrorContains(t, err, "empty")
}

// TestSequenceMapMatchesLoop maps Add over a random sequence with a tensor and over two
// sequences, with the body reading an outer initializer, and compares with Go.
func TestSequenceMapMatchesLoop(t *testing.T) {
	rnd := inferRand()
	l := int64(1 + rnd.IntN(5))
	k := 1 + rnd.IntN(5)
	wv, bias := randomF32(rnd, int(l)), randomF32(rnd, int(l))
	vec := graph.TensorType(graph.Float, graph.Shape{graph.SymDim("L")})
	body := &graph.Graph{Name: "body",
		Inputs:  []*graph.Value{graph.Input("a", vec), graph.Input("b", vec), graph.Input("c", vec)},
		Outputs: []*graph.Value{graph.Output("sum", vec), graph.Output("echo", vec)},
		Nodes: []*graph.Node{
			graph.NewNode("ab", "Add", []string{"a", "b"}, []string{"ab"}),
			graph.NewNode("abc", "Add", []string{"ab", "c"}, []string{"abc"}),
			graph.NewNode("w", "Mul", []string{"abc", "w"}, []string{"sum"}),
			graph.NewNode("echo", "Identity", []string{"c"}, []string{"echo"}),
		}}
	s := valueSession(t,
		[]*graph.Value{graph.Input("xs", seqType(vec)), graph.Input("bias", vec), graph.Input("ys", seqType(vec))},
		[]*graph.Value{graph.Output("sums", graph.Type{}), graph.Output("echoes", graph.Type{})},
		[]*graph.Node{graph.NewNode("map", "SequenceMap", []string{"xs", "bias", "ys"}, []string{"sums", "echoes"},
			&graph.Attribute{Name: "body", Type: graph.AttrGraph, Graph: body})},
		graph.TensorFromFloat32("w", []int64{l}, wv))
	var xs, ys, want []tensor.Tensor
	for range k {
		x, y := randomF32(rnd, int(l)), randomF32(rnd, int(l))
		xs, ys = append(xs, tensor.MustTensor([]int64{l}, x)), append(ys, tensor.MustTensor([]int64{l}, y))
		sum := make([]float32, l)
		for i := range sum {
			sum[i] = (x[i] + bias[i] + y[i]) * wv[i]
		}
		want = append(want, tensor.MustTensor([]int64{l}, sum))
	}
	outs, err := s.RunValues(context.Background(), []tensor.NamedValue{{Name: "xs", Value: mustSeq(t, graph.Float, xs...)}, {Name: "bias", Value: tensor.TensorValue(tensor.MustTensor([]int64{l}, bias))}, {Name: "ys", Value: mustSeq(t, graph.Float, ys...)}})
	require.NoError(t, err)
	got, err := outs[0].Sequence()
	require.NoError(t, err)
	require.Len(t, got, k)
	for i := range want {
		assert.InDeltaSlice(t, want[i].Data(), got[i].Data(), 1e-6, "element %d", i)
	}
	assertSeq(t, ys, outs[1], "echo")
	assert.Equal(t, int64(k), s.ControlFlowStats().SequenceMap.Runs)

	// Sequences of different lengths are refused, naming the node.
	_, err = s.RunValues(context.Background(), []tensor.NamedValue{{Name: "xs", Value: mustSeq(t, graph.Float, xs...)}, {Name: "bias", Value: tensor.TensorValue(tensor.MustTensor([]int64{l}, bias))}, {Name: "ys", Value: mustSeq(t, graph.Float, append(ys, ys[0])...)}})
	assert.ErrorContains(t, err, `node "map"`)
	assert.ErrorContains(t, err, "elements")
}

// TestLoopAndIfCarrySequences grows a sequence in a Loop (element i is x[:i+1]) and returns a
// sequence or an optional from If branches.
func TestLoopAndIfCarrySequences(t *testing.T) {
	rnd := inferRand()
	l := int64(2 + rnd.IntN(5))
	trips := 1 + rnd.IntN(int(l))
	xv := randomF32(rnd, int(l))
	body := &graph.Graph{Name: "body",
		Inputs: []*graph.Value{graph.Input("i", graph.TensorType(graph.Int64, graph.Shape{})), graph.Input("c", graph.TensorType(graph.Bool, graph.Shape{})),
			graph.Input("acc", floatSeq)},
		Outputs: []*graph.Value{graph.Output("c_out", graph.Type{}), graph.Output("acc_out", floatSeq)},
		Nodes: []*graph.Node{
			graph.NewNode("keep", "Identity", []string{"c"}, []string{"c_out"}),
			graph.NewNode("end", "Add", []string{"i", "one"}, []string{"end"}),
			graph.NewNode("end1", "Unsqueeze", []string{"end", "zero"}, []string{"end1"}),
			graph.NewNode("slice", "Slice", []string{"x", "zero", "end1"}, []string{"piece"}),
			graph.NewNode("push", "SequenceInsert", []string{"acc", "piece"}, []string{"acc_out"}),
		}}
	body.AddInitializer(graph.TensorFromInt64("one", nil, []int64{1}))
	body.AddInitializer(graph.TensorFromInt64("zero", []int64{1}, []int64{0}))
	then := &graph.Graph{Name: "then", Outputs: []*graph.Value{graph.Output("t", graph.Type{})},
		Nodes: []*graph.Node{graph.NewNode("wrap", "Optional", []string{"grown"}, []string{"t"})}}
	els := &graph.Graph{Name: "else", Outputs: []*graph.Value{graph.Output("e", graph.Type{})},
		Nodes: []*graph.Node{graph.NewNode("nothing", "Optional", nil, []string{"e"},
			&graph.Attribute{Name: "type", Type: graph.AttrTypeProto, TypeProto: &floatSeq})}}
	s := valueSession(t,
		[]*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(l))), graph.Input("n", graph.TensorType(graph.Int64, graph.Shape{})),
			graph.Input("flag", graph.TensorType(graph.Bool, graph.Shape{}))},
		[]*graph.Value{graph.Output("grown", floatSeq), graph.Output("maybe", optType(floatSeq))},
		[]*graph.Node{
			graph.NewNode("start", "SequenceEmpty", nil, []string{"start"}),
			graph.NewNode("loop", "Loop", []string{"n", "", "start"}, []string{"grown"}, &graph.Attribute{Name: "body", Type: graph.AttrGraph, Graph: body}),
			graph.NewNode("if", "If", []string{"flag"}, []string{"maybe"},
				&graph.Attribute{Name: "then_branch", Type: graph.AttrGraph, Graph: then}, &graph.Attribute{Name: "else_branch", Type: graph.AttrGraph, Graph: els}),
		})
	var want []tensor.Tensor
	for i := range trips {
		want = append(want, tensor.MustTensor([]int64{int64(i + 1)}, xv[:i+1]))
	}
	for _, flag := range []bool{true, false} {
		outs, err := s.RunValues(context.Background(), []tensor.NamedValue{{Name: "x", Value: tensor.TensorValue(tensor.MustTensor([]int64{l}, xv))}, {Name: "n", Value: tensor.TensorValue(i64Scalar(int64(trips)))},
			{Name: "flag", Value: tensor.TensorValue(tensor.MustTensor([]int64{}, []bool{flag}))}})
		require.NoError(t, err)
		assertSeq(t, want, outs[0], "Loop")
		assert.Equal(t, tensor.ValueOptional, outs[1].Kind())
		inner, ok := outs[1].Element()
		assert.Equal(t, flag, ok)
		if flag {
			assertSeq(t, want, inner, "If then")
		}
	}
	assert.Equal(t, []IOMeta{{Name: "grown", DType: graph.Float, Shape: graph.Shape{}, Kind: tensor.ValueSequence},
		{Name: "maybe", DType: graph.Float, Shape: graph.Shape{}, Kind: tensor.ValueOptional, Holds: tensor.ValueSequence}}, s.Outputs())

	// Run cannot return the sequence and says where to go instead.
	_, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{l}, xv)}, {Name: "n", Tensor: i64Scalar(1)}, {Name: "flag", Tensor: tensor.MustTensor([]int64{}, []bool{true})}})
	assert.ErrorContains(t, err, `output "grown" is seq(tensor(float))`)
	assert.ErrorContains(t, err, "RunValues")
}

func TestRunValuesInputErrors(t *testing.T) {
	rnd := inferRand()
	x := tensor.MustTensor([]int64{3}, randomF32(rnd, 3))
	s := valueSession(t,
		[]*graph.Value{graph.Input("s", seqType(graph.TensorType(graph.Float, graph.Shape{graph.SymDim("N")}))),
			graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(3)))},
		[]*graph.Value{graph.Output("n", graph.Type{}), graph.Output("y", graph.Type{})},
		[]*graph.Node{graph.NewNode("len", "SequenceLength", []string{"s"}, []string{"n"}),
			graph.NewNode("neg", "Neg", []string{"x"}, []string{"y"})})
	assert.Equal(t, tensor.ValueSequence, s.Inputs()[0].Kind)
	assert.Equal(t, graph.Float, s.Inputs()[0].DType)
	assert.Equal(t, tensor.ValueTensor, s.Inputs()[1].Kind)

	ok := []tensor.NamedValue{{Name: "s", Value: mustSeq(t, graph.Float, x, x)}, {Name: "x", Value: tensor.TensorValue(x)}}
	outs, err := s.RunValues(context.Background(), ok)
	require.NoError(t, err)
	n, err := outs[0].Tensor()
	require.NoError(t, err)
	assert.Equal(t, []int64{2}, n.Data())
	_, err = outs[0].Sequence()
	assert.ErrorContains(t, err, "not a sequence")

	cases := []struct {
		name  string
		feeds []tensor.NamedValue
		want  string
	}{
		{"tensor for a sequence", []tensor.NamedValue{{Name: "s", Value: tensor.TensorValue(x)}, {Name: "x", Value: tensor.TensorValue(x)}}, `input "s": a tensor was fed, the model wants seq(tensor(float)[N])`},
		{"sequence for a tensor", []tensor.NamedValue{ok[0], {Name: "x", Value: mustSeq(t, graph.Float, x)}}, `input "x": a sequence`},
		{"wrong element type", []tensor.NamedValue{{Name: "s", Value: mustSeq(t, graph.Int64, tensor.MustTensor([]int64{1}, []int64{4}))}, ok[1]}, `input "s": a sequence of int64 was fed`},
		{"missing sequence", []tensor.NamedValue{ok[1]}, `missing input "s" (seq(tensor(float)[N]))`},
		{"missing tensor", []tensor.NamedValue{ok[0]}, `missing input "x"`},
		{"empty value", []tensor.NamedValue{ok[0], {Name: "x", Value: tensor.Value{}}}, `input "x": empty`},
		{"unknown name", append(append([]tensor.NamedValue{}, ok...), tensor.NamedValue{Name: "z", Value: tensor.TensorValue(x)}), `no input named "z"`},
		{"twice", append(append([]tensor.NamedValue{}, ok...), ok[0]), `input "s" fed twice`},
	}
	for _, c := range cases {
		_, err := s.RunValues(context.Background(), c.feeds)
		assert.ErrorContains(t, err, c.want, c.name)
	}
	_, err = s.Run(context.Background(), []tensor.NamedTensor{{Name: "s", Tensor: x}, {Name: "x", Tensor: x}})
	assert.ErrorContains(t, err, "RunValues", "Run with a sequence input")
}

func TestSequenceAndOptionalValues(t *testing.T) {
	rnd := inferRand()
	x := tensor.MustTensor([]int64{2}, randomF32(rnd, 2))
	_, err := tensor.SequenceValue(graph.Float, x, tensor.MustTensor([]int64{1}, []int64{1}))
	assert.ErrorContains(t, err, "element 1 has element type int64")
	_, err = tensor.SequenceValue(graph.Float, tensor.Tensor{})
	assert.ErrorContains(t, err, "element 0 is not a tensor")
	_, err = tensor.SequenceValue(graph.Undefined)
	assert.Error(t, err)
	seq := mustSeq(t, graph.Float, x)
	opt, err := tensor.OptionalValue(seq)
	require.NoError(t, err)
	_, err = tensor.OptionalValue(opt)
	assert.ErrorContains(t, err, "optional of an optional")
	_, err = tensor.OptionalValue(tensor.Value{})
	assert.Error(t, err)
	_, err = opt.Tensor()
	assert.ErrorContains(t, err, "not a tensor")
	inner, ok := opt.Element()
	require.True(t, ok)
	assert.Equal(t, tensor.ValueSequence, inner.Kind())
	assert.False(t, opt.IsNone())
	assert.True(t, tensor.NoneValue(graph.Float).IsNone())
	_, ok = tensor.TensorValue(x).Element()
	assert.False(t, ok)
	assert.Equal(t, "optional(seq(tensor(float)) of 1)", opt.String())

	// Sequence hands out a copy of the element list.
	elems, err := seq.Sequence()
	require.NoError(t, err)
	elems[0] = tensor.Tensor{}
	again, err := seq.Sequence()
	require.NoError(t, err)
	assert.True(t, again[0].IsValid())
}
