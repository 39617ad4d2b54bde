// host_backend.cc: the CPU backend. Streams are worker threads draining FIFO queues; kernel grids
// and graph nodes run on a worker pool owned by the device; memory is 64-byte aligned host memory.
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <thread>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "backend.h"

namespace loom {
namespace host {

constexpr uint64_t kAlignment = 64;
constexpr uint32_t kMaxWorkers = 1024;

void* AlignedAlloc(uint64_t bytes) {
  uint64_t rounded = (bytes + kAlignment - 1) & ~(kAlignment - 1);
  void* pointer = nullptr;
  if (rounded < bytes || posix_memalign(&pointer, kAlignment, rounded) != 0) return nullptr;
  return pointer;
}

// Buffers of kMappedBytes or more are mapped from the kernel rather than taken from malloc, so
// that freeing one gives its pages back at once. From malloc they stayed resident: glibc keeps
// freed chunks in its per-thread arenas (and the Go runtime calls in from several threads),
// and raises its mmap threshold after each large free. An interpreted run's short-lived
// operands left 20-25 MB of free but resident memory on PP-OCRv4 recognition, with 5 MB of
// buffers live at once. Smaller buffers are frequent and cheap to keep: malloc's.
constexpr uint64_t kMappedBytes = 128 << 10;

void* AllocBuffer(uint64_t bytes) {
  if (bytes < kMappedBytes) return AlignedAlloc(bytes);
  void* pointer = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return pointer == MAP_FAILED ? nullptr : pointer;  // page-aligned, so kAlignment-aligned
}

void FreeBuffer(void* pointer, uint64_t bytes) {
  if (pointer == nullptr) return;
  if (bytes < kMappedBytes) {
    free(pointer);
  } else {
    munmap(pointer, bytes);
  }
}

// ---------------------------------------------------------------- target and props

#if defined(__x86_64__)
uint64_t ReadXcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}
#endif

// The x86-64 psABI microarchitecture level (v2, v3, v4) of this CPU, from cpuid and from what
// the OS saves (XCR0): the levels need every listed feature.
std::string DetectTarget() {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 1) return "host-x86_64-v1";
  __cpuid(1, a, b, c, d);
  auto bit = [](unsigned reg, int n) { return (reg >> n) & 1u; };
  bool sse3 = bit(c, 0), ssse3 = bit(c, 9), fma = bit(c, 12), cx16 = bit(c, 13);
  bool sse41 = bit(c, 19), sse42 = bit(c, 20), movbe = bit(c, 22), popcnt = bit(c, 23);
  bool osxsave = bit(c, 27), avx = bit(c, 28), f16c = bit(c, 29);
  bool lahf = false, lzcnt = false;
  if (__get_cpuid(0x80000001u, &a, &b, &c, &d)) {
    lahf = bit(c, 0);
    lzcnt = bit(c, 5);
  }
  bool avx2 = false, bmi1 = false, bmi2 = false;
  bool avx512f = false, avx512dq = false, avx512cd = false, avx512bw = false, avx512vl = false;
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    bmi1 = bit(b, 3);
    avx2 = bit(b, 5);
    bmi2 = bit(b, 8);
    avx512f = bit(b, 16);
    avx512dq = bit(b, 17);
    avx512cd = bit(b, 28);
    avx512bw = bit(b, 30);
    avx512vl = bit(b, 31);
  }
  uint64_t xcr0 = osxsave ? ReadXcr0() : 0;
  bool os_ymm = (xcr0 & 0x6) == 0x6;    // SSE and AVX state
  bool os_zmm = (xcr0 & 0xe6) == 0xe6;  // plus opmask and the upper ZMM registers
  bool v2 = cx16 && lahf && popcnt && sse3 && sse41 && sse42 && ssse3;
  bool v3 = v2 && avx && avx2 && bmi1 && bmi2 && f16c && fma && lzcnt && movbe && osxsave && os_ymm;
  bool v4 = v3 && avx512f && avx512bw && avx512cd && avx512dq && avx512vl && os_zmm;
  return v4 ? "host-x86_64-v4" : v3 ? "host-x86_64-v3" : v2 ? "host-x86_64-v2" : "host-x86_64-v1";
#elif defined(__aarch64__)
  return "host-aarch64-v8";
#else
  return "host-unknown";
#endif
}

std::string CpuName() {
#if defined(__x86_64__)
  unsigned regs[12];
  if (__get_cpuid_max(0x80000000u, nullptr) >= 0x80000004u) {
    for (unsigned i = 0; i < 3; i++) {
      __get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2],
                  &regs[4 * i + 3]);
    }
    std::string name(reinterpret_cast<const char*>(regs), sizeof(regs));
    name = name.c_str();  // up to the first NUL
    size_t first = name.find_first_not_of(' ');
    size_t last = name.find_last_not_of(' ');
    if (first != std::string::npos) return name.substr(first, last - first + 1);
  }
#endif
  return "host CPU";
}

// ---------------------------------------------------------------- worker pool and grids

// A pause in a spin loop (lets the sibling hyperthread run; no-op elsewhere).
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

class WorkerPool {
 public:
  explicit WorkerPool(uint32_t workers) {
    for (uint32_t i = 0; i < workers; i++) threads_.emplace_back([this] { Loop(); });
  }
  ~WorkerPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& thread : threads_) thread.join();
  }
  uint32_t size() const { return static_cast<uint32_t>(threads_.size()); }
  void Submit(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
      queued_.fetch_add(1, std::memory_order_release);
    }
    // A spinning worker sees queued_; only sleeping ones need a wake-up (a futex call).
    if (sleepers_.load(std::memory_order_acquire) > 0) cv_.notify_one();
  }

 private:
  // A worker that finished a task spins a little before it sleeps: kernels of one graph or
  // run arrive microseconds apart, and waking a sleeping thread costs more than a small kernel.
  static constexpr int kSpins = 20000;

  void Loop() {
    for (;;) {
      for (int i = 0; i < kSpins && queued_.load(std::memory_order_acquire) == 0; i++) {
        CpuRelax();
      }
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (tasks_.empty() && !stop_) {
          sleepers_.fetch_add(1, std::memory_order_acq_rel);
          cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
          sleepers_.fetch_sub(1, std::memory_order_acq_rel);
        }
        if (stop_) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
        queued_.fetch_sub(1, std::memory_order_acq_rel);
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::atomic<uint32_t> queued_{0};    // tasks_.size(), readable without the lock
  std::atomic<uint32_t> sleepers_{0};  // workers waiting on cv_
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// A launch with every address resolved, shared by the blocks that run it.
struct ResolvedLaunch {
  loom_host_kernel_fn fn = nullptr;
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t shared_bytes = 0;
  std::vector<void*> buffers;
  std::vector<uint64_t> buffer_bytes;
  std::vector<uint8_t> scalars;
  uint32_t* violation = nullptr;
  uint32_t private_violation = 0;  // the discarded word when the launch names none
};

// The addresses one run of a launch binds: the launch's own, or, for a graph run with
// rebound buffers (loom_graph_run_params.bindings), a copy with some replaced.
struct BoundBuffers {
  void* const* buffers;
  const uint64_t* buffer_bytes;
};

BoundBuffers OwnBuffers(const ResolvedLaunch& launch) {
  return BoundBuffers{launch.buffers.data(), launch.buffer_bytes.data()};
}

// One grid in flight: blocks are claimed with an atomic counter by the launching thread and by
// helpers on the pool. The launching thread always takes part, so a grid finishes even when
// every pool worker is busy (graph nodes launch grids from pool workers).
struct GridJob {
  const ResolvedLaunch* launch = nullptr;
  BoundBuffers bound = {};
  uint64_t total = 0;
  uint64_t threads = 1;  // the caller and its helpers
  // Claimed and finished block counts on cache lines of their own: the threads update them
  // concurrently.
  alignas(64) std::atomic<uint64_t> next{0};
  alignas(64) std::atomic<uint64_t> done{0};
  alignas(64) std::mutex mu;
  std::condition_variable cv;
};

// Runs block `index` of a launch; shared is the block's scratch (allocated by the caller once
// for all the blocks it runs).
void RunBlock(const ResolvedLaunch& launch, const BoundBuffers& bound, uint64_t index,
              void* shared) {
  loom_host_kernel_args args;
  memcpy(args.grid, launch.grid, sizeof(args.grid));
  memcpy(args.block, launch.block, sizeof(args.block));
  args.block_id[0] = static_cast<uint32_t>(index % launch.grid[0]);
  args.block_id[1] = static_cast<uint32_t>(index / launch.grid[0] % launch.grid[1]);
  args.block_id[2] = static_cast<uint32_t>(index / (uint64_t{launch.grid[0]} * launch.grid[1]));
  args.buffers = bound.buffers;
  args.buffer_bytes = bound.buffer_bytes;
  args.buffer_count = static_cast<uint32_t>(launch.buffers.size());
  args.scalars = launch.scalars.empty() ? nullptr : launch.scalars.data();
  args.scalar_bytes = static_cast<uint32_t>(launch.scalars.size());
  args.shared = shared;
  args.violation = launch.violation;
  launch.fn(&args);
}

// A thread's block scratch, kept between launches: small graphs launch kernels every few
// microseconds, and an allocation per launch showed up in their profiles. A thread runs one
// block at a time, so one buffer per thread suffices.
class ThreadScratch {
 public:
  ~ThreadScratch() { free(data_); }
  void* Get(uint64_t bytes) {
    if (bytes > capacity_) {
      free(data_);
      data_ = AlignedAlloc(bytes);
      if (data_ == nullptr) abort();  // a few KiB of scratch: nothing sensible is left to do
      capacity_ = bytes;
    }
    return data_;
  }

 private:
  void* data_ = nullptr;
  uint64_t capacity_ = 0;
};

void* BlockScratch(const ResolvedLaunch& launch) {
  if (launch.shared_bytes == 0) return nullptr;
  thread_local ThreadScratch scratch;
  return scratch.Get(launch.shared_bytes);
}

// Runs blocks of job until none is left. Blocks are claimed in chunks of a fraction of what
// remains (guided scheduling): large chunks while much is left, single blocks at the end, so
// the threads touch the shared counter a few times a grid rather than once a block (each
// touch moves its cache line between cores) and still finish together. Finished blocks are
// counted once per thread.
void RunBlocks(GridJob& job) {
  void* shared = nullptr;
  uint64_t ran = 0;
  uint64_t first = job.next.load(std::memory_order_relaxed);
  for (;;) {
    if (first >= job.total) break;
    uint64_t chunk = std::max<uint64_t>(1, (job.total - first) / (2 * job.threads));
    if (!job.next.compare_exchange_weak(first, first + chunk, std::memory_order_relaxed)) continue;
    const ResolvedLaunch& launch = *job.launch;
    if (shared == nullptr) shared = BlockScratch(launch);
    uint64_t last = std::min(first + chunk, job.total);
    for (uint64_t index = first; index < last; index++) RunBlock(launch, job.bound, index, shared);
    ran += last - first;
    first = job.next.load(std::memory_order_relaxed);
  }
  if (ran > 0 && job.done.fetch_add(ran, std::memory_order_acq_rel) + ran == job.total) {
    std::lock_guard<std::mutex> lock(job.mu);
    job.cv.notify_all();
  }
}

// Runs a launch's grid with the calling thread and up to max_threads - 1 pool workers
// (max_threads 0: the whole pool). Alone, the caller runs the blocks without any hand-off.
void RunGrid(WorkerPool& pool, const ResolvedLaunch& launch, uint32_t max_threads,
             const BoundBuffers& bound) {
  uint64_t total = uint64_t{launch.grid[0]} * launch.grid[1] * launch.grid[2];
  uint64_t helpers = std::min<uint64_t>(pool.size(), total - 1);
  if (max_threads > 0) helpers = std::min<uint64_t>(helpers, max_threads - 1);
  if (helpers == 0) {
    void* shared = BlockScratch(launch);
    for (uint64_t index = 0; index < total; index++) RunBlock(launch, bound, index, shared);
    return;
  }
  auto job = std::make_shared<GridJob>();
  job->launch = &launch;
  job->bound = bound;
  job->total = total;
  job->threads = helpers + 1;
  for (uint64_t i = 0; i < helpers; i++) pool.Submit([job] { RunBlocks(*job); });
  RunBlocks(*job);
  // The helpers' last blocks usually end within microseconds: spin before sleeping.
  for (int i = 0; i < 20000 && job->done.load(std::memory_order_acquire) != job->total; i++) {
    CpuRelax();
  }
  if (job->done.load(std::memory_order_acquire) == job->total) return;
  std::unique_lock<std::mutex> lock(job->mu);
  job->cv.wait(lock, [&] { return job->done.load() == job->total; });
}

// ---------------------------------------------------------------- handles

class HostBuffer : public loom_buffer {
 public:
  ~HostBuffer() override {
    if (!wrapped) FreeBuffer(data, size);
  }
  uint8_t* data = nullptr;
  bool wrapped = false;  // the caller's memory (loom_buffer_wrap_host): not ours to free
};

uint8_t* Address(loom_buffer* buffer, uint64_t offset) {
  return static_cast<HostBuffer*>(buffer)->data + offset;
}

class HostKernel : public loom_kernel {
 public:
  explicit HostKernel(loom_host_kernel_fn f) : fn(f) {}
  loom_host_kernel_fn fn;
};

std::shared_ptr<ResolvedLaunch> Resolve(loom_kernel* kernel, const LaunchSpec& spec) {
  auto launch = std::make_shared<ResolvedLaunch>();
  launch->fn = static_cast<HostKernel*>(kernel)->fn;
  memcpy(launch->grid, spec.grid, sizeof(spec.grid));
  memcpy(launch->block, spec.block, sizeof(spec.block));
  launch->shared_bytes = spec.shared_bytes;
  for (size_t i = 0; i < spec.buffers.size(); i++) {
    launch->buffers.push_back(Address(spec.buffers[i], spec.offsets[i]));
    launch->buffer_bytes.push_back(spec.buffers[i]->size - spec.offsets[i]);
  }
  launch->scalars = spec.scalars;
  launch->violation =
      spec.violation != nullptr
          ? reinterpret_cast<uint32_t*>(Address(spec.violation, spec.violation_offset))
          : &launch->private_violation;
  return launch;
}

class HostModule : public loom_module {
 public:
  ~HostModule() override {
    if (library != nullptr) dlclose(library);
  }
  void* library = nullptr;
  std::map<std::string, loom_host_kernel_fn> entries;

 protected:
  Status FindKernel(const std::string& kernel_name, std::unique_ptr<loom_kernel>* out) override {
    auto it = entries.find(kernel_name);
    if (it == entries.end()) {
      return Errorf(LOOM_ERR_NOT_FOUND, "kernel '%s' not found in host module '%s'",
                    kernel_name.c_str(), name.c_str());
    }
    out->reset(new HostKernel(it->second));
    return Ok();
  }
};

struct StaticModule {
  std::string target;
  std::map<std::string, loom_host_kernel_fn> entries;
};

std::mutex& StaticModulesMutex() {
  static std::mutex mu;
  return mu;
}

std::map<std::string, StaticModule>& StaticModules() {
  static std::map<std::string, StaticModule> modules;
  return modules;
}

// ---- events: a record counter and the count of records the streams have passed

struct EventState {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0;  // records enqueued
  uint64_t reached = 0;   // the newest record a stream passed
  std::chrono::steady_clock::time_point when;
};

class HostEvent : public loom_event {
 public:
  std::shared_ptr<EventState> state = std::make_shared<EventState>();

  Status Synchronize() override {
    std::unique_lock<std::mutex> lock(state->mu);
    uint64_t target = state->recorded;
    state->cv.wait(lock, [&] { return state->reached >= target; });
    return Ok();
  }
  Status Query(bool* done) override {
    std::lock_guard<std::mutex> lock(state->mu);
    *done = state->reached >= state->recorded;
    return Ok();
  }
  Status ElapsedMs(loom_event* end, float* ms) override {
    auto* other = static_cast<HostEvent*>(end);
    std::chrono::steady_clock::time_point from, to;
    for (auto* event : {this, other}) {
      std::lock_guard<std::mutex> lock(event->state->mu);
      if (event->state->recorded == 0) {
        return Errorf(LOOM_ERR_INVALID_ARGUMENT, "event_elapsed_ms: an event was never recorded");
      }
      if (event->state->reached < event->state->recorded) {
        return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                      "event_elapsed_ms: an event's recorded point was not reached yet");
      }
      (event == this ? from : to) = event->state->when;
    }
    *ms = std::chrono::duration<float, std::milli>(to - from).count();
    return Ok();
  }
};

// ---- graphs: a plan is an immutable, resolved copy of the nodes with successor lists

struct PlanNode {
  NodeKind kind = NodeKind::kEmpty;
  std::shared_ptr<ResolvedLaunch> launch;
  uint8_t* dst = nullptr;
  const uint8_t* src = nullptr;
  uint64_t bytes = 0;
  uint8_t value = 0;
  uint32_t indegree = 0;
  std::vector<uint32_t> successors;
};

struct Plan {
  std::vector<PlanNode> nodes;
  std::vector<uint32_t> roots;
};

std::shared_ptr<Plan> BuildPlan(const std::vector<Node>& nodes) {
  auto plan = std::make_shared<Plan>();
  plan->nodes.resize(nodes.size());
  for (uint32_t i = 0; i < nodes.size(); i++) {
    const Node& node = nodes[i];
    PlanNode& step = plan->nodes[i];
    step.kind = node.kind;
    if (node.kind == NodeKind::kKernel) step.launch = Resolve(node.kernel, node.launch);
    if (node.dst != nullptr) step.dst = Address(node.dst, node.dst_offset);
    if (node.src != nullptr) step.src = Address(node.src, node.src_offset);
    step.bytes = node.bytes;
    step.value = node.value;
    step.indegree = static_cast<uint32_t>(node.deps.size());
    for (uint32_t dep : node.deps) plan->nodes[dep].successors.push_back(i);
    if (node.deps.empty()) plan->roots.push_back(i);
  }
  return plan;
}

// One launch of a plan: dependency counters; a node is submitted to the pool when its counter
// reaches zero.
struct PlanRun {
  std::shared_ptr<const Plan> plan;
  WorkerPool* pool = nullptr;
  std::unique_ptr<std::atomic<uint32_t>[]> pending;
  std::atomic<size_t> remaining{0};
  std::mutex mu;
  std::condition_variable cv;
};

// Runs a copy or fill node (an empty node does nothing; kernel nodes are the callers').
void RunMemoryNode(const PlanNode& node) {
  if (node.kind == NodeKind::kCopy) {
    memmove(node.dst, node.src, node.bytes);
  } else if (node.kind == NodeKind::kFill) {
    memset(node.dst, node.value, node.bytes);
  }
}

void RunPlanNodes(const std::shared_ptr<PlanRun>& run, uint32_t id) {
  for (;;) {
    const PlanNode& node = run->plan->nodes[id];
    if (node.kind == NodeKind::kKernel) {
      RunGrid(*run->pool, *node.launch, 0, OwnBuffers(*node.launch));
    } else {
      RunMemoryNode(node);
    }
    int64_t next = -1;  // one ready successor continues on this thread
    for (uint32_t successor : node.successors) {
      if (run->pending[successor].fetch_sub(1) != 1) continue;
      if (next < 0) {
        next = successor;
      } else {
        run->pool->Submit([run, successor] { RunPlanNodes(run, successor); });
      }
    }
    if (run->remaining.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lock(run->mu);
      run->cv.notify_all();
    }
    if (next < 0) return;
    id = static_cast<uint32_t>(next);
  }
}

void RunPlan(WorkerPool& pool, const std::shared_ptr<const Plan>& plan) {
  if (plan->nodes.empty()) return;
  auto run = std::make_shared<PlanRun>();
  run->plan = plan;
  run->pool = &pool;
  run->pending.reset(new std::atomic<uint32_t>[plan->nodes.size()]);
  for (size_t i = 0; i < plan->nodes.size(); i++) run->pending[i] = plan->nodes[i].indegree;
  run->remaining = plan->nodes.size();
  for (uint32_t root : plan->roots) pool.Submit([run, root] { RunPlanNodes(run, root); });
  std::unique_lock<std::mutex> lock(run->mu);
  run->cv.wait(lock, [&] { return run->remaining.load() == 0; });
}

// Runs a plan's nodes in id order (a topological order) on the calling thread, each kernel's
// blocks on at most max_threads threads.
// bindings (sorted by node, then index; checked by api.cc) replace some kernel nodes' buffers
// for this run: those nodes run on a copy of their address lists.
// The addresses each kernel node of one inline run binds: its own, or for a node with rebound
// buffers (loom_graph_run_params.bindings: sorted by node, then index) a copy with those
// replaced, kept in `storage`.
struct RunBindings {
  std::vector<BoundBuffers> bound;  // by node id (kernel nodes only)
  std::vector<void*> buffers;
  std::vector<uint64_t> bytes;

  void Build(const Plan& plan, const loom_graph_binding* bindings, uint32_t binding_count) {
    const loom_graph_binding* next = bindings;
    const loom_graph_binding* end = bindings + binding_count;
    bound.assign(plan.nodes.size(), BoundBuffers{});
    // Sized first: the BoundBuffers point into the vectors.
    size_t total = 0;
    for (const loom_graph_binding* b = bindings; b != end; b++) {
      if (b == bindings || b->node != b[-1].node) total += plan.nodes[b->node].launch->buffers.size();
    }
    buffers.resize(total);
    bytes.resize(total);
    size_t at = 0;
    for (uint32_t id = 0; id < plan.nodes.size(); id++) {
      const PlanNode& node = plan.nodes[id];
      if (node.kind != NodeKind::kKernel) continue;
      const ResolvedLaunch& launch = *node.launch;
      if (next == end || next->node != id) {
        bound[id] = OwnBuffers(launch);
        continue;
      }
      size_t n = launch.buffers.size();
      std::copy(launch.buffers.begin(), launch.buffers.end(), buffers.begin() + at);
      std::copy(launch.buffer_bytes.begin(), launch.buffer_bytes.end(), bytes.begin() + at);
      for (; next != end && next->node == id; next++) {
        buffers[at + next->index] = next->address;
        bytes[at + next->index] = next->bytes;
      }
      bound[id] = BoundBuffers{buffers.data() + at, bytes.data() + at};
      at += n;
    }
  }
};

// Runs one plan node alone on the calling thread.
void RunNodeAlone(const PlanNode& node, const BoundBuffers& bound) {
  if (node.kind != NodeKind::kKernel) {
    RunMemoryNode(node);
    return;
  }
  const ResolvedLaunch& launch = *node.launch;
  uint64_t total = uint64_t{launch.grid[0]} * launch.grid[1] * launch.grid[2];
  void* shared = BlockScratch(launch);
  for (uint64_t index = 0; index < total; index++) RunBlock(launch, bound, index, shared);
}

// A team run: a graph run inline on several threads that forks once, not once per kernel.
// The caller and up to `threads - 1` pool workers step through the nodes in id order
// together: each claims blocks of the node's grid (guided chunks, as RunBlocks) and moves on
// once every block of the node has finished, so node i's writes are visible to node i + 1
// (the claim and finish counters order them). A copy or fill is one unit of work. A helper
// that starts late finds the nodes done and leaves without touching them; the run's state is
// shared, so one that starts after the run returned touches nothing but it.
struct alignas(64) TeamNode {
  std::atomic<uint64_t> next{0};
  std::atomic<uint64_t> done{0};
};

struct TeamRun {
  std::shared_ptr<const Plan> plan;
  RunBindings bindings;
  std::unique_ptr<TeamNode[]> nodes;
  uint64_t threads = 1;
  // Participants that stopped spinning on a long node sleep on cv (see Finish).
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<uint32_t> sleepers{0};

  // Counts ran units of node `id` as finished, waking sleepers once the node is complete.
  void Finish(TeamNode& state, uint64_t ran, uint64_t total) {
    if (state.done.fetch_add(ran, std::memory_order_seq_cst) + ran != total) return;
    if (sleepers.load(std::memory_order_seq_cst) == 0) return;
    std::lock_guard<std::mutex> lock(mu);
    cv.notify_all();
  }
  // Waits until node `id` is complete: spins first (its last blocks usually end within
  // microseconds), then sleeps.
  void Await(TeamNode& state, uint64_t total) {
    for (int i = 0; i < 20000; i++) {
      if (state.done.load(std::memory_order_acquire) == total) return;
      CpuRelax();
    }
    std::unique_lock<std::mutex> lock(mu);
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    cv.wait(lock, [&] { return state.done.load(std::memory_order_seq_cst) == total; });
    sleepers.fetch_sub(1, std::memory_order_relaxed);
  }
};

uint64_t NodeUnits(const PlanNode& node) {
  switch (node.kind) {
    case NodeKind::kKernel:
      return uint64_t{node.launch->grid[0]} * node.launch->grid[1] * node.launch->grid[2];
    case NodeKind::kCopy:
    case NodeKind::kFill:
      return 1;
    case NodeKind::kEmpty:
      return 0;
  }
  return 0;
}

void RunTeam(TeamRun& run) {
  const Plan& plan = *run.plan;
  for (uint32_t id = 0; id < plan.nodes.size(); id++) {
    const PlanNode& node = plan.nodes[id];
    uint64_t total = NodeUnits(node);
    if (total == 0) continue;
    TeamNode& state = run.nodes[id];
    uint64_t ran = 0;
    uint64_t first = state.next.load(std::memory_order_relaxed);
    void* shared = nullptr;
    while (first < total) {
      uint64_t chunk = std::max<uint64_t>(1, (total - first) / (2 * run.threads));
      if (!state.next.compare_exchange_weak(first, first + chunk, std::memory_order_relaxed)) continue;
      uint64_t last = std::min(first + chunk, total);
      if (node.kind == NodeKind::kKernel) {
        const ResolvedLaunch& launch = *node.launch;
        if (shared == nullptr) shared = BlockScratch(launch);
        for (uint64_t index = first; index < last; index++) {
          RunBlock(launch, run.bindings.bound[id], index, shared);
        }
      } else {
        RunMemoryNode(node);
      }
      ran += last - first;
      first = state.next.load(std::memory_order_relaxed);
    }
    if (ran > 0) run.Finish(state, ran, total);
    run.Await(state, total);
  }
}

void RunPlanInline(WorkerPool& pool, const std::shared_ptr<const Plan>& plan, uint32_t max_threads,
                   const loom_graph_binding* bindings = nullptr, uint32_t binding_count = 0) {
  uint64_t helpers = pool.size();
  if (max_threads > 0) helpers = std::min<uint64_t>(helpers, max_threads - 1);
  // Helpers pay off only where some node has blocks to share.
  bool shared_work = false;
  for (const PlanNode& node : plan->nodes) {
    if (node.kind == NodeKind::kKernel && NodeUnits(node) > 1) {
      shared_work = true;
      break;
    }
  }
  if (helpers == 0 || !shared_work) {
    // Kept per thread: a run allocates nothing once they have grown.
    thread_local RunBindings local;
    local.Build(*plan, bindings, binding_count);
    for (uint32_t id = 0; id < plan->nodes.size(); id++) RunNodeAlone(plan->nodes[id], local.bound[id]);
    return;
  }
  auto run = std::make_shared<TeamRun>();
  run->plan = plan;
  run->bindings.Build(*plan, bindings, binding_count);
  run->nodes.reset(new TeamNode[plan->nodes.size()]);
  run->threads = helpers + 1;
  for (uint64_t i = 0; i < helpers; i++) pool.Submit([run] { RunTeam(*run); });
  RunTeam(*run);
}

class HostExec : public loom_graph_exec {
 public:
  std::shared_ptr<const Plan> Current() {
    std::lock_guard<std::mutex> lock(mu_);
    return plan_;
  }
  void SetPlan(std::shared_ptr<const Plan> plan) {
    std::lock_guard<std::mutex> lock(mu_);
    plan_ = std::move(plan);
  }
  // Copy-on-write: launches already enqueued keep the plan they were given.
  Status UpdateKernelNode(uint32_t node, const LaunchSpec& launch) override {
    auto plan = std::make_shared<Plan>(*Current());
    plan->nodes[node].launch = Resolve(nodes[node].kernel, launch);
    SetPlan(std::move(plan));
    return Ok();
  }

 private:
  std::mutex mu_;
  std::shared_ptr<const Plan> plan_;
};

class HostGraph : public loom_graph {
 public:
  Status Instantiate(loom_graph_exec** out) override {
    auto* exec = new HostExec();
    exec->device = device;
    exec->nodes = nodes;
    exec->SetPlan(BuildPlan(nodes));
    *out = exec;
    return Ok();
  }
};

class HostDevice;

// ---- streams

class HostStream : public loom_stream {
 public:
  // An inline stream has no thread: Push runs each operation on the enqueuing thread.
  HostStream(WorkerPool* pool, bool inline_ops, uint32_t max_threads)
      : pool_(pool), inline_(inline_ops), max_threads_(max_threads) {
    if (!inline_) thread_ = std::thread([this] { Loop(); });
  }
  ~HostStream() override {
    if (inline_) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  Status CopyH2D(loom_buffer* dst, uint64_t dst_offset, const void* src, uint64_t bytes) override {
    uint8_t* to = Address(dst, dst_offset);
    return Push("copy_h2d", [=] { memcpy(to, src, bytes); });
  }
  Status CopyD2H(void* dst, loom_buffer* src, uint64_t src_offset, uint64_t bytes) override {
    const uint8_t* from = Address(src, src_offset);
    return Push("copy_d2h", [=] { memcpy(dst, from, bytes); });
  }
  Status CopyD2D(loom_buffer* dst, uint64_t dst_offset, loom_buffer* src, uint64_t src_offset,
                 uint64_t bytes) override {
    uint8_t* to = Address(dst, dst_offset);
    const uint8_t* from = Address(src, src_offset);
    return Push("copy_d2d", [=] { memcpy(to, from, bytes); });
  }
  Status Fill(loom_buffer* dst, uint64_t offset, uint64_t bytes, uint8_t value) override {
    uint8_t* to = Address(dst, offset);
    return Push("fill", [=] { memset(to, value, bytes); });
  }
  Status HostCallback(loom_host_fn fn, void* user) override {
    return Push("host callback", [=] { fn(user); });
  }
  Status Launch(loom_kernel* kernel, const LaunchSpec& spec) override {
    std::shared_ptr<ResolvedLaunch> launch = Resolve(kernel, spec);
    WorkerPool* pool = pool_;
    uint32_t threads = max_threads_;
    return Push("kernel launch '" + kernel->name + "'", [=] { RunGrid(*pool, *launch, threads, OwnBuffers(*launch)); });
  }
  Status RecordEvent(loom_event* event) override {
    std::shared_ptr<EventState> state = static_cast<HostEvent*>(event)->state;
    uint64_t record;
    {
      std::lock_guard<std::mutex> lock(state->mu);
      record = ++state->recorded;
    }
    return Push(
        "event record",
        [=] {
          {
            std::lock_guard<std::mutex> lock(state->mu);
            if (record > state->reached) {
              state->reached = record;
              state->when = std::chrono::steady_clock::now();
            }
          }
          state->cv.notify_all();
        },
        /*always=*/true);
  }
  Status WaitEvent(loom_event* event) override {
    std::shared_ptr<EventState> state = static_cast<HostEvent*>(event)->state;
    uint64_t target;
    {
      std::lock_guard<std::mutex> lock(state->mu);
      target = state->recorded;
    }
    if (target == 0) return Ok();  // never recorded: nothing to wait for
    return Push(
        "cross-stream wait",
        [=] {
          std::unique_lock<std::mutex> lock(state->mu);
          state->cv.wait(lock, [&] { return state->reached >= target; });
        },
        /*always=*/true);
  }
  Status LaunchGraph(loom_graph_exec* exec) override {
    std::shared_ptr<const Plan> plan = static_cast<HostExec*>(exec)->Current();
    WorkerPool* pool = pool_;
    if (inline_) {
      uint32_t threads = max_threads_;
      return Push("graph launch", [=] { RunPlanInline(*pool, plan, threads); });
    }
    return Push("graph launch", [=] { RunPlan(*pool, plan); });
  }
  Status Synchronize() override {
    std::unique_lock<std::mutex> lock(mu_);
    uint64_t target = enqueued_;
    done_cv_.wait(lock, [&] { return completed_ >= target; });
    return Ok();
  }
  // Runs the graph's nodes in id order (ids are a topological order) on the calling thread,
  // once the work enqueued before has completed. exec_mu_ keeps the stream's thread from
  // starting operations enqueued meanwhile, so they run after it, as stream order requires.
  Status RunGraph(loom_graph_exec* exec, uint32_t max_threads, const loom_graph_binding* bindings,
                  uint32_t binding_count) override {
    // An inline stream's operations complete before Push returns, and exec_mu_ waits out one
    // running meanwhile: only a threaded stream has queued work to wait for.
    if (!inline_) Synchronize();
    std::lock_guard<std::mutex> exclusive(exec_mu_);
    bool fault = false;
    {
      std::lock_guard<std::mutex> lock(state_mu);  // one lock for both flags
      fault = fault_next_operation;
      fault_next_operation = false;
      if (failed) return Ok();  // api.cc reports the sticky failure
    }
    std::shared_ptr<const Plan> plan = static_cast<HostExec*>(exec)->Current();
    RunPlanInline(*pool_, plan, max_threads, bindings, binding_count);
    if (fault) Fail("graph run failed on the device: injected fault");
    return Ok();
  }
  Status EndCapture(bool invalidated, std::vector<Node> nodes, loom_graph** out) override {
    if (invalidated) return Ok();
    auto* graph = new HostGraph();
    graph->device = device;
    graph->nodes = std::move(nodes);
    *out = graph;
    return Ok();
  }

 private:
  struct Op {
    std::string what;
    std::function<void()> run;
    bool always = false;  // runs even on a failed stream (event records and waits), so that
                          // other streams waiting on this one never hang
    bool fault = false;   // injected: fails the stream as a device fault would
    uint64_t sequence = 0;
  };

  Status Push(std::string what, std::function<void()> run, bool always = false) {
    if (inline_) return RunInline(what, run, always);
    Op op;
    op.what = std::move(what);
    op.run = std::move(run);
    op.always = always;
    op.fault = TakeNextOperationFault();
    {
      std::lock_guard<std::mutex> lock(mu_);
      op.sequence = ++enqueued_;
      queue_.push_back(std::move(op));
    }
    cv_.notify_one();
    return Ok();
  }

  // An inline stream's Push: the operation runs now, in stream order (exec_mu_ serializes it
  // with RunGraph and other enqueuing threads), with the same failure rules as Loop.
  Status RunInline(const std::string& what, const std::function<void()>& run, bool always) {
    bool fault = TakeNextOperationFault();
    std::lock_guard<std::mutex> exclusive(exec_mu_);
    uint64_t sequence;
    {
      std::lock_guard<std::mutex> lock(mu_);
      sequence = ++enqueued_;
    }
    if (always || !Failed(nullptr)) {
      run();
      if (fault) {
        Fail(what + " (stream operation #" + std::to_string(sequence) +
             ") failed on the device: injected fault");
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      completed_ = sequence;
    }
    done_cv_.notify_all();
    return Ok();
  }

  void Loop() {
    for (;;) {
      Op op;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and drained
        op = std::move(queue_.front());
        queue_.pop_front();
      }
      if (op.always || !Failed(nullptr)) {
        std::lock_guard<std::mutex> exclusive(exec_mu_);
        op.run();
        if (op.fault) {
          Fail(op.what + " (stream operation #" + std::to_string(op.sequence) +
               ") failed on the device: injected fault");
        }
      }
      op.run = nullptr;  // release what the operation held before it counts as done
      {
        std::lock_guard<std::mutex> lock(mu_);
        completed_ = op.sequence;
      }
      done_cv_.notify_all();
    }
  }

  WorkerPool* pool_;
  bool inline_ = false;
  uint32_t max_threads_ = 0;
  std::mutex exec_mu_;  // held while an operation runs, by the stream's thread or RunGraph
  std::mutex mu_;
  std::condition_variable cv_;       // work arrived or stop
  std::condition_variable done_cv_;  // an operation completed
  std::deque<Op> queue_;
  uint64_t enqueued_ = 0;
  uint64_t completed_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

// ---- device

class HostDevice : public loom_device {
 public:
  explicit HostDevice(uint32_t workers) : pool_(workers) {
    props.struct_size = sizeof(props);
    props.backend = LOOM_BACKEND_HOST;
    props.index = 0;
    snprintf(props.name, sizeof(props.name), "%s", CpuName().c_str());
    snprintf(props.target, sizeof(props.target), "%s", DetectTarget().c_str());
    long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
    props.total_memory = pages > 0 && page_size > 0 ? uint64_t(pages) * uint64_t(page_size) : 0;
    props.compute_units = workers;
    props.max_threads_per_block = 1024;
    props.max_block_dim[0] = 1024;
    props.max_block_dim[1] = 1024;
    props.max_block_dim[2] = 64;
    props.max_grid_dim[0] = 0x7fffffff;
    props.max_grid_dim[1] = 65535;
    props.max_grid_dim[2] = 65535;
    props.max_shared_memory_per_block = 1 << 20;
    props.max_shared_memory_per_block_optin = 1 << 20;
    props.warp_size = 1;
  }

  Status CreateBuffer(loom_memory_kind kind, uint64_t bytes, loom_buffer** out) override {
    // More than the machine has cannot succeed: refuse it before the allocator (which might
    // overcommit and fail only when the pages are touched).
    void* data =
        props.total_memory == 0 || bytes <= props.total_memory ? AllocBuffer(bytes) : nullptr;
    if (data == nullptr) {
      return Errorf(LOOM_ERR_OUT_OF_MEMORY,
                    "buffer_create: cannot allocate %llu bytes of host memory",
                    static_cast<unsigned long long>(bytes));
    }
    auto* buffer = new HostBuffer();
    buffer->device = this;
    buffer->kind = kind;
    buffer->size = bytes;
    buffer->data = static_cast<uint8_t*>(data);
    buffer->host = kind == LOOM_MEMORY_SHARED ? data : nullptr;
    // A discrete device's fresh memory is not zeroed, as a GPU's is not: code that reads what it
    // never wrote sees NaNs and -1s here rather than passing by luck.
    if (discrete && kind == LOOM_MEMORY_DEVICE) memset(data, 0xff, bytes);
    *out = buffer;
    return Ok();
  }

  Status WrapHostMemory(void* data, uint64_t bytes, loom_buffer** out) override {
    auto* buffer = new HostBuffer();
    buffer->device = this;
    buffer->kind = LOOM_MEMORY_SHARED;
    buffer->size = bytes;
    buffer->data = static_cast<uint8_t*>(data);
    buffer->host = data;
    buffer->wrapped = true;
    *out = buffer;
    return Ok();
  }

  Status CreateStream(loom_stream** out) override {
    loom_stream_params params = {};
    params.struct_size = sizeof(params);
    return CreateStreamWith(params, out);
  }
  Status CreateStreamWith(const loom_stream_params& params, loom_stream** out) override {
    try {
      auto* stream =
          new HostStream(&pool_, (params.flags & LOOM_STREAM_INLINE) != 0, params.max_threads);
      stream->device = this;
      *out = stream;
      return Ok();
    } catch (const std::exception& e) {
      return Errorf(LOOM_ERR_INTERNAL, "stream_create: cannot start the stream's thread: %s",
                    e.what());
    }
  }

  Status CreateEvent(loom_event** out) override {
    auto* event = new HostEvent();
    event->device = this;
    *out = event;
    return Ok();
  }

  Status LoadModule(const loom_module_load_params& params, loom_module** out) override {
    std::unique_ptr<HostModule> module(new HostModule());
    module->device = this;
    if (params.format == LOOM_MODULE_HOST_SHARED_OBJECT) {
      module->name = params.name ? params.name : params.path;
      Status status = LoadSharedObject(params.path, module.get());
      if (!status.ok()) return status;
    } else if (params.format == LOOM_MODULE_HOST_STATIC) {
      module->name = params.name;
      std::lock_guard<std::mutex> lock(StaticModulesMutex());
      auto it = StaticModules().find(params.name);
      if (it == StaticModules().end()) {
        return Errorf(LOOM_ERR_NOT_FOUND, "module_load: no static host module '%s' is registered",
                      params.name);
      }
      if (!CodeRunsOn(it->second.target, props.target)) {
        return Errorf(LOOM_ERR_TARGET_MISMATCH,
                      "module_load: static host module '%s' was registered for target '%s', but "
                      "the device's target is '%s'",
                      params.name, it->second.target.c_str(), props.target);
      }
      module->entries = it->second.entries;
    } else {
      return Errorf(LOOM_ERR_NOT_SUPPORTED,
                    "module_load '%s': the host backend loads only host modules (format %d)",
                    params.name ? params.name : "<unnamed>", static_cast<int>(params.format));
    }
    *out = module.release();
    return Ok();
  }

  Status CreateGraph(loom_graph** out) override {
    auto* graph = new HostGraph();
    graph->device = this;
    *out = graph;
    return Ok();
  }

 private:
  Status LoadSharedObject(const char* path, HostModule* module) {
    typedef const loom_host_kernel_entry* (*EntriesFn)(uint32_t*, const char**);
    module->library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (module->library == nullptr) {
      const char* why = dlerror();
      return Errorf(LOOM_ERR_NOT_FOUND, "module_load: cannot load host module '%s': %s", path,
                    why ? why : "unknown error");
    }
    auto entries_fn =
        reinterpret_cast<EntriesFn>(dlsym(module->library, "loom_host_module_entries"));
    if (entries_fn == nullptr) {
      return Errorf(LOOM_ERR_NOT_FOUND,
                    "module_load: host module '%s' does not export loom_host_module_entries", path);
    }
    uint32_t count = 0;
    const char* target = nullptr;
    const loom_host_kernel_entry* entries = entries_fn(&count, &target);
    if (target == nullptr || !CodeRunsOn(target, props.target)) {
      return Errorf(LOOM_ERR_TARGET_MISMATCH,
                    "module_load: host module '%s' was compiled for target '%s', but the "
                    "device's target is '%s'",
                    path, target ? target : "(none)", props.target);
    }
    if (count > 0 && entries == nullptr) {
      return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                    "module_load: host module '%s' lists %u kernels but no entries", path, count);
    }
    for (uint32_t i = 0; i < count; i++) {
      if (entries[i].name == nullptr || entries[i].fn == nullptr) {
        return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                      "module_load: host module '%s' has an entry %u without name or function",
                      path, i);
      }
      module->entries[entries[i].name] = entries[i].fn;
    }
    return Ok();
  }

  // Declared last: destroyed first, after every stream of the device is gone.
  WorkerPool pool_;
};

Status DeviceCount(int32_t* count) {
  *count = 1;
  return Ok();
}

Status OpenDevice(const loom_device_open_params& params, loom_device** out) {
  if (params.index != 0) {
    return Errorf(LOOM_ERR_NO_DEVICE, "loom_device_open: no host device with index %d (there is 1)",
                  params.index);
  }
  uint32_t workers = params.worker_threads;
  if (workers == 0) workers = std::max(1u, std::thread::hardware_concurrency());
  if (workers > kMaxWorkers) {
    return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                  "loom_device_open: worker_threads %u exceeds the host backend's limit of %u",
                  workers, kMaxWorkers);
  }
  try {
    auto* device = new HostDevice(workers);
    device->discrete = (params.flags & LOOM_DEVICE_DISCRETE) != 0;
    *out = device;
    return Ok();
  } catch (const std::exception& e) {
    return Errorf(LOOM_ERR_INTERNAL, "loom_device_open: cannot start the worker pool: %s",
                  e.what());
  }
}

}  // namespace host

extern const BackendInfo kHostBackend = {LOOM_BACKEND_HOST, "host", host::DeviceCount,
                                         host::OpenDevice};

bool CodeRunsOn(const std::string& code, const std::string& device) {
  if (code == device) return true;
  const std::string prefix = "host-x86_64-v";
  if (code.size() != prefix.size() + 1 || device.size() != prefix.size() + 1) return false;
  if (code.compare(0, prefix.size(), prefix) != 0) return false;
  if (device.compare(0, prefix.size(), prefix) != 0) return false;
  char code_level = code.back(), device_level = device.back();
  return code_level >= '1' && code_level <= '4' && device_level >= '1' && device_level <= '4' &&
         code_level <= device_level;
}

Status RegisterHostModule(const char* module_name, const char* target,
                          const loom_host_kernel_entry* entries, uint32_t count) {
  if (module_name == nullptr || *module_name == '\0' || target == nullptr) {
    return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                  "host_module_register: module name or target is NULL or empty");
  }
  if (count > 0 && entries == nullptr) {
    return Errorf(LOOM_ERR_INVALID_ARGUMENT, "host_module_register: entries is NULL");
  }
  host::StaticModule module;
  module.target = target;
  for (uint32_t i = 0; i < count; i++) {
    if (entries[i].name == nullptr || entries[i].fn == nullptr) {
      return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                    "host_module_register: entry %u has no name or function", i);
    }
    module.entries[entries[i].name] = entries[i].fn;
  }
  std::lock_guard<std::mutex> lock(host::StaticModulesMutex());
  host::StaticModules()[module_name] = std::move(module);
  return Ok();
}

}  // namespace loom
