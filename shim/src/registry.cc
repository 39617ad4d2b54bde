// registry.cc: the table of backends. Adding a backend is one file and one line here.
#include "backend.h"

namespace loom {

extern const BackendInfo kHostBackend;  // host_backend.cc
extern const BackendInfo kCudaBackend;  // cuda_backend.cc

namespace registry {

const BackendInfo* const kBackends[] = {
    &kHostBackend,
    &kCudaBackend,
};

}  // namespace registry

const BackendInfo* FindBackend(int32_t id) {
  for (const BackendInfo* backend : registry::kBackends) {
    if (backend->id == id) return backend;
  }
  return nullptr;
}

}  // namespace loom
