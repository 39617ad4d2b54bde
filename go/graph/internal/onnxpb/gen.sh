#!/usr/bin/env bash
# Regenerates the Go bindings for the vendored ONNX protos in third_party/onnx.
# Needs protoc (Debian protobuf-compiler 3.21) and protoc-gen-go v1.36.12, which this script
# installs into a temporary GOBIN when it is not already on PATH at that version.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
proto_dir="$root/third_party/onnx"
want=v1.36.12
pkg=github.com/loomrt/loom/go/graph/internal/onnxpb
if ! command -v protoc >/dev/null; then
  echo "gen.sh: protoc not found (apt-get install -y protobuf-compiler)" >&2
  exit 1
fi
plugin="$(command -v protoc-gen-go || true)"
if [[ -z "$plugin" ]] || [[ "$("$plugin" --version)" != "protoc-gen-go $want" ]]; then
  bin="$(mktemp -d)"
  trap 'rm -rf "$bin"' EXIT
  GOBIN="$bin" GOFLAGS=-mod=mod go install "google.golang.org/protobuf/cmd/protoc-gen-go@$want"
  plugin="$bin/protoc-gen-go"
fi
protoc -I"$proto_dir" \
  --plugin=protoc-gen-go="$plugin" \
  --go_out="$here" --go_opt=paths=source_relative \
  --go_opt="Monnx-ml.proto=$pkg;onnxpb" \
  --go_opt="Monnx-data.proto=$pkg;onnxpb" \
  onnx-ml.proto onnx-data.proto
