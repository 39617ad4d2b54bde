package session

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/opt"
	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/session/internal/epcontext"
	"github.com/loomrt/loom/go/session/internal/sessiontest"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// epcMLP is the MLP test model with metadata to carry over, and its weights.
func epcMLP(t *testing.T, rnd *rand.Rand) *graph.Model {
	const in, out = 12, 5
	m := mlpModel(t, randomF32(rnd, in*out), randomF32(rnd, out), in, out)
	m.ProducerName, m.ProducerVersion, m.Doc, m.ModelVersion = "epc-test", "1.2", "an MLP", 7
	m.MetadataProps["purpose"] = "EP context test"
	return m
}

// writeEPContextModel builds a host session for m that writes its context model into dir and
// returns the session (closed when the test ends) and the context model's path.
func writeEPContextModel(t *testing.T, m *graph.Model, dir, embed string) (*InferenceSession, string) {
	t.Helper()
	path := filepath.Join(dir, "mlp_ctx.onnx")
	s, err := FromGraph(m, WithExecutionProvider(ProviderHost), WithOption(OptionEPContextEnable, "1"), WithOption(OptionEPContextFilePath, path), WithOption(OptionEPContextEmbedMode, embed))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.Equal(t, path, s.EPContextPath())
	return s, path
}

// epcNode loads a context model and returns it with its EPContext node.
func epcNode(t *testing.T, path string) (*graph.Model, *graph.Node) {
	t.Helper()
	m, err := graph.Load(path)
	require.NoError(t, err)
	require.Len(t, m.Graph.Nodes, 1)
	return m, m.Graph.Nodes[0]
}

// saveModel marshals m to path.
func saveModel(t *testing.T, m *graph.Model, path string) {
	t.Helper()
	data, err := m.Marshal()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// freshLoomCache points Loom's disk cache at a new empty directory for the rest of the test,
// so any kernel a session needs must really be compiled (and be counted as such).
func freshLoomCache(t *testing.T) string {
	dir := t.TempDir()
	t.Setenv("LOOM_CACHE_DIR", dir)
	return dir
}

func runF32(t *testing.T, s *InferenceSession, name string, shape []int64, x []float32) []float32 {
	t.Helper()
	outs, err := s.Run(context.Background(), []tensor.NamedTensor{{Name: name, Tensor: tensor.MustTensor(shape, x)}})
	require.NoError(t, err)
	require.Len(t, outs, 1)
	got, err := tensor.TensorOf[float32](outs[0])
	require.NoError(t, err)
	return got
}

func TestEPContextRoundTrip(t *testing.T) {
	for _, embed := range []string{"1", "0"} {
		t.Run("embed_mode="+embed, func(t *testing.T) {
			rnd := inferRand()
			dir := t.TempDir()
			src, path := writeEPContextModel(t, epcMLP(t, rnd), dir, embed)
			assert.Positive(t, src.CacheStats().Warmup.Misses, "writing the context warms the session up")

			cm, node := epcNode(t, path)
			assert.Equal(t, "EPContext", node.OpType)
			assert.Equal(t, "com.microsoft", node.Domain)
			assert.Equal(t, int64(1), node.AttrInt("main_context", 0))
			assert.Equal(t, "loom", node.AttrString("source", ""))
			assert.Equal(t, loom.CompilerVersion, node.AttrString("ep_sdk_version", ""))
			assert.Equal(t, "loom_mlp", node.AttrString("partition_name", ""))
			assert.Equal(t, src.DeviceID().Target, node.AttrString("hardware_architecture", ""))
			var notes epContextNotes
			require.NoError(t, json.Unmarshal([]byte(node.AttrString("notes", "")), &notes))
			assert.Equal(t, src.DeviceID().Target, notes.LoomTarget)
			assert.Equal(t, "host", notes.LoomBackend)
			assert.Positive(t, notes.Kernels)
			assert.Equal(t, []string{"x"}, node.Inputs)
			assert.Equal(t, []string{"y"}, node.Outputs)
			cache := node.Attr("ep_cache_context")
			require.NotNil(t, cache)
			if embed == "1" {
				assert.Equal(t, int64(1), node.AttrInt("embed_mode", -1))
				assert.Equal(t, epcontext.Magic, string(cache.String[:8]))
			} else {
				assert.Equal(t, int64(0), node.AttrInt("embed_mode", -1))
				assert.Equal(t, "mlp_ctx_loom.bin", string(cache.String))
				blob, err := os.ReadFile(filepath.Join(dir, "mlp_ctx_loom.bin"))
				require.NoError(t, err)
				assert.Equal(t, epcontext.Magic, string(blob[:8]))
			}
			// The context model declares what the source model does.
			require.Len(t, cm.Graph.Inputs, 1)
			assert.Equal(t, "x", cm.Graph.Inputs[0].Name)
			assert.Equal(t, "N", cm.Graph.Inputs[0].Declared.Shape[0].Param)
			assert.Equal(t, int64(12), cm.Graph.Inputs[0].Declared.Shape[1].Value)
			assert.Equal(t, "mlp", cm.Graph.Name)
			assert.Equal(t, "epc-test", cm.ProducerName)
			assert.Equal(t, int64(1), cm.Opsets["com.microsoft"])
			assert.Equal(t, int64(13), cm.Opsets[""])

			// A fresh, empty Loom cache: a kernel the loaded session needed would be compiled.
			cacheDir := freshLoomCache(t)
			s, err := Load(path)
			require.NoError(t, err)
			defer s.Close()
			assert.Equal(t, ProviderHost, s.Provider(), "auto runs a host context on the host")
			assert.Equal(t, "", s.EPContextPath())
			assert.Equal(t, src.Inputs(), s.Inputs())
			assert.Equal(t, src.Outputs(), s.Outputs())
			assert.Equal(t, src.ModelMetadata(), s.ModelMetadata())
			assert.Equal(t, len(src.Graph().Graph.Nodes), len(s.Graph().Graph.Nodes), "the loaded session runs the optimized graph")

			for range 3 {
				x := randomF32(rnd, 12) // the warmup shape: N=1
				want := runF32(t, src, "x", []int64{1, 12}, x)
				got := runF32(t, s, "x", []int64{1, 12}, x)
				// Within rounding, not bit for bit: the source session may run a kernel the
				// shared disk cache holds where the loaded one runs a shape-generic stand-in.
				assert.InDeltaSlice(t, want, got, 1e-5, "the context model computes what the source model does")
			}
			st := s.CacheStats()
			assert.Zero(t, st.Run.Compiles)
			assert.Zero(t, st.Run.Misses, "every kernel came from the context")
			assert.Positive(t, st.Run.Hits)
			assert.Equal(t, loom.CacheStats{}, st.Compiler, "no Loom compiler was used")
			entries, err := os.ReadDir(cacheDir)
			require.NoError(t, err)
			assert.Empty(t, entries, "nothing was compiled into the Loom cache")

			// Other shapes still run (compiling lazily whatever they need beyond the context).
			rows := 2 + rnd.IntN(4)
			x := randomF32(rnd, rows*12)
			assert.InDeltaSlice(t, runF32(t, src, "x", []int64{int64(rows), 12}, x), runF32(t, s, "x", []int64{int64(rows), 12}, x), 1e-5)
		})
	}
}

// TestEPContextTinyEncoder writes the context of a real model optimized at level all (fused
// attention, LayerNorm and MatMul+Add of the ai.loom domain) next to the model file, at the
// default path, and runs it without compiling.
func TestEPContextTinyEncoder(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("testdata/models/tiny_encoder.onnx")
	require.NoError(t, err)
	modelPath := filepath.Join(dir, "tiny_encoder.onnx")
	require.NoError(t, os.WriteFile(modelPath, data, 0o644))

	src, err := Load(modelPath, WithExecutionProvider(ProviderHost), WithOptimizationLevel(opt.LevelAll), WithOption(OptionEPContextEnable, "1"))
	require.NoError(t, err)
	defer src.Close()
	want := filepath.Join(dir, "tiny_encoder_ctx.onnx")
	assert.Equal(t, want, src.EPContextPath())
	assert.Equal(t, want, src.SessionOptions()[OptionEPContextFilePath])
	assert.Equal(t, "1", src.SessionOptions()[OptionEPContextEmbedMode])
	_, err = os.Stat(want)
	require.NoError(t, err)

	freshLoomCache(t)
	s, err := Load(want, WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	fused := 0
	for _, n := range s.Graph().Graph.Nodes {
		if n.Domain == graph.LoomDomain {
			fused++
		}
	}
	assert.Positive(t, fused, "the context carries the level-all optimized graph")
	rnd := inferRand()
	shape := []int64{1, 1, 64} // the declared shape with symbolic dimensions at 1
	// The writing session warmed up twice (interpreted, then through its compiled plan): so
	// does this one, so that both run their plans below, with the same kernels.
	require.NoError(t, s.Warmup(context.Background(), map[string][]int64{"x": shape}))
	require.NoError(t, s.Warmup(context.Background(), map[string][]int64{"x": shape}))
	assert.Zero(t, s.CacheStats().Warmup.Compiles, "the interpreter's and the plan's kernels came from the context")
	for range 2 {
		x := make([]float32, 64)
		for i := range x {
			x[i] = rnd.Float32()*4 - 2
		}
		assert.Equal(t, runF32(t, src, "x", shape, x), runF32(t, s, "x", shape, x))
	}
	st := s.CacheStats()
	assert.Zero(t, st.Run.Compiles)
	assert.Zero(t, st.Run.Misses)
	assert.Positive(t, st.Warmup.Hits, "the kernels were found in the cache the context filled")
}

func TestEPContextNeedsPathFromMemory(t *testing.T) {
	rnd := inferRand()
	_, err := FromGraph(epcMLP(t, rnd), WithOption(OptionEPContextEnable, "1"))
	require.Error(t, err)
	assert.ErrorIs(t, err, tensor.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "ep.context_file_path")
	data, err := epcMLP(t, rnd).Marshal()
	require.NoError(t, err)
	_, err = LoadBytes(data, WithOption(OptionEPContextEnable, "1"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ep.context_file_path")

	// With the option, LoadBytes writes where it says.
	path := filepath.Join(t.TempDir(), "from_bytes_ctx.onnx")
	s, err := LoadBytes(data, WithExecutionProvider(ProviderHost), WithOption(OptionEPContextEnable, "1"), WithOption(OptionEPContextFilePath, path))
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, path, s.EPContextPath())
}

func TestEPContextRefusesToOverwriteSource(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.onnx")
	saveModel(t, epcMLP(t, inferRand()), path)
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	_, err = Load(path, WithOption(OptionEPContextEnable, "1"), WithOption(OptionEPContextFilePath, path))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "would overwrite it")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after)
}

// tamper rewrites the context model at path through edit and saves it as name in its directory.
func tamper(t *testing.T, path, name string, edit func(n *graph.Node)) string {
	t.Helper()
	m, n := epcNode(t, path)
	edit(n)
	out := filepath.Join(filepath.Dir(path), name)
	saveModel(t, m, out)
	return out
}

func TestEPContextCorruptBlob(t *testing.T) {
	rnd := inferRand()
	dir := t.TempDir()
	_, path := writeEPContextModel(t, epcMLP(t, rnd), dir, "1")

	// A flipped byte anywhere in the body fails the checksum.
	flipped := tamper(t, path, "flipped.onnx", func(n *graph.Node) {
		b := n.Attr("ep_cache_context").String
		b[epcontext.HeaderBytes+rnd.IntN(len(b)-epcontext.HeaderBytes)] ^= byte(1 + rnd.IntN(255))
	})
	_, err := Load(flipped)
	require.Error(t, err)
	assert.ErrorIs(t, err, tensor.ErrInvalidArgument)
	assert.Contains(t, err.Error(), `EPContext node "loom_mlp"`)
	assert.Contains(t, err.Error(), "checksum mismatch")

	// Truncated: a section runs past the end (the checksum resealed, so the structure is what fails).
	truncated := tamper(t, path, "truncated.onnx", func(n *graph.Node) {
		b := n.Attr("ep_cache_context").String
		n.Attr("ep_cache_context").String = resealEPContextBlob(b[:len(b)-1-rnd.IntN(100)])
	})
	_, err = Load(truncated)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `EPContext node "loom_mlp"`)
	assert.Contains(t, err.Error(), "exceeds the")

	// Not a blob at all.
	garbage := tamper(t, path, "garbage.onnx", func(n *graph.Node) {
		n.Attr("ep_cache_context").String = []byte("QNN context binary")
	})
	_, err = Load(garbage)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "shorter than the 48 byte header")

	// A shared object that does not match its artifact's digest.
	badSO := tamper(t, path, "bad_so.onnx", func(n *graph.Node) {
		blob, err := epcontext.Decode(n.Attr("ep_cache_context").String)
		require.NoError(t, err)
		require.NotEmpty(t, blob.Kernels)
		img := append([]byte{}, blob.Kernels[0].Image...)
		img[len(img)/2] ^= 0xff
		blob.Kernels[0].Image = img
		enc, err := epcontext.Encode(blob)
		require.NoError(t, err)
		n.Attr("ep_cache_context").String = enc
	})
	_, err = Load(badSO)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "shared object's SHA-256")

	// A blob file that was cut short.
	_, path0 := writeEPContextModel(t, epcMLP(t, rnd), filepath.Join(dir, ""), "0")
	blobPath := filepath.Join(dir, "mlp_ctx_loom.bin")
	blob, err := os.ReadFile(blobPath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(blobPath, blob[:len(blob)/2], 0o644))
	_, err = Load(path0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `blob file "mlp_ctx_loom.bin" is not a valid Loom context blob`)
	assert.Contains(t, err.Error(), "checksum mismatch")
}

// resealSourceKey gives an EPContext node's notes the source key of its embedded payload,
// provider and hardware_architecture.
func resealSourceKey(t *testing.T, n *graph.Node) {
	t.Helper()
	var notes epContextNotes
	require.NoError(t, json.Unmarshal([]byte(n.AttrString("notes", "")), &notes))
	notes.SourceKey = epcontext.SourceKey(notes.Provider, n.AttrString("hardware_architecture", ""), n.Attr("ep_cache_context").String)
	data, err := json.Marshal(notes)
	require.NoError(t, err)
	n.Attr("notes").String = data
}

// resealEPContextBlob recomputes a blob's checksum over whatever its body now is.
func resealEPContextBlob(b []byte) []byte {
	if len(b) < epcontext.HeaderBytes {
		return b
	}
	out := append([]byte{}, b...)
	sum := sha256.Sum256(out[epcontext.HeaderBytes:])
	copy(out[16:], sum[:])
	return out
}

func TestEPContextBlobFileMustStayInside(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "models")
	require.NoError(t, os.Mkdir(dir, 0o755))
	_, path := writeEPContextModel(t, epcMLP(t, inferRand()), dir, "0")
	// A copy of the real blob outside the model directory, so only the location is at fault.
	blob, err := os.ReadFile(filepath.Join(dir, "mlp_ctx_loom.bin"))
	require.NoError(t, err)
	outside := filepath.Join(root, "outside.bin")
	require.NoError(t, os.WriteFile(outside, blob, 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "link.bin")))

	for _, c := range []struct{ name, location, msg string }{
		{"dotdot", "../outside.bin", "escapes the context model's directory"},
		{"nested dotdot", "sub/../../outside.bin", "escapes the context model's directory"},
		{"absolute", outside, "is absolute"},
		{"symlink", "link.bin", "through a symbolic link"},
	} {
		bad := tamper(t, path, "escape.onnx", func(n *graph.Node) { n.Attr("ep_cache_context").String = []byte(c.location) })
		_, err := Load(bad)
		require.Error(t, err, c.name)
		assert.ErrorIs(t, err, tensor.ErrInvalidArgument, c.name)
		assert.Contains(t, err.Error(), `EPContext node "loom_mlp"`, c.name)
		assert.Contains(t, err.Error(), c.msg, c.name)
	}
	// A subfolder inside the directory is fine.
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.Rename(filepath.Join(dir, "mlp_ctx_loom.bin"), filepath.Join(dir, "sub", "b.bin")))
	good := tamper(t, path, "sub_ok.onnx", func(n *graph.Node) { n.Attr("ep_cache_context").String = []byte("sub/b.bin") })
	s, err := Load(good)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	// From memory the blob file is found through ep.context_file_path.
	data, err := os.ReadFile(good)
	require.NoError(t, err)
	_, err = LoadBytes(data)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "set session option ep.context_file_path")
	s, err = LoadBytes(data, WithOption(OptionEPContextFilePath, good))
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

func TestEPContextForeignAndMismatched(t *testing.T) {
	rnd := inferRand()
	_, path := writeEPContextModel(t, epcMLP(t, rnd), t.TempDir(), "1")

	qnn := tamper(t, path, "qnn.onnx", func(n *graph.Node) {
		n.Name = "QNNExecutionProvider_QNN_part_0"
		n.Attr("source").String = []byte("QNN")
	})
	_, err := Load(qnn)
	require.Error(t, err)
	assert.ErrorIs(t, err, tensor.ErrInvalidArgument)
	assert.Contains(t, err.Error(), `EPContext node "QNNExecutionProvider_QNN_part_0" has source "QNN"`)

	sdk := tamper(t, path, "sdk.onnx", func(n *graph.Node) { n.Attr("ep_sdk_version").String = []byte("loom-9.9.9") })
	_, err = Load(sdk)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `EPContext node "loom_mlp": ep_sdk_version is "loom-9.9.9" but this Loom is "`+loom.CompilerVersion+`"`)

	// reencode edits the blob and, as a context consistently written elsewhere would be,
	// gives the node the blob's target and a source key that matches it.
	reencode := func(name string, edit func(b *epcontext.Blob)) string {
		return tamper(t, path, name, func(n *graph.Node) {
			blob, err := epcontext.Decode(n.Attr("ep_cache_context").String)
			require.NoError(t, err)
			edit(blob)
			enc, err := epcontext.Encode(blob)
			require.NoError(t, err)
			n.Attr("ep_cache_context").String = enc
			n.Attr("hardware_architecture").String = []byte(blob.Meta.Target)
			resealSourceKey(t, n)
		})
	}
	here := sessiontest.OpenHost(t, 1).Target()
	other := "host-x86_64-v1"
	if here == other {
		other = "host-x86_64-v2"
	}
	target := reencode("target.onnx", func(b *epcontext.Blob) {
		b.Meta.Target = other
		for _, k := range b.Kernels {
			k.Artifact.Target = other
		}
	})
	_, err = Load(target)
	require.Error(t, err)
	assert.ErrorIs(t, err, tensor.ErrTargetMismatch)
	assert.Contains(t, err.Error(), `EPContext node "loom_mlp": the context was compiled for target `+other)
	assert.Contains(t, err.Error(), "needs "+here)

	version := reencode("version.onnx", func(b *epcontext.Blob) { b.Meta.CompilerVersion = "loom-0.0.1" })
	_, err = Load(version)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `the blob was compiled by Loom "loom-0.0.1" but this Loom is "`+loom.CompilerVersion+`"`)

	library := reencode("library.onnx", func(b *epcontext.Blob) { b.Kernels[0].SourceSHA256 = strings.Repeat("ab", 32) })
	_, err = Load(library)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "with SHA-256 "+strings.Repeat("ab", 32)+" but this Loom's")

	// An EPContext node among other nodes, and a context model asked to write a context.
	mixed := tamper(t, path, "mixed.onnx", func(n *graph.Node) {})
	m, err := graph.Load(mixed)
	require.NoError(t, err)
	m.Graph.Nodes[0].Outputs = []string{"y0"}
	m.Graph.Nodes = append(m.Graph.Nodes, graph.NewNode("id", "Identity", []string{"y0"}, []string{"y"}))
	saveModel(t, m, mixed)
	_, err = Load(mixed)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "holds one EPContext node and no other, this graph has 2 nodes")
	_, err = Load(path, WithOption(OptionEPContextEnable, "1"), WithOption(OptionEPContextFilePath, filepath.Join(t.TempDir(), "c.onnx")))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "already an EP context model")
}

// TestEPContextCUDA writes a context on CUDA device 0 and runs it there without compiling; a
// host session refuses it, naming both targets. Skipped without a CUDA device.
func TestEPContextCUDA(t *testing.T) {
	cudaTarget := sessiontest.CUDADevice(t).Target()
	rnd := inferRand()
	path := filepath.Join(t.TempDir(), "mlp_cuda_ctx.onnx")
	src, err := FromGraph(epcMLP(t, rnd), WithExecutionProvider(ProviderCUDA), WithOption(OptionEPContextEnable, "1"), WithOption(OptionEPContextFilePath, path))
	require.NoError(t, err)
	defer src.Close()
	require.Equal(t, ProviderCUDA, src.Provider())

	freshLoomCache(t)
	s, err := Load(path)
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, ProviderCUDA, s.Provider())
	for range 3 {
		x := randomF32(rnd, 12)
		assert.Equal(t, runF32(t, src, "x", []int64{1, 12}, x), runF32(t, s, "x", []int64{1, 12}, x))
	}
	st := s.CacheStats()
	assert.Zero(t, st.Run.Compiles)
	assert.Zero(t, st.Run.Misses)
	assert.Positive(t, st.Run.Hits)

	_, err = Load(path, WithExecutionProvider(ProviderHost))
	require.Error(t, err)
	assert.ErrorIs(t, err, tensor.ErrTargetMismatch)
	assert.Contains(t, err.Error(), "compiled for target "+cudaTarget)
}
