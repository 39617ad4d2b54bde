package loom_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
)

var sm90 = loom.MustParseTarget("sm_90")

func emitCUDA(t *testing.T, file, symbol string, spec map[string]string) string {
	t.Helper()
	src, err := loom.ReadSource(filepath.Join(kernelsDir, file), symbol, spec)
	require.NoError(t, err)
	out, err := loom.Emit(src, sm90, loom.EmitCUDA)
	require.NoError(t, err)
	return out
}

// TestCUDASignature pins the packed-argument convention of loom.h: buffer pointers (one per
// binding, in binding order), the violation word, the scalars in blob order, then the hidden
// binding sizes.
func TestCUDASignature(t *testing.T) {
	src := emitCUDA(t, "fill.loom", "fill", nil)
	require.Contains(t, src, `extern "C" __global__ void loom_k_fill(float* b0, unsigned int* loom_violation, float p0_raw, loom_i64 p8_raw, loom_u64 loom_bytes0) {`)
	src = emitCUDA(t, "elementwise.loom", "add", map[string]string{"T": "f16"})
	require.Contains(t, src, `extern "C" __global__ void loom_k_add(const loom_u16* b0, const loom_u16* b1, loom_u16* b2, unsigned int* loom_violation, loom_i64 p0_raw, `)
	require.Contains(t, src, `loom_u64 loom_bytes0, loom_u64 loom_bytes1, loom_u64 loom_bytes2) {`)
	src = emitCUDA(t, "gemm.loom", "sgemm", nil)
	require.Contains(t, src, `extern "C" __global__ void loom_k_sgemm(const float* b0, const float* b1, float* b2, unsigned int* loom_violation, loom_i64 p0_raw, loom_i64 p8_raw, loom_i64 p16_raw, loom_u64 loom_bytes0, loom_u64 loom_bytes1, loom_u64 loom_bytes2) {`)
	require.Contains(t, src, "extern __shared__ __align__(16) unsigned char loom_shared[];")
	require.NotContains(t, src, "__attribute__((vector_size", "CUDA C has no GCC vector extensions")
}

func TestCUDAArtifactBlob(t *testing.T) {
	c := newCompiler(t)
	src, err := loom.ReadSource(filepath.Join(kernelsDir, "fill.loom"), "fill", nil)
	require.NoError(t, err)
	a, err := c.Compile(src, sm90)
	require.NoError(t, err)
	require.Equal(t, "loom_k_fill", a.Entry)
	require.Empty(t, a.SharedObject)
	// f32 value at 0, index n at 8, then the hidden u64 size of binding 0 at 16.
	require.Equal(t, 16, a.ScalarBytes)
	require.Equal(t, []int{16}, a.HiddenOffsets)
	blob, err := a.PackScalars([]uint64{4000}, float32(2), int64(1000))
	require.NoError(t, err)
	require.Len(t, blob, 24)
	require.Equal(t, []byte{0xa0, 0x0f, 0, 0, 0, 0, 0, 0}, blob[16:])
	_, err = a.PackScalars(nil, float32(2), int64(1000))
	require.ErrorContains(t, err, "buffer sizes")
}

// TestCUDAWellFormed compiles the CUDA C of every library kernel as C++ ($CXX, else g++; under
// Bazel the pinned zig c++) against a mock of the CUDA device environment (nvcc is not
// available here): syntax, declarations and types, without a warning.
func TestCUDAWellFormed(t *testing.T) {
	if _, err := exec.LookPath(cxx()); err != nil {
		if os.Getenv("CXX") != "" {
			t.Fatalf("$CXX %q: %v", cxx(), err)
		}
		t.Skip("g++ not installed")
	}
	mock, err := filepath.Abs(filepath.Join("testdata", "cuda_mock.h"))
	require.NoError(t, err)
	dir := t.TempDir()
	cases := []struct {
		file, symbol string
		spec         map[string]string
	}{
		{"fill.loom", "fill", map[string]string{"T": "bf16"}},
		{"copy.loom", "copy", nil},
		{"elementwise.loom", "add", map[string]string{"T": "f16"}},
		{"elementwise.loom", "mul", map[string]string{"T": "i32"}},
		{"reduce.loom", "reduce_sum", map[string]string{"T": "f16"}},
		{"reduce.loom", "reduce_max", map[string]string{"T": "f64"}},
		{"softmax.loom", "softmax", nil},
		{"gemm.loom", "sgemm", nil},
	}
	var files []string
	for i, tc := range cases {
		src := emitCUDA(t, tc.file, tc.symbol, tc.spec)
		// .cc: C++ to every compiler driver (the pinned zig cc picks zig c++ by the name).
		path := filepath.Join(dir, tc.symbol+"_"+string(rune('a'+i))+".cc")
		require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
		files = append(files, path)
	}
	for _, f := range files {
		// -c, not -fsyntax-only, which zig's driver does not take; unused helpers of the
		// prelude are expected (clang warns of unused static functions, GCC does not).
		out, err := exec.Command(cxx(), "-std=c++17", "-c", "-o", f+".o", "-Wall", "-Wno-unused-variable", "-Wno-unused-but-set-variable", "-Wno-unused-function", "-include", mock, f).CombinedOutput()
		require.NoError(t, err, "%s:\n%s", f, out)
		require.False(t, strings.Contains(string(out), "warning"), "%s:\n%s", f, out)
	}
}
