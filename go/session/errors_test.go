package session

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// A node's failure is an *Error naming the node and its op, on both executors, with the op's
// error as the cause.
func TestRunErrorNamesTheNode(t *testing.T) {
	g := &graph.Graph{Name: "reshape"}
	g.Inputs = []*graph.Value{
		graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("N")})),
		graph.Input("shape", graph.TensorType(graph.Int64, graph.Shape{graph.DimOf(1)})),
	}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.Nodes = []*graph.Node{
		graph.NewNode("double", "Add", []string{"x", "x"}, []string{"xx"}),
		graph.NewNode("rs", "Reshape", []string{"xx", "shape"}, []string{"y"}),
	}
	m, err := graph.FromGraph("reshape", g, map[string]int64{"": 13})
	require.NoError(t, err)
	for _, executor := range traceExecutors {
		t.Run(executor, func(t *testing.T) {
			s, err := FromGraph(m, tracedOptions(nil, executor)...)
			require.NoError(t, err)
			defer s.Close()
			feed := func(n, to int64) []tensor.NamedTensor {
				return []tensor.NamedTensor{{Name: "x", Tensor: tensor.MustTensor([]int64{n}, randomF32(inferRand(), int(n)))}, {Name: "shape", Tensor: tensor.MustTensor([]int64{1}, []int64{to})}}
			}
			for range 2 {
				_, err := s.Run(context.Background(), feed(4, 4))
				require.NoError(t, err)
			}
			_, err = s.Run(context.Background(), feed(6, 4)) // 6 elements cannot take the shape [4]
			require.Error(t, err)
			var e *tensor.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, "rs", e.Node)
			assert.Equal(t, "Reshape", e.OpType)
			assert.Equal(t, "Run", e.Op)
			assert.ErrorIs(t, err, tensor.ErrInvalidArgument)
			assert.NotNil(t, e.Cause, "the op's own error")
			assert.Contains(t, err.Error(), `node "rs" (Reshape): `)
		})
	}
}

// A failure inside a subgraph names the body's node; errors.Is sees both the kind and the
// cause.
func TestRunErrorInsideABody(t *testing.T) {
	e := tensor.NodeError(graph.NewNode("inner", "Gather", nil, nil), errors.New("index 9 out of range"))
	outer := tensor.NodeError(graph.NewNode("loop", "Loop", nil, nil), e)
	var got *tensor.Error
	require.ErrorAs(t, outer, &got)
	assert.Equal(t, "inner", got.Node, "the innermost node is kept")
	assert.Equal(t, "Gather", got.OpType)

	cause := errors.New("device lost")
	dev := tensor.NodeError(graph.NewNode("mm", "MatMul", nil, nil), tensor.WrapError("Run", tensor.ErrFailed, cause, "stream"))
	require.ErrorAs(t, dev, &got)
	assert.Equal(t, "mm", got.Node)
	assert.ErrorIs(t, dev, tensor.ErrFailed, "the kind of the device's error is kept")
	assert.ErrorIs(t, dev, cause)
	assert.Equal(t, `session: Run: session failed: node "mm" (MatMul): stream: device lost`, dev.Error())
}

// The tensor and value constructors fail with *Error matching ErrInvalidArgument.
func TestConstructorErrors(t *testing.T) {
	check := func(err error, what string) {
		t.Helper()
		require.Error(t, err, what)
		var e *tensor.Error
		require.ErrorAs(t, err, &e, what)
		assert.ErrorIs(t, err, tensor.ErrInvalidArgument, what)
		assert.Empty(t, e.Node, what)
	}
	_, err := tensor.NewTensor([]int64{2, 3}, []float32{1, 2})
	check(err, "NewTensor count")
	_, err = tensor.NewTensor([]int64{-1}, []float32{})
	check(err, "NewTensor negative")
	_, err = tensor.TensorOf[int64](tensor.MustTensor([]int64{1}, []float32{1}))
	check(err, "TensorOf type")
	_, err = tensor.TensorOf[float32](tensor.Tensor{})
	check(err, "TensorOf empty")
	_, err = tensor.Zeros(graph.Float, []int64{2, -3})
	check(err, "Zeros negative")
	_, err = tensor.Zeros(graph.Undefined, []int64{2})
	check(err, "Zeros type")
	_, err = tensor.SequenceValue(graph.Float, tensor.MustTensor([]int64{1}, []int64{1}))
	check(err, "SequenceValue type")
	_, err = tensor.OptionalValue(tensor.Value{})
	check(err, "OptionalValue empty")
	_, err = tensor.TensorValue(tensor.Tensor{}).Tensor()
	check(err, "Value.Tensor")
	_, err = tensor.NoneValue(graph.Float).Sequence()
	check(err, "Value.Sequence")
	_, err = tensor.FromGraphTensor(&graph.Tensor{Name: "c", DType: graph.Float, Dims: []int64{2}, Raw: []byte{1}})
	check(err, "FromGraphTensor")
	func() {
		defer func() {
			r := recover()
			err, _ := r.(error)
			check(err, "MustTensor panics with the *Error")
		}()
		tensor.MustTensor([]int64{3}, []float32{1})
	}()
}

// The first invalid LoadOption is the error of the call it was given to.
func TestLoadOptionErrors(t *testing.T) {
	m := func() *graph.Model { return mlpModel(t, randomF32(inferRand(), 2), randomF32(inferRand(), 1), 2, 1) }
	for _, c := range []struct {
		opt LoadOption
		msg string
	}{
		{WithOption("ep.bogus", "1"), `unknown session option "ep.bogus"`},
		{WithOption(OptionRunPlan, "yes"), "must be 0 or 1"},
		{WithExecutionProvider("tpu"), `unknown execution provider "tpu"`},
		{WithIntraOpThreads(-2), "intra-op threads"},
	} {
		_, err := FromGraph(m(), WithExecutionProvider(ProviderHost), c.opt, WithOption(OptionRunPlan, "x"))
		require.Error(t, err)
		assert.ErrorIs(t, err, tensor.ErrInvalidArgument)
		assert.Contains(t, err.Error(), c.msg, "the first invalid option is reported")
		_, err = LoadBytes([]byte("not a model"), c.opt)
		assert.Contains(t, err.Error(), c.msg, "options are checked before the model")
	}
	s, err := FromGraph(m(), nil, WithExecutionProvider(ProviderHost)) // a nil option is ignored
	require.NoError(t, err)
	require.NoError(t, s.Close())
}
