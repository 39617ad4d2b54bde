package session

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// TestShapeTraceLeavesTheModelAlone checks that the shape traces of new signatures, several at
// once, leave the session's model as it was: inference over a signature writes the types of
// a copy of the value records that shares the weights' records and every type's shape with
// the model (plan.cloneForInference copies records, not types), so an inference rule that
// wrote a shape in place would change the model here (and race under -race).
func TestShapeTraceLeavesTheModelAlone(t *testing.T) {
	snapshot := func(g *graph.Graph) string {
		var lines []string
		for name, v := range g.Values {
			lines = append(lines, fmt.Sprintf("%s %p %+v %+v %+v", name, v, v.Type, v.Declared, v.Inferred))
		}
		for _, v := range g.Inputs {
			lines = append(lines, fmt.Sprintf("input %p %+v %+v %+v", v, v.Type, v.Declared, v.Inferred))
		}
		for _, v := range g.Outputs {
			lines = append(lines, fmt.Sprintf("output %p %+v %+v %+v", v, v.Type, v.Declared, v.Inferred))
		}
		sort.Strings(lines)
		return strings.Join(lines, "\n")
	}
	rnd := inferRand()
	cases := []struct {
		model string
		feed  func(n int) map[string]tensor.Tensor
	}{
		{"testdata/models/tiny_encoder.onnx", func(n int) map[string]tensor.Tensor {
			return map[string]tensor.Tensor{"x": tensor.MustTensor([]int64{1, int64(n), 64}, randomF32(rnd, n*64))}
		}},
		{classifierPath, func(n int) map[string]tensor.Tensor {
			return map[string]tensor.Tensor{"x": tensor.MustTensor([]int64{int64(n), 3, 32, 32}, randomF32(rnd, n*3*32*32))}
		}},
	}
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			s, err := Load(c.model, WithExecutionProvider(ProviderHost), WithIntraOpThreads(1))
			require.NoError(t, err)
			defer s.Close()
			g := s.pe.Eng.Model.Graph
			before := snapshot(g)
			feeds := make([]map[string]tensor.Tensor, 8)
			for i := range feeds {
				feeds[i] = c.feed(1 + rnd.IntN(40))
			}
			var wg sync.WaitGroup
			errs := make([]string, len(feeds))
			for i, fed := range feeds {
				wg.Go(func() {
					rc := &exec.RunCtx{Eng: s.eng, Opset: s.eng.Opset, Phase: exec.PhaseRun, Ctx: context.Background()}
					trace, why := s.pe.ShapeTrace(rc, fed)
					if why == "" && len(trace) != len(g.Nodes) {
						why = fmt.Sprintf("%d traced nodes of %d", len(trace), len(g.Nodes))
					}
					errs[i] = why
				})
			}
			wg.Wait()
			for i, why := range errs {
				require.Empty(t, why, "signature %d", i)
			}
			require.Equal(t, before, snapshot(g), "the model's value records changed")
		})
	}
}

// BenchmarkShapeTrace times the shape trace of a new signature (plan.Env.ShapeTrace: the
// folded shape arithmetic run, the other nodes' types inferred), the first of the three
// phases that build a signature's plan before its first run (then BuildTemplate and
// NewInstance): the small encoder at sequence lengths 8-256 and the classifier at batches
// 1-16, one signature after another. $LOOM_BENCH_SHAPE_TRACE_MODEL adds a model of one
// float input with a symbolic last dimension (PP-OCR's width), swept over 24-800.
func BenchmarkShapeTrace(b *testing.B) {
	models := signatureModels()
	if p := os.Getenv("LOOM_BENCH_SHAPE_TRACE_MODEL"); p != "" {
		models = append(models, signatureModel{"env", p, nil, sizeSpan(24, 800, 8)})
	}
	for _, m := range models {
		b.Run(m.name, func(b *testing.B) {
			s, err := Load(m.path, WithExecutionProvider(ProviderHost), WithIntraOpThreads(1))
			require.NoError(b, err)
			defer s.Close()
			feed := m.feed
			if feed == nil {
				rnd := inferRand()
				in := s.Inputs()[0]
				feed = func(n int) map[string]tensor.Tensor {
					d := make([]int64, len(in.Shape))
					for i, dim := range in.Shape {
						d[i] = 1
						if dim.Known() {
							d[i] = dim.Value
						}
					}
					d[len(d)-1] = int64(n)
					return map[string]tensor.Tensor{in.Name: tensor.MustTensor(d, randomF32(rnd, int(ops.Numel(d))))}
				}
			}
			feeds := make([]map[string]tensor.Tensor, len(m.sizes))
			for i, n := range m.sizes {
				feeds[i] = feed(n)
			}
			rc := &exec.RunCtx{Eng: s.eng, Opset: s.eng.Opset, Phase: exec.PhaseRun, Ctx: context.Background()}
			i := 0
			for b.Loop() {
				if _, why := s.pe.ShapeTrace(rc, feeds[i%len(feeds)]); why != "" {
					b.Fatal(why)
				}
				i++
			}
		})
	}
}

// signatureModel is a model of the new-signature benchmarks (BenchmarkShapeTrace,
// BenchmarkPlanPhases) with the inputs of each size it is swept over.
type signatureModel struct {
	name, path string
	feed       func(n int) map[string]tensor.Tensor
	sizes      []int
}

// signatureModels are the small encoder at sequence lengths 8-256 and the classifier at
// batches 1-16, fed random inputs.
func signatureModels() []signatureModel {
	rnd := inferRand()
	return []signatureModel{
		{"tiny_encoder", "testdata/models/tiny_encoder.onnx", func(n int) map[string]tensor.Tensor {
			return map[string]tensor.Tensor{"x": tensor.MustTensor([]int64{1, int64(n), 64}, randomF32(rnd, n*64))}
		}, sizeSpan(8, 256, 8)},
		{"cnn_classifier", classifierPath, func(n int) map[string]tensor.Tensor {
			return map[string]tensor.Tensor{"x": tensor.MustTensor([]int64{int64(n), 3, 32, 32}, randomF32(rnd, n*3*32*32))}
		}, sizeSpan(1, 16, 1)},
	}
}

// sizeSpan is lo, lo+step, ... up to hi.
func sizeSpan(lo, hi, step int) (v []int) {
	for n := lo; n <= hi; n += step {
		v = append(v, n)
	}
	return v
}
