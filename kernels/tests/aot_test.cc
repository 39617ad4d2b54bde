// aot_test: representative variants of the op library (kernels/*.loom) compiled ahead of time
// (loom_kernel rules in BUILD.bazel, as every shipped variant is) and linked into this binary, run through the shim's host backend as static modules
// (LOOM_MODULE_HOST_STATIC) and compared with a reference on fresh random inputs. Nothing here
// compiles C at run time: the kernels registered themselves before main.
//
// The scalar blob layouts and launch geometries below mirror the kernels' parameter lists and
// launch programs; the Metadata test checks them against the JSON loomc wrote.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "shim/tests/harness.h"

namespace {

// The target every kernel in BUILD.bazel is compiled for.
constexpr const char* kTarget = "host-x86_64-v3";

std::mt19937_64& Rng() {
  static std::mt19937_64 rng = [] {
    uint64_t seed = (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
    printf("seed %llu\n", static_cast<unsigned long long>(seed));
    return std::mt19937_64(seed);
  }();
  return rng;
}

int64_t RandInt(int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(Rng());
}

std::vector<float> RandFloats(size_t n) {
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(Rng());
  return v;
}

bool Close(double got, double want, double tolerance) {
  return std::fabs(got - want) <= tolerance * (1.0 + std::fabs(want));
}

// ---------------------------------------------------------------- metadata

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The raw JSON value (number or string, quotes kept) of the first "key" at or after `from`.
std::string JsonValue(const std::string& json, const std::string& key, size_t from = 0) {
  size_t at = json.find("\"" + key + "\": ", from);
  if (at == std::string::npos) return "";
  at += key.size() + 4;
  size_t end = json.find_first_of(",\n}", at);
  return json.substr(at, end - at);
}

// The value of `key` in the parameter named `param`.
std::string ParamField(const std::string& json, const std::string& param, const std::string& key) {
  size_t at = json.find("\"name\": \"" + param + "\"");
  if (at == std::string::npos) return "";
  return JsonValue(json, key, at);
}

// ---------------------------------------------------------------- running kernels

struct Host {
  loom_device* device = nullptr;
  loom_stream* stream = nullptr;
  std::vector<loom_module*> modules;
  std::vector<loom_buffer*> buffers;

  Host() {
    loom_device_open_params params = {};
    params.struct_size = sizeof(params);
    params.backend = LOOM_BACKEND_HOST;
    params.worker_threads = 2;
    if (loom_device_open(&params, &device, nullptr, 0) != LOOM_OK) return;
    if (loom_stream_create(device, &stream) != LOOM_OK) stream = nullptr;
  }
  ~Host() {
    loom_stream_destroy(stream);
    for (loom_buffer* b : buffers) loom_buffer_destroy(b);
    for (loom_module* m : modules) loom_module_destroy(m);
    loom_device_destroy(device);
  }
  std::string Error() {
    char text[LOOM_ERROR_CAPACITY];
    loom_device_last_error(device, text, sizeof(text));
    return text;
  }
  // The kernel `name` of the static module `module`, or NULL (with the shim's message printed).
  loom_kernel* Kernel(const char* module, const char* name) {
    loom_module_load_params load = {};
    load.struct_size = sizeof(load);
    load.format = LOOM_MODULE_HOST_STATIC;
    load.target = kTarget;
    load.name = module;
    loom_module* m = nullptr;
    if (loom_module_load(device, &load, &m) != LOOM_OK) {
      fprintf(stderr, "    module_load %s: %s\n", module, Error().c_str());
      return nullptr;
    }
    modules.push_back(m);
    loom_kernel* k = nullptr;
    if (loom_module_get_kernel(m, name, &k) != LOOM_OK) return nullptr;
    return k;
  }
  // A shared buffer holding `values` (or `bytes` of garbage: kernels must overwrite outputs).
  template <typename T>
  loom_buffer* Buffer(const std::vector<T>& values) {
    loom_buffer* b = nullptr;
    uint64_t bytes = values.size() * sizeof(T);
    if (loom_buffer_create(device, LOOM_MEMORY_SHARED, bytes == 0 ? 1 : bytes, &b) != LOOM_OK) {
      return nullptr;
    }
    buffers.push_back(b);
    if (bytes > 0) memcpy(loom_buffer_host_pointer(b), values.data(), bytes);
    return b;
  }
  loom_buffer* Garbage(size_t floats) {
    std::vector<float> v(floats, std::nanf(""));
    return Buffer(v);
  }
  // Launches and waits; returns the violation word (~0u if the launch failed).
  uint32_t Run(loom_kernel* kernel, const uint32_t grid[3], const uint32_t block[3],
               uint32_t shared, std::vector<loom_buffer*> bindings, const void* blob,
               uint32_t blob_bytes) {
    loom_buffer* violation = Buffer(std::vector<uint32_t>{0});
    std::vector<uint64_t> offsets(bindings.size(), 0);
    loom_launch_params p = {};
    p.struct_size = sizeof(p);
    memcpy(p.grid, grid, sizeof(p.grid));
    memcpy(p.block, block, sizeof(p.block));
    p.shared_bytes = shared;
    p.buffers = bindings.data();
    p.buffer_offsets = offsets.data();
    p.buffer_count = static_cast<uint32_t>(bindings.size());
    p.scalars = blob;
    p.scalar_bytes = blob_bytes;
    p.violation = violation;
    if (loom_kernel_launch(stream, kernel, &p) != LOOM_OK) return ~0u;
    if (loom_stream_synchronize(stream) != LOOM_OK) return ~0u;
    return *static_cast<uint32_t*>(loom_buffer_host_pointer(violation));
  }
};

template <typename T>
const T* Data(loom_buffer* b) {
  return static_cast<const T*>(loom_buffer_host_pointer(b));
}

uint32_t CeilDiv(int64_t a, int64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

// Scalar blobs: the device scalars in declaration order at their natural alignment.
struct UnaryBlob {
  float alpha;
  int64_t n;
};
struct NBlob {
  int64_t n;
};
struct BinaryBlob {
  int64_t d[6], as[6], bs[6];
  float scale;
  // The block index's divisors as (multiplier, shift) pairs (FASTDIV in elementwise.loom):
  // the tiles along d5 and d4, then d3, d2, d1.
  uint64_t div[10];
};
constexpr uint32_t kBinaryBlobBytes = sizeof(BinaryBlob);

// FastDiv is n / d == (n * m) >> s for n < 2^31 (the planners' fastDiv, written again here).
void FastDiv(int64_t d, uint64_t* m, uint64_t* s) {
  if (d <= 1) {
    *m = 1, *s = 0;
    return;
  }
  uint64_t l = 0;
  while ((int64_t{1} << l) < d) l++;
  *s = 31 + l;
  *m = ((uint64_t{1} << *s) + static_cast<uint64_t>(d) - 1) / static_cast<uint64_t>(d);
}
struct SoftmaxBlob {
  int64_t rows, cols;
};

// Row-major strides of a [d0, ..., d5] shape, with the broadcast dimensions' set to 0.
void Strides(const int64_t d[6], const bool broadcast[6], int64_t s[6], int64_t* size) {
  int64_t stride = 1;
  for (int i = 5; i >= 0; i--) {
    s[i] = broadcast[i] ? 0 : stride;
    if (!broadcast[i]) stride *= d[i];
  }
  *size = stride;
}

}  // namespace

LOOM_TEST(Metadata) {
  struct Expect {
    const char* name;
    const char* entry;
    uint32_t blob_bytes;
    std::vector<std::pair<const char*, const char*>> fields;  // param, access or offset
  };
  const Expect expects[] = {
      {"relu", "unary", sizeof(UnaryBlob), {{"y", "\"write\""}, {"alpha", "0"}, {"n", "8"}}},
      {"add_scalar", "binary_flat", sizeof(NBlob), {{"z", "\"write\""}, {"y", "\"read\""}, {"n", "0"}}},
      {"mul", "binary", kBinaryBlobBytes, {{"y", "\"read_write\""}, {"d3", "24"}, {"bs5", "136"}, {"scale", "144"}, {"mx", "152"}, {"s1", "224"}}},
      {"softmax", "softmax", sizeof(SoftmaxBlob), {{"y", "\"read_write\""}, {"cols", "8"}}},
      {"log_softmax", "softmax", sizeof(SoftmaxBlob), {{"x", "\"read\""}, {"rows", "0"}}},
  };
  for (const Expect& e : expects) {
    std::string json = ReadFile(std::string("kernels/") + e.name + "." + kTarget + ".json");
    REQUIRE(!json.empty());
    CHECK_EQ(JsonValue(json, "module"), "\"kernels/" + std::string(e.name) + "\"");
    CHECK_EQ(JsonValue(json, "target"), "\"" + std::string(kTarget) + "\"");
    CHECK_EQ(JsonValue(json, "entry"), "\"" + std::string(e.entry) + "\"");
    CHECK_EQ(JsonValue(json, "blob_bytes"), std::to_string(e.blob_bytes));
    for (const auto& f : e.fields) {
      bool is_access = f.second[0] == '"';
      CHECK_EQ(ParamField(json, f.first, is_access ? "access" : "offset"), std::string(f.second));
    }
  }
}

LOOM_TEST(TargetRules) {
  Host h;
  REQUIRE(h.device != nullptr);
  loom_device_props props = {};
  props.struct_size = sizeof(props);
  REQUIRE_OK(loom_device_get_props(h.device, &props));
  // The v3 baseline loads on this (v3 or v4) machine: checked by every test below. Code for an
  // architecture the device is not refuses to load.
  static const loom_host_kernel_entry entries[] = {
      {"nop", [](const loom_host_kernel_args*) {}}};
  REQUIRE_OK(loom_host_module_register("aot_test_arm", "host-aarch64-v8", entries, 1));
  loom_module_load_params load = {};
  load.struct_size = sizeof(load);
  load.format = LOOM_MODULE_HOST_STATIC;
  load.target = "host-aarch64-v8";
  load.name = "aot_test_arm";
  loom_module* m = nullptr;
  CHECK_STATUS(LOOM_ERR_TARGET_MISMATCH, loom_module_load(h.device, &load, &m));
  if (std::string(props.target) == "host-x86_64-v3") {
    // A level above the device's is refused too.
    REQUIRE_OK(loom_host_module_register("aot_test_v4", "host-x86_64-v4", entries, 1));
    load.target = "host-x86_64-v4";
    load.name = "aot_test_v4";
    CHECK_STATUS(LOOM_ERR_TARGET_MISMATCH, loom_module_load(h.device, &load, &m));
  }
}

LOOM_TEST(Relu) {
  Host h;
  loom_kernel* k = h.Kernel("kernels/relu", "unary");
  REQUIRE(k != nullptr);
  for (int trial = 0; trial < 3; trial++) {
    int64_t n = RandInt(1, 5000);
    std::vector<float> x = RandFloats(n);
    UnaryBlob blob = {0.01f, n};
    loom_buffer* y = h.Garbage(n);
    uint32_t grid[3] = {CeilDiv(n, 256), 1, 1}, block[3] = {256, 1, 1};
    REQUIRE_EQ(h.Run(k, grid, block, 0, {h.Buffer(x), y}, &blob, sizeof(blob)), 0u);
    for (int64_t i = 0; i < n; i++) REQUIRE_EQ(Data<float>(y)[i], x[i] > 0 ? x[i] : 0.0f);
  }
}

LOOM_TEST(AddScalar) {
  Host h;
  loom_kernel* k = h.Kernel("kernels/add_scalar", "binary_flat");
  REQUIRE(k != nullptr);
  int64_t n = RandInt(1, 5000);
  std::vector<float> x = RandFloats(n), y = RandFloats(1);
  loom_buffer* z = h.Garbage(n);
  NBlob blob = {n};
  uint32_t grid[3] = {CeilDiv(n, 1024), 1, 1}, block[3] = {1024, 1, 1};
  REQUIRE_EQ(h.Run(k, grid, block, 0, {h.Buffer(x), h.Buffer(y), z}, &blob, sizeof(blob)), 0u);
  for (int64_t i = 0; i < n; i++) REQUIRE_EQ(Data<float>(z)[i], x[i] + y[0]);
}

// mul (BX 256, BY 1), with broadcasting in random dimensions of either input.
LOOM_TEST(MulBroadcast) {
  Host h;
  loom_kernel* k = h.Kernel("kernels/mul", "binary");
  REQUIRE(k != nullptr);
  for (int trial = 0; trial < 3; trial++) {
    BinaryBlob blob;
    blob.scale = 1.0f;
    bool ba[6], bb[6];
    for (int i = 0; i < 6; i++) {
      blob.d[i] = RandInt(1, i == 5 ? 300 : 3);
      ba[i] = RandInt(0, 3) == 0;
      bb[i] = RandInt(0, 3) == 0;
    }
    int64_t asize, bsize, ys[6], ysize;
    bool none[6] = {false, false, false, false, false, false};
    Strides(blob.d, ba, blob.as, &asize);
    Strides(blob.d, bb, blob.bs, &bsize);
    Strides(blob.d, none, ys, &ysize);
    const int64_t divisors[5] = {CeilDiv(blob.d[5], 256), blob.d[4], blob.d[3], blob.d[2], blob.d[1]};
    for (int i = 0; i < 5; i++) FastDiv(divisors[i], &blob.div[2 * i], &blob.div[2 * i + 1]);
    std::vector<float> a = RandFloats(asize), b = RandFloats(bsize);
    loom_buffer* y = h.Garbage(ysize);
    uint32_t grid[3] = {static_cast<uint32_t>(CeilDiv(blob.d[5], 256) * blob.d[4] * blob.d[3] * blob.d[2] * blob.d[1] * blob.d[0]), 1, 1};
    uint32_t block[3] = {256, 1, 1};
    REQUIRE_EQ(h.Run(k, grid, block, 0, {h.Buffer(a), h.Buffer(b), y}, &blob, kBinaryBlobBytes), 0u);
    for (int64_t i = 0; i < ysize; i++) {
      int64_t ai = 0, bi = 0, rest = i;
      for (int d = 5; d >= 0; d--) {
        int64_t c = rest % blob.d[d];
        rest /= blob.d[d];
        ai += c * blob.as[d];
        bi += c * blob.bs[d];
      }
      REQUIRE_EQ(Data<float>(y)[i], a[ai] * b[bi]);
    }
  }
}

// softmax (BLOCK 64) and log-softmax (BLOCK 16) over random rows.
LOOM_TEST(Softmax) {
  Host h;
  for (int log = 0; log < 2; log++) {
    loom_kernel* k = h.Kernel(log ? "kernels/log_softmax" : "kernels/softmax", "softmax");
    REQUIRE(k != nullptr);
    const int64_t block_rows = log ? 16 : 64;
    SoftmaxBlob blob = {RandInt(1, 300), RandInt(1, 100)};
    std::vector<float> x = RandFloats(blob.rows * blob.cols);
    loom_buffer* y = h.Garbage(blob.rows * blob.cols);
    uint32_t grid[3] = {CeilDiv(blob.rows, block_rows), 1, 1};
    uint32_t block[3] = {static_cast<uint32_t>(block_rows), 1, 1};
    REQUIRE_EQ(h.Run(k, grid, block, 0, {h.Buffer(x), y}, &blob, sizeof(blob)), 0u);
    for (int64_t r = 0; r < blob.rows; r++) {
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < blob.cols; j++) m = std::max(m, double(x[r * blob.cols + j]));
      for (int64_t j = 0; j < blob.cols; j++) s += std::exp(x[r * blob.cols + j] - m);
      for (int64_t j = 0; j < blob.cols; j++) {
        double p = std::exp(x[r * blob.cols + j] - m) / s;
        double want = log ? std::log(p) : p;
        REQUIRE(Close(Data<float>(y)[r * blob.cols + j], want, 1e-5));
      }
    }
  }
}

int main() { return loomtest::RunAll(); }
