#!/usr/bin/env bash
# tools/bazel_test.sh: the Bazel part of Loom's test command.
#
# Installs Bazel 4.2.3 and the rule sets it would otherwise download (Debian
# packages) when they are missing, runs `bazel test //...`, and ends with the
# line `bazel: N passed, N failed`, counted from Bazel's test summary. Extra
# arguments go to `bazel test` (e.g. --config=race, or target patterns that
# replace //...). Exit status: 0 when every test passed, else Bazel's.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

apt_packages=(bazel-bootstrap bazel-rules-cc bazel-rules-java bazel-rules-proto bazel-skylib)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bazel_test: installing ${missing[*]}" >&2
  sudo=()
  [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  if ! { "${sudo[@]}" apt-get update -qq && "${sudo[@]}" apt-get install -y -qq "${missing[@]}"; } >&2; then
    echo "bazel_test: could not install ${missing[*]}" >&2
    echo "bazel: 0 passed, 1 failed"
    exit 1
  fi
fi

# The Go SDK and the C/C++ toolchain are pinned (third_party/toolchains.bzl): neither the build
# nor the repository rules need the machine's Go or its gcc. Go modules are downloaded by the
# pinned Go (@loom_go, third_party/go_module.bzl).

targets=()
flags=()
for arg in "$@"; do
  case "$arg" in
    -//* | -@*) targets+=("$arg") ;; # a negative target pattern
    -*) flags+=("$arg") ;;
    *) targets+=("$arg") ;;
  esac
done
[ ${#targets[@]} -eq 0 ] && targets=(//...)

# Bazel's Go module pins must match what the go command builds.
pins_failed=0
third_party/check_go_sum.sh || pins_failed=1

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# --keep_going: a target that fails to build shows in the summary as
# "FAILED TO BUILD" or "NO STATUS" instead of hiding the other results.
bazel test --keep_going --test_output=errors --color=no --curses=no \
  "${flags[@]}" -- "${targets[@]}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

# Summary lines: "//pkg:target   (cached) PASSED in 0.1s", "... FAILED in 2s",
# "... FAILED TO BUILD", "... NO STATUS", "... TIMEOUT in 60s", "... FLAKY, ...".
passed=$(grep -cE '^//[^ ]+ +(\(cached\) +)?PASSED( |$)' "$log")
failed=$(grep -cE '^//[^ ]+ +(\(cached\) +)?(FAILED|FAILED TO BUILD|NO STATUS|TIMEOUT|INCOMPLETE|FLAKY)( |,|$)' "$log")
# Targets that failed analysis (a bad BUILD file) have no summary line.
unanalyzed=$(grep -cE "^WARNING: errors encountered while analyzing target '[^']+': it will not be built" "$log")
failed=$((failed + unanalyzed))

case "$status" in
  0)
    # A FLAKY test passed on a retry: reported, and counted, as a failure.
    [ "$failed" -gt 0 ] && status=3
    ;;
  4) status=0 ;; # the build passed and there were no tests to run
  *)
    if [ "$failed" -eq 0 ]; then
      # Bazel stopped before any test had a result (a loading or analysis
      # error): count the run itself as one failure.
      echo "bazel_test: bazel test exited with status $status before reporting test results" >&2
      failed=1
    fi
    ;;
esac
if [ "$pins_failed" -ne 0 ]; then
  failed=$((failed + 1))
  [ "$status" -eq 0 ] && status=1
fi
echo "bazel: $passed passed, $failed failed"
exit "$status"
