package scratch

import (
	"os"
	"testing"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/loom/internal/hostrun"
)

func TestGemmPerf(t *testing.T) {
	data, _ := os.ReadFile("../../../../kernels/gemm.loom")
	spec := map[string]string{}
	for _, kv := range []string{"MB", "MT", "NB", "KC", "MR", "NV"} {
		if v := os.Getenv("G_" + kv); v != "" {
			spec[kv] = v
		}
	}
	c := loom.NewCompiler(loom.Config{CacheDir: "/tmp/scratch/cache"})
	defer c.Close()
	a, err := c.Compile(loom.KernelSource{Name: "gemm.loom", Source: data, Specialization: loom.Specialization{Symbol: "sgemm", Config: spec}}, loom.HostTarget())
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile("/tmp/scratch/gemm.c", []byte(a.Source), 0o644)
	n := 1024
	g, err := a.LaunchConfigArgs(loom.Limits{}, int64(n), int64(n), int64(n))
	if err != nil {
		t.Fatal(err)
	}
	blob, _ := a.PackScalars(nil, int64(n), int64(n), int64(n))
	A := make([]float32, n*n)
	for i := range A {
		A[i] = float32(i%7) * 0.1
	}
	for _, th := range []int{1, 2} {
		r, err := hostrun.Run(a.SharedObject, a.Entry, a.Target, hostrun.Launch{Grid: g.Grid, Block: g.Block, SharedBytes: g.SharedBytes,
			Buffers: [][]byte{hostrun.F32(A), hostrun.F32(A), hostrun.F32(A)}, Scalars: blob, Threads: th, Iterations: 10})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("spec %v threads %d: %.3f ms, %.1f GFLOP/s wall, %.1f GFLOP/s cpu viol=%x", spec, th, r.Seconds*1e3, 2*float64(n*n*n)/r.Seconds/1e9, 2*float64(n*n*n)/r.CPUSeconds/1e9, r.Violation)
	}
}
