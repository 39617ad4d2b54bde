#!/usr/bin/env bash
# vs_ort.sh: Loom against ONNX Runtime 1.30 on the same machine, side by side: for each model
# and thread count, `loom bench` and ../shared/bench/ortbench.sh (ORT's C API) run alternately
# (twice each), and the table shows both medians and their ratio.
#   tools/bench/vs_ort.sh [--cases "NAME..."] [THREADS...]      (default: every case; threads 1 2)
# LOOM_BENCH_CASES="gpt2_decode bert_128" also picks cases (--cases wins).
# Needs ../shared/bench (beside the repository) and the fetched models (tools/models/fetch.sh). The
# transformer cases (gpt2_decode, decoder_d512_decode, bert_128) are made on first use into the models
# directory by tools/models/gen_transformers.py (python3 with onnx and numpy), inputs included.
# Before every run the script drops the Loom binary and ONNX Runtime's library from the page cache
# (python3: fsync, then posix_fadvise DONTNEED), so that each process reads its code from disk as
# a freshly started service does. Peak RSS counts the code pages a process maps, and how many a
# touch maps depends on how the file came into the page cache: the loom binary `go build` had just
# written peaked at 170-171 MB on the d-512 decoder at one thread, the same file dropped from the
# cache and read again at 151-152 MB, every later run too (Linux 6.18, ext4, 2026-12-07).
# (ONNX Runtime's peak on that case is 158 or 195 MB from one run to the next, dropped or not.)
# The decode steps read every weight once, so their bound is the weights' bytes over the machine's
# streaming read rate: for them the script also builds tools/bench/stream_read.c (cc) and measures
# that rate with the same thread count right after the case, and a second table gives the bound and
# the fraction of it Loom's faster median reaches (1.00 = at the bound).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ort=${LOOM_ORTBENCH:-$repo/../shared/bench/ortbench.sh}
models=${LOOM_MODELS_DIR:-$HOME/.cache/loom-models}
only=${LOOM_BENCH_CASES:-}
if [ "${1:-}" = --cases ]; then only=${2:?--cases needs a list of case names}; shift 2; fi
threads=("$@")
[ ${#threads[@]} -eq 0 ] && threads=(1 2)
work=$(mktemp -d)
loom=$work/loom
(cd "$repo" && go build -o "$loom" ./tools/cmd/loom)
stream=$work/stream_read
cc -O3 -march=native -pthread -o "$stream" "$repo/tools/bench/stream_read.c" 2>/dev/null || stream=""
bounds=()
ortlib=${LOOM_ORT_LIB:-${LOOM_ORT_DIR:-$HOME/.cache/loom-bench/ort}/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1}
# cold: drops the runtimes' code files from the page cache (see above); nothing without python3.
cold() {
  python3 - "$loom" "$ortlib" <<'PY' 2>/dev/null || true
import os, sys
for p in sys.argv[1:]:
    try:
        fd = os.open(os.path.realpath(p), os.O_RDONLY)
    except OSError:
        continue
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
PY
}

cases=(
  "add|200000|$repo/tools/cmd/loom/testdata/add.onnx a=shape:1024 b=shape:1024"
  "mlp|5000|$repo/tools/cmd/loom/testdata/mlp.onnx x=shape:1x64"
  "mlp_if|5000|$repo/go/session/testdata/models/mlp_if.onnx x=shape:1x64"
  "mnist|2000|$repo/tools/cmd/loom/demodata/mnist.onnx Input3=$repo/tools/cmd/loom/demodata/digit2.npy"
  "tiny_encoder|1000|$repo/go/session/testdata/models/tiny_encoder.onnx x=shape:1x16x64"
  "tiny_encoder_t128|300|$repo/go/session/testdata/models/tiny_encoder.onnx x=shape:1x128x64"
  "tiny_encoder_b32t128|20|$repo/go/session/testdata/models/tiny_encoder.onnx x=shape:32x128x64|3"
  "silero_vad_v5|1000|$models/silero_vad_v5.onnx input=shape:1x512 state=shape:2x1x128 sr=value:16000"
  "ppocr_v4_rec|60|$models/ch_PP-OCRv4_rec_infer.onnx x=shape:1x3x48x320"
  # NAME|RUNS|MODEL INPUT...|WARMUP (default 20)|bw (a decode step: also its bandwidth bound); @DIR
  # stands for NAME=DIR/NAME.npy for every .npy in DIR.
  "gpt2_decode|500|$models/gpt2_decode.onnx @$models/gpt2_decode_in128|10|bw"
  "decoder_d512_decode|3000|$models/decoder_d512_decode.onnx @$models/decoder_d512_decode_in128|50|bw"
  "bert_128|75|$models/bert_base.onnx @$models/bert_base_in128|5"
)
# Generated cases: NAME -> gen_transformers.py arguments (model, then inputs).
declare -A gen=(
  [gpt2_decode]="gpt2 $models/gpt2_decode.onnx --inputs $models/gpt2_decode_in128 --past 128"
  [decoder_d512_decode]="decoder $models/decoder_d512_decode.onnx --inputs $models/decoder_d512_decode_in128 --past 128"
  [bert_128]="bert $models/bert_base.onnx --inputs $models/bert_base_in128 --seq 128"
)
# prepare NAME: makes a generated case's model and inputs, whichever is missing (on failure the row says
# what is missing).
prepare() {
  [ -n "${gen[$1]:-}" ] || return 0
  local g
  read -r -a g <<<"${gen[$1]}"
  [ -d "${g[3]}" ] || { [ -e "${g[1]}" ] && g[1]=-; }   # inputs only
  if [ "${g[1]}" = - ] || [ ! -e "${g[1]}" ]; then
    mkdir -p "$models"
    python3 "$repo/tools/models/gen_transformers.py" "${g[@]}" >&2 || echo "vs_ort.sh: could not make $1" >&2
  fi
}
field() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p"; }
printf "| model | threads | Loom median ms | ORT median ms | Loom / ORT | Loom p95 | ORT p95 | RSS MB Loom / ORT |\n"
printf "| --- | --- | --- | --- | --- | --- | --- | --- |\n"
for c in "${cases[@]}"; do
  IFS='|' read -r name runs args warm bw <<<"$c"
  [ -z "$only" ] || [[ " $only " == *" $name "* ]] || continue
  prepare "$name"
  read -r -a words <<<"$args"
  argv=()
  for w in "${words[@]}"; do
    if [[ $w == @* ]]; then
      for f in "${w#@}"/*.npy; do [ -e "$f" ] && argv+=("$(basename "$f" .npy)=$f"); done
    else
      argv+=("$w")
    fi
  done
  [ -e "${argv[0]}" ] || { echo "| $name | - | missing ${argv[0]} |"; continue; }
  for t in "${threads[@]}"; do
    lm=(); om=(); lp=(); op=(); lr=(); orr=()
    for round in 1 2; do
      cold
      l=$("$loom" bench "${argv[@]}" --threads "$t" --runs "$runs" --warmup "${warm:-20}" --json 2>/dev/null | tail -1)
      cold
      o=$(bash "$ort" bench "${argv[@]}" --threads "$t" --runs "$runs" --warmup "${warm:-20}" --json 2>/dev/null | tail -1)
      lm+=("$(echo "$l" | field median_ms)"); om+=("$(echo "$o" | field median_ms)")
      lp+=("$(echo "$l" | field p95_ms)"); op+=("$(echo "$o" | field p95_ms)")
      lr+=("$(echo "$l" | field peak_rss_mb)"); orr+=("$(echo "$o" | field peak_rss_mb)")
    done
    ratio=$(awk -v a="${lm[0]}" -v b="${lm[1]}" -v c="${om[0]}" -v d="${om[1]}" 'BEGIN{l=(a<b?a:b); o=(c<d?c:d); printf "%.2f", l/o}')
    printf "| %s | %s | %s, %s | %s, %s | %s | %s | %s | %s / %s |\n" "$name" "$t" "${lm[0]}" "${lm[1]}" "${om[0]}" "${om[1]}" \
      "$ratio" "${lp[0]}" "${op[0]}" "${lr[0]}" "${orr[0]}"
    if [ "$bw" = bw ] && [ -n "$stream" ]; then
      wmb=$(echo "$l" | field weights_mb)
      gbs=$("$stream" "$t" | field read_gb_s)
      bounds+=("$(awk -v n="$name" -v t="$t" -v w="$wmb" -v r="$gbs" -v a="${lm[0]}" -v b="${lm[1]}" -v c="${om[0]}" -v d="${om[1]}" 'BEGIN{
        bound = w * 1048576 / (r * 1e9) * 1e3; l = (a < b ? a : b); o = (c < d ? c : d)
        printf "| %s | %s | %.1f | %.1f | %.2f | %s | %.2f | %.2f |", n, t, w, r, bound, l, bound / l, bound / o}')")
    fi
  done
done
if [ ${#bounds[@]} -gt 0 ]; then
  printf "\nDecode steps against the streaming bound (weights MiB / read rate measured right after the case):\n\n"
  printf "| model | threads | weights MiB | read GB/s | bound ms | Loom median ms | bound / Loom | bound / ORT |\n"
  printf "| --- | --- | --- | --- | --- | --- | --- | --- |\n"
  printf "%s\n" "${bounds[@]}"
fi
