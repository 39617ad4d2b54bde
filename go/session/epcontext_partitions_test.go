package session

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/epcontext"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

func TestEpContextConfig(t *testing.T) {
	rnd := inferRand()
	s, err := FromGraph(epcMLP(t, rnd), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, EpContextConfig{EmbedMode: 1}, s.EpContextConfig(), "disabled by default, embed mode 1")

	dir := t.TempDir()
	modelPath := filepath.Join(dir, "m.onnx")
	saveModel(t, epcMLP(t, rnd), modelPath)
	w, err := Load(modelPath, WithExecutionProvider(ProviderHost), WithOption(OptionEPContextEnable, "1"), WithOption(OptionEPContextEmbedMode, "0"))
	require.NoError(t, err)
	defer w.Close()
	assert.Equal(t, EpContextConfig{Enable: true, FilePath: filepath.Join(dir, "m_ctx.onnx"), EmbedMode: 0}, w.EpContextConfig())

	for _, bad := range []LoadOption{
		WithOption(OptionEPContextEnable, "yes"),
		WithOption(OptionEPContextEmbedMode, "2"),
		WithOption(OptionEPContextFilePath, " "),
	} {
		_, err := FromGraph(epcMLP(t, rnd), bad)
		require.Error(t, err)
		assert.ErrorIs(t, err, tensor.ErrInvalidArgument)
		assert.Contains(t, err.Error(), "ep.context_")
	}
}

// standInSeamContext builds a session of the seam model (MatMul, CumSum without a kernel, Add)
// on the cuda stand-in that writes its context model into dir, and returns it with the
// weights and the context model's path.
func standInSeamContext(t *testing.T, dir, embed string) (s *InferenceSession, w, b []float32, path string) {
	t.Helper()
	rnd := inferRand()
	const in, out = 7, 5
	w, b = randomF32(rnd, in*out), randomF32(rnd, out)
	path = filepath.Join(dir, "seam_ctx.onnx")
	s, err := FromGraph(seamModel(t, w, b, in, out), WithExecutionProvider(ProviderCUDA), WithOption(OptionCUDAStandIn, "1"),
		WithOption(OptionEPContextEnable, "1"), WithOption(OptionEPContextFilePath, path), WithOption(OptionEPContextEmbedMode, embed))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.Equal(t, path, s.EPContextPath())
	return s, w, b, path
}

// checkSeam runs s on random rows and compares with the reference.
func checkSeam(t *testing.T, s *InferenceSession, w, b []float32, rows int) {
	t.Helper()
	const in, out = 7, 5
	x := randomF32(inferRand(), rows*in)
	got := runF32(t, s, "x", []int64{int64(rows), in}, x)
	for i, v := range seamReference(x, w, b, rows, in, out) {
		require.InDelta(t, v, got[i], 1e-4, "element %d", i)
	}
}

// nodeOf returns the context model's EPContext node named name.
func nodeOf(t *testing.T, m *graph.Model, name string) *graph.Node {
	t.Helper()
	for _, n := range m.Graph.Nodes {
		if n.Name == name {
			return n
		}
	}
	require.FailNow(t, "no node "+name)
	return nil
}

func notesOf(t *testing.T, n *graph.Node) epContextNotes {
	t.Helper()
	var notes epContextNotes
	require.NoError(t, json.Unmarshal([]byte(n.AttrString("notes", "")), &notes))
	return notes
}

// On the cuda stand-in a session with a host fallback has a cuda and a host partition; its
// context model holds one EPContext node for each, and loads back on the stand-in without
// compiling.
func TestEPContextPartitionsCUDAStandIn(t *testing.T) {
	for _, embed := range []string{"1", "0"} {
		t.Run("embed_mode="+embed, func(t *testing.T) {
			dir := t.TempDir()
			src, w, b, path := standInSeamContext(t, dir, embed)
			parts, err := src.Partitions()
			require.NoError(t, err)
			require.Len(t, parts, 2)
			cuda, host := parts[0], parts[1]
			assert.Equal(t, "loom_seam_cuda", cuda.Name)
			assert.Equal(t, ProviderCUDA, cuda.Provider)
			assert.Equal(t, []string{"mm", "add"}, cuda.Nodes)
			assert.Equal(t, src.DeviceID().Target, cuda.Target)
			assert.Equal(t, "loom_seam_host", host.Name)
			assert.Equal(t, ProviderHost, host.Provider)
			assert.Equal(t, []string{"cs"}, host.Nodes)
			for _, p := range parts {
				assert.Equal(t, epcontext.SourceKey(string(p.Provider), p.Target, p.Payload), p.SourceKey)
			}
			cb, err := epcontext.Decode(cuda.Payload)
			require.NoError(t, err)
			assert.NotEmpty(t, cb.Kernels, "the cuda partition carries the kernels")
			hb, err := epcontext.Decode(host.Payload)
			require.NoError(t, err)
			assert.Empty(t, hb.Kernels, "CumSum runs as a Go host function")

			cm, err := graph.Load(path)
			require.NoError(t, err)
			require.Len(t, cm.Graph.Nodes, 2)
			cn, hn := nodeOf(t, cm, "loom_seam_cuda"), nodeOf(t, cm, "loom_seam_host")
			assert.Equal(t, []string{"x"}, cn.Inputs)
			assert.Equal(t, []string{"h", "y"}, cn.Outputs)
			assert.Equal(t, []string{"h"}, hn.Inputs)
			assert.Empty(t, hn.Outputs, "c goes back to the earlier partition: not wired")
			assert.Equal(t, "cuda", notesOf(t, cn).Provider)
			assert.Equal(t, []string{"cs"}, notesOf(t, hn).Nodes)
			assert.Equal(t, cuda.SourceKey, notesOf(t, cn).SourceKey)
			if embed == "0" {
				assert.Equal(t, "seam_ctx_loom_seam_cuda.bin", string(cn.Attr("ep_cache_context").String))
				data, err := os.ReadFile(filepath.Join(dir, "seam_ctx_loom_seam_host.bin"))
				require.NoError(t, err)
				assert.Equal(t, host.Payload, data)
			}

			freshLoomCache(t)
			s, err := Load(path, WithExecutionProvider(ProviderCUDA), WithOption(OptionCUDAStandIn, "1"))
			require.NoError(t, err)
			defer s.Close()
			assert.Equal(t, ProviderCUDA, s.Provider())
			assert.Len(t, s.Graph().Graph.Nodes, 3)
			for range 3 {
				checkSeam(t, s, w, b, 1)
			}
			assert.Zero(t, s.CacheStats().Run.Compiles, "the kernels came from the cuda partition")
			checkSeam(t, s, w, b, 3)

			// Without the stand-in the cuda partition needs a CUDA device; on the host, never.
			_, err = Load(path, WithExecutionProvider(ProviderHost))
			require.Error(t, err)
			assert.ErrorIs(t, err, tensor.ErrTargetMismatch)
			assert.Contains(t, err.Error(), `EPContext node "loom_seam_cuda"`)
			assert.Contains(t, err.Error(), "by the cuda provider, which this session does not run on")
			_, err = Load(path)
			require.Error(t, err)
			assert.ErrorIs(t, err, tensor.ErrTargetMismatch)
			assert.Contains(t, err.Error(), `EPContext node "loom_seam_cuda"`)
		})
	}
}

func TestEPContextPartitionsHost(t *testing.T) {
	rnd := inferRand()
	src, path := writeEPContextModel(t, epcMLP(t, rnd), t.TempDir(), "1")
	parts, err := src.Partitions()
	require.NoError(t, err)
	require.Len(t, parts, 1)
	p := parts[0]
	assert.Equal(t, "loom_mlp", p.Name)
	assert.Equal(t, ProviderHost, p.Provider)
	var ids []string
	for _, n := range src.Graph().Graph.Nodes {
		ids = append(ids, n.Name)
	}
	assert.Equal(t, ids, p.Nodes, "the host partition covers every node, by name")
	_, node := epcNode(t, path)
	assert.Equal(t, p.Payload, node.Attr("ep_cache_context").String)
	assert.Equal(t, p.SourceKey, notesOf(t, node).SourceKey)

	// Exporting again writes the same context model.
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	out, err := src.ExportEpContext("", parts)
	require.NoError(t, err)
	assert.Equal(t, path, out)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after)
}

// TestExportEpContextRefuses covers ExportEpContext's failures, on the host provider and on
// the cuda stand-in: nothing is written.
func TestExportEpContextRefuses(t *testing.T) {
	rnd := inferRand()
	host, hostPath := writeEPContextModel(t, epcMLP(t, rnd), t.TempDir(), "1")
	hostParts, err := host.Partitions()
	require.NoError(t, err)
	standIn, _, _, standInPath := standInSeamContext(t, t.TempDir(), "0")
	siParts, err := standIn.Partitions()
	require.NoError(t, err)

	clone := func(ps []CompiledPartition) []CompiledPartition {
		out := make([]CompiledPartition, len(ps))
		for i, p := range ps {
			p.Nodes = append([]string{}, p.Nodes...)
			p.Payload = append([]byte{}, p.Payload...)
			out[i] = p
		}
		return out
	}
	rekey := func(p *CompiledPartition) {
		p.SourceKey = epcontext.SourceKey(string(p.Provider), p.Target, p.Payload)
	}
	cases := []struct {
		name   string
		s      *InferenceSession
		parts  []CompiledPartition
		edit   func(ps []CompiledPartition) []CompiledPartition
		kind   error
		errMsg string
	}{
		{"no partitions", host, hostParts, func(ps []CompiledPartition) []CompiledPartition { return nil },
			tensor.ErrInvalidArgument, "no partitions to write"},
		{"dangling node", host, hostParts, func(ps []CompiledPartition) []CompiledPartition {
			ps[0].Nodes = append(ps[0].Nodes, "ghost")
			return ps
		}, tensor.ErrInvalidArgument, `partition 0 ("loom_mlp"): covered node "ghost" is not a node of the session's graph`},
		{"uncovered node", host, hostParts, func(ps []CompiledPartition) []CompiledPartition {
			ps[0].Nodes = ps[0].Nodes[1:]
			return ps
		}, tensor.ErrInvalidArgument, "is in no partition"},
		{"tampered payload", host, hostParts, func(ps []CompiledPartition) []CompiledPartition {
			ps[0].Payload[len(ps[0].Payload)-1-rnd.IntN(100)] ^= 0x10
			return ps
		}, tensor.ErrInvalidArgument, "the payload does not match the source key"},
		{"payload for another target", host, hostParts, func(ps []CompiledPartition) []CompiledPartition {
			ps[0].Target = "host-x86_64-v1"
			if host.DeviceID().Target == ps[0].Target {
				ps[0].Target = "host-x86_64-v2"
			}
			rekey(&ps[0])
			return ps
		}, tensor.ErrTargetMismatch, "the payload is for target " + host.DeviceID().Target},
		{"payload for another provider", host, hostParts, func(ps []CompiledPartition) []CompiledPartition {
			ps[0].Provider = ProviderCUDA
			rekey(&ps[0])
			return ps
		}, tensor.ErrInvalidArgument, "the payload was compiled by the host provider, not cuda"},
		{"unknown provider", host, hostParts, func(ps []CompiledPartition) []CompiledPartition {
			ps[0].Provider = "tpu"
			rekey(&ps[0])
			return ps
		}, tensor.ErrInvalidArgument, `unknown execution provider "tpu"`},
		{"node in two partitions", standIn, siParts, func(ps []CompiledPartition) []CompiledPartition {
			ps[1].Nodes = append(ps[1].Nodes, "mm")
			return ps
		}, tensor.ErrInvalidArgument, `partition 1 ("loom_seam_host"): node "mm" is covered by partition "loom_seam_cuda" too`},
		{"nodes not in the payload", standIn, siParts, func(ps []CompiledPartition) []CompiledPartition {
			ps[0].Nodes, ps[1].Nodes = []string{"mm", "cs"}, []string{"add"}
			return ps
		}, tensor.ErrInvalidArgument, `EPContext node "loom_seam_cuda": covered node "cs" is not in its payload's graph`},
		{"duplicate name", standIn, siParts, func(ps []CompiledPartition) []CompiledPartition {
			ps[1].Name = ps[0].Name
			return ps
		}, tensor.ErrInvalidArgument, "partition 0 has the same name"},
		{"swapped payloads", standIn, siParts, func(ps []CompiledPartition) []CompiledPartition {
			ps[0].Payload, ps[1].Payload = ps[1].Payload, ps[0].Payload
			return ps
		}, tensor.ErrInvalidArgument, "the payload does not match the source key"},
	}
	hostBefore, err := os.ReadFile(hostPath)
	require.NoError(t, err)
	siBefore, err := os.ReadFile(standInPath)
	require.NoError(t, err)
	for _, c := range cases {
		_, err := c.s.ExportEpContext("", c.edit(clone(c.parts)))
		require.Error(t, err, c.name)
		assert.ErrorIs(t, err, c.kind, c.name)
		assert.Contains(t, err.Error(), c.errMsg, c.name)
	}
	after, err := os.ReadFile(hostPath)
	require.NoError(t, err)
	assert.Equal(t, hostBefore, after, "a refused export writes nothing")
	after, err = os.ReadFile(standInPath)
	require.NoError(t, err)
	assert.Equal(t, siBefore, after, "a refused export writes nothing")
}

func TestExportEpContextDisabledAndClosed(t *testing.T) {
	rnd := inferRand()
	dir := t.TempDir()
	s, err := FromGraph(epcMLP(t, rnd), WithExecutionProvider(ProviderHost))
	require.NoError(t, err)
	orig := filepath.Join(dir, "model.onnx")
	path, err := s.ExportEpContext(orig, nil)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "model_ctx.onnx"), path)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "disabled: nothing is written")
	_, err = s.ExportEpContext("", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ep.context_file_path")
	_, err = s.Partitions()
	require.Error(t, err)
	assert.ErrorIs(t, err, tensor.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "ep.context_enable=1")
	require.NoError(t, s.Close())

	w, _ := writeEPContextModel(t, epcMLP(t, rnd), t.TempDir(), "1")
	parts, err := w.Partitions()
	require.NoError(t, err)
	require.NoError(t, w.Close())
	_, err = w.Partitions()
	assert.ErrorIs(t, err, tensor.ErrClosed)
	_, err = w.ExportEpContext("", parts)
	assert.ErrorIs(t, err, tensor.ErrClosed)
}

// TestEPContextPartitionsLoadRefuses covers the loader's failures on a context model of two
// partitions (the cuda stand-in's): each names the EPContext node at fault.
func TestEPContextPartitionsLoadRefuses(t *testing.T) {
	rnd := inferRand()
	dir := t.TempDir()
	_, _, _, path := standInSeamContext(t, dir, "1")
	standIn := []LoadOption{WithExecutionProvider(ProviderCUDA), WithOption(OptionCUDAStandIn, "1")}
	edit := func(name string, f func(m *graph.Model)) string {
		m, err := graph.Load(path)
		require.NoError(t, err)
		f(m)
		out := filepath.Join(dir, name)
		saveModel(t, m, out)
		return out
	}
	reseal := func(n *graph.Node, b *epcontext.Blob) {
		enc, err := epcontext.Encode(b)
		require.NoError(t, err)
		n.Attr("ep_cache_context").String = enc
		resealSourceKey(t, n)
	}
	setNotes := func(n *graph.Node, f func(*epContextNotes)) {
		notes := notesOf(t, n)
		f(&notes)
		data, err := json.Marshal(notes)
		require.NoError(t, err)
		n.Attr("notes").String = data
	}
	cases := []struct {
		name, node, msg string
		kind            error
		f               func(m *graph.Model)
	}{
		{"flipped byte", "loom_seam_host", "checksum mismatch", tensor.ErrInvalidArgument, func(m *graph.Model) {
			b := nodeOf(t, m, "loom_seam_host").Attr("ep_cache_context").String
			b[epcontext.HeaderBytes+rnd.IntN(len(b)-epcontext.HeaderBytes)] ^= byte(1 + rnd.IntN(255))
		}},
		{"swapped payloads", "loom_seam_cuda", "does not match the node's source key", tensor.ErrInvalidArgument, func(m *graph.Model) {
			c, h := nodeOf(t, m, "loom_seam_cuda").Attr("ep_cache_context"), nodeOf(t, m, "loom_seam_host").Attr("ep_cache_context")
			c.String, h.String = h.String, c.String
		}},
		{"resealed blob", "loom_seam_cuda", "does not match the node's source key", tensor.ErrInvalidArgument, func(m *graph.Model) {
			n := nodeOf(t, m, "loom_seam_cuda")
			b, err := epcontext.Decode(n.Attr("ep_cache_context").String)
			require.NoError(t, err)
			b.Meta.SourceModel = "another"
			enc, err := epcontext.Encode(b)
			require.NoError(t, err)
			n.Attr("ep_cache_context").String = enc
		}},
		{"payload for another target", "loom_seam_host", "the payload is for target host-aarch64-v8 but the node's hardware_architecture is", tensor.ErrTargetMismatch, func(m *graph.Model) {
			n := nodeOf(t, m, "loom_seam_host")
			b, err := epcontext.Decode(n.Attr("ep_cache_context").String)
			require.NoError(t, err)
			b.Meta.Target = "host-aarch64-v8"
			reseal(n, b)
		}},
		{"payload for another provider", "loom_seam_host", "the payload was compiled by the cuda provider but the node names the host provider", tensor.ErrInvalidArgument, func(m *graph.Model) {
			n := nodeOf(t, m, "loom_seam_host")
			b, err := epcontext.Decode(n.Attr("ep_cache_context").String)
			require.NoError(t, err)
			b.Meta.Backend = "cuda"
			reseal(n, b)
		}},
		{"dangling node", "loom_seam_host", `covered node "ghost" is not in its payload's graph`, tensor.ErrInvalidArgument, func(m *graph.Model) {
			setNotes(nodeOf(t, m, "loom_seam_host"), func(n *epContextNotes) { n.Nodes = append(n.Nodes, "ghost") })
		}},
		{"unlisted node", "loom_seam_cuda", `its payload's graph has node "add", which it does not list as covered`, tensor.ErrInvalidArgument, func(m *graph.Model) {
			setNotes(nodeOf(t, m, "loom_seam_cuda"), func(n *epContextNotes) { n.Nodes = []string{"mm"} })
		}},
		{"unknown provider", "loom_seam_host", `unknown execution provider "npu"`, tensor.ErrInvalidArgument, func(m *graph.Model) {
			setNotes(nodeOf(t, m, "loom_seam_host"), func(n *epContextNotes) { n.Provider = "npu" })
		}},
		{"notes without a partition", "loom_seam_host", "notes name no partition", tensor.ErrInvalidArgument, func(m *graph.Model) {
			setNotes(nodeOf(t, m, "loom_seam_host"), func(n *epContextNotes) { n.Provider, n.Nodes, n.SourceKey = "", nil, "" })
		}},
		{"missing partition", "loom_seam_cuda", "the partitions' graphs do not join", tensor.ErrInvalidArgument, func(m *graph.Model) {
			m.Graph.Nodes = m.Graph.Nodes[:1]
			m.Graph.Nodes[0].Outputs = []string{"h", "y"}
		}},
	}
	for _, c := range cases {
		_, err := Load(edit(c.name+".onnx", c.f), standIn...)
		require.Error(t, err, c.name)
		assert.ErrorIs(t, err, c.kind, c.name)
		assert.Contains(t, err.Error(), `EPContext node "`+c.node+`"`, c.name)
		assert.Contains(t, err.Error(), c.msg, c.name)
	}
}

// A context model written before partitions (one EPContext node whose notes name no
// partition) still loads.
func TestEPContextLegacySingleNode(t *testing.T) {
	rnd := inferRand()
	src, path := writeEPContextModel(t, epcMLP(t, rnd), t.TempDir(), "1")
	legacy := tamper(t, path, "legacy.onnx", func(n *graph.Node) {
		notes := notesOf(t, n)
		data, err := json.Marshal(map[string]any{"loom_target": notes.LoomTarget, "loom_backend": notes.LoomBackend,
			"blob_format": notes.BlobFormat, "kernels": notes.Kernels})
		require.NoError(t, err)
		n.Attr("notes").String = data
	})
	freshLoomCache(t)
	s, err := Load(legacy)
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, ProviderHost, s.Provider())
	x := randomF32(rnd, 12)
	assert.Equal(t, runF32(t, src, "x", []int64{1, 12}, x), runF32(t, s, "x", []int64{1, 12}, x))
	assert.Zero(t, s.CacheStats().Run.Compiles)
}
