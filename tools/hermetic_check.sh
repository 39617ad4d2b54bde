#!/usr/bin/env bash
# tools/hermetic_check.sh: checks that Loom's Bazel build is hermetic and reproducible (issue 20;
# docs/bazel.md, "Pinned toolchains" and "The reproducibility check").
#
#   tools/hermetic_check.sh path DIR       makes DIR a PATH without gcc, cc, c++, clang, ld, as
#                                          and go (links to the rest of /usr/bin) and prints it
#   tools/hermetic_check.sh sandbox-flags  prints, one a line, the --sandbox_block_path flags
#                                          of the cold builds below (tools/bazelconsumer uses them)
#   tools/hermetic_check.sh [--full | --subset] [WORKDIR]
#
# The check, each step a PASS or FAIL line:
#   1. the restricted PATH has no C compiler, linker or go;
#   2. a copy of this clone's files (tracked and untracked, not ignored) in another directory is
#      built with an output base of its own, no disk cache, the restricted PATH, and sandboxes
#      that cannot read gcc's files (/usr/lib/gcc, /usr/include, the compilers), /usr/local or
#      the Go caches (~/go, ~/.cache/go-build): the shim library, every kernel of the op library
#      and the loom binary (whose build compiles the Go standard library and every package it
#      links with the pinned toolchains). Its repository rules fetch every Go module with the
#      pinned Go (@loom_go), as no go is on PATH and GOROOT is unset;
#   3. those outputs are byte-identical to the same targets built in this clone (its output
#      base, its disk cache); with --full, to a second copy built like the first instead (two
#      cold builds: twice the time). The Go binary is compared whole, DWARF included (its
#      runtime libraries are built by zig at its first link: docs/bazel.md);
#   4. the Go binary needs only glibc (ldd: libc, libm, libresolv, the loader);
#   5. `bazel aquery` over the test targets' actions shows no absolute path outside the
#      execution root in any command line.
# --subset (what tools/test, and so CI, runs: the whole check's cold build of every kernel and
# of the loom binary takes 15-35 minutes on two cores) builds the same three kinds of output,
# fewer of them: the shim library, one kernel package's objects (attention, both x86-64
# levels) and a smaller Go binary linking the shim through cgo (go/native's nativedemo), so the
# Go standard library and the cgo link still go through the pinned toolchains cold, and the
# binary links the same runtime libraries zig builds for the loom binary (crt1, libc++,
# libc++abi, libunwind, compiler-rt), each cold build with a zig cache of its own.
# Ends with `hermetic: N passed, M failed` (tools/test counts it). WORKDIR (default: a new
# temporary directory, removed afterwards) holds the copies and their output bases.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

# make_path DIR: links every /usr/bin program except compilers, linkers and go into DIR.
make_path() {
  local dir=$1 f b
  mkdir -p "$dir"
  for f in /usr/bin/*; do
    b=${f##*/}
    case "$b" in
      gcc | gcc-* | g++ | g++-* | cc | c++ | cpp | cpp-* | c89* | c99* | *-linux-gnu-* | clang* | ld | ld.* | as | go | gofmt) continue ;;
    esac
    ln -sfn "$f" "$dir/$b"
  done
  echo "$dir"
}

# block_flags: --sandbox_block_path flags that keep the machine's compilers, assembler, linker,
# headers, /usr/local (the machine's Go) and the Go and zig caches out of every sandbox.
block_flags() {
  local block=(/usr/local /usr/include /usr/lib/gcc "$HOME/go" "$HOME/.cache/go-build" "$HOME/.cache/zig") f p
  for f in /usr/bin/gcc* /usr/bin/g++* /usr/bin/cc /usr/bin/c++ /usr/bin/cpp* /usr/bin/x86_64-linux-gnu-g* /usr/bin/ld /usr/bin/ld.bfd /usr/bin/ld.gold /usr/bin/as; do
    [ -e "$f" ] && block+=("$(readlink -f "$f")")
  done
  for p in "${block[@]}"; do
    [ -e "$p" ] && echo "--sandbox_block_path=$p"
  done
}

if [ "${1:-}" = sandbox-flags ]; then
  block_flags | sort -u
  exit 0
fi

if [ "${1:-}" = path ]; then
  [ -n "${2:-}" ] || { echo "usage: tools/hermetic_check.sh path DIR" >&2; exit 2; }
  make_path "$2"
  exit 0
fi

full=0
subset=0
work=""
for arg in "$@"; do
  case "$arg" in
    --full) full=1 ;;
    --subset) subset=1 ;;
    -*) echo "tools/hermetic_check.sh: unknown flag $arg" >&2; exit 2 ;;
    *) work=$arg ;;
  esac
done
if [ -z "$work" ]; then
  work=$(mktemp -d)
  trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
fi
mkdir -p "$work"
work=$(cd "$work" && pwd)

pass=0
fail=0
result() { # name status
  if [ "$2" = 0 ]; then
    pass=$((pass + 1))
    echo "hermetic: PASS: $1"
  else
    fail=$((fail + 1))
    echo "hermetic: FAIL: $1"
  fi
}

# What the built outputs are: the shim library, every kernel object the loom binary links, the
# loom binary. The kernels are compiled as a whole (//tools/cmd/loom needs all of them).
targets=(//shim:shim //tools/cmd/loom)
gobin=tools/cmd/loom/loom_/loom
if [ "$subset" = 1 ]; then
  targets=(//shim:shim //kernels/aot/gen/attention_v3:kernels //kernels/aot/gen/attention_v4:kernels //go/native/cmd/nativedemo)
  gobin=go/native/cmd/nativedemo/nativedemo_/nativedemo
fi

restricted=$(make_path "$work/path")
status=0
for tool in gcc cc c++ g++ cpp clang ld as go; do
  if PATH=$restricted command -v "$tool" >/dev/null 2>&1; then status=1; echo "hermetic: $tool is on the restricted PATH"; fi
done
result "the restricted PATH has no gcc, cc, c++, cpp, clang, ld, as or go" $status

# Flags of the cold builds: nothing read from the machine's compilers, headers, /usr/local or Go
# caches; zig's cache of its own (LOOM_ZIG_CACHE) so that nothing is shared with other builds.
cold_flags=(--disk_cache= --color=no --curses=no --noshow_progress)
mapfile -t -O ${#cold_flags[@]} cold_flags < <(block_flags | sort -u)

# cold_build NAME: copies this clone's files to $work/NAME and builds the targets there.
cold_build() {
  local name=$1
  local src="$work/$name/loom" zc="$work/$name/zig-cache"
  rm -rf "$work/$name"
  mkdir -p "$src" "$zc"
  (cd "$root" && git ls-files -z --cached --others --exclude-standard |
    tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -C "$src" -xf -
  echo "hermetic: building ${targets[*]} in $src (output base $work/$name/output_base, no disk cache)"
  local start=$SECONDS
  (cd "$src" && env -i HOME="$HOME" USER="${USER:-root}" PATH="$restricted" TMPDIR="${TMPDIR:-/tmp}" \
    bazel --output_base="$work/$name/output_base" build "${cold_flags[@]}" \
    --action_env=LOOM_ZIG_CACHE="$zc" --sandbox_writable_path="$zc" -- "${targets[@]}")
  local rc=$?
  echo "hermetic: the build in $name took $((SECONDS - start)) s"
  bin_dirs+=("$src/bazel-bin")
  return $rc
}

bin_dirs=()
cold_build a
result "cold build of ${targets[*]} in another directory without /usr/local/go, gcc and the machine's headers" $?
if [ "$full" = 1 ]; then
  cold_build b
  result "second cold build in a third directory" $?
else
  echo "hermetic: building the same targets in $root (its output base and disk cache)"
  (cd "$root" && PATH="$restricted" bazel build --color=no --curses=no --noshow_progress -- "${targets[@]}")
  result "build of the same targets in this clone" $?
  bin_dirs+=("$root/bazel-bin")
fi

# same WHAT FILES...: the files (relative to bazel-bin) are identical in both builds.
same() {
  local what=$1 status=0 f
  shift
  if [ $# -eq 0 ]; then
    result "$what: no files to compare" 1
    return
  fi
  for f in "$@"; do
    if ! cmp -s "${bin_dirs[0]}/$f" "${bin_dirs[1]}/$f"; then
      echo "hermetic: $f differs between ${bin_dirs[0]} and ${bin_dirs[1]}"
      status=1
    fi
  done
  result "$what: $# file(s) byte-identical in both builds" $status
}
same "shim library" shim/libshim.a shim/libshim.so
mapfile -t kernel_objects < <(cd "${bin_dirs[0]}" && find kernels/aot/gen -path '*/_objs/*' -name '*.o' | sort)
same "kernel objects" "${kernel_objects[@]}"
# The Go binary, DWARF included. Its runtime libraries (crt1, libc++, libc++abi, libunwind,
# compiler-rt) are built by zig into its cache at the first link, with a DW_AT_comp_dir that the
# driver fixes (PWD=/proc/self/cwd: docs/bazel.md, "The reproducibility check"); when the
# binaries differ, the debug strings that differ are printed, the usual place of a directory.
if cmp -s "${bin_dirs[0]}/$gobin" "${bin_dirs[1]}/$gobin"; then
  result "$gobin (DWARF included): byte-identical in both builds" 0
else
  echo "hermetic: $gobin differs between ${bin_dirs[0]} and ${bin_dirs[1]}; debug strings only in one of them:"
  for i in 0 1; do
    objcopy --decompress-debug-sections "${bin_dirs[$i]}/$gobin" "$work/gobin.dwarf.$i" 2>/dev/null
  done
  diff <(readelf -p .debug_str "$work/gobin.dwarf.0" 2>/dev/null | sed -E 's/^ *\[ *[0-9a-f]+\] *//' | sort -u) \
    <(readelf -p .debug_str "$work/gobin.dwarf.1" 2>/dev/null | sed -E 's/^ *\[ *[0-9a-f]+\] *//' | sort -u) | grep '^[<>]' | head -10
  result "$gobin (DWARF included): byte-identical in both builds" 1
fi

libs=$(ldd "${bin_dirs[0]}/$gobin" 2>&1 | awk '{print $1}' | grep -vE '^(linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|libresolv\.so\.2|/lib64/ld-linux-x86-64\.so\.2)$')
[ -z "$libs" ]
result "$gobin needs only glibc (ldd)${libs:+; also: $libs}" $?

# Absolute paths in the command lines of the test targets' actions (aquery prints each command
# line over several lines, from "Command Line:" to the action's next field). Bazel prints paths
# relative to the execution root; what is absolute came from the machine. Allowed: /bin/bash,
# Bazel's shell for run_shell actions (rules_go's builder), which every worker has.
aq="$work/aquery.txt"
(cd "$root" && PATH="$restricted" bazel aquery --color=no --curses=no --noshow_progress --output=text \
  'deps(tests(//...))' >"$aq" 2>"$work/aquery.err")
rc=$?
if [ $rc != 0 ]; then
  tail -5 "$work/aquery.err"
  result "bazel aquery 'deps(tests(//...))'" 1
else
  actions=$(grep -c '^action ' "$aq")
  abs=$(awk '/^  Command Line:/ { f = 1 } f && /^(action |  [A-Z][A-Za-z]*:)/ && !/^  Command Line:/ { f = 0 } f' "$aq" |
    grep -oE "(^|[ '\"=:,(])(-{1,2}[A-Za-z][A-Za-z_-]{0,20})?/(bin|boot|dev|etc|home|lib|lib32|lib64|mnt|nix|opt|proc|root|run|sbin|snap|srv|sys|tmp|usr|var|work)(/[^ '\"\\)]*)?" |
    sed -E 's|^[^/]*||' | grep -vxF /bin/bash | sort | uniq -c | sort -rn | head -20)
  status=0
  if [ -n "$abs" ]; then
    echo "hermetic: absolute paths in command lines (count, path):"
    echo "$abs"
    status=1
  fi
  result "no absolute path (but /bin/bash) in the command lines of $actions actions (bazel aquery 'deps(tests(//...))')" $status
fi

for b in "$work"/*/output_base; do
  [ -d "$b" ] && (cd "$work" && bazel --output_base="$b" shutdown >/dev/null 2>&1)
done
echo "hermetic: $pass passed, $fail failed"
[ "$fail" = 0 ]
