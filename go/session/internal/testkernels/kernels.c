// kernels.c: ahead-of-time host kernels for go/session's tests, examples and benchmarks, in the
// host calling convention of loom.h (one call per block; the loop over the block's threads is
// inside). Accesses are guarded against buffer_bytes; a skipped access ORs bit 1 into the
// violation word, as Loom's generated kernels do.
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

static void violate(const loom_host_kernel_args* a) {
  __atomic_fetch_or(a->violation, VIOLATION_OUT_OF_BOUNDS, __ATOMIC_RELAXED);
}

static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// mix(bindings...; seed, delay_us, then (mode, bytes) per binding): one block of one thread.
// It folds every byte of the bindings whose mode has bit 0 (read) into a hash, in declaration
// order, sleeps delay_us, then fills the bindings whose mode has bit 1 (write), in declaration
// order, with bytes derived from the hash, the binding index and the position. Its output
// therefore depends on exactly the bytes it declares to read, and it touches nothing else.
static void k_mix(const loom_host_kernel_args* a) {
  uint64_t h = mix64(scalar_u32(a, 0) + 0x9e3779b97f4a7c15ull);
  uint32_t delay = scalar_u32(a, 1);
  for (uint32_t i = 0; i < a->buffer_count; i++) {
    uint32_t mode = scalar_u32(a, 2 + 2 * i), n = scalar_u32(a, 3 + 2 * i);
    if (n > a->buffer_bytes[i]) {
      violate(a);
      n = (uint32_t)a->buffer_bytes[i];
    }
    if ((mode & 1u) == 0) continue;
    const uint8_t* p = (const uint8_t*)a->buffers[i];
    for (uint32_t j = 0; j < n; j++) h = (h ^ p[j]) * 0x100000001b3ull;
  }
  if (delay > 0) {
    struct timespec ts = {delay / 1000000u, (long)(delay % 1000000u) * 1000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
  }
  for (uint32_t i = 0; i < a->buffer_count; i++) {
    uint32_t mode = scalar_u32(a, 2 + 2 * i), n = scalar_u32(a, 3 + 2 * i);
    if (n > a->buffer_bytes[i]) n = (uint32_t)a->buffer_bytes[i];
    if ((mode & 2u) == 0) continue;
    uint8_t* p = (uint8_t*)a->buffers[i];
    for (uint32_t j = 0; j < n; j++) p[j] = (uint8_t)mix64(h + ((uint64_t)i << 32) + j);
  }
}

// axpy_f32(x, y; alpha, n): y[i] += alpha * x[i] for i < n; blocks of block[0] threads.
static void k_axpy_f32(const loom_host_kernel_args* a) {
  float alpha;
  uint32_t bits = scalar_u32(a, 0), n = scalar_u32(a, 1);
  memcpy(&alpha, &bits, 4);
  for (uint32_t t = 0; t < a->block[0]; t++) {
    uint64_t i = (uint64_t)a->block_id[0] * a->block[0] + t;
    if (i >= n) continue;
    if ((i + 1) * 4 > a->buffer_bytes[0] || (i + 1) * 4 > a->buffer_bytes[1]) {
      violate(a);
      continue;
    }
    const float* x = (const float*)a->buffers[0];
    float* y = (float*)a->buffers[1];
    y[i] += alpha * x[i];
  }
}

const loom_host_kernel_entry loom_session_testkernels_entries[] = {
    {"mix", k_mix},
    {"axpy_f32", k_axpy_f32},
};

const uint32_t loom_session_testkernels_count =
    sizeof(loom_session_testkernels_entries) / sizeof(loom_session_testkernels_entries[0]);
