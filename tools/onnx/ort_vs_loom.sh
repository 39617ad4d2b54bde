#!/usr/bin/env bash
# tools/onnx/ort_vs_loom.sh: the ONNX 1.22 node tests through ONNX Runtime and through Loom on this
# machine, side by side (issue 16; docs/conformance.md quotes it).
#
#   tools/onnx/ort_vs_loom.sh [OUT_DIR]      # default out/conformance
#
# Fetches the suite (fetch_node_tests.sh), makes a virtual environment with onnxruntime 1.30.0
# and onnx 1.22.0 (pinned; in ~/.cache/loom-onnx/ortvenv, made once), runs ort_node_suite.py
# (ONNX Runtime's CPU provider) and `loom conformance --json`, and writes OUT_DIR/ort.jsonl,
# OUT_DIR/loom.jsonl and OUT_DIR/ort_only.txt (the cases ONNX Runtime passes and Loom fails,
# with Loom's message), then prints both tallies and that list.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-out/conformance}
mkdir -p "$out"
eval "$(tools/onnx/fetch_node_tests.sh)"
venv="${LOOM_ONNX_DIR:-$HOME/.cache/loom-onnx}/ortvenv"
if ! "$venv/bin/python" -c 'import onnxruntime, onnx; assert onnxruntime.__version__ == "1.30.0" and onnx.__version__ == "1.22.0"' 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q onnxruntime==1.30.0 onnx==1.22.0 numpy >&2
fi
"$venv/bin/python" tools/onnx/ort_node_suite.py "$LOOM_NODE_TESTS_ONNX122" >"$out/ort.jsonl" 2>/dev/null
go run ./tools/cmd/loom conformance --json "$LOOM_NODE_TESTS_ONNX122" >"$out/loom.jsonl" 2>/dev/null || true
"$venv/bin/python" - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def load(name):
    rows = {}
    for line in open(f"{out}/{name}.jsonl"):
        j = json.loads(line)
        if "name" in j:
            rows[j["name"]] = j
    return rows
ort, loom = load("ort"), load("loom")
passed = lambda rows: sum(r["status"] == "pass" for r in rows.values())
print(f"ONNX Runtime 1.30.0: {passed(ort)} of {len(ort)} passed; Loom: {passed(loom)} of {len(loom)} passed")
only = sorted(n for n in ort if ort[n]["status"] == "pass" and loom.get(n, {}).get("status") != "pass")
loom_only = sorted(n for n in loom if loom[n]["status"] == "pass" and ort.get(n, {}).get("status") != "pass")
print(f"{len(only)} pass on ONNX Runtime and not on Loom; {len(loom_only)} pass on Loom and not on ONNX Runtime")
with open(f"{out}/ort_only.txt", "w") as f:
    for n in only:
        line = f"{n}\t{loom.get(n, {}).get('message', 'not run')}"
        f.write(line + "\n")
        print(line)
PY
