// cuda_test.cc: the CUDA backend on a real device: NVRTC modules, kernels, copies, events,
// graphs (explicit and captured) and fault injection, with results checked on the host.
// Every test prints SKIP (and the suite passes) when there is no CUDA driver or device.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "harness.h"

namespace {

std::string g_skip;  // why the suite cannot run here; empty when a device is present

const char* kSource = R"(
extern "C" __global__ void saxpy(const float* x, float* y, unsigned int* violation, float a,
                                 unsigned int n) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i]; else atomicOr(violation, 1u);
}
// Reverses n floats through dynamic shared memory (n * 4 bytes of it: above 48 KiB in the test).
extern "C" __global__ void shared_reverse(const float* x, float* y, unsigned int* violation,
                                          unsigned int n) {
  extern __shared__ float tile[];
  for (unsigned int i = threadIdx.x; i < n; i += blockDim.x) tile[i] = x[i];
  __syncthreads();
  for (unsigned int i = threadIdx.x; i < n; i += blockDim.x) y[i] = tile[n - 1 - i];
}
extern "C" __global__ void iota(unsigned int* out, unsigned int* violation, unsigned int n,
                                unsigned int base) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = base + i;
}
)";

std::mt19937_64& Rng() {
  static std::mt19937_64 rng(std::random_device{}());
  return rng;
}

float RandomFloat() { return static_cast<float>(Rng()() % 20000) / 100.0f - 100.0f; }

bool Near(float a, float b) { return std::fabs(a - b) <= 1e-4f * (1.0f + std::fabs(b)); }

std::string Message(loom_stream* stream) {
  char buf[LOOM_ERROR_CAPACITY];
  loom_stream_last_error(stream, buf, sizeof(buf));
  return buf;
}

std::string Message(loom_device* device) {
  char buf[LOOM_ERROR_CAPACITY];
  loom_device_last_error(device, buf, sizeof(buf));
  return buf;
}

struct Gpu {
  loom_device* device = nullptr;
  loom_module* module = nullptr;
  loom_stream* stream = nullptr;
  std::string target;
  std::string error;

  Gpu() {
    loom_device_open_params params = {};
    params.struct_size = sizeof(params);
    params.backend = LOOM_BACKEND_CUDA;
    char err[LOOM_ERROR_CAPACITY];
    if (loom_device_open(&params, &device, err, sizeof(err)) != LOOM_OK) {
      error = err;
      return;
    }
    loom_device_props props = {};
    props.struct_size = sizeof(props);
    loom_device_get_props(device, &props);
    target = props.target;
    loom_module_load_params load = {};
    load.struct_size = sizeof(load);
    load.format = LOOM_MODULE_CUDA_SOURCE;
    load.target = target.c_str();
    load.name = "cuda_test.cu";
    load.data = kSource;
    load.size = strlen(kSource);
    if (loom_module_load(device, &load, &module) != LOOM_OK) {
      error = Message(device);
      module = nullptr;
      return;
    }
    if (loom_stream_create(device, &stream) != LOOM_OK) error = Message(device);
  }
  ~Gpu() {
    loom_stream_destroy(stream);
    loom_module_destroy(module);
    loom_device_destroy(device);
  }
  bool ok() const { return stream != nullptr; }
  loom_kernel* Kernel(const char* name) {
    loom_kernel* kernel = nullptr;
    loom_module_get_kernel(module, name, &kernel);
    return kernel;
  }
  loom_buffer* Buffer(uint64_t bytes, loom_memory_kind kind = LOOM_MEMORY_DEVICE) {
    loom_buffer* buffer = nullptr;
    loom_buffer_create(device, kind, bytes, &buffer);
    return buffer;
  }
};

struct Launch {
  loom_launch_params params = {};
  std::vector<loom_buffer*> buffers;
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> scalars;
  Launch(uint32_t grid, uint32_t block) {
    params.struct_size = sizeof(params);
    params.grid[0] = grid;
    params.block[0] = block;
    params.grid[1] = params.grid[2] = params.block[1] = params.block[2] = 1;
  }
  Launch& Bind(loom_buffer* buffer, uint64_t offset = 0) {
    buffers.push_back(buffer);
    offsets.push_back(offset);
    return *this;
  }
  template <typename T>
  Launch& Add(T value) {
    size_t at = (scalars.size() + alignof(T) - 1) / alignof(T) * alignof(T);
    scalars.resize(at + sizeof(T));
    memcpy(&scalars[at], &value, sizeof(T));
    return *this;
  }
  const loom_launch_params* Get() {
    params.buffers = buffers.data();
    params.buffer_offsets = offsets.data();
    params.buffer_count = static_cast<uint32_t>(buffers.size());
    params.scalars = scalars.data();
    params.scalar_bytes = static_cast<uint32_t>(scalars.size());
    return &params;
  }
};

#define NEED_GPU(gpu)                                            \
  if (!g_skip.empty()) SKIP(g_skip);                             \
  Gpu gpu;                                                       \
  if (!gpu.ok()) fprintf(stderr, "    %s\n", gpu.error.c_str()); \
  REQUIRE(gpu.ok())

LOOM_TEST(DeviceProps) {
  NEED_GPU(gpu);
  loom_device_props props = {};
  props.struct_size = sizeof(props);
  REQUIRE_OK(loom_device_get_props(gpu.device, &props));
  CHECK_EQ(props.backend, LOOM_BACKEND_CUDA);
  CHECK(strncmp(props.target, "sm_", 3) == 0);
  CHECK(props.compute_units > 0);
  CHECK_EQ(props.warp_size, 32u);
  CHECK(props.max_threads_per_block >= 1024);
  CHECK(props.total_memory > 0);
  CHECK(props.driver_version >= 11000);
  printf("    %s, %s, %u SMs, driver %u\n", props.name, props.target, props.compute_units,
         props.driver_version);
}

LOOM_TEST(NvrtcKernelCopiesAndFills) {
  NEED_GPU(gpu);
  const uint32_t n = 10000 + static_cast<uint32_t>(Rng()() % 5000), block = 128;
  std::vector<float> x(n), y(n), expected(n), result(n), copied(n);
  float a = RandomFloat() / 10.0f;
  for (uint32_t i = 0; i < n; i++) {
    x[i] = RandomFloat();
    y[i] = RandomFloat();
    expected[i] = std::fma(a, x[i], y[i]);
  }
  loom_buffer* bx = gpu.Buffer(n * 4);
  loom_buffer* by = gpu.Buffer(n * 4);
  loom_buffer* bz = gpu.Buffer(n * 4 + 256);
  loom_buffer* words = gpu.Buffer(16);
  REQUIRE(bx && by && bz && words);
  loom_stream* s = gpu.stream;
  REQUIRE_OK(loom_stream_fill(s, words, 0, 16, 0));
  REQUIRE_OK(loom_stream_copy_h2d(s, bx, 0, x.data(), n * 4));
  REQUIRE_OK(loom_stream_copy_h2d(s, by, 0, y.data(), n * 4));
  Launch launch((n + block - 1) / block + 1, block);  // a block too many: it sets the violation bit
  launch.Bind(bx).Bind(by).Add(a).Add(n);
  launch.params.violation = words;
  launch.params.violation_offset = 4;
  REQUIRE_OK(loom_kernel_launch(s, gpu.Kernel("saxpy"), launch.Get()));
  REQUIRE_OK(loom_stream_copy_d2d(s, bz, 256, by, 0, n * 4));
  REQUIRE_OK(loom_stream_copy_d2h(s, result.data(), by, 0, n * 4));
  REQUIRE_OK(loom_stream_copy_d2h(s, copied.data(), bz, 256, n * 4));
  uint32_t host_words[4];
  REQUIRE_OK(loom_stream_copy_d2h(s, host_words, words, 0, 16));
  REQUIRE_OK(loom_stream_synchronize(s));
  uint32_t bad = 0;
  for (uint32_t i = 0; i < n; i++) bad += !Near(result[i], expected[i]) || copied[i] != result[i];
  CHECK_EQ(bad, 0u);
  CHECK_EQ(host_words[1], 1u);
  CHECK_EQ(host_words[0] | host_words[2] | host_words[3], 0u);
  // Fill a middle range and read it back.
  std::vector<uint8_t> bytes(n * 4);
  REQUIRE_OK(loom_stream_fill(s, bz, 300, 1000, 0x5a));
  REQUIRE_OK(loom_stream_copy_d2h(s, bytes.data(), bz, 0, n * 4));
  REQUIRE_OK(loom_stream_synchronize(s));
  CHECK_EQ(bytes[300], uint8_t{0x5a});
  CHECK_EQ(bytes[1299], uint8_t{0x5a});
  loom_kernel* missing = nullptr;
  CHECK_STATUS(LOOM_ERR_NOT_FOUND, loom_module_get_kernel(gpu.module, "nope", &missing));
  for (loom_buffer* b : {bx, by, bz, words}) loom_buffer_destroy(b);
}

// A launch asking for more than 48 KiB of shared memory is opted in (cuFuncSetAttribute) by
// the shim, directly and as a graph node; one beyond the opt-in limit fails with a message.
LOOM_TEST(SharedMemoryAbove48KiB) {
  NEED_GPU(gpu);
  loom_device_props props = {};
  props.struct_size = sizeof(props);
  REQUIRE_OK(loom_device_get_props(gpu.device, &props));
  CHECK_EQ(props.max_shared_memory_per_block, 48u << 10);
  printf("    opt-in shared memory per block: %u bytes\n", props.max_shared_memory_per_block_optin);
  REQUIRE(props.max_shared_memory_per_block_optin >= 96u << 10);  // sm_70 and later
  loom_kernel* kernel = gpu.Kernel("shared_reverse");
  REQUIRE(kernel != nullptr);
  const uint32_t most = props.max_shared_memory_per_block_optin / 4;
  loom_buffer* bx = gpu.Buffer(most * 4);
  loom_buffer* by = gpu.Buffer(most * 4);
  REQUIRE(bx && by);
  // 64 KiB, then the whole opt-in limit (the attribute raised twice), then as a graph node.
  for (uint32_t n : {16384u, most, most - 1000}) {
    std::vector<float> x(n), y(n);
    for (float& v : x) v = RandomFloat();
    REQUIRE_OK(loom_stream_copy_h2d(gpu.stream, bx, 0, x.data(), n * 4));
    Launch launch(1, 1024);
    launch.Bind(bx).Bind(by).Add(n);
    launch.params.shared_bytes = n * 4;
    if (n != most - 1000) {
      REQUIRE_OK(loom_kernel_launch(gpu.stream, kernel, launch.Get()));
    } else {
      loom_graph* graph = nullptr;
      REQUIRE_OK(loom_graph_create(gpu.device, &graph));
      uint32_t node = 0;
      REQUIRE_OK(loom_graph_add_kernel_node(graph, kernel, launch.Get(), nullptr, 0, &node));
      loom_graph_exec* exec = nullptr;
      REQUIRE_OK(loom_graph_instantiate(graph, &exec));
      loom_graph_destroy(graph);
      REQUIRE_OK(loom_graph_exec_launch(exec, gpu.stream));
      REQUIRE_OK(loom_stream_synchronize(gpu.stream));
      loom_graph_exec_destroy(exec);
    }
    REQUIRE_OK(loom_stream_copy_d2h(gpu.stream, y.data(), by, 0, n * 4));
    REQUIRE_OK(loom_stream_synchronize(gpu.stream));
    uint32_t bad = 0;
    for (uint32_t i = 0; i < n; i++) bad += y[i] != x[n - 1 - i];
    CHECK_EQ(bad, 0u);
  }
  Launch over(1, 1024);
  over.Bind(bx).Bind(by).Add(most);
  over.params.shared_bytes = props.max_shared_memory_per_block_optin + 4;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_kernel_launch(gpu.stream, kernel, over.Get()));
  CHECK(Message(gpu.stream).find("opt-in") != std::string::npos);
  REQUIRE_OK(loom_stream_synchronize(gpu.stream));
  for (loom_buffer* b : {bx, by}) loom_buffer_destroy(b);
}

LOOM_TEST(CompileErrorCarriesTheLog) {
  NEED_GPU(gpu);
  const char* broken = "extern \"C\" __global__ void broken(int* p) { p[0] = undefined_name; }";
  loom_module_load_params load = {};
  load.struct_size = sizeof(load);
  load.format = LOOM_MODULE_CUDA_SOURCE;
  load.name = "broken.cu";
  load.data = broken;
  load.size = strlen(broken);
  loom_module* module = nullptr;
  CHECK_STATUS(LOOM_ERR_COMPILE, loom_module_load(gpu.device, &load, &module));
  std::string message = Message(gpu.device);
  CHECK(message.find("undefined_name") != std::string::npos);
  CHECK(module == nullptr);
  load.format = LOOM_MODULE_CUDA_PTX;
  load.target = "sm_10";
  CHECK_STATUS(LOOM_ERR_TARGET_MISMATCH, loom_module_load(gpu.device, &load, &module));
  load.target = gpu.target.c_str();
  load.data = "this is not PTX";
  load.size = strlen("this is not PTX");
  CHECK(loom_module_load(gpu.device, &load, &module) != LOOM_OK);
}

LOOM_TEST(SharedBufferIsVisibleToTheHost) {
  NEED_GPU(gpu);
  const uint32_t n = 4096;
  loom_buffer* out = gpu.Buffer(n * 4, LOOM_MEMORY_SHARED);
  REQUIRE(out != nullptr);
  uint32_t* host = static_cast<uint32_t*>(loom_buffer_host_pointer(out));
  REQUIRE(host != nullptr);
  uint32_t base = static_cast<uint32_t>(Rng()());
  Launch launch(n / 256, 256);
  launch.Bind(out).Add(n).Add(base);
  REQUIRE_OK(loom_kernel_launch(gpu.stream, gpu.Kernel("iota"), launch.Get()));
  REQUIRE_OK(loom_stream_synchronize(gpu.stream));
  uint32_t bad = 0;
  for (uint32_t i = 0; i < n; i++) bad += host[i] != base + i;
  CHECK_EQ(bad, 0u);
  loom_buffer_destroy(out);
}

void Append(void* user) {
  static_cast<std::vector<int>*>(user)->push_back(
      static_cast<int>(static_cast<std::vector<int>*>(user)->size()));
}

LOOM_TEST(EventsAndHostCallbacks) {
  NEED_GPU(gpu);
  loom_stream* other = nullptr;
  REQUIRE_OK(loom_stream_create(gpu.device, &other));
  loom_event* start = nullptr;
  loom_event* end = nullptr;
  REQUIRE_OK(loom_event_create(gpu.device, &start));
  REQUIRE_OK(loom_event_create(gpu.device, &end));
  const uint32_t n = 1 << 20;
  loom_buffer* a = gpu.Buffer(n * 4);
  loom_buffer* b = gpu.Buffer(n * 4);
  REQUIRE(a && b);
  std::vector<int> order;
  REQUIRE_OK(loom_event_record(start, gpu.stream));
  Launch launch(n / 256, 256);
  uint32_t base = static_cast<uint32_t>(Rng()());
  launch.Bind(a).Add(n).Add(base);
  REQUIRE_OK(loom_kernel_launch(gpu.stream, gpu.Kernel("iota"), launch.Get()));
  REQUIRE_OK(loom_stream_host_callback(gpu.stream, Append, &order));
  REQUIRE_OK(loom_event_record(end, gpu.stream));
  // The other stream copies a's result only after the event.
  REQUIRE_OK(loom_stream_wait_event(other, end));
  REQUIRE_OK(loom_stream_copy_d2d(other, b, 0, a, 0, n * 4));
  std::vector<uint32_t> host(n);
  REQUIRE_OK(loom_stream_copy_d2h(other, host.data(), b, 0, n * 4));
  REQUIRE_OK(loom_stream_host_callback(other, Append, &order));
  REQUIRE_OK(loom_stream_synchronize(other));
  REQUIRE_OK(loom_event_synchronize(end));
  int32_t done = 0;
  REQUIRE_OK(loom_event_query(end, &done));
  CHECK_EQ(done, 1);
  float ms = -1;
  REQUIRE_OK(loom_event_elapsed_ms(start, end, &ms));
  CHECK(ms >= 0.0f);
  CHECK_EQ(order.size(), size_t{2});
  uint32_t bad = 0;
  for (uint32_t i = 0; i < n; i++) bad += host[i] != base + i;
  CHECK_EQ(bad, 0u);
  loom_buffer_destroy(a);
  loom_buffer_destroy(b);
  loom_event_destroy(start);
  loom_event_destroy(end);
  loom_stream_destroy(other);
}

LOOM_TEST(ExplicitGraphRunsAndUpdates) {
  NEED_GPU(gpu);
  const uint32_t n = 5000, block = 128;
  std::vector<float> x(n), result(n);
  for (float& v : x) v = RandomFloat();
  loom_buffer* bx = gpu.Buffer(n * 4);
  loom_buffer* by = gpu.Buffer(n * 4);
  loom_buffer* bz = gpu.Buffer(n * 4);
  REQUIRE(bx && by && bz);
  REQUIRE_OK(loom_stream_copy_h2d(gpu.stream, bx, 0, x.data(), n * 4));
  REQUIRE_OK(loom_stream_synchronize(gpu.stream));
  loom_graph* graph = nullptr;
  REQUIRE_OK(loom_graph_create(gpu.device, &graph));
  uint32_t fill = 0, join = 0, kernel = 0, copy = 0;
  REQUIRE_OK(loom_graph_add_fill_node(graph, by, 0, n * 4, 0, nullptr, 0, &fill));  // y = 0
  REQUIRE_OK(loom_graph_add_empty_node(graph, &fill, 1, &join));
  float a = 2.5f;
  Launch launch((n + block - 1) / block, block);
  launch.Bind(bx).Bind(by).Add(a).Add(n);
  REQUIRE_OK(
      loom_graph_add_kernel_node(graph, gpu.Kernel("saxpy"), launch.Get(), &join, 1, &kernel));
  REQUIRE_OK(loom_graph_add_copy_node(graph, bz, 0, by, 0, n * 4, &kernel, 1, &copy));
  CHECK_EQ(loom_graph_node_count(graph), 4u);
  loom_graph_exec* exec = nullptr;
  REQUIRE_OK(loom_graph_instantiate(graph, &exec));
  loom_graph_destroy(graph);
  for (float scale : {2.5f, -1.25f}) {
    if (scale != a) {
      Launch updated((n + block - 1) / block, block);
      updated.Bind(bx).Bind(by).Add(scale).Add(n);
      REQUIRE_OK(loom_graph_exec_update_kernel_node(exec, kernel, updated.Get()));
    }
    REQUIRE_OK(loom_graph_exec_launch(exec, gpu.stream));
    REQUIRE_OK(loom_stream_copy_d2h(gpu.stream, result.data(), bz, 0, n * 4));
    REQUIRE_OK(loom_stream_synchronize(gpu.stream));
    uint32_t bad = 0;
    for (uint32_t i = 0; i < n; i++) bad += !Near(result[i], scale * x[i]);
    CHECK_EQ(bad, 0u);
  }
  loom_graph_exec_destroy(exec);
  for (loom_buffer* b : {bx, by, bz}) loom_buffer_destroy(b);
}

LOOM_TEST(CapturedGraphRunsAndUpdates) {
  NEED_GPU(gpu);
  const uint32_t n = 4096;
  loom_buffer* a = gpu.Buffer(n * 4);
  loom_buffer* b = gpu.Buffer(n * 4);
  REQUIRE(a && b);
  loom_stream* s = gpu.stream;
  REQUIRE_OK(loom_stream_fill(s, b, 0, n * 4, 0xee));
  REQUIRE_OK(loom_stream_synchronize(s));
  uint32_t base = static_cast<uint32_t>(Rng()());
  REQUIRE_OK(loom_stream_begin_capture(s));
  REQUIRE_OK(loom_stream_fill(s, a, 0, n * 4, 0));
  Launch launch(n / 256, 256);
  launch.Bind(a).Add(n).Add(base);
  REQUIRE_OK(loom_kernel_launch(s, gpu.Kernel("iota"), launch.Get()));
  REQUIRE_OK(loom_stream_copy_d2d(s, b, 0, a, 0, n * 4));
  loom_graph* graph = nullptr;
  REQUIRE_OK(loom_stream_end_capture(s, &graph));
  CHECK_EQ(loom_graph_node_count(graph), 3u);
  std::vector<uint32_t> host(n);
  REQUIRE_OK(loom_stream_copy_d2h(s, host.data(), b, 0, n * 4));
  REQUIRE_OK(loom_stream_synchronize(s));
  CHECK_EQ(host[0], 0xeeeeeeeeu);  // captured, not run
  loom_graph_exec* exec = nullptr;
  REQUIRE_OK(loom_graph_instantiate(graph, &exec));
  loom_graph_destroy(graph);
  for (uint32_t round = 0; round < 2; round++) {
    if (round == 1) {
      base += 1000;
      Launch updated(n / 256, 256);
      updated.Bind(a).Add(n).Add(base);
      REQUIRE_OK(loom_graph_exec_update_kernel_node(exec, 1, updated.Get()));
    }
    REQUIRE_OK(loom_graph_exec_launch(exec, s));
    REQUIRE_OK(loom_stream_copy_d2h(s, host.data(), b, 0, n * 4));
    REQUIRE_OK(loom_stream_synchronize(s));
    uint32_t bad = 0;
    for (uint32_t i = 0; i < n; i++) bad += host[i] != base + i;
    CHECK_EQ(bad, 0u);
  }
  loom_graph_exec_destroy(exec);

  // A refused operation invalidates the capture; the stream works again after end_capture.
  REQUIRE_OK(loom_stream_begin_capture(s));
  REQUIRE_OK(loom_stream_fill(s, a, 0, 16, 1));
  CHECK_STATUS(LOOM_ERR_CAPTURE, loom_stream_copy_h2d(s, a, 0, host.data(), 16));
  CHECK_STATUS(LOOM_ERR_CAPTURE, loom_stream_end_capture(s, &graph));
  CHECK(graph == nullptr);
  CHECK(Message(s).find("copy_h2d") != std::string::npos);
  REQUIRE_OK(loom_stream_fill(s, a, 0, 16, 7));
  REQUIRE_OK(loom_stream_copy_d2h(s, host.data(), a, 0, 16));
  REQUIRE_OK(loom_stream_synchronize(s));
  CHECK_EQ(host[0], 0x07070707u);
  loom_buffer_destroy(a);
  loom_buffer_destroy(b);
}

LOOM_TEST(InjectedFaultIsSticky) {
  NEED_GPU(gpu);
  loom_buffer* buffer = gpu.Buffer(64);
  REQUIRE(buffer != nullptr);
  REQUIRE_OK(loom_stream_inject_fault(gpu.stream, LOOM_FAULT_NEXT_OPERATION));
  REQUIRE_OK(loom_stream_fill(gpu.stream, buffer, 0, 64, 1));
  CHECK_STATUS(LOOM_ERR_DEVICE, loom_stream_synchronize(gpu.stream));
  CHECK(Message(gpu.stream).find("fill") != std::string::npos);
  CHECK_STATUS(LOOM_ERR_DEVICE, loom_stream_fill(gpu.stream, buffer, 0, 64, 1));
  CHECK_STATUS(LOOM_ERR_DEVICE, loom_stream_synchronize(gpu.stream));
  loom_buffer_destroy(buffer);
}

}  // namespace

int main() {
  int32_t count = 0;
  char err[LOOM_ERROR_CAPACITY] = "";
  loom_status status = loom_device_count(LOOM_BACKEND_CUDA, &count, err, sizeof(err));
  if (status != LOOM_OK) {
    g_skip = std::string("no CUDA device: ") + err;
  } else if (count == 0) {
    g_skip = "no CUDA device: the driver reports none";
  }
  if (!g_skip.empty()) printf("SKIP: %s\n", g_skip.c_str());
  return loomtest::RunAll();
}
