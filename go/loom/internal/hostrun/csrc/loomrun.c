/* loomrun: runs one host kernel of a Loom shared object over a whole grid, for tests and
 * benchmarks. It follows loom.h's host convention: one call per block with
 * loom_host_kernel_args, blocks spread over worker threads.
 *
 * usage: loomrun SO ENTRY TARGET IN OUT
 * IN  (little endian): "LOOM" grid[3] block[3] shared nbuf scalar_bytes threads iters (u32),
 *     then per buffer u64 bytes + data, then the scalar blob.
 * OUT: u32 violation, u32 0, f64 best wall seconds per launch, f64 best CPU seconds per launch
 *      (all threads of the process), then every buffer's data.
 * Every buffer is followed by a canary; a kernel that writes past a buffer fails the run.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct loom_host_kernel_args {
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t block_id[3];
  void* const* buffers;
  const uint64_t* buffer_bytes;
  uint32_t buffer_count;
  const void* scalars;
  uint32_t scalar_bytes;
  void* shared;
  uint32_t* violation;
} loom_host_kernel_args;
typedef void (*loom_host_kernel_fn)(const loom_host_kernel_args* args);
typedef struct loom_host_kernel_entry {
  const char* name;
  loom_host_kernel_fn fn;
} loom_host_kernel_entry;
typedef const loom_host_kernel_entry* (*entries_fn)(uint32_t* count, const char** target);

#define CANARY 256

static uint32_t grid[3], block[3], shared_bytes, nbuf, scalar_bytes, nthreads, iters;
static void** buffers;
static uint64_t* buffer_bytes;
static unsigned char* scalars;
static loom_host_kernel_fn kernel;
static uint32_t violation;
static uint64_t nblocks;
static uint64_t next_block;

static void die(const char* msg) {
  fprintf(stderr, "loomrun: %s\n", msg);
  exit(2);
}

static void read_exact(FILE* f, void* p, size_t n) {
  if (n && fread(p, 1, n, f) != n) die("short input");
}

static void* worker(void* arg) {
  (void)arg;
  void* shared = NULL;
  if (shared_bytes) {
    if (posix_memalign(&shared, 64, shared_bytes)) die("out of memory");
    memset(shared, 0xCD, shared_bytes);
  }
  loom_host_kernel_args a;
  memcpy(a.grid, grid, sizeof grid);
  memcpy(a.block, block, sizeof block);
  a.buffers = buffers;
  a.buffer_bytes = buffer_bytes;
  a.buffer_count = nbuf;
  a.scalars = scalars;
  a.scalar_bytes = scalar_bytes;
  a.shared = shared;
  a.violation = &violation;
  for (;;) {
    uint64_t b = __atomic_fetch_add(&next_block, 1, __ATOMIC_RELAXED);
    if (b >= nblocks) break;
    a.block_id[0] = (uint32_t)(b % grid[0]);
    a.block_id[1] = (uint32_t)((b / grid[0]) % grid[1]);
    a.block_id[2] = (uint32_t)(b / ((uint64_t)grid[0] * grid[1]));
    kernel(&a);
  }
  free(shared);
  return NULL;
}

static double clock_seconds(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  if (argc != 6) die("usage: loomrun SO ENTRY TARGET IN OUT");
  void* so = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!so) die(dlerror());
  entries_fn entries = (entries_fn)dlsym(so, "loom_host_module_entries");
  if (!entries) die("no loom_host_module_entries");
  uint32_t count = 0;
  const char* target = NULL;
  const loom_host_kernel_entry* e = entries(&count, &target);
  if (!target || strcmp(target, argv[3]) != 0) die("target mismatch");
  for (uint32_t i = 0; i < count; i++)
    if (strcmp(e[i].name, argv[2]) == 0) kernel = e[i].fn;
  if (!kernel) die("kernel not found");

  FILE* in = fopen(argv[4], "rb");
  if (!in) die("cannot open input");
  char magic[4];
  read_exact(in, magic, 4);
  if (memcmp(magic, "LOOM", 4) != 0) die("bad magic");
  read_exact(in, grid, sizeof grid);
  read_exact(in, block, sizeof block);
  read_exact(in, &shared_bytes, 4);
  read_exact(in, &nbuf, 4);
  read_exact(in, &scalar_bytes, 4);
  read_exact(in, &nthreads, 4);
  read_exact(in, &iters, 4);
  if (nthreads == 0) nthreads = 1;
  if (iters == 0) iters = 1;
  buffers = calloc(nbuf + 1, sizeof(void*));
  buffer_bytes = calloc(nbuf + 1, sizeof(uint64_t));
  unsigned char** bases = calloc(nbuf + 1, sizeof(unsigned char*));
  for (uint32_t i = 0; i < nbuf; i++) {
    read_exact(in, &buffer_bytes[i], 8);
    void* p;
    if (posix_memalign(&p, 64, buffer_bytes[i] + CANARY)) die("out of memory");
    bases[i] = p;
    read_exact(in, p, buffer_bytes[i]);
    memset(bases[i] + buffer_bytes[i], 0xA5, CANARY);
    buffers[i] = p;
  }
  scalars = malloc(scalar_bytes + 1);
  read_exact(in, scalars, scalar_bytes);
  fclose(in);

  nblocks = (uint64_t)grid[0] * grid[1] * grid[2];
  double best = 1e30, best_cpu = 1e30;
  pthread_t* th = calloc(nthreads, sizeof(pthread_t));
  for (uint32_t it = 0; it < iters; it++) {
    next_block = 0;
    double t0 = clock_seconds(CLOCK_MONOTONIC), c0 = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
    if (nthreads == 1) {
      worker(NULL);
    } else {
      for (uint32_t t = 0; t < nthreads; t++)
        if (pthread_create(&th[t], NULL, worker, NULL)) die("pthread_create");
      for (uint32_t t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
    }
    double dt = clock_seconds(CLOCK_MONOTONIC) - t0, dc = clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
    if (dt < best) best = dt;
    if (dc < best_cpu) best_cpu = dc;
  }
  for (uint32_t i = 0; i < nbuf; i++)
    for (int c = 0; c < CANARY; c++)
      if (bases[i][buffer_bytes[i] + c] != 0xA5) die("canary overwritten: a kernel wrote past a buffer");

  FILE* out = fopen(argv[5], "wb");
  if (!out) die("cannot open output");
  uint32_t zero = 0;
  fwrite(&violation, 4, 1, out);
  fwrite(&zero, 4, 1, out);
  fwrite(&best, 8, 1, out);
  fwrite(&best_cpu, 8, 1, out);
  for (uint32_t i = 0; i < nbuf; i++) fwrite(buffers[i], 1, buffer_bytes[i], out);
  if (fclose(out) != 0) die("write failed");
  return 0;
}
