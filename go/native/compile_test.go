package native_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/native"
)

// requireNVRTC skips the test where NVRTC cannot be loaded, except under LOOM_REQUIRE_NVRTC=1
// (tools/test sets it after installing NVRTC), where its absence fails the test.
func requireNVRTC(t *testing.T) {
	t.Helper()
	v, err := native.CUDACompiler()
	if err == nil {
		t.Log(v)
		return
	}
	require.ErrorIs(t, err, native.ErrNoDriver)
	if os.Getenv("LOOM_REQUIRE_NVRTC") == "1" {
		t.Fatalf("LOOM_REQUIRE_NVRTC=1 but %v", err)
	}
	t.Skipf("no NVRTC: %v", err)
}

func TestCompileCUDAChecksItsArguments(t *testing.T) {
	for _, c := range []struct {
		target string
		kind   native.CUDAImage
		source string
		want   string
	}{
		{"sm90", native.Cubin, cudaSource, `target "sm90" is not sm_XX`},
		{"host-x86_64-v3", native.Cubin, cudaSource, "is not sm_XX"},
		{"sm_90", native.CUDAImage(3), cudaSource, "CUDAImage(3) is neither Cubin nor PTX"},
		{"sm_90", native.PTX, "", "the source is empty"},
	} {
		_, _, err := native.CompileCUDA("k.cu", []byte(c.source), c.target, c.kind)
		require.ErrorIs(t, err, native.ErrInvalidArgument, c.want)
		assert.Contains(t, err.Error(), c.want)
		assert.Contains(t, err.Error(), "k.cu")
	}
}

func TestCompileCUDAWithoutADevice(t *testing.T) {
	requireNVRTC(t)
	for _, sm := range []int{80, 90} {
		target := fmt.Sprintf("sm_%d", sm)
		image, _, err := native.CompileCUDA("test.cu", []byte(cudaSource), target, native.Cubin)
		require.NoError(t, err)
		require.Greater(t, len(image), 64)
		require.Equal(t, []byte("\x7fELF"), image[:4], "a cubin is an ELF image")
		flags := binary.LittleEndian.Uint32(image[48:])
		assert.True(t, flags&0xff == uint32(sm) || (flags>>8)&0xff == uint32(sm), "e_flags %#x name sm_%d", flags, sm)
		for _, k := range []string{"add_u32", "axpy_u32"} {
			assert.True(t, bytes.Contains(image, []byte(k)), "the cubin has %s", k)
		}
		ptx, _, err := native.CompileCUDA("test.cu", []byte(cudaSource), target, native.PTX)
		require.NoError(t, err)
		assert.Contains(t, string(ptx), ".target "+target)
		assert.Contains(t, string(ptx), ".entry add_u32")
	}
}

func TestCompileCUDAErrorHasTheWholeLog(t *testing.T) {
	requireNVRTC(t)
	var src strings.Builder
	src.WriteString("extern \"C\" __global__ void broken(int* p) {\n")
	for i := range 40 {
		fmt.Fprintf(&src, "  p[%d] = undefined_%d;\n", i, i)
	}
	src.WriteString("}\n")
	_, _, err := native.CompileCUDA("broken.cu", []byte(src.String()), "sm_90", native.Cubin)
	require.ErrorIs(t, err, native.ErrCompile)
	var e *native.Error
	require.True(t, errors.As(err, &e))
	assert.Contains(t, e.Message, "broken.cu(2)")
	assert.Contains(t, e.Message, "broken.cu(41)", "the message holds the log past the shim's 1 KiB error buffer")
	assert.Contains(t, e.Message, "undefined_39")
}
