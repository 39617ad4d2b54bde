#!/usr/bin/env bash
# Regenerates grpc_service.pb.go and grpc_service_grpc.pb.go from grpc_service.proto with pinned
# tools: protoc from PyPI's grpcio-tools (in a throw-away venv), protoc-gen-go v1.36.12 and
# protoc-gen-go-grpc v1.6.0. Run from anywhere: `go generate ./go/serve/inferencepb` or
# `bash go/serve/inferencepb/gen.sh`. Needs python3 and Go; downloads the pinned tools.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q grpcio-tools==1.84.0
GOBIN="$work/bin" GOTOOLCHAIN=local go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
GOBIN="$work/bin" GOTOOLCHAIN=local go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.0
cd "$here"
PATH="$work/bin:$PATH" "$work/venv/bin/python" -m grpc_tools.protoc -I . \
  --go_out=. --go_opt=paths=source_relative \
  --go-grpc_out=. --go-grpc_opt=paths=source_relative \
  grpc_service.proto
