#!/usr/bin/env bash
# tools/devicecheck/run.sh: the run half of the device check (copied into out/devicecheck by
# build.sh). Needs only bash, coreutils and the NVIDIA driver. Runs each CUDA test binary with a
# time limit, prints a short pass/fail table, and writes the full log to devicecheck.log beside
# this script (and to $OUT/devicecheck.log when $OUT is set, so the device tool brings it back).
# A skipped test counts as a failure here: on a GPU machine it means the device was not found.
# Total budget: well under 8 minutes (each step has its own limit below; the suite and the
# benchmarks take most of it).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log=$here/devicecheck.log
: > "$log"
rows=()
failures=0

note() { echo "$*" | tee -a "$log"; }

note "== devicecheck $(cat "$here/COMMIT" 2>/dev/null) on $(hostname) at $(date -u +%FT%TZ)"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader >>"$log" 2>&1
  note "gpu: $(nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>&1 | head -1)"
else
  note "gpu: nvidia-smi not found"
fi
command -v nvcc >/dev/null && note "nvcc: $(nvcc --version | tail -1)"

# NVRTC: the shim tries libnvrtc.so* on the loader's path; GPU images often keep it elsewhere.
# Look in the toolkits, their targets/ folders and Python's site-packages (the nvidia-cuda-nvrtc
# wheels), and name the first found in LOOM_NVRTC_LIBRARY. LOOM_REQUIRE_NVRTC=1: a test that
# needs NVRTC fails without it instead of skipping.
if [ -z "${LOOM_NVRTC_LIBRARY:-}" ]; then
  for candidate in /usr/local/cuda*/lib64/libnvrtc.so* /usr/local/cuda*/targets/*/lib/libnvrtc.so* \
      /usr/lib/x86_64-linux-gnu/libnvrtc.so* \
      $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null | xargs -n1 -I{} sh -c 'ls {}/nvidia/cuda_nvrtc/lib/libnvrtc.so* {}/nvidia/cu*/lib/libnvrtc.so* 2>/dev/null'); do
    case "$candidate" in *builtins* | *alt*) continue ;; esac
    if [ -f "$candidate" ]; then export LOOM_NVRTC_LIBRARY=$candidate; break; fi
  done
fi
note "nvrtc: ${LOOM_NVRTC_LIBRARY:-not found (the shim tries libnvrtc.so* on the loader path)}"
export LOOM_REQUIRE_NVRTC=1

# step NAME LIMIT_SECONDS COMMAND...: runs one check, records PASS/FAIL/SKIP and its duration.
step() {
  local name=$1 limit=$2; shift 2
  note ""
  note "== $name: $*"
  local start=$SECONDS
  local out=$here/step.out
  timeout --kill-after=10 "$limit" "$@" >"$out" 2>&1
  local rc=$?
  cat "$out" >>"$log"
  local took=$((SECONDS - start))
  local verdict=PASS
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then verdict="FAIL (timeout ${limit}s)"
  elif [ $rc -ne 0 ]; then verdict="FAIL (exit $rc)"
  elif grep -q -E '^ *(--- SKIP|SKIP|\[ SKIP \])' "$out"; then verdict="FAIL (tests skipped)"
  elif grep -q 'no tests to run' "$out"; then verdict="FAIL (no tests ran)"
  fi
  [[ $verdict == FAIL* ]] && failures=$((failures + 1))
  rows+=("$(printf '%-34s %-28s %4ss' "$name" "$verdict" "$took")")
  # After every step, so that a call stopped at its time limit still brings the log back.
  [ -n "${OUT:-}" ] && cp "$log" "$OUT/devicecheck.log"
  return 0
}

cd "$here/bin" || exit 2
# CudaWithoutDriverSaysSo skips where a driver exists (as native.test's WithoutDriver below).
LOOM_TEST_SKIP=WithoutDriver step "shim ABI contract" 45 ./shim_abi_test
step "shim CUDA backend" 150 ./shim_cuda_test
step "shim NVRTC without a device" 60 ./shim_compile_test
step "go/native CUDA tests" 120 ./native.test -test.run 'CUDA|NoDriver' -test.skip 'WithoutDriver' -test.v -test.count=1
step "go/session device CUDA tests" 120 ./device.test -test.run 'CUDA' -test.v -test.count=1
step "shipped cubins load" 90 ./exec.test -test.run 'TestCUDAShippedCubinsLoad' -test.v -test.count=1
step "cuda provider" 60 ./ep.test -test.run 'CUDA' -test.v -test.count=1
export LOOM_NODE_TESTS=$here/node-tests
step "node suite: cuda vs host" 200 ./conformance.test -test.run 'TestNodeConformanceCUDA$' -test.v -test.count=1
# The real models (tests read testdata/ from the working directory, the published models from
# LOOM_MODELS_DIR): each setup of TestRealModel*, the GPU's among them, against the references.
step "real models: cuda vs references" 150 env -C "$here/session" LOOM_MODELS_DIR="$here/models" \
  ../bin/session.test -test.run 'TestRealModel' -test.v -test.count=1
# The benchmarks (bench.py): microbenchmarks against cuBLAS and a device copy, the real models on
# the GPU, the host and ONNX Runtime. Its table is printed below the checks'.
step "benchmarks" 200 python3 "$here/bench.py" "$here/bin/loom" "$here/models" --testdata "$here/session/testdata" --runs 30

{
  echo ""
  sed -n '/^benchmark  /,$p' "$here/step.out"
  echo ""
  echo "check                              result                       time"
  for r in "${rows[@]}"; do echo "$r"; done
  echo "full log: $log"
} | tee -a "$log"
[ -n "${OUT:-}" ] && cp "$log" "$OUT/devicecheck.log"
[ $failures -eq 0 ]
