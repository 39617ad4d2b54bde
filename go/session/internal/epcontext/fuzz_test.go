package epcontext

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzDecodeEPContextBlob feeds the context blob decoder arbitrary bytes, as they are and with
// the checksum recomputed (so the structure checks behind it are reached, not only the
// checksum). It must never panic; whatever it accepts must encode and decode to the same blob.
func FuzzDecodeEPContextBlob(f *testing.F) {
	rnd := rand.New(rand.NewPCG(1, 2)) // fixed seeds for a reproducible corpus
	enc, err := Encode(sampleEPContextBlob(rnd))
	require.NoError(f, err)
	f.Add(enc)
	f.Add(enc[:HeaderBytes])
	f.Add(enc[:len(enc)/2])
	empty, err := Encode(&Blob{Meta: Meta{CompilerVersion: "v", Target: "t", Backend: "cuda"}, Graph: []byte{1}})
	require.NoError(f, err)
	f.Add(empty)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, resealEPContextBlob(data)} {
			b, err := Decode(in)
			if err != nil {
				continue
			}
			again, err := Encode(b)
			require.NoError(t, err)
			b2, err := Decode(again)
			require.NoError(t, err, "a decoded blob re-encodes to one that decodes")
			require.Equal(t, b.Meta, b2.Meta)
			require.Equal(t, b.Graph, b2.Graph)
			require.Equal(t, len(b.Kernels), len(b2.Kernels))
		}
	})
}
