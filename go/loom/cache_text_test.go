package loom_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
)

// TestRunOnlyLookupLeavesTheTextOnDisk: a host artifact's C source and IR are kept in a .txt
// beside its metadata; a run-only request served from the cache comes without them (the .txt
// unread, so a corrupt one goes unnoticed there), any other with them, checked.
func TestRunOnlyLookupLeavesTheTextOnDisk(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	c := loom.NewCompiler(loom.Config{CacheDir: dir})
	defer c.Close()
	fresh, err := c.Compile(fillSource(t, nil), loom.HostTarget())
	require.NoError(t, err)
	require.NotEmpty(t, fresh.Source)
	require.NotEmpty(t, fresh.IR)
	base := strings.TrimSuffix(fresh.SharedObject, ".so")
	meta := mustRead(t, base+".json")
	require.Contains(t, fresh.Source, "loom_k_fill")
	require.NotContains(t, string(meta), "loom_k_fill", "the metadata holds no C source")
	require.Less(t, len(meta), len(fresh.Source), "the metadata is smaller than the source alone")

	runOnly := func(c *loom.Compiler) *loom.Artifact {
		res := c.CompileBatch(ctx, []loom.Request{{Source: fillSource(t, nil), Target: loom.HostTarget(), RunOnly: true}})[0]
		require.NoError(t, res.Err)
		return res.Artifact
	}
	c2 := loom.NewCompiler(loom.Config{CacheDir: dir})
	defer c2.Close()
	lean := runOnly(c2)
	require.Equal(t, loom.CacheStats{Hits: 1}, c2.Stats())
	require.Empty(t, lean.Source)
	require.Empty(t, lean.IR)
	require.Equal(t, fresh.Key, lean.Key)
	require.Equal(t, fresh.Launch, lean.Launch)
	require.Equal(t, fresh.Params, lean.Params)
	require.Equal(t, fresh.SharedObject, lean.SharedObject)
	res := launch(t, lean, [][]byte{make([]byte, 40)}, 1, float32(1), int64(10))
	require.Zero(t, res.Violation)
	full, err := c2.Compile(fillSource(t, nil), loom.HostTarget())
	require.NoError(t, err)
	require.Equal(t, loom.CacheStats{Hits: 2}, c2.Stats())
	require.Equal(t, fresh.Source, full.Source)
	require.Equal(t, fresh.IR, full.IR)

	// A corrupt .txt: the run-only lookup still hits; a full one compiles again and writes
	// the entry anew.
	text := mustRead(t, base+".txt")
	text[len(text)/2] ^= 0xff
	require.NoError(t, os.WriteFile(base+".txt", text, 0o644))
	c3 := loom.NewCompiler(loom.Config{CacheDir: dir})
	defer c3.Close()
	require.Empty(t, runOnly(c3).Source)
	require.Equal(t, loom.CacheStats{Hits: 1}, c3.Stats())
	again, err := c3.Compile(fillSource(t, nil), loom.HostTarget())
	require.NoError(t, err)
	require.Equal(t, loom.CacheStats{Hits: 1, Misses: 1, Corrupt: 1}, c3.Stats())
	require.Equal(t, fresh.Source, again.Source)
	// A missing one likewise.
	require.NoError(t, os.Remove(base+".txt"))
	c4 := loom.NewCompiler(loom.Config{CacheDir: dir})
	defer c4.Close()
	_, err = c4.Compile(fillSource(t, nil), loom.HostTarget())
	require.NoError(t, err)
	require.Equal(t, loom.CacheStats{Misses: 1, Corrupt: 1}, c4.Stats())
	_, err = os.Stat(base + ".txt")
	require.NoError(t, err, "written again")

	// An entry written before the .txt (the text in the metadata) is read whole either way.
	var art map[string]any
	require.NoError(t, json.Unmarshal(mustRead(t, base+".json"), &art))
	inner := art["artifact"].(map[string]any)
	inner["source"], inner["ir"] = fresh.Source, fresh.IR
	raw, err := json.Marshal(inner)
	require.NoError(t, err)
	sum := sha256.Sum256(raw)
	old, err := json.Marshal(map[string]any{"artifact": json.RawMessage(raw), "digest": hex.EncodeToString(sum[:])})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(base+".json", old, 0o644))
	require.NoError(t, os.Remove(base+".txt"))
	c5 := loom.NewCompiler(loom.Config{CacheDir: dir})
	defer c5.Close()
	require.Equal(t, fresh.Source, runOnly(c5).Source)
	oldFull, err := c5.Compile(fillSource(t, nil), loom.HostTarget())
	require.NoError(t, err)
	require.Equal(t, fresh.IR, oldFull.IR)
	require.Equal(t, loom.CacheStats{Hits: 2}, c5.Stats())
}

// TestCUDAArtifactsKeepTheirSourceInTheMetadata: a CUDA artifact's source is what its image
// is compiled from, read with the metadata (no .txt), run-only or not.
func TestCUDAArtifactsKeepTheirSourceInTheMetadata(t *testing.T) {
	dir := t.TempDir()
	c := loom.NewCompiler(loom.Config{CacheDir: dir})
	defer c.Close()
	fresh, err := c.Compile(fillSource(t, nil), sm90)
	require.NoError(t, err)
	c2 := loom.NewCompiler(loom.Config{CacheDir: dir})
	defer c2.Close()
	res := c2.CompileBatch(context.Background(), []loom.Request{{Source: fillSource(t, nil), Target: sm90, RunOnly: true}})[0]
	require.NoError(t, res.Err)
	require.Equal(t, loom.CacheStats{Hits: 1}, c2.Stats())
	require.Equal(t, fresh.Source, res.Artifact.Source)
	texts, err := filepath.Glob(filepath.Join(dir, "*", "*.txt"))
	require.NoError(t, err)
	require.Empty(t, texts)
}
