package tensor

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A relaid tensor reads as its elements in row-major order through every accessor (each read
// a new slice, so a reader changing it changes nothing held), and reports its length and
// validity without unpacking.
func TestRelaidReadsAsStored(t *testing.T) {
	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	want := make([]float32, 6)
	for i := range want {
		want[i] = rnd.Float32()
	}
	// The "layout": the elements reversed.
	packed := make([]float32, 6)
	for i, v := range want {
		packed[5-i] = v
	}
	unpacks := 0
	rt, err := NewRelaid([]int64{2, 3}, "reversed", packed, func(p, dst []float32) {
		unpacks++
		for i := range dst {
			dst[i] = p[len(p)-1-i]
		}
	})
	require.NoError(t, err)
	assert.True(t, rt.IsValid())
	assert.Equal(t, 6, rt.Len())
	assert.Equal(t, []int64{2, 3}, rt.Shape())
	assert.Zero(t, unpacks, "length, shape and validity need no unpacking")

	assert.Equal(t, want, rt.Data().([]float32))
	got, err := TensorOf[float32](rt)
	require.NoError(t, err)
	got[0] = -1 // a copy
	assert.Equal(t, want, rt.Data().([]float32))
	c, err := CopyOut(rt)
	require.NoError(t, err)
	assert.Nil(t, RelaidOf(c))
	assert.Equal(t, want, c.Data().([]float32))
	r := rt.Reshaped(3, 2)
	assert.Equal(t, want, r.Data().([]float32))
	assert.Equal(t, []int64{3, 2}, r.Shape())
	f := Float64s(rt)
	for i := range want {
		assert.Equal(t, float64(want[i]), f[i])
	}
	assert.Equal(t, []float32{want[5], want[0]}, Take(rt, []int64{2}, []int{5, 0}).Data().([]float32))
	assert.Same(t, &packed[0], &RelaidOf(rt).Packed[0], "the layout's own elements, for the kernels made for it")

	_, err = NewRelaid([]int64{2, 0}, "x", nil, func(p, dst []float32) {})
	assert.Error(t, err, "no elements")
	_, err = NewRelaid([]int64{2}, "x", packed, nil)
	assert.Error(t, err, "no unpack function")
}
