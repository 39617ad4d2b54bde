#!/usr/bin/env bash
# run_sanitizers.sh: builds the shim's test suites with g++ and runs them, without Bazel:
#   plain  -O1 -Wall -Wextra -Werror, plus a check that the shim's .cc files compile as one
#          translation unit (as go/native includes them)
#   asan   AddressSanitizer + LeakSanitizer + UndefinedBehaviorSanitizer
#   tsan   ThreadSanitizer
# Usage: shim/tests/run_sanitizers.sh [plain] [asan] [tsan]   (default: all three)
# Environment: CXX (default g++), LOOM_SHIM_BUILD_DIR (default <repo>/out/shim-tests).
# Needs the sanitizer runtimes of the compiler; for Debian's g++ 12: apt-get install libasan8
# libubsan1 libtsan2 (normally pulled in by g++-12 itself).
set -euo pipefail

tests_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
shim_dir="$(dirname "$tests_dir")"
repo_dir="$(dirname "$shim_dir")"
out_dir="${LOOM_SHIM_BUILD_DIR:-$repo_dir/out/shim-tests}"
cxx="${CXX:-g++}"
modes=("$@")
[ ${#modes[@]} -eq 0 ] && modes=(plain asan tsan)

common=(-std=c++17 -Wall -Wextra -Werror -g -O1 -fno-omit-frame-pointer -I"$shim_dir/include")
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"

failed=()
passed=()
for mode in "${modes[@]}"; do
  case "$mode" in
    plain) flags=() ;;
    asan) flags=(-fsanitize=address,undefined -fno-sanitize-recover=undefined) ;;
    tsan) flags=(-fsanitize=thread) ;;
    *) echo "unknown mode '$mode' (expected plain, asan or tsan)" >&2; exit 2 ;;
  esac
  dir="$out_dir/$mode"
  mkdir -p "$dir/obj"
  if [ ${#flags[@]} -gt 0 ] && ! echo 'int main() { return 0; }' |
      "$cxx" -x c++ "${flags[@]}" - -o "$dir/probe" 2>/dev/null; then
    echo "$mode: $cxx cannot link with ${flags[*]}; install the sanitizer runtimes" \
         "(Debian, g++ 12: libasan8 libubsan1 libtsan2)" >&2
    failed+=("$mode:toolchain")
    continue
  fi
  echo "== $mode: building in $dir"
  objects=()
  for source in "$shim_dir"/src/*.cc; do
    object="$dir/obj/$(basename "${source%.cc}").o"
    "$cxx" "${common[@]}" "${flags[@]}" -c "$source" -o "$object"
    objects+=("$object")
  done
  "$cxx" "${common[@]}" "${flags[@]}" -fPIC -shared "$tests_dir/test_kernels_so.cc" \
    -o "$dir/libtest_kernels.so"
  if [ "$mode" = plain ]; then
    # go/native compiles the shim as one translation unit: names must not clash across files.
    printf '#include "%s"\n' "$shim_dir"/src/*.cc |
      "$cxx" "${common[@]}" -x c++ -fsyntax-only -I"$shim_dir/src" -
    echo "$mode: shim sources compile as one translation unit"
  fi
  for suite in abi host cuda compile; do
    "$cxx" "${common[@]}" "${flags[@]}" "$tests_dir/${suite}_test.cc" "${objects[@]}" \
      -ldl -lpthread -o "$dir/${suite}_test"
  done
  for suite in abi host cuda compile; do
    echo "== $mode: ${suite}_test"
    if (cd "$dir" && "./${suite}_test"); then
      passed+=("$mode:${suite}_test")
    else
      failed+=("$mode:${suite}_test")
    fi
  done
done

echo "passed: ${passed[*]:-none}"
echo "failed: ${failed[*]:-none}"
[ ${#failed[@]} -eq 0 ]
