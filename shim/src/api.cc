// api.cc: the C ABI of loom.h. Checks arguments, copies versioned parameter structs, keeps error
// messages on the handles, and implements what every backend shares: sticky stream failure,
// fault injection and the bookkeeping of stream capture. The backends only do the work.
#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "backend.h"

namespace loom {
namespace api {

using Capture = loom_stream::Capture;

loom_status Report(ErrorSlot& slot, const Status& status) {
  if (!status.ok()) slot.Set(status.message);
  return status.code;
}

// For calls that involve a stream but are not named after it (event record, graph launch): the
// message goes on both handles, so it is found whichever the caller reads.
loom_status ReportBoth(ErrorSlot& stream, ErrorSlot& device, const Status& status) {
  if (!status.ok()) device.Set(status.message);
  return Report(stream, status);
}

loom_status ReportBuffer(const Status& status, char* err, size_t capacity) {
  if (err != nullptr && capacity > 0) {
    size_t n = std::min(status.message.size(), capacity - 1);
    memcpy(err, status.message.data(), n);
    err[n] = '\0';
  }
  return status.code;
}

Status Invalid(const char* what) { return Errorf(LOOM_ERR_INVALID_ARGUMENT, "%s", what); }

// Reads a versioned parameter struct: at most the caller's struct_size bytes; the fields an older
// caller does not know stay zero.
template <typename T>
bool ReadStruct(const T* in, T* out) {
  *out = T();
  if (in == nullptr || in->struct_size < sizeof(uint32_t)) return false;
  memcpy(static_cast<void*>(out), in, std::min<size_t>(in->struct_size, sizeof(T)));
  return true;
}

Status CheckRange(const loom_buffer* buffer, const loom_device* device, uint64_t offset,
                  uint64_t bytes, const std::string& what) {
  if (buffer == nullptr) {
    return Errorf(LOOM_ERR_INVALID_ARGUMENT, "%s: buffer is NULL", what.c_str());
  }
  if (buffer->device != device) {
    return Errorf(LOOM_ERR_INVALID_ARGUMENT, "%s: the buffer belongs to another device",
                  what.c_str());
  }
  if (offset > buffer->size || bytes > buffer->size - offset) {
    return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                  "%s: range at offset %" PRIu64 " of %" PRIu64
                  " bytes is outside the buffer of %" PRIu64 " bytes",
                  what.c_str(), offset, bytes, buffer->size);
  }
  return Ok();
}

Status CheckCopy(const loom_device* device, const loom_buffer* dst, uint64_t dst_offset,
                 const loom_buffer* src, uint64_t src_offset, uint64_t bytes,
                 const std::string& what) {
  Status status = CheckRange(dst, device, dst_offset, bytes, what + " destination");
  if (status.ok()) status = CheckRange(src, device, src_offset, bytes, what + " source");
  if (status.ok() && dst == src && bytes > 0 && dst_offset < src_offset + bytes &&
      src_offset < dst_offset + bytes) {
    status = Errorf(LOOM_ERR_INVALID_ARGUMENT,
                    "%s: source and destination ranges overlap in the same buffer", what.c_str());
  }
  return status;
}

Status CheckHostPointer(const void* pointer, uint64_t bytes, const char* what) {
  if (pointer == nullptr && bytes > 0) {
    return Errorf(LOOM_ERR_INVALID_ARGUMENT, "%s: host pointer is NULL", what);
  }
  return Ok();
}

// Copies and checks a launch against the device's limits.
Status ReadLaunch(const loom_device* device, const loom_kernel* kernel,
                  const loom_launch_params* params, LaunchSpec* out) {
  if (kernel == nullptr) return Invalid("kernel launch: kernel is NULL");
  if (kernel->module->device != device) {
    return Invalid("kernel launch: the kernel belongs to another device");
  }
  loom_launch_params p;
  if (!ReadStruct(params, &p)) {
    return Invalid("kernel launch: params is NULL or its struct_size is smaller than 4");
  }
  const loom_device_props& props = device->props;
  const char* axis = "xyz";
  uint64_t threads = 1;
  for (int i = 0; i < 3; i++) {
    if (p.grid[i] == 0 || p.grid[i] > props.max_grid_dim[i]) {
      return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                    "kernel launch '%s': grid %c = %u is outside [1, %u]", kernel->name.c_str(),
                    axis[i], p.grid[i], props.max_grid_dim[i]);
    }
    if (p.block[i] == 0 || p.block[i] > props.max_block_dim[i]) {
      return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                    "kernel launch '%s': block %c = %u is outside [1, %u]", kernel->name.c_str(),
                    axis[i], p.block[i], props.max_block_dim[i]);
    }
    threads *= p.block[i];
  }
  if (threads > props.max_threads_per_block) {
    return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                  "kernel launch '%s': %" PRIu64 " threads per block exceed the device's %u",
                  kernel->name.c_str(), threads, props.max_threads_per_block);
  }
  if (p.shared_bytes > props.max_shared_memory_per_block_optin) {
    return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                  "kernel launch '%s': %u bytes of shared memory exceed the device's %u "
                  "(its limit with opt-in)",
                  kernel->name.c_str(), p.shared_bytes, props.max_shared_memory_per_block_optin);
  }
  if (p.buffer_count > 0 && (p.buffers == nullptr || p.buffer_offsets == nullptr)) {
    return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                  "kernel launch '%s': buffer_count is %u but buffers or buffer_offsets is NULL",
                  kernel->name.c_str(), p.buffer_count);
  }
  for (uint32_t i = 0; i < p.buffer_count; i++) {
    Status status = CheckRange(p.buffers[i], device, p.buffer_offsets[i], 0,
                               "kernel launch '" + kernel->name + "' binding " + std::to_string(i));
    if (!status.ok()) return status;
  }
  if (p.scalar_bytes > 0 && p.scalars == nullptr) {
    return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                  "kernel launch '%s': scalar_bytes is %u but scalars is NULL",
                  kernel->name.c_str(), p.scalar_bytes);
  }
  if (p.violation != nullptr) {
    Status status = CheckRange(p.violation, device, p.violation_offset, 4,
                               "kernel launch '" + kernel->name + "' violation word");
    if (!status.ok()) return status;
    if (p.violation_offset % 4 != 0) {
      return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                    "kernel launch '%s': violation_offset %" PRIu64 " is not a multiple of 4",
                    kernel->name.c_str(), p.violation_offset);
    }
  }
  for (int i = 0; i < 3; i++) {
    out->grid[i] = p.grid[i];
    out->block[i] = p.block[i];
  }
  out->shared_bytes = p.shared_bytes;
  out->buffers.assign(p.buffers, p.buffers + p.buffer_count);
  out->offsets.assign(p.buffer_offsets, p.buffer_offsets + p.buffer_count);
  const uint8_t* scalars = static_cast<const uint8_t*>(p.scalars);
  out->scalars.assign(scalars, scalars + p.scalar_bytes);
  out->violation = p.violation;
  out->violation_offset = p.violation_offset;
  return Ok();
}

// Runs a stream operation through the shared rules: refused while a capture is invalidated or
// once the stream failed; recorded (capture_node != nullptr) or refused with the capture
// invalidated (capture_node == nullptr) while capturing; otherwise enqueued on the backend.
// A no-op (zero bytes) passes the same checks but is neither recorded nor enqueued.
Status RunOp(loom_stream* stream, const std::string& what, Node* capture_node, bool noop,
             const std::function<Status()>& enqueue) {
  bool natively_captured = false;
  {
    std::lock_guard<std::mutex> lock(stream->state_mu);
    if (stream->capture == Capture::kInvalidated) {
      return Errorf(LOOM_ERR_CAPTURE,
                    "%s: the stream's capture was invalidated (%s); end it with "
                    "loom_stream_end_capture",
                    what.c_str(), stream->capture_error.c_str());
    }
    if (stream->capture == Capture::kActive) {
      if (capture_node == nullptr) {
        stream->capture = Capture::kInvalidated;
        stream->capture_error = what + " is not allowed during stream capture";
        return Errorf(LOOM_ERR_CAPTURE, "%s; the capture is invalidated",
                      stream->capture_error.c_str());
      }
      if (noop) return Ok();
      capture_node->deps.clear();
      if (!stream->captured.empty()) {
        capture_node->deps.push_back(static_cast<uint32_t>(stream->captured.size() - 1));
      }
      stream->captured.push_back(*capture_node);
      if (!stream->device->native_capture) return Ok();
      natively_captured = true;
    } else if (stream->failed) {
      return Errorf(LOOM_ERR_DEVICE, "%s refused: the stream failed earlier: %s", what.c_str(),
                    stream->failure.c_str());
    }
    if (noop) return Ok();
  }
  Status status = enqueue();
  if (!status.ok() && natively_captured) {
    std::lock_guard<std::mutex> lock(stream->state_mu);
    if (stream->capture == Capture::kActive) {
      stream->captured.pop_back();
      stream->capture = Capture::kInvalidated;
      stream->capture_error = status.message;
    }
  }
  return status;
}

Status ReadDeps(const loom_graph* graph, const uint32_t* deps, uint32_t count,
                std::vector<uint32_t>* out) {
  if (count > 0 && deps == nullptr) {
    return Errorf(LOOM_ERR_INVALID_ARGUMENT, "graph node: deps is NULL but dep_count is %u", count);
  }
  for (uint32_t i = 0; i < count; i++) {
    if (deps[i] >= graph->nodes.size()) {
      return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                    "graph node: dependency %u does not exist (the graph has %zu nodes)", deps[i],
                    graph->nodes.size());
    }
    if (std::find(out->begin(), out->end(), deps[i]) != out->end()) {
      return Errorf(LOOM_ERR_INVALID_ARGUMENT, "graph node: dependency %u is listed twice",
                    deps[i]);
    }
    out->push_back(deps[i]);
  }
  return Ok();
}

loom_status AddNode(loom_graph* graph, Node node, uint32_t* node_out) {
  uint32_t id = static_cast<uint32_t>(graph->nodes.size());
  graph->nodes.push_back(std::move(node));
  Status status = graph->NodeAdded(id);
  if (!status.ok()) {
    graph->nodes.pop_back();
    return Report(graph->device->error, status);
  }
  if (node_out != nullptr) *node_out = id;
  return LOOM_OK;
}

// LOOM_INJECT_FAULT applies to the first stream the process creates.
std::atomic<bool> env_fault_checked{false};

void ApplyEnvironmentFault(loom_stream* stream) {
  if (env_fault_checked.exchange(true)) return;
  const char* value = getenv("LOOM_INJECT_FAULT");
  if (value == nullptr || *value == '\0') return;
  std::lock_guard<std::mutex> lock(stream->state_mu);
  if (strcmp(value, "next-operation") == 0) {
    stream->fault_next_operation = true;
  } else if (strcmp(value, "next-synchronize") == 0) {
    stream->fault_next_synchronize = true;
  } else {
    fprintf(stderr,
            "loom: ignoring LOOM_INJECT_FAULT=%s (expected next-operation or next-synchronize)\n",
            value);
  }
}

Status OpenDevice(const loom_device_open_params* params, loom_device** out) {
  if (out == nullptr) return Invalid("loom_device_open: out is NULL");
  *out = nullptr;
  loom_device_open_params p;
  if (!ReadStruct(params, &p)) {
    return Invalid("loom_device_open: params is NULL or its struct_size is smaller than 4");
  }
  const BackendInfo* info = FindBackend(RawEnum(p.backend));
  if (info == nullptr) {
    return Errorf(LOOM_ERR_INVALID_ARGUMENT, "loom_device_open: unknown backend %d",
                  RawEnum(p.backend));
  }
  if (p.index < 0) {
    return Errorf(LOOM_ERR_NO_DEVICE, "loom_device_open: no %s device with index %d", info->name,
                  p.index);
  }
  if ((p.flags & ~uint32_t(LOOM_DEVICE_DISCRETE)) != 0) {
    return Errorf(LOOM_ERR_INVALID_ARGUMENT, "loom_device_open: unknown flags 0x%x",
                  p.flags & ~uint32_t(LOOM_DEVICE_DISCRETE));
  }
  return info->open_device(p, out);
}

}  // namespace api
}  // namespace loom

using loom::Errorf;
using loom::Node;
using loom::NodeKind;
using loom::Status;
using loom::api::Report;
using loom::api::ReportBoth;

extern "C" {

// ---------------------------------------------------------------- library

uint32_t loom_abi_version(void) { return LOOM_ABI_VERSION; }

const char* loom_status_string(loom_status status) {
  switch (loom::RawEnum(status)) {
    case LOOM_OK:
      return "ok";
    case LOOM_ERR_INVALID_ARGUMENT:
      return "invalid argument";
    case LOOM_ERR_OUT_OF_MEMORY:
      return "out of memory";
    case LOOM_ERR_NO_DRIVER:
      return "no driver";
    case LOOM_ERR_NO_DEVICE:
      return "no device";
    case LOOM_ERR_NOT_SUPPORTED:
      return "not supported";
    case LOOM_ERR_TARGET_MISMATCH:
      return "target mismatch";
    case LOOM_ERR_NOT_FOUND:
      return "not found";
    case LOOM_ERR_DEVICE:
      return "device failure";
    case LOOM_ERR_CAPTURE:
      return "stream capture error";
    case LOOM_ERR_COMPILE:
      return "compilation failed";
    case LOOM_ERR_INTERNAL:
      return "internal error";
  }
  return "unknown status";
}

// ---------------------------------------------------------------- devices

loom_status loom_device_count(loom_backend backend, int32_t* count, char* err,
                              size_t err_capacity) {
  Status status;
  const loom::BackendInfo* info = loom::FindBackend(loom::RawEnum(backend));
  if (count == nullptr) {
    status = loom::api::Invalid("loom_device_count: count is NULL");
  } else if (info == nullptr) {
    *count = 0;
    status = Errorf(LOOM_ERR_INVALID_ARGUMENT, "loom_device_count: unknown backend %d",
                    loom::RawEnum(backend));
  } else {
    *count = 0;
    status = info->device_count(count);
  }
  return loom::api::ReportBuffer(status, err, err_capacity);
}

loom_status loom_device_open(const loom_device_open_params* params, loom_device** out, char* err,
                             size_t err_capacity) {
  return loom::api::ReportBuffer(loom::api::OpenDevice(params, out), err, err_capacity);
}

void loom_device_destroy(loom_device* device) { delete device; }

loom_status loom_device_get_props(loom_device* device, loom_device_props* out) {
  if (device == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  if (out == nullptr || out->struct_size < sizeof(uint32_t)) {
    return Report(device->error, loom::api::Invalid("loom_device_get_props: out is NULL or its "
                                                    "struct_size is smaller than 4"));
  }
  loom_device_props props = device->props;
  props.struct_size = out->struct_size;
  memcpy(static_cast<void*>(out), &props, std::min<size_t>(out->struct_size, sizeof(props)));
  return LOOM_OK;
}

size_t loom_device_last_error(loom_device* device, char* buf, size_t capacity) {
  if (device == nullptr) {
    if (buf != nullptr && capacity > 0) buf[0] = '\0';
    return 0;
  }
  return device->error.Get(buf, capacity);
}

// ---------------------------------------------------------------- memory

loom_status loom_buffer_create(loom_device* device, loom_memory_kind kind, uint64_t bytes,
                               loom_buffer** out) {
  if (device == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  if (out == nullptr)
    return Report(device->error, loom::api::Invalid("buffer_create: out is NULL"));
  *out = nullptr;
  int32_t raw_kind = loom::RawEnum(kind);
  if (raw_kind != LOOM_MEMORY_DEVICE && raw_kind != LOOM_MEMORY_SHARED) {
    return Report(device->error, Errorf(LOOM_ERR_INVALID_ARGUMENT,
                                        "buffer_create: unknown memory kind %d", raw_kind));
  }
  if (bytes == 0) {
    return Report(device->error, loom::api::Invalid("buffer_create: size must not be 0"));
  }
  return Report(device->error, device->CreateBuffer(kind, bytes, out));
}

loom_status loom_buffer_wrap_host(loom_device* device, void* data, uint64_t bytes,
                                  loom_buffer** out) {
  if (device == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  if (out == nullptr)
    return Report(device->error, loom::api::Invalid("buffer_wrap_host: out is NULL"));
  *out = nullptr;
  if (data == nullptr) {
    return Report(device->error, loom::api::Invalid("buffer_wrap_host: data is NULL"));
  }
  if (bytes == 0) {
    return Report(device->error, loom::api::Invalid("buffer_wrap_host: size must not be 0"));
  }
  if (device->discrete) {
    return Report(device->error,
                  Errorf(LOOM_ERR_NOT_SUPPORTED,
                         "buffer_wrap_host: the device's memory is discrete (LOOM_DEVICE_DISCRETE): "
                         "kernels cannot read host memory in place; upload it to a device buffer"));
  }
  return Report(device->error, device->WrapHostMemory(data, bytes, out));
}

void loom_buffer_destroy(loom_buffer* buffer) { delete buffer; }

uint64_t loom_buffer_size(const loom_buffer* buffer) { return buffer ? buffer->size : 0; }

loom_memory_kind loom_buffer_kind(const loom_buffer* buffer) {
  return buffer ? buffer->kind : LOOM_MEMORY_DEVICE;
}

void* loom_buffer_host_pointer(loom_buffer* buffer) { return buffer ? buffer->host : nullptr; }

// ---------------------------------------------------------------- streams

loom_status loom_stream_create(loom_device* device, loom_stream** out) {
  if (device == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  if (out == nullptr)
    return Report(device->error, loom::api::Invalid("stream_create: out is NULL"));
  *out = nullptr;
  loom_status status = Report(device->error, device->CreateStream(out));
  if (status == LOOM_OK) loom::api::ApplyEnvironmentFault(*out);
  return status;
}

loom_status loom_stream_create_with(loom_device* device, const loom_stream_params* params,
                                    loom_stream** out) {
  if (params == nullptr) return loom_stream_create(device, out);
  if (device == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  if (out == nullptr)
    return Report(device->error, loom::api::Invalid("stream_create_with: out is NULL"));
  *out = nullptr;
  loom_stream_params p;
  if (!loom::api::ReadStruct(params, &p)) {
    return Report(device->error,
                  loom::api::Invalid("stream_create_with: params->struct_size is too small"));
  }
  if ((p.flags & ~uint32_t{LOOM_STREAM_INLINE}) != 0) {
    return Report(device->error, Errorf(LOOM_ERR_INVALID_ARGUMENT,
                                        "stream_create_with: unknown flags 0x%x", p.flags));
  }
  loom_status status = Report(device->error, device->CreateStreamWith(p, out));
  if (status == LOOM_OK) loom::api::ApplyEnvironmentFault(*out);
  return status;
}

void loom_stream_destroy(loom_stream* stream) { delete stream; }

loom_status loom_stream_synchronize(loom_stream* stream) {
  if (stream == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  {
    std::lock_guard<std::mutex> lock(stream->state_mu);
    if (stream->capture == loom_stream::Capture::kActive) {
      stream->capture = loom_stream::Capture::kInvalidated;
      stream->capture_error = "synchronize is not allowed during stream capture";
      return Report(stream->error, Errorf(LOOM_ERR_CAPTURE, "%s; the capture is invalidated",
                                          stream->capture_error.c_str()));
    }
    if (stream->capture == loom_stream::Capture::kInvalidated) {
      return Report(stream->error,
                    Errorf(LOOM_ERR_CAPTURE,
                           "synchronize: the stream's capture was invalidated (%s); end it with "
                           "loom_stream_end_capture",
                           stream->capture_error.c_str()));
    }
  }
  Status status = stream->Synchronize();
  bool inject = false;
  {
    std::lock_guard<std::mutex> lock(stream->state_mu);
    std::swap(inject, stream->fault_next_synchronize);
  }
  if (inject) stream->Fail("synchronize: the device reported a failure (injected fault)");
  std::string failure;
  if (stream->Failed(&failure)) {
    return Report(stream->error, Errorf(LOOM_ERR_DEVICE, "synchronize: %s", failure.c_str()));
  }
  return Report(stream->error, status);
}

size_t loom_stream_last_error(loom_stream* stream, char* buf, size_t capacity) {
  if (stream == nullptr) {
    if (buf != nullptr && capacity > 0) buf[0] = '\0';
    return 0;
  }
  return stream->error.Get(buf, capacity);
}

loom_status loom_stream_copy_h2d(loom_stream* stream, loom_buffer* dst, uint64_t dst_offset,
                                 const void* src, uint64_t bytes) {
  if (stream == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  Status status =
      loom::api::CheckRange(dst, stream->device, dst_offset, bytes, "copy_h2d destination");
  if (status.ok()) status = loom::api::CheckHostPointer(src, bytes, "copy_h2d source");
  if (status.ok()) {
    status = loom::api::RunOp(stream, "copy_h2d", nullptr, bytes == 0,
                              [&] { return stream->CopyH2D(dst, dst_offset, src, bytes); });
  }
  return Report(stream->error, status);
}

loom_status loom_stream_copy_d2h(loom_stream* stream, void* dst, loom_buffer* src,
                                 uint64_t src_offset, uint64_t bytes) {
  if (stream == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  Status status = loom::api::CheckRange(src, stream->device, src_offset, bytes, "copy_d2h source");
  if (status.ok()) status = loom::api::CheckHostPointer(dst, bytes, "copy_d2h destination");
  if (status.ok()) {
    status = loom::api::RunOp(stream, "copy_d2h", nullptr, bytes == 0,
                              [&] { return stream->CopyD2H(dst, src, src_offset, bytes); });
  }
  return Report(stream->error, status);
}

loom_status loom_stream_copy_d2d(loom_stream* stream, loom_buffer* dst, uint64_t dst_offset,
                                 loom_buffer* src, uint64_t src_offset, uint64_t bytes) {
  if (stream == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  Status status =
      loom::api::CheckCopy(stream->device, dst, dst_offset, src, src_offset, bytes, "copy_d2d");
  if (status.ok()) {
    Node node;
    node.kind = NodeKind::kCopy;
    node.dst = dst;
    node.dst_offset = dst_offset;
    node.src = src;
    node.src_offset = src_offset;
    node.bytes = bytes;
    status = loom::api::RunOp(stream, "copy_d2d", &node, bytes == 0, [&] {
      return stream->CopyD2D(dst, dst_offset, src, src_offset, bytes);
    });
  }
  return Report(stream->error, status);
}

loom_status loom_stream_fill(loom_stream* stream, loom_buffer* dst, uint64_t offset, uint64_t bytes,
                             uint8_t value) {
  if (stream == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  Status status = loom::api::CheckRange(dst, stream->device, offset, bytes, "fill");
  if (status.ok()) {
    Node node;
    node.kind = NodeKind::kFill;
    node.dst = dst;
    node.dst_offset = offset;
    node.bytes = bytes;
    node.value = value;
    status = loom::api::RunOp(stream, "fill", &node, bytes == 0,
                              [&] { return stream->Fill(dst, offset, bytes, value); });
  }
  return Report(stream->error, status);
}

loom_status loom_stream_host_callback(loom_stream* stream, loom_host_fn fn, void* user) {
  if (stream == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  if (fn == nullptr) return Report(stream->error, loom::api::Invalid("host_callback: fn is NULL"));
  return Report(stream->error, loom::api::RunOp(stream, "host callback", nullptr, false,
                                                [&] { return stream->HostCallback(fn, user); }));
}

// ---------------------------------------------------------------- events

loom_status loom_event_create(loom_device* device, loom_event** out) {
  if (device == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  if (out == nullptr) return Report(device->error, loom::api::Invalid("event_create: out is NULL"));
  *out = nullptr;
  return Report(device->error, device->CreateEvent(out));
}

void loom_event_destroy(loom_event* event) { delete event; }

loom_status loom_event_record(loom_event* event, loom_stream* stream) {
  if (event == nullptr) {
    if (stream != nullptr) Report(stream->error, loom::api::Invalid("event_record: event is NULL"));
    return LOOM_ERR_INVALID_ARGUMENT;
  }
  if (stream == nullptr) {
    return Report(event->device->error, loom::api::Invalid("event_record: stream is NULL"));
  }
  Status status;
  if (event->device != stream->device) {
    status =
        loom::api::Invalid("event_record: the event and the stream belong to different devices");
  } else {
    status = loom::api::RunOp(stream, "event record", nullptr, false,
                              [&] { return stream->RecordEvent(event); });
  }
  return ReportBoth(stream->error, event->device->error, status);
}

loom_status loom_stream_wait_event(loom_stream* stream, loom_event* event) {
  if (stream == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  Status status;
  if (event == nullptr) {
    status = loom::api::Invalid("stream_wait_event: event is NULL");
  } else if (event->device != stream->device) {
    status = loom::api::Invalid(
        "stream_wait_event: the event and the stream belong to different devices");
  } else {
    status = loom::api::RunOp(stream, "cross-stream wait (stream_wait_event)", nullptr, false,
                              [&] { return stream->WaitEvent(event); });
  }
  return Report(stream->error, status);
}

loom_status loom_event_synchronize(loom_event* event) {
  if (event == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  return Report(event->device->error, event->Synchronize());
}

loom_status loom_event_query(loom_event* event, int32_t* done) {
  if (event == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  if (done == nullptr)
    return Report(event->device->error, loom::api::Invalid("event_query: done is NULL"));
  bool reached = false;
  Status status = event->Query(&reached);
  *done = reached ? 1 : 0;
  return Report(event->device->error, status);
}

loom_status loom_event_elapsed_ms(loom_event* start, loom_event* end, float* ms) {
  if (start == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  Status status;
  if (end == nullptr || ms == nullptr) {
    status = loom::api::Invalid("event_elapsed_ms: end or ms is NULL");
  } else if (end->device != start->device) {
    status = loom::api::Invalid("event_elapsed_ms: the events belong to different devices");
  } else {
    status = start->ElapsedMs(end, ms);
  }
  return Report(start->device->error, status);
}

// ---------------------------------------------------------------- modules and kernels

loom_status loom_module_load(loom_device* device, const loom_module_load_params* params,
                             loom_module** out) {
  if (device == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  if (out == nullptr) return Report(device->error, loom::api::Invalid("module_load: out is NULL"));
  *out = nullptr;
  loom_module_load_params p;
  if (!loom::api::ReadStruct(params, &p)) {
    return Report(device->error, loom::api::Invalid("module_load: params is NULL or its "
                                                    "struct_size is smaller than 4"));
  }
  const char* name = p.name ? p.name : (p.path ? p.path : "<unnamed>");
  Status status;
  int32_t format = loom::RawEnum(p.format);
  switch (format) {
    case LOOM_MODULE_HOST_SHARED_OBJECT:
      if (p.path == nullptr) status = loom::api::Invalid("module_load: path is NULL");
      break;
    case LOOM_MODULE_HOST_STATIC:
      if (p.name == nullptr) status = loom::api::Invalid("module_load: name is NULL");
      break;
    case LOOM_MODULE_CUDA_SOURCE:
    case LOOM_MODULE_CUDA_PTX:
    case LOOM_MODULE_CUDA_CUBIN:
      if (p.data == nullptr || p.size == 0) {
        status =
            Errorf(LOOM_ERR_INVALID_ARGUMENT, "module_load '%s': data is NULL or size is 0", name);
      }
      break;
    default:
      status =
          Errorf(LOOM_ERR_INVALID_ARGUMENT, "module_load '%s': unknown format %d", name, format);
  }
  if (status.ok()) {
    if (p.target == nullptr) {
      if (format != LOOM_MODULE_CUDA_SOURCE) {
        status = Errorf(LOOM_ERR_INVALID_ARGUMENT, "module_load '%s': target is NULL", name);
      }
    } else if (!loom::CodeRunsOn(p.target, device->props.target)) {
      status = Errorf(LOOM_ERR_TARGET_MISMATCH,
                      "module_load '%s': compiled for target '%s', but the device's target is "
                      "'%s'",
                      name, p.target, device->props.target);
    }
  }
  if (status.ok()) status = device->LoadModule(p, out);
  return Report(device->error, status);
}

void loom_module_destroy(loom_module* module) { delete module; }

loom_status loom_module_get_kernel(loom_module* module, const char* name, loom_kernel** out) {
  if (module == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  if (name == nullptr || out == nullptr) {
    return Report(module->device->error,
                  loom::api::Invalid("module_get_kernel: name or out is NULL"));
  }
  *out = nullptr;
  return Report(module->device->error, module->GetKernel(name, out));
}

loom_status loom_host_module_register(const char* module_name, const char* target,
                                      const loom_host_kernel_entry* entries, uint32_t count) {
  return loom::RegisterHostModule(module_name, target, entries, count).code;
}

// ---------------------------------------------------------------- code compiled without a device

struct loom_code {
  std::string image;
  std::string log;
};

loom_status loom_code_compile(const loom_code_compile_params* params, loom_code** out, char* err,
                              size_t err_capacity) {
  using loom::api::ReportBuffer;
  if (out == nullptr) return ReportBuffer(loom::api::Invalid("code_compile: out is NULL"), err, err_capacity);
  *out = nullptr;
  loom_code_compile_params p;
  if (!loom::api::ReadStruct(params, &p)) {
    return ReportBuffer(loom::api::Invalid("code_compile: params is NULL or its struct_size is "
                                           "smaller than 4"),
                        err, err_capacity);
  }
  const char* name = p.name != nullptr ? p.name : "<unnamed>";
  const loom::BackendInfo* info = loom::FindBackend(loom::RawEnum(p.backend));
  Status status;
  if (info == nullptr) {
    status = Errorf(LOOM_ERR_INVALID_ARGUMENT, "code_compile '%s': unknown backend %d", name,
                    loom::RawEnum(p.backend));
  } else if (info->compile == nullptr) {
    status = Errorf(LOOM_ERR_NOT_SUPPORTED,
                    "code_compile '%s': the %s backend compiles no code (its kernels are built "
                    "with a C compiler)",
                    name, info->name);
  } else if (p.target == nullptr || p.target[0] == '\0') {
    status = Errorf(LOOM_ERR_INVALID_ARGUMENT, "code_compile '%s': target is NULL or empty", name);
  } else if (p.source == nullptr || p.source_size == 0) {
    status = Errorf(LOOM_ERR_INVALID_ARGUMENT, "code_compile '%s': source is NULL or empty", name);
  }
  if (!status.ok()) return ReportBuffer(status, err, err_capacity);
  loom::CompileSpec spec;
  spec.format = loom::RawEnum(p.format);
  spec.target = p.target;
  spec.name = name;
  spec.source.assign(p.source, p.source_size);
  std::unique_ptr<loom_code> code(new loom_code());
  status = info->compile(spec, &code->image, &code->log);
  if (status.ok() || status.code == LOOM_ERR_COMPILE) {
    if (!status.ok()) code->image.clear();
    *out = code.release();
  }
  return ReportBuffer(status, err, err_capacity);
}

const void* loom_code_data(const loom_code* code) {
  return code == nullptr || code->image.empty() ? nullptr : code->image.data();
}

uint64_t loom_code_size(const loom_code* code) { return code == nullptr ? 0 : code->image.size(); }

const char* loom_code_log(const loom_code* code) { return code == nullptr ? "" : code->log.c_str(); }

void loom_code_destroy(loom_code* code) { delete code; }

loom_status loom_code_compiler(loom_backend backend, char* out, size_t capacity, char* err,
                               size_t err_capacity) {
  using loom::api::ReportBuffer;
  if (out != nullptr && capacity > 0) out[0] = '\0';
  const loom::BackendInfo* info = loom::FindBackend(loom::RawEnum(backend));
  Status status;
  std::string version;
  if (info == nullptr) {
    status = Errorf(LOOM_ERR_INVALID_ARGUMENT, "code_compiler: unknown backend %d",
                    loom::RawEnum(backend));
  } else if (info->compiler == nullptr) {
    status = Errorf(LOOM_ERR_NOT_SUPPORTED, "code_compiler: the %s backend compiles no code",
                    info->name);
  } else {
    status = info->compiler(&version);
  }
  if (status.ok() && out != nullptr && capacity > 0) {
    size_t n = std::min(version.size(), capacity - 1);
    memcpy(out, version.data(), n);
    out[n] = '\0';
  }
  return ReportBuffer(status, err, err_capacity);
}

loom_status loom_kernel_launch(loom_stream* stream, loom_kernel* kernel,
                               const loom_launch_params* params) {
  if (stream == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  Node node;
  node.kind = NodeKind::kKernel;
  node.kernel = kernel;
  Status status = loom::api::ReadLaunch(stream->device, kernel, params, &node.launch);
  if (status.ok()) {
    status = loom::api::RunOp(stream, loom::DescribeNode(node), &node, false,
                              [&] { return stream->Launch(kernel, node.launch); });
  }
  return Report(stream->error, status);
}

// ---------------------------------------------------------------- graphs

loom_status loom_graph_create(loom_device* device, loom_graph** out) {
  if (device == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  if (out == nullptr) return Report(device->error, loom::api::Invalid("graph_create: out is NULL"));
  *out = nullptr;
  return Report(device->error, device->CreateGraph(out));
}

void loom_graph_destroy(loom_graph* graph) { delete graph; }

uint32_t loom_graph_node_count(const loom_graph* graph) {
  return graph ? static_cast<uint32_t>(graph->nodes.size()) : 0;
}

loom_status loom_graph_add_kernel_node(loom_graph* graph, loom_kernel* kernel,
                                       const loom_launch_params* params, const uint32_t* deps,
                                       uint32_t dep_count, uint32_t* node_out) {
  if (graph == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  Node node;
  node.kind = NodeKind::kKernel;
  node.kernel = kernel;
  Status status = loom::api::ReadDeps(graph, deps, dep_count, &node.deps);
  if (status.ok()) status = loom::api::ReadLaunch(graph->device, kernel, params, &node.launch);
  if (!status.ok()) return Report(graph->device->error, status);
  return loom::api::AddNode(graph, std::move(node), node_out);
}

loom_status loom_graph_add_copy_node(loom_graph* graph, loom_buffer* dst, uint64_t dst_offset,
                                     loom_buffer* src, uint64_t src_offset, uint64_t bytes,
                                     const uint32_t* deps, uint32_t dep_count, uint32_t* node_out) {
  if (graph == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  Node node;
  // A zero-byte copy does nothing, and is kept as a join point so node ids stay dense.
  node.kind = bytes == 0 ? NodeKind::kEmpty : NodeKind::kCopy;
  Status status = loom::api::ReadDeps(graph, deps, dep_count, &node.deps);
  if (status.ok()) {
    status = loom::api::CheckCopy(graph->device, dst, dst_offset, src, src_offset, bytes,
                                  "graph copy node");
  }
  if (!status.ok()) return Report(graph->device->error, status);
  if (bytes > 0) {
    node.dst = dst;
    node.dst_offset = dst_offset;
    node.src = src;
    node.src_offset = src_offset;
    node.bytes = bytes;
  }
  return loom::api::AddNode(graph, std::move(node), node_out);
}

loom_status loom_graph_add_fill_node(loom_graph* graph, loom_buffer* dst, uint64_t offset,
                                     uint64_t bytes, uint8_t value, const uint32_t* deps,
                                     uint32_t dep_count, uint32_t* node_out) {
  if (graph == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  Node node;
  node.kind = bytes == 0 ? NodeKind::kEmpty : NodeKind::kFill;
  Status status = loom::api::ReadDeps(graph, deps, dep_count, &node.deps);
  if (status.ok())
    status = loom::api::CheckRange(dst, graph->device, offset, bytes, "graph fill node");
  if (!status.ok()) return Report(graph->device->error, status);
  if (bytes > 0) {
    node.dst = dst;
    node.dst_offset = offset;
    node.bytes = bytes;
    node.value = value;
  }
  return loom::api::AddNode(graph, std::move(node), node_out);
}

loom_status loom_graph_add_empty_node(loom_graph* graph, const uint32_t* deps, uint32_t dep_count,
                                      uint32_t* node_out) {
  if (graph == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  Node node;
  node.kind = NodeKind::kEmpty;
  Status status = loom::api::ReadDeps(graph, deps, dep_count, &node.deps);
  if (!status.ok()) return Report(graph->device->error, status);
  return loom::api::AddNode(graph, std::move(node), node_out);
}

loom_status loom_stream_begin_capture(loom_stream* stream) {
  if (stream == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  {
    std::lock_guard<std::mutex> lock(stream->state_mu);
    if (stream->capture != loom_stream::Capture::kNone) {
      return Report(stream->error,
                    Errorf(LOOM_ERR_CAPTURE, "begin_capture: the stream is already capturing"));
    }
    if (stream->failed) {
      return Report(stream->error,
                    Errorf(LOOM_ERR_DEVICE, "begin_capture refused: the stream failed earlier: %s",
                           stream->failure.c_str()));
    }
  }
  Status status = stream->BeginCapture();
  if (!status.ok()) return Report(stream->error, status);
  std::lock_guard<std::mutex> lock(stream->state_mu);
  stream->capture = loom_stream::Capture::kActive;
  stream->capture_error.clear();
  stream->captured.clear();
  return LOOM_OK;
}

loom_status loom_stream_end_capture(loom_stream* stream, loom_graph** out) {
  if (stream == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  if (out != nullptr) *out = nullptr;
  bool invalidated;
  std::string reason;
  std::vector<Node> nodes;
  {
    std::lock_guard<std::mutex> lock(stream->state_mu);
    if (stream->capture == loom_stream::Capture::kNone) {
      return Report(stream->error,
                    Errorf(LOOM_ERR_CAPTURE, "end_capture: the stream is not capturing"));
    }
    // A NULL out ends (and discards) the capture too, so the stream is usable again.
    if (out == nullptr && stream->capture == loom_stream::Capture::kActive) {
      stream->capture = loom_stream::Capture::kInvalidated;
      stream->capture_error = "end_capture was called with out == NULL";
    }
    invalidated = stream->capture == loom_stream::Capture::kInvalidated;
    reason = stream->capture_error;
    nodes.swap(stream->captured);
    stream->capture = loom_stream::Capture::kNone;
    stream->capture_error.clear();
  }
  loom_graph* graph = nullptr;
  Status status = stream->EndCapture(invalidated, std::move(nodes), &graph);
  if (invalidated) {
    delete graph;
    if (out == nullptr)
      return Report(stream->error, loom::api::Invalid("end_capture: out is NULL"));
    return Report(
        stream->error,
        Errorf(LOOM_ERR_CAPTURE, "end_capture: the capture was invalidated: %s", reason.c_str()));
  }
  if (!status.ok()) {
    delete graph;
    return Report(stream->error, status);
  }
  *out = graph;
  return LOOM_OK;
}

int32_t loom_stream_is_capturing(loom_stream* stream) {
  return stream != nullptr && stream->Capturing() ? 1 : 0;
}

loom_status loom_graph_instantiate(loom_graph* graph, loom_graph_exec** out) {
  if (graph == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  if (out == nullptr)
    return Report(graph->device->error, loom::api::Invalid("graph_instantiate: out is NULL"));
  *out = nullptr;
  return Report(graph->device->error, graph->Instantiate(out));
}

void loom_graph_exec_destroy(loom_graph_exec* exec) { delete exec; }

loom_status loom_graph_exec_launch(loom_graph_exec* exec, loom_stream* stream) {
  if (exec == nullptr) {
    if (stream != nullptr)
      Report(stream->error, loom::api::Invalid("graph_exec_launch: exec is NULL"));
    return LOOM_ERR_INVALID_ARGUMENT;
  }
  if (stream == nullptr) {
    return Report(exec->device->error, loom::api::Invalid("graph_exec_launch: stream is NULL"));
  }
  Status status;
  if (exec->device != stream->device) {
    status = loom::api::Invalid(
        "graph_exec_launch: the graph and the stream belong to different devices");
  } else {
    status = loom::api::RunOp(stream, "graph launch", nullptr, false,
                              [&] { return stream->LaunchGraph(exec); });
  }
  return ReportBoth(stream->error, exec->device->error, status);
}

// CheckRunBindings checks loom_graph_run_params.bindings: each names a kernel node's existing
// buffer binding with memory behind it, in (node, index) order, each pair once.
static Status CheckRunBindings(const loom_graph_exec* exec, const loom_graph_binding* bindings,
                               uint32_t count) {
  for (uint32_t i = 0; i < count; i++) {
    const loom_graph_binding& b = bindings[i];
    if (b.node >= exec->nodes.size()) {
      return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                    "graph_exec_run: bindings[%u] names node %u; the graph has %zu nodes", i,
                    b.node, exec->nodes.size());
    }
    const loom::Node& node = exec->nodes[b.node];
    if (node.kind != NodeKind::kKernel) {
      return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                    "graph_exec_run: bindings[%u] names node %u, which is a %s, not a kernel node",
                    i, b.node, loom::DescribeNode(node).c_str());
    }
    if (b.index >= node.launch.buffers.size()) {
      return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                    "graph_exec_run: bindings[%u] names buffer %u of node %u, which binds %zu", i,
                    b.index, b.node, node.launch.buffers.size());
    }
    if (b.address == nullptr || b.bytes == 0) {
      return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                    "graph_exec_run: bindings[%u] (node %u, buffer %u) has no memory (address NULL "
                    "or bytes 0)",
                    i, b.node, b.index);
    }
    if (i > 0 && (b.node < bindings[i - 1].node ||
                  (b.node == bindings[i - 1].node && b.index <= bindings[i - 1].index))) {
      return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                    "graph_exec_run: bindings[%u] (node %u, buffer %u) is out of order or repeated: "
                    "bindings are sorted by node, then buffer, each once",
                    i, b.node, b.index);
    }
  }
  return loom::Ok();
}

loom_status loom_graph_exec_run(loom_graph_exec* exec, loom_stream* stream,
                                const loom_graph_run_params* params) {
  if (exec == nullptr) {
    if (stream != nullptr) Report(stream->error, loom::api::Invalid("graph_exec_run: exec is NULL"));
    return LOOM_ERR_INVALID_ARGUMENT;
  }
  if (stream == nullptr) {
    return Report(exec->device->error, loom::api::Invalid("graph_exec_run: stream is NULL"));
  }
  loom_graph_run_params run = {};
  Status status;
  if (params != nullptr && !loom::api::ReadStruct(params, &run)) {
    status = loom::api::Invalid("graph_exec_run: params->struct_size is too small");
  } else if (exec->device != stream->device) {
    status = loom::api::Invalid(
        "graph_exec_run: the graph and the stream belong to different devices");
  } else if (run.binding_count > 0 && run.bindings == nullptr) {
    status = loom::api::Invalid("graph_exec_run: params->bindings is NULL but binding_count is not 0");
  } else if (run.binding_count > 0 && exec->device->discrete) {
    status = Errorf(LOOM_ERR_NOT_SUPPORTED,
                    "graph_exec_run: the device's memory is discrete (LOOM_DEVICE_DISCRETE): kernels "
                    "cannot read or write caller memory in place; copy it through device buffers");
  } else {
    status = CheckRunBindings(exec, run.bindings, run.binding_count);
  }
  if (status.ok()) {
    // Not capturable: it waits for the stream, as synchronize does.
    status = loom::api::RunOp(stream, "graph run", nullptr, false, [&] {
      return stream->RunGraph(exec, run.max_threads, run.bindings, run.binding_count);
    });
  }
  if (status.ok()) {
    std::string failure;
    if (stream->Failed(&failure)) status = Errorf(LOOM_ERR_DEVICE, "graph run: %s", failure.c_str());
  }
  return ReportBoth(stream->error, exec->device->error, status);
}

loom_status loom_graph_exec_update_kernel_node(loom_graph_exec* exec, uint32_t node,
                                               const loom_launch_params* params) {
  if (exec == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  Status status;
  loom::LaunchSpec launch;
  if (node >= exec->nodes.size()) {
    status = Errorf(LOOM_ERR_INVALID_ARGUMENT,
                    "graph_exec_update_kernel_node: node %u does not exist (the graph has %zu "
                    "nodes)",
                    node, exec->nodes.size());
  } else if (exec->nodes[node].kind != NodeKind::kKernel) {
    status = Errorf(LOOM_ERR_INVALID_ARGUMENT,
                    "graph_exec_update_kernel_node: node %u is a %s, not a kernel node", node,
                    loom::DescribeNode(exec->nodes[node]).c_str());
  } else {
    status = loom::api::ReadLaunch(exec->device, exec->nodes[node].kernel, params, &launch);
    if (status.ok()) status = exec->UpdateKernelNode(node, launch);
    if (status.ok()) exec->nodes[node].launch = std::move(launch);
  }
  return Report(exec->device->error, status);
}

// ---------------------------------------------------------------- testing

loom_status loom_stream_inject_fault(loom_stream* stream, loom_fault fault) {
  if (stream == nullptr) return LOOM_ERR_INVALID_ARGUMENT;
  std::lock_guard<std::mutex> lock(stream->state_mu);
  switch (loom::RawEnum(fault)) {
    case LOOM_FAULT_NONE:
      stream->fault_next_operation = false;
      stream->fault_next_synchronize = false;
      return LOOM_OK;
    case LOOM_FAULT_NEXT_OPERATION:
      stream->fault_next_operation = true;
      return LOOM_OK;
    case LOOM_FAULT_NEXT_SYNCHRONIZE:
      stream->fault_next_synchronize = true;
      return LOOM_OK;
  }
  stream->error.Set("inject_fault: unknown fault " + std::to_string(loom::RawEnum(fault)));
  return LOOM_ERR_INVALID_ARGUMENT;
}

}  // extern "C"
