#!/usr/bin/env bash
# tools/devicecheck/travel.sh narrow|restore: what the device tool sends with a call.
#
# The tool sends the working tree (tracked and untracked-not-ignored files) with every call, at
# most 64 MiB with what `carry` names. Ours is larger (kernels/aot/gen alone, the generated
# kernels, is over 80 MB), and the device check needs none of it: out/devicecheck.tar.xz holds
# everything it runs. `narrow` takes the largest folders out of the index (their files stay on
# disk) and ignores them in .git/info/exclude, so only a few MB travel; `restore` puts the index
# back as HEAD has those folders and drops the exclusions. Run restore before committing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
paths=(kernels/aot/gen go/session/testdata third_party/go_modules)
exclude=$(git rev-parse --git-path info/exclude)
marker="# devicecheck/travel.sh narrow"
case "${1:-}" in
narrow)
  git rm -r --cached -q -- "${paths[@]}"
  mkdir -p "$(dirname "$exclude")"
  echo "$marker" >>"$exclude"
  for p in "${paths[@]}"; do echo "/$p/" >>"$exclude"; done
  size=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
  echo "travel.sh: the working tree that travels is now $((size >> 20)) MiB; run 'tools/devicecheck/travel.sh restore' after the device calls"
  ;;
restore)
  git reset -q -- "${paths[@]}"
  if [ -f "$exclude" ]; then
    grep -v -x -F -e "$marker" $(printf -- '-e /%s/ ' "${paths[@]}") "$exclude" >"$exclude.tmp" || true
    mv "$exclude.tmp" "$exclude"
  fi
  git status --short | head -5
  ;;
*)
  echo "usage: tools/devicecheck/travel.sh narrow|restore" >&2
  exit 2
  ;;
esac
