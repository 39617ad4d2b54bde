// harness.h: a tiny test harness for the shim's C++ test programs (no external framework).
//
//   LOOM_TEST(name) { CHECK(...); REQUIRE_OK(loom_...); SKIP("why"); }
//   int main(int argc, char** argv) { return loomtest::RunAll(); }
//
// CHECK* record a failure and go on; REQUIRE* record it and leave the test. RunAll prints one line
// per test ([ OK ], [ FAIL ], [ SKIP ] with the reason), a summary, and returns 1 on any failure.
// LOOM_TEST_FILTER=substring runs only the tests whose names contain it; LOOM_TEST_SKIP=substring
// leaves out those whose names contain it.
#ifndef LOOM_SHIM_TESTS_HARNESS_H_
#define LOOM_SHIM_TESTS_HARNESS_H_

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "loom/loom.h"

namespace loomtest {

struct TestCase {
  const char* name;
  void (*fn)();
};

inline std::vector<TestCase>& Registry() {
  static std::vector<TestCase> tests;
  return tests;
}

struct Registrar {
  Registrar(const char* name, void (*fn)()) { Registry().push_back({name, fn}); }
};

struct State {
  int failures = 0;
  bool skipped = false;
  std::string skip_reason;
};

inline State& Current() {
  static State state;
  return state;
}

inline void Fail(const char* file, int line, const std::string& what) {
  fprintf(stderr, "    %s:%d: check failed: %s\n", file, line, what.c_str());
  Current().failures++;
}

inline void Skip(const std::string& reason) {
  Current().skipped = true;
  Current().skip_reason = reason;
}

inline std::string Show(loom_status status) {
  return std::string(loom_status_string(status)) + " (" + std::to_string(status) + ")";
}
inline std::string Show(const char* text) {
  return text ? "\"" + std::string(text) + "\"" : "NULL";
}
inline std::string Show(const std::string& text) { return "\"" + text + "\""; }
template <typename T>
std::string Show(const T& value) {
  std::ostringstream out;
  if (std::is_same<T, uint8_t>::value || std::is_same<T, int8_t>::value) {
    out << static_cast<int>(value);
  } else {
    out << value;
  }
  return out.str();
}

template <typename A, typename B>
std::string DescribeEq(const char* a_text, const char* b_text, const A& a, const B& b) {
  return std::string(a_text) + " == " + b_text + " (" + Show(a) + " vs " + Show(b) + ")";
}

inline int RunAll() {
  // LOOM_TEST_FILTER runs only the tests whose names contain it; LOOM_TEST_SKIP leaves out those
  // whose names contain it (as go test's -run and -skip).
  const char* filter = getenv("LOOM_TEST_FILTER");
  const char* leave_out = getenv("LOOM_TEST_SKIP");
  if (leave_out != nullptr && *leave_out == '\0') leave_out = nullptr;
  int passed = 0, failed = 0, skipped = 0;
  for (const TestCase& test : Registry()) {
    if (filter != nullptr && strstr(test.name, filter) == nullptr) continue;
    if (leave_out != nullptr && strstr(test.name, leave_out) != nullptr) continue;
    Current() = State();
    printf("[ RUN  ] %s\n", test.name);
    fflush(stdout);
    test.fn();
    if (Current().failures > 0) {
      printf("[ FAIL ] %s (%d failed checks)\n", test.name, Current().failures);
      failed++;
    } else if (Current().skipped) {
      printf("[ SKIP ] %s: %s\n", test.name, Current().skip_reason.c_str());
      skipped++;
    } else {
      printf("[  OK  ] %s\n", test.name);
      passed++;
    }
    fflush(stdout);
  }
  printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed > 0 ? 1 : 0;
}

}  // namespace loomtest

#define LOOM_TEST(name)                                       \
  static void name();                                         \
  static ::loomtest::Registrar name##_registrar(#name, name); \
  static void name()

#define CHECK(cond)                                           \
  do {                                                        \
    if (!(cond)) ::loomtest::Fail(__FILE__, __LINE__, #cond); \
  } while (0)

#define REQUIRE(cond)                              \
  do {                                             \
    if (!(cond)) {                                 \
      ::loomtest::Fail(__FILE__, __LINE__, #cond); \
      return;                                      \
    }                                              \
  } while (0)

#define LOOM_CHECK_EQ_IMPL(a, b, on_fail)                                                     \
  do {                                                                                        \
    const auto& loom_a_ = (a);                                                                \
    const auto& loom_b_ = (b);                                                                \
    if (!(loom_a_ == loom_b_)) {                                                              \
      ::loomtest::Fail(__FILE__, __LINE__, ::loomtest::DescribeEq(#a, #b, loom_a_, loom_b_)); \
      on_fail;                                                                                \
    }                                                                                         \
  } while (0)

#define CHECK_EQ(a, b) LOOM_CHECK_EQ_IMPL(a, b, (void)0)
#define REQUIRE_EQ(a, b) LOOM_CHECK_EQ_IMPL(a, b, return )
// Status checks name the status on failure.
#define CHECK_STATUS(expected, expr) CHECK_EQ(static_cast<loom_status>(expr), expected)
#define REQUIRE_STATUS(expected, expr) REQUIRE_EQ(static_cast<loom_status>(expr), expected)
#define REQUIRE_OK(expr) REQUIRE_STATUS(LOOM_OK, expr)
#define CHECK_OK(expr) CHECK_STATUS(LOOM_OK, expr)

#define SKIP(reason)          \
  do {                        \
    ::loomtest::Skip(reason); \
    return;                   \
  } while (0)

#endif  // LOOM_SHIM_TESTS_HARNESS_H_
