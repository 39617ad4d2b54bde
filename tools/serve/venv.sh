#!/usr/bin/env bash
# tools/serve/venv.sh: creates the Python virtual environment that runs Triton's own client
# (tritonclient, HTTP and gRPC) against `loom serve` (tools/serve's tests), with every package
# pinned by version and sha256 in tools/serve/requirements.txt. Into
# ${LOOM_TRITONCLIENT_VENV:-~/.cache/loom-tritonclient}; a venv already built from the same
# requirements.txt is kept. Prints the environment to use, one VAR=VALUE line:
#   LOOM_TRITONCLIENT_PYTHON=/…/bin/python
# Usage: eval "$(tools/serve/venv.sh)"
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
req="$here/requirements.txt"
dir="${LOOM_TRITONCLIENT_VENV:-$HOME/.cache/loom-tritonclient}"

# The hashes are those of the CPython 3.11 Linux x86-64 wheels (Debian 12's Python).
if [ "$(uname -m)" != x86_64 ] || [ "$(uname -s)" != Linux ]; then
  echo "tools/serve/venv.sh: the pinned wheels are for Linux x86-64, not $(uname -s) $(uname -m)" >&2
  exit 1
fi
pyver=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$pyver" != 3.11 ]; then
  echo "tools/serve/venv.sh: the pinned wheels are for CPython 3.11, python3 is $pyver" >&2
  exit 1
fi

want=$(sha256sum "$req" | cut -d' ' -f1)
if [ -x "$dir/bin/python" ] && [ -f "$dir/.requirements-sha256" ] && [ "$(cat "$dir/.requirements-sha256")" = "$want" ]; then
  echo "LOOM_TRITONCLIENT_PYTHON=$dir/bin/python"
  exit 0
fi

# Debian splits venv (and the ensurepip it needs) out of python3 into python3-venv.
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  echo "tools/serve/venv.sh: installing python3-venv" >&2
  sudo_cmd=()
  [ "$(id -u)" = 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends python3-venv >&2
fi

rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
python3 -m venv "$dir" >&2
"$dir/bin/python" -m pip install -q --disable-pip-version-check --require-hashes --only-binary=:all: \
  -r "$req" >&2
# The check imports what it uses, so a broken install fails here rather than in the tests.
"$dir/bin/python" -c 'import numpy, tritonclient.http, tritonclient.grpc' >&2
echo "$want" >"$dir/.requirements-sha256"
echo "LOOM_TRITONCLIENT_PYTHON=$dir/bin/python"
