/* peak: single-core f32 FMA throughput. Independent dependency chains kept in registers
 * (enough to cover FMA latency x ports), so the loop is throughput-bound: sixteen of AVX-512's
 * 32 registers, twelve of AVX2's 16 (sixteen chains and the two operands are 18 registers: the
 * compiler spilled them and the "peak" came out at 57.7 GFLOP/s on a Zen 3 core whose peak is
 * 102.6, flattering every kernel measured against it).
 * usage: peak [avx512|avx2] SECONDS -> prints "wall_gflops cpu_gflops" (best of 5 runs; the CPU
 * figure divides by the thread's CPU time, so it holds when other processes share the core) */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double clock_seconds(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define CHAINS12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define CHAINS16(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)

__attribute__((target("avx512f,fma"), noinline)) static float run512(long iters) {
  __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
#define DECL(i) __m512 a##i = _mm512_set1_ps(1.0f + i * 0.01f);
  CHAINS16(DECL)
  for (long it = 0; it < iters; it++) {
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, b, c);
    CHAINS16(STEP)
  }
  __m512 s = _mm512_setzero_ps();
#define SUM(i) s = _mm512_add_ps(s, a##i);
  CHAINS16(SUM)
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"), noinline)) static float run256(long iters) {
  __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
#define DECL8(i) __m256 a##i = _mm256_set1_ps(1.0f + i * 0.01f);
  CHAINS12(DECL8)
  for (long it = 0; it < iters; it++) {
#define STEP8(i) a##i = _mm256_fmadd_ps(a##i, b, c);
    CHAINS12(STEP8)
  }
  __m256 s = _mm256_setzero_ps();
#define SUM8(i) s = _mm256_add_ps(s, a##i);
  CHAINS12(SUM8)
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}

int main(int argc, char** argv) {
  int wide = argc > 1 && strcmp(argv[1], "avx512") == 0;
  double seconds = argc > 2 ? atof(argv[2]) : 0.3;
  int lanes = wide ? 16 : 8;
  long iters = 1000000;
  double best = 0, best_cpu = 0;
  volatile float sink = 0;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = clock_seconds(CLOCK_MONOTONIC), c0 = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
    sink += wide ? run512(iters) : run256(iters);
    double dt = clock_seconds(CLOCK_MONOTONIC) - t0, dc = clock_seconds(CLOCK_THREAD_CPUTIME_ID) - c0;
    double flops = (double)iters * (wide ? 16 : 12) * lanes * 2;
    if (flops / dt / 1e9 > best) best = flops / dt / 1e9;
    if (flops / dc / 1e9 > best_cpu) best_cpu = flops / dc / 1e9;
    if (dt < seconds / 5) iters *= 2; /* grow until a run is long enough */
  }
  printf("%.2f %.2f\n", best, best_cpu);
  return sink == 12345.0f;
}
