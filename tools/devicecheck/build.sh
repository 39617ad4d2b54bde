#!/usr/bin/env bash
# tools/devicecheck/build.sh: the build half of the device check. Runs on a machine like ours (Go,
# g++, no GPU) and writes a self-contained folder, out/devicecheck/, that run.sh executes on a GPU
# machine which has the NVIDIA driver, NVRTC and nvcc but no Go toolchain and no network:
#
#   tools/devicecheck/build.sh
#   (carry out/devicecheck to the GPU machine, e.g. with the device tool's carry)
#   bash out/devicecheck/run.sh          # prints the table, writes out/devicecheck/devicecheck.log
#
# What it builds, each a test binary of the CUDA backend:
#   shim_cuda_test   shim/tests/cuda_test.cc: the C ABI on a real GPU (NVRTC kernel, copies, fills,
#                    shared memory, events, host callbacks, explicit and captured graphs with
#                    in-place updates, sticky injected faults)
#   shim_abi_test    shim/tests/abi_test.cc: the ABI contract, now with a driver present
#   native.test      go test -c of go/native: its TestCUDA* tests (NVRTC kernels against Go,
#                    graph and capture replay, a fenced NativeSession on a CUDA runtime)
#   shim_compile_test shim/tests/compile_test.cc: loom_code_compile (NVRTC without a device)
#   device.test      go test -c of go/session/internal/device: its TestCUDA* tests (Loom kernels
#                    compiled to CUDA C, loaded through NVRTC, recorded graphs against sequential
#                    execution)
#   exec.test        go test -c of go/session/internal/exec: TestCUDAShippedCubinsLoad (every
#                    cubin kernels/aot ships for the GPU's target, loaded by the driver alone)
#   ep.test          go test -c of go/session/internal/ep: TestCUDAProvider
# The folder is packed into out/devicecheck.tar.gz as well (the test binaries embed the shipped
# kernels: tens of MB each), which is what the device tool carries.
# Binaries link libstdc++ and libgcc statically; glibc stays dynamic because the driver is loaded
# with dlopen (a fully static binary cannot dlopen libcuda reliably).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root=$PWD
out=$root/out/devicecheck
rm -rf "$out"
mkdir -p "$out/bin"

cxxflags=(-std=c++17 -O2 -g -Wall -Wextra -I"$root/shim/include" -I"$root/shim/src")
shim_srcs=("$root"/shim/src/*.cc)
for suite in cuda abi compile; do
  echo "building shim_${suite}_test"
  g++ "${cxxflags[@]}" "$root/shim/tests/${suite}_test.cc" "${shim_srcs[@]}" \
    -static-libstdc++ -static-libgcc -ldl -lpthread -o "$out/bin/shim_${suite}_test"
done

echo "building native.test, device.test, exec.test and ep.test"
# -race is left out: the race runtime wants a newer glibc than some GPU images have. -s -w: no
# symbol tables (the binaries are carried to the GPU machine).
gotest() { # DIR PKG OUT
  (cd "$1" && GOTOOLCHAIN=local CGO_LDFLAGS="-static-libstdc++ -static-libgcc" \
    go test -c -ldflags="-s -w" -o "$out/bin/$3" "$2")
}
gotest go/native . native.test
gotest go/session ./internal/device device.test
gotest go/session ./internal/exec exec.test
gotest go/session ./internal/ep ep.test

cp tools/devicecheck/run.sh "$out/run.sh"
chmod +x "$out/run.sh"
git rev-parse HEAD > "$out/COMMIT" 2>/dev/null || true
du -sh "$out"
tar -C "$root/out" -czf "$root/out/devicecheck.tar.gz" devicecheck
du -sh "$root/out/devicecheck.tar.gz"
echo "built $out; run it on the GPU machine with: bash out/devicecheck/run.sh"
