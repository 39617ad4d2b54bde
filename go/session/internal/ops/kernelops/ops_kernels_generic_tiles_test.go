package kernelops

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
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
// shape: the first genericNN tile that fits, whatever the epilogue, and the one-element tile
// for matrices smaller than every tile and for epilogues the tiles do not ship.
func TestGenericGemmTiles(t *testing.T) {
	want := func(m, n int, cfg map[string]string) string {
		if genericTileEpilogue(cfg) {
			for _, g := range genericNN {
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
