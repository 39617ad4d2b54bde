package loom_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
)

var v3 = loom.MustParseTarget("host-x86_64-v3")

func TestEmitStaticWrapsTheJITCode(t *testing.T) {
	src := fillSource(t, map[string]string{"BLOCK": "64"})
	sk, err := loom.EmitStatic(src, v3, "kernels/fill")
	require.NoError(t, err)
	jit, err := loom.Emit(src, v3, loom.EmitC)
	require.NoError(t, err)
	require.Contains(t, sk.C, jit, "the static C must contain the JIT path's code verbatim")
	require.Contains(t, sk.C, "#define loom_host_module_entries loom_aot_kernels_2ffill_entries\n")
	require.Contains(t, sk.C, `loom_host_module_register("kernels/fill", target, entries, count)`)
	require.Equal(t, "loom_register_kernels_2ffill", sk.Metadata.Register)
	require.Equal(t, "kernels/fill", sk.Metadata.Module)
	require.Empty(t, sk.CUDA)

	a := sk.Metadata.Artifact
	require.Equal(t, "fill", a.Entry)
	require.Equal(t, "host-x86_64-v3", a.Target)
	require.Equal(t, "64", a.Specialization["BLOCK"])
	require.Empty(t, a.Source)
	require.Len(t, a.Key, 64)
	g, err := a.LaunchConfigArgs(loom.Limits{}, 1000)
	require.NoError(t, err)
	require.Equal(t, [3]uint32{16, 1, 1}, g.Grid)

	other, err := loom.EmitStatic(fillSource(t, map[string]string{"BLOCK": "128"}), v3, "kernels/fill")
	require.NoError(t, err)
	require.NotEqual(t, a.Key, other.Metadata.Artifact.Key, "specializations have distinct keys")
}

func TestEmitStaticCUDA(t *testing.T) {
	src := fillSource(t, nil)
	sm := loom.MustParseTarget("sm_80")
	sk, err := loom.EmitStatic(src, sm, "kernels/fill")
	require.NoError(t, err)
	want, err := loom.Emit(src, sm, loom.EmitCUDA)
	require.NoError(t, err)
	require.Equal(t, want, sk.CUDA)
	require.Empty(t, sk.C)
	require.Empty(t, sk.Metadata.Register)
	require.Equal(t, "loom_k_fill", sk.Metadata.Artifact.Entry)
	require.NotEmpty(t, sk.Metadata.Artifact.HiddenOffsets)
}

func TestEmitStaticErrors(t *testing.T) {
	src := fillSource(t, nil)
	for _, bad := range []string{"", "a b", "fill;", "kernels\\fill"} {
		_, err := loom.EmitStatic(src, v3, bad)
		require.Error(t, err, "module %q", bad)
		require.Contains(t, err.Error(), "module name")
	}
	_, err := loom.EmitStatic(loom.KernelSource{Name: "x.loom", Source: src.Source, Specialization: loom.Specialization{Symbol: "fil"}}, v3, "m")
	require.ErrorContains(t, err, `no kernel named "fil"`)
	_, err = loom.EmitStatic(loom.KernelSource{Name: "x.loom", Source: src.Source, Specialization: loom.Specialization{Config: map[string]string{"BLOCK": "x"}}}, v3, "m")
	require.ErrorContains(t, err, "BLOCK")
}

// TestStaticKernelsLinkTogether compiles two ahead-of-time kernels and a program that stands in
// for the shim's registry, links them into one binary and runs fill through its registered
// entry: the symbols do not clash, the constructors register both modules before main, and the
// kernel computes the right thing.
func TestStaticKernelsLinkTogether(t *testing.T) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	dir := t.TempDir()
	header, err := filepath.Abs(filepath.Join("..", "..", "shim", "include"))
	require.NoError(t, err)
	fill, err := loom.EmitStatic(fillSource(t, nil), loom.HostTarget(), "kernels/fill")
	require.NoError(t, err)
	cp, err := loom.ReadSource(filepath.Join(kernelsDir, "copy.loom"), "copy", nil)
	require.NoError(t, err)
	copyK, err := loom.EmitStatic(cp, loom.HostTarget(), "kernels/copy")
	require.NoError(t, err)

	a := fill.Metadata.Artifact
	var valueOff, nOff int
	for _, p := range a.Scalars() {
		if p.Name == "value" {
			valueOff = p.Offset
		} else {
			nOff = p.Offset
		}
	}
	block := a.Specialization["BLOCK"]
	main := fmt.Sprintf(`#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "loom/loom.h"
static const loom_host_kernel_entry* fill_entries;
loom_status loom_host_module_register(const char* name, const char* target, const loom_host_kernel_entry* e, uint32_t n) {
  printf("registered %%s %%s %%u %%s\n", name, target, n, e[0].name);
  if (strcmp(name, "kernels/fill") == 0) fill_entries = e;
  return LOOM_OK;
}
int main(int argc, char** argv) {
  float value = strtof(argv[1], 0);
  long long n = atoll(argv[2]);
  float* out = calloc((size_t)n, sizeof(float));
  unsigned char blob[%d] = {0};
  memcpy(blob + %d, &value, 4);
  memcpy(blob + %d, &n, 8);
  void* buffers[1] = {out};
  uint64_t bytes[1] = {(uint64_t)n * 4};
  uint32_t violation = 0;
  loom_host_kernel_args args = {{(uint32_t)((n + %s - 1) / %s), 1, 1}, {%s, 1, 1}, {0, 0, 0}, buffers, bytes, 1, blob, sizeof blob, 0, &violation};
  for (uint32_t b = 0; b < args.grid[0]; b++) { args.block_id[0] = b; fill_entries[0].fn(&args); }
  for (long long i = 0; i < n; i++) if (out[i] != value) { printf("out[%%lld] = %%g\n", i, out[i]); return 1; }
  printf("violation %%u\n", violation);
  return 0;
}
`, a.BlobBytes, valueOff, nOff, block, block, block)
	files := map[string]string{"fill.c": fill.C, "copy.c": copyK.C, "main.c": main}
	var args []string
	for name, text := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
		args = append(args, filepath.Join(dir, name))
	}
	bin := filepath.Join(dir, "prog")
	cmd := exec.Command(cc, append(append(loom.StaticCFlags(loom.HostTarget()), "-I", header, "-o", bin), append(args, "-lm")...)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	value := float32(rand.NormFloat64()*100 + 1)
	n := 1 + rand.IntN(2000)
	out, err = exec.Command(bin, strconv.FormatFloat(float64(value), 'g', -1, 32), strconv.Itoa(n)).CombinedOutput()
	require.NoError(t, err, "%s", out)
	text := string(out)
	target := loom.HostTarget().String()
	require.Contains(t, text, "registered kernels/fill "+target+" 1 fill\n")
	require.Contains(t, text, "registered kernels/copy "+target+" 1 copy\n")
	require.Contains(t, text, "violation 0\n")
	require.Equal(t, 2, strings.Count(text, "registered "))
}
