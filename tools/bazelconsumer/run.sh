#!/usr/bin/env bash
# tools/bazelconsumer/run.sh: builds and tests a Bazel workspace of a user's own that depends on
# this clone through local_repository, with the WORKSPACE and the .bazelrc docs/bazel.md shows
# ("Depending on Loom from another workspace": Loom's pinned Go SDK and zig cc), in a temporary
# directory with an output base of its own, the way tools/test builds Loom itself: no gcc, cc,
# c++, clang, ld, as or go on PATH, and sandboxes that cannot read the machine's compilers,
# headers or /usr/local (tools/hermetic_check.sh's `path` and `sandbox-flags`):
#   - its go_test reading a model through @loom//go/graph and its cc_test on @loom//shim's C ABI
#     are built and run;
#   - @loom//go/session and @loom//tools/cmd/loom are analyzed (every label and repository they
#     reach is resolved from the consumer's side: `bazel build --nobuild`);
#   - the toolchains were the pinned ones: @go_sdk is the pinned Go (its VERSION) and the C++
#     test binary was compiled and linked by zig (its .comment names clang and LLD, not GCC);
#   - with --full (tools/test's way), also its go_test running a model through
#     @loom//go/session, and the loom command built and run (`loom version`): this compiles the
#     shim and every shipped kernel again in the new output base, with zig (about 27 minutes on
#     two loaded cores without the disk cache, 10 with it: docs/bazel.md).
# Ends with `bazel-consumer: N passed, M failed` (tools/test counts it).
#
#   tools/bazelconsumer/run.sh [--full] [WORKDIR]   (default: a new temporary directory, removed after)
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
loom=$(cd "$here/../.." && pwd)
full=0
work=""
for arg in "$@"; do
  case "$arg" in
    --full) full=1 ;;
    -*) echo "tools/bazelconsumer/run.sh: unknown flag $arg" >&2; exit 2 ;;
    *) work=$arg ;;
  esac
done
if [ -z "$work" ]; then
  work=$(mktemp -d)
  trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
fi
ws="$work/consumer"
mkdir -p "$ws"

pass=0
fail=0
result() { # name status
  if [ "$2" = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "tools/bazelconsumer: $1 FAILED"; fi
}

# The WORKSPACE and the .bazelrc are docs/bazel.md's, word for word (the WORKSPACE with the
# clone's path).
docs=$(cat "$loom/docs/bazel.md")
for f in WORKSPACE.in bazelrc.in; do
  if [[ "$docs" != *"$(cat "$here/testdata/$f")"* ]]; then
    result "docs/bazel.md shows testdata/$f word for word" 1
    echo "bazel-consumer: $pass passed, $fail failed"
    exit 1
  fi
done
sed "s|/path/to/loom|$loom|" "$here/testdata/WORKSPACE.in" >"$ws/WORKSPACE"
cp "$here/testdata/bazelrc.in" "$ws/.bazelrc"
cp "$here/testdata/BUILD.in" "$ws/BUILD.bazel"
cp "$here/testdata/session_test.go.in" "$ws/session_test.go"
cp "$here/testdata/graph_test.go.in" "$ws/graph_test.go"
cp "$here/testdata/abi_test.cc" "$ws/abi_test.cc"

# None of Loom's .bazelrc: a consumer has its own (testdata/bazelrc.in). Loom's shared disk
# cache (~/.cache/loom-bazel, which Loom's .bazelrc names), so a second run is quick. The
# restricted PATH and the blocked paths are the check's, not what a consumer needs. The
# restricted PATH is in a fixed directory: without Loom's --incompatible_strict_action_env,
# actions see the caller's PATH, which is part of their cache keys (a new directory each run
# would make every C/C++ and cgo action miss the disk cache).
flags=(--output_base="$work/output_base")
common=(--nosandbox_debug --disk_cache="$HOME/.cache/loom-bazel")
mapfile -t -O ${#common[@]} common < <(bash "$loom/tools/hermetic_check.sh" sandbox-flags)
restricted=$(bash "$loom/tools/hermetic_check.sh" path "${XDG_CACHE_HOME:-$HOME/.cache}/loom-bazelconsumer-path")
export PATH=$restricted
cd "$ws" || exit 1

bazel "${flags[@]}" test "${common[@]}" --test_output=errors //:graph_test //:abi_test
result "bazel test //:graph_test //:abi_test" $?

# The pinned toolchains, not the machine's: @go_sdk wraps @loom_go_sdk_root's Go 1.26.8, and the
# C++ binary's .comment section names zig's clang and LLD (a gcc build names "GCC:").
sdk="$work/output_base/external/loom_go_sdk_root/goroot/VERSION"
want=$(sed -n 's/^GO_TOOLCHAIN_VERSION = "v0.0.1-\(go[0-9.]*\)\..*/\1/p' "$loom/third_party/go_module.bzl")
status=0
if [ -z "$want" ] || [ "$(head -n 1 "$sdk" 2>/dev/null)" != "$want" ]; then
  echo "tools/bazelconsumer: $sdk: got '$(head -n 1 "$sdk" 2>/dev/null)', want '$want' (third_party/go_module.bzl)"
  status=1
fi
comment=$(readelf -p .comment "$(bazel "${flags[@]}" info bazel-bin 2>/dev/null)/abi_test" 2>&1)
if ! grep -q 'clang version' <<<"$comment" || ! grep -q 'Linker: LLD' <<<"$comment" || grep -q 'GCC:' <<<"$comment"; then
  echo "tools/bazelconsumer: //:abi_test was not built by zig cc; its .comment:"
  echo "$comment"
  status=1
fi
result "the pinned toolchains: @go_sdk is $want, //:abi_test built by zig cc" $status
bazel "${flags[@]}" build "${common[@]}" --nobuild @loom//go/session @loom//tools/cmd/loom //:session_test
result "analysis of @loom//go/session, @loom//tools/cmd/loom and //:session_test" $?
if [ "$full" = 1 ]; then
  bazel "${flags[@]}" test "${common[@]}" --test_output=errors //:session_test
  result "bazel test //:session_test" $?
  bazel "${flags[@]}" build "${common[@]}" @loom//tools/cmd/loom &&
    "$(bazel "${flags[@]}" info bazel-bin 2>/dev/null)/external/loom/tools/cmd/loom/loom_/loom" version
  result "@loom//tools/cmd/loom built and run" $?
fi
bazel "${flags[@]}" shutdown >/dev/null 2>&1
echo "bazel-consumer: $pass passed, $fail failed"
[ "$fail" = 0 ]
