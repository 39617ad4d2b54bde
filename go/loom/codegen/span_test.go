package codegen

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCUDASpanMatchesHostSpan compiles the host's and CUDA's loom_span side by side as C++ ($CXX,
// else g++; the CUDA one with __umul64hi written with 128-bit integers) and compares them on the edges
// of their arguments: negative, zero, one, around 2^31, 2^32, 2^62 and 2^63 - 1, where the
// sum and the product overflow.
func TestCUDASpanMatchesHostSpan(t *testing.T) {
	cxx := os.Getenv("CXX")
	if cxx == "" {
		cxx = "g++"
	}
	if _, err := exec.LookPath(cxx); err != nil {
		if os.Getenv("CXX") != "" {
			t.Fatalf("$CXX %q: %v", cxx, err)
		}
		t.Skip("g++ not installed")
	}
	rename := func(src, name string) string { return strings.Replace(src, "loom_span(", name+"(", 1) }
	prog := `#include <cstdio>
#include <cstdint>
#define LOOM_INLINE inline
typedef int64_t loom_i64;
typedef uint64_t loom_u64;
static inline loom_u64 __umul64hi(loom_u64 a, loom_u64 b) { return (loom_u64)(((unsigned __int128)a * b) >> 64); }
` + rename(hostSpan, "host_span") + "\n" + rename(cudaSpan, "cuda_span") + `
int main() {
  const loom_i64 edges[] = {-9223372036854775807LL - 1, -2, -1, 0, 1, 2, 3, 7, 1000, 2147483647LL, 2147483648LL,
    4294967295LL, 4294967296LL, 4294967297LL, 3037000499LL, 3037000500LL, 4611686018427387903LL,
    4611686018427387904LL, 9223372036854775806LL, 9223372036854775807LL};
  long n = 0, bad = 0;
  for (loom_i64 acc : edges) for (loom_i64 sh : edges) for (loom_i64 st : edges) {
    for (loom_i64 da = -1; da <= 1; da++) {
      loom_i64 a = acc + (da < 0 && acc == -9223372036854775807LL - 1 ? 0 : da > 0 && acc == 9223372036854775807LL ? 0 : da);
      n++;
      if (host_span(a, sh, st) != cuda_span(a, sh, st)) {
        if (bad++ < 5) printf("mismatch acc %lld sh %lld st %lld: host %lld cuda %lld\n", (long long)a, (long long)sh, (long long)st, (long long)host_span(a, sh, st), (long long)cuda_span(a, sh, st));
      }
    }
  }
  printf("%ld cases, %ld mismatches\n", n, bad);
  return bad != 0;
}
`
	dir := t.TempDir()
	src := filepath.Join(dir, "span.cc")
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "span")
	if out, err := exec.Command(cxx, "-O1", "-fwrapv", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cxx, err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("the two loom_span disagree: %v", err)
	}
}
