package main

import (
	"io"
	"os"
	"strings"
	"testing"
)

// TestShippedKernelsAreCurrent regenerates the shipped kernels (kernels/aot) in memory and
// compares them with the checked-in files: CI fails, naming the command to run, when the
// manifest, the corpus, a .loom source or the compiler changed without `go generate`.
func TestShippedKernelsAreCurrent(t *testing.T) {
	if os.Getenv("TEST_SRCDIR") != "" {
		// Bazel's sandbox holds kernels/aot's packages one by one, not the tree the check walks;
		// the go.work run of this test (tools/test) checks it.
		t.Skip("checked by `go test ./tools/cmd/kernelgen` through go.work")
	}
	if err := run([]string{"-aot", "-check", "-dir", "../../../kernels"}, io.Discard); err != nil {
		t.Fatal(err)
	}
}

// TestShippedCubinsAreWhatNVRTCBuilds compiles every shipped variant for every CUDA target
// with the real compiler (NVRTC, through the shim's device-free loom_code_compile; no GPU, no
// driver) and compares the cubins byte for byte with the shipped ones: a kernel whose CUDA C
// NVRTC rejects fails here, with NVRTC's log. It needs NVRTC: it skips without one, except
// under LOOM_REQUIRE_NVRTC=1 (tools/test installs NVRTC and sets it), where that is a failure.
// A compilation done before on this machine with the same NVRTC library, shim, name, target
// and source is taken from the check cache (package checkcache; LOOM_CHECK_CACHE=off does
// them all again).
func TestShippedCubinsAreWhatNVRTCBuilds(t *testing.T) {
	if os.Getenv("TEST_SRCDIR") != "" {
		t.Skip("checked by `go test ./tools/cmd/kernelgen` through go.work")
	}
	v, err := nvrtcName()
	if err != nil {
		if os.Getenv("LOOM_REQUIRE_NVRTC") == "1" {
			t.Fatalf("LOOM_REQUIRE_NVRTC=1 but %v", err)
		}
		t.Skipf("no NVRTC: %v", err)
	}
	t.Logf("compiling every shipped variant with %s", v)
	var out strings.Builder
	err = run([]string{"-aot", "-check", "-cuda-rebuild", "-dir", "../../../kernels"}, &out)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
}

func TestManifestAlternativesExpand(t *testing.T) {
	vs, err := parseVariantList("test", strings.NewReader("a.loom k OP={0..2},B={x,y},C=1 # comment\n\n# only a comment\nb.loom j\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 7 {
		t.Fatalf("got %d variants, want 7", len(vs))
	}
	if got := vs[5].id(); got != "a.loom k B=y,C=1,OP=2" {
		t.Errorf("variant 5 is %q", got)
	}
	if got := vs[6].id(); got != "b.loom j " {
		t.Errorf("variant 6 is %q", got)
	}
}
