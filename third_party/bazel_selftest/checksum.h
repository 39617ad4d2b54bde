// A tiny C ABI, implemented in C++, for the Bazel self-test.
#ifndef LOOM_BAZEL_SELFTEST_CHECKSUM_H_
#define LOOM_BAZEL_SELFTEST_CHECKSUM_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Returns the Fletcher-32 checksum of n bytes at data (0 when n is 0).
uint32_t selftest_fletcher32(const uint8_t* data, size_t n);

#ifdef __cplusplus
}
#endif

#endif  // LOOM_BAZEL_SELFTEST_CHECKSUM_H_
