// common.cc: helpers shared by api.cc and the backends (messages, error slots, handle state).
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "backend.h"

namespace loom {

Status Errorf(loom_status code, const char* format, ...) {
  Status status;
  status.code = code;
  char buf[LOOM_ERROR_CAPACITY];
  va_list args;
  va_start(args, format);
  vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  status.message = buf;
  return status;
}

void ErrorSlot::Set(const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  message_.assign(message, 0, LOOM_ERROR_CAPACITY - 1);
}

size_t ErrorSlot::Get(char* buf, size_t capacity) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (buf != nullptr && capacity > 0) {
    size_t n = message_.size() < capacity - 1 ? message_.size() : capacity - 1;
    memcpy(buf, message_.data(), n);
    buf[n] = '\0';
  }
  return message_.size();
}

std::string DescribeNode(const Node& node) {
  switch (node.kind) {
    case NodeKind::kKernel:
      return "kernel launch '" + (node.kernel ? node.kernel->name : std::string("?")) + "'";
    case NodeKind::kCopy:
      return "copy";
    case NodeKind::kFill:
      return "fill";
    case NodeKind::kEmpty:
      return "empty node";
  }
  return "operation";
}

}  // namespace loom

loom::Status loom_module::GetKernel(const std::string& kernel_name, loom_kernel** out) {
  std::lock_guard<std::mutex> lock(kernels_mu_);
  auto it = kernels_.find(kernel_name);
  if (it == kernels_.end()) {
    std::unique_ptr<loom_kernel> kernel;
    loom::Status status = FindKernel(kernel_name, &kernel);
    if (!status.ok()) return status;
    kernel->module = this;
    kernel->name = kernel_name;
    it = kernels_.emplace(kernel_name, std::move(kernel)).first;
  }
  *out = it->second.get();
  return loom::Ok();
}

void loom_stream::Fail(const std::string& message) {
  std::lock_guard<std::mutex> lock(state_mu);
  if (!failed) {
    failed = true;
    failure = message;
  }
}

bool loom_stream::Failed(std::string* message) {
  std::lock_guard<std::mutex> lock(state_mu);
  if (failed && message != nullptr) *message = failure;
  return failed;
}

bool loom_stream::TakeNextOperationFault() {
  std::lock_guard<std::mutex> lock(state_mu);
  bool fault = fault_next_operation;
  fault_next_operation = false;
  return fault;
}

bool loom_stream::Capturing() {
  std::lock_guard<std::mutex> lock(state_mu);
  return capture != Capture::kNone;
}
