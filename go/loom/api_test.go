package loom_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
)

func fillSource(t testing.TB, spec map[string]string) loom.KernelSource {
	t.Helper()
	src, err := loom.ReadSource(filepath.Join(kernelsDir, "fill.loom"), "", spec)
	require.NoError(t, err)
	return src
}

func TestParseTarget(t *testing.T) {
	for _, s := range []string{"host-x86_64-v2", "host-x86_64-v3", "host-x86_64-v4", "host-aarch64-v8", "sm_80", "sm_90", "sm_100"} {
		tg, err := loom.ParseTarget(s)
		require.NoError(t, err, s)
		require.Equal(t, s, tg.String())
	}
	for _, s := range []string{"", "host", "host-x86_64-v5", "host-riscv-v1", "sm_", "sm_35", "sm_9a", "gpu-90", "host-aarch64-v3"} {
		_, err := loom.ParseTarget(s)
		require.Error(t, err, s)
	}
	h := loom.HostTarget()
	require.Equal(t, loom.TargetHost, h.Kind)
	_, err := loom.ParseTarget(h.String())
	require.NoError(t, err)
}

func TestZeroConfigCompiles(t *testing.T) {
	t.Setenv("LOOM_CACHE_DIR", t.TempDir())
	c := loom.NewCompiler(loom.Config{})
	defer c.Close()
	a, err := c.Compile(fillSource(t, nil), loom.HostTarget())
	require.NoError(t, err)
	require.Equal(t, "fill", a.Kernel)
	require.True(t, strings.HasPrefix(a.SharedObject, os.Getenv("LOOM_CACHE_DIR")))
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "Close is idempotent")
	_, err = c.Compile(fillSource(t, nil), loom.HostTarget())
	require.ErrorIs(t, err, loom.ErrClosed)
}

func TestNoCacheRemovesPrivateFiles(t *testing.T) {
	c := loom.NewCompiler(loom.Config{NoCache: true})
	a, err := c.Compile(fillSource(t, nil), loom.HostTarget())
	require.NoError(t, err)
	_, err = os.Stat(a.SharedObject)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	_, err = os.Stat(a.SharedObject)
	require.True(t, os.IsNotExist(err))
}

func TestArtifactMetadata(t *testing.T) {
	c := newCompiler(t)
	src, err := loom.ReadSource(filepath.Join(kernelsDir, "elementwise.loom"), "add", map[string]string{"T": "f16"})
	require.NoError(t, err)
	a, err := c.Compile(src, loom.HostTarget())
	require.NoError(t, err)
	require.Equal(t, loom.HostTarget().String(), a.Target)
	require.Equal(t, "add", a.Kernel)
	require.Equal(t, map[string]string{"T": "f16", "BLOCK": "128"}, a.Specialization)
	bufs := a.Buffers()
	require.Equal(t, []loom.Param{
		{Name: "x", Kind: loom.ParamBuffer, Type: "f16", Access: "read", Binding: 0, Size: 2},
		{Name: "y", Kind: loom.ParamBuffer, Type: "f16", Access: "read", Binding: 1, Size: 2},
		{Name: "z", Kind: loom.ParamBuffer, Type: "f16", Access: "write", Binding: 2, Size: 2},
	}, bufs)
	sc := a.Scalars()
	require.Len(t, sc, 12)
	require.Equal(t, loom.Param{Name: "ys3", Kind: loom.ParamScalar, Type: "index", Binding: -1, Offset: 88, Size: 8}, sc[11])
	require.Equal(t, 96, a.ScalarBytes)
	require.Equal(t, []loom.WorkloadParam{{"d0", "index", 3}, {"d1", "index", 4}, {"d2", "index", 5}, {"d3", "index", 6}}, a.Workload)
	require.Contains(t, a.IR, "kernel.func @add(")
	require.Contains(t, a.IR, "kernel.launch(")
}

func TestLaunchConfig(t *testing.T) {
	c := newCompiler(t)
	a, err := c.Compile(fillSource(t, map[string]string{"BLOCK": "128"}), loom.HostTarget())
	require.NoError(t, err)
	g, err := a.LaunchConfig([]uint64{1000}, loom.Limits{})
	require.NoError(t, err)
	require.Equal(t, loom.Geometry{Grid: [3]uint32{8, 1, 1}, Block: [3]uint32{128, 1, 1}}, g)
	g, err = a.LaunchConfigArgs(loom.Limits{}, 0)
	require.NoError(t, err)
	require.True(t, g.Empty())
	_, err = a.LaunchConfigArgs(loom.Limits{MaxThreadsPerBlock: 64}, 1000)
	require.ErrorContains(t, err, "128 threads per block exceed the device limit 64")
	_, err = a.LaunchConfigArgs(loom.Limits{MaxBlockDim: [3]uint32{100, 1, 1}}, 1000)
	require.ErrorContains(t, err, "block[0] = 128 exceeds the device limit 100")
	_, err = a.LaunchConfigArgs(loom.Limits{MaxGridDim: [3]uint32{4, 1, 1}}, 1000)
	require.ErrorContains(t, err, "grid[0] = 8 exceeds the device limit 4")
	_, err = a.LaunchConfigArgs(loom.Limits{}, 1.5)
	require.ErrorContains(t, err, "takes an integer")
	_, err = a.LaunchConfigArgs(loom.Limits{}, 1, 2)
	require.ErrorContains(t, err, "takes 1 workload values, got 2")
	_, err = a.LaunchConfig([]uint64{uint64(1) << 62}, loom.Limits{})
	require.ErrorContains(t, err, "out of range")

	g2, err := c.Compile(loom.KernelSource{Name: "gemm.loom", Source: mustRead(t, filepath.Join(kernelsDir, "gemm.loom"))}, loom.HostTarget())
	require.NoError(t, err)
	_, err = g2.LaunchConfigArgs(loom.Limits{MaxSharedMemoryPerBlock: 48 << 10}, int64(64), int64(64), int64(64))
	require.ErrorContains(t, err, "bytes of shared memory exceed the device limit 49152")
}

func mustRead(t testing.TB, path string) []byte {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return data
}

func TestCheckTarget(t *testing.T) {
	c := newCompiler(t)
	a, err := c.Compile(fillSource(t, nil), loom.HostTarget())
	require.NoError(t, err)
	require.NoError(t, loom.CheckTarget(a, loom.HostTarget()))
	err = loom.CheckTarget(a, sm90)
	require.ErrorContains(t, err, "was compiled for "+loom.HostTarget().String()+", not sm_90")
	other := loom.MustParseTarget("host-x86_64-v2")
	if loom.HostTarget() != other {
		require.Error(t, loom.CheckTarget(a, other))
	}
}

func TestPackScalars(t *testing.T) {
	c := newCompiler(t)
	a, err := c.Compile(fillSource(t, map[string]string{"T": "u8"}), loom.HostTarget())
	require.NoError(t, err)
	blob, err := a.PackScalars(nil, uint8(200), 5)
	require.NoError(t, err)
	require.Equal(t, []byte{200, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0}, blob)
	_, err = a.PackScalars(nil, 300, 5)
	require.ErrorContains(t, err, "scalar value: 300 does not fit in u8")
	_, err = a.PackScalars(nil, uint8(1))
	require.ErrorContains(t, err, "takes 2 scalars, got 1")
	_, err = a.PackScalars(nil, uint8(1), int64(1)<<41)
	require.ErrorContains(t, err, "beyond ±2^40")
	_, err = a.PackScalars(nil, "x", 1)
	require.ErrorContains(t, err, "unsupported Go type string")
}

func TestCompileErrors(t *testing.T) {
	c := newCompiler(t)
	_, err := c.Compile(fillSource(t, map[string]string{"NOPE": "1"}), loom.HostTarget())
	require.ErrorContains(t, err, `unknown specialization key "NOPE" for kernel fill (constants: T, BLOCK)`)
	_, err = c.Compile(fillSource(t, map[string]string{"BLOCK": "f32"}), loom.HostTarget())
	require.ErrorContains(t, err, `specialization BLOCK="f32": not an integer value of type index`)
	src := fillSource(t, nil)
	src.Specialization.Symbol = "missing"
	_, err = c.Compile(src, loom.HostTarget())
	require.ErrorContains(t, err, `no kernel named "missing" (kernels: fill)`)
	_, err = c.Compile(loom.KernelSource{Name: "bad.loom", Source: []byte("kernel k {\n\tdevice(x buffer[f32] write) {\n\t\tx[0] = y\n\t}\n}\n")}, loom.HostTarget())
	require.EqualError(t, err, "bad.loom:1:8: kernel k has no launch program\nbad.loom:3:10: undefined: y")
	_, err = c.Compile(loom.KernelSource{Name: "two.loom", Source: []byte("kernel a {}\nkernel b {}\n")}, loom.HostTarget())
	require.ErrorContains(t, err, "name the kernel to compile")
	_, err = c.Compile(fillSource(t, nil), loom.Target{})
	require.ErrorContains(t, err, "invalid target")
}

func TestCacheHitsMissesAndCorruption(t *testing.T) {
	dir := t.TempDir()
	c := loom.NewCompiler(loom.Config{CacheDir: dir})
	defer c.Close()
	require.False(t, c.Cached(context.Background(), fillSource(t, nil), loom.HostTarget()), "an empty cache")
	a1, err := c.Compile(fillSource(t, nil), loom.HostTarget())
	require.NoError(t, err)
	require.Equal(t, loom.CacheStats{Misses: 1}, c.Stats())

	// A second compiler on the same directory hits (Cached says so without compiling).
	c2 := loom.NewCompiler(loom.Config{CacheDir: dir})
	defer c2.Close()
	require.True(t, c2.Cached(context.Background(), fillSource(t, nil), loom.HostTarget()))
	require.False(t, c2.Cached(context.Background(), fillSource(t, map[string]string{"BLOCK": "64"}), loom.HostTarget()), "another specialization")
	require.False(t, c2.Cached(context.Background(), fillSource(t, nil), sm90), "another target")
	require.Equal(t, loom.CacheStats{}, c2.Stats(), "Cached compiles nothing")
	a2, err := c2.Compile(fillSource(t, nil), loom.HostTarget())
	require.NoError(t, err)
	require.Equal(t, loom.CacheStats{Hits: 1}, c2.Stats())
	require.Equal(t, a1.Key, a2.Key)
	require.Equal(t, a1.Source, a2.Source)
	require.Equal(t, a1.Launch, a2.Launch)
	require.Equal(t, a1.SharedObject, a2.SharedObject)

	// Another specialization or target is another key.
	a3, err := c2.Compile(fillSource(t, map[string]string{"BLOCK": "64"}), loom.HostTarget())
	require.NoError(t, err)
	require.NotEqual(t, a1.Key, a3.Key)
	a4, err := c2.Compile(fillSource(t, nil), sm90)
	require.NoError(t, err)
	require.NotEqual(t, a1.Key, a4.Key)

	// A corrupt shared object is detected and rebuilt, not trusted.
	so, err := os.ReadFile(a1.SharedObject)
	require.NoError(t, err)
	so[len(so)/2] ^= 0xff
	require.NoError(t, os.WriteFile(a1.SharedObject, so, 0o755))
	c3 := loom.NewCompiler(loom.Config{CacheDir: dir})
	defer c3.Close()
	a5, err := c3.Compile(fillSource(t, nil), loom.HostTarget())
	require.NoError(t, err)
	require.Equal(t, loom.CacheStats{Misses: 1, Corrupt: 1}, c3.Stats())
	res := launch(t, a5, [][]byte{make([]byte, 40)}, 1, float32(1), int64(10))
	require.Zero(t, res.Violation)

	// So is corrupt metadata.
	meta := strings.TrimSuffix(a1.SharedObject, ".so") + ".json"
	data, err := os.ReadFile(meta)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(meta, []byte(strings.Replace(string(data), `"kernel":"fill"`, `"kernel":"fixx"`, 1)), 0o644))
	c4 := loom.NewCompiler(loom.Config{CacheDir: dir})
	defer c4.Close()
	a6, err := c4.Compile(fillSource(t, nil), loom.HostTarget())
	require.NoError(t, err)
	require.Equal(t, "fill", a6.Kernel)
	require.Equal(t, loom.CacheStats{Misses: 1, Corrupt: 1}, c4.Stats())
	// And a truncated file.
	require.NoError(t, os.WriteFile(meta, data[:len(data)/2], 0o644))
	c5 := loom.NewCompiler(loom.Config{CacheDir: dir})
	defer c5.Close()
	_, err = c5.Compile(fillSource(t, nil), loom.HostTarget())
	require.NoError(t, err)
	require.Equal(t, loom.CacheStats{Misses: 1, Corrupt: 1}, c5.Stats())

	// No temporary files are left behind.
	leftovers, err := filepath.Glob(filepath.Join(dir, "*", ".tmp-*"))
	require.NoError(t, err)
	require.Empty(t, leftovers)
}

func TestCompileBatchOrderAndBound(t *testing.T) {
	c := loom.NewCompiler(loom.Config{CacheDir: t.TempDir(), Parallelism: 2})
	defer c.Close()
	var reqs []loom.Request
	blocks := []string{"32", "64", "96", "128", "160", "32"}
	for _, b := range blocks {
		reqs = append(reqs, loom.Request{Source: fillSource(t, map[string]string{"BLOCK": b}), Target: loom.HostTarget()})
	}
	reqs = append(reqs, loom.Request{Source: fillSource(t, map[string]string{"BLOCK": "x"}), Target: loom.HostTarget()})
	res := c.CompileBatch(context.Background(), reqs)
	require.Len(t, res, len(reqs))
	for i, b := range blocks {
		require.NoError(t, res[i].Err)
		require.Equal(t, b, res[i].Artifact.Specialization["BLOCK"], "result %d", i)
	}
	require.Error(t, res[len(res)-1].Err)
	require.Equal(t, res[0].Artifact.Key, res[5].Artifact.Key)
	st := c.Stats()
	// Six distinct keys (one failing to compile) plus a duplicate served by its twin or the cache.
	require.Equal(t, loom.CacheStats{Hits: 1, Misses: 6}, st)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, r := range c.CompileBatch(ctx, reqs[:3]) {
		if r.Err != nil {
			require.ErrorIs(t, r.Err, context.Canceled)
		}
	}
}

func TestConcurrentCompilesOfOneKey(t *testing.T) {
	c := newCompiler(t)
	var wg sync.WaitGroup
	keys := make([]string, 8)
	for i := range keys {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			a, err := c.Compile(fillSource(t, map[string]string{"BLOCK": "48"}), loom.HostTarget())
			require.NoError(t, err)
			keys[i] = a.Key
		}(i)
	}
	wg.Wait()
	for _, k := range keys {
		require.Equal(t, keys[0], k)
	}
	require.Equal(t, loom.CacheStats{Hits: 7, Misses: 1}, c.Stats())
}

func TestEmitAndHelpers(t *testing.T) {
	src := fillSource(t, map[string]string{"BLOCK": "64"})
	ir, err := loom.Emit(src, loom.HostTarget(), loom.EmitIR)
	require.NoError(t, err)
	require.Contains(t, ir, "kernel.launch(%n.1: index) {")
	require.Contains(t, ir, "index.ceil_div")
	require.Contains(t, ir, "buffer.store")
	require.Contains(t, ir, "{proven}")
	cs, err := loom.Emit(src, loom.HostTarget(), loom.EmitC)
	require.NoError(t, err)
	require.Contains(t, cs, "loom_host_module_entries")
	_, err = loom.Emit(src, loom.HostTarget(), loom.EmitCUDA)
	require.ErrorContains(t, err, "--emit cuda needs an sm_XX target")
	_, err = loom.Emit(src, sm90, loom.EmitC)
	require.ErrorContains(t, err, "--emit c needs a host target")
	_, err = loom.Emit(src, sm90, "asm")
	require.ErrorContains(t, err, `unknown emit kind "asm"`)

	stages, err := loom.EmitStages(src, loom.HostTarget())
	require.NoError(t, err)
	var names []string
	for _, s := range stages {
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"build", "specialize", "fold", "unroll", "scalarize", "bce"}, names)
	require.Contains(t, stages[0].IR, `kernel.spec "BLOCK"`)
	require.NotContains(t, stages[1].IR, "kernel.spec")

	spec, err := loom.ParseSpec([]string{"T=f16", "BLOCK=64"})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"T": "f16", "BLOCK": "64"}, spec)
	_, err = loom.ParseSpec([]string{"T"})
	require.Error(t, err)
	_, err = loom.ParseSpec([]string{"T=a", "T=b"})
	require.Error(t, err)
	names, err = loom.Kernels(loom.KernelSource{Name: "e.loom", Source: mustRead(t, filepath.Join(kernelsDir, "elementwise.loom"))})
	require.NoError(t, err)
	require.Equal(t, []string{"add", "mul"}, names)
	_, err = loom.ReadSource("/nonexistent.loom", "", nil)
	require.Error(t, err)
}

func TestCompileFile(t *testing.T) {
	c := newCompiler(t)
	path := filepath.Join(kernelsDir, "fill.loom")
	text, art, err := c.CompileFile(context.Background(), path, "", "sm_90", []string{"T=f16"}, loom.EmitCUDA)
	require.NoError(t, err)
	require.Nil(t, art)
	require.Contains(t, text, "loom_k_fill(loom_u16* b0")
	text, art, err = c.CompileFile(context.Background(), path, "fill", loom.HostTarget().String(), []string{"BLOCK=32"}, "")
	require.NoError(t, err)
	require.Empty(t, text)
	require.Equal(t, "32", art.Specialization["BLOCK"])
	_, _, err = c.CompileFile(context.Background(), path, "", "cpu", nil, loom.EmitIR)
	require.ErrorContains(t, err, `target "cpu"`)
	_, _, err = c.CompileFile(context.Background(), path, "", "sm_90", []string{"BLOCK"}, loom.EmitIR)
	require.ErrorContains(t, err, "want key=value")
}
