//go:build ignore

// gen_mlp writes testdata/mlp.onnx, the "MLP" of the benchmarks: x [1, 64] -> Gemm 64x128 +
// bias -> Relu -> Gemm 128x10 + bias -> Softmax, with weights from a fixed seed (so the file
// is the same every time). Run it with `go run gen_mlp.go` in tools/cmd/loom.
package main

import (
	"log"
	"math/rand/v2"
	"os"

	"github.com/loomrt/loom/go/graph"
)

func main() {
	rnd := rand.New(rand.NewPCG(64, 128))
	weights := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rnd.NormFloat64() * 0.1)
		}
		return v
	}
	g := &graph.Graph{Name: "mlp"}
	g.Inputs = []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.ShapeOf(1, 64)))}
	g.Outputs = []*graph.Value{graph.Output("y", graph.TensorType(graph.Float, graph.ShapeOf(1, 10)))}
	g.AddInitializer(graph.TensorFromFloat32("w1", []int64{64, 128}, weights(64*128)))
	g.AddInitializer(graph.TensorFromFloat32("b1", []int64{128}, weights(128)))
	g.AddInitializer(graph.TensorFromFloat32("w2", []int64{128, 10}, weights(128*10)))
	g.AddInitializer(graph.TensorFromFloat32("b2", []int64{10}, weights(10)))
	g.Nodes = []*graph.Node{
		graph.NewNode("fc1", "MatMul", []string{"x", "w1"}, []string{"h"}),
		graph.NewNode("bias1", "Add", []string{"h", "b1"}, []string{"hb"}),
		graph.NewNode("relu", "Relu", []string{"hb"}, []string{"r"}),
		graph.NewNode("fc2", "MatMul", []string{"r", "w2"}, []string{"o"}),
		graph.NewNode("bias2", "Add", []string{"o", "b2"}, []string{"ob"}),
		graph.NewNode("softmax", "Softmax", []string{"ob"}, []string{"y"}, graph.IntAttr("axis", -1)),
	}
	m, err := graph.FromGraph("mlp", g, map[string]int64{"": 13})
	if err != nil {
		log.Fatal(err)
	}
	b, err := m.Marshal()
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("testdata/mlp.onnx", b, 0o644); err != nil {
		log.Fatal(err)
	}
}
