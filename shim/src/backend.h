// backend.h: the shim's internal backend interface and the state every backend shares.
//
// The opaque handles of loom.h are abstract classes here; a backend (host_backend.cc,
// cuda_backend.cc) derives from them and registers one BackendInfo in registry.cc. Everything
// that does not depend on a backend lives in api.cc: argument checks, struct_size handling,
// error messages, sticky stream failure, fault injection and stream-capture bookkeeping.
//
// All shim sources must compile together as one translation unit (go/native includes them for
// plain cgo builds), so each .cc keeps its private names in its own namespace.
#ifndef LOOM_SHIM_SRC_BACKEND_H_
#define LOOM_SHIM_SRC_BACKEND_H_

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "loom/loom.h"

namespace loom {

// The outcome of an internal call: a status and, when it failed, the message for the handle.
struct Status {
  loom_status code = LOOM_OK;
  std::string message;
  bool ok() const { return code == LOOM_OK; }
};

inline Status Ok() { return Status(); }
Status Errorf(loom_status code, const char* format, ...) __attribute__((format(printf, 2, 3)));

// The last error message of a handle. Calls on one handle may come from several threads.
class ErrorSlot {
 public:
  void Set(const std::string& message);
  // Copies the message into buf (NUL-terminated, truncated to capacity); returns its length.
  size_t Get(char* buf, size_t capacity) const;

 private:
  mutable std::mutex mu_;
  std::string message_;
};

// A kernel launch, copied out of the caller's loom_launch_params (and arrays) and checked.
struct LaunchSpec {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t shared_bytes = 0;
  std::vector<loom_buffer*> buffers;
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> scalars;
  loom_buffer* violation = nullptr;  // nullptr: the backend's private, discarded word
  uint64_t violation_offset = 0;
};

enum class NodeKind { kKernel, kCopy, kFill, kEmpty };

// One node of a graph, explicit or captured. Dependencies always have smaller ids.
struct Node {
  NodeKind kind = NodeKind::kEmpty;
  std::vector<uint32_t> deps;
  loom_kernel* kernel = nullptr;  // kKernel
  LaunchSpec launch;              // kKernel
  loom_buffer* dst = nullptr;     // kCopy, kFill
  uint64_t dst_offset = 0;
  loom_buffer* src = nullptr;  // kCopy
  uint64_t src_offset = 0;
  uint64_t bytes = 0;  // kCopy, kFill
  uint8_t value = 0;   // kFill
};

// Describes an operation for error messages ("kernel launch 'add'", "fill", ...).
std::string DescribeNode(const Node& node);

}  // namespace loom

// ---------------------------------------------------------------- handles

struct loom_device {
  virtual ~loom_device() = default;

  loom::ErrorSlot error;
  loom_device_props props = {};  // filled in completely by the backend when it opens the device
  // True when the backend records stream captures itself (CUDA); api.cc then keeps its own node
  // list only for bookkeeping and still hands every captured operation to the backend.
  bool native_capture = false;
  // True when the host cannot address the device's memory in place (LOOM_DEVICE_DISCRETE on the
  // host backend): api.cc refuses wrapped host memory and rebound caller memory on it.
  bool discrete = false;

  virtual loom::Status CreateBuffer(loom_memory_kind kind, uint64_t bytes, loom_buffer** out) = 0;
  // A shared buffer over caller memory (loom_buffer_wrap_host; arguments checked by api.cc).
  virtual loom::Status WrapHostMemory(void* data, uint64_t bytes, loom_buffer** out) {
    (void)data;
    (void)bytes;
    (void)out;
    return loom::Errorf(LOOM_ERR_NOT_SUPPORTED,
                        "buffer_wrap_host: this backend's kernels cannot read host memory in "
                        "place (host backend only)");
  }
  virtual loom::Status CreateStream(loom_stream** out) = 0;
  // params checked by api.cc (known flags only). The default ignores them.
  virtual loom::Status CreateStreamWith(const loom_stream_params& params, loom_stream** out) {
    (void)params;
    return CreateStream(out);
  }
  virtual loom::Status CreateEvent(loom_event** out) = 0;
  // params were checked by api.cc: format, target (one that runs on the device, see
  // CodeRunsOn, or NULL for CUDA source), and the path, name or data the format needs.
  virtual loom::Status LoadModule(const loom_module_load_params& params, loom_module** out) = 0;
  virtual loom::Status CreateGraph(loom_graph** out) = 0;
};

struct loom_buffer {
  virtual ~loom_buffer() = default;
  loom_device* device = nullptr;
  loom_memory_kind kind = LOOM_MEMORY_DEVICE;
  uint64_t size = 0;
  void* host = nullptr;  // the host pointer of shared memory; nullptr for device-local memory
};

struct loom_event {
  virtual ~loom_event() = default;
  loom_device* device = nullptr;
  virtual loom::Status Synchronize() = 0;
  virtual loom::Status Query(bool* done) = 0;
  virtual loom::Status ElapsedMs(loom_event* end, float* ms) = 0;
};

struct loom_kernel {
  virtual ~loom_kernel() = default;
  loom_module* module = nullptr;
  std::string name;
};

struct loom_module {
  virtual ~loom_module() = default;
  loom_device* device = nullptr;
  std::string name;  // for messages

  // Looks up a kernel once; later calls return the same handle.
  loom::Status GetKernel(const std::string& kernel_name, loom_kernel** out);

 protected:
  virtual loom::Status FindKernel(const std::string& kernel_name,
                                  std::unique_ptr<loom_kernel>* out) = 0;

 private:
  std::mutex kernels_mu_;
  std::map<std::string, std::unique_ptr<loom_kernel>> kernels_;
};

// Like CUDA graphs, a graph (unlike a stream) is not safe to modify from several threads at once.
struct loom_graph {
  virtual ~loom_graph() = default;
  loom_device* device = nullptr;
  std::vector<loom::Node> nodes;  // checked by api.cc; ids are indices

  // Called after api.cc appended nodes[id], so a backend can mirror it in its own graph object.
  // On failure the node is removed again.
  virtual loom::Status NodeAdded(uint32_t id) {
    (void)id;
    return loom::Ok();
  }
  virtual loom::Status Instantiate(loom_graph_exec** out) = 0;
};

struct loom_graph_exec {
  virtual ~loom_graph_exec() = default;
  loom_device* device = nullptr;
  std::vector<loom::Node> nodes;  // the graph's nodes at instantiation; updates are written back

  // Replaces the launch of kernel node `node` (checked by api.cc) for later launches.
  virtual loom::Status UpdateKernelNode(uint32_t node, const loom::LaunchSpec& launch) = 0;
};

struct loom_stream {
  virtual ~loom_stream() = default;
  loom_device* device = nullptr;
  loom::ErrorSlot error;

  // Enqueue operations. api.cc has checked the arguments, sticky failure and capture state.
  virtual loom::Status CopyH2D(loom_buffer* dst, uint64_t dst_offset, const void* src,
                               uint64_t bytes) = 0;
  virtual loom::Status CopyD2H(void* dst, loom_buffer* src, uint64_t src_offset,
                               uint64_t bytes) = 0;
  virtual loom::Status CopyD2D(loom_buffer* dst, uint64_t dst_offset, loom_buffer* src,
                               uint64_t src_offset, uint64_t bytes) = 0;
  virtual loom::Status Fill(loom_buffer* dst, uint64_t offset, uint64_t bytes, uint8_t value) = 0;
  virtual loom::Status HostCallback(loom_host_fn fn, void* user) = 0;
  virtual loom::Status Launch(loom_kernel* kernel, const loom::LaunchSpec& launch) = 0;
  virtual loom::Status RecordEvent(loom_event* event) = 0;
  virtual loom::Status WaitEvent(loom_event* event) = 0;
  virtual loom::Status LaunchGraph(loom_graph_exec* exec) = 0;
  // Waits for everything enqueued so far. A device failure found here is made sticky with Fail.
  virtual loom::Status Synchronize() = 0;
  // Runs exec to completion after the work enqueued before it (loom_graph_exec_run), with the
  // run's rebound buffers (checked by api.cc: kernel nodes, valid indexes, sorted by node then
  // index). The default launches it and synchronizes, and rebinds nothing; the host backend
  // runs it on the calling thread.
  virtual loom::Status RunGraph(loom_graph_exec* exec, uint32_t max_threads,
                                const loom_graph_binding* bindings, uint32_t binding_count) {
    (void)max_threads;
    (void)bindings;
    if (binding_count > 0) {
      return loom::Errorf(LOOM_ERR_NOT_SUPPORTED,
                          "graph run: this backend cannot rebind buffers for one run (host "
                          "backend only)");
    }
    loom::Status status = LaunchGraph(exec);
    if (!status.ok()) return status;
    return Synchronize();
  }
  // Native capture only (device->native_capture): start and stop the backend's own recording.
  virtual loom::Status BeginCapture() { return loom::Ok(); }
  // Ends a capture. `invalidated`: api.cc already knows the capture failed; the backend only
  // leaves capture mode and returns *out = nullptr. Otherwise it builds a graph from `nodes`
  // (the operations in stream order, each depending on the one before).
  virtual loom::Status EndCapture(bool invalidated, std::vector<loom::Node> nodes,
                                  loom_graph** out) = 0;

  // ---- state shared with api.cc (guarded by state_mu)

  // Makes the stream failed (sticky); the first failure's message is kept.
  void Fail(const std::string& message);
  // True (and the failure message) once the stream failed.
  bool Failed(std::string* message);
  // Consumes a pending LOOM_FAULT_NEXT_OPERATION; backends call it for each operation they
  // enqueue for execution (not for captured ones).
  bool TakeNextOperationFault();
  // True while a capture is active or invalidated (until end_capture).
  bool Capturing();

  enum class Capture { kNone, kActive, kInvalidated };
  std::mutex state_mu;
  bool failed = false;
  std::string failure;
  bool fault_next_operation = false;
  bool fault_next_synchronize = false;
  Capture capture = Capture::kNone;
  std::string capture_error;         // why the capture was invalidated
  std::vector<loom::Node> captured;  // operations recorded so far, in stream order
};

namespace loom {

// ---------------------------------------------------------------- backends

// What loom_code_compile asks of a backend, checked: a known output format, a target and a name.
struct CompileSpec {
  int32_t format = 0;  // loom_module_format
  std::string target;
  std::string name;
  std::string source;
};

// A backend: enumerates and opens devices, and may compile code without one. Each backend file
// defines one (extern const, so that it links) and registry.cc lists it.
struct BackendInfo {
  loom_backend id;
  const char* name;
  Status (*device_count)(int32_t* count);
  // params: checked struct_size, backend and index >= 0.
  Status (*open_device)(const loom_device_open_params& params, loom_device** out);
  // The image of spec.source for spec.target and the compiler's log (its warnings, or its
  // errors with LOOM_ERR_COMPILE); nullptr when the backend compiles nothing.
  Status (*compile)(const CompileSpec& spec, std::string* image, std::string* log) = nullptr;
  // The compiler's name and version; nullptr when the backend compiles nothing.
  Status (*compiler)(std::string* version) = nullptr;
};

// The registered backend with that loom_backend value, or nullptr.
const BackendInfo* FindBackend(int32_t id);

// Enum values arrive from C and Go callers as plain integers, possibly out of the enum's range;
// they are read as integers, never loaded as the enum type.
template <typename E>
int32_t RawEnum(const E& value) {
  static_assert(sizeof(E) == sizeof(int32_t), "loom.h enums are int-sized");
  int32_t raw;
  memcpy(&raw, &value, sizeof(raw));
  return raw;
}

// Whether code compiled for target `code` runs on a device whose target is `device`: the same
// target, or x86-64 host code for a lower micro-architecture level, since each level includes
// the ones below it (ahead-of-time kernels built for the x86-64-v3 baseline run on v4 CPUs).
// host_backend.cc.
bool CodeRunsOn(const std::string& code, const std::string& device);

// Process-wide table of ahead-of-time host kernels (host_backend.cc).
Status RegisterHostModule(const char* module_name, const char* target,
                          const loom_host_kernel_entry* entries, uint32_t count);

}  // namespace loom

#endif  // LOOM_SHIM_SRC_BACKEND_H_
