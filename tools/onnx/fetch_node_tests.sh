#!/usr/bin/env bash
# tools/onnx/fetch_node_tests.sh: the node tests of ONNX 1.22.0 (1,765 cases, opsets up to 27),
# from its PyPI wheel pinned by version and sha256, for go/session/conformance's
# TestNodeConformanceONNX122 (beside the ONNX 1.12 suite of Debian's libonnx-testdata).
# Into ${LOOM_ONNX_DIR:-~/.cache/loom-onnx}; a verified copy is not fetched again. Prints
# LOOM_NODE_TESTS_ONNX122=/…/onnx/backend/test/data/node.
# Usage: eval "$(tools/onnx/fetch_node_tests.sh)"
set -euo pipefail

version=1.22.0
sum=1d0a2bdb15eb2b3cb65c438f3423d9620d14fdce32f92380e6bb1b2e09568ef5 # cp311 manylinux_2_28 x86_64
dir="${LOOM_ONNX_DIR:-$HOME/.cache/loom-onnx}"
dest="$dir/onnx-$version"
node="$dest/onnx/backend/test/data/node"

if ! { [ -f "$dest/.verified" ] && [ "$(cat "$dest/.verified")" = "$sum" ]; }; then
  rm -rf "$dest" "$dir/wheels"
  mkdir -p "$dir/wheels" "$dest"
  # The test data are the same in every wheel of a version; this one is pinned by its hash.
  python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
    --python-version 3.11 -d "$dir/wheels" "onnx==$version" >&2
  wheel=$(ls "$dir"/wheels/onnx-"$version"-*.whl)
  got=$(sha256sum "$wheel" | cut -d' ' -f1)
  if [ "$got" != "$sum" ]; then
    echo "tools/onnx/fetch_node_tests.sh: $wheel has sha256 $got, want $sum" >&2
    exit 1
  fi
  python3 - "$wheel" "$dest" <<'PY'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    z.extractall(dest, [n for n in z.namelist() if n.startswith("onnx/backend/test/data/node/")])
PY
  echo "$sum" >"$dest/.verified"
  rm -rf "$dir/wheels"
fi
echo "LOOM_NODE_TESTS_ONNX122=$node"
