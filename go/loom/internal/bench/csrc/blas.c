/* blas: OpenBLAS sgemm timing, C = A*B row-major M=N=K=n.
 * usage: blas N ITERS -> prints best seconds per call. Threads: OPENBLAS_NUM_THREADS. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
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
  double best = 1e30;
  for (int it = 0; it < iters; it++) {
    double t0 = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    double dt = now() - t0;
    if (dt < best) best = dt;
  }
  printf("%.6f %f\n", best, c[n + 1]);
  return 0;
}
