package loom_test

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/loom/internal/hostrun"
)

const reverseSrc = `
// reverse reverses each block's slice of x through shared memory.
kernel reverse[BLOCK index = 64] {
	launch(n index) {
		grid = (ceil_div(n, BLOCK), 1, 1)
		block = (BLOCK, 1, 1)
		shared = BLOCK * sizeof(f32)
	}
	device(x buffer[f32] read, y buffer[f32] write, n index) {
		assume len(x) >= n && len(y) >= n
		S := shared(f32, [BLOCK])
		i := block_id.x * BLOCK + thread_id.x
		if i < n {
			S[thread_id.x] = x[i]
		}
		barrier()
		// i is recomputed after the barrier; the mirrored element was written by another thread.
		mirror := BLOCK - 1 - thread_id.x
		if i < n && block_id.x * BLOCK + mirror < n {
			y[i] = S[mirror]
		}
	}
}
`

func TestBarrierAndSharedMemory(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	a := compileInline(t, c, reverseSrc, "reverse", map[string]string{"BLOCK": "32"})
	require.Equal(t, 0, generatedGuards(a.Source), a.Source)
	n := 100 + r.IntN(100)
	x := randF32(r, n)
	y := make([]float32, n)
	want := make([]float32, n)
	for b := 0; b*32 < n; b++ {
		for t := 0; t < 32; t++ {
			i, m := b*32+t, b*32+31-t
			if i < n && m < n {
				want[i] = x[m]
			}
		}
	}
	res := launch(t, a, [][]byte{hostrun.F32(x), hostrun.F32(y)}, 2, int64(n))
	require.Zero(t, res.Violation)
	require.Equal(t, want, hostrun.ToF32(res.Buffers[1]))
	cuda, err := loom.Emit(loom.KernelSource{Name: "r.loom", Source: []byte(reverseSrc)}, sm90, loom.EmitCUDA)
	require.NoError(t, err)
	require.Contains(t, cuda, "__syncthreads();")
}

// TestValidTestdataCompiles takes the checker's all-constructs file through the whole pipeline.
func TestValidTestdataCompiles(t *testing.T) {
	c := newCompiler(t)
	data, err := os.ReadFile(filepath.Join("types", "testdata", "valid.loom"))
	require.NoError(t, err)
	src := loom.KernelSource{Name: "valid.loom", Source: data, Specialization: loom.Specialization{Symbol: "valid"}}
	_, err = c.Compile(src, loom.HostTarget())
	require.NoError(t, err)
	src.Specialization.Config = map[string]string{"T": "f16", "FAST": "false", "VL": "8"}
	_, err = c.Compile(src, loom.HostTarget())
	require.NoError(t, err)
	_, err = c.Compile(src, sm90)
	require.NoError(t, err)
}

const blockSumSrc = `
// block_sum adds each block's slice of x with a tree of LOG2 barrier steps in shared memory
// (an unroll loop with barriers: the unroll pass leaves them at the top level).
kernel block_sum[BLOCK index = 64, LOG2 index = 6] {
	launch(n index) {
		grid = (ceil_div(n, BLOCK), 1, 1)
		block = (BLOCK, 1, 1)
		shared = BLOCK * sizeof(f32)
	}
	device(x buffer[f32] read, y buffer[f32] write, n index) {
		assume len(x) >= n && len(y) >= ceil_div(n, BLOCK)
		S := shared(f32, [BLOCK])
		t := thread_id.x
		i := block_id.x * BLOCK + t
		var v f32
		if i < n {
			v = x[i]
		}
		S[t] = v
		for s := unroll(LOG2) {
			barrier()
			h := BLOCK >> (s + 1)
			if t < h {
				S[t] = S[t] + S[t + h]
			}
		}
		barrier()
		if t == 0 {
			y[block_id.x] = S[0]
		}
	}
}
`

// TestBarriersInUnrollLoops runs a block reduction whose tree steps are an unroll loop with a
// barrier in each step, on the host (each step its own loop over the threads) against Go,
// and checks the CUDA C has a __syncthreads() per step.
func TestBarriersInUnrollLoops(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	for _, block := range []int{32, 128} {
		log2 := 5
		if block == 128 {
			log2 = 7
		}
		cfg := map[string]string{"BLOCK": strconv.Itoa(block), "LOG2": strconv.Itoa(log2)}
		a := compileInline(t, c, blockSumSrc, "block_sum", cfg)
		n := 3*block + 1 + r.IntN(block)
		x := randF32(r, n)
		blocks := (n + block - 1) / block
		y := make([]float32, blocks)
		res := launch(t, a, [][]byte{hostrun.F32(x), hostrun.F32(y)}, 2, int64(n))
		require.Zero(t, res.Violation)
		got := hostrun.ToF32(res.Buffers[1])
		for b := range blocks {
			var want float64
			for i := b * block; i < min(n, (b+1)*block); i++ {
				want += float64(x[i])
			}
			require.InDelta(t, want, float64(got[b]), 1e-4*(1+math.Abs(want)), "block %d of %d", b, block)
		}
		cuda, err := loom.Emit(loom.KernelSource{Name: "s.loom", Source: []byte(blockSumSrc), Specialization: loom.Specialization{Symbol: "block_sum", Config: cfg}}, sm90, loom.EmitCUDA)
		require.NoError(t, err)
		require.Equal(t, log2+1, strings.Count(cuda, "__syncthreads();"), cuda)
	}
}

const tiledSrc = `
// tiled computes C = s ⊙ (A·B) a BM x BN tile a block: the k loop walks tiles of BK through
// shared memory with a barrier after each load and each use; every thread keeps a TM x TN
// register tile (acc) and a value it loaded (s) across the barriers. The k tiles are visited
// as pairs in two nested range loops, the inner bound computed from the outer variable.
kernel tiled[TX index = 8, TY index = 4, TM index = 2, TN index = 2, BK index = 4] {
	const BM = TY * TM
	const BN = TX * TN
	const NT = TX * TY
	launch(m index, n index) {
		grid = (ceil_div(n, BN), ceil_div(m, BM), 1)
		block = (TX, TY, 1)
		shared = (BK * BM + BK * BN) * sizeof(f32)
	}
	device(a buffer[f32] read, b buffer[f32] read, sc buffer[f32] read, c buffer[f32] write,
		m index, n index, k index) {
		assume k >= 0
		A := view(a, [m, k])
		B := view(b, [k, n])
		C := view(c, [m, n])
		AS := shared(f32, [BK, BM])
		BS := shared(f32, [BK, BN], BK * BM)
		tx := thread_id.x
		ty := thread_id.y
		t := ty * TX + tx
		s := sc[t]
		i0 := block_id.y * BM
		j0 := block_id.x * BN
		nt := ceil_div(k, BK)
		var acc [TM][TN]f32
		for kp := range(0, nt, 2) {
			for kt := range(kp, min(kp + 2, nt)) {
				p0 := kt * BK
				for e := range(t, BK * BM, NT) {
					q := e / BM
					r := e % BM
					var v f32
					if i0 + r < m && p0 + q < k {
						v = A[i0 + r, p0 + q]
					}
					AS[q, r] = v
				}
				for e := range(t, BK * BN, NT) {
					q := e / BN
					u := e % BN
					var v f32
					if p0 + q < k && j0 + u < n {
						v = B[p0 + q, j0 + u]
					}
					BS[q, u] = v
				}
				barrier()
				for q := unroll(BK) {
					for r := unroll(TM) {
						av := AS[q, ty * TM + r]
						for u := unroll(TN) {
							acc[r][u] = fma(av, BS[q, tx * TN + u], acc[r][u])
						}
					}
				}
				barrier()
			}
		}
		for r := unroll(TM) {
			for u := unroll(TN) {
				i := i0 + ty * TM + r
				j := j0 + tx * TN + u
				if i < m && j < n {
					C[i, j] = acc[r][u] * s
				}
			}
		}
	}
}
`

// TestBarriersInRangeLoops runs a shared-memory tiled matrix product whose k loop (two nested
// range loops) holds barriers, with a register tile and a loaded value kept per thread across
// them, on the host against Go; the CUDA C keeps the loops and puts __syncthreads() in them.
func TestBarriersInRangeLoops(t *testing.T) {
	c := newCompiler(t)
	r := newRand(t)
	cfg := map[string]string{"TX": "8", "TY": "4", "TM": "2", "TN": "2", "BK": "4"}
	a := compileInline(t, c, tiledSrc, "tiled", cfg)
	require.Contains(t, a.Source, "loom_lin")
	for _, shape := range [][3]int{{1, 1, 1}, {8, 16, 4}, {13, 37, 0}, {13, 37, 1}, {29, 45, 23}, {3 + r.IntN(40), 3 + r.IntN(40), 1 + r.IntN(40)}} {
		m, n, k := shape[0], shape[1], shape[2]
		x, y, s := randF32(r, m*k), randF32(r, k*n), randF32(r, 32)
		out := make([]float32, m*n)
		res := launch(t, a, [][]byte{hostrun.F32(x), hostrun.F32(y), hostrun.F32(s), hostrun.F32(out)}, 2, int64(m), int64(n), int64(k))
		require.Zero(t, res.Violation, "m %d n %d k %d", m, n, k)
		got := hostrun.ToF32(res.Buffers[3])
		ref := refGEMM(x, y, m, n, k)
		for i := range m {
			for j := range n {
				th := (i%8)/2*8 + (j%16)/2
				want := ref[i*n+j] * s[th]
				require.InDelta(t, want, got[i*n+j], 1e-4*(1+math.Abs(float64(want))), "m %d n %d k %d: C[%d, %d]", m, n, k, i, j)
			}
		}
	}
	cuda, err := loom.Emit(loom.KernelSource{Name: "t.loom", Source: []byte(tiledSrc), Specialization: loom.Specialization{Symbol: "tiled", Config: cfg}}, sm90, loom.EmitCUDA)
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(cuda, "__syncthreads();"), cuda)
	require.NotContains(t, cuda, "loom_lin")
}
