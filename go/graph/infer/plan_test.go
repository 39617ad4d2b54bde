package infer

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
)

// graph.PlanMemory's tests live here: planning needs the shapes inference gives every value.

// planFor infers m's shapes for the input shapes sig and plans its memory.
func planFor(m *graph.Model, sig map[string]graph.Shape) (*graph.MemoryPlan, error) {
	if err := ShapesFor(m, Signature{Shapes: sig}); err != nil {
		return nil, err
	}
	return graph.PlanMemory(m, graph.PlanOptions{})
}

// checkPlan verifies that no two arena buffers alive at the same time share bytes, that
// offsets are aligned, and that in-place and view buffers point at arena or external roots.
func checkPlan(t *testing.T, p *graph.MemoryPlan) {
	t.Helper()
	byName := map[string]graph.Buffer{}
	var roots []graph.Buffer
	for _, b := range p.Buffers {
		byName[b.Value] = b
		if b.Kind == graph.BufferArena {
			roots = append(roots, b)
			assert.Zero(t, b.Offset%64, b.Value)
			assert.LessOrEqual(t, b.Offset+b.Size, p.ArenaBytes)
		}
	}
	for i, a := range roots {
		for _, b := range roots[i+1:] {
			timeOverlap := a.First <= b.Last && b.First <= a.Last
			memOverlap := a.Offset < b.Offset+b.Size && b.Offset < a.Offset+a.Size
			if a.Size > 0 && b.Size > 0 {
				assert.False(t, timeOverlap && memOverlap, "%s [%d,%d]@%d+%d and %s [%d,%d]@%d+%d", a.Value, a.First, a.Last, a.Offset, a.Size, b.Value, b.First, b.Last, b.Offset, b.Size)
			}
		}
	}
	for _, b := range p.Buffers {
		if b.Kind == graph.BufferInPlace || b.Kind == graph.BufferView {
			r, ok := byName[b.Root]
			require.True(t, ok, b.Value)
			assert.Equal(t, graph.BufferArena, r.Kind, "%s roots at %s", b.Value, b.Root)
			assert.GreaterOrEqual(t, r.Last, b.Last, "%s outlives its root %s", b.Value, b.Root)
		}
	}
	assert.LessOrEqual(t, p.LiveBytes, p.ArenaBytes)
	assert.LessOrEqual(t, p.ArenaBytes, p.NaiveBytes+64*int64(len(roots)))
}

func TestPlanReusesAndAliases(t *testing.T) {
	m := buildModel(t, []*graph.Value{graph.Input("x", graph.TensorType(graph.Float, graph.Shape{graph.SymDim("N"), graph.DimOf(256)}))}, []*graph.Value{graph.Output("y", graph.Type{})},
		[]*graph.Node{
			graph.NewNode("mm1", "MatMul", []string{"x", "w"}, []string{"a"}),
			graph.NewNode("relu", "Relu", []string{"a"}, []string{"b"}),                  // in place over a
			graph.NewNode("rs", "Reshape", []string{"b", "shape"}, []string{"c"}),        // view of b
			graph.NewNode("sl", "Slice", []string{"c", "s0", "s1", "ax"}, []string{"d"}), // contiguous: rows of axis 0
			graph.NewNode("mm2", "MatMul", []string{"d", "w2"}, []string{"e"}),
			graph.NewNode("sig", "Sigmoid", []string{"e"}, []string{"y"}),
		}, []*graph.Tensor{graph.TensorFromFloat32("w", []int64{256, 256}, make([]float32, 256*256)),
			graph.TensorFromFloat32("w2", []int64{256, 256}, make([]float32, 256*256)),
			graph.TensorFromInt64("shape", []int64{2}, []int64{-1, 256}), graph.TensorFromInt64("s0", []int64{1}, []int64{1}),
			graph.TensorFromInt64("s1", []int64{1}, []int64{3}), graph.TensorFromInt64("ax", []int64{1}, []int64{0})})
	p, err := planFor(m, map[string]graph.Shape{"x": graph.ShapeOf(4, 256)})
	require.NoError(t, err)
	checkPlan(t, p)
	kinds := map[string]graph.BufferKind{}
	for _, b := range p.Buffers {
		kinds[b.Value] = b.Kind
	}
	assert.Equal(t, graph.BufferInPlace, kinds["b"])
	assert.Equal(t, graph.BufferView, kinds["c"])
	assert.Equal(t, graph.BufferView, kinds["d"])
	assert.Equal(t, graph.BufferInPlace, kinds["y"])
	for _, b := range p.Buffers {
		if b.Value == "d" {
			assert.Equal(t, int64(1*256*4), b.Offset-offsetOf(p, "a"), "slice starts one row in")
		}
	}
	// a (4x256 floats) and e (2x256) overlap in time only through d; the arena holds both.
	assert.Equal(t, int64(4096+2048), p.ArenaBytes)
	assert.Equal(t, int64(4096*2+2048*2), p.NaiveBytes)
	assert.Equal(t, 2, p.InPlace)
	assert.Equal(t, 2, p.Views)

	_, err = planFor(m, map[string]graph.Shape{"x": graph.ShapeOf(4, 3)})
	require.Error(t, err)
	require.NoError(t, Shapes(m))
	assert.Equal(t, "tensor(float)[N,256]", m.Graph.Inputs[0].Type.String())
}

func offsetOf(p *graph.MemoryPlan, name string) int64 {
	for _, b := range p.Buffers {
		if b.Value == name {
			return b.Offset
		}
	}
	return -1
}

func TestPlanReferenceModels(t *testing.T) {
	signatures := map[string]map[string]graph.Shape{
		"tiny_gpt_kv.onnx": {"input_ids": graph.ShapeOf(1, 8), "past_k0": graph.ShapeOf(1, 4, 16, 16), "past_v0": graph.ShapeOf(1, 4, 16, 16),
			"past_k1": graph.ShapeOf(1, 4, 16, 16), "past_v1": graph.ShapeOf(1, 4, 16, 16)},
		"tiny_encoder.onnx":          {"x": graph.ShapeOf(2, 32, 64)},
		"ch_PP-OCRv4_rec_infer.onnx": {"x": graph.ShapeOf(1, 3, 48, 320)},
		"mnist.onnx":                 {},
	}
	// Silero VAD is planned in package opt: its If branches need constant folding first.
	planned := 0
	for _, path := range referenceModels() {
		sig, ok := signatures[filepath.Base(path)]
		if !ok {
			continue
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			m, err := graph.Load(path)
			require.NoError(t, err)
			defer m.Close()
			p, err := planFor(m, sig)
			require.NoError(t, err)
			checkPlan(t, p)
			assert.Empty(t, p.Unplanned)
			assert.Less(t, p.ArenaBytes, p.NaiveBytes)
			planned++
			t.Logf("%s: %v; unplanned %v", filepath.Base(path), p, p.Unplanned)
		})
	}
	if planned == 0 {
		t.Skip("no reference models found (go/session/testdata/models, tools/models/fetch.sh, or LOOM_ONNX_MODELS)")
	}
}
