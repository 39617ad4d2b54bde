// Compares selftest_fletcher32 with a direct byte-wise reference on random
// inputs, fresh each run.
#include <cstdio>
#include <random>
#include <vector>

#include "third_party/bazel_selftest/checksum.h"

namespace {

uint32_t Reference(const std::vector<uint8_t>& bytes) {
  uint32_t a = 0, b = 0;
  for (size_t i = 0; i < bytes.size(); i += 2) {
    uint32_t word = bytes[i];
    if (i + 1 < bytes.size()) word |= static_cast<uint32_t>(bytes[i + 1]) << 8;
    a = (a + word) % 65535;
    b = (b + a) % 65535;
  }
  return (b << 16) | a;
}

}  // namespace

int main() {
  std::random_device seed;
  std::mt19937 rng(seed());
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> length(1, 4096);
  for (int round = 0; round < 200; ++round) {
    std::vector<uint8_t> bytes(length(rng));
    for (auto& b : bytes) b = static_cast<uint8_t>(byte(rng));
    uint32_t got = selftest_fletcher32(bytes.data(), bytes.size());
    uint32_t want = Reference(bytes);
    if (got != want) {
      std::fprintf(stderr, "round %d, %zu bytes: got %08x, want %08x\n", round, bytes.size(), got, want);
      return 1;
    }
  }
  if (selftest_fletcher32(nullptr, 0) != 0) {
    std::fprintf(stderr, "empty input: want 0\n");
    return 1;
  }
  return 0;
}
