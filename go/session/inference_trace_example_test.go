package session_test

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session"
)

// ExampleWithTracerProvider traces one Run of y = Relu(x + x) into an OpenTelemetry SDK
// provider and prints each op's span with the variant that ran: the run is traced because
// its context carries a span, the request's.
func ExampleWithTracerProvider() {
	g := &graph.Graph{Name: "addrelu"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.DimOf(2), graph.DimOf(3)}))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.Nodes = []*graph.Node{
		graph.NewNode("double", "Add", []string{"x", "x"}, []string{"xx"}),
		graph.NewNode("relu", "Relu", []string{"xx"}, []string{"y"}),
	}
	m, err := graph.FromGraph("addrelu", g, map[string]int64{"": 13})
	if err != nil {
		log.Fatal(err)
	}

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	s, err := session.FromGraph(m, session.WithExecutionProvider(session.ProviderHost), session.WithTracerProvider(tp))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx, request := tp.Tracer("example").Start(context.Background(), "request")
	x := make([]float32, 6)
	for i := range x {
		x[i] = rand.Float32()*2 - 1
	}
	if _, err := s.Run(ctx, []session.NamedTensor{{Name: "x", Tensor: session.MustTensor([]int64{2, 3}, x)}}); err != nil {
		log.Fatal(err)
	}
	request.End()

	for _, sp := range rec.Ended() { // in the order they ended: ops, the run, the request
		attrs := map[string]string{}
		for _, kv := range sp.Attributes() {
			attrs[string(kv.Key)] = kv.Value.Emit()
		}
		if node, ok := attrs["loom.node"]; ok {
			fmt.Printf("%s %s: %s\n", sp.Name(), node, attrs["loom.variant"])
		} else {
			fmt.Println(sp.Name())
		}
	}
	// Output:
	// Add double: loom:kernels/elementwise.loom:binary_flat[OP=0,XS=0,YS=0]
	// Relu relu: loom:kernels/elementwise.loom:unary[OP=0]
	// loom.Run
	// request
}
