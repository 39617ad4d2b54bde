#!/usr/bin/env bash
# tools/gpu_test.sh: the test of a gpu_test target (tools/defs.bzl): runs a CUDA test binary
# (its runfiles path, then its arguments) on a GPU executor and fails where the device check's
# run.sh fails: on a nonzero exit, on a skipped test (the CUDA tests skip without a driver or a
# device; on a GPU executor that means the executor is not one) and on "no tests to run" (a
# -test.run pattern that matches nothing). The binary's output goes to the test log.
set -uo pipefail
if [ $# -lt 1 ]; then
  echo "usage: gpu_test.sh BINARY [ARGS...]" >&2
  exit 2
fi
bin=$1
shift
# NVRTC_ENV's $(rootpath) is relative to the workspace's runfiles directory, the directory this
# runs in; a go_test changes directory before it loads NVRTC.
if [ -n "${LOOM_NVRTC_LIBRARY:-}" ] && [ "${LOOM_NVRTC_LIBRARY#/}" = "$LOOM_NVRTC_LIBRARY" ]; then
  export LOOM_NVRTC_LIBRARY="$PWD/$LOOM_NVRTC_LIBRARY"
fi
out="${TEST_TMPDIR:-$(mktemp -d)}/gpu_test.out"
if command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>&1 | head -n 1)"
else
  echo "gpu: nvidia-smi not found on this executor"
fi
echo "nvrtc: ${LOOM_NVRTC_LIBRARY:-not set}"
"$bin" "$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
  echo "gpu_test: $bin exited with status $rc" >&2
  exit "$rc"
fi
if grep -q -E '^ *(--- SKIP|SKIP|\[ SKIP \])' "$out"; then
  echo "gpu_test: tests were skipped (is this executor a GPU machine with the NVIDIA driver?):" >&2
  grep -E '^ *(--- SKIP|SKIP|\[ SKIP \])' "$out" | head -n 20 >&2
  exit 1
fi
if grep -q 'no tests to run' "$out"; then
  echo "gpu_test: no test matched the arguments $*" >&2
  exit 1
fi
exit 0
