// test_kernels_so.cc: a host kernel module loaded with dlopen by host_test (as the Loom compiler's
// shared objects are). It reports the target of the CPU it runs on, as a module compiled for
// that CPU would.
#include <cstring>

#include "loom/loom.h"

namespace {

// y[i] = a * x[i] + y[i] for i < n; threads past n set violation bit 1.
void Saxpy(const loom_host_kernel_args* args) {
  float a;
  uint32_t n;
  memcpy(&a, args->scalars, sizeof(a));
  memcpy(&n, static_cast<const char*>(args->scalars) + 4, sizeof(n));
  const float* x = static_cast<const float*>(args->buffers[0]);
  float* y = static_cast<float*>(args->buffers[1]);
  for (uint32_t t = 0; t < args->block[0]; t++) {
    uint64_t i = uint64_t{args->block_id[0]} * args->block[0] + t;
    if (i < n) {
      y[i] = a * x[i] + y[i];
    } else {
      __atomic_fetch_or(args->violation, 1u, __ATOMIC_RELAXED);
    }
  }
}

const loom_host_kernel_entry kEntries[] = {{"saxpy", Saxpy}};

}  // namespace

extern "C" __attribute__((visibility("default"))) const loom_host_kernel_entry*
loom_host_module_entries(uint32_t* count, const char** target) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  *target = __builtin_cpu_supports("x86-64-v4")   ? "host-x86_64-v4"
            : __builtin_cpu_supports("x86-64-v3") ? "host-x86_64-v3"
            : __builtin_cpu_supports("x86-64-v2") ? "host-x86_64-v2"
                                                  : "host-x86_64-v1";
#elif defined(__aarch64__)
  *target = "host-aarch64-v8";
#else
  *target = "host-unknown";
#endif
  *count = sizeof(kEntries) / sizeof(kEntries[0]);
  return kEntries;
}
