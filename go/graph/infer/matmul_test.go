package infer_test

import (
	"testing"

	"github.com/loomrt/loom/go/graph/infer"
	"github.com/stretchr/testify/assert"
)

func TestMatMulShapes(t *testing.T) {
	for _, tc := range []struct {
		a, b, out, batch []int64
		m, k, n          int64
	}{
		{[]int64{2, 3}, []int64{3, 4}, []int64{2, 4}, []int64{}, 2, 3, 4},
		{[]int64{3}, []int64{3, 4}, []int64{4}, []int64{}, 1, 3, 4},
		{[]int64{2, 3}, []int64{3}, []int64{2}, []int64{}, 2, 3, 1},
		{[]int64{3}, []int64{3}, []int64{}, []int64{}, 1, 3, 1},
		{[]int64{5, 1, 2, 3}, []int64{7, 3, 4}, []int64{5, 7, 2, 4}, []int64{5, 7}, 2, 3, 4},
		{[]int64{4}, []int64{6, 4, 2}, []int64{6, 2}, []int64{6}, 1, 4, 2},
	} {
		d, err := infer.MatMulShapes(tc.a, tc.b)
		assert.NoError(t, err)
		assert.Equal(t, tc.out, d.Out, "%v x %v", tc.a, tc.b)
		assert.Equal(t, tc.batch, d.Batch, "%v x %v", tc.a, tc.b)
		assert.Equal(t, [3]int64{tc.m, tc.k, tc.n}, [3]int64{d.M, d.K, d.N})
	}
	_, err := infer.MatMulShapes([]int64{2, 3}, []int64{4, 5})
	assert.ErrorContains(t, err, "MatMul: inner dimensions differ: A [2,3], B [4,5]")
	_, err = infer.MatMulShapes([]int64{}, []int64{4})
	assert.ErrorContains(t, err, "rank 1 or more")
	_, err = infer.MatMulShapes([]int64{2, 2, 3}, []int64{3, 3, 4})
	assert.Error(t, err, "batch axes 2 and 3 do not broadcast")
}
