package npy

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/session"
)

// TestRoundTrip writes random tensors of several element types and ranks and reads them back.
func TestRoundTrip(t *testing.T) {
	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	dir := t.TempDir()
	f := make([]float32, 2*3*5)
	for i := range f {
		f[i] = rnd.Float32()*2 - 1
	}
	i64 := []int64{rnd.Int64(), -rnd.Int64(), 0}
	u8 := []uint8{uint8(rnd.IntN(256)), uint8(rnd.IntN(256))}
	bs := []bool{rnd.IntN(2) == 0, true, false}
	for name, tensor := range map[string]session.Tensor{
		"f32":    session.MustTensor([]int64{2, 3, 5}, f),
		"i64":    session.MustTensor([]int64{3}, i64),
		"u8":     session.MustTensor([]int64{1, 2}, u8),
		"bool":   session.MustTensor([]int64{3}, bs),
		"scalar": session.MustTensor([]int64{}, []float32{f[0]}),
	} {
		path := filepath.Join(dir, name+".npy")
		require.NoError(t, Write(path, tensor), name)
		got, err := Read(path)
		require.NoError(t, err, name)
		assert.Equal(t, tensor.DType(), got.DType(), name)
		assert.Equal(t, tensor.Shape(), got.Shape(), name)
		assert.Equal(t, tensor.Data(), got.Data(), name)
	}
}

// TestDecodeRefusesBadFiles: what is not a .npy file, or one this package cannot read, is an
// error naming the file and the problem.
func TestDecodeRefusesBadFiles(t *testing.T) {
	good := filepath.Join(t.TempDir(), "x.npy")
	require.NoError(t, Write(good, session.MustTensor([]int64{4}, []float32{1, 2, 3, 4})))
	b, err := os.ReadFile(good)
	require.NoError(t, err)
	for _, c := range []struct {
		data []byte
		says string
	}{
		{[]byte("PK\x03\x04 a zip"), "is not a .npy file"},
		{b[:9], "is not a .npy file"},
		{b[:20], "truncated header"},
		{[]byte(string(b[:10]) + string(b[10:]) + "extra"), "x.npy"},
		{replace(b, "'<f4'", "'>f4'"), "NumPy type >f4 is not supported"},
		{replace(b, "False", "True "), "Fortran order"},
		{replace(b, "(4,)", "(-4,)"), "bad shape"},
	} {
		_, err := Decode("x.npy", c.data)
		require.Error(t, err, "%q", c.data)
		assert.Contains(t, err.Error(), c.says)
	}
}

func replace(b []byte, old, new string) []byte {
	return []byte(strings.Replace(string(b), old, new, 1))
}
