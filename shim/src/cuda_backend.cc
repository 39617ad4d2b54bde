// cuda_backend.cc: the NVIDIA backend, on the CUDA driver API and NVRTC, both loaded with dlopen
// at run time. The build needs no CUDA toolkit: the few types, constants and structs used are
// declared below as the driver API documents them (64-bit ABI; the _v2 entry points are the
// current ones where cuda.h maps a name to them).
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <mutex>
#include <string>
#include <vector>

#include "backend.h"

namespace loom {
namespace cuda {

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUkern_st* CUkernel;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphNode_st* CUgraphNode;
typedef struct CUgraphExec_st* CUgraphExec;

// CUresult values.
constexpr CUresult kSuccess = 0;
constexpr CUresult kErrorInvalidValue = 1;
constexpr CUresult kErrorOutOfMemory = 2;
constexpr CUresult kErrorNotInitialized = 3;
constexpr CUresult kErrorDeinitialized = 4;
constexpr CUresult kErrorNoDevice = 100;
constexpr CUresult kErrorInvalidDevice = 101;
constexpr CUresult kErrorInvalidImage = 200;
constexpr CUresult kErrorNoBinaryForGpu = 209;
constexpr CUresult kErrorInvalidPtx = 218;
constexpr CUresult kErrorUnsupportedPtxVersion = 222;
constexpr CUresult kErrorInvalidHandle = 400;
constexpr CUresult kErrorNotFound = 500;
constexpr CUresult kErrorNotReady = 600;
constexpr CUresult kErrorIllegalAddress = 700;
constexpr CUresult kErrorLaunchTimeout = 702;
constexpr CUresult kErrorHardwareStackError = 714;  // 714..719: faults in a kernel
constexpr CUresult kErrorLaunchFailed = 719;
constexpr CUresult kErrorAssert = 710;               // a device-side assert fired
constexpr CUresult kErrorEccUncorrectable = 214;     // uncorrectable ECC error in device memory
constexpr CUresult kErrorContained = 226;            // a contained error (NVLink / memory)
constexpr CUresult kErrorNotSupported = 801;
constexpr CUresult kErrorStreamCaptureUnsupported = 900;  // 900..908: stream capture errors
constexpr CUresult kErrorStreamCaptureWrongThread = 908;

// CUdevice_attribute values.
constexpr int kAttrMaxThreadsPerBlock = 1;
constexpr int kAttrMaxBlockDimX = 2;  // Y = 3, Z = 4
constexpr int kAttrMaxGridDimX = 5;   // Y = 6, Z = 7
constexpr int kAttrMaxSharedMemoryPerBlock = 8;
constexpr int kAttrMaxSharedMemoryPerBlockOptin = 97;
constexpr int kFuncAttrSharedSizeBytes = 1;           // static shared memory of a function
constexpr int kFuncAttrMaxDynamicSharedSizeBytes = 8;  // dynamic shared memory it may ask for
constexpr int kAttrWarpSize = 10;
constexpr int kAttrMultiprocessorCount = 16;
constexpr int kAttrCanMapHostMemory = 19;
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;

constexpr unsigned kStreamNonBlocking = 0x1;
constexpr unsigned kEventDefault = 0x0;  // with timing
constexpr unsigned kMemHostAllocPortable = 0x1;
constexpr unsigned kMemHostAllocDeviceMap = 0x2;
constexpr int kStreamCaptureModeRelaxed = 2;
constexpr int kMemoryTypeDevice = 2;
constexpr int kJitErrorLogBuffer = 5;
constexpr int kJitErrorLogBufferSizeBytes = 6;
void* const kLaunchParamEnd = reinterpret_cast<void*>(0x00);
void* const kLaunchParamBufferPointer = reinterpret_cast<void*>(0x01);
void* const kLaunchParamBufferSize = reinterpret_cast<void*>(0x02);

// CUDA_KERNEL_NODE_PARAMS_v2. The v1 entry points read only the prefix up to `extra`.
struct KernelNodeParams {
  CUfunction func;
  unsigned gridDimX, gridDimY, gridDimZ;
  unsigned blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  void** kernelParams;
  void** extra;
  CUkernel kern;
  CUcontext ctx;
};

// CUDA_MEMCPY3D (v2).
struct Memcpy3D {
  size_t srcXInBytes, srcY, srcZ, srcLOD;
  int srcMemoryType;
  const void* srcHost;
  CUdeviceptr srcDevice;
  void* srcArray;
  void* reserved0;
  size_t srcPitch, srcHeight;
  size_t dstXInBytes, dstY, dstZ, dstLOD;
  int dstMemoryType;
  void* dstHost;
  CUdeviceptr dstDevice;
  void* dstArray;
  void* reserved1;
  size_t dstPitch, dstHeight;
  size_t WidthInBytes, Height, Depth;
};

// CUDA_MEMSET_NODE_PARAMS.
struct MemsetNodeParams {
  CUdeviceptr dst;
  size_t pitch;
  unsigned value;
  unsigned elementSize;
  size_t width;
  size_t height;
};

// The driver entry points, resolved once per process.
struct Driver {
  std::string library_name;
  CUresult init_result = kErrorNotInitialized;
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxPushCurrent)(CUcontext);
  CUresult (*cuCtxPopCurrent)(CUcontext*);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemHostAlloc)(void**, size_t, unsigned);
  CUresult (*cuMemFreeHost)(void*);
  CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr*, void*, unsigned);
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuLaunchHostFunc)(CUstream, void (*)(void*), void*);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventQuery)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);
  CUresult (*cuModuleLoadDataEx)(CUmodule*, const void*, unsigned, int*, void**);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncGetAttribute)(int*, int, CUfunction);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
  CUresult (*cuStreamBeginCapture)(CUstream, int);
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*);
  CUresult (*cuGraphCreate)(CUgraph*, unsigned);
  CUresult (*cuGraphDestroy)(CUgraph);
  CUresult (*cuGraphAddKernelNode)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                   const KernelNodeParams*);
  CUresult (*cuGraphAddMemcpyNode)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                   const Memcpy3D*, CUcontext);
  CUresult (*cuGraphAddMemsetNode)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                   const MemsetNodeParams*, CUcontext);
  CUresult (*cuGraphAddEmptyNode)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t);
  CUresult (*cuGraphGetNodes)(CUgraph, CUgraphNode*, size_t*);
  CUresult (*cuGraphGetRootNodes)(CUgraph, CUgraphNode*, size_t*);
  // The edge-data form (CUDA 12.3+, the only one in CUDA 13 headers) where present, called with
  // no edge data; otherwise the original form.
  CUresult (*cuGraphNodeGetDependentNodes_v2)(CUgraphNode, CUgraphNode*, void*, size_t*);
  CUresult (*cuGraphNodeGetDependentNodes)(CUgraphNode, CUgraphNode*, size_t*);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphExecKernelNodeSetParams)(CUgraphExec, CUgraphNode, const KernelNodeParams*);

  CUresult DependentNodes(CUgraphNode node, CUgraphNode* out, size_t* count) const {
    if (cuGraphNodeGetDependentNodes_v2 != nullptr) {
      return cuGraphNodeGetDependentNodes_v2(node, out, nullptr, count);
    }
    return cuGraphNodeGetDependentNodes(node, out, count);
  }
};

// Binds the first of `names` that the library exports.
template <typename F>
bool Bind(void* library, F* slot, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (void* symbol = dlsym(library, name)) {
      *slot = reinterpret_cast<F>(symbol);
      return true;
    }
  }
  *slot = nullptr;
  return false;
}

Status LoadDriverOnce(Driver* d) {
  void* library = nullptr;
  for (const char* name : {"libcuda.so.1", "libcuda.so"}) {
    library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) {
      d->library_name = name;
      break;
    }
  }
  if (library == nullptr) {
    return Errorf(LOOM_ERR_NO_DRIVER, "no CUDA driver: tried libcuda.so.1, libcuda.so");
  }
  std::string missing;
  auto need = [&](auto* slot, std::initializer_list<const char*> names) {
    if (!Bind(library, slot, names))
      missing += std::string(missing.empty() ? "" : ", ") + *names.begin();
  };
  need(&d->cuGetErrorName, {"cuGetErrorName"});
  need(&d->cuGetErrorString, {"cuGetErrorString"});
  need(&d->cuInit, {"cuInit"});
  need(&d->cuDriverGetVersion, {"cuDriverGetVersion"});
  need(&d->cuDeviceGetCount, {"cuDeviceGetCount"});
  need(&d->cuDeviceGet, {"cuDeviceGet"});
  need(&d->cuDeviceGetName, {"cuDeviceGetName"});
  need(&d->cuDeviceGetAttribute, {"cuDeviceGetAttribute"});
  need(&d->cuDeviceTotalMem, {"cuDeviceTotalMem_v2"});
  need(&d->cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"});
  need(&d->cuDevicePrimaryCtxRelease,
       {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"});
  need(&d->cuCtxPushCurrent, {"cuCtxPushCurrent_v2"});
  need(&d->cuCtxPopCurrent, {"cuCtxPopCurrent_v2"});
  need(&d->cuMemAlloc, {"cuMemAlloc_v2"});
  need(&d->cuMemFree, {"cuMemFree_v2"});
  need(&d->cuMemHostAlloc, {"cuMemHostAlloc"});
  need(&d->cuMemFreeHost, {"cuMemFreeHost"});
  need(&d->cuMemHostGetDevicePointer, {"cuMemHostGetDevicePointer_v2"});
  need(&d->cuStreamCreate, {"cuStreamCreate"});
  need(&d->cuStreamDestroy, {"cuStreamDestroy_v2"});
  need(&d->cuStreamSynchronize, {"cuStreamSynchronize"});
  need(&d->cuMemcpyHtoDAsync, {"cuMemcpyHtoDAsync_v2"});
  need(&d->cuMemcpyDtoHAsync, {"cuMemcpyDtoHAsync_v2"});
  need(&d->cuMemcpyDtoDAsync, {"cuMemcpyDtoDAsync_v2"});
  need(&d->cuMemsetD8Async, {"cuMemsetD8Async"});
  need(&d->cuLaunchHostFunc, {"cuLaunchHostFunc"});
  need(&d->cuEventCreate, {"cuEventCreate"});
  need(&d->cuEventDestroy, {"cuEventDestroy_v2"});
  need(&d->cuEventRecord, {"cuEventRecord"});
  need(&d->cuEventSynchronize, {"cuEventSynchronize"});
  need(&d->cuEventQuery, {"cuEventQuery"});
  need(&d->cuEventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"});
  need(&d->cuStreamWaitEvent, {"cuStreamWaitEvent"});
  need(&d->cuModuleLoadDataEx, {"cuModuleLoadDataEx"});
  need(&d->cuModuleUnload, {"cuModuleUnload"});
  need(&d->cuModuleGetFunction, {"cuModuleGetFunction"});
  need(&d->cuFuncGetAttribute, {"cuFuncGetAttribute"});
  need(&d->cuFuncSetAttribute, {"cuFuncSetAttribute"});
  need(&d->cuLaunchKernel, {"cuLaunchKernel"});
  need(&d->cuStreamBeginCapture, {"cuStreamBeginCapture_v2"});
  need(&d->cuStreamEndCapture, {"cuStreamEndCapture"});
  need(&d->cuGraphCreate, {"cuGraphCreate"});
  need(&d->cuGraphDestroy, {"cuGraphDestroy"});
  need(&d->cuGraphAddKernelNode, {"cuGraphAddKernelNode_v2", "cuGraphAddKernelNode"});
  need(&d->cuGraphAddMemcpyNode, {"cuGraphAddMemcpyNode"});
  need(&d->cuGraphAddMemsetNode, {"cuGraphAddMemsetNode"});
  need(&d->cuGraphAddEmptyNode, {"cuGraphAddEmptyNode"});
  need(&d->cuGraphGetNodes, {"cuGraphGetNodes"});
  need(&d->cuGraphGetRootNodes, {"cuGraphGetRootNodes"});
  need(&d->cuGraphInstantiateWithFlags, {"cuGraphInstantiateWithFlags"});
  need(&d->cuGraphLaunch, {"cuGraphLaunch"});
  need(&d->cuGraphExecDestroy, {"cuGraphExecDestroy"});
  need(&d->cuGraphExecKernelNodeSetParams,
       {"cuGraphExecKernelNodeSetParams_v2", "cuGraphExecKernelNodeSetParams"});
  if (!Bind(library, &d->cuGraphNodeGetDependentNodes_v2, {"cuGraphNodeGetDependentNodes_v2"})) {
    need(&d->cuGraphNodeGetDependentNodes, {"cuGraphNodeGetDependentNodes"});
  }
  if (!missing.empty()) {
    // The library stays loaded: a process has one driver, and other code may use it.
    return Errorf(LOOM_ERR_NO_DRIVER, "the CUDA driver %s is too old: it lacks %s",
                  d->library_name.c_str(), missing.c_str());
  }
  d->init_result = d->cuInit(0);
  return Ok();
}

// The driver, loaded and initialized; fails with LOOM_ERR_NO_DRIVER when it cannot be.
Status GetDriver(const Driver** out) {
  static Driver driver;
  static Status status = LoadDriverOnce(&driver);  // thread-safe one-time initialization
  *out = &driver;
  return status;
}

std::string ResultText(const Driver& d, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  d.cuGetErrorName(result, &name);
  d.cuGetErrorString(result, &text);
  std::string out = name ? name : "CUDA error " + std::to_string(result);
  if (text != nullptr) out += std::string(" (") + text + ")";
  return out;
}

loom_status StatusOf(CUresult result) {
  switch (result) {
    case kErrorInvalidValue:
    case kErrorInvalidHandle:
    case kErrorInvalidImage:
    case kErrorInvalidPtx:
      return LOOM_ERR_INVALID_ARGUMENT;
    case kErrorOutOfMemory:
      return LOOM_ERR_OUT_OF_MEMORY;
    case kErrorNotInitialized:
    case kErrorDeinitialized:
      return LOOM_ERR_NO_DRIVER;
    case kErrorNoDevice:
    case kErrorInvalidDevice:
      return LOOM_ERR_NO_DEVICE;
    case kErrorNoBinaryForGpu:
      return LOOM_ERR_TARGET_MISMATCH;
    case kErrorUnsupportedPtxVersion:
    case kErrorNotSupported:
      return LOOM_ERR_NOT_SUPPORTED;
    case kErrorNotFound:
      return LOOM_ERR_NOT_FOUND;
  }
  if (result >= kErrorStreamCaptureUnsupported && result <= kErrorStreamCaptureWrongThread) {
    return LOOM_ERR_CAPTURE;
  }
  return LOOM_ERR_DEVICE;
}

// Errors after which the context is unusable: a kernel faulted or asserted, or the device
// reported an uncorrectable ECC or a contained error.
bool IsSticky(CUresult result) {
  return result == kErrorIllegalAddress || result == kErrorLaunchTimeout ||
         result == kErrorAssert || result == kErrorEccUncorrectable ||
         result == kErrorContained ||
         (result >= kErrorHardwareStackError && result <= kErrorLaunchFailed);
}

Status Failure(const Driver& d, CUresult result, const char* call, const std::string& what) {
  Status status;
  status.code = StatusOf(result);
  status.message = what + ": " + call + " failed: " + ResultText(d, result);
  return status;
}

// Makes the device's primary context current for the scope (and restores the caller's).
class ContextScope {
 public:
  ContextScope(const Driver* d, CUcontext context) : d_(d) {
    pushed_ = context != nullptr && d->cuCtxPushCurrent(context) == kSuccess;
  }
  ~ContextScope() {
    CUcontext previous;
    if (pushed_) d_->cuCtxPopCurrent(&previous);
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  const Driver* d_;
  bool pushed_;
};

// ---------------------------------------------------------------- NVRTC

typedef int nvrtcResult;
typedef struct _nvrtcProgram* nvrtcProgram;

struct Nvrtc {
  std::string library_name;
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int,
                                    const char* const*, const char* const*);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t*);  // optional (NVRTC 11.1+)
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram*);
  const char* (*nvrtcGetErrorString)(nvrtcResult);
  nvrtcResult (*nvrtcVersion)(int*, int*) = nullptr;  // optional
};

Status LoadNvrtcOnce(Nvrtc* n) {
  // LOOM_NVRTC_LIBRARY names a library to try first (NVRTC from a wheel, say).
  std::vector<std::string> names;
  if (const char* env = getenv("LOOM_NVRTC_LIBRARY")) names.push_back(env);
  for (const char* name : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2",
                           "libnvrtc.so.11.1", "libnvrtc.so.11.0"}) {
    names.push_back(name);
  }
  void* library = nullptr;
  std::string tried;
  for (const std::string& name : names) {
    tried += (tried.empty() ? "" : ", ") + name;
    library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) {
      n->library_name = name;
      break;
    }
  }
  if (library == nullptr) {
    return Errorf(LOOM_ERR_NO_DRIVER, "no NVRTC library: tried %s", tried.c_str());
  }
  bool ok = Bind(library, &n->nvrtcCreateProgram, {"nvrtcCreateProgram"}) &&
            Bind(library, &n->nvrtcCompileProgram, {"nvrtcCompileProgram"}) &&
            Bind(library, &n->nvrtcGetProgramLogSize, {"nvrtcGetProgramLogSize"}) &&
            Bind(library, &n->nvrtcGetProgramLog, {"nvrtcGetProgramLog"}) &&
            Bind(library, &n->nvrtcGetPTXSize, {"nvrtcGetPTXSize"}) &&
            Bind(library, &n->nvrtcGetPTX, {"nvrtcGetPTX"}) &&
            Bind(library, &n->nvrtcDestroyProgram, {"nvrtcDestroyProgram"}) &&
            Bind(library, &n->nvrtcGetErrorString, {"nvrtcGetErrorString"});
  if (!ok) {
    return Errorf(LOOM_ERR_NO_DRIVER, "NVRTC library %s lacks an entry point the shim needs",
                  n->library_name.c_str());
  }
  Bind(library, &n->nvrtcGetCUBINSize, {"nvrtcGetCUBINSize"});
  Bind(library, &n->nvrtcGetCUBIN, {"nvrtcGetCUBIN"});
  Bind(library, &n->nvrtcVersion, {"nvrtcVersion"});
  // NVRTC dlopens libnvrtc-builtins.so.MAJOR.MINOR by name when it first compiles, found
  // through its own RUNPATH ($ORIGIN) only when the dlopen is not intercepted (under ASan it is,
  // and then the name resolves nowhere): load the one beside a library named by path first.
  size_t slash = n->library_name.rfind('/');
  int major = 0, minor = 0;
  if (slash != std::string::npos && n->nvrtcVersion != nullptr &&
      n->nvrtcVersion(&major, &minor) == 0) {
    std::string builtins = n->library_name.substr(0, slash + 1) + "libnvrtc-builtins.so." +
                           std::to_string(major) + "." + std::to_string(minor);
    dlopen(builtins.c_str(), RTLD_NOW | RTLD_GLOBAL);  // absent: NVRTC searches as usual
  }
  return Ok();
}

Status GetNvrtc(const Nvrtc** out) {
  static Nvrtc nvrtc;
  static Status status = LoadNvrtcOnce(&nvrtc);
  *out = &nvrtc;
  return status;
}

// Compiles CUDA C for a target: a cubin for sm_XX (format LOOM_MODULE_CUDA_CUBIN; PTX from an
// NVRTC without cubin output, which the driver also loads) or PTX for the target's virtual
// architecture compute_XX (LOOM_MODULE_CUDA_PTX). *log gets NVRTC's log: its warnings, or with
// LOOM_ERR_COMPILE its errors. NVRTC's option is --gpu-architecture (-arch); it rejects the
// --gpu-arch spelling that nvcc's users might expect.
Status CompileFor(const std::string& source, const std::string& name, const std::string& target,
                  int32_t format, std::string* image, std::string* log) {
  log->clear();
  const Nvrtc* n = nullptr;
  Status status = GetNvrtc(&n);
  if (!status.ok()) return status;
  if (target.compare(0, 3, "sm_") != 0 || target.size() < 5 ||
      target.find_first_not_of("0123456789", 3) != std::string::npos) {
    return Errorf(LOOM_ERR_INVALID_ARGUMENT, "compile '%s': target %s is not sm_XX", name.c_str(),
                  target.c_str());
  }
  bool ptx = format == LOOM_MODULE_CUDA_PTX;
  nvrtcProgram program = nullptr;
  nvrtcResult result =
      n->nvrtcCreateProgram(&program, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (result != 0) {
    return Errorf(LOOM_ERR_COMPILE, "compile '%s': nvrtcCreateProgram failed: %s", name.c_str(),
                  n->nvrtcGetErrorString(result));
  }
  std::string arch = "--gpu-architecture=" + (ptx ? "compute_" + target.substr(3) : target);
  const char* options[] = {arch.c_str()};
  result = n->nvrtcCompileProgram(program, 1, options);
  size_t log_size = 0;
  if (n->nvrtcGetProgramLogSize(program, &log_size) == 0 && log_size > 1) {
    log->resize(log_size);
    n->nvrtcGetProgramLog(program, &(*log)[0]);
    log->resize(strlen(log->c_str()));
  }
  if (result != 0) {
    n->nvrtcDestroyProgram(&program);
    status.code = LOOM_ERR_COMPILE;
    status.message = "compile '" + name + "': NVRTC could not compile it for " + target + " (" +
                     n->nvrtcGetErrorString(result) + "):\n" + *log;
    return status;
  }
  size_t size = 0;
  bool have_cubin = !ptx && n->nvrtcGetCUBINSize != nullptr &&
                    n->nvrtcGetCUBINSize(program, &size) == 0 && size > 0;
  if (have_cubin) {
    image->resize(size);
    result = n->nvrtcGetCUBIN(program, &(*image)[0]);
  } else if ((result = n->nvrtcGetPTXSize(program, &size)) == 0) {
    image->resize(size);  // includes the terminating NUL
    result = n->nvrtcGetPTX(program, &(*image)[0]);
  }
  n->nvrtcDestroyProgram(&program);
  if (result != 0) {
    return Errorf(LOOM_ERR_COMPILE, "compile '%s': cannot read NVRTC's output: %s", name.c_str(),
                  n->nvrtcGetErrorString(result));
  }
  return Ok();
}

// Compiles CUDA C for the device's architecture (module_load of LOOM_MODULE_CUDA_SOURCE).
Status Compile(const std::string& source, const std::string& name, const std::string& target,
               std::string* image) {
  std::string log;
  Status status = CompileFor(source, name, target, LOOM_MODULE_CUDA_CUBIN, image, &log);
  if (!status.ok()) status.message = "module_load: " + status.message;
  return status;
}

// loom_code_compile for the CUDA backend.
Status CompileCode(const CompileSpec& spec, std::string* image, std::string* log) {
  if (spec.format != LOOM_MODULE_CUDA_CUBIN && spec.format != LOOM_MODULE_CUDA_PTX) {
    return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                  "compile '%s': the CUDA backend compiles to LOOM_MODULE_CUDA_CUBIN or "
                  "LOOM_MODULE_CUDA_PTX, not format %d",
                  spec.name.c_str(), spec.format);
  }
  return CompileFor(spec.source, spec.name, spec.target, spec.format, image, log);
}

// loom_code_compiler for the CUDA backend.
Status CompilerVersion(std::string* version) {
  const Nvrtc* n = nullptr;
  Status status = GetNvrtc(&n);
  if (!status.ok()) return status;
  int major = 0, minor = 0;
  if (n->nvrtcVersion == nullptr || n->nvrtcVersion(&major, &minor) != 0) {
    *version = "NVRTC (version unknown) (" + n->library_name + ")";
  } else {
    *version = "NVRTC " + std::to_string(major) + "." + std::to_string(minor) + " (" +
               n->library_name + ")";
  }
  return Ok();
}

// ---------------------------------------------------------------- handles

class CudaDevice : public loom_device {
 public:
  explicit CudaDevice(const Driver* d) : drv(d) {
    native_capture = true;
    discrete = true;  // device memory is the GPU's own
  }
  ~CudaDevice() override;
  Status Open(int index);

  Status CreateBuffer(loom_memory_kind kind, uint64_t bytes, loom_buffer** out) override;
  Status CreateStream(loom_stream** out) override;
  Status CreateEvent(loom_event** out) override;
  Status LoadModule(const loom_module_load_params& params, loom_module** out) override;
  Status CreateGraph(loom_graph** out) override;

  const Driver* drv;
  CUdevice device = 0;
  CUcontext context = nullptr;   // the primary context, retained while the device is open
  CUdeviceptr discard_word = 0;  // the violation word of launches that name none
  bool can_map_host_memory = false;
};

class CudaBuffer : public loom_buffer {
 public:
  ~CudaBuffer() override {
    ContextScope scope(dev->drv, dev->context);
    if (kind == LOOM_MEMORY_SHARED) {
      dev->drv->cuMemFreeHost(host);
    } else {
      dev->drv->cuMemFree(pointer);
    }
  }
  CudaDevice* dev = nullptr;
  CUdeviceptr pointer = 0;  // device address (of the mapping, for shared memory)
};

CUdeviceptr Address(loom_buffer* buffer, uint64_t offset) {
  return static_cast<CudaBuffer*>(buffer)->pointer + offset;
}

class CudaKernel : public loom_kernel {
 public:
  CUfunction function = nullptr;
  uint32_t static_shared = 0;  // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
  // The dynamic shared memory the function may take now (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_
  // SHARED_SIZE_BYTES: 48 KiB less its static shared memory until raised); raised under mu.
  std::atomic<uint32_t> dynamic_limit{0};
  std::mutex mu;
};

// Opts `kernel` in to `bytes` of dynamic shared memory when that is above what it may take
// now (above 48 KiB: CUDA requires cuFuncSetAttribute before such a launch, which otherwise
// fails with CUDA_ERROR_INVALID_VALUE). Once per kernel and larger size; `what` names the call.
Status EnsureSharedMemory(const CudaDevice& dev, loom_kernel* k, uint32_t bytes,
                          const std::string& what) {
  CudaKernel* kernel = static_cast<CudaKernel*>(k);
  if (bytes <= kernel->dynamic_limit.load(std::memory_order_acquire)) return Ok();
  std::lock_guard<std::mutex> lock(kernel->mu);
  if (bytes <= kernel->dynamic_limit.load(std::memory_order_relaxed)) return Ok();
  uint64_t total = uint64_t{bytes} + kernel->static_shared;
  if (total > dev.props.max_shared_memory_per_block_optin) {
    return Errorf(LOOM_ERR_INVALID_ARGUMENT,
                  "%s: %u bytes of dynamic shared memory and the kernel's %u static bytes "
                  "exceed the device's %u (its limit with opt-in)",
                  what.c_str(), bytes, kernel->static_shared,
                  dev.props.max_shared_memory_per_block_optin);
  }
  CUresult result = dev.drv->cuFuncSetAttribute(kernel->function,
                                                kFuncAttrMaxDynamicSharedSizeBytes,
                                                static_cast<int>(bytes));
  if (result != kSuccess) {
    return Failure(*dev.drv, result, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", what);
  }
  kernel->dynamic_limit.store(bytes, std::memory_order_release);
  return Ok();
}

class CudaModule : public loom_module {
 public:
  ~CudaModule() override {
    ContextScope scope(dev->drv, dev->context);
    dev->drv->cuModuleUnload(module);
  }
  CudaDevice* dev = nullptr;
  CUmodule module = nullptr;

 protected:
  Status FindKernel(const std::string& kernel_name, std::unique_ptr<loom_kernel>* out) override {
    ContextScope scope(dev->drv, dev->context);
    std::unique_ptr<CudaKernel> kernel(new CudaKernel());
    CUresult result = dev->drv->cuModuleGetFunction(&kernel->function, module, kernel_name.c_str());
    if (result == kErrorNotFound) {
      return Errorf(LOOM_ERR_NOT_FOUND, "kernel '%s' not found in CUDA module '%s'",
                    kernel_name.c_str(), name.c_str());
    }
    if (result != kSuccess) {
      return Failure(*dev->drv, result, "cuModuleGetFunction",
                     "module_get_kernel '" + kernel_name + "'");
    }
    int static_shared = 0, dynamic_limit = 0;
    result = dev->drv->cuFuncGetAttribute(&static_shared, kFuncAttrSharedSizeBytes,
                                          kernel->function);
    if (result == kSuccess) {
      result = dev->drv->cuFuncGetAttribute(&dynamic_limit, kFuncAttrMaxDynamicSharedSizeBytes,
                                            kernel->function);
    }
    if (result != kSuccess) {
      return Failure(*dev->drv, result, "cuFuncGetAttribute",
                     "module_get_kernel '" + kernel_name + "'");
    }
    kernel->static_shared = static_cast<uint32_t>(static_shared);
    kernel->dynamic_limit.store(static_cast<uint32_t>(dynamic_limit));
    *out = std::move(kernel);
    return Ok();
  }
};

// The packed argument buffer of the CUDA calling convention: one pointer per binding, the
// violation word's pointer, then the scalar blob (8-byte aligned, so each scalar keeps its
// natural alignment).
std::vector<uint8_t> PackArguments(const CudaDevice& dev, const LaunchSpec& spec) {
  size_t pointers = spec.buffers.size() + 1;
  std::vector<uint8_t> blob(pointers * sizeof(CUdeviceptr) + spec.scalars.size());
  for (size_t i = 0; i < spec.buffers.size(); i++) {
    CUdeviceptr pointer = Address(spec.buffers[i], spec.offsets[i]);
    memcpy(&blob[i * sizeof(CUdeviceptr)], &pointer, sizeof(pointer));
  }
  CUdeviceptr violation =
      spec.violation != nullptr ? Address(spec.violation, spec.violation_offset) : dev.discard_word;
  memcpy(&blob[spec.buffers.size() * sizeof(CUdeviceptr)], &violation, sizeof(violation));
  if (!spec.scalars.empty()) {
    memcpy(&blob[pointers * sizeof(CUdeviceptr)], spec.scalars.data(), spec.scalars.size());
  }
  return blob;
}

// Kernel node parameters pointing at `blob` and `extra` (which must outlive the call using them;
// the driver copies the arguments).
KernelNodeParams KernelParams(loom_kernel* kernel, const LaunchSpec& spec,
                              std::vector<uint8_t>* blob, size_t* blob_size, void** extra) {
  *blob_size = blob->size();
  extra[0] = kLaunchParamBufferPointer;
  extra[1] = blob->data();
  extra[2] = kLaunchParamBufferSize;
  extra[3] = blob_size;
  extra[4] = kLaunchParamEnd;
  KernelNodeParams params = {};
  params.func = static_cast<CudaKernel*>(kernel)->function;
  params.gridDimX = spec.grid[0];
  params.gridDimY = spec.grid[1];
  params.gridDimZ = spec.grid[2];
  params.blockDimX = spec.block[0];
  params.blockDimY = spec.block[1];
  params.blockDimZ = spec.block[2];
  params.sharedMemBytes = spec.shared_bytes;
  params.extra = extra;
  return params;
}

class CudaEvent : public loom_event {
 public:
  ~CudaEvent() override {
    ContextScope scope(dev->drv, dev->context);
    dev->drv->cuEventDestroy(event);
  }
  Status Synchronize() override {
    ContextScope scope(dev->drv, dev->context);
    CUresult result = dev->drv->cuEventSynchronize(event);
    return result == kSuccess
               ? Ok()
               : Failure(*dev->drv, result, "cuEventSynchronize", "event_synchronize");
  }
  Status Query(bool* done) override {
    ContextScope scope(dev->drv, dev->context);
    CUresult result = dev->drv->cuEventQuery(event);
    *done = result == kSuccess;
    if (result == kSuccess || result == kErrorNotReady) return Ok();
    return Failure(*dev->drv, result, "cuEventQuery", "event_query");
  }
  Status ElapsedMs(loom_event* end, float* ms) override {
    ContextScope scope(dev->drv, dev->context);
    CUresult result = dev->drv->cuEventElapsedTime(ms, event, static_cast<CudaEvent*>(end)->event);
    if (result == kSuccess) return Ok();
    Status status = Failure(*dev->drv, result, "cuEventElapsedTime", "event_elapsed_ms");
    if (result == kErrorNotReady) status.code = LOOM_ERR_INVALID_ARGUMENT;  // not reached yet
    return status;
  }
  CudaDevice* dev = nullptr;
  CUevent event = nullptr;
};

// A CUDA graph and its node handles by Loom node id; shared with the executables instantiated
// from it, whose node handles must stay valid for updates.
struct NativeGraph {
  NativeGraph(CudaDevice* d, CUgraph g) : dev(d), graph(g) {}
  ~NativeGraph() {
    ContextScope scope(dev->drv, dev->context);
    dev->drv->cuGraphDestroy(graph);
  }
  CudaDevice* dev;
  CUgraph graph;
  std::vector<CUgraphNode> handles;
};

class CudaExec : public loom_graph_exec {
 public:
  ~CudaExec() override {
    ContextScope scope(dev->drv, dev->context);
    dev->drv->cuGraphExecDestroy(exec);
  }
  Status UpdateKernelNode(uint32_t node, const LaunchSpec& launch) override {
    ContextScope scope(dev->drv, dev->context);
    Status shared = EnsureSharedMemory(*dev, nodes[node].kernel, launch.shared_bytes,
                                       "graph_exec_update_kernel_node " + std::to_string(node));
    if (!shared.ok()) return shared;
    std::vector<uint8_t> blob = PackArguments(*dev, launch);
    size_t blob_size;
    void* extra[5];
    KernelNodeParams params = KernelParams(nodes[node].kernel, launch, &blob, &blob_size, extra);
    CUresult result = dev->drv->cuGraphExecKernelNodeSetParams(exec, handles[node], &params);
    if (result == kSuccess) return Ok();
    return Failure(*dev->drv, result, "cuGraphExecKernelNodeSetParams",
                   "graph_exec_update_kernel_node " + std::to_string(node));
  }
  CudaDevice* dev = nullptr;
  CUgraphExec exec = nullptr;
  std::shared_ptr<NativeGraph> native;
  std::vector<CUgraphNode> handles;
};

class CudaGraph : public loom_graph {
 public:
  Status NodeAdded(uint32_t id) override {
    const Driver& d = *dev->drv;
    ContextScope scope(dev->drv, dev->context);
    const Node& node = nodes[id];
    std::vector<CUgraphNode> deps;
    for (uint32_t dep : node.deps) deps.push_back(native->handles[dep]);
    CUgraphNode handle = nullptr;
    CUresult result = kSuccess;
    const char* call = "";
    switch (node.kind) {
      case NodeKind::kKernel: {
        Status shared = EnsureSharedMemory(*dev, node.kernel, node.launch.shared_bytes,
                                           "graph kernel node " + std::to_string(id));
        if (!shared.ok()) return shared;
        std::vector<uint8_t> blob = PackArguments(*dev, node.launch);
        size_t blob_size;
        void* extra[5];
        KernelNodeParams params = KernelParams(node.kernel, node.launch, &blob, &blob_size, extra);
        call = "cuGraphAddKernelNode";
        result = d.cuGraphAddKernelNode(&handle, native->graph, deps.data(), deps.size(), &params);
        break;
      }
      case NodeKind::kCopy: {
        Memcpy3D copy = {};
        copy.srcMemoryType = kMemoryTypeDevice;
        copy.srcDevice = Address(node.src, node.src_offset);
        copy.dstMemoryType = kMemoryTypeDevice;
        copy.dstDevice = Address(node.dst, node.dst_offset);
        copy.srcPitch = copy.dstPitch = node.bytes;  // one row
        copy.srcHeight = copy.dstHeight = 1;
        copy.WidthInBytes = node.bytes;
        copy.Height = 1;
        copy.Depth = 1;
        call = "cuGraphAddMemcpyNode";
        result = d.cuGraphAddMemcpyNode(&handle, native->graph, deps.data(), deps.size(), &copy,
                                        dev->context);
        break;
      }
      case NodeKind::kFill: {
        MemsetNodeParams fill = {};
        fill.dst = Address(node.dst, node.dst_offset);
        fill.pitch = node.bytes;  // unused for one row
        fill.value = node.value;
        fill.elementSize = 1;
        fill.width = node.bytes;
        fill.height = 1;
        call = "cuGraphAddMemsetNode";
        result = d.cuGraphAddMemsetNode(&handle, native->graph, deps.data(), deps.size(), &fill,
                                        dev->context);
        break;
      }
      case NodeKind::kEmpty:
        call = "cuGraphAddEmptyNode";
        result = d.cuGraphAddEmptyNode(&handle, native->graph, deps.data(), deps.size());
        break;
    }
    if (result != kSuccess) return Failure(d, result, call, "graph add " + DescribeNode(node));
    native->handles.push_back(handle);
    return Ok();
  }

  Status Instantiate(loom_graph_exec** out) override {
    ContextScope scope(dev->drv, dev->context);
    CUgraphExec exec = nullptr;
    CUresult result = dev->drv->cuGraphInstantiateWithFlags(&exec, native->graph, 0);
    if (result != kSuccess) {
      return Failure(*dev->drv, result, "cuGraphInstantiateWithFlags", "graph_instantiate");
    }
    auto* executable = new CudaExec();
    executable->device = dev;
    executable->nodes = nodes;
    executable->dev = dev;
    executable->exec = exec;
    executable->native = native;
    executable->handles = native->handles;
    *out = executable;
    return Ok();
  }

  CudaDevice* dev = nullptr;
  std::shared_ptr<NativeGraph> native;
};

// Recovers the node handles of a captured graph in capture order. Capture on one stream with
// nothing forked in (cross-stream waits are refused) yields a chain: walk it from its root.
Status CapturedHandles(const Driver& d, CUgraph graph, size_t expected,
                       std::vector<CUgraphNode>* handles) {
  size_t count = 0;
  CUresult result = d.cuGraphGetNodes(graph, nullptr, &count);
  if (result != kSuccess) return Failure(d, result, "cuGraphGetNodes", "end_capture");
  if (count != expected) {
    return Errorf(LOOM_ERR_INTERNAL,
                  "end_capture: the captured CUDA graph has %zu nodes for %zu captured operations",
                  count, expected);
  }
  if (count == 0) return Ok();
  std::vector<CUgraphNode> scratch(count);
  size_t found = count;
  result = d.cuGraphGetRootNodes(graph, scratch.data(), &found);
  if (result != kSuccess) return Failure(d, result, "cuGraphGetRootNodes", "end_capture");
  while (found == 1 && handles->size() < count) {
    handles->push_back(scratch[0]);
    found = count;
    result = d.DependentNodes(handles->back(), scratch.data(), &found);
    if (result != kSuccess)
      return Failure(d, result, "cuGraphNodeGetDependentNodes", "end_capture");
  }
  if (handles->size() != count || found != 0) {
    return Errorf(LOOM_ERR_INTERNAL, "end_capture: the captured CUDA graph is not a chain");
  }
  return Ok();
}

class CudaStream : public loom_stream {
 public:
  ~CudaStream() override {
    const Driver& d = *dev->drv;
    ContextScope scope(dev->drv, dev->context);
    if (Capturing()) {  // leave capture mode before the stream goes
      CUgraph graph = nullptr;
      d.cuStreamEndCapture(stream, &graph);
      if (graph != nullptr) d.cuGraphDestroy(graph);
    }
    d.cuStreamSynchronize(stream);
    d.cuStreamDestroy(stream);
  }

  Status CopyH2D(loom_buffer* dst, uint64_t dst_offset, const void* src, uint64_t bytes) override {
    ContextScope scope(dev->drv, dev->context);
    return Enqueued(dev->drv->cuMemcpyHtoDAsync(Address(dst, dst_offset), src, bytes, stream),
                    "cuMemcpyHtoDAsync", "copy_h2d");
  }
  Status CopyD2H(void* dst, loom_buffer* src, uint64_t src_offset, uint64_t bytes) override {
    ContextScope scope(dev->drv, dev->context);
    return Enqueued(dev->drv->cuMemcpyDtoHAsync(dst, Address(src, src_offset), bytes, stream),
                    "cuMemcpyDtoHAsync", "copy_d2h");
  }
  Status CopyD2D(loom_buffer* dst, uint64_t dst_offset, loom_buffer* src, uint64_t src_offset,
                 uint64_t bytes) override {
    ContextScope scope(dev->drv, dev->context);
    return Enqueued(dev->drv->cuMemcpyDtoDAsync(Address(dst, dst_offset), Address(src, src_offset),
                                                bytes, stream),
                    "cuMemcpyDtoDAsync", "copy_d2d");
  }
  Status Fill(loom_buffer* dst, uint64_t offset, uint64_t bytes, uint8_t value) override {
    ContextScope scope(dev->drv, dev->context);
    return Enqueued(dev->drv->cuMemsetD8Async(Address(dst, offset), value, bytes, stream),
                    "cuMemsetD8Async", "fill");
  }
  Status HostCallback(loom_host_fn fn, void* user) override {
    ContextScope scope(dev->drv, dev->context);
    return Enqueued(dev->drv->cuLaunchHostFunc(stream, fn, user), "cuLaunchHostFunc",
                    "host callback");
  }
  Status Launch(loom_kernel* kernel, const LaunchSpec& spec) override {
    ContextScope scope(dev->drv, dev->context);
    Status shared = EnsureSharedMemory(*dev, kernel, spec.shared_bytes,
                                       "kernel launch '" + kernel->name + "'");
    if (!shared.ok()) return shared;
    std::vector<uint8_t> blob = PackArguments(*dev, spec);
    size_t blob_size;
    void* extra[5];
    KernelNodeParams p = KernelParams(kernel, spec, &blob, &blob_size, extra);
    CUresult result = dev->drv->cuLaunchKernel(p.func, p.gridDimX, p.gridDimY, p.gridDimZ,
                                               p.blockDimX, p.blockDimY, p.blockDimZ,
                                               p.sharedMemBytes, stream, nullptr, extra);
    return Enqueued(result, "cuLaunchKernel", "kernel launch '" + kernel->name + "'");
  }
  Status RecordEvent(loom_event* event) override {
    ContextScope scope(dev->drv, dev->context);
    return Enqueued(dev->drv->cuEventRecord(static_cast<CudaEvent*>(event)->event, stream),
                    "cuEventRecord", "event record");
  }
  Status WaitEvent(loom_event* event) override {
    ContextScope scope(dev->drv, dev->context);
    return Enqueued(dev->drv->cuStreamWaitEvent(stream, static_cast<CudaEvent*>(event)->event, 0),
                    "cuStreamWaitEvent", "cross-stream wait");
  }
  Status LaunchGraph(loom_graph_exec* exec) override {
    ContextScope scope(dev->drv, dev->context);
    return Enqueued(dev->drv->cuGraphLaunch(static_cast<CudaExec*>(exec)->exec, stream),
                    "cuGraphLaunch", "graph launch");
  }
  Status Synchronize() override {
    ContextScope scope(dev->drv, dev->context);
    CUresult result = dev->drv->cuStreamSynchronize(stream);
    if (result == kSuccess) return Ok();
    std::string last;
    {
      std::lock_guard<std::mutex> lock(state_mu);
      last = last_operation_;
    }
    Fail("an operation failed on the device (the last one enqueued was " + last +
         "): " + ResultText(*dev->drv, result));
    return Failure(*dev->drv, result, "cuStreamSynchronize", "synchronize");
  }
  Status BeginCapture() override {
    ContextScope scope(dev->drv, dev->context);
    CUresult result = dev->drv->cuStreamBeginCapture(stream, kStreamCaptureModeRelaxed);
    if (result == kSuccess) return Ok();
    return Failure(*dev->drv, result, "cuStreamBeginCapture", "begin_capture");
  }
  // Always ends the driver's capture, whatever happened, so the stream is usable again.
  Status EndCapture(bool invalidated, std::vector<Node> nodes, loom_graph** out) override {
    const Driver& d = *dev->drv;
    ContextScope scope(dev->drv, dev->context);
    CUgraph graph = nullptr;
    CUresult result = d.cuStreamEndCapture(stream, &graph);
    if (invalidated || result != kSuccess) {
      if (graph != nullptr) d.cuGraphDestroy(graph);
      if (invalidated) return Ok();
      Status status = Failure(d, result, "cuStreamEndCapture", "end_capture");
      status.code = LOOM_ERR_CAPTURE;
      return status;
    }
    auto native = std::make_shared<NativeGraph>(dev, graph);
    Status status = CapturedHandles(d, graph, nodes.size(), &native->handles);
    if (!status.ok()) return status;
    auto* captured_graph = new CudaGraph();
    captured_graph->device = dev;
    captured_graph->dev = dev;
    captured_graph->native = std::move(native);
    captured_graph->nodes = std::move(nodes);
    *out = captured_graph;
    return Ok();
  }

  CudaDevice* dev = nullptr;
  CUstream stream = nullptr;

 private:
  // Turns the result of an enqueue into a status: errors of a faulted context make the stream
  // failed. A pending injected fault is placed right behind the operation, as a host function
  // that fails the stream once the device reaches it.
  Status Enqueued(CUresult result, const char* call, const std::string& what) {
    const Driver& d = *dev->drv;
    if (result != kSuccess) {
      if (IsSticky(result)) Fail(what + " could not be enqueued: " + ResultText(d, result));
      return Failure(d, result, call, what);
    }
    bool capturing = Capturing();
    {
      std::lock_guard<std::mutex> lock(state_mu);
      if (!capturing) last_operation_ = what;
    }
    if (!capturing && TakeNextOperationFault()) {
      {
        std::lock_guard<std::mutex> lock(state_mu);
        injected_.push_back(what);
      }
      CUresult marker = d.cuLaunchHostFunc(stream, &CudaStream::InjectedFault, this);
      if (marker != kSuccess) Fail(what + " failed on the device: injected fault");
    }
    return Ok();
  }

  static void InjectedFault(void* user) {
    auto* self = static_cast<CudaStream*>(user);
    std::string what;
    {
      std::lock_guard<std::mutex> lock(self->state_mu);
      if (self->injected_.empty()) return;
      what = self->injected_.front();
      self->injected_.pop_front();
    }
    self->Fail(what + " failed on the device: injected fault");
  }

  std::string last_operation_ = "nothing";  // guarded by state_mu
  std::deque<std::string> injected_;        // guarded by state_mu
};

CudaDevice::~CudaDevice() {
  if (context == nullptr) return;
  {
    ContextScope scope(drv, context);
    if (discard_word != 0) drv->cuMemFree(discard_word);
  }
  drv->cuDevicePrimaryCtxRelease(device);
}

Status CudaDevice::Open(int index) {
  const Driver& d = *drv;
  CUresult result = d.cuDeviceGet(&device, index);
  if (result != kSuccess) return Failure(d, result, "cuDeviceGet", "loom_device_open");
  char name[sizeof(props.name)] = {};
  result = d.cuDeviceGetName(name, sizeof(name) - 1, device);
  if (result != kSuccess) return Failure(d, result, "cuDeviceGetName", "loom_device_open");
  int values[13];
  const int attributes[13] = {kAttrMaxThreadsPerBlock,
                              kAttrMaxBlockDimX,
                              kAttrMaxBlockDimX + 1,
                              kAttrMaxBlockDimX + 2,
                              kAttrMaxGridDimX,
                              kAttrMaxGridDimX + 1,
                              kAttrMaxGridDimX + 2,
                              kAttrMaxSharedMemoryPerBlock,
                              kAttrWarpSize,
                              kAttrMultiprocessorCount,
                              kAttrComputeCapabilityMajor,
                              kAttrComputeCapabilityMinor,
                              kAttrMaxSharedMemoryPerBlockOptin};
  for (int i = 0; i < 13; i++) {
    result = d.cuDeviceGetAttribute(&values[i], attributes[i], device);
    if (result != kSuccess) return Failure(d, result, "cuDeviceGetAttribute", "loom_device_open");
  }
  int can_map = 0;
  d.cuDeviceGetAttribute(&can_map, kAttrCanMapHostMemory, device);
  can_map_host_memory = can_map != 0;
  size_t total = 0;
  result = d.cuDeviceTotalMem(&total, device);
  if (result != kSuccess) return Failure(d, result, "cuDeviceTotalMem", "loom_device_open");
  result = d.cuDevicePrimaryCtxRetain(&context, device);
  if (result != kSuccess) {
    context = nullptr;
    return Failure(d, result, "cuDevicePrimaryCtxRetain", "loom_device_open");
  }
  {
    ContextScope scope(drv, context);
    result = d.cuMemAlloc(&discard_word, sizeof(uint32_t));
    if (result != kSuccess) {
      discard_word = 0;
      return Failure(d, result, "cuMemAlloc", "loom_device_open (violation word)");
    }
  }
  props.struct_size = sizeof(props);
  props.backend = LOOM_BACKEND_CUDA;
  props.index = index;
  snprintf(props.name, sizeof(props.name), "%s", name);
  snprintf(props.target, sizeof(props.target), "sm_%d%d", values[10], values[11]);
  props.total_memory = total;
  props.compute_units = static_cast<uint32_t>(values[9]);
  props.max_threads_per_block = static_cast<uint32_t>(values[0]);
  for (int i = 0; i < 3; i++) {
    props.max_block_dim[i] = static_cast<uint32_t>(values[1 + i]);
    props.max_grid_dim[i] = static_cast<uint32_t>(values[4 + i]);
  }
  props.max_shared_memory_per_block = static_cast<uint32_t>(values[7]);
  props.max_shared_memory_per_block_optin =
      static_cast<uint32_t>(std::max(values[12], values[7]));
  int driver_version = 0;
  if (d.cuDriverGetVersion(&driver_version) == kSuccess && driver_version > 0) {
    props.driver_version = static_cast<uint32_t>(driver_version);
  }
  props.warp_size = static_cast<uint32_t>(values[8]);
  return Ok();
}

Status CudaDevice::CreateBuffer(loom_memory_kind kind, uint64_t bytes, loom_buffer** out) {
  ContextScope scope(drv, context);
  CUdeviceptr pointer = 0;
  void* host = nullptr;
  if (kind == LOOM_MEMORY_DEVICE) {
    CUresult result = drv->cuMemAlloc(&pointer, bytes);
    if (result != kSuccess) return Failure(*drv, result, "cuMemAlloc", "buffer_create");
  } else {
    if (!can_map_host_memory) {
      return Errorf(LOOM_ERR_NOT_SUPPORTED,
                    "buffer_create: CUDA device %d cannot map host memory for a shared buffer",
                    props.index);
    }
    CUresult result =
        drv->cuMemHostAlloc(&host, bytes, kMemHostAllocPortable | kMemHostAllocDeviceMap);
    if (result != kSuccess) return Failure(*drv, result, "cuMemHostAlloc", "buffer_create");
    result = drv->cuMemHostGetDevicePointer(&pointer, host, 0);
    if (result != kSuccess) {
      drv->cuMemFreeHost(host);
      return Failure(*drv, result, "cuMemHostGetDevicePointer", "buffer_create");
    }
  }
  auto* buffer = new CudaBuffer();
  buffer->device = this;
  buffer->dev = this;
  buffer->kind = kind;
  buffer->size = bytes;
  buffer->host = host;
  buffer->pointer = pointer;
  *out = buffer;
  return Ok();
}

Status CudaDevice::CreateStream(loom_stream** out) {
  ContextScope scope(drv, context);
  CUstream handle = nullptr;
  CUresult result = drv->cuStreamCreate(&handle, kStreamNonBlocking);
  if (result != kSuccess) return Failure(*drv, result, "cuStreamCreate", "stream_create");
  auto* stream = new CudaStream();
  stream->device = this;
  stream->dev = this;
  stream->stream = handle;
  *out = stream;
  return Ok();
}

Status CudaDevice::CreateEvent(loom_event** out) {
  ContextScope scope(drv, context);
  CUevent handle = nullptr;
  CUresult result = drv->cuEventCreate(&handle, kEventDefault);
  if (result != kSuccess) return Failure(*drv, result, "cuEventCreate", "event_create");
  auto* event = new CudaEvent();
  event->device = this;
  event->dev = this;
  event->event = handle;
  *out = event;
  return Ok();
}

Status CudaDevice::LoadModule(const loom_module_load_params& params, loom_module** out) {
  std::string name = params.name ? params.name : "<unnamed>";
  std::string image;
  const char* data = static_cast<const char*>(params.data);
  switch (params.format) {
    case LOOM_MODULE_CUDA_SOURCE: {
      Status status = Compile(std::string(data, params.size), name, props.target, &image);
      if (!status.ok()) return status;
      break;
    }
    case LOOM_MODULE_CUDA_PTX:
      image.assign(data, params.size);
      image.push_back('\0');  // PTX is loaded as a C string
      break;
    case LOOM_MODULE_CUDA_CUBIN:
      image.assign(data, params.size);
      break;
    default:
      return Errorf(LOOM_ERR_NOT_SUPPORTED,
                    "module_load '%s': the CUDA backend loads only CUDA modules (format %d)",
                    name.c_str(), static_cast<int>(params.format));
  }
  ContextScope scope(drv, context);
  char log[4096] = {};
  int options[2] = {kJitErrorLogBuffer, kJitErrorLogBufferSizeBytes};
  void* values[2] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof(log)))};
  CUmodule module = nullptr;
  CUresult result = drv->cuModuleLoadDataEx(&module, image.data(), 2, options, values);
  if (result != kSuccess) {
    Status status = Failure(*drv, result, "cuModuleLoadDataEx", "module_load '" + name + "'");
    if (log[0] != '\0') status.message += std::string(":\n") + log;
    return status;
  }
  auto* loaded = new CudaModule();
  loaded->device = this;
  loaded->name = name;
  loaded->dev = this;
  loaded->module = module;
  *out = loaded;
  return Ok();
}

Status CudaDevice::CreateGraph(loom_graph** out) {
  ContextScope scope(drv, context);
  CUgraph handle = nullptr;
  CUresult result = drv->cuGraphCreate(&handle, 0);
  if (result != kSuccess) return Failure(*drv, result, "cuGraphCreate", "graph_create");
  auto* graph = new CudaGraph();
  graph->device = this;
  graph->dev = this;
  graph->native = std::make_shared<NativeGraph>(this, handle);
  *out = graph;
  return Ok();
}

// The driver, initialized, with devices: cuInit's "no device" means zero devices.
Status ReadyDriver(const Driver** out) {
  Status status = GetDriver(out);
  if (!status.ok()) return status;
  CUresult init = (*out)->init_result;
  if (init != kSuccess && init != kErrorNoDevice) {
    Status failure = Failure(**out, init, "cuInit", "CUDA driver " + (*out)->library_name);
    failure.code = LOOM_ERR_NO_DRIVER;
    return failure;
  }
  return Ok();
}

Status DeviceCount(int32_t* count) {
  const Driver* d = nullptr;
  Status status = ReadyDriver(&d);
  if (!status.ok() || d->init_result == kErrorNoDevice) return status;
  int n = 0;
  CUresult result = d->cuDeviceGetCount(&n);
  if (result != kSuccess) return Failure(*d, result, "cuDeviceGetCount", "loom_device_count");
  *count = n;
  return Ok();
}

Status OpenDevice(const loom_device_open_params& params, loom_device** out) {
  int32_t count = 0;
  Status status = DeviceCount(&count);
  if (!status.ok()) return status;
  if (params.index >= count) {
    return Errorf(LOOM_ERR_NO_DEVICE,
                  "loom_device_open: no CUDA device with index %d (there are %d)", params.index,
                  count);
  }
  const Driver* d = nullptr;
  GetDriver(&d);
  std::unique_ptr<CudaDevice> device(new CudaDevice(d));
  status = device->Open(params.index);
  if (!status.ok()) return status;
  *out = device.release();
  return Ok();
}

}  // namespace cuda

extern const BackendInfo kCudaBackend = {LOOM_BACKEND_CUDA,   "CUDA",
                                         cuda::DeviceCount,   cuda::OpenDevice,
                                         cuda::CompileCode,   cuda::CompilerVersion};

}  // namespace loom
