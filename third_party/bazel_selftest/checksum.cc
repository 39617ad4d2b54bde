#include "third_party/bazel_selftest/checksum.h"

#include <numeric>
#include <vector>

namespace {

// Sums over 16-bit little-endian words, padding an odd tail with zero; C++
// containers here only to prove that the C++ standard library links into Go.
uint32_t Fletcher32(const std::vector<uint16_t>& words) {
  uint32_t a = 0, b = 0;
  for (uint16_t w : words) {
    a = (a + w) % 65535;
    b = (b + a) % 65535;
  }
  return (b << 16) | a;
}

}  // namespace

extern "C" uint32_t selftest_fletcher32(const uint8_t* data, size_t n) {
  std::vector<uint16_t> words((n + 1) / 2, 0);
  for (size_t i = 0; i < n; ++i) {
    words[i / 2] |= static_cast<uint16_t>(data[i]) << (8 * (i % 2));
  }
  return Fletcher32(words);
}
