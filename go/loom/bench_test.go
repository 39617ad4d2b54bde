package loom_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/loom/internal/bench"
	"github.com/loomrt/loom/go/loom/internal/hostrun"
)

// BenchmarkGEMM1024 measures, in one run: the single-core FMA peak, the Loom sgemm at
// M=N=K=1024 (row-major) on one and two threads, and OpenBLAS on the same problem. Each reports
// GFLOP/s by wall time and by CPU time (GFLOP per CPU-second of all threads: per-core
// efficiency, robust to other processes sharing the machine), plus %peak of the CPU figures.
//
//	go test -run '^$' -bench GEMM1024 -benchtime 1x ./go/loom
func BenchmarkGEMM1024(b *testing.B) {
	const n = 1024
	flops := 2.0 * n * n * n
	isa := "avx2"
	if loom.HostTarget().Level == "v4" {
		isa = "avx512"
	}
	_, peakCPU, err := bench.Peak(isa)
	require.NoError(b, err)
	b.Run("peak-"+isa, func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			wall, cpu, err := bench.Peak(isa)
			require.NoError(b, err)
			b.ReportMetric(wall, "GFLOP/s")
			b.ReportMetric(cpu, "cpuGFLOP/s")
		}
	})

	c := loom.NewCompiler(loom.Config{CacheDir: b.TempDir()})
	defer c.Close()
	src, err := loom.ReadSource(filepath.Join(kernelsDir, "gemm.loom"), "sgemm", nil)
	require.NoError(b, err)
	if isa == "avx2" {
		// sgemm's default tile, 12 rows by 2 vectors of 16 lanes, is AVX-512's (24 of its 32
		// registers); on AVX2 those are 48 registers of 16. 6 rows by 2 vectors of 8: 12
		// accumulators, 2 of B, a broadcast.
		src.Specialization.Config = map[string]string{"MR": "6", "VL": "8", "NV": "2", "MB": "96"}
	}
	a, err := c.Compile(src, loom.HostTarget())
	require.NoError(b, err)
	g, err := a.LaunchConfigArgs(loom.Limits{}, int64(n), int64(n), int64(n))
	require.NoError(b, err)
	blob, err := a.PackScalars(nil, int64(n), int64(n), int64(n))
	require.NoError(b, err)
	r := newRand(b)
	A, B := hostrun.F32(randF32(r, n*n)), hostrun.F32(randF32(r, n*n))
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("loom-%dthread", threads), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				res, err := hostrun.Run(a.SharedObject, a.Entry, a.Target, hostrun.Launch{
					Grid: g.Grid, Block: g.Block, SharedBytes: g.SharedBytes, Threads: threads, Iterations: 20,
					Buffers: [][]byte{A, B, make([]byte, 4*n*n)}, Scalars: blob,
				})
				require.NoError(b, err)
				require.Zero(b, res.Violation)
				b.ReportMetric(flops/res.Seconds/1e9, "GFLOP/s")
				b.ReportMetric(flops/res.CPUSeconds/1e9, "cpuGFLOP/s")
				b.ReportMetric(100*flops/res.CPUSeconds/1e9/peakCPU, "%peak")
			}
		})
	}
	// OpenBLAS as installed (its own CPU detection), and with its AVX-512 kernels forced.
	for _, cfg := range []struct{ name, core string }{{"openblas", ""}, {"openblas-skylakex", "SkylakeX"}} {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s-%dthread", cfg.name, threads), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					wall, cpu, err := bench.OpenBLAS(n, threads, 20, cfg.core)
					if err != nil {
						b.Skipf("OpenBLAS unavailable (apt install libopenblas-dev): %v", err)
					}
					b.ReportMetric(flops/wall/1e9, "GFLOP/s")
					b.ReportMetric(flops/cpu/1e9, "cpuGFLOP/s")
					b.ReportMetric(100*flops/cpu/1e9/peakCPU, "%peak")
				}
			})
		}
	}
}

// gemmSpecs returns 20 distinct specializations of sgemm.
func gemmSpecs() []map[string]string {
	var out []map[string]string
	for _, mr := range []int{4, 6, 8, 10, 12} {
		for _, nv := range []int{1, 2} {
			for _, vl := range []int{8, 16} {
				out = append(out, map[string]string{
					"MR": strconv.Itoa(mr), "NV": strconv.Itoa(nv), "VL": strconv.Itoa(vl),
					"MB": strconv.Itoa(mr * 8), "NB": strconv.Itoa(nv * vl * 8),
				})
			}
		}
	}
	return out
}

// BenchmarkCompile20 compiles a batch of 20 sgemm specializations into an empty cache (cold:
// front end and C compiler), then the same batch again (warm: every artifact a verified cache
// hit).
//
//	go test -run '^$' -bench Compile20 -benchtime 1x ./go/loom
func BenchmarkCompile20(b *testing.B) {
	src, err := loom.ReadSource(filepath.Join(kernelsDir, "gemm.loom"), "sgemm", nil)
	require.NoError(b, err)
	var reqs []loom.Request
	for _, spec := range gemmSpecs() {
		s := src
		s.Specialization.Config = spec
		reqs = append(reqs, loom.Request{Source: s, Target: loom.HostTarget()})
	}
	for i := 0; i < b.N; i++ {
		c := loom.NewCompiler(loom.Config{CacheDir: b.TempDir()})
		t0 := time.Now()
		for _, r := range c.CompileBatch(context.Background(), reqs) {
			require.NoError(b, r.Err)
		}
		cold := time.Since(t0)
		t0 = time.Now()
		for _, r := range c.CompileBatch(context.Background(), reqs) {
			require.NoError(b, r.Err)
		}
		warm := time.Since(t0)
		st := c.Stats()
		require.Equal(b, int64(20), st.Hits)
		require.Equal(b, int64(20), st.Misses)
		c.Close()
		b.ReportMetric(float64(cold.Milliseconds()), "cold-ms")
		b.ReportMetric(float64(warm.Microseconds())/1000, "warm-ms")
	}
}
