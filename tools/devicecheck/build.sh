#!/usr/bin/env bash
# tools/devicecheck/build.sh: the build half of the device check. Runs on a machine like ours (Go,
# g++, no GPU) and writes a self-contained folder, out/devicecheck/, that run.sh executes on a GPU
# machine which has the NVIDIA driver, NVRTC and nvcc but no Go toolchain and no network:
#
#   tools/devicecheck/build.sh
#   (carry out/devicecheck to the GPU machine, e.g. with the device tool's carry)
#   bash out/devicecheck/run.sh          # prints the table, writes out/devicecheck/devicecheck.log
#
# What it builds: the test binaries of the GPU test targets (the targets `bazel test
# --config=gpu` runs: tools/defs.bzl's gpu_test, docs/bazel.md), built by Bazel and copied from
# bazel-bin, each a test binary of the CUDA backend:
#   shim_cuda_test    //shim:cuda_test: the C ABI on a real GPU (NVRTC kernel, copies, fills,
#                     shared memory above 48 KiB, mapped memory, events, host callbacks,
#                     explicit and captured graphs with in-place updates, sticky injected faults)
#   shim_abi_test     //shim:abi_test: the ABI contract, now with a driver present
#   shim_compile_test //shim:compile_test: loom_code_compile (NVRTC without a device)
#   native.test       //go/native:native_test: its TestCUDA* tests (NVRTC kernels against Go,
#                     graph and capture replay, a fenced NativeSession on a CUDA runtime)
#   device.test       //go/session/internal/device:device_test: its TestCUDA* tests (Loom
#                     kernels compiled to CUDA C, loaded through NVRTC, recorded graphs against
#                     sequential execution)
#   exec.test         //go/session/internal/exec:exec_test: TestCUDAShippedCubinsLoad (every
#                     cubin kernels/aot ships for the GPU's target, loaded by the driver alone)
#   ep.test           //go/session/internal/ep:ep_test: TestCUDAProvider
#   conformance.test  //go/session/conformance:conformance_test: TestNodeConformanceCUDA (the
#                     ONNX node suite through the cuda provider against the host provider; the
#                     suite, @onnx_node_tests, is copied beside it as node-tests/)
#   session.test      //go/session:session_test: its TestRealModel* tests, each model also on the
#                     GPU (the published models fetched into models/, testdata/ copied beside)
#   loom              //tools/cmd/loom:loom, which bench.py times on the GPU
# The folder is packed into out/devicecheck.tar.xz as well (the test binaries embed the shipped
# kernels: tens of MB each), which is what the device tool carries.
# The binaries link libstdc++ and libgcc statically (.bazelrc's BAZEL_LINKOPTS/BAZEL_LINKLIBS;
# this script checks with ldd); glibc stays dynamic because the driver is loaded with dlopen (a
# fully static binary cannot dlopen libcuda reliably).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root=$PWD
out=$root/out/devicecheck
rm -rf "$out"
mkdir -p "$out/bin"

# label  binary-in-bazel-bin  name-in-out/bin
binaries=(
  "//shim:cuda_test shim/cuda_test shim_cuda_test"
  "//shim:abi_test shim/abi_test shim_abi_test"
  "//shim:compile_test shim/compile_test shim_compile_test"
  "//go/native:native_test go/native/native_test_/native_test native.test"
  "//go/session/internal/device:device_test go/session/internal/device/device_test_/device_test device.test"
  "//go/session/internal/exec:exec_test go/session/internal/exec/exec_test_/exec_test exec.test"
  "//go/session/internal/ep:ep_test go/session/internal/ep/ep_test_/ep_test ep.test"
  "//go/session/conformance:conformance_test go/session/conformance/conformance_test_/conformance_test conformance.test"
  "//go/session:session_test go/session/session_test_/session_test session.test"
)
# Not tests: the command bench.py times.
tools=(
  "//tools/cmd/loom:loom tools/cmd/loom/loom_/loom loom"
)
binaries+=("${tools[@]}")
labels=()
for b in "${binaries[@]}"; do labels+=("${b%% *}"); done
if [ -z "${GOROOT:-}" ] && ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
if ! command -v bazel >/dev/null; then
  echo "devicecheck/build.sh: installing Bazel (Debian's bazel-bootstrap and its rules)" >&2
  sudo=()
  [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  "${sudo[@]}" apt-get update -qq >&2
  "${sudo[@]}" apt-get install -y -qq bazel-bootstrap bazel-rules-cc bazel-rules-java bazel-rules-proto bazel-skylib >&2
fi
echo "bazel build ${labels[*]}"
bazel build --color=no --curses=no "${labels[@]}"
bin=$(bazel info bazel-bin 2>/dev/null)
for b in "${binaries[@]}"; do
  read -r _ path name <<<"$b"
  cp "$bin/$path" "$out/bin/$name"
  chmod u+w "$out/bin/$name"
  strip --strip-debug "$out/bin/$name" 2>/dev/null || true
  # Only glibc's libraries: the GPU machine's libstdc++ (if any) is not ours.
  if ldd "$out/bin/$name" | grep -v -E 'linux-vdso|ld-linux|lib(c|m|dl|pthread|resolv|rt)\.so' | grep -q .; then
    echo "devicecheck/build.sh: $name links more than glibc:" >&2
    ldd "$out/bin/$name" >&2
    exit 1
  fi
done

# The node suite for conformance.test (Bazel fetched it as @onnx_node_tests).
cp -R "$(bazel info output_base 2>/dev/null)/external/onnx_node_tests/node" "$out/node-tests"
chmod -R u+w "$out/node-tests"

# session.test's real-model tests read testdata/ from their working directory (run.sh runs
# them in session/) and the published models from LOOM_MODELS_DIR (models/, fetched here by
# tools/models/fetch.sh with their pinned sha256; bench.py times them too).
mkdir -p "$out/session"
cp -R go/session/testdata "$out/session/testdata"
LOOM_MODELS_DIR="$out/models" bash tools/models/fetch.sh >&2

cp tools/devicecheck/run.sh "$out/run.sh"
cp tools/devicecheck/bench.py "$out/bench.py"
chmod +x "$out/run.sh"
git rev-parse HEAD > "$out/COMMIT" 2>/dev/null || true
du -sh "$out"
# xz with a dictionary larger than a test binary: the binaries embed the same shipped kernels
# (tens of MB each), which a gzip window (32 KiB) cannot see twice. 4x smaller than gzip here.
rm -f "$root/out/devicecheck.tar.gz"
tar -C "$root/out" -cf - devicecheck | xz -9 --lzma2=dict=192MiB -T1 > "$root/out/devicecheck.tar.xz"
size=$(stat -c %s "$root/out/devicecheck.tar.xz")
echo "out/devicecheck.tar.xz: $((size >> 20)) MiB"
if [ "$size" -gt $((56 << 20)) ]; then
  echo "devicecheck/build.sh: out/devicecheck.tar.xz is over 56 MiB; with what else travels it would pass the device tool's 64 MiB" >&2
  exit 1
fi
echo "built $out; run it on the GPU machine with: bash out/devicecheck/run.sh (docs/devicecheck.md: how to carry it)"
