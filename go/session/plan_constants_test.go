package session

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/plan"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// planWeightBuffers is the number and total size of the weight buffers the session's plans
// share (device.SharedWeights).
func planWeightBuffers(s *InferenceSession) (n int, bytes uint64) {
	s.pe.PlanWeights.Mu.Lock()
	defer s.pe.PlanWeights.Mu.Unlock()
	for _, b := range s.pe.PlanWeights.Bufs {
		n++
		bytes += b.Size()
	}
	return n, bytes
}

// The constants plans make of weights are held once however many input shapes a session
// plans: the CNN classifier's transposed convolution weights (conv2d_cout) are made once a
// session (they were made again by every batch's plan, and kept), so the buffers its plans
// share are its weights and the values derived from them once, over batches 1-24, and every
// batch's outputs match the interpreter on fresh random inputs.
func TestPlanConstantsAreMadeOnceOverShapes(t *testing.T) {
	rnd := inferRand()
	load := func(opts ...LoadOption) (*InferenceSession, error) {
		return Load("testdata/models/cnn_classifier.onnx", append(opts, WithIntraOpThreads(1))...)
	}
	planned, interpreted := planPair(t, load)
	for n := 1; n <= 24; n++ {
		x := tensor.MustTensor([]int64{int64(n), 3, 32, 32}, randomF32(rnd, n*3*32*32))
		requireSameOutputs(t, planned, interpreted, []tensor.NamedTensor{{Name: "x", Tensor: x}}, 1e-4)
		// Every buffer is a weight or a value derived from one once a session.
		bufs, _ := planWeightBuffers(planned)
		require.LessOrEqual(t, bufs, len(planned.eng.Weights)+planned.pe.Derived.Len(), "batch %d: a plan holds constants of its own", n)
	}
	require.Len(t, planned.ExecutionPlans(), 24)
}

// A shape-generic stand-in for a product whose weight the session holds packed reads the
// weight unpacked: one unpacked copy serves the stand-in plans of every shape, and it is freed
// once the plans with the exact kernels have replaced them. (Each plan unpacked a copy of its
// own, kept until the session closed: a BERT-base sweep over 32 sequence lengths peaked at
// 2.4 GB.) Outputs match a float64 reference throughout.
func TestStandInsShareOneUnpackedWeight(t *testing.T) {
	t.Setenv("LOOM_CACHE_DIR", t.TempDir()) // cold: the exact kernels compile in the background
	rnd := inferRand()
	const k, n = 768, 768
	w, bias := randomF32(rnd, k*n), randomF32(rnd, n)
	s, err := FromGraph(weightProductModel(t, w, bias, k, n, false, 2), WithExecutionProvider(ProviderHost), WithIntraOpThreads(1))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	require.Equal(t, 1, relaidWeights(s), "the weight is held packed")
	run := func(rows int) {
		x := randomF32(rnd, rows*k)
		outs, err := s.Run(context.Background(), []NamedTensor{{Name: "x", Tensor: MustTensor([]int64{int64(rows), k}, x)}})
		require.NoError(t, err)
		got := outs[0].Data().([]float32)
		for r := range rows {
			for j := 0; j < n; j += 7 {
				want := float64(bias[j])
				for p := range k {
					want += float64(x[r*k+p]) * float64(w[p*n+j])
				}
				require.InDelta(t, want, float64(got[r*n+j]), 1e-3, "rows %d, y[%d, %d]", rows, r, j)
			}
		}
	}
	const weightBytes = 4 * k * n
	sizes := []int{9, 10, 11, 12, 13, 14}
	for _, rows := range sizes {
		run(rows)
	}
	standIns := 0
	for _, r := range s.ExecutionPlans() {
		if generic(r) {
			standIns++
		}
	}
	require.GreaterOrEqual(t, standIns, 2, "the sizes' first plans run stand-ins (cold cache)")
	packed := tensor.RelaidOf(s.eng.Weights["w"]).Packed
	bound := func() (n int, packedBound bool) {
		s.pe.PlanWeights.Mu.Lock()
		defer s.pe.PlanWeights.Mu.Unlock()
		for _, b := range s.pe.PlanWeights.Bufs {
			if b.Size() == weightBytes {
				n++
				packedBound = packedBound || &b.Bytes()[0] == (*byte)(unsafe.Pointer(&packed[0]))
			}
		}
		return n, packedBound
	}
	// An exact plan the background JIT finished meanwhile binds the packed weight itself (a
	// buffer of the same size, under load): only the other buffers are unpacked copies.
	copies, packedBound := bound()
	if packedBound {
		copies--
	}
	require.Equal(t, 1, copies, "one unpacked copy for %d stand-in plans, not one a plan", standIns)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, s.waitBackground(ctx))
	for _, rows := range sizes {
		run(rows) // planned again with the exact kernels, which read the packed weight
	}
	for _, r := range s.ExecutionPlans() {
		require.False(t, generic(r), "a plan still runs stand-ins: %+v", r.Nodes)
	}
	copies, packedBound = bound()
	require.Equal(t, 1, copies, "the unpacked copy went with the last stand-in plan")
	require.True(t, packedBound, "the exact kernels read the packed weight")
}

// A decode loop over a growing KV cache plans every step anew (a new signature each), and a
// causal MultiHeadAttention's plan makes a mask constant of its own: the masks of plans no
// longer cached are freed, so the shared buffers stay bounded by the cached plans however
// many steps run (they were kept until the session closed). Every step matches the
// interpreter.
func TestDecodeStepConstantsGoWithTheirPlans(t *testing.T) {
	r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	node := msOpNode("mha", "MultiHeadAttention", []string{"y", "pk", "pv"}, graph.IntAttr("num_heads", 2), graph.IntAttr("unidirectional", 1))
	inputs := func(past int) []tensor.Tensor {
		return []tensor.Tensor{randT(r, 1, 1, 16), randT(r, 1, 1, 16), randT(r, 1, 1, 16), {}, {}, {}, randT(r, 1, 2, int64(past), 8), randT(r, 1, 2, int64(past), 8)}
	}
	planned, err := msOpSession(t, exec.ExecutorPlan, node, inputs(1))
	require.NoError(t, err)
	interpreted, err := msOpSession(t, exec.ExecutorInterpreter, node, inputs(1))
	require.NoError(t, err)
	const steps, cached = 48, 8
	planned.plans.MaxEntries = cached
	for past := 1; past <= steps; past++ {
		in := inputs(past)
		if planned.tiering.Mode() == plan.TierSecondSight { // plan every step, as a loop whose steps cost more interpreted
			planned.tiering.RanInterpreted(time.Hour)
			planned.tiering.RanInterpreted(time.Hour)
		}
		requireSameOutputs(t, planned, interpreted, feedsOf(in), 1e-5)
		bufs, _ := planWeightBuffers(planned)
		require.LessOrEqual(t, bufs, cached, "step %d: constants of %d plans", past, past)
	}
}
