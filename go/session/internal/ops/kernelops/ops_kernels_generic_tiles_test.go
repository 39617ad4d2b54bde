package kernelops

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/session/internal/ops"
)

// gemmCall is the plan's gemm_nn call, if it has one.
func gemmCall(p *ops.KernelPlan) (ops.KernelCall, bool) {
	for _, c := range p.Calls {
		if c.Symbol == "gemm_nn" {
			return c, true
		}
	}
	return ops.KernelCall{}, false
}

// TestGenericGemmTiles checks the tile genericGemmNN gives random products of each class of
// shape: the first generic tile (of the register file's set) that fits, whatever the epilogue,
// and the one-element tile for matrices smaller than every tile and for epilogues the tiles do
// not ship; on AVX-512's register file and AVX2's.
func TestGenericGemmTiles(t *testing.T) {
	for _, target := range []string{"host-x86_64-v4", "host-x86_64-v3"} {
		t.Run(target, func(t *testing.T) {
			defer SetVectorFile(loom.MustParseTarget(target))()
			testGenericGemmTiles(t)
		})
	}
}

// TestGemmTilesFitTheRegisterFile checks that the register tiles gemm_nn gets, chosen by the
// planner (bestNN) or generic, keep their accumulators, B's vectors (one, for a one-row tile) and a broadcast in the
// vector registers of AVX-512, AVX2 and NEON (a tile that does not fit reloads B for every
// row: 46-66 GFLOP/s on AVX2 where one that fits makes 88-100), and that the planner's choices
// for BERT-base's products are the tiles measured best on each (8 x 3 vectors on AVX-512, 4 x 1
// on AVX2).
func TestGemmTilesFitTheRegisterFile(t *testing.T) {
	// A one-row tile uses each vector of B once: it needs no register to keep them.
	fits := func(mr, nv, vl, ks int) bool {
		rpv := ceilDiv(vl*4, vectorRegBytes)
		b := nv * rpv
		if mr == 1 {
			b = rpv
		}
		return mr*nv*rpv*ks+b+1 <= vectorRegs
	}
	for _, target := range []string{"host-x86_64-v4", "host-x86_64-v3", "host-aarch64-v8"} {
		restore := SetVectorFile(loom.MustParseTarget(target))
		for _, g := range genericTiles() {
			require.True(t, fits(g.mr, g.nv, g.vl, g.ks), "%s: generic tile %+v", target, g)
		}
		for m := 1; m <= 64; m++ {
			for _, n := range []int{16, 48, 64, 100, 768, 3072} {
				tile, _ := gemmSpec{m: m, k: 768, n: n, nb0: 1, nb1: 1}.bestNN()
				require.True(t, fits(tile.mr, tile.nv, tile.vl, 1), "%s: %dx768x%d: %+v", target, m, n, tile)
			}
		}
		for _, n := range []int{768, 2304, 3072} {
			tile, _ := gemmSpec{m: 128, k: 768, n: n, nb0: 1, nb1: 1}.bestNN()
			switch target {
			case "host-x86_64-v4":
				require.Equal(t, nnTile{mr: 8, nv: 3, vl: 16, ks: 1}, tile, "%s n=%d", target, n)
			case "host-x86_64-v3":
				require.Equal(t, nnTile{mr: 4, nv: 1, vl: 16, ks: 1}, tile, "%s n=%d", target, n)
			}
		}
		restore()
	}
}

// bmm's register tile (MR rows by NV vectors of 16 lanes, default NV 2) fits each host's vector
// registers with B's vectors and a broadcast: on AVX-512 the planner keeps NV 2; on AVX2 and
// NEON tiles of 4 and 6 rows take one vector (6 x 2 such vectors are 24 of AVX2's 16
// registers: they spilled; kernels/aot/corpus.txt ships both variants).
func TestBMMTilesFitTheRegisterFile(t *testing.T) {
	for _, target := range []string{"host-x86_64-v4", "host-x86_64-v3", "host-aarch64-v8"} {
		restore := SetVectorFile(loom.MustParseTarget(target))
		for _, m := range []int{1, 2, 3, 4, 5, 6, 7, 128} {
			c := bmmSpec{m: m, n: 128, k: 64, dims: [3]int{1, 1, 12}}.call()
			mr, _ := strconv.Atoi(c.Config["MR"])
			nv := 2
			if v, ok := c.Config["NV"]; ok {
				nv, _ = strconv.Atoi(v)
			}
			rpv := ceilDiv(16*4, vectorRegBytes)
			require.LessOrEqual(t, mr*nv*rpv+nv*rpv+1, vectorRegs, "%s m=%d: %v", target, m, c.Config)
			if target == "host-x86_64-v4" || mr <= 2 {
				require.Equal(t, 2, nv, "%s m=%d: two vectors fit", target, m)
			}
		}
		restore()
	}
}

func testGenericGemmTiles(t *testing.T) {
	want := func(m, n int, cfg map[string]string) string {
		if genericTileEpilogue(cfg) {
			for _, g := range genericTiles() {
				if m >= g.mr && n >= g.nv*g.vl {
					return fmt.Sprintf("%d,%d,%d,%d", g.mr, g.nv, g.vl, g.ks)
				}
			}
		}
		if m >= 4 && n >= 8 && cfg["ACT"] == "0" && cfg["AFFINE"] == "false" {
			return "4,1,8,2"
		}
		return "1,1,1,1"
	}
	tried := 0
	for i := range 60 {
		m, k, n := 1+rand.IntN(40), 1+rand.IntN(50), 1+rand.IntN(80)
		node := graph.NewNode("n", "MatMul", nil, []string{"y"})
		in := []ops.ValueInfo{{ValueType: ops.ValueType{Dtype: graph.Float, Shape: []int64{int64(m), int64(k)}}, Present: true},
			{ValueType: ops.ValueType{Dtype: graph.Float, Shape: []int64{int64(k), int64(n)}}, Present: true}}
		p, _, err := planMatMul(node, 18, in)
		require.NoError(t, err)
		require.NotNil(t, p)
		c, ok := gemmCall(p)
		if !ok {
			continue // a matrix-vector product (gemm_nt)
		}
		tried++
		// Epilogues: none, GELU (MatMulAdd), FusedConv's with the affine map and a bias per
		// row, and the affine map with C rows (no planner makes it; the one-element tile).
		switch i % 4 {
		case 1:
			c.Config["ACT"] = "9"
		case 2:
			c.Config["ACT"], c.Config["AFFINE"], c.Config["CMODE"] = "7", "true", "2"
		case 3:
			c.Config["ACT"], c.Config["AFFINE"], c.Config["CMODE"] = "4", "true", "1"
		}
		p.Calls = []ops.KernelCall{c}
		g := GenericPlan("MatMul", node, 18, in, p)
		require.NotNil(t, g, "%dx%dx%d", m, k, n)
		gc, ok := gemmCall(g)
		require.True(t, ok)
		got := fmt.Sprintf("%s,%s,%s,%s", gc.Config["MR"], gc.Config["NV"], gc.Config["VL"], gc.Config["KS"])
		require.Equal(t, want(m, n, c.Config), got, "%dx%dx%d %v", m, k, n, c.Config)
		require.Equal(t, "false", gc.Config["PACKA"])
	}
	require.Greater(t, tried, 20)
}

// TestGenericDepthwisePlan checks the shape-generic plan of depthwise convolutions: conv_dw
// alone on x when nothing needs padding, after conv_pad_any otherwise, every extent, stride
// and dilation passed at run time, and a constant of zeros for a missing bias.
func TestGenericDepthwisePlan(t *testing.T) {
	for _, tc := range []struct {
		name           string
		pads, strides  []int64
		bias, wantsPad bool
	}{
		{"no_padding", []int64{0, 0, 0, 0}, []int64{1, 1}, true, false},
		{"padding", []int64{1, 2, 1, 0}, []int64{1, 1}, false, true},
		{"column_stride", []int64{0, 0, 0, 0}, []int64{1, 2}, true, true},
		{"row_stride", []int64{0, 0, 0, 0}, []int64{2, 1}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := int64(2 + rand.IntN(30))
			node := graph.NewNode("n", "Conv", nil, []string{"y"}, graph.IntsAttr("kernel_shape", 3, 5), graph.IntsAttr("pads", tc.pads...),
				graph.IntsAttr("strides", tc.strides...), graph.IntAttr("group", c))
			in := []ops.ValueInfo{{ValueType: ops.ValueType{Dtype: graph.Float, Shape: []int64{1, c, 9, 40}}, Present: true},
				{ValueType: ops.ValueType{Dtype: graph.Float, Shape: []int64{c, 1, 3, 5}}, Present: true}}
			if tc.bias {
				in = append(in, ops.ValueInfo{ValueType: ops.ValueType{Dtype: graph.Float, Shape: []int64{c}}, Present: true})
			}
			g := GenericPlan("Conv", node, 17, in, &ops.KernelPlan{})
			require.NotNil(t, g)
			var syms []string
			for _, call := range g.Calls {
				syms = append(syms, call.Symbol)
			}
			if tc.wantsPad {
				require.Equal(t, []string{"conv_pad_any", "conv_dw"}, syms)
			} else {
				require.Equal(t, []string{"conv_dw"}, syms)
			}
			dw := g.Calls[len(g.Calls)-1]
			require.Equal(t, map[string]string{"VL": "16", "NV": "4", "NY": "4", "ACT": "0", "AFFINE": "false"}, dw.Config)
			// kh, kw, sh, sw, dh, dw
			require.Equal(t, []uint64{3, 5, U(int(tc.strides[0])), U(int(tc.strides[1])), 1, 1}, dw.Args[7:13])
			if !tc.bias {
				require.Len(t, g.Consts, 1)
				require.Equal(t, make([]float32, c), g.Consts[0].Data())
				require.Equal(t, ops.ConstOperand(0), dw.Bind[2].Operand)
			}
			require.Contains(t, g.Reason, "depthwise")
		})
	}
}
