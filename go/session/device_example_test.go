package session_test

import (
	"context"
	"fmt"
	"log"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session"
)

// A decode-style loop on persistent bindings: add.onnx computes c = a + b; binding input a
// aliased by output c makes an accumulator that each step adds b to, in place. Two eager
// steps warm the plan, the third is captured, and the rest replay the captured device graph.
func ExampleInferenceSession_ReplayDeviceGraph() {
	s, err := session.Load("testdata/models/add.onnx", session.WithExecutionProvider(session.ProviderHost))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	acc, err := s.AllocateDeviceBinding("a", "c", graph.Float, []int64{3}, []int64{3})
	if err != nil {
		log.Fatal(err)
	}
	inc, err := s.AllocateDeviceBinding("b", "", graph.Float, []int64{3}, []int64{3})
	if err != nil {
		log.Fatal(err)
	}
	if err := inc.Upload(session.MustTensor([]int64{3}, []float32{1, 2, 3})); err != nil {
		log.Fatal(err)
	}
	bindings := []*session.DeviceBinding{acc, inc}
	ctx := context.Background()
	for range 2 {
		if _, err := s.RunWithDeviceBindings(ctx, nil, bindings); err != nil {
			log.Fatal(err)
		}
	}
	res, err := s.TryCaptureWithDeviceBindings(ctx, nil, bindings)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("captured:", res.Captured, "segments:", s.CapturedGraphSegmentCount())
	for range 3 {
		if ok, err := s.ReplayDeviceGraph(bindings); err != nil || !ok {
			log.Fatal(ok, err)
		}
	}
	sum, err := acc.Download()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sum.Data())
	fmt.Printf("%+v\n", s.DecodeMemoCounts())
	fmt.Println("violations:", s.CheckDeviceCaptureError())
	// Output:
	// captured: true segments: 1
	// [6 12 18]
	// {Primed:1 Rebuilt:0 Replayed:5 Ineligible:0}
	// violations: 0
}
