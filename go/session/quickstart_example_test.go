package session_test

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log"
	"os"
	"strings"
	"testing"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session"
)

// ExampleLoad_quickStart is the README's quick start, word for word (TestReadmeQuickStart
// checks): load a model, run it on two tensors, read the output. testdata/models/add.onnx is
// c = a + b over float vectors of a symbolic length N (tools/cmd/loom/testdata/add.onnx).
func ExampleLoad_quickStart() {
	s, err := session.Load("testdata/models/add.onnx") // c = a + b over float vectors of length N
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	a := session.MustTensor([]int64{3}, []float32{1, 2, 3})
	b := session.MustTensor([]int64{3}, []float32{10, 20, 30})
	outs, err := s.Run(context.Background(), []session.NamedTensor{{Name: "a", Tensor: a}, {Name: "b", Tensor: b}})
	if err != nil {
		log.Fatal(err) // a *session.Error: errors.Is(err, session.ErrInvalidArgument) for bad inputs
	}
	c, err := session.TensorOf[float32](outs[0]) // outputs come in the order of s.Outputs()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.Outputs()[0].Name, outs[0], c)
	// Output:
	// c tensor(float)[3] [11 22 33]
}

// batchModel is y = x·w for x of shape [batch, 3], batch symbolic, and a fixed w of shape [3, 2].
func batchModel() *graph.Model {
	w, err := graph.TensorFromValues("w", graph.Float, []int64{3, 2}, []float64{1, 0, 0, 1, 1, 1})
	if err != nil {
		log.Fatal(err)
	}
	g := &graph.Graph{Name: "batch", Initializers: map[string]*graph.Tensor{"w": w}}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("batch"), graph.DimOf(3)}))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.Type{})}
	g.Nodes = []*graph.Node{graph.NewNode("matmul", "MatMul", []string{"x", "w"}, []string{"y"})}
	m, err := graph.FromGraph("batch", g, map[string]int64{"": 13})
	if err != nil {
		log.Fatal(err)
	}
	return m
}

// ExampleInferenceSession_Run_dynamicBatch runs one session on batches of different sizes: a
// symbolic dimension (here "batch") takes its size from each run's inputs. The first run of each
// new input shape is interpreted and builds that shape's compiled plan (docs/execution.md),
// which later runs of the shape reuse.
func ExampleInferenceSession_Run_dynamicBatch() {
	s, err := session.FromGraph(batchModel(), session.WithExecutionProvider(session.ProviderHost))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	fmt.Println("input", s.Inputs()[0].Name, s.Inputs()[0].Shape)
	for _, batch := range [][]float32{
		{1, 2, 3},
		{1, 2, 3, 4, 5, 6, 7, 8, 9},
	} {
		x := session.MustTensor([]int64{int64(len(batch) / 3), 3}, batch)
		outs, err := s.Run(context.Background(), []session.NamedTensor{{Name: "x", Tensor: x}})
		if err != nil {
			log.Fatal(err)
		}
		y, err := session.TensorOf[float32](outs[0])
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(x, "->", outs[0], y)
	}
	// Output:
	// input x [batch,3]
	// tensor(float)[1 3] -> tensor(float)[1 2] [4 5]
	// tensor(float)[3 3] -> tensor(float)[3 2] [4 5 10 11 16 17]
}

// TestReadmeQuickStart keeps the README's Go quick start and ExampleLoad_quickStart, which
// runs it, the same code: the README shows the example's body as a program's main.
func TestReadmeQuickStart(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatalf("the README (../../README.md; under Bazel through data //:README.md): %v", err)
	}
	src, err := os.ReadFile("quickstart_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "quickstart_example_test.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var body string
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "ExampleLoad_quickStart" {
			body = string(src[fn.Body.Lbrace : fn.Body.Rbrace-1]) // Pos is the offset + 1
		}
	}
	body, _, ok := strings.Cut(body, "\t// Output:")
	if !ok {
		t.Fatal("ExampleLoad_quickStart has no // Output: comment")
	}
	program := "func main() {" + body + "}\n"
	if !strings.Contains(string(readme), program) {
		t.Errorf("the README's quick start is not ExampleLoad_quickStart's body; the README must hold:\n%s", program)
	}
}
