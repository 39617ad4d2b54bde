#!/usr/bin/env bash
# tools/models/make_refs.sh: remakes the inputs and ONNX Runtime reference outputs of go/session's
# real-model tests (go/session/testdata/realmodels/). Run by hand when a test input changes; the
# results are committed, so the tests need neither ONNX Runtime nor this script.
#
#   tools/models/make_refs.sh [ORTBENCH]
#
# ORTBENCH runs ONNX Runtime 1.30 (`ORTBENCH run MODEL name=FILE.npy... --out DIR`, writing each
# output as DIR/NAME.npy); default ../shared/bench/ortbench.sh beside the repository. The models
# come from tools/models/fetch.sh.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ort=${1:-$root/../shared/bench/ortbench.sh}
[ -x "$ort" ] || { echo "make_refs.sh: no ONNX Runtime runner at $ort" >&2; exit 1; }
models=$(bash "$root/tools/models/fetch.sh")
data=$root/go/session/testdata/realmodels
cd "$root"

GOWORK="$root/go.work" go run ./tools/cmd/modelrefs -o "$data"

# ref MODEL OUTDIR INPUT...: runs MODEL on INPUTs, leaving its outputs in OUTDIR.
ref() {
  local model=$1 out=$2
  shift 2
  rm -rf "$out" && mkdir -p "$out"
  "$ort" run "$model" "$@" --out "$out" >/dev/null
}

ref go/session/testdata/models/tiny_encoder.onnx "$data/tiny_encoder/ref" x="$data/tiny_encoder/x.npy"

# Random-weight GPT-2 decode step and BERT encoder in torch.onnx.export's form (needs python3 with numpy; onnx
# too to remake the committed models, which the same commands do with the model path in place of "-"):
# inputs from fixed seeds, every input DIR/NAME.npy fed as NAME.
gen_tiny() {
  local kind=$1 out=$2
  shift 2
  python3 tools/models/gen_transformers.py "$kind" - --layers 2 --d 64 --heads 4 --max-pos 128 "$@" --inputs "$out"
}
npy_inputs() { for f in "$1"/*.npy; do echo "$(basename "$f" .npy)=$f"; done; }
gen_tiny gpt2 "$data/tiny_gpt2_step" --vocab 256 --past 7
gen_tiny bert "$data/tiny_bert" --ffn 256 --vocab 512 --seq 12 --masked 3
for m in tiny_gpt2_step tiny_bert; do
  mapfile -t feeds < <(npy_inputs "$data/$m")
  ref "go/session/testdata/models/$m.onnx" "$data/$m/ref" "${feeds[@]}"
done

# Silero VAD v5 streams its LSTM state: chunk i starts from the state chunk i-1 returned.
vad=$data/silero_vad_v5
state=$vad/state_0.npy
for i in 0 1 2; do
  ref "$models/silero_vad_v5.onnx" "$vad/ref_$i" input="$vad/input_$i.npy" state="$state" sr=value:16000
  state=$vad/ref_$i/stateN.npy
done

ref "$models/ch_PP-OCRv4_rec_infer.onnx" "$data/ppocr_v4_rec/ref" x="$data/ppocr_v4_rec/x.npy"
ls -l "$data"/*/ref*/
