package epcontext

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/session/internal/sessiontest"
)

// resealEPContextBlob recomputes a blob's checksum over whatever its body now is.
func resealEPContextBlob(b []byte) []byte {
	if len(b) < HeaderBytes {
		return b
	}
	out := append([]byte{}, b...)
	sum := sha256.Sum256(out[HeaderBytes:])
	copy(out[16:], sum[:])
	return out
}

func TestEPContextBlobRoundTrip(t *testing.T) {
	b := sampleEPContextBlob(sessiontest.NewRand(t))
	enc, err := Encode(b)
	require.NoError(t, err)
	dec, err := Decode(enc)
	require.NoError(t, err)
	assert.Equal(t, b.Meta, dec.Meta)
	assert.Equal(t, b.Graph, dec.Graph)
	assert.Equal(t, b.Kernels, dec.Kernels)
	again, err := Encode(dec)
	require.NoError(t, err)
	assert.Equal(t, enc, again, "encoding is deterministic")

	// Every proper prefix fails with an error, never a panic.
	for n := range len(enc) {
		_, err := Decode(resealEPContextBlob(enc[:n]))
		require.Error(t, err, "prefix of %d bytes", n)
	}
	// A format version this Loom does not read.
	v2 := append([]byte{}, enc...)
	binary.LittleEndian.PutUint32(v2[8:], 2)
	_, err = Decode(v2)
	assert.ErrorContains(t, err, "format version 2, this Loom reads version 1")
}

// sampleEPContextBlob is a blob with two synthetic host kernels (never loaded, so the images
// need only match their digests).
func sampleEPContextBlob(rnd *rand.Rand) *Blob {
	const target = "host-x86_64-v3"
	b := &Blob{
		Meta:  Meta{Format: FormatName, CompilerVersion: loom.CompilerVersion, Target: target, Backend: "host", PartitionName: "loom_g", SourceModel: "g"},
		Graph: []byte("graph bytes"),
	}
	for i, sym := range []string{"gemm", "unary"} {
		img := make([]byte, 16+rnd.IntN(64))
		for j := range img {
			img[j] = byte(rnd.UintN(256))
		}
		sum := sha256.Sum256(img)
		src := sha256.Sum256([]byte(sym))
		b.Kernels = append(b.Kernels, Kernel{
			KernelRecord: KernelRecord{
				File: "linalg.loom", Symbol: sym, Config: map[string]string{"OP": string(rune('0' + i))},
				SourceSHA256: hex.EncodeToString(src[:]),
				Artifact: &loom.Artifact{Target: target, Kernel: sym, Entry: sym, Key: hex.EncodeToString(sum[:]),
					Launch: sampleLaunch().Launch, SOSHA256: hex.EncodeToString(sum[:])},
			},
			Image: img,
		})
	}
	b.Meta.Kernels = len(b.Kernels)
	return b
}

// sampleLaunch is a launch program as Loom's artifacts carry it (JSON), never evaluated here.
func sampleLaunch() *loom.Artifact {
	var a loom.Artifact
	if err := json.Unmarshal([]byte(`{"launch":{"param_types":["i64"],"instrs":[{"op":"param","imm":0,"type":"i64"}],"grid":[0,0,0],"block":[0,0,0],"shared":0}}`), &a); err != nil {
		panic(err)
	}
	return &a
}
