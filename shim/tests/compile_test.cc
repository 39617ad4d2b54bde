// compile_test.cc: loom_code_compile and loom_code_compiler, the device-free compilation entry
// points. The argument checks run everywhere; the compilations need NVRTC (no driver, no GPU):
// they skip without it unless LOOM_REQUIRE_NVRTC=1, as tools/test sets after installing NVRTC
// from PyPI, makes its absence a failure. LOOM_NVRTC_LIBRARY names the library to load.
#include <cstdlib>
#include <cstring>
#include <string>

#include "harness.h"

namespace {

const char kSaxpy[] =
    "extern \"C\" __global__ void saxpy(const float* x, float* y, unsigned int* violation,\n"
    "                                   float a, unsigned int n) {\n"
    "  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

loom_code_compile_params Params(loom_backend backend, loom_module_format format, const char* target,
                                const char* source) {
  loom_code_compile_params p = {};
  p.struct_size = sizeof(p);
  p.backend = backend;
  p.format = format;
  p.target = target;
  p.name = "saxpy.cu";
  p.source = source;
  p.source_size = source != nullptr ? strlen(source) : 0;
  return p;
}

// Whether NVRTC loads; sets the skip (or, with LOOM_REQUIRE_NVRTC=1, a failure) when it does not.
bool HaveNvrtc() {
  char version[128], err[LOOM_ERROR_CAPACITY];
  loom_status st = loom_code_compiler(LOOM_BACKEND_CUDA, version, sizeof version, err, sizeof err);
  if (st == LOOM_OK) {
    printf("    %s\n", version);
    return true;
  }
  const char* require = getenv("LOOM_REQUIRE_NVRTC");
  if (require != nullptr && strcmp(require, "1") == 0) {
    ::loomtest::Fail(__FILE__, __LINE__, std::string("LOOM_REQUIRE_NVRTC=1 but ") + err);
  } else {
    ::loomtest::Skip(err);
  }
  return false;
}

LOOM_TEST(CompileArgumentsAreChecked) {
  char err[LOOM_ERROR_CAPACITY];
  loom_code* code = reinterpret_cast<loom_code*>(&err);  // must be reset to NULL
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_code_compile(nullptr, &code, err, sizeof err));
  CHECK(code == nullptr);
  loom_code_compile_params p = Params(LOOM_BACKEND_CUDA, LOOM_MODULE_CUDA_CUBIN, "sm_90", kSaxpy);
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_code_compile(&p, nullptr, err, sizeof err));
  p.backend = static_cast<loom_backend>(77);
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_code_compile(&p, &code, err, sizeof err));
  CHECK(strstr(err, "unknown backend 77") != nullptr);
  p.backend = LOOM_BACKEND_HOST;
  CHECK_STATUS(LOOM_ERR_NOT_SUPPORTED, loom_code_compile(&p, &code, err, sizeof err));
  CHECK(strstr(err, "host backend compiles no code") != nullptr);
  CHECK(code == nullptr);
  p.backend = LOOM_BACKEND_CUDA;
  p.target = "";
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_code_compile(&p, &code, err, sizeof err));
  p.target = "sm_90";
  p.source_size = 0;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_code_compile(&p, &code, err, sizeof err));
  CHECK(strstr(err, "saxpy.cu") != nullptr);
  // A struct from an older caller that ends before source: the source reads as NULL.
  p = Params(LOOM_BACKEND_CUDA, LOOM_MODULE_CUDA_CUBIN, "sm_90", kSaxpy);
  p.struct_size = offsetof(loom_code_compile_params, source);
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_code_compile(&p, &code, err, sizeof err));
  char version[64];
  CHECK_STATUS(LOOM_ERR_NOT_SUPPORTED,
               loom_code_compiler(LOOM_BACKEND_HOST, version, sizeof version, err, sizeof err));
  CHECK_EQ(std::string(version), std::string());
  loom_code_destroy(nullptr);
  CHECK(loom_code_data(nullptr) == nullptr);
  CHECK_EQ(loom_code_size(nullptr), uint64_t{0});
  CHECK_EQ(std::string(loom_code_log(nullptr)), std::string());
}

LOOM_TEST(CompilesCubinAndPtxWithoutADevice) {
  if (!HaveNvrtc()) return;
  char err[LOOM_ERROR_CAPACITY] = {};
  for (const char* target : {"sm_80", "sm_90"}) {
    loom_code_compile_params p = Params(LOOM_BACKEND_CUDA, LOOM_MODULE_CUDA_CUBIN, target, kSaxpy);
    loom_code* code = nullptr;
    loom_status st = loom_code_compile(&p, &code, err, sizeof err);
    if (st != LOOM_OK) fprintf(stderr, "    %s\n", err);
    REQUIRE_OK(st);
    REQUIRE(code != nullptr);
    const unsigned char* image = static_cast<const unsigned char*>(loom_code_data(code));
    REQUIRE(loom_code_size(code) > 64);
    CHECK(memcmp(image, "\x7f" "ELF", 4) == 0);  // a cubin is an ELF image
    // e_flags (offset 48 in a 64-bit ELF) carry the SM version in their low byte(s).
    uint32_t flags;
    memcpy(&flags, image + 48, sizeof flags);
    unsigned sm = static_cast<unsigned>(atoi(target + 3));
    CHECK((flags & 0xff) == sm || ((flags >> 8) & 0xff) == sm);
    loom_code_destroy(code);

    p = Params(LOOM_BACKEND_CUDA, LOOM_MODULE_CUDA_PTX, target, kSaxpy);
    REQUIRE_OK(loom_code_compile(&p, &code, err, sizeof err));
    std::string ptx(static_cast<const char*>(loom_code_data(code)), loom_code_size(code));
    std::string want = std::string(".target ") + target;
    CHECK(ptx.find(want) != std::string::npos);
    CHECK(ptx.find(".entry saxpy") != std::string::npos);
    loom_code_destroy(code);
  }
}

LOOM_TEST(CompileErrorKeepsTheWholeLog) {
  if (!HaveNvrtc()) return;
  std::string source = "extern \"C\" __global__ void broken(int* p) {\n";
  for (int i = 0; i < 50; i++) source += "  p[" + std::to_string(i) + "] = undefined_" + std::to_string(i) + ";\n";
  source += "}\n";
  loom_code_compile_params p =
      Params(LOOM_BACKEND_CUDA, LOOM_MODULE_CUDA_CUBIN, "sm_90", source.c_str());
  loom_code* code = nullptr;
  char err[LOOM_ERROR_CAPACITY] = {};
  CHECK_STATUS(LOOM_ERR_COMPILE, loom_code_compile(&p, &code, err, sizeof err));
  CHECK(strstr(err, "undefined_0") != nullptr);
  CHECK(strlen(err) == sizeof err - 1);  // truncated: the log is longer than the buffer
  REQUIRE(code != nullptr);
  CHECK_EQ(loom_code_size(code), uint64_t{0});
  CHECK(loom_code_data(code) == nullptr);
  std::string log = loom_code_log(code);
  CHECK(log.find("saxpy.cu(51)") != std::string::npos);  // the last line's error is kept
  CHECK(log.find("undefined_49") != std::string::npos);
  loom_code_destroy(code);
  p.target = "sm_9x";
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_code_compile(&p, &code, err, sizeof err));
  CHECK(code == nullptr);
  CHECK(strstr(err, "sm_9x is not sm_XX") != nullptr);
  p.target = "sm_90";
  p.format = LOOM_MODULE_CUDA_SOURCE;
  CHECK_STATUS(LOOM_ERR_INVALID_ARGUMENT, loom_code_compile(&p, &code, err, sizeof err));
  CHECK(code == nullptr);
}

}  // namespace

int main() { return loomtest::RunAll(); }
