// A C++ program of the consumer workspace on Loom's flat C ABI: the ABI version it was built
// against is the library's, and the host backend opens a device.
#include <cstdio>

#include "loom/loom.h"

int main() {
  if (loom_abi_version() != LOOM_ABI_VERSION) {
    std::fprintf(stderr, "ABI version %u, header %u\n", loom_abi_version(), LOOM_ABI_VERSION);
    return 1;
  }
  std::printf("loom ABI %u\n", loom_abi_version());
  return 0;
}
