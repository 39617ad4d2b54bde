// abi_test.cc: the contract of loom.h: version, status strings, NULL handles, argument checks
// with messages on the right handle, struct_size handling, and the no-driver CUDA error.
#include <dlfcn.h>
#if defined(__x86_64__)
#include <sys/platform/x86.h>
#endif

#include <cstddef>
#include <cstring>
#include <set>
#include <string>
#include <thread>

#include "harness.h"

// The same entry points, declared as a C or Go caller sees them: enums are plain integers, and
// values outside an enum's range are representable (they are not in C++, where they would be
// undefined behaviour to form).
extern "C" {
const char* StatusStringRaw(int32_t status) __asm__("loom_status_string");
loom_status DeviceCountRaw(int32_t backend, int32_t* count, char* err,
                           size_t err_capacity) __asm__("loom_device_count");
loom_status BufferCreateRaw(loom_device* device, int32_t kind, uint64_t bytes,
                            loom_buffer** out) __asm__("loom_buffer_create");
loom_status InjectFaultRaw(loom_stream* stream, int32_t fault) __asm__("loom_stream_inject_fault");
}

namespace {

template <typename E>
void SetRawEnum(E* field, int32_t value) {
  memcpy(field, &value, sizeof(value));
}

loom_device* OpenHost(uint32_t workers = 2) {
  loom_device_open_params params = {};
  params.struct_size = sizeof(params);
  params.backend = LOOM_BACKEND_HOST;
  params.worker_threads = workers;
  loom_device* device = nullptr;
  if (loom_device_open(&params, &device, nullptr, 0) != LOOM_OK) return nullptr;
  return device;
}

std::string DeviceError(loom_device* device) {
  char buf[LOOM_ERROR_CAPACITY];
  loom_device_last_error(device, buf, sizeof(buf));
  return buf;
}

std::string StreamError(loom_stream* stream) {
  char buf[LOOM_ERROR_CAPACITY];
  loom_stream_last_error(stream, buf, sizeof(buf));
  return buf;
}

bool Contains(const std::string& text, const char* part) {
  return text.find(part) != std::string::npos;
}

void Nop(const loom_host_kernel_args*) {}

const loom_host_kernel_entry kNopEntries[] = {{"nop", Nop}};

std::string HostTarget(loom_device* device) {
  loom_device_props props = {};
  props.struct_size = sizeof(props);
  loom_device_get_props(device, &props);
  return props.target;
}

loom_kernel* NopKernel(loom_device* device, loom_module** module) {
  std::string target = HostTarget(device);
  if (loom_host_module_register("abi_test", target.c_str(), kNopEntries, 1) != LOOM_OK) {
    return nullptr;
  }
  loom_module_load_params params = {};
  params.struct_size = sizeof(params);
  params.format = LOOM_MODULE_HOST_STATIC;
  params.target = target.c_str();
  params.name = "abi_test";
  if (loom_module_load(device, &params, module) != LOOM_OK) return nullptr;
  loom_kernel* kernel = nullptr;
  loom_module_get_kernel(*module, "nop", &kernel);
  return kernel;
}

LOOM_TEST(AbiVersion) { CHECK_EQ(loom_abi_version(), uint32_t{LOOM_ABI_VERSION}); }

LOOM_TEST(StatusStringsAreDistinctAndNeverNull) {
  std::set<std::string> seen;
  for (int s = LOOM_OK; s <= LOOM_ERR_INTERNAL; s++) {
    const char* text = loom_status_string(static_cast<loom_status>(s));
    REQUIRE(text != nullptr);
    CHECK(text[0] != '\0');
    CHECK(seen.insert(text).second);
  }
  CHECK_EQ(std::string(loom_status_string(LOOM_OK)), std::string("ok"));
  CHECK_EQ(std::string(loom_status_string(LOOM_ERR_INVALID_ARGUMENT)),
           std::string("invalid argument"));
  const char* unknown = StatusStringRaw(12345);
  REQUIRE(unknown != nullptr);
  CHECK(seen.count(unknown) == 0);
}

LOOM_TEST(NullHandlesAreHarmless) {
  loom_device_destroy(nullptr);
  loom_buffer_destroy(nullptr);
  loom_stream_destroy(nullptr);
  loom_event_destroy(nullptr);
  loom_module_destroy(nullptr);
  loom_graph_destroy(nullptr);
  loom_graph_exec_destroy(nullptr);
  CHECK_EQ(loom_buffer_size(nullptr), uint64_t{0});
  CHECK(loom_buffer_host_pointer(nullptr) == nullptr);
  CHECK_EQ(loom_graph_node_count(nullptr), 0u);
  CHECK_EQ(loom_stream_is_capturing(nullptr), 0);
  char buf[8] = "junk";
  CHECK_EQ(loom_device_last_error(nullptr, buf, sizeof(buf)), size_t{0});
  CHECK_EQ(std::string(buf), std::string(""));
  strcpy(buf, "junk");
  CHECK_EQ(loom_stream_last_error(nullptr, buf, sizeof(buf)), size_t{0});
  CHECK_EQ(std::string(buf), std::string(""));
  loom_device_props props = {};
  props.struct_size = sizeof(props);
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_device_get_props(nullptr, &props));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_stream_synchronize(nullptr));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_stream_fill(nullptr, nullptr, 0, 0, 0));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_event_record(nullptr, nullptr));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_graph_instantiate(nullptr, nullptr));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_kernel_launch(nullptr, nullptr, nullptr));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_stream_inject_fault(nullptr, LOOM_FAULT_NONE));
}

LOOM_TEST(HostDeviceCountAndOpen) {
  int32_t count = -1;
  char err[256] = "junk";
  REQUIRE_OK(loom_device_count(LOOM_BACKEND_HOST, &count, err, sizeof(err)));
  CHECK_EQ(count, 1);
  CHECK_EQ(std::string(err), std::string(""));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT,
               loom_device_count(LOOM_BACKEND_HOST, nullptr, err, sizeof(err)));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, DeviceCountRaw(77, &count, err, sizeof(err)));
  CHECK(Contains(err, "unknown backend 77"));

  loom_device_open_params params = {};
  params.struct_size = sizeof(params);
  params.backend = LOOM_BACKEND_HOST;
  params.index = 1;
  loom_device* device = reinterpret_cast<loom_device*>(0x1);
  CHECK_STATUS(LOOM_ERR_NO_DEVICE, loom_device_open(&params, &device, err, sizeof(err)));
  CHECK(device == nullptr);
  CHECK(Contains(err, "index 1"));
  params.index = -1;
  CHECK_STATUS(LOOM_ERR_NO_DEVICE, loom_device_open(&params, &device, nullptr, 0));
  SetRawEnum(&params.backend, 1000);
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_device_open(&params, &device, err, sizeof(err)));
  CHECK(Contains(err, "unknown backend 1000"));
  params.backend = LOOM_BACKEND_HOST;
  params.index = 0;
  params.worker_threads = 100000;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_device_open(&params, &device, err, sizeof(err)));
  CHECK(Contains(err, "worker_threads"));
  params.worker_threads = 3;
  REQUIRE_OK(loom_device_open(&params, &device, err, sizeof(err)));
  loom_device_props props = {};
  props.struct_size = sizeof(props);
  REQUIRE_OK(loom_device_get_props(device, &props));
  CHECK_EQ(props.backend, LOOM_BACKEND_HOST);
  CHECK_EQ(props.index, 0);
  CHECK_EQ(props.compute_units, 3u);
  CHECK_EQ(props.warp_size, 1u);
  CHECK(props.name[0] != '\0');
  CHECK(strncmp(props.target, "host-", 5) == 0);
  CHECK(props.total_memory > 0);
  CHECK(props.max_threads_per_block >= 1);
  loom_device_destroy(device);
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_device_open(&params, nullptr, err, sizeof(err)));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_device_open(nullptr, &device, err, sizeof(err)));
}

LOOM_TEST(OpenParamsHonourStructSize) {
  loom_device_open_params params = {};
  params.backend = LOOM_BACKEND_HOST;
  params.worker_threads = 5;
  loom_device* device = nullptr;
  char err[256];
  params.struct_size = 0;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_device_open(&params, &device, err, sizeof(err)));
  CHECK(Contains(err, "struct_size"));
  // An older caller without worker_threads: the field is not read, so the default applies.
  params.struct_size = offsetof(loom_device_open_params, worker_threads);
  REQUIRE_OK(loom_device_open(&params, &device, err, sizeof(err)));
  loom_device_props props = {};
  props.struct_size = sizeof(props);
  REQUIRE_OK(loom_device_get_props(device, &props));
  unsigned expected = std::thread::hardware_concurrency();
  CHECK_EQ(props.compute_units, expected > 0 ? expected : 1u);
  loom_device_destroy(device);
  // A newer caller with fields this shim does not know: they are ignored.
  struct Newer {
    loom_device_open_params base;
    uint64_t future_field;
  } newer = {};
  newer.base = params;
  newer.base.struct_size = sizeof(newer);
  newer.future_field = ~0ull;
  REQUIRE_OK(loom_device_open(&newer.base, &device, err, sizeof(err)));
  REQUIRE_OK(loom_device_get_props(device, &props));
  CHECK_EQ(props.compute_units, 5u);
  loom_device_destroy(device);
}

LOOM_TEST(PropsHonourStructSize) {
  loom_device* device = OpenHost();
  REQUIRE(device != nullptr);
  unsigned char raw[sizeof(loom_device_props) + 16];
  memset(raw, 0xab, sizeof(raw));
  loom_device_props* props = reinterpret_cast<loom_device_props*>(raw);
  props->struct_size = offsetof(loom_device_props, name);  // an old caller: backend and index
  REQUIRE_OK(loom_device_get_props(device, props));
  CHECK_EQ(props->struct_size, uint32_t(offsetof(loom_device_props, name)));
  CHECK_EQ(props->backend, LOOM_BACKEND_HOST);
  CHECK_EQ(props->index, 0);
  bool untouched = true;
  for (size_t i = offsetof(loom_device_props, name); i < sizeof(raw); i++) {
    untouched = untouched && raw[i] == 0xab;
  }
  CHECK(untouched);
  // A newer, larger struct: only the known part is written.
  memset(raw, 0xab, sizeof(raw));
  props->struct_size = sizeof(raw);
  REQUIRE_OK(loom_device_get_props(device, props));
  CHECK_EQ(props->struct_size, uint32_t(sizeof(raw)));
  CHECK_EQ(props->warp_size, 1u);
  untouched = true;
  for (size_t i = sizeof(loom_device_props); i < sizeof(raw); i++)
    untouched = untouched && raw[i] == 0xab;
  CHECK(untouched);
  props->struct_size = 2;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_device_get_props(device, props));
  CHECK(Contains(DeviceError(device), "struct_size"));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_device_get_props(device, nullptr));
  loom_device_destroy(device);
}

LOOM_TEST(HostTargetFollowsCpuFeatures) {
  loom_device* device = OpenHost();
  REQUIRE(device != nullptr);
  std::string target = HostTarget(device);
#if defined(__x86_64__)
  // The reference is glibc's CPU detection (<sys/platform/x86.h>, glibc 2.33+: a feature is
  // "active" when the CPU has it and the OS saves its state), not the compiler runtime's
  // __builtin_cpu_supports: zig's compiler-rt (the pinned Bazel toolchain) answers 0 for all.
  bool v2 = CPU_FEATURE_ACTIVE(CMPXCHG16B) && CPU_FEATURE_ACTIVE(LAHF64_SAHF64) &&
            CPU_FEATURE_ACTIVE(POPCNT) && CPU_FEATURE_ACTIVE(SSE3) && CPU_FEATURE_ACTIVE(SSE4_1) &&
            CPU_FEATURE_ACTIVE(SSE4_2) && CPU_FEATURE_ACTIVE(SSSE3);
  bool v3 = v2 && CPU_FEATURE_ACTIVE(AVX) && CPU_FEATURE_ACTIVE(AVX2) && CPU_FEATURE_ACTIVE(BMI1) &&
            CPU_FEATURE_ACTIVE(BMI2) && CPU_FEATURE_ACTIVE(F16C) && CPU_FEATURE_ACTIVE(FMA) &&
            CPU_FEATURE_ACTIVE(LZCNT) && CPU_FEATURE_ACTIVE(MOVBE) && CPU_FEATURE_ACTIVE(OSXSAVE);
  bool v4 = v3 && CPU_FEATURE_ACTIVE(AVX512F) && CPU_FEATURE_ACTIVE(AVX512BW) &&
            CPU_FEATURE_ACTIVE(AVX512CD) && CPU_FEATURE_ACTIVE(AVX512DQ) && CPU_FEATURE_ACTIVE(AVX512VL);
  const char* expected = v4 ? "host-x86_64-v4" : v3 ? "host-x86_64-v3" : v2 ? "host-x86_64-v2" : "host-x86_64-v1";
  CHECK_EQ(target, std::string(expected));
#elif defined(__aarch64__)
  CHECK_EQ(target, std::string("host-aarch64-v8"));
#endif
  loom_device_destroy(device);
}

LOOM_TEST(LastErrorIsKeptTruncatedAndTerminated) {
  loom_device* device = OpenHost();
  REQUIRE(device != nullptr);
  loom_buffer* buffer = nullptr;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT,
               loom_buffer_create(device, LOOM_MEMORY_DEVICE, 0, &buffer));
  CHECK(buffer == nullptr);
  std::string message = DeviceError(device);
  CHECK(Contains(message, "size"));
  char small[6];
  size_t length = loom_device_last_error(device, small, sizeof(small));
  CHECK_EQ(length, message.size());
  CHECK_EQ(std::string(small), message.substr(0, 5));
  CHECK_EQ(loom_device_last_error(device, nullptr, 0), message.size());
  // Success leaves the last failure's message in place.
  REQUIRE_OK(loom_buffer_create(device, LOOM_MEMORY_DEVICE, 16, &buffer));
  CHECK_EQ(DeviceError(device), message);
  loom_buffer* unused = nullptr;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, BufferCreateRaw(device, 9, 16, &unused));
  CHECK(Contains(DeviceError(device), "memory kind"));
  loom_buffer* huge = nullptr;
  CHECK_STATUS(LOOM_ERR_OUT_OF_MEMORY,
               loom_buffer_create(device, LOOM_MEMORY_DEVICE, ~0ull >> 2, &huge));
  CHECK(huge == nullptr);
  CHECK(Contains(DeviceError(device), "cannot allocate"));
  loom_buffer_destroy(buffer);
  loom_device_destroy(device);
}

LOOM_TEST(BufferKindsAndHostPointers) {
  loom_device* device = OpenHost();
  REQUIRE(device != nullptr);
  loom_buffer* local = nullptr;
  loom_buffer* shared = nullptr;
  REQUIRE_OK(loom_buffer_create(device, LOOM_MEMORY_DEVICE, 100, &local));
  REQUIRE_OK(loom_buffer_create(device, LOOM_MEMORY_SHARED, 100, &shared));
  CHECK_EQ(loom_buffer_size(local), uint64_t{100});
  CHECK_EQ(loom_buffer_kind(local), LOOM_MEMORY_DEVICE);
  CHECK_EQ(loom_buffer_kind(shared), LOOM_MEMORY_SHARED);
  CHECK(loom_buffer_host_pointer(local) == nullptr);
  void* host = loom_buffer_host_pointer(shared);
  REQUIRE(host != nullptr);
  CHECK_EQ(reinterpret_cast<uintptr_t>(host) % 64, uintptr_t{0});
  loom_buffer_destroy(local);
  loom_buffer_destroy(shared);
  loom_device_destroy(device);
}

LOOM_TEST(BadStreamArgumentsNameTheProblem) {
  loom_device* device = OpenHost();
  loom_device* other = OpenHost();
  REQUIRE(device != nullptr && other != nullptr);
  loom_stream* stream = nullptr;
  loom_buffer* a = nullptr;
  loom_buffer* foreign = nullptr;
  REQUIRE_OK(loom_stream_create(device, &stream));
  REQUIRE_OK(loom_buffer_create(device, LOOM_MEMORY_DEVICE, 64, &a));
  REQUIRE_OK(loom_buffer_create(other, LOOM_MEMORY_DEVICE, 64, &foreign));
  char host[128] = {};

  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_stream_copy_h2d(stream, a, 60, host, 8));
  CHECK(Contains(StreamError(stream), "outside the buffer of 64 bytes"));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_stream_copy_h2d(stream, a, ~0ull, host, 2));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_stream_copy_h2d(stream, a, 0, nullptr, 8));
  CHECK(Contains(StreamError(stream), "host pointer is NULL"));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_stream_copy_d2h(stream, host, foreign, 0, 8));
  CHECK(Contains(StreamError(stream), "another device"));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_stream_copy_d2h(stream, host, nullptr, 0, 8));
  CHECK(Contains(StreamError(stream), "buffer is NULL"));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_stream_copy_d2d(stream, a, 0, a, 8, 16));
  CHECK(Contains(StreamError(stream), "overlap"));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_stream_fill(stream, a, 65, 0, 1));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_stream_host_callback(stream, nullptr, nullptr));
  CHECK(Contains(StreamError(stream), "fn is NULL"));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, InjectFaultRaw(stream, 42));
  CHECK(Contains(StreamError(stream), "unknown fault"));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_stream_wait_event(stream, nullptr));
  loom_event* foreign_event = nullptr;
  REQUIRE_OK(loom_event_create(other, &foreign_event));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_event_record(foreign_event, stream));
  CHECK(Contains(StreamError(stream), "different devices"));
  CHECK(Contains(DeviceError(other), "different devices"));
  // Zero-byte operations are valid and do nothing; a full-range one is fine.
  CHECK_OK(loom_stream_copy_h2d(stream, a, 64, host, 0));
  CHECK_OK(loom_stream_copy_h2d(stream, a, 0, host, 64));
  CHECK_OK(loom_stream_synchronize(stream));
  loom_event_destroy(foreign_event);
  loom_buffer_destroy(a);
  loom_buffer_destroy(foreign);
  loom_stream_destroy(stream);
  loom_device_destroy(device);
  loom_device_destroy(other);
}

LOOM_TEST(BadLaunchArgumentsNameTheProblem) {
  loom_device* device = OpenHost();
  REQUIRE(device != nullptr);
  loom_module* module = nullptr;
  loom_kernel* kernel = NopKernel(device, &module);
  REQUIRE(kernel != nullptr);
  loom_stream* stream = nullptr;
  loom_buffer* buffer = nullptr;
  REQUIRE_OK(loom_stream_create(device, &stream));
  REQUIRE_OK(loom_buffer_create(device, LOOM_MEMORY_DEVICE, 64, &buffer));
  loom_device_props props = {};
  props.struct_size = sizeof(props);
  REQUIRE_OK(loom_device_get_props(device, &props));

  auto fresh = [] {
    loom_launch_params p = {};
    p.struct_size = sizeof(p);
    for (int i = 0; i < 3; i++) p.grid[i] = p.block[i] = 1;
    return p;
  };
  loom_launch_params p = fresh();
  REQUIRE_OK(loom_kernel_launch(stream, kernel, &p));

  p.grid[1] = 0;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_kernel_launch(stream, kernel, &p));
  CHECK(Contains(StreamError(stream), "grid y = 0"));
  p = fresh();
  p.block[0] = props.max_block_dim[0] + 1;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_kernel_launch(stream, kernel, &p));
  CHECK(Contains(StreamError(stream), "block x"));
  p = fresh();
  p.block[0] = props.max_block_dim[0];
  p.block[1] = 2;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_kernel_launch(stream, kernel, &p));
  CHECK(Contains(StreamError(stream), "threads per block"));
  p = fresh();
  CHECK(props.max_shared_memory_per_block_optin >= props.max_shared_memory_per_block);
  p.shared_bytes = props.max_shared_memory_per_block_optin + 1;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_kernel_launch(stream, kernel, &p));
  CHECK(Contains(StreamError(stream), "shared memory"));
  p = fresh();
  p.buffer_count = 1;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_kernel_launch(stream, kernel, &p));
  CHECK(Contains(StreamError(stream), "buffer_count"));
  uint64_t offset = 65;
  p.buffers = &buffer;
  p.buffer_offsets = &offset;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_kernel_launch(stream, kernel, &p));
  CHECK(Contains(StreamError(stream), "binding 0"));
  offset = 64;  // an empty view at the end is allowed
  CHECK_OK(loom_kernel_launch(stream, kernel, &p));
  p = fresh();
  p.scalar_bytes = 4;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_kernel_launch(stream, kernel, &p));
  CHECK(Contains(StreamError(stream), "scalars is NULL"));
  p = fresh();
  p.violation = buffer;
  p.violation_offset = 62;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_kernel_launch(stream, kernel, &p));
  CHECK(Contains(StreamError(stream), "violation word"));
  p.violation_offset = 6;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_kernel_launch(stream, kernel, &p));
  CHECK(Contains(StreamError(stream), "multiple of 4"));
  p = fresh();
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_kernel_launch(stream, nullptr, &p));
  CHECK(Contains(StreamError(stream), "kernel is NULL"));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_kernel_launch(stream, kernel, nullptr));
  p.struct_size = 0;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_kernel_launch(stream, kernel, &p));
  // An older caller without the violation fields: they are not read.
  p = fresh();
  p.violation = reinterpret_cast<loom_buffer*>(0x1);  // garbage past struct_size
  p.struct_size = offsetof(loom_launch_params, violation);
  CHECK_OK(loom_kernel_launch(stream, kernel, &p));
  CHECK_OK(loom_stream_synchronize(stream));

  loom_buffer_destroy(buffer);
  loom_stream_destroy(stream);
  loom_module_destroy(module);
  loom_device_destroy(device);
}

LOOM_TEST(BadModuleArgumentsNameTheProblem) {
  loom_device* device = OpenHost();
  REQUIRE(device != nullptr);
  std::string target = HostTarget(device);
  loom_module* module = nullptr;
  loom_module_load_params p = {};
  p.struct_size = sizeof(p);
  p.format = LOOM_MODULE_HOST_STATIC;
  p.target = target.c_str();
  p.name = "abi_test_not_registered";
  CHECK_STATUS(LOOM_ERR_NOT_FOUND, loom_module_load(device, &p, &module));
  CHECK(Contains(DeviceError(device), "abi_test_not_registered"));
  CHECK(module == nullptr);
  p.target = "sm_90";
  CHECK_STATUS(LOOM_ERR_TARGET_MISMATCH, loom_module_load(device, &p, &module));
  CHECK(Contains(DeviceError(device), "sm_90"));
  p.target = nullptr;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_module_load(device, &p, &module));
  CHECK(Contains(DeviceError(device), "target is NULL"));
  p.target = target.c_str();
  SetRawEnum(&p.format, 99);
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_module_load(device, &p, &module));
  CHECK(Contains(DeviceError(device), "unknown format"));
  p.format = LOOM_MODULE_CUDA_PTX;
  p.data = "x";
  p.size = 1;
  CHECK_STATUS(LOOM_ERR_NOT_SUPPORTED, loom_module_load(device, &p, &module));
  p.format = LOOM_MODULE_HOST_SHARED_OBJECT;
  p.path = "/nonexistent/libnothing.so";
  CHECK_STATUS(LOOM_ERR_NOT_FOUND, loom_module_load(device, &p, &module));
  CHECK(Contains(DeviceError(device), "/nonexistent/libnothing.so"));
  p.path = nullptr;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_module_load(device, &p, &module));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_module_load(device, nullptr, &module));

  // A static module registered for another target.
  REQUIRE_OK(loom_host_module_register("abi_test_other", "host-other", kNopEntries, 1));
  p.format = LOOM_MODULE_HOST_STATIC;
  p.name = "abi_test_other";
  CHECK_STATUS(LOOM_ERR_TARGET_MISMATCH, loom_module_load(device, &p, &module));
  CHECK(Contains(DeviceError(device), "host-other"));

  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_host_module_register(nullptr, "t", kNopEntries, 1));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_host_module_register("m", nullptr, kNopEntries, 1));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_host_module_register("m", "t", nullptr, 1));
  const loom_host_kernel_entry bad[] = {{"f", nullptr}};
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_host_module_register("m", "t", bad, 1));

  loom_kernel* kernel = NopKernel(device, &module);
  REQUIRE(kernel != nullptr);
  loom_kernel* again = nullptr;
  REQUIRE_OK(loom_module_get_kernel(module, "nop", &again));
  CHECK(again == kernel);
  CHECK_STATUS(LOOM_ERR_NOT_FOUND, loom_module_get_kernel(module, "missing", &again));
  CHECK(Contains(DeviceError(device), "'missing'"));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_module_get_kernel(module, nullptr, &again));
  loom_module_destroy(module);
  loom_device_destroy(device);
}

LOOM_TEST(BadGraphArgumentsNameTheProblem) {
  loom_device* device = OpenHost();
  REQUIRE(device != nullptr);
  loom_graph* graph = nullptr;
  loom_buffer* buffer = nullptr;
  REQUIRE_OK(loom_graph_create(device, &graph));
  REQUIRE_OK(loom_buffer_create(device, LOOM_MEMORY_DEVICE, 64, &buffer));
  uint32_t a = 99, b = 99;
  REQUIRE_OK(loom_graph_add_fill_node(graph, buffer, 0, 8, 1, nullptr, 0, &a));
  CHECK_EQ(a, 0u);
  uint32_t deps[2] = {0, 0};
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_graph_add_empty_node(graph, deps, 2, &b));
  CHECK(Contains(DeviceError(device), "listed twice"));
  deps[1] = 7;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_graph_add_empty_node(graph, deps, 2, &b));
  CHECK(Contains(DeviceError(device), "dependency 7 does not exist"));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_graph_add_empty_node(graph, nullptr, 1, &b));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT,
               loom_graph_add_copy_node(graph, buffer, 0, buffer, 4, 8, deps, 1, &b));
  CHECK(Contains(DeviceError(device), "overlap"));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT,
               loom_graph_add_fill_node(graph, buffer, 60, 8, 1, deps, 1, &b));
  CHECK_EQ(loom_graph_node_count(graph), 1u);
  REQUIRE_OK(loom_graph_add_copy_node(graph, buffer, 32, buffer, 0, 8, deps, 1, &b));
  CHECK_EQ(b, 1u);
  loom_graph_exec* exec = nullptr;
  REQUIRE_OK(loom_graph_instantiate(graph, &exec));
  loom_launch_params p = {};
  p.struct_size = sizeof(p);
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_graph_exec_update_kernel_node(exec, 1, &p));
  CHECK(Contains(DeviceError(device), "not a kernel node"));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_graph_exec_update_kernel_node(exec, 5, &p));
  CHECK(Contains(DeviceError(device), "does not exist"));

  loom_stream* stream = nullptr;
  REQUIRE_OK(loom_stream_create(device, &stream));
  loom_graph* captured = nullptr;
  CHECK_STATUS(LOOM_ERR_CAPTURE, loom_stream_end_capture(stream, &captured));
  CHECK(Contains(StreamError(stream), "not capturing"));
  REQUIRE_OK(loom_stream_begin_capture(stream));
  CHECK_STATUS(LOOM_ERR_CAPTURE, loom_stream_begin_capture(stream));
  CHECK(Contains(StreamError(stream), "already capturing"));
  REQUIRE_OK(loom_stream_end_capture(stream, &captured));
  CHECK_EQ(loom_graph_node_count(captured), 0u);
  loom_graph_destroy(captured);

  loom_graph_exec_destroy(exec);
  loom_graph_destroy(graph);
  loom_buffer_destroy(buffer);
  loom_stream_destroy(stream);
  loom_device_destroy(device);
}

bool CudaDriverPresent() {
  for (const char* name : {"libcuda.so.1", "libcuda.so"}) {
    if (void* library = dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
      dlclose(library);
      return true;
    }
  }
  return false;
}

LOOM_TEST(CudaWithoutDriverSaysSo) {
  if (CudaDriverPresent()) SKIP("a CUDA driver is installed on this machine");
  const std::string expected = "no CUDA driver: tried libcuda.so.1, libcuda.so";
  int32_t count = 7;
  char err[LOOM_ERROR_CAPACITY] = "junk";
  CHECK_STATUS(LOOM_ERR_NO_DRIVER, loom_device_count(LOOM_BACKEND_CUDA, &count, err, sizeof(err)));
  CHECK_EQ(std::string(err), expected);
  CHECK_EQ(count, 0);
  loom_device_open_params params = {};
  params.struct_size = sizeof(params);
  params.backend = LOOM_BACKEND_CUDA;
  loom_device* device = reinterpret_cast<loom_device*>(0x1);
  strcpy(err, "junk");
  CHECK_STATUS(LOOM_ERR_NO_DRIVER, loom_device_open(&params, &device, err, sizeof(err)));
  CHECK_EQ(std::string(err), expected);
  CHECK(device == nullptr);
  char small[10];
  CHECK_STATUS(LOOM_ERR_NO_DRIVER, loom_device_open(&params, &device, small, sizeof(small)));
  CHECK_EQ(std::string(small), expected.substr(0, 9));
  CHECK_STATUS(LOOM_ERR_NO_DRIVER, loom_device_open(&params, &device, nullptr, 0));
}

}  // namespace

int main() { return loomtest::RunAll(); }
