package session_test

// Transformers as torch.onnx.export emits them (tools/models/gen_transformers.py, random weights):
// a GPT-2 decode step with a KV cache and a BERT encoder with a padding mask, compared with
// ONNX Runtime 1.30's outputs on fixed inputs (testdata/realmodels, made by
// tools/models/make_refs.sh).

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph/opt"
	"github.com/loomrt/loom/go/session"
)

// TestRealModelTinyGPT2Step runs one decode step of a 2-layer GPT-2 (d 64, 4 heads, vocab 256)
// after a 7-token KV cache: logits and every layer's present key and value.
func TestRealModelTinyGPT2Step(t *testing.T) {
	forLevels(t, func(t *testing.T, setup realSetup) {
		checkAgainstRefs(t, "testdata/models/tiny_gpt2_step.onnx", "testdata/realmodels/tiny_gpt2_step", setup)
	})
}

// TestRealModelTinyBert runs a 2-layer BERT encoder (d 64, 4 heads, FFN 256, vocab 512) on 12
// tokens whose last 3 are masked out, then checks that the masked tokens' ids do not reach the
// other positions.
func TestRealModelTinyBert(t *testing.T) {
	const model, dir = "testdata/models/tiny_bert.onnx", "testdata/realmodels/tiny_bert"
	forLevels(t, func(t *testing.T, setup realSetup) { checkAgainstRefs(t, model, dir, setup) })

	s := loadReal(t, model, realSetup{Level: opt.LevelAll})
	mask := readNpy(t, filepath.Join(dir, "attention_mask.npy"))
	ids := readNpy(t, filepath.Join(dir, "input_ids.npy"))
	idv, err := session.TensorOf[int64](ids)
	require.NoError(t, err)
	maskv, err := session.TensorOf[int64](mask)
	require.NoError(t, err)
	changed := append([]int64(nil), idv...)
	kept := 0
	for i, m := range maskv {
		if m == 0 {
			changed[i] = (changed[i] + 1 + int64(i)) % 512
		} else {
			kept++
		}
	}
	require.Less(t, kept, len(maskv), "the reference input masks no position")
	feeds := func(ids session.Tensor) []session.NamedTensor {
		return []session.NamedTensor{{Name: "input_ids", Tensor: ids}, {Name: "attention_mask", Tensor: mask}}
	}
	a := run(t, s, feeds(ids)...)["last_hidden_state"]
	b := run(t, s, feeds(session.MustTensor(ids.Shape(), changed))...)["last_hidden_state"]
	av, err := session.TensorOf[float32](a)
	require.NoError(t, err)
	bv, err := session.TensorOf[float32](b)
	require.NoError(t, err)
	d := int(a.Shape()[2])
	requireClose(t, "unmasked positions after changing the masked ids",
		session.MustTensor([]int64{int64(kept), int64(d)}, bv[:kept*d]), session.MustTensor([]int64{int64(kept), int64(d)}, av[:kept*d]))
}

// checkAgainstRefs runs model on every dir/NAME.npy as input NAME and compares each output
// with dir/ref/OUTPUT.npy; every output must have a reference.
func checkAgainstRefs(t *testing.T, model, dir string, setup realSetup) {
	s := loadReal(t, model, setup)
	inputs, err := filepath.Glob(filepath.Join(dir, "*.npy"))
	require.NoError(t, err)
	require.Len(t, inputs, len(s.Inputs()), "%s: one .npy per model input", dir)
	var feeds []session.NamedTensor
	for _, f := range inputs {
		feeds = append(feeds, session.NamedTensor{Name: strings.TrimSuffix(filepath.Base(f), ".npy"), Tensor: readNpy(t, f)})
	}
	outs := run(t, s, feeds...)
	names := make([]string, 0, len(outs))
	for name := range outs {
		names = append(names, name)
	}
	sort.Strings(names)
	refs, err := os.ReadDir(filepath.Join(dir, "ref"))
	require.NoError(t, err)
	require.Len(t, refs, len(names), "%s/ref: one .npy per model output", dir)
	for _, name := range names {
		requireClose(t, name, outs[name], readNpy(t, filepath.Join(dir, "ref", name+".npy")))
	}
}
