package zzsweep

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/loomrt/loom/go/session"
)

func TestSweep(t *testing.T) {
	s, err := session.Load("../../go/session/testdata/models/cnn_classifier.onnx", session.WithIntraOpThreads(1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := rand.New(rand.NewPCG(1, 2))
	var first, warm time.Duration
	for rep := 0; rep < 3; rep++ {
		for n := 1; n <= 64; n++ {
			x := make([]float32, n*3*32*32)
			for i := range x {
				x[i] = r.Float32()
			}
			feeds := []session.NamedTensor{{Name: "x", Tensor: session.MustTensor([]int64{int64(n), 3, 32, 32}, x)}}
			t0 := time.Now()
			if _, err := s.Run(context.Background(), feeds); err != nil {
				t.Fatal(err)
			}
			if rep == 0 {
				first += time.Since(t0)
			} else {
				warm += time.Since(t0)
			}
		}
	}
	t.Logf("first %v warm/2 %v", first, warm/2)
}
