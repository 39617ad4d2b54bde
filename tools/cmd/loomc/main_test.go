package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/loom"
)

var kernelsDir = filepath.Join("..", "..", "..", "go", "loom", "testdata", "kernels")

// TestOutputMatchesPackageLoom checks that loomc's output for a kernel is what package loom's
// emitter produces for the JIT path, so the ahead-of-time and JIT builds cannot drift.
func TestOutputMatchesPackageLoom(t *testing.T) {
	dir := t.TempDir()
	outC, outMeta := filepath.Join(dir, "add.c"), filepath.Join(dir, "add.json")
	var stderr bytes.Buffer
	err := run([]string{"--src", filepath.Join(kernelsDir, "elementwise.loom"), "--symbol", "add",
		"--target", "host-x86_64-v3", "--spec", "BLOCK=64", "--spec", "T=f32", "--module", "kernels/add",
		"--out_c", outC, "--out_meta", outMeta}, &stderr)
	require.NoError(t, err, stderr.String())

	target := loom.MustParseTarget("host-x86_64-v3")
	src, err := loom.ReadSource(filepath.Join(kernelsDir, "elementwise.loom"), "add", map[string]string{"BLOCK": "64", "T": "f32"})
	require.NoError(t, err)
	want, err := loom.EmitStatic(src, target, "kernels/add")
	require.NoError(t, err)
	jit, err := loom.Emit(src, target, loom.EmitC)
	require.NoError(t, err)

	gotC, err := os.ReadFile(outC)
	require.NoError(t, err)
	require.Equal(t, want.C, string(gotC))
	require.Contains(t, string(gotC), jit, "the AOT C must embed the JIT path's code verbatim")

	raw, err := os.ReadFile(outMeta)
	require.NoError(t, err)
	var meta loom.StaticMetadata
	require.NoError(t, json.Unmarshal(raw, &meta))
	require.Equal(t, want.Metadata.Module, meta.Module)
	require.Equal(t, want.Metadata.Register, meta.Register)
	a := meta.Artifact
	require.Equal(t, want.Metadata.Artifact.Params, a.Params)
	require.Equal(t, want.Metadata.Artifact.Key, a.Key)
	require.Equal(t, "add", a.Entry)
	require.Len(t, a.Buffers(), 3)
	require.Equal(t, []string{"read", "read", "write"}, []string{a.Buffers()[0].Access, a.Buffers()[1].Access, a.Buffers()[2].Access})
	require.Len(t, a.Scalars(), 12)

	// The decoded metadata dispatches the kernel without the compiler: launch geometry and
	// scalar blob come from it alone.
	g, err := a.LaunchConfigArgs(loom.Limits{}, 2, 3, 5, 100)
	require.NoError(t, err)
	require.Equal(t, [3]uint32{2, 5, 3}, g.Grid)
	require.Equal(t, [3]uint32{64, 1, 1}, g.Block)
	scalars := make([]any, 12)
	for i := range scalars {
		scalars[i] = i + 1
	}
	blob, err := a.PackScalars(nil, scalars...)
	require.NoError(t, err)
	require.Len(t, blob, 96)
	require.Equal(t, byte(12), blob[88])
}

func TestCUDAOutput(t *testing.T) {
	dir := t.TempDir()
	outCU, outMeta := filepath.Join(dir, "fill.cu"), filepath.Join(dir, "fill.json")
	require.NoError(t, run([]string{"--src", filepath.Join(kernelsDir, "fill.loom"), "--symbol", "fill",
		"--target", "sm_90", "--module", "kernels/fill", "--out_cuda", outCU, "--out_meta", outMeta}, &bytes.Buffer{}))
	src, err := loom.ReadSource(filepath.Join(kernelsDir, "fill.loom"), "fill", map[string]string{})
	require.NoError(t, err)
	want, err := loom.Emit(src, loom.MustParseTarget("sm_90"), loom.EmitCUDA)
	require.NoError(t, err)
	got, err := os.ReadFile(outCU)
	require.NoError(t, err)
	require.Equal(t, want, string(got))
	raw, err := os.ReadFile(outMeta)
	require.NoError(t, err)
	var meta loom.StaticMetadata
	require.NoError(t, json.Unmarshal(raw, &meta))
	require.Equal(t, "loom_k_fill", meta.Artifact.Entry)
	require.Equal(t, "sm_90", meta.Artifact.Target)
}

func TestErrorsNameTheProblem(t *testing.T) {
	dir := t.TempDir()
	fill := filepath.Join(kernelsDir, "fill.loom")
	outC := filepath.Join(dir, "x.c")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--target", "host-x86_64-v3", "--module", "m", "--out_c", outC}, "--src is required"},
		{[]string{"--src", fill, "--module", "m", "--out_c", outC}, "--target is required"},
		{[]string{"--src", fill, "--target", "host-x86_64-v3", "--out_c", outC}, "--module is required"},
		{[]string{"--src", fill, "--target", "host-x86_64-v9", "--module", "m", "--out_c", outC}, "x86_64 levels"},
		{[]string{"--src", fill, "--target", "host-x86_64-v3", "--module", "m"}, "--out_c is required"},
		{[]string{"--src", fill, "--target", "sm_90", "--module", "m", "--out_c", outC}, "--out_cuda is required"},
		{[]string{"--src", fill, "--target", "host-x86_64-v3", "--module", "m", "--out_c", outC, "--spec", "BLOCK"}, "want key=value"},
		{[]string{"--src", fill, "--target", "host-x86_64-v3", "--module", "m", "--out_c", outC, "--spec", "NOPE=1"}, `unknown specialization key "NOPE"`},
		{[]string{"--src", fill, "--symbol", "fil", "--target", "host-x86_64-v3", "--module", "m", "--out_c", outC}, `no kernel named "fil"`},
		{[]string{"--src", fill, "--target", "host-x86_64-v3", "--module", "a b", "--out_c", outC}, "module name"},
		{[]string{"--src", filepath.Join(dir, "missing.loom"), "--target", "host-x86_64-v3", "--module", "m", "--out_c", outC}, "missing.loom"},
	} {
		err := run(tc.args, &bytes.Buffer{})
		require.ErrorContains(t, err, tc.want, "%q", tc.args)
	}
	_, err := os.Stat(outC)
	require.True(t, os.IsNotExist(err), "a failed run must not leave output")
}

// TestBazelRuleUsesTheJITFlags checks that loom_kernel compiles the generated C with the flags
// package loom uses for the JIT path (plus the target's -march), so both paths build the same
// code.
func TestBazelRuleUsesTheJITFlags(t *testing.T) {
	defs, err := os.ReadFile(filepath.Join("..", "..", "defs.bzl"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?s)_LOOM_HOST_COPTS = \[(.*?)\]`).FindSubmatch(defs)
	require.NotNil(t, m, "defs.bzl has no _LOOM_HOST_COPTS list")
	var copts []string
	for _, q := range regexp.MustCompile(`"([^"]*)"`).FindAllSubmatch(m[1], -1) {
		copts = append(copts, string(q[1]))
	}
	for _, target := range []string{"host-x86_64-v1", "host-x86_64-v3", "host-x86_64-v4", "host-aarch64-v8"} {
		// The target's own flags beyond -march are in _LOOM_HOST_ISA_FLAGS.
		var extra []string
		if isa := regexp.MustCompile(`(?s)"` + regexp.QuoteMeta(target) + `": \[([^\]]*)\]`).FindSubmatch(defs); isa != nil {
			for _, q := range regexp.MustCompile(`"([^"]*)"`).FindAllSubmatch(isa[1], -1) {
				extra = append(extra, string(q[1]))
			}
		}
		var want []string
		for _, f := range loom.StaticCFlags(loom.MustParseTarget(target)) {
			if !strings.HasPrefix(f, "-march=") {
				want = append(want, f)
			}
		}
		require.ElementsMatch(t, want, append(slices.Clone(copts), extra...), target)
		march := regexp.MustCompile(`"` + regexp.QuoteMeta(target) + `": "(-march=[^"]+)"`).FindSubmatch(defs)
		require.NotNil(t, march, "defs.bzl has no -march for %s", target)
		require.Contains(t, loom.StaticCFlags(loom.MustParseTarget(target)), string(march[1]), target)
	}
}
