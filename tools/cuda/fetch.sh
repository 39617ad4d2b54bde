#!/usr/bin/env bash
# tools/cuda/fetch.sh: installs the CUDA compiler pieces Loom's tests and build tools use on a
# machine without a GPU or a CUDA toolkit, from PyPI wheels pinned by version and sha256:
#   NVRTC 12.9 (nvidia-cuda-nvrtc-cu12): compiles the op library's CUDA C to cubins, for
#     kernelgen (the shipped cubins) and the tests that compile every kernel;
#   cuobjdump (nvidia-cuda-cuobjdump): reads the cubins' resource usage (tools/cmd/cudareport);
#   nvdisasm (nvidia-cuda-nvdisasm, cuobjdump -sass runs it): the cubins' machine code, where
#     cudareport counts the integer divisions each thread runs.
# Into ${LOOM_CUDA_DIR:-~/.cache/loom-cuda}; files already there and verified are not fetched
# again. Prints the environment to use, one VAR=VALUE line each:
#   LOOM_NVRTC_LIBRARY=/…/libnvrtc.so.12   LOOM_CUOBJDUMP=/…/cuobjdump   LOOM_NVDISASM=/…/nvdisasm
# Usage: eval "$(tools/cuda/fetch.sh)"
set -euo pipefail

dir="${LOOM_CUDA_DIR:-$HOME/.cache/loom-cuda}"
mkdir -p "$dir/wheels"

# NVRTC's pin is the Bazel workspace's (@nvrtc in third_party/repositories.bzl), read from there
# so that the go.work build and Bazel test with the same wheel.
bzl="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/third_party/repositories.bzl"
nvrtc_sum=$(sed -n 's/^NVRTC_WHEEL_SHA256 = "\([0-9a-f]*\)"$/\1/p' "$bzl")
if [ ${#nvrtc_sum} -ne 64 ]; then
  echo "tools/cuda/fetch.sh: no NVRTC_WHEEL_SHA256 in $bzl" >&2
  exit 1
fi

# name version sha256 (of the manylinux x86_64 wheel)
wheels=(
  "nvidia-cuda-nvrtc-cu12 12.9.86 $nvrtc_sum"
  "nvidia-cuda-cuobjdump 13.2.86 d332c2ffe78e703ca0a3894be927f83124244e2acf0d792b8c12b4362d44d837"
  "nvidia-cuda-nvdisasm 13.2.86 53606e719ecae07a2335f95902d5a1393a0cc1c317499ee7ffcf628a44385f2c"
)

if [ "$(uname -m)" != x86_64 ] || [ "$(uname -s)" != Linux ]; then
  echo "tools/cuda/fetch.sh: the pinned wheels are for Linux x86-64, not $(uname -s) $(uname -m)" >&2
  exit 1
fi

pip_cmd=()
if python3 -m pip --version >/dev/null 2>&1; then
  pip_cmd=(python3 -m pip)
else
  echo "tools/cuda/fetch.sh: installing python3-pip" >&2
  sudo_cmd=()
  [ "$(id -u)" = 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends python3-pip >&2
  pip_cmd=(python3 -m pip)
fi

for w in "${wheels[@]}"; do
  read -r name version sum <<<"$w"
  dest="$dir/$name-$version"
  if [ -f "$dest/.verified" ] && [ "$(cat "$dest/.verified")" = "$sum" ]; then
    continue
  fi
  rm -rf "$dest" "$dir/wheels/$name"
  mkdir -p "$dir/wheels/$name"
  # pip download is allowed where Debian's pip refuses to install (externally managed Python).
  "${pip_cmd[@]}" download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
    --python-version 3.11 -d "$dir/wheels/$name" "$name==$version" >&2
  whl=$(ls "$dir/wheels/$name"/*.whl)
  have=$(sha256sum "$whl" | cut -d' ' -f1)
  if [ "$have" != "$sum" ]; then
    echo "tools/cuda/fetch.sh: $whl has sha256 $have, want $sum" >&2
    exit 1
  fi
  mkdir -p "$dest"
  python3 -m zipfile -e "$whl" "$dest"
  echo "$sum" >"$dest/.verified"
  rm -rf "$dir/wheels/$name"
done

nvrtc=$(find "$dir/nvidia-cuda-nvrtc-cu12-12.9.86" -name 'libnvrtc.so.12' -path '*cuda_nvrtc/lib/*' | head -n 1)
cuobjdump=$(find "$dir/nvidia-cuda-cuobjdump-13.2.86" -name cuobjdump -type f | head -n 1)
nvdisasm=$(find "$dir/nvidia-cuda-nvdisasm-13.2.86" -name nvdisasm -type f | head -n 1)
if [ -z "$nvrtc" ] || [ -z "$cuobjdump" ] || [ -z "$nvdisasm" ]; then
  echo "tools/cuda/fetch.sh: the wheels lack libnvrtc.so.12, cuobjdump or nvdisasm" >&2
  exit 1
fi
chmod +x "$cuobjdump" "$nvdisasm"
echo "LOOM_NVRTC_LIBRARY=$nvrtc"
echo "LOOM_CUOBJDUMP=$cuobjdump"
echo "LOOM_NVDISASM=$nvdisasm"
