package kernelops

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
)

// A Transpose of the last two axes copies in transposeTile's blocks once both axes are long
// enough; one that keeps the innermost axis (the attention heads' [B, S, H, D] -> [B, H, S, D])
// and a short one keep the tile pickTile chooses.
func TestTransposeTakesSquareBlocks(t *testing.T) {
	cases := []struct {
		shape, perm []int64
		want        string
	}{
		{[]int64{1024, 1024}, []int64{1, 0}, "32x8"},
		{[]int64{2, 64, 48}, []int64{0, 2, 1}, "32x8"},
		{[]int64{2, 16, 4, 256}, []int64{0, 2, 1, 3}, "256x1"},
		{[]int64{1024, 8}, []int64{1, 0}, "256x1"},
	}
	for _, c := range cases {
		n := graph.NewNode("t", "Transpose", []string{"x"}, []string{"y"}, graph.IntsAttr("perm", c.perm...))
		p, reason, err := ops.KernelPlanners["Transpose"](n, 21, []ops.ValueInfo{{ValueType: ops.ValueType{Dtype: graph.Float, Shape: c.shape}, Present: true}})
		require.NoError(t, err)
		require.NotNil(t, p, reason)
		cfg := p.Calls[0].Config
		assert.Equal(t, c.want, fmt.Sprintf("%sx%s", cfg["BX"], cfg["BY"]), "%v perm %v", c.shape, c.perm)
	}
}
