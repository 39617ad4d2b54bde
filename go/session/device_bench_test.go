package session

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// BenchmarkDecodeStep times one decode step of the small GPT (tiny_gpt_kv.onnx: one token
// against a KV cache of 32 positions, the same shapes every step) on the host provider, at 1
// and 2 threads: eager Run (the compiled run plan, outputs allocated and handed back with
// Recycle), eager RunWithDeviceBindings (inputs and outputs in persistent bindings), and the
// replay of the captured device graph against the same bindings. The kernels compile on the
// run path (sameKernels): every mode times the exact kernels, and the capture never meets a
// plan on background stand-ins.
func BenchmarkDecodeStep(b *testing.B) {
	const heads, headDim, kvLen = 4, 16, 32
	kv := []string{"k0", "v0", "k1", "v1"}
	for _, threads := range []int{1, 2} {
		s, err := Load("testdata/models/tiny_gpt_kv.onnx", sameKernels([]LoadOption{WithExecutionProvider(ProviderHost), WithIntraOpThreads(threads)})...)
		require.NoError(b, err)
		rnd := inferRand()
		feeds := []tensor.NamedTensor{{Name: "input_ids", Tensor: tensor.MustTensor([]int64{1, 1}, []int64{7})}}
		shape := []int64{1, heads, kvLen, headDim}
		for _, n := range kv {
			feeds = append(feeds, tensor.NamedTensor{Name: "past_" + n, Tensor: tensor.MustTensor(shape, randomF32(rnd, ops.Numel(shape)))})
		}
		ctx := context.Background()
		b.Run(fmt.Sprintf("threads=%d/eager-run", threads), func(b *testing.B) {
			for range 3 {
				outs, err := s.Run(ctx, feeds)
				require.NoError(b, err)
				s.Recycle(outs...)
			}
			b.ResetTimer()
			for range b.N {
				outs, err := s.Run(ctx, feeds)
				if err != nil {
					b.Fatal(err)
				}
				s.Recycle(outs...)
			}
		})
		// Bindings: every input, and every output (present_* with room for the new position).
		var bindings []*DeviceBinding
		for _, f := range feeds {
			d := f.Tensor.Dims()
			bd, err := s.AllocateDeviceBinding(f.Name, "", f.Tensor.DType(), d, d)
			require.NoError(b, err)
			require.NoError(b, bd.Upload(f.Tensor))
			bindings = append(bindings, bd)
		}
		lo, err := s.AllocateDeviceOutputBinding("logits", graph.Float, []int64{1, 1, 512}, []int64{1, 1, 512})
		require.NoError(b, err)
		bindings = append(bindings, lo)
		for _, n := range kv {
			grown := []int64{1, heads, kvLen + 1, headDim}
			bd, err := s.AllocateDeviceOutputBinding("present_"+n, graph.Float, grown, grown)
			require.NoError(b, err)
			bindings = append(bindings, bd)
		}
		b.Run(fmt.Sprintf("threads=%d/eager-bindings", threads), func(b *testing.B) {
			for range 3 {
				_, err := s.RunWithDeviceBindings(ctx, nil, bindings)
				require.NoError(b, err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := s.RunWithDeviceBindings(ctx, nil, bindings); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("threads=%d/replay", threads), func(b *testing.B) {
			res, err := s.TryCaptureWithDeviceBindings(ctx, nil, bindings)
			require.NoError(b, err)
			require.True(b, res.Captured, res.Reason)
			defer s.ResetDeviceGraph()
			b.ResetTimer()
			for range b.N {
				if ok, err := s.ReplayDeviceGraph(bindings); err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
			b.StopTimer()
			if m := s.DecodeMemoCounts(); m.Replayed < uint64(b.N) {
				b.Fatalf("replayed %d < %d", m.Replayed, b.N)
			}
		})
		s.Close()
	}
}
