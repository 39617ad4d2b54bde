package session

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/ops/kernelops"
	"github.com/loomrt/loom/go/session/internal/tensor"
	"github.com/loomrt/loom/kernels/aot"
)

// TestShippedEpiloguesWithoutACompiler runs every shipped gemm_nn (A unpacked; B as given, or
// packed into column panels for PACKB) and gemm_nt variant of this machine's target that has
// an epilogue (ACT, AFFINE), and every shipped gemm_tiled variant (the GPU planners', run here
// on the host backend), with no C compiler, on
// fresh random inputs and every C mode, and compares it with the product and epilogue computed
// on the host: the shipped code of each specialization, not only the ones a test model reaches.
func TestShippedEpiloguesWithoutACompiler(t *testing.T) {
	t.Setenv("CC", filepath.Join(t.TempDir(), "no-cc"))
	t.Setenv("LOOM_CACHE_DIR", t.TempDir())
	rnd := inferRand()
	seed := tensor.MustTensor([]int64{2, 3}, randomF32(rnd, 6))
	s, _ := oneNodeSession(t, graph.NewNode("n", "Neg", nil, []string{"y"}), 17, []tensor.Tensor{seed})
	comp, err := s.eng.Ctx.Compiler()
	require.NoError(t, err)
	atoi := func(cfg map[string]string, k string) int {
		v, err := strconv.Atoi(cfg[k])
		require.NoError(t, err, "%s=%q", k, cfg[k])
		return v
	}
	f32 := func(v float64) uint64 { return uint64(math.Float32bits(float32(v))) }
	tested := map[string]int{}
	for _, v := range aot.Variants() {
		cfg := v.Config
		tiled := v.File == "gemm_gpu.loom" && v.Symbol == "gemm_tiled"
		if v.Target != comp.Target.String() || !tiled && (v.File != "gemm_fast.loom" || (v.Symbol != "gemm_nn" && v.Symbol != "gemm_nt")) {
			continue
		}
		if !tiled && ((cfg["ACT"] == "0" || cfg["ACT"] == "") && cfg["AFFINE"] != "true" || cfg["PACKA"] == "true") {
			continue
		}
		act, cmode := atoi(cfg, "ACT"), atoi(cfg, "CMODE")
		nt := v.Symbol == "gemm_nt"
		var m, n, k int
		switch {
		case tiled: // a tile and a part, k no multiple of BK
			m, n, k = atoi(cfg, "BM")+5, atoi(cfg, "BN")+3, 2*atoi(cfg, "BK")+3
		case nt:
			m, n, k = 2*atoi(cfg, "MR")+1, 2*atoi(cfg, "NC")+1, 2*atoi(cfg, "VL")+3
		default:
			m, n, k = 2*atoi(cfg, "MR")+1, 2*atoi(cfg, "NV")*atoi(cfg, "VL")+3, 7
		}
		name := fmt.Sprintf("%s_%s", v.Symbol, v.Key[:12])
		t.Run(name, func(t *testing.T) {
			a, b := randomF32(rnd, m*k), randomF32(rnd, k*n) // A [m, k]; B [k, n] (gemm_nt: [n, k])
			var c []float32
			var cs2, cs3 int
			switch cmode {
			case 1:
				c, cs2, cs3 = randomF32(rnd, m*n), n, 1
			case 2:
				c, cs2, cs3 = randomF32(rnd, m), 1, 0
			default:
				c = randomF32(rnd, 1)
			}
			alpha, beta := 0.7, 1.3
			p := [4]float64{0.3, 0.45, 0.9, 0.1}
			switch act {
			case 6: // clip bounds
				p[0], p[1] = -0.5, 0.6
			case 8:
				p[0] = 1.1
			}
			args := []uint64{1, 1, kernelops.U(m), kernelops.U(n), kernelops.U(k), 0, 0, kernelops.U(k), 1, 0, 0, kernelops.U(n), 0, 0, kernelops.U(cs2), kernelops.U(cs3)}
			if nt { // as0 as1 as2 bs0 bs1 bs3 (A's rows and B's columns contiguous)
				args = []uint64{1, 1, kernelops.U(m), kernelops.U(n), kernelops.U(k), 0, 0, kernelops.U(k), 0, 0, kernelops.U(k), 0, 0, kernelops.U(cs2), kernelops.U(cs3)}
			}
			if tiled { // as0..as3 bs0..bs3
				args = []uint64{1, 1, kernelops.U(m), kernelops.U(n), kernelops.U(k), 0, 0, kernelops.U(k), 1, 0, 0, kernelops.U(n), 1, 0, 0, kernelops.U(cs2), kernelops.U(cs3)}
			}
			args = append(args, f32(alpha), f32(beta), f32(p[0]), f32(p[1]), f32(p[2]), f32(p[3]))
			out := tensor.MustTensor([]int64{int64(m), int64(n)}, make([]float32, m*n))
			plan := &ops.KernelPlan{
				Outputs: []ops.ValueType{{Dtype: out.DType(), Shape: out.Dims()}},
				Calls: []ops.KernelCall{{File: v.File, Symbol: v.Symbol, Config: cfg, Args: args, Workload: args[:4],
					Bind: []ops.KernelBinding{ops.ReadOf(ops.InputOperand(0)), ops.ReadOf(ops.InputOperand(1)), ops.ReadOf(ops.InputOperand(2)), ops.WriteOf(ops.OutputOperand(0))}}},
			}
			require.NoError(t, ops.FitPlan(plan, ops.KernelLimits))
			bound := b
			if cfg["PACKB"] == "true" { // B in column panels of NV/PS·VL (the last one overlapping)
				ps := 1
				if _, ok := cfg["PS"]; ok {
					ps = atoi(cfg, "PS")
				}
				nr := atoi(cfg, "NV") / ps * atoi(cfg, "VL")
				bound = nil
				for tile := 0; tile < (n+nr-1)/nr; tile++ {
					j0 := min(tile*nr, n-nr)
					for q := range k {
						bound = append(bound, b[q*n+j0:q*n+j0+nr]...)
					}
				}
			}
			in := []tensor.Tensor{tensor.MustTensor([]int64{int64(m * k)}, a), tensor.MustTensor([]int64{int64(len(bound))}, bound), tensor.MustTensor([]int64{int64(len(c))}, c)}
			rc := testRunCtx(s, 17)
			got, err := rc.RunKernelPlan(plan, in)
			rc.Close()
			require.NoError(t, err)
			g := tensor.Float64s(got[0])
			for i := range m {
				for j := range n {
					var acc float64
					for q := range k {
						bv := b[q*n+j]
						if nt {
							bv = b[j*k+q]
						}
						acc += float64(a[i*k+q]) * float64(bv)
					}
					y := alpha * acc
					switch cmode {
					case 1:
						y += beta * float64(c[i*n+j])
					case 2:
						y += beta * float64(c[i])
					}
					y = epilogue(act, y, p[0], p[1])
					if cfg["AFFINE"] == "true" {
						y = p[2]*y + p[3]
					}
					require.InDelta(t, y, g[i*n+j], 1e-4+1e-4*math.Abs(y), "%v: element [%d, %d]", cfg, i, j)
				}
			}
		})
		tested[v.Symbol+" ACT="+cfg["ACT"]]++
	}
	t.Logf("variants tested: %v", tested)
	for _, sym := range []string{"gemm_nn", "gemm_nt", "gemm_tiled"} {
		last := 10 // GELU (9, 10) is gemm_fast's only: the cuda planners follow gemm_tiled by the activation kernel
		if sym == "gemm_tiled" {
			last = 8
		}
		for act := 1; act <= last; act++ {
			require.Positive(t, tested[fmt.Sprintf("%s ACT=%d", sym, act)], "no shipped %s with ACT=%d", sym, act)
		}
	}
	require.Zero(t, s.CacheStats().Run.Compiles, "a kernel was compiled: the JIT should be unavailable")
}

// epilogue is gemm_fast.loom's activation ACT of t (p0, p1 its parameters).
func epilogue(act int, t, p0, p1 float64) float64 {
	switch act {
	case 1:
		return math.Max(t, 0)
	case 2:
		return 1 / (1 + math.Exp(-t))
	case 3:
		return math.Tanh(t)
	case 4:
		return ops.MathSelect(t < 0, p0*t, t)
	case 5:
		return math.Max(0, math.Min(1, p0*t+p1))
	case 6:
		return math.Min(math.Max(t, p0), p1)
	case 7:
		return t * math.Max(0, math.Min(1, t/6+0.5))
	case 8:
		return t / (1 + math.Exp(-p0*t))
	case 9:
		return 0.5 * t * (1 + math.Erf(t/math.Sqrt2))
	case 10:
		return 0.5 * t * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(t+0.044715*t*t*t)))
	}
	return t
}
