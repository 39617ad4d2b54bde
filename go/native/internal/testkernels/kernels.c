// kernels.c: ahead-of-time host kernels for go/native's tests, benchmarks and nativedemo, in
// the host calling convention of loom.h (one call per block; the loop over the block's threads
// is inside). Every kernel guards its accesses against buffer_bytes and ORs bit 1 into the
// violation word for each access it skips, as Loom's compiler-generated kernels do.
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "loom/loom.h"

#define VIOLATION_OUT_OF_BOUNDS 1u

static uint32_t scalar_u32(const loom_host_kernel_args* a, uint32_t index) {
  uint32_t v = 0;
  if ((index + 1) * 4 <= a->scalar_bytes) memcpy(&v, (const uint8_t*)a->scalars + index * 4, 4);
  return v;
}

static int in_bounds(const loom_host_kernel_args* a, uint32_t buffer, uint64_t element) {
  if (buffer < a->buffer_count && (element + 1) * 4 <= a->buffer_bytes[buffer]) return 1;
  __atomic_fetch_or(a->violation, VIOLATION_OUT_OF_BOUNDS, __ATOMIC_RELAXED);
  return 0;
}

static uint64_t global_index(const loom_host_kernel_args* a, uint32_t thread) {
  return (uint64_t)a->block_id[0] * a->block[0] + thread;
}

// noop: does nothing (launch-overhead benchmarks).
static void k_noop(const loom_host_kernel_args* a) { (void)a; }

// add_u32(x, y, z; n): z[i] = x[i] + y[i] for i < n (wrapping). z may alias x or y.
static void k_add_u32(const loom_host_kernel_args* a) {
  uint32_t n = scalar_u32(a, 0);
  for (uint32_t t = 0; t < a->block[0]; t++) {
    uint64_t i = global_index(a, t);
    if (i >= n) continue;
    if (!in_bounds(a, 0, i) || !in_bounds(a, 1, i) || !in_bounds(a, 2, i)) continue;
    const uint32_t* x = (const uint32_t*)a->buffers[0];
    const uint32_t* y = (const uint32_t*)a->buffers[1];
    uint32_t* z = (uint32_t*)a->buffers[2];
    z[i] = x[i] + y[i];
  }
}

// axpy_u32(x, y; alpha, n): y[i] += alpha * x[i] for i < n (wrapping).
static void k_axpy_u32(const loom_host_kernel_args* a) {
  uint32_t alpha = scalar_u32(a, 0), n = scalar_u32(a, 1);
  for (uint32_t t = 0; t < a->block[0]; t++) {
    uint64_t i = global_index(a, t);
    if (i >= n) continue;
    if (!in_bounds(a, 0, i) || !in_bounds(a, 1, i)) continue;
    const uint32_t* x = (const uint32_t*)a->buffers[0];
    uint32_t* y = (uint32_t*)a->buffers[1];
    y[i] += alpha * x[i];
  }
}

// block_sum_u32(x, out; n): out[b] = sum of block b's elements of x, through shared memory
// (shared_bytes >= 4 * block size).
static void k_block_sum_u32(const loom_host_kernel_args* a) {
  uint32_t n = scalar_u32(a, 0);
  uint32_t* scratch = (uint32_t*)a->shared;
  if (scratch == NULL) {
    __atomic_fetch_or(a->violation, VIOLATION_OUT_OF_BOUNDS, __ATOMIC_RELAXED);
    return;
  }
  for (uint32_t t = 0; t < a->block[0]; t++) {
    uint64_t i = global_index(a, t);
    scratch[t] = (i < n && in_bounds(a, 0, i)) ? ((const uint32_t*)a->buffers[0])[i] : 0;
  }
  uint32_t sum = 0;
  for (uint32_t t = 0; t < a->block[0]; t++) sum += scratch[t];
  if (in_bounds(a, 1, a->block_id[0])) ((uint32_t*)a->buffers[1])[a->block_id[0]] = sum;
}

// sleep_write_u32(out; micros, value): block 0 sleeps, then writes value to out[0]. A slow
// operation for ordering tests.
static void k_sleep_write_u32(const loom_host_kernel_args* a) {
  if (a->block_id[0] != 0) return;
  uint32_t micros = scalar_u32(a, 0), value = scalar_u32(a, 1);
  struct timespec ts = {micros / 1000000u, (long)(micros % 1000000u) * 1000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
  if (in_bounds(a, 0, 0)) __atomic_store_n((uint32_t*)a->buffers[0], value, __ATOMIC_RELEASE);
}

const loom_host_kernel_entry loom_testkernels_entries[] = {
    {"noop", k_noop},
    {"add_u32", k_add_u32},
    {"axpy_u32", k_axpy_u32},
    {"block_sum_u32", k_block_sum_u32},
    {"sleep_write_u32", k_sleep_write_u32},
};

const uint32_t loom_testkernels_count =
    sizeof(loom_testkernels_entries) / sizeof(loom_testkernels_entries[0]);
