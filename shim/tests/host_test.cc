// host_test.cc: the host backend: stream order, events, copies, kernels (static and dlopen),
// grids, graphs (random DAGs against sequential execution), capture, updates, fault injection
// and destroy order.
//
// Usage: host_test [PATH_TO_libtest_kernels.so]   (default: next to this executable)
//        host_test --env-fault-child=MODE         (internal: the LOOM_INJECT_FAULT check)
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

extern char** environ;

namespace {

std::string g_so_path;  // the test kernel module
std::string g_self;     // this executable

std::mt19937_64& Rng() {
  static std::mt19937_64 rng([] {
    uint64_t seed = std::random_device()();
    printf("random seed: %llu\n", static_cast<unsigned long long>(seed));
    return seed;
  }());
  return rng;
}

uint32_t Uniform(uint32_t below) { return static_cast<uint32_t>(Rng()() % below); }

bool Contains(const std::string& text, const char* part) {
  return text.find(part) != std::string::npos;
}

std::string StreamError(loom_stream* stream) {
  char buf[LOOM_ERROR_CAPACITY];
  loom_stream_last_error(stream, buf, sizeof(buf));
  return buf;
}

std::string DeviceError(loom_device* device) {
  char buf[LOOM_ERROR_CAPACITY];
  loom_device_last_error(device, buf, sizeof(buf));
  return buf;
}

// Waits (bounded, so a broken runtime fails the test instead of hanging it) until flag is set.
bool WaitFor(const std::atomic<bool>& flag) {
  for (int i = 0; i < 20000 && !flag.load(); i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return flag.load();
}

// ---------------------------------------------------------------- host kernels

template <typename T>
T Scalar(const loom_host_kernel_args* args, size_t offset) {
  T value;
  memcpy(&value, static_cast<const char*>(args->scalars) + offset, sizeof(T));
  return value;
}

// out[i] = base + i for i < n (scalars: uint32 n, uint32 base).
void IotaKernel(const loom_host_kernel_args* args) {
  uint32_t n = Scalar<uint32_t>(args, 0), base = Scalar<uint32_t>(args, 4);
  uint32_t* out = static_cast<uint32_t*>(args->buffers[0]);
  for (uint32_t t = 0; t < args->block[0]; t++) {
    uint64_t i = uint64_t{args->block_id[0]} * args->block[0] + t;
    if (i < n) out[i] = base + static_cast<uint32_t>(i);
  }
}

// counts[linear block id] += 1, checking that the block's shared scratch is its own (bit 1) and
// that buffer_bytes covers the counters (bit 2).
void CountBlocksKernel(const loom_host_kernel_args* args) {
  uint64_t id =
      args->block_id[0] +
      uint64_t{args->grid[0]} * (args->block_id[1] + uint64_t{args->grid[1]} * args->block_id[2]);
  uint64_t total = uint64_t{args->grid[0]} * args->grid[1] * args->grid[2];
  if (args->buffer_bytes[0] < total * sizeof(uint32_t))
    __atomic_fetch_or(args->violation, 2u, __ATOMIC_RELAXED);
  uint32_t* counts = static_cast<uint32_t*>(args->buffers[0]);
  __atomic_fetch_add(&counts[id], 1u, __ATOMIC_RELAXED);
  uint32_t words = Scalar<uint32_t>(args, 0) / 4;
  uint32_t* shared = static_cast<uint32_t*>(args->shared);
  for (uint32_t i = 0; i < words; i++) shared[i] = static_cast<uint32_t>(id) ^ i;
  std::this_thread::yield();
  for (uint32_t i = 0; i < words; i++) {
    if (shared[i] != (static_cast<uint32_t>(id) ^ i))
      __atomic_fetch_or(args->violation, 1u, __ATOMIC_RELAXED);
  }
}

// ORs the scalar into the violation word.
void ViolateKernel(const loom_host_kernel_args* args) {
  __atomic_fetch_or(args->violation, Scalar<uint32_t>(args, 0), __ATOMIC_RELAXED);
}

// out[i] = in[i] * k (buffers: in, out; scalars: float k, uint32 n).
void ScaleKernel(const loom_host_kernel_args* args) {
  float k = Scalar<float>(args, 0);
  uint32_t n = Scalar<uint32_t>(args, 4);
  const float* in = static_cast<const float*>(args->buffers[0]);
  float* out = static_cast<float*>(args->buffers[1]);
  for (uint32_t t = 0; t < args->block[0]; t++) {
    uint64_t i = uint64_t{args->block_id[0]} * args->block[0] + t;
    if (i < n) out[i] = in[i] * k;
  }
}

// out[i] = in[(i + shift) % n] * 3 + 1 (buffers: in, out; scalars: uint32 shift, uint32 n): each
// block reads what other blocks of the node before wrote.
void RotateKernel(const loom_host_kernel_args* args) {
  uint32_t shift = Scalar<uint32_t>(args, 0), n = Scalar<uint32_t>(args, 4);
  const uint32_t* in = static_cast<const uint32_t*>(args->buffers[0]);
  uint32_t* out = static_cast<uint32_t*>(args->buffers[1]);
  for (uint32_t t = 0; t < args->block[0]; t++) {
    uint64_t i = uint64_t{args->block_id[0]} * args->block[0] + t;
    if (i < n) out[i] = in[(i + shift) % n] * 3u + 1u;
  }
}

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

// A DAG node: slots[id] = mix of its inputs' slots (scalars: uint32 id, uint32 delay in
// microseconds, uint32 count, inputs...). The random delay before the write makes a node that
// ran before its inputs were written read stale slots.
void MixKernel(const loom_host_kernel_args* args) {
  uint32_t id = Scalar<uint32_t>(args, 0), delay = Scalar<uint32_t>(args, 4);
  uint32_t count = Scalar<uint32_t>(args, 8);
  uint64_t* slots = static_cast<uint64_t*>(args->buffers[0]);
  uint64_t h = Mix(0x1234, id);
  for (uint32_t i = 0; i < count; i++) h = Mix(h, slots[Scalar<uint32_t>(args, 12 + 4 * i)]);
  if (delay > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay));
  slots[id] = h;
}

// Two of these meet: each raises its flag and waits (bounded) for the other's; a miss means the
// runtime ran them one after the other (violation bit 1).
void RendezvousKernel(const loom_host_kernel_args* args) {
  uint32_t self = Scalar<uint32_t>(args, 0);
  uint32_t* flags = static_cast<uint32_t*>(args->buffers[0]);
  __atomic_store_n(&flags[self], 1u, __ATOMIC_RELEASE);
  for (int i = 0; i < 20000 && __atomic_load_n(&flags[1 - self], __ATOMIC_ACQUIRE) == 0; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (__atomic_load_n(&flags[1 - self], __ATOMIC_ACQUIRE) == 0) {
    __atomic_fetch_or(args->violation, 1u, __ATOMIC_RELAXED);
  }
}

const loom_host_kernel_entry kEntries[] = {
    {"iota", IotaKernel},       {"count_blocks", CountBlocksKernel},
    {"violate", ViolateKernel}, {"scale", ScaleKernel},
    {"mix", MixKernel},         {"rendezvous", RendezvousKernel},
    {"rotate", RotateKernel},
};

// ---------------------------------------------------------------- fixtures

// A run's rebinding of kernel node `node`'s buffer `index` to `bytes` at `address`.
loom_graph_binding Binding(uint32_t node, uint32_t index, void* address, uint64_t bytes) {
  loom_graph_binding b = {};
  b.node = node;
  b.index = index;
  b.address = address;
  b.bytes = bytes;
  return b;
}

struct Fixture {
  loom_device* device = nullptr;
  loom_module* module = nullptr;
  std::string target;

  explicit Fixture(uint32_t workers = 3, uint32_t flags = 0) {
    loom_device_open_params params = {};
    params.struct_size = sizeof(params);
    params.backend = LOOM_BACKEND_HOST;
    params.worker_threads = workers;
    params.flags = flags;
    if (loom_device_open(&params, &device, nullptr, 0) != LOOM_OK) return;
    loom_device_props props = {};
    props.struct_size = sizeof(props);
    loom_device_get_props(device, &props);
    target = props.target;
    loom_host_module_register("host_test", target.c_str(), kEntries,
                              sizeof(kEntries) / sizeof(kEntries[0]));
    loom_module_load_params load = {};
    load.struct_size = sizeof(load);
    load.format = LOOM_MODULE_HOST_STATIC;
    load.target = target.c_str();
    load.name = "host_test";
    if (loom_module_load(device, &load, &module) != LOOM_OK) module = nullptr;
  }
  ~Fixture() {
    loom_module_destroy(module);
    loom_device_destroy(device);
  }
  bool ok() const { return device != nullptr && module != nullptr; }
  loom_kernel* Kernel(const char* name) {
    loom_kernel* kernel = nullptr;
    loom_module_get_kernel(module, name, &kernel);
    return kernel;
  }
  loom_stream* Stream() {
    loom_stream* stream = nullptr;
    loom_stream_create(device, &stream);
    return stream;
  }
  // A stream without a thread (LOOM_STREAM_INLINE): its operations run on the caller.
  loom_stream* InlineStream() {
    loom_stream_params params = {};
    params.struct_size = sizeof(params);
    params.flags = LOOM_STREAM_INLINE;
    loom_stream* stream = nullptr;
    loom_stream_create_with(device, &params, &stream);
    return stream;
  }
  loom_buffer* Buffer(uint64_t bytes, loom_memory_kind kind = LOOM_MEMORY_DEVICE) {
    loom_buffer* buffer = nullptr;
    loom_buffer_create(device, kind, bytes, &buffer);
    return buffer;
  }
};

// A launch description that owns its arrays.
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

// ---------------------------------------------------------------- streams and copies

struct OrderLog {
  std::vector<int> seen;  // appended on the stream thread only
};

struct Tag {
  OrderLog* log;
  int value;
};

void AppendTag(void* user) {
  Tag* tag = static_cast<Tag*>(user);
  tag->log->seen.push_back(tag->value);
}

LOOM_TEST(StreamRunsOperationsInFifoOrder) {
  Fixture f;
  REQUIRE(f.ok());
  loom_stream* stream = f.Stream();
  loom_buffer* cell = f.Buffer(1);
  REQUIRE(stream != nullptr && cell != nullptr);
  const int n = 600;
  OrderLog log;
  std::vector<Tag> tags(n);
  std::vector<uint8_t> observed(n, 0);
  for (int i = 0; i < n; i++) {
    tags[i] = {&log, i};
    // Each step overwrites the cell and reads it back: any reordering shows in `observed`.
    REQUIRE_OK(loom_stream_fill(stream, cell, 0, 1, static_cast<uint8_t>(i * 7 + 1)));
    REQUIRE_OK(loom_stream_host_callback(stream, AppendTag, &tags[i]));
    REQUIRE_OK(loom_stream_copy_d2h(stream, &observed[i], cell, 0, 1));
  }
  REQUIRE_OK(loom_stream_synchronize(stream));
  REQUIRE_EQ(log.seen.size(), size_t(n));
  for (int i = 0; i < n; i++) {
    CHECK_EQ(log.seen[i], i);
    CHECK_EQ(observed[i], static_cast<uint8_t>(i * 7 + 1));
  }
  loom_buffer_destroy(cell);
  loom_stream_destroy(stream);
}

void CountUp(void* user) { static_cast<std::atomic<int>*>(user)->fetch_add(1); }

LOOM_TEST(StreamAcceptsWorkFromManyThreads) {
  Fixture f;
  REQUIRE(f.ok());
  loom_stream* stream = f.Stream();
  REQUIRE(stream != nullptr);
  std::atomic<int> counts[4];
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++) {
    counts[t] = 0;
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; i++) loom_stream_host_callback(stream, CountUp, &counts[t]);
      loom_stream_synchronize(stream);
    });
  }
  for (std::thread& thread : threads) thread.join();
  REQUIRE_OK(loom_stream_synchronize(stream));
  for (int t = 0; t < 4; t++) CHECK_EQ(counts[t].load(), 200);
  loom_stream_destroy(stream);
}

LOOM_TEST(CopiesAndFillsMatchAHostModel) {
  Fixture f;
  REQUIRE(f.ok());
  loom_stream* stream = f.Stream();
  REQUIRE(stream != nullptr);
  for (loom_memory_kind kind : {LOOM_MEMORY_DEVICE, LOOM_MEMORY_SHARED}) {
    const uint64_t size = 4096;
    loom_buffer* a = f.Buffer(size, kind);
    loom_buffer* b = f.Buffer(size, kind);
    REQUIRE(a != nullptr && b != nullptr);
    std::vector<uint8_t> model_a(size), model_b(size), init(size);
    for (auto& byte : init) byte = static_cast<uint8_t>(Rng()());
    model_a = init;
    model_b = init;
    REQUIRE_OK(loom_stream_copy_h2d(stream, a, 0, init.data(), size));
    REQUIRE_OK(loom_stream_copy_h2d(stream, b, 0, init.data(), size));
    std::vector<std::vector<uint8_t>> sources;  // must outlive the stream operations
    for (int step = 0; step < 200; step++) {
      uint64_t bytes = 1 + Uniform(512);
      uint64_t x = Uniform(static_cast<uint32_t>(size - bytes + 1));
      uint64_t y = Uniform(static_cast<uint32_t>(size - bytes + 1));
      switch (Uniform(3)) {
        case 0: {
          sources.emplace_back(bytes);
          for (auto& byte : sources.back()) byte = static_cast<uint8_t>(Rng()());
          REQUIRE_OK(loom_stream_copy_h2d(stream, a, x, sources.back().data(), bytes));
          memcpy(&model_a[x], sources.back().data(), bytes);
          break;
        }
        case 1:
          REQUIRE_OK(loom_stream_copy_d2d(stream, b, y, a, x, bytes));
          memcpy(&model_b[y], &model_a[x], bytes);
          break;
        case 2: {
          uint8_t value = static_cast<uint8_t>(Rng()());
          REQUIRE_OK(loom_stream_fill(stream, a, x, bytes, value));
          memset(&model_a[x], value, bytes);
          break;
        }
      }
    }
    std::vector<uint8_t> out_a(size), out_b(size);
    REQUIRE_OK(loom_stream_copy_d2h(stream, out_a.data(), a, 0, size));
    REQUIRE_OK(loom_stream_copy_d2h(stream, out_b.data(), b, 0, size));
    REQUIRE_OK(loom_stream_synchronize(stream));
    CHECK(out_a == model_a);
    CHECK(out_b == model_b);
    if (kind == LOOM_MEMORY_SHARED) {
      CHECK(memcmp(loom_buffer_host_pointer(a), model_a.data(), size) == 0);
    }
    loom_buffer_destroy(a);
    loom_buffer_destroy(b);
  }
  loom_stream_destroy(stream);
}

// ---------------------------------------------------------------- events

struct Gate {
  std::atomic<bool> open{false};
  std::atomic<bool> waited_ok{true};
};

void WaitAtGate(void* user) {
  Gate* gate = static_cast<Gate*>(user);
  if (!WaitFor(gate->open)) gate->waited_ok = false;
}

struct AfterGate {
  Gate* gate;
  std::atomic<bool> ran{false};
  std::atomic<bool> gate_was_open{false};
};

void CheckGateOpen(void* user) {
  AfterGate* after = static_cast<AfterGate*>(user);
  after->gate_was_open = after->gate->open.load();
  after->ran = true;
}

void Sleep20ms(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

LOOM_TEST(EventsOrderStreamsAndMeasureTime) {
  Fixture f;
  REQUIRE(f.ok());
  loom_stream* a = f.Stream();
  loom_stream* b = f.Stream();
  loom_event* event = nullptr;
  REQUIRE_OK(loom_event_create(f.device, &event));
  int32_t done = -1;
  REQUIRE_OK(loom_event_query(event, &done));
  CHECK_EQ(done, 1);  // never recorded: nothing to wait for
  CHECK_OK(loom_stream_wait_event(b, event));

  Gate gate;
  AfterGate after;
  after.gate = &gate;
  REQUIRE_OK(loom_stream_host_callback(a, WaitAtGate, &gate));
  REQUIRE_OK(loom_event_record(event, a));
  REQUIRE_OK(loom_stream_wait_event(b, event));
  REQUIRE_OK(loom_stream_host_callback(b, CheckGateOpen, &after));
  REQUIRE_OK(loom_event_query(event, &done));
  CHECK_EQ(done, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(!after.ran.load());  // b is held behind a's event
  gate.open = true;
  REQUIRE_OK(loom_stream_synchronize(b));
  CHECK(after.ran.load());
  CHECK(after.gate_was_open.load());
  REQUIRE_OK(loom_event_synchronize(event));
  REQUIRE_OK(loom_event_query(event, &done));
  CHECK_EQ(done, 1);
  CHECK(gate.waited_ok.load());

  loom_event* start = nullptr;
  loom_event* end = nullptr;
  REQUIRE_OK(loom_event_create(f.device, &start));
  REQUIRE_OK(loom_event_create(f.device, &end));
  float ms = -1;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_event_elapsed_ms(start, end, &ms));
  CHECK(Contains(DeviceError(f.device), "never recorded"));
  REQUIRE_OK(loom_event_record(start, a));
  REQUIRE_OK(loom_stream_host_callback(a, Sleep20ms, nullptr));
  REQUIRE_OK(loom_event_record(end, a));
  REQUIRE_OK(loom_event_synchronize(end));
  REQUIRE_OK(loom_event_elapsed_ms(start, end, &ms));
  CHECK(ms >= 20.0f);  // sleep_for sleeps at least that long on the steady clock
  CHECK(ms < 60000.0f);
  loom_event_destroy(start);
  loom_event_destroy(end);
  loom_event_destroy(event);
  loom_stream_destroy(a);
  loom_stream_destroy(b);
}

// ---------------------------------------------------------------- kernels

LOOM_TEST(StaticKernelComputesIota) {
  Fixture f;
  REQUIRE(f.ok());
  loom_stream* stream = f.Stream();
  const uint32_t n = 1000 + Uniform(1000), block = 64;
  uint32_t base = static_cast<uint32_t>(Rng()());
  loom_buffer* out = f.Buffer(n * 4);
  REQUIRE(stream != nullptr && out != nullptr);
  Launch launch((n + block - 1) / block, block);
  launch.Bind(out).Add(n).Add(base);
  REQUIRE_OK(loom_kernel_launch(stream, f.Kernel("iota"), launch.Get()));
  std::vector<uint32_t> host(n);
  REQUIRE_OK(loom_stream_copy_d2h(stream, host.data(), out, 0, n * 4));
  REQUIRE_OK(loom_stream_synchronize(stream));
  for (uint32_t i = 0; i < n; i++) {
    if (host[i] != base + i) {
      CHECK_EQ(host[i], base + i);
      break;
    }
  }
  loom_buffer_destroy(out);
  loom_stream_destroy(stream);
}

LOOM_TEST(SharedObjectKernelComputesSaxpy) {
  Fixture f;
  REQUIRE(f.ok());
  loom_module_load_params load = {};
  load.struct_size = sizeof(load);
  load.format = LOOM_MODULE_HOST_SHARED_OBJECT;
  load.target = f.target.c_str();
  load.path = g_so_path.c_str();
  loom_module* module = nullptr;
  REQUIRE_OK(loom_module_load(f.device, &load, &module));
  loom_kernel* saxpy = nullptr;
  REQUIRE_OK(loom_module_get_kernel(module, "saxpy", &saxpy));
  loom_kernel* missing = nullptr;
  CHECK_STATUS(LOOM_ERR_NOT_FOUND, loom_module_get_kernel(module, "iota", &missing));

  const uint32_t n = 500 + Uniform(500), block = 32;
  std::vector<float> x(n), y(n), expected(n), result(n);
  float a = static_cast<float>(Uniform(1000)) / 100.0f - 5.0f;
  for (uint32_t i = 0; i < n; i++) {
    x[i] = static_cast<float>(Uniform(20000)) / 100.0f - 100.0f;
    y[i] = static_cast<float>(Uniform(20000)) / 100.0f - 100.0f;
    expected[i] = a * x[i] + y[i];
  }
  loom_stream* stream = f.Stream();
  loom_buffer* bx = f.Buffer(n * 4);
  loom_buffer* by = f.Buffer(n * 4 + 64);
  loom_buffer* violation = f.Buffer(64, LOOM_MEMORY_SHARED);
  REQUIRE(bx && by && violation);
  REQUIRE_OK(loom_stream_fill(stream, violation, 0, 64, 0));
  REQUIRE_OK(loom_stream_copy_h2d(stream, bx, 0, x.data(), n * 4));
  REQUIRE_OK(loom_stream_copy_h2d(stream, by, 64, y.data(), n * 4));
  Launch launch((n + block - 1) / block + 1, block);  // one block too many: its threads violate
  launch.Bind(bx).Bind(by, 64).Add(a).Add(n);
  launch.params.violation = violation;
  launch.params.violation_offset = 8;
  REQUIRE_OK(loom_kernel_launch(stream, saxpy, launch.Get()));
  REQUIRE_OK(loom_stream_copy_d2h(stream, result.data(), by, 64, n * 4));
  REQUIRE_OK(loom_stream_synchronize(stream));
  for (uint32_t i = 0; i < n; i++) {
    if (result[i] != expected[i]) {
      CHECK_EQ(result[i], expected[i]);
      break;
    }
  }
  const uint32_t* words = static_cast<const uint32_t*>(loom_buffer_host_pointer(violation));
  CHECK_EQ(words[2], 1u);
  CHECK_EQ(words[0] | words[1] | words[3], 0u);
  loom_buffer_destroy(bx);
  loom_buffer_destroy(by);
  loom_buffer_destroy(violation);
  loom_stream_destroy(stream);
  loom_module_destroy(module);
}

LOOM_TEST(GridRunsEveryBlockOnceWithPrivateScratch) {
  for (uint32_t workers : {1u, 4u}) {
    Fixture f(workers);
    REQUIRE(f.ok());
    loom_stream* stream = f.Stream();
    uint32_t grid[3] = {1 + Uniform(40), 1 + Uniform(6), 1 + Uniform(4)};
    uint64_t total = uint64_t{grid[0]} * grid[1] * grid[2];
    loom_buffer* counts = f.Buffer(total * 4, LOOM_MEMORY_SHARED);
    loom_buffer* violation = f.Buffer(4, LOOM_MEMORY_SHARED);
    REQUIRE(stream && counts && violation);
    REQUIRE_OK(loom_stream_fill(stream, counts, 0, total * 4, 0));
    REQUIRE_OK(loom_stream_fill(stream, violation, 0, 4, 0));
    Launch launch(grid[0], 2);
    launch.params.grid[1] = grid[1];
    launch.params.grid[2] = grid[2];
    launch.params.block[1] = 3;
    launch.params.shared_bytes = 256;
    launch.params.violation = violation;
    launch.Bind(counts).Add(uint32_t{256});
    REQUIRE_OK(loom_kernel_launch(stream, f.Kernel("count_blocks"), launch.Get()));
    REQUIRE_OK(loom_kernel_launch(stream, f.Kernel("count_blocks"), launch.Get()));
    REQUIRE_OK(loom_stream_synchronize(stream));
    const uint32_t* seen = static_cast<const uint32_t*>(loom_buffer_host_pointer(counts));
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < total; i++) wrong += seen[i] != 2;
    CHECK_EQ(wrong, uint64_t{0});
    CHECK_EQ(*static_cast<const uint32_t*>(loom_buffer_host_pointer(violation)), 0u);
    loom_buffer_destroy(counts);
    loom_buffer_destroy(violation);
    loom_stream_destroy(stream);
  }
}

LOOM_TEST(ViolationWordIsPassedOrPrivate) {
  Fixture f;
  REQUIRE(f.ok());
  loom_stream* stream = f.Stream();
  loom_buffer* words = f.Buffer(16, LOOM_MEMORY_SHARED);
  REQUIRE(stream && words);
  REQUIRE_OK(loom_stream_fill(stream, words, 0, 16, 0));
  Launch launch(3, 1);
  launch.Add(uint32_t{0x5});
  launch.params.violation = words;
  launch.params.violation_offset = 12;
  REQUIRE_OK(loom_kernel_launch(stream, f.Kernel("violate"), launch.Get()));
  Launch unwatched(3, 1);
  unwatched.Add(uint32_t{0x80});
  REQUIRE_OK(loom_kernel_launch(stream, f.Kernel("violate"), unwatched.Get()));
  REQUIRE_OK(loom_stream_synchronize(stream));
  const uint32_t* host = static_cast<const uint32_t*>(loom_buffer_host_pointer(words));
  CHECK_EQ(host[3], 0x5u);
  CHECK_EQ(host[0] | host[1] | host[2], 0u);
  loom_buffer_destroy(words);
  loom_stream_destroy(stream);
}

// ---------------------------------------------------------------- graphs

// Builds a random DAG of kernel, copy, fill and empty nodes over 8-byte slots; checks several
// launches against executing the nodes in id order (a topological order).
// Every graph is run four ways: launched on a threaded stream, run on the caller with
// loom_graph_exec_run (one thread, then the whole pool), and launched on an inline stream.
LOOM_TEST(RandomGraphsMatchSequentialExecution) {
  Fixture f(4);
  REQUIRE(f.ok());
  loom_stream* stream = f.Stream();
  REQUIRE(stream != nullptr);
  loom_stream_params inline_params = {};
  inline_params.struct_size = sizeof(inline_params);
  inline_params.flags = LOOM_STREAM_INLINE;
  inline_params.max_threads = 2;
  loom_stream* inline_stream = nullptr;
  REQUIRE_OK(loom_stream_create_with(f.device, &inline_params, &inline_stream));
  loom_graph_run_params one_thread = {};
  one_thread.struct_size = sizeof(one_thread);
  one_thread.max_threads = 1;
  loom_kernel* mix = f.Kernel("mix");
  for (int round = 0; round < 150; round++) {
    const uint32_t n = 2 + Uniform(47);
    loom_buffer* slots = f.Buffer(n * 8 + 8, LOOM_MEMORY_SHARED);  // + one constant slot
    loom_graph* graph = nullptr;
    REQUIRE_OK(loom_graph_create(f.device, &graph));
    enum Kind { kKernel, kCopy, kFill, kEmpty };
    std::vector<Kind> kinds(n);
    std::vector<std::vector<uint32_t>> deps(n), inputs(n);
    std::vector<uint32_t> copy_from(n, n);  // n = the constant slot
    std::vector<uint8_t> fill_value(n);
    std::vector<Launch> launches;
    launches.reserve(n);
    for (uint32_t i = 0; i < n; i++) {
      kinds[i] = Uniform(10) < 6 ? kKernel : static_cast<Kind>(Uniform(3) + 1);
      for (uint32_t d = 0; d < i; d++) {
        if (Uniform(i) < 2) deps[i].push_back(d);
      }
      // Empty nodes pass their own inputs on: a reader behind a join depends on what it joins.
      for (uint32_t d : deps[i]) {
        if (kinds[d] == kEmpty) {
          inputs[i].insert(inputs[i].end(), inputs[d].begin(), inputs[d].end());
        } else {
          inputs[i].push_back(d);
        }
      }
      std::sort(inputs[i].begin(), inputs[i].end());
      inputs[i].erase(std::unique(inputs[i].begin(), inputs[i].end()), inputs[i].end());
      uint32_t id = 0;
      switch (kinds[i]) {
        case kKernel: {
          launches.emplace_back(1, 1);
          uint32_t delay = Uniform(3) == 0 ? Uniform(300) : 0;
          launches.back().Bind(slots).Add(i).Add(delay).Add(
              static_cast<uint32_t>(inputs[i].size()));
          for (uint32_t input : inputs[i]) launches.back().Add(input);
          REQUIRE_OK(loom_graph_add_kernel_node(graph, mix, launches.back().Get(), deps[i].data(),
                                                static_cast<uint32_t>(deps[i].size()), &id));
          break;
        }
        case kCopy:
          if (!inputs[i].empty())
            copy_from[i] = inputs[i][Uniform(static_cast<uint32_t>(inputs[i].size()))];
          REQUIRE_OK(loom_graph_add_copy_node(graph, slots, i * 8, slots, copy_from[i] * 8, 8,
                                              deps[i].data(), static_cast<uint32_t>(deps[i].size()),
                                              &id));
          break;
        case kFill:
          fill_value[i] = static_cast<uint8_t>(Rng()());
          REQUIRE_OK(loom_graph_add_fill_node(graph, slots, i * 8, 8, fill_value[i], deps[i].data(),
                                              static_cast<uint32_t>(deps[i].size()), &id));
          break;
        case kEmpty:
          REQUIRE_OK(loom_graph_add_empty_node(graph, deps[i].data(),
                                               static_cast<uint32_t>(deps[i].size()), &id));
          break;
      }
      REQUIRE_EQ(id, i);
    }
    REQUIRE_EQ(loom_graph_node_count(graph), n);
    loom_graph_exec* exec = nullptr;
    REQUIRE_OK(loom_graph_instantiate(graph, &exec));
    uint64_t* host = static_cast<uint64_t*>(loom_buffer_host_pointer(slots));
    for (int launch = 0; launch < 4; launch++) {
      std::vector<uint64_t> expected(n + 1);
      for (auto& value : expected) value = Rng()();
      memcpy(host, expected.data(), (n + 1) * 8);
      for (uint32_t i = 0; i < n; i++) {
        switch (kinds[i]) {
          case kKernel: {
            uint64_t h = Mix(0x1234, i);
            for (uint32_t input : inputs[i]) h = Mix(h, expected[input]);
            expected[i] = h;
            break;
          }
          case kCopy:
            expected[i] = expected[copy_from[i]];
            break;
          case kFill:
            memset(&expected[i], fill_value[i], 8);
            break;
          case kEmpty:
            break;
        }
      }
      switch (launch) {
        case 0:
          REQUIRE_OK(loom_graph_exec_launch(exec, stream));
          REQUIRE_OK(loom_stream_synchronize(stream));
          break;
        case 1:
          REQUIRE_OK(loom_graph_exec_run(exec, stream, &one_thread));
          break;
        case 2:
          REQUIRE_OK(loom_graph_exec_run(exec, stream, nullptr));
          break;
        default:
          // An inline stream has run the graph when the launch returns.
          REQUIRE_OK(loom_graph_exec_launch(exec, inline_stream));
          break;
      }
      bool same = memcmp(host, expected.data(), (n + 1) * 8) == 0;
      if (!same) fprintf(stderr, "    graph %d (%u nodes), launch %d differs\n", round, n, launch);
      REQUIRE(same);
    }
    loom_graph_exec_destroy(exec);
    loom_graph_destroy(graph);
    loom_buffer_destroy(slots);
  }
  loom_stream_destroy(inline_stream);
  loom_stream_destroy(stream);
}

LOOM_TEST(InlineStreamAndGraphRunKeepStreamRules) {
  Fixture f(2);
  REQUIRE(f.ok());
  loom_stream_params params = {};
  params.struct_size = sizeof(params);
  params.flags = 0x80;
  loom_stream* bad = nullptr;
  CHECK_EQ(loom_stream_create_with(f.device, &params, &bad), LOOM_ERR_INVALID_ARGUMENT);
  CHECK(bad == nullptr);
  params.flags = LOOM_STREAM_INLINE;
  loom_stream* stream = nullptr;
  REQUIRE_OK(loom_stream_create_with(f.device, &params, &stream));
  loom_buffer* a = f.Buffer(64, LOOM_MEMORY_SHARED);
  REQUIRE(a != nullptr);
  const uint8_t* host = static_cast<const uint8_t*>(loom_buffer_host_pointer(a));
  uint8_t value = static_cast<uint8_t>(1 + Uniform(200));
  REQUIRE_OK(loom_stream_fill(stream, a, 0, 64, value));
  CHECK_EQ(host[63], value);  // ran before the call returned
  loom_graph* graph = nullptr;
  REQUIRE_OK(loom_graph_create(f.device, &graph));
  uint32_t node = 0;
  REQUIRE_OK(loom_graph_add_fill_node(graph, a, 0, 32, static_cast<uint8_t>(value + 1), nullptr, 0,
                                      &node));
  loom_graph_exec* exec = nullptr;
  REQUIRE_OK(loom_graph_instantiate(graph, &exec));
  REQUIRE_OK(loom_graph_exec_run(exec, stream, nullptr));
  CHECK_EQ(host[0], static_cast<uint8_t>(value + 1));
  CHECK_EQ(host[40], value);
  // A faulted operation fails the stream for good; graph runs are refused from then on.
  REQUIRE_OK(loom_stream_inject_fault(stream, LOOM_FAULT_NEXT_OPERATION));
  REQUIRE_OK(loom_stream_fill(stream, a, 0, 64, 0));
  CHECK_EQ(loom_graph_exec_run(exec, stream, nullptr), LOOM_ERR_DEVICE);
  CHECK_EQ(loom_stream_synchronize(stream), LOOM_ERR_DEVICE);
  loom_graph_run_params tiny = {};
  CHECK_EQ(loom_graph_exec_run(exec, stream, &tiny), LOOM_ERR_INVALID_ARGUMENT);
  loom_graph_exec_destroy(exec);
  loom_graph_destroy(graph);
  loom_buffer_destroy(a);
  loom_stream_destroy(stream);
}

// A wrapped buffer is the caller's memory: kernels read it in place, its host pointer is the
// caller's, and destroying it leaves the memory alone (ASan would see a free of it).
LOOM_TEST(WrappedHostMemoryIsReadInPlace) {
  Fixture f(2);
  REQUIRE(f.ok());
  loom_stream* stream = f.Stream();
  const uint32_t n = 300;
  std::vector<float> weights(n);
  for (auto& w : weights) w = static_cast<float>(Uniform(1000)) - 500.0f;
  const std::vector<float> kept = weights;
  loom_buffer* wrapped = nullptr;
  REQUIRE_OK(loom_buffer_wrap_host(f.device, weights.data(), n * 4, &wrapped));
  CHECK(loom_buffer_host_pointer(wrapped) == weights.data());
  CHECK_EQ(loom_buffer_kind(wrapped), LOOM_MEMORY_SHARED);
  CHECK_EQ(loom_buffer_size(wrapped), uint64_t{n * 4});
  loom_buffer* out = f.Buffer(n * 4, LOOM_MEMORY_SHARED);
  const float k = 1.0f + static_cast<float>(Uniform(9));
  Launch launch(3, 128);
  launch.Bind(wrapped).Bind(out).Add(k).Add(n);
  REQUIRE_OK(loom_kernel_launch(stream, f.Kernel("scale"), launch.Get()));
  REQUIRE_OK(loom_stream_synchronize(stream));
  const float* host = static_cast<const float*>(loom_buffer_host_pointer(out));
  for (uint32_t i = 0; i < n; i++) {
    CHECK_EQ(host[i], weights[i] * k);
    if (host[i] != weights[i] * k) break;
  }
  loom_buffer_destroy(wrapped);
  CHECK(weights == kept);

  loom_buffer* bad = reinterpret_cast<loom_buffer*>(&weights);
  CHECK_EQ(loom_buffer_wrap_host(f.device, nullptr, 4, &bad), LOOM_ERR_INVALID_ARGUMENT);
  CHECK(bad == nullptr);
  CHECK(Contains(DeviceError(f.device), "data is NULL"));
  CHECK_EQ(loom_buffer_wrap_host(f.device, weights.data(), 0, &bad), LOOM_ERR_INVALID_ARGUMENT);
  CHECK_EQ(loom_buffer_wrap_host(f.device, weights.data(), 4, nullptr), LOOM_ERR_INVALID_ARGUMENT);
  CHECK_EQ(loom_buffer_wrap_host(nullptr, weights.data(), 4, &bad), LOOM_ERR_INVALID_ARGUMENT);
  loom_buffer_destroy(out);
  loom_stream_destroy(stream);
}

// A discrete host device (LOOM_DEVICE_DISCRETE) behaves as a GPU's memory does: no wrapped host
// memory, no graph runs on rebound caller memory, fresh device memory not zeroed; copies and
// kernels on device buffers work as on any host device. Unknown open flags are refused.
LOOM_TEST(DiscreteHostDeviceRefusesHostMemoryInPlace) {
  Fixture f(2, LOOM_DEVICE_DISCRETE);
  REQUIRE(f.ok());
  loom_stream* stream = f.Stream();
  const uint32_t n = 257;
  std::vector<float> x(n);
  for (auto& v : x) v = static_cast<float>(Uniform(1000)) - 500.0f;
  loom_buffer* wrapped = reinterpret_cast<loom_buffer*>(&x);
  CHECK_EQ(loom_buffer_wrap_host(f.device, x.data(), n * 4, &wrapped), LOOM_ERR_NOT_SUPPORTED);
  CHECK(wrapped == nullptr);
  CHECK(Contains(DeviceError(f.device), "discrete"));
  // Fresh device memory reads back as 0xFF bytes, not zeros.
  loom_buffer* in = f.Buffer(n * 4);
  loom_buffer* out = f.Buffer(n * 4);
  REQUIRE(in && out);
  CHECK(loom_buffer_host_pointer(in) == nullptr);
  std::vector<uint8_t> raw(n * 4, 0);
  REQUIRE_OK(loom_stream_copy_d2h(stream, raw.data(), out, 0, n * 4));
  REQUIRE_OK(loom_stream_synchronize(stream));
  CHECK(std::all_of(raw.begin(), raw.end(), [](uint8_t b) { return b == 0xff; }));
  // Uploads, kernels and downloads work.
  const float k = 2.0f + static_cast<float>(Uniform(7));
  REQUIRE_OK(loom_stream_copy_h2d(stream, in, 0, x.data(), n * 4));
  Launch launch(3, 128);
  launch.Bind(in).Bind(out).Add(k).Add(n);
  loom_graph* graph = nullptr;
  REQUIRE_OK(loom_graph_create(f.device, &graph));
  uint32_t id = 0;
  REQUIRE_OK(loom_graph_add_kernel_node(graph, f.Kernel("scale"), launch.Get(), nullptr, 0, &id));
  loom_graph_exec* exec = nullptr;
  REQUIRE_OK(loom_graph_instantiate(graph, &exec));
  loom_graph_destroy(graph);
  REQUIRE_OK(loom_graph_exec_run(exec, stream, nullptr));
  std::vector<float> y(n, 0.0f);
  REQUIRE_OK(loom_stream_copy_d2h(stream, y.data(), out, 0, n * 4));
  REQUIRE_OK(loom_stream_synchronize(stream));
  for (uint32_t i = 0; i < n; i++) {
    CHECK_EQ(y[i], x[i] * k);
    if (y[i] != x[i] * k) break;
  }
  // A run on rebound caller memory is refused, and the exec stays usable.
  loom_graph_binding binding = {};
  binding.node = id;
  binding.index = 0;
  binding.address = x.data();
  binding.bytes = n * 4;
  loom_graph_run_params run = {};
  run.struct_size = sizeof(run);
  run.bindings = &binding;
  run.binding_count = 1;
  CHECK_EQ(loom_graph_exec_run(exec, stream, &run), LOOM_ERR_NOT_SUPPORTED);
  CHECK(Contains(StreamError(stream), "discrete"));
  REQUIRE_OK(loom_graph_exec_run(exec, stream, nullptr));
  REQUIRE_OK(loom_stream_synchronize(stream));
  loom_graph_exec_destroy(exec);
  loom_buffer_destroy(in);
  loom_buffer_destroy(out);
  loom_stream_destroy(stream);

  loom_device_open_params params = {};
  params.struct_size = sizeof(params);
  params.backend = LOOM_BACKEND_HOST;
  params.flags = 1u << 7;
  loom_device* bad = nullptr;
  char err[256] = {};
  CHECK_EQ(loom_device_open(&params, &bad, err, sizeof(err)), LOOM_ERR_INVALID_ARGUMENT);
  CHECK(bad == nullptr);
  CHECK(Contains(err, "unknown flags"));
}

// loom_graph_exec_run with bindings runs the recorded kernels on the caller's memory for that
// run only: the recorded buffers are neither read nor written, and the next run without
// bindings uses them again. Malformed binding lists are refused and leave the exec usable.
LOOM_TEST(GraphRunRebindsBuffersForOneRun) {
  Fixture f(3);
  REQUIRE(f.ok());
  loom_stream* stream = f.InlineStream();
  REQUIRE(stream);
  const uint32_t n = 1000;
  loom_buffer* in = f.Buffer(n * 4, LOOM_MEMORY_SHARED);
  loom_buffer* mid = f.Buffer(n * 4, LOOM_MEMORY_SHARED);
  loom_buffer* out = f.Buffer(n * 4, LOOM_MEMORY_SHARED);
  REQUIRE(in && mid && out);
  float* hin = static_cast<float*>(loom_buffer_host_pointer(in));
  float* hout = static_cast<float*>(loom_buffer_host_pointer(out));
  for (uint32_t i = 0; i < n; i++) hin[i] = static_cast<float>(Uniform(1000)) - 500.0f;
  const float k1 = 1.0f + static_cast<float>(Uniform(8)), k2 = -1.0f - static_cast<float>(Uniform(8));
  // node 0: fill (not a kernel); node 1: mid = in * k1; node 2: out = mid * k2.
  loom_graph* graph = nullptr;
  REQUIRE_OK(loom_graph_create(f.device, &graph));
  uint32_t fill = 0, first_id = 0, second_id = 0;
  REQUIRE_OK(loom_graph_add_fill_node(graph, mid, 0, 4, 0, nullptr, 0, &fill));
  Launch first(8, 128), second(8, 128);
  first.Bind(in).Bind(mid).Add(k1).Add(n);
  second.Bind(mid).Bind(out).Add(k2).Add(n);
  REQUIRE_OK(loom_graph_add_kernel_node(graph, f.Kernel("scale"), first.Get(), &fill, 1, &first_id));
  REQUIRE_OK(
      loom_graph_add_kernel_node(graph, f.Kernel("scale"), second.Get(), &first_id, 1, &second_id));
  loom_graph_exec* exec = nullptr;
  REQUIRE_OK(loom_graph_instantiate(graph, &exec));
  loom_graph_destroy(graph);

  std::vector<float> x(n), y(n, 0.0f), recorded_in(hin, hin + n);
  for (uint32_t i = 0; i < n; i++) x[i] = static_cast<float>(Uniform(1000)) - 500.0f;
  const float out_sentinel = 12345.0f;
  for (uint32_t i = 0; i < n; i++) hout[i] = out_sentinel;
  loom_graph_binding bindings[2] = {Binding(first_id, 0, x.data(), n * 4),
                                    Binding(second_id, 1, y.data(), n * 4)};
  loom_graph_run_params run = {};
  run.struct_size = sizeof(run);
  run.bindings = bindings;
  run.binding_count = 2;
  for (uint32_t threads : {1u, 0u}) {  // the caller alone, then with the pool's helpers
    run.max_threads = threads;
    std::fill(y.begin(), y.end(), 0.0f);
    REQUIRE_OK(loom_graph_exec_run(exec, stream, &run));
    for (uint32_t i = 0; i < n; i++) {
      CHECK_EQ(y[i], x[i] * k1 * k2);
      CHECK_EQ(hout[i], out_sentinel);
      CHECK_EQ(hin[i], recorded_in[i]);
      if (y[i] != x[i] * k1 * k2 || hout[i] != out_sentinel || hin[i] != recorded_in[i]) break;
    }
  }
  // Without bindings the recorded buffers are used again.
  REQUIRE_OK(loom_graph_exec_run(exec, stream, nullptr));
  for (uint32_t i = 0; i < n; i++) {
    CHECK_EQ(hout[i], hin[i] * k1 * k2);
    if (hout[i] != hin[i] * k1 * k2) break;
  }

  // Refused: out of order, repeated, not a kernel node, no such node or buffer, no memory.
  loom_graph_binding bad[2] = {bindings[1], bindings[0]};
  run.bindings = bad;
  CHECK_EQ(loom_graph_exec_run(exec, stream, &run), LOOM_ERR_INVALID_ARGUMENT);
  CHECK(Contains(StreamError(stream), "out of order"));
  bad[0] = bindings[0];
  bad[1] = bindings[0];
  CHECK_EQ(loom_graph_exec_run(exec, stream, &run), LOOM_ERR_INVALID_ARGUMENT);
  run.binding_count = 1;
  bad[0] = bindings[0];
  bad[0].node = fill;
  CHECK_EQ(loom_graph_exec_run(exec, stream, &run), LOOM_ERR_INVALID_ARGUMENT);
  CHECK(Contains(StreamError(stream), "not a kernel node"));
  bad[0] = bindings[0];
  bad[0].node = 7;
  CHECK_EQ(loom_graph_exec_run(exec, stream, &run), LOOM_ERR_INVALID_ARGUMENT);
  bad[0] = bindings[0];
  bad[0].index = 2;
  CHECK_EQ(loom_graph_exec_run(exec, stream, &run), LOOM_ERR_INVALID_ARGUMENT);
  bad[0] = bindings[0];
  bad[0].address = nullptr;
  CHECK_EQ(loom_graph_exec_run(exec, stream, &run), LOOM_ERR_INVALID_ARGUMENT);
  run.bindings = nullptr;
  CHECK_EQ(loom_graph_exec_run(exec, stream, &run), LOOM_ERR_INVALID_ARGUMENT);
  // Nothing ran and nothing broke: the stream is not failed and the exec runs again.
  for (uint32_t i = 0; i < n; i++) hout[i] = out_sentinel;
  REQUIRE_OK(loom_graph_exec_run(exec, stream, nullptr));
  CHECK_EQ(hout[n - 1], hin[n - 1] * k1 * k2);

  loom_graph_exec_destroy(exec);
  loom_buffer_destroy(in);
  loom_buffer_destroy(mid);
  loom_buffer_destroy(out);
  loom_stream_destroy(stream);
}

// An inline graph run with several threads forks once and steps through the nodes together:
// a chain of kernels whose blocks read what every block of the node before wrote, with copies
// and fills between them and some nodes rebound to caller memory, gives the sequential result
// every run, for every thread count, and each block runs once.
LOOM_TEST(TeamGraphRunsKeepNodeOrder) {
  Fixture f(3);
  REQUIRE(f.ok());
  loom_stream* stream = f.InlineStream();
  const uint32_t n = 2000 + static_cast<uint32_t>(Uniform(1000));
  loom_buffer* a = f.Buffer(n * 4, LOOM_MEMORY_SHARED);
  loom_buffer* b = f.Buffer(n * 4, LOOM_MEMORY_SHARED);
  loom_buffer* counts = f.Buffer(64 * 4, LOOM_MEMORY_SHARED);
  loom_buffer* violation = f.Buffer(4, LOOM_MEMORY_SHARED);
  REQUIRE(stream && a && b && counts && violation);
  uint32_t* hcounts = static_cast<uint32_t*>(loom_buffer_host_pointer(counts));
  uint32_t* hviolation = static_cast<uint32_t*>(loom_buffer_host_pointer(violation));
  *hviolation = 0;
  loom_graph* graph = nullptr;
  REQUIRE_OK(loom_graph_create(f.device, &graph));
  // The reference: the same steps on a vector.
  std::vector<uint32_t> x(n), want(n), tmp(n);
  for (uint32_t i = 0; i < n; i++) x[i] = static_cast<uint32_t>(Uniform(1u << 30));
  want = x;
  uint32_t prev = 0, id = 0;
  bool has_prev = false;
  std::vector<uint32_t> rotates;
  auto after = [&](uint32_t node) { prev = node, has_prev = true; };
  for (int step = 0; step < 40; step++) {
    uint32_t shift = 1 + static_cast<uint32_t>(Uniform(n - 1));
    uint32_t block = 32u << Uniform(3);
    Launch rotate((n + block - 1) / block, block);
    rotate.Bind(a).Bind(b).Add(shift).Add(n);
    REQUIRE_OK(loom_graph_add_kernel_node(graph, f.Kernel("rotate"), rotate.Get(), has_prev ? &prev : nullptr,
                                          has_prev ? 1 : 0, &id));
    rotates.push_back(id);
    after(id);
    for (uint32_t i = 0; i < n; i++) tmp[i] = want[(i + shift) % n] * 3u + 1u;
    want = tmp;
    if (step % 5 == 4) {  // a fill of part of a, then b copied back over all of it
      REQUIRE_OK(loom_graph_add_fill_node(graph, a, 0, 64, 0xff, &prev, 1, &id));
      after(id);
    }
    REQUIRE_OK(loom_graph_add_copy_node(graph, a, 0, b, 0, n * 4, &prev, 1, &id));
    after(id);
  }
  Launch count(64, 1);
  count.Bind(counts).Add(uint32_t{16});
  count.params.shared_bytes = 16;
  count.params.violation = violation;
  REQUIRE_OK(loom_graph_add_kernel_node(graph, f.Kernel("count_blocks"), count.Get(), &prev, 1, &id));
  loom_graph_exec* exec = nullptr;
  REQUIRE_OK(loom_graph_instantiate(graph, &exec));
  loom_graph_destroy(graph);
  // The first rotate reads the caller's x and the last one writes the caller's y.
  std::vector<uint32_t> y(n);
  loom_graph_binding bindings[2] = {Binding(rotates.front(), 0, x.data(), n * 4),
                                    Binding(rotates.back(), 1, y.data(), n * 4)};
  loom_graph_run_params run = {};
  run.struct_size = sizeof(run);
  run.bindings = bindings;
  run.binding_count = 2;
  for (int round = 0; round < 10; round++) {
    for (uint32_t threads : {1u, 2u, 0u}) {
      run.max_threads = threads;
      std::fill(y.begin(), y.end(), 0u);
      memset(hcounts, 0, 64 * 4);
      REQUIRE_OK(loom_graph_exec_run(exec, stream, &run));
      CHECK(y == want);
      uint32_t ones = 0;
      for (uint32_t i = 0; i < 64; i++) ones += hcounts[i] == 1;
      CHECK_EQ(ones, 64u);
      CHECK_EQ(*hviolation, 0u);
      if (y != want || ones != 64) return;
    }
  }
  loom_graph_exec_destroy(exec);
  loom_buffer_destroy(a);
  loom_buffer_destroy(b);
  loom_buffer_destroy(counts);
  loom_buffer_destroy(violation);
  loom_stream_destroy(stream);
}

LOOM_TEST(IndependentGraphNodesRunConcurrently) {
  Fixture f(2);
  REQUIRE(f.ok());
  loom_stream* stream = f.Stream();
  loom_buffer* flags = f.Buffer(8, LOOM_MEMORY_SHARED);
  loom_buffer* violation = f.Buffer(4, LOOM_MEMORY_SHARED);
  REQUIRE(stream && flags && violation);
  loom_graph* graph = nullptr;
  REQUIRE_OK(loom_graph_create(f.device, &graph));
  uint32_t root = 0, join = 0;
  REQUIRE_OK(loom_graph_add_fill_node(graph, flags, 0, 8, 0, nullptr, 0, &root));
  Launch left(1, 1), right(1, 1);
  left.Bind(flags).Add(uint32_t{0});
  right.Bind(flags).Add(uint32_t{1});
  left.params.violation = right.params.violation = violation;
  uint32_t ids[2];
  REQUIRE_OK(
      loom_graph_add_kernel_node(graph, f.Kernel("rendezvous"), left.Get(), &root, 1, &ids[0]));
  REQUIRE_OK(
      loom_graph_add_kernel_node(graph, f.Kernel("rendezvous"), right.Get(), &root, 1, &ids[1]));
  REQUIRE_OK(loom_graph_add_empty_node(graph, ids, 2, &join));
  loom_graph_exec* exec = nullptr;
  REQUIRE_OK(loom_graph_instantiate(graph, &exec));
  REQUIRE_OK(loom_stream_fill(stream, violation, 0, 4, 0));
  REQUIRE_OK(loom_graph_exec_launch(exec, stream));
  REQUIRE_OK(loom_stream_synchronize(stream));
  CHECK_EQ(*static_cast<const uint32_t*>(loom_buffer_host_pointer(violation)), 0u);
  loom_graph_exec_destroy(exec);
  loom_graph_destroy(graph);
  loom_buffer_destroy(flags);
  loom_buffer_destroy(violation);
  loom_stream_destroy(stream);
}

LOOM_TEST(CaptureRecordsInsteadOfRunning) {
  Fixture f;
  REQUIRE(f.ok());
  loom_stream* stream = f.Stream();
  const uint32_t n = 256;
  loom_buffer* a = f.Buffer(n * 4, LOOM_MEMORY_SHARED);
  loom_buffer* b = f.Buffer(n * 4, LOOM_MEMORY_SHARED);
  REQUIRE(stream && a && b);
  uint32_t* ha = static_cast<uint32_t*>(loom_buffer_host_pointer(a));
  uint32_t* hb = static_cast<uint32_t*>(loom_buffer_host_pointer(b));
  memset(ha, 0xee, n * 4);
  memset(hb, 0xee, n * 4);
  uint32_t base = static_cast<uint32_t>(Rng()());
  REQUIRE_OK(loom_stream_begin_capture(stream));
  CHECK_EQ(loom_stream_is_capturing(stream), 1);
  REQUIRE_OK(loom_stream_fill(stream, b, 0, n * 4, 0));
  Launch launch(n / 32, 32);
  launch.Bind(a).Add(n).Add(base);
  REQUIRE_OK(loom_kernel_launch(stream, f.Kernel("iota"), launch.Get()));
  REQUIRE_OK(loom_stream_copy_d2d(stream, b, 0, a, 0, n * 2));  // first half
  CHECK_OK(loom_stream_fill(stream, a, 0, 0, 1));               // zero bytes: not recorded
  loom_graph* graph = nullptr;
  REQUIRE_OK(loom_stream_end_capture(stream, &graph));
  CHECK_EQ(loom_stream_is_capturing(stream), 0);
  REQUIRE(graph != nullptr);
  CHECK_EQ(loom_graph_node_count(graph), 3u);
  REQUIRE_OK(loom_stream_synchronize(stream));
  CHECK_EQ(ha[0], 0xeeeeeeeeu);  // nothing ran
  CHECK_EQ(hb[0], 0xeeeeeeeeu);
  loom_graph_exec* exec = nullptr;
  REQUIRE_OK(loom_graph_instantiate(graph, &exec));
  loom_graph_destroy(graph);  // the executable stands on its own
  REQUIRE_OK(loom_graph_exec_launch(exec, stream));
  REQUIRE_OK(loom_stream_synchronize(stream));
  for (uint32_t i = 0; i < n; i++) {
    CHECK_EQ(ha[i], base + i);
    CHECK_EQ(hb[i], i < n / 2 ? base + i : 0u);
    if (ha[i] != base + i) break;
  }
  loom_graph_exec_destroy(exec);
  loom_buffer_destroy(a);
  loom_buffer_destroy(b);
  loom_stream_destroy(stream);
}

void Nothing(void*) {}

LOOM_TEST(CaptureFailuresInvalidateAndLeaveTheStreamUsable) {
  Fixture f;
  REQUIRE(f.ok());
  loom_stream* stream = f.Stream();
  loom_stream* other = f.Stream();
  loom_buffer* buffer = f.Buffer(64, LOOM_MEMORY_SHARED);
  loom_event* event = nullptr;
  REQUIRE_OK(loom_event_create(f.device, &event));
  REQUIRE_OK(loom_event_record(event, other));
  loom_graph* empty = nullptr;
  REQUIRE_OK(loom_graph_create(f.device, &empty));
  loom_graph_exec* exec = nullptr;
  REQUIRE_OK(loom_graph_instantiate(empty, &exec));
  REQUIRE(stream && other && buffer);
  uint8_t host[8] = {};
  struct Case {
    const char* name;
    std::function<loom_status()> op;
  };
  std::vector<Case> cases = {
      {"copy_h2d", [&] { return loom_stream_copy_h2d(stream, buffer, 0, host, 8); }},
      {"copy_d2h", [&] { return loom_stream_copy_d2h(stream, host, buffer, 0, 8); }},
      {"host callback", [&] { return loom_stream_host_callback(stream, Nothing, nullptr); }},
      {"synchronize", [&] { return loom_stream_synchronize(stream); }},
      {"cross-stream wait", [&] { return loom_stream_wait_event(stream, event); }},
      {"event record", [&] { return loom_event_record(event, stream); }},
      {"graph launch", [&] { return loom_graph_exec_launch(exec, stream); }},
  };
  for (Case& c : cases) {
    REQUIRE_OK(loom_stream_begin_capture(stream));
    REQUIRE_OK(loom_stream_fill(stream, buffer, 0, 8, 1));
    CHECK_STATUS(LOOM_ERR_CAPTURE, c.op());
    std::string message = StreamError(stream);
    if (!Contains(message, c.name)) fprintf(stderr, "    case %s: %s\n", c.name, message.c_str());
    CHECK(Contains(message, c.name));
    CHECK(Contains(message, "not allowed during stream capture"));
    // Everything after the failure is refused until the capture ends.
    CHECK_STATUS(LOOM_ERR_CAPTURE, loom_stream_fill(stream, buffer, 0, 8, 2));
    CHECK(Contains(StreamError(stream), "invalidated"));
    CHECK_EQ(loom_stream_is_capturing(stream), 1);
    loom_graph* graph = reinterpret_cast<loom_graph*>(0x1);
    CHECK_STATUS(LOOM_ERR_CAPTURE, loom_stream_end_capture(stream, &graph));
    CHECK(graph == nullptr);
    CHECK(Contains(StreamError(stream), c.name));
    CHECK_EQ(loom_stream_is_capturing(stream), 0);
    // Usable again: operations run.
    REQUIRE_OK(loom_stream_fill(stream, buffer, 0, 8, 3));
    REQUIRE_OK(loom_stream_synchronize(stream));
    CHECK_EQ(static_cast<const uint8_t*>(loom_buffer_host_pointer(buffer))[7], uint8_t{3});
  }
  // end_capture with out == NULL ends the capture too.
  REQUIRE_OK(loom_stream_begin_capture(stream));
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_stream_end_capture(stream, nullptr));
  CHECK_EQ(loom_stream_is_capturing(stream), 0);
  loom_graph_exec_destroy(exec);
  loom_graph_destroy(empty);
  loom_event_destroy(event);
  loom_buffer_destroy(buffer);
  loom_stream_destroy(stream);
  loom_stream_destroy(other);
}

LOOM_TEST(ExecUpdateChangesLaterLaunchesOnly) {
  Fixture f;
  REQUIRE(f.ok());
  loom_stream* stream = f.Stream();
  const uint32_t n = 100;
  loom_buffer* in = f.Buffer(n * 4, LOOM_MEMORY_SHARED);
  loom_buffer* out1 = f.Buffer(n * 4, LOOM_MEMORY_SHARED);
  loom_buffer* out2 = f.Buffer(n * 4, LOOM_MEMORY_SHARED);
  REQUIRE(stream && in && out1 && out2);
  float* hin = static_cast<float*>(loom_buffer_host_pointer(in));
  for (uint32_t i = 0; i < n; i++) hin[i] = static_cast<float>(Uniform(1000)) - 500.0f;
  float k1 = 1.5f + static_cast<float>(Uniform(10)), k2 = -2.0f - static_cast<float>(Uniform(10));
  loom_graph* graph = nullptr;
  REQUIRE_OK(loom_graph_create(f.device, &graph));
  uint32_t fill = 0, node = 0;
  REQUIRE_OK(loom_graph_add_empty_node(graph, nullptr, 0, &fill));
  Launch first(4, 32);
  first.Bind(in).Bind(out1).Add(k1).Add(n);
  REQUIRE_OK(loom_graph_add_kernel_node(graph, f.Kernel("scale"), first.Get(), &fill, 1, &node));
  loom_graph_exec* exec = nullptr;
  REQUIRE_OK(loom_graph_instantiate(graph, &exec));
  loom_graph_destroy(graph);
  // Hold the stream so that both launches are enqueued before either runs.
  Gate gate;
  REQUIRE_OK(loom_stream_host_callback(stream, WaitAtGate, &gate));
  REQUIRE_OK(loom_graph_exec_launch(exec, stream));
  Launch second(4, 32);
  second.Bind(in).Bind(out2).Add(k2).Add(n);
  REQUIRE_OK(loom_graph_exec_update_kernel_node(exec, node, second.Get()));
  REQUIRE_OK(loom_graph_exec_launch(exec, stream));
  gate.open = true;
  REQUIRE_OK(loom_stream_synchronize(stream));
  const float* h1 = static_cast<const float*>(loom_buffer_host_pointer(out1));
  const float* h2 = static_cast<const float*>(loom_buffer_host_pointer(out2));
  for (uint32_t i = 0; i < n; i++) {
    CHECK_EQ(h1[i], hin[i] * k1);
    CHECK_EQ(h2[i], hin[i] * k2);
    if (h1[i] != hin[i] * k1 || h2[i] != hin[i] * k2) break;
  }
  // A bad update is refused and leaves the node as it was.
  Launch bad(0, 32);
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT,
               loom_graph_exec_update_kernel_node(exec, node, bad.Get()));
  loom_graph_exec_destroy(exec);
  loom_buffer_destroy(in);
  loom_buffer_destroy(out1);
  loom_buffer_destroy(out2);
  loom_stream_destroy(stream);
}

// ---------------------------------------------------------------- faults and destruction

LOOM_TEST(InjectedOperationFaultIsSticky) {
  Fixture f;
  REQUIRE(f.ok());
  loom_stream* stream = f.Stream();
  loom_stream* bystander = f.Stream();
  loom_buffer* buffer = f.Buffer(16, LOOM_MEMORY_SHARED);
  REQUIRE(stream && bystander && buffer);
  const uint8_t* host = static_cast<const uint8_t*>(loom_buffer_host_pointer(buffer));
  // The gate holds the stream so that everything below is enqueued before the fault happens.
  Gate gate;
  REQUIRE_OK(loom_stream_host_callback(stream, WaitAtGate, &gate));
  REQUIRE_OK(loom_stream_fill(stream, buffer, 0, 16, 1));
  REQUIRE_OK(loom_stream_inject_fault(stream, LOOM_FAULT_NEXT_OPERATION));
  Launch launch(1, 1);
  launch.Add(uint32_t{1});
  REQUIRE_OK(loom_kernel_launch(stream, f.Kernel("violate"), launch.Get()));  // fails on the device
  REQUIRE_OK(loom_stream_fill(stream, buffer, 8, 8, 2));                      // skipped
  gate.open = true;
  CHECK_STATUS(LOOM_ERR_DEVICE, loom_stream_synchronize(stream));
  std::string message = StreamError(stream);
  CHECK(Contains(message, "kernel launch 'violate'"));
  CHECK(Contains(message, "stream operation #3"));
  CHECK(Contains(message, "injected"));
  CHECK_EQ(host[0], uint8_t{1});
  CHECK_EQ(host[8], uint8_t{1});
  CHECK_STATUS(LOOM_ERR_DEVICE, loom_stream_fill(stream, buffer, 0, 1, 3));
  CHECK(Contains(StreamError(stream), "kernel launch 'violate'"));
  CHECK(Contains(StreamError(stream), "fill refused"));
  CHECK_STATUS(LOOM_ERR_DEVICE, loom_stream_synchronize(stream));
  CHECK_STATUS(LOOM_ERR_DEVICE, loom_stream_begin_capture(stream));
  // Other streams are unaffected.
  REQUIRE_OK(loom_stream_fill(bystander, buffer, 0, 1, 4));
  REQUIRE_OK(loom_stream_synchronize(bystander));
  CHECK_EQ(host[0], uint8_t{4});
  loom_buffer_destroy(buffer);
  loom_stream_destroy(stream);
  loom_stream_destroy(bystander);
}

LOOM_TEST(InjectedSynchronizeFaultIsSticky) {
  Fixture f;
  REQUIRE(f.ok());
  loom_stream* stream = f.Stream();
  loom_buffer* buffer = f.Buffer(16);
  REQUIRE(stream && buffer);
  REQUIRE_OK(loom_stream_inject_fault(stream, LOOM_FAULT_NEXT_SYNCHRONIZE));
  REQUIRE_OK(loom_stream_fill(stream, buffer, 0, 16, 1));
  CHECK_STATUS(LOOM_ERR_DEVICE, loom_stream_synchronize(stream));
  CHECK(Contains(StreamError(stream), "synchronize"));
  CHECK_STATUS(LOOM_ERR_DEVICE, loom_stream_fill(stream, buffer, 0, 16, 1));
  CHECK_STATUS(LOOM_ERR_DEVICE, loom_stream_synchronize(stream));
  // LOOM_FAULT_NONE clears a pending fault.
  loom_stream* fresh = f.Stream();
  REQUIRE_OK(loom_stream_inject_fault(fresh, LOOM_FAULT_NEXT_SYNCHRONIZE));
  REQUIRE_OK(loom_stream_inject_fault(fresh, LOOM_FAULT_NONE));
  CHECK_OK(loom_stream_synchronize(fresh));
  loom_buffer_destroy(buffer);
  loom_stream_destroy(stream);
  loom_stream_destroy(fresh);
}

// Runs this executable again with LOOM_INJECT_FAULT set; the child checks the first stream.
int RunEnvironmentChild(const char* mode) {
  std::string variable = std::string("LOOM_INJECT_FAULT=") + mode;
  std::string argument = std::string("--env-fault-child=") + mode;
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; e++) {
    if (strncmp(*e, "LOOM_INJECT_FAULT=", 18) != 0) env.push_back(*e);
  }
  env.push_back(&variable[0]);
  env.push_back(nullptr);
  char* argv[] = {&g_self[0], &argument[0], nullptr};
  pid_t pid;
  if (posix_spawn(&pid, g_self.c_str(), nullptr, nullptr, argv, env.data()) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

LOOM_TEST(EnvironmentInjectsFaultIntoFirstStream) {
  CHECK_EQ(RunEnvironmentChild("next-operation"), 0);
  CHECK_EQ(RunEnvironmentChild("next-synchronize"), 0);
}

int EnvironmentChild(const std::string& mode) {
  Fixture f;
  if (!f.ok()) return 2;
  loom_stream* first = f.Stream();
  loom_stream* second = f.Stream();
  loom_buffer* buffer = f.Buffer(16);
  bool ok = first && second && buffer;
  ok = ok && loom_stream_fill(first, buffer, 0, 16, 1) == LOOM_OK;
  ok = ok && loom_stream_synchronize(first) == LOOM_ERR_DEVICE;
  std::string message = StreamError(first);
  ok = ok && Contains(message, mode == "next-operation" ? "fill" : "synchronize");
  ok = ok && loom_stream_fill(second, buffer, 0, 16, 1) == LOOM_OK;
  ok = ok && loom_stream_synchronize(second) == LOOM_OK;
  if (!ok) fprintf(stderr, "env fault child (%s) failed: %s\n", mode.c_str(), message.c_str());
  loom_buffer_destroy(buffer);
  loom_stream_destroy(first);
  loom_stream_destroy(second);
  return ok ? 0 : 1;
}

LOOM_TEST(DestroyOrderIsSafe) {
  Fixture f;
  REQUIRE(f.ok());
  loom_buffer* buffer = f.Buffer(1024, LOOM_MEMORY_SHARED);
  REQUIRE(buffer != nullptr);
  const uint8_t* host = static_cast<const uint8_t*>(loom_buffer_host_pointer(buffer));
  // A stream destroyed with work queued drains it first.
  loom_stream* stream = f.Stream();
  Gate held;
  REQUIRE_OK(loom_stream_host_callback(stream, WaitAtGate, &held));
  for (int i = 0; i < 16; i++)
    REQUIRE_OK(loom_stream_fill(stream, buffer, i * 64, 64, uint8_t(i + 1)));
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    held.open = true;
  });
  loom_stream_destroy(stream);
  opener.join();
  for (int i = 0; i < 16; i++) CHECK_EQ(host[i * 64 + 63], uint8_t(i + 1));

  // An event destroyed while another stream still waits for it.
  loom_stream* a = f.Stream();
  loom_stream* b = f.Stream();
  loom_event* event = nullptr;
  REQUIRE_OK(loom_event_create(f.device, &event));
  Gate gate;
  REQUIRE_OK(loom_stream_host_callback(a, WaitAtGate, &gate));
  REQUIRE_OK(loom_event_record(event, a));
  REQUIRE_OK(loom_stream_wait_event(b, event));
  REQUIRE_OK(loom_stream_fill(b, buffer, 0, 8, 0x77));
  loom_event_destroy(event);
  gate.open = true;
  REQUIRE_OK(loom_stream_synchronize(b));
  CHECK_EQ(host[0], uint8_t{0x77});

  // A graph destroyed before its executable, and the executable destroyed while launched.
  loom_graph* graph = nullptr;
  REQUIRE_OK(loom_graph_create(f.device, &graph));
  uint32_t node = 0;
  REQUIRE_OK(loom_graph_add_fill_node(graph, buffer, 8, 8, 0x55, nullptr, 0, &node));
  loom_graph_exec* exec = nullptr;
  REQUIRE_OK(loom_graph_instantiate(graph, &exec));
  loom_graph_destroy(graph);
  Gate gate2;
  REQUIRE_OK(loom_stream_host_callback(a, WaitAtGate, &gate2));
  REQUIRE_OK(loom_graph_exec_launch(exec, a));
  loom_graph_exec_destroy(exec);
  gate2.open = true;
  REQUIRE_OK(loom_stream_synchronize(a));
  CHECK_EQ(host[15], uint8_t{0x55});
  loom_stream_destroy(a);
  loom_stream_destroy(b);
  loom_buffer_destroy(buffer);
}

}  // namespace

int main(int argc, char** argv) {
  g_self = "/proc/self/exe";
  char self[4096];
  ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (length > 0) {
    self[length] = '\0';
    g_self = self;
  }
  if (argc > 1 && strncmp(argv[1], "--env-fault-child=", 18) == 0) {
    return EnvironmentChild(argv[1] + 18);
  }
  if (argc > 1) {
    g_so_path = argv[1];
  } else if (const char* env = getenv("LOOM_TEST_KERNELS_SO")) {
    g_so_path = env;
  } else {
    g_so_path = g_self.substr(0, g_self.rfind('/') + 1) + "libtest_kernels.so";
  }
  printf("test kernel module: %s\n", g_so_path.c_str());
  Rng();
  return loomtest::RunAll();
}
