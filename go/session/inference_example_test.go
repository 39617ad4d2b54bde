package session_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session"
)

// ExampleLoad loads an ONNX model, runs it in a context with a deadline and reads its
// output.
func ExampleLoad() {
	s, err := session.Load("testdata/models/tiny_encoder.onnx",
		session.WithExecutionProvider(session.ProviderHost), session.WithIntraOpThreads(1))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	in, out := s.Inputs()[0], s.Outputs()[0]
	fmt.Printf("input %s %s, output %s\n", in.Name, in.DType, out.Name)

	x := make([]float32, 1*16*64)
	for i := range x {
		x[i] = float32(i%7) / 7
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	outs, err := s.Run(ctx, []session.NamedTensor{{Name: in.Name, Tensor: session.MustTensor([]int64{1, 16, 64}, x)}})
	if err != nil {
		log.Fatal(err)
	}
	y, err := session.TensorOf[float32](outs[0])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(outs[0], len(y))
	// Output:
	// input x float, output y
	// tensor(float)[1 16 64] 1024
}

// addModel is y = a + b over two float vectors of length n.
func addModel(n int64) *graph.Model {
	g := &graph.Graph{Name: "add"}
	g.Inputs = []*graph.Value{
		graph.Input("a", graph.TensorType(graph.Float, graph.ShapeOf(n))),
		graph.Input("b", graph.TensorType(graph.Float, graph.ShapeOf(n))),
	}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.Nodes = []*graph.Node{graph.NewNode("add", "Add", []string{"a", "b"}, []string{"y"})}
	m, err := graph.FromGraph("add", g, map[string]int64{"": 13})
	if err != nil {
		log.Fatal(err)
	}
	return m
}

// ExampleInferenceSession_RunInto runs a model into an output the caller allocated once and
// reuses (ONNX Runtime's bound outputs): the run writes y's elements into the caller's slice.
func ExampleInferenceSession_RunInto() {
	s, err := session.FromGraph(addModel(4), session.WithExecutionProvider(session.ProviderHost))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	y := make([]float32, 4)
	bound := []session.NamedTensor{{Name: "y", Tensor: session.MustTensor([]int64{4}, y)}}
	for i := range 3 {
		a := session.MustTensor([]int64{4}, []float32{1, 2, 3, 4})
		b := session.MustTensor([]int64{4}, []float32{float32(i), float32(i), float32(i), float32(i)})
		if _, err := s.RunInto(context.Background(), []session.NamedTensor{{Name: "a", Tensor: a}, {Name: "b", Tensor: b}}, bound); err != nil {
			log.Fatal(err)
		}
		fmt.Println(y)
	}

	// A bound output of another shape than the run's is refused, naming the output.
	wrong := []session.NamedTensor{{Name: "y", Tensor: session.MustTensor([]int64{2, 2}, y)}}
	_, err = s.RunInto(context.Background(), []session.NamedTensor{
		{Name: "a", Tensor: session.MustTensor([]int64{4}, []float32{1, 2, 3, 4})},
		{Name: "b", Tensor: session.MustTensor([]int64{4}, []float32{1, 2, 3, 4})}}, wrong)
	fmt.Println(errors.Is(err, session.ErrInvalidArgument), err)
	// Output:
	// [1 2 3 4]
	// [2 3 4 5]
	// [3 4 5 6]
	// true session: RunInto: invalid argument: output "y": the bound tensor has rank 2 (shape [2 2]), the model wants rank 1 (tensor(float)[4])
}

// ExampleInferenceSession_Run_canceled shows a run whose context is done: its error matches
// context.Canceled, and the session runs the next one as usual.
func ExampleInferenceSession_Run_canceled() {
	s, err := session.FromGraph(addModel(2), session.WithExecutionProvider(session.ProviderHost))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	feeds := []session.NamedTensor{
		{Name: "a", Tensor: session.MustTensor([]int64{2}, []float32{1, 2})},
		{Name: "b", Tensor: session.MustTensor([]int64{2}, []float32{3, 4})},
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a caller gone away, say
	_, err = s.Run(ctx, feeds)
	fmt.Println(errors.Is(err, context.Canceled))

	outs, err := s.Run(context.Background(), feeds)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(outs[0].Data())
	// Output:
	// true
	// [4 6]
}

// ExampleInferenceSession_RunSelected takes outputs by name, in the order named, as ONNX
// Runtime's Run takes output names: here the second and first of a Split's three outputs.
func ExampleInferenceSession_RunSelected() {
	g := &graph.Graph{Name: "split"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(6)))}
	g.Outputs = []*graph.Value{graph.Output("head", graph.Type{}), graph.Output("middle", graph.Type{}), graph.Output("tail", graph.Type{})}
	g.Nodes = []*graph.Node{graph.NewNode("split", "Split", []string{"x"}, []string{"head", "middle", "tail"})}
	m, err := graph.FromGraph("split", g, map[string]int64{"": 13})
	if err != nil {
		log.Fatal(err)
	}
	s, err := session.FromGraph(m)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	x := session.MustTensor([]int64{6}, []float32{1, 2, 3, 4, 5, 6})
	outs, err := s.RunSelected(context.Background(), []session.NamedTensor{{Name: "x", Tensor: x}}, "middle", "head")
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range outs {
		v, err := session.TensorOf[float32](o)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(o, v)
	}
	_, err = s.RunSelected(context.Background(), []session.NamedTensor{{Name: "x", Tensor: x}}, "logits")
	fmt.Println(err)
	// Output:
	// tensor(float)[2] [3 4]
	// tensor(float)[2] [1 2]
	// session: RunSelected: invalid argument: no output named "logits"; the model's outputs are head, middle, tail
}
