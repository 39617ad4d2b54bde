package kernelops

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/loomrt/loom/go/loom"
)

// TestRegisterTilesFitTheRegisterFile checks the register budget the tile choices keep to:
// unchanged on AVX-512 (what the tiles were measured on), the same share of AVX2's and SSE's
// smaller files counted in registers, a 16-lane f32 vector taking two AVX2 registers.
func TestRegisterTilesFitTheRegisterFile(t *testing.T) {
	for _, c := range []struct {
		target      string
		regs, bytes int
	}{
		{"host-x86_64-v4", 32, 64},
		{"host-x86_64-v3", 16, 32},
		{"host-x86_64-v2", 16, 16},
		{"host-aarch64-v8", 32, 16},
		{"sm_90", 32, 64},
	} {
		regs, bytes := vectorFile(loom.MustParseTarget(c.target))
		assert.Equal(t, [2]int{c.regs, c.bytes}, [2]int{regs, bytes}, c.target)
	}
	for _, vl := range []int{1, 2, 4, 8, 16} {
		assert.Equal(t, 24, accumulatorsIn(24, vl, 32, 64), "AVX-512 keeps its measured bound (vl %d)", vl)
		assert.Equal(t, 16, accumulatorsIn(16, vl, 32, 64), "vl %d", vl)
	}
	assert.Equal(t, 6, accumulatorsIn(24, 16, 16, 32), "AVX2: 12 of 16 registers, two per 16 lanes")
	assert.Equal(t, 12, accumulatorsIn(24, 8, 16, 32))
	assert.Equal(t, 4, accumulatorsIn(16, 16, 16, 32))
	assert.Equal(t, 2, accumulatorsIn(8, 16, 16, 32), "depthwise")
	assert.Equal(t, 3, accumulatorsIn(24, 16, 16, 16), "SSE: four registers per 16 lanes")
	assert.Equal(t, 1, accumulatorsIn(8, 16, 16, 16), "at least one")

	// The budget bounds the tiles the planners choose on the host.
	g := gemmSpec{m: 512, n: 512, k: 512, nb0: 1, nb1: 1}
	nn, _ := g.bestNN()
	assert.LessOrEqual(t, nn.mr*nn.nv*nn.ks, accumulators(maxAccumulators, nn.vl), "%+v", nn)
	ct, _, ok := bestCoutTile(64, 14, 14, 32, [2]int{3, 3}, [2]int{1, 1}, [2]int{1, 1})
	assert.True(t, ok)
	assert.LessOrEqual(t, ct.mv*ct.ny*ct.np, accumulators(maxAccumulators, ct.vl), "%+v", ct)
	dt, _ := bestConvTile(64, 56, 56, 32, [2]int{3, 3}, [2]int{1, 1}, [2]int{1, 1})
	assert.LessOrEqual(t, dt.mr*dt.nvy*dt.nvx, accumulators(16, dt.vl), "%+v", dt)
}
