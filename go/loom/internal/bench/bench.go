// Package bench builds and runs the C reference programs of Loom's benchmarks: a single-core FMA
// peak microbenchmark and an OpenBLAS sgemm driver.
package bench

import (
	"crypto/sha256"
	"embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

//go:embed csrc/peak.c csrc/blas.c
var sources embed.FS

// build compiles csrc/name.c with $CC (else gcc) and extra flags into a cached binary.
func build(name string, flags ...string) (string, error) {
	src, err := sources.ReadFile("csrc/" + name + ".c")
	if err != nil {
		return "", err
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	sum := sha256.Sum256(append(src, strings.Join(append([]string{cc}, flags...), " ")...))
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("loom-bench-%x", sum[:8]))
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cfile := filepath.Join(dir, fmt.Sprintf("%s-%d.c", name, os.Getpid()))
	if err := os.WriteFile(cfile, src, 0o644); err != nil {
		return "", err
	}
	defer os.Remove(cfile)
	tmp := bin + fmt.Sprintf(".%d.tmp", os.Getpid())
	args := append([]string{"-O2", "-o", tmp, cfile}, flags...)
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s %s: %v\n%s", cc, name, err, out)
	}
	return bin, os.Rename(tmp, bin)
}

func floats(out []byte, n int) ([]float64, error) {
	fields := strings.Fields(string(out))
	if len(fields) < n {
		return nil, fmt.Errorf("unexpected output %q", out)
	}
	vals := make([]float64, n)
	for i := range vals {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return nil, fmt.Errorf("unexpected output %q", out)
		}
		vals[i] = v
	}
	return vals, nil
}

// Peak measures single-core f32 FMA throughput with 16 independent chains in registers, on
// 512-bit (avx512) or 256-bit (avx2) vectors. It returns GFLOP/s by wall time and by the
// thread's CPU time (which holds up when other processes share the core).
func Peak(isa string) (wall, cpu float64, err error) {
	bin, err := build("peak")
	if err != nil {
		return 0, 0, err
	}
	out, err := exec.Command(bin, isa, "1").Output()
	if err != nil {
		return 0, 0, fmt.Errorf("peak: %v", err)
	}
	v, err := floats(out, 2)
	if err != nil {
		return 0, 0, err
	}
	return v[0], v[1], nil
}

// OpenBLAS times cblas_sgemm on n x n row-major matrices with the given thread count and
// returns the best seconds per call (wall and CPU time of all threads). coreType, when set,
// forces OpenBLAS's kernel selection (OPENBLAS_CORETYPE, e.g. SkylakeX): OpenBLAS 0.3.21 does
// not recognise every CPU and then falls back to old SSE kernels. It fails when
// libopenblas-dev is not installed.
func OpenBLAS(n, threads, iters int, coreType string) (wall, cpu float64, err error) {
	bin, err := build("blas", "-I/usr/include/x86_64-linux-gnu/openblas-pthread", "-lopenblas")
	if err != nil {
		return 0, 0, err
	}
	cmd := exec.Command(bin, strconv.Itoa(n), strconv.Itoa(iters))
	cmd.Env = append(os.Environ(), "OPENBLAS_NUM_THREADS="+strconv.Itoa(threads))
	if coreType != "" {
		cmd.Env = append(cmd.Env, "OPENBLAS_CORETYPE="+coreType)
	}
	out, err := cmd.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("blas: %v", err)
	}
	v, err := floats(out, 2)
	if err != nil {
		return 0, 0, err
	}
	return v[0], v[1], nil
}
