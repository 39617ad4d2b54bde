package ep

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
)

// hostArtifact is an artifact whose "shared object" is random bytes in a file of dir.
func hostArtifact(t *testing.T, rnd *rand.Rand, dir string) (*loom.Artifact, []byte) {
	image := make([]byte, 16+rnd.IntN(256))
	for i := range image {
		image[i] = byte(rnd.IntN(256))
	}
	sum := sha256.Sum256(image)
	so := filepath.Join(dir, "k.so")
	require.NoError(t, os.WriteFile(so, image, 0o600))
	return &loom.Artifact{Target: "host-x86_64-v1", Key: hex.EncodeToString(sum[:]), SharedObject: so,
		SOSHA256: hex.EncodeToString(sum[:]), Source: "int k(void);", IR: "ir"}, image
}

func TestSaveRestoreHostKernel(t *testing.T) {
	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for _, p := range []Provider{HostProvider{}, CUDAStandIn{}} {
		a, image := hostArtifact(t, rnd, t.TempDir())
		got, err := p.SaveKernel(a)
		require.NoError(t, err)
		assert.Equal(t, image, got)
		assert.True(t, p.NeedsDir())

		dir := t.TempDir()
		r, err := p.RestoreKernel(*a, got, dir)
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(dir, a.Key+".so"), r.SharedObject)
		assert.Empty(t, r.Source, "the image, not the text, is what loads")
		written, err := os.ReadFile(r.SharedObject)
		require.NoError(t, err)
		assert.Equal(t, image, written)
		assert.Equal(t, "int k(void);", a.Source, "the artifact restored from is not changed")

		// A changed image, or a changed file behind the artifact, is refused.
		bad := append([]byte{}, image...)
		bad[rnd.IntN(len(bad))] ^= 0x01
		_, err = p.RestoreKernel(*a, bad, t.TempDir())
		assert.ErrorContains(t, err, "the shared object's SHA-256")
		_, err = p.RestoreKernel(*a, image, "")
		assert.ErrorContains(t, err, "no directory")
		require.NoError(t, os.WriteFile(a.SharedObject, bad, 0o600))
		_, err = p.SaveKernel(a)
		assert.ErrorContains(t, err, "changed since it was loaded")
		a.SharedObject = ""
		_, err = p.SaveKernel(a)
		assert.Error(t, err)
	}
}

func TestSaveRestoreCUDAKernel(t *testing.T) {
	p := CUDAProvider{}
	a := &loom.Artifact{Target: "sm_90", Key: "k", Source: "extern \"C\" __global__ void k() {}", IR: "ir"}
	image, err := p.SaveKernel(a)
	require.NoError(t, err)
	assert.Equal(t, a.Source, string(image))
	assert.False(t, p.NeedsDir())
	r, err := p.RestoreKernel(loom.Artifact{Target: "sm_90", Key: "k"}, image, "")
	require.NoError(t, err)
	assert.Equal(t, a.Source, r.Source)
	assert.Empty(t, r.IR)
	_, err = p.SaveKernel(&loom.Artifact{Target: "sm_90"})
	assert.ErrorContains(t, err, "has no source")
	_, err = p.RestoreKernel(loom.Artifact{}, nil, "")
	assert.ErrorContains(t, err, "empty CUDA source")
}
