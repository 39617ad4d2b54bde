#!/usr/bin/env bash
# tools/bazelconsumer/run.sh: builds and tests a Bazel workspace of a user's own that depends on
# this clone through local_repository, with the WORKSPACE docs/bazel.md shows ("Depending on Loom
# from another workspace"), in a temporary directory with an output base of its own:
#   - its go_test reading a model through @loom//go/graph and its cc_test on @loom//shim's C ABI
#     are built and run;
#   - @loom//go/session and @loom//tools/cmd/loom are analyzed (every label and repository they
#     reach is resolved from the consumer's side: `bazel build --nobuild`);
#   - with --full (tools/test's way), also its go_test running a model through
#     @loom//go/session, and the loom command built and run (`loom version`): this compiles the
#     shim and every shipped kernel again in the new output base (6-7 minutes on two cores).
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

# The WORKSPACE is docs/bazel.md's, word for word, with the clone's path.
if ! grep -qF -- "$(cat "$here/testdata/WORKSPACE.in")" "$loom/docs/bazel.md"; then
  result "docs/bazel.md shows testdata/WORKSPACE.in word for word" 1
  echo "bazel-consumer: $pass passed, $fail failed"
  exit 1
fi
sed "s|/path/to/loom|$loom|" "$here/testdata/WORKSPACE.in" >"$ws/WORKSPACE"
cp "$here/testdata/BUILD.in" "$ws/BUILD.bazel"
cp "$here/testdata/session_test.go.in" "$ws/session_test.go"
cp "$here/testdata/graph_test.go.in" "$ws/graph_test.go"
cp "$here/testdata/abi_test.cc" "$ws/abi_test.cc"

# None of Loom's .bazelrc: a consumer has its own. The shared disk cache only when Loom's
# .bazelrc names one (it does: ~/.cache/loom-bazel), so a second run is quick.
flags=(--output_base="$work/output_base")
common=(--nosandbox_debug --disk_cache="$HOME/.cache/loom-bazel")
cd "$ws" || exit 1

bazel "${flags[@]}" test "${common[@]}" --test_output=errors //:graph_test //:abi_test
result "bazel test //:graph_test //:abi_test" $?
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
