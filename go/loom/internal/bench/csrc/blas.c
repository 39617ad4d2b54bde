/* blas: OpenBLAS sgemm timing, C = A*B row-major M=N=K=n.
 * usage: blas N ITERS -> prints "wall_seconds cpu_seconds" (best per call; CPU time of all
 * threads). Threads: OPENBLAS_NUM_THREADS. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double clock_seconds(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1024;
  int iters = argc > 2 ? atoi(argv[2]) : 10;
  float* a = malloc(sizeof(float) * n * n);
  float* b = malloc(sizeof(float) * n * n);
  float* c = malloc(sizeof(float) * n * n);
  srand((unsigned)time(NULL));
  for (long i = 0; i < (long)n * n; i++) {
    a[i] = (float)rand() / RAND_MAX - 0.5f;
    b[i] = (float)rand() / RAND_MAX - 0.5f;
  }
  double best = 1e30, best_cpu = 1e30;
  for (int it = 0; it < iters; it++) {
    double t0 = clock_seconds(CLOCK_MONOTONIC), c0 = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    double dt = clock_seconds(CLOCK_MONOTONIC) - t0, dc = clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
    if (dt < best) best = dt;
    if (dc < best_cpu) best_cpu = dc;
  }
  printf("%.6f %.6f %g\n", best, best_cpu, c[n + 1]);
  return 0;
}
