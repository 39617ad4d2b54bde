#!/usr/bin/env bash
# third_party/check_go_sum.sh: checks that Bazel and the go command build the
# same Go module versions.
#
# Bazel's Go modules are pinned in third_party/go.sum (see README.md); the go
# command uses each module's go.mod. For every module that both know, the
# version a go.mod requires must be the pinned one, and any go.sum line for
# that version must carry the pinned hash. Prints each mismatch; exit 1 if any.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
pins=third_party/go.sum

problems=0
while IFS= read -r gomod; do
  dir=$(dirname "$gomod")
  # Every required module, as "path version" lines (go.mod as the go
  # command writes it: single-line requires or require blocks).
  requires=$(awk '
    /^require \(/ { block = 1; next }
    block && /^\)/ { block = 0; next }
    block && NF >= 2 && $1 !~ /^\/\// { print $1, $2; next }
    /^require [^(]/ { print $2, $3 }
  ' "$gomod")
  while read -r path version; do
    [ -z "$path" ] && continue
    pinned=$(awk -v p="$path" '$1 == p { print $2 }' "$pins")
    [ -z "$pinned" ] && continue
    if [ "$pinned" != "$version" ]; then
      echo "check_go_sum: $gomod requires $path $version, but $pins pins $pinned for Bazel" >&2
      problems=$((problems + 1))
    fi
  done <<<"$requires"
  if [ -f "$dir/go.sum" ]; then
    while read -r path version hash; do
      pinned=$(awk -v p="$path" -v v="$version" '$1 == p && $2 == v { print $3 }' "$pins")
      if [ -n "$pinned" ] && [ "$pinned" != "$hash" ]; then
        echo "check_go_sum: $dir/go.sum has $path $version $hash, but $pins has $pinned" >&2
        problems=$((problems + 1))
      fi
    done < <(grep -v '/go.mod ' "$dir/go.sum")
  fi
done < <(git ls-files --cached --others --exclude-standard -- '*go.mod' | grep -v '^third_party/')

if [ "$problems" -gt 0 ]; then
  echo "check_go_sum: $problems mismatch(es); update $pins and third_party/repositories.bzl (see third_party/README.md)" >&2
  exit 1
fi
echo "check_go_sum: go.mod files agree with $pins"
