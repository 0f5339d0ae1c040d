#!/usr/bin/env bash
# The whole-model comparison with PyTorch, on the GPU machine (layout of scripts/pack_device.sh:
# tessel in .device/bin, its libraries in .device/lib; python3 with torch, torchvision, onnx).
#
# For each model:batch run, model by model:
#   PyTorch (bench/torch_models.py): build the model with usable random weights, export it to
#     ONNX (opset 18, as the exporter writes it), save a random input and the fp32 output, time
#     eager fp16 replayed as a CUDA graph and torch.compile(mode="reduce-overhead");
#   tessel: `compile M.onnx -o M.tsl` into an empty kernel cache (cold), again into the same
#     cache (warm); `bench M.tsl --json`; `run M.tsl --device cuda` on PyTorch's input.
# After each model bench/models_report.py rewrites the table, so a run cut short keeps the rows
# it finished. Under $OUT: models.md (the table), models.json (every number), models.log.
# The large files (ONNX, .tsl, .npy) stay in $TESSEL_MODELS_DIR (default /tmp/tessel_models).
#
# Usage: scripts/gpu_models.sh [RUNS]
#   RUNS: comma-separated model:batch; default the four classifiers at batch 1 and 32 and sr_net
#   at batch 1 (720x1280). `zoo` is issue 10's zoo (bench/zoo.py: every torchvision CNN at batch
#   1 and 32, longer than one call of the GPU machine), `zoo:K/N` its part K of N; join the
#   parts' models.json with bench/models_report.py --merge. TORCH_COMPILE=0 skips torch.compile
#   (its column reads "—").
# Exit status 1 when a step failed or a model missed the accuracy bar.
set -uo pipefail
ROOT=$(pwd)
OUT=${OUT:-/tmp/tessel_out}
W=${TESSEL_MODELS_DIR:-/tmp/tessel_models}
TESSEL=$ROOT/${TESSEL_DEVICE_DIR:-.device}/bin/tessel
runs=${1:-resnet50:1,vgg16:1,mobilenet_v2:1,inception_v3:1,sr_net:1,resnet50:32,vgg16:32,mobilenet_v2:32,inception_v3:32}
if [[ $runs =~ ^zoo(:([0-9]+/[0-9]+))?$ ]]; then
  runs=$(python3 "$ROOT/bench/zoo.py" --runs "${BASH_REMATCH[2]:-1/1}") || exit 2
fi
for r in ${runs//,/ }; do
  [[ $r =~ ^[a-z0-9_]+:[0-9]+$ ]] || { echo "gpu_models.sh: '$r' is not model:batch" >&2; exit 2; }
done
source "$ROOT/scripts/gpu_env.sh"
export LD_LIBRARY_PATH=$(tessel_lib_path "$ROOT/${TESSEL_DEVICE_DIR:-.device}")
rm -rf "$W"
mkdir -p "$OUT" "$W"
LOG=$OUT/models.log
: > "$LOG"
device=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
echo "device: $device; runs: $runs" | tee -a "$LOG"
compile_flag=
[[ ${TORCH_COMPILE:-1} == 0 ]] && compile_flag=--no-compile
status=0

# Seconds since $1, a `date +%s.%N` stamp.
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'; }

# Runs a command, its output appended to the log; returns its exit status.
logged() {
  echo "\$ $*" >> "$LOG"
  "$@" >> "$LOG" 2>&1
}

report() {
  python3 bench/models_report.py --work "$W" --md "$OUT/models.md" --json "$OUT/models.json" \
    --device "$device"
}

# Records a failed step in the caller's local $st ("ok" until the first).
fail() { if [[ $st == ok ]]; then st=$1; else st="$st+$1"; fi; }

# tessel's side of one run ($1 model, $2 batch): appends
# model,batch,compile_cold_s,compile_warm_s,status to $W/tessel.csv.
tessel_side() {
  local m=$1 b=$2
  local base=$W/${1}_b$2 cache=$W/cache_${1}_b$2 cold=nan warm=nan st=ok t0
  echo "== tessel: $m batch $b" | tee -a "$LOG"
  mkdir -p "$cache"
  if [[ ! -f $base.onnx ]]; then
    fail no-onnx
  else
    # Cold: an empty kernel cache, and no CUDA driver JIT cache either (in case PTX is loaded).
    t0=$(date +%s.%N)
    if logged env TESSEL_CACHE_DIR="$cache" CUDA_CACHE_DISABLE=1 \
        "$TESSEL" compile "$base.onnx" -o "$base.tsl" --precision fp16; then
      cold=$(since "$t0")
      t0=$(date +%s.%N)
      if logged env TESSEL_CACHE_DIR="$cache" \
          "$TESSEL" compile "$base.onnx" -o "$base.tsl" --precision fp16; then
        warm=$(since "$t0")
      else
        fail compile-warm-failed
      fi
      logged env TESSEL_CACHE_DIR="$cache" "$TESSEL" bench "$base.tsl" --json "$base.bench.json" \
        || fail bench-failed
      logged env TESSEL_CACHE_DIR="$cache" "$TESSEL" run "$base.tsl" --device cuda \
        --input "input=$base.input.npy" --output-dir "$base.out" || fail run-failed
    else
      fail compile-failed
    fi
  fi
  echo "   compile cold ${cold} s, warm ${warm} s; $st" | tee -a "$LOG"
  echo "$m,$b,$cold,$warm,$st" >> "$W/tessel.csv"
  [[ $st == ok ]]
}

# Models in order of first mention, each with all its runs: one PyTorch process per model.
for m in $(tr ',' '\n' <<< "$runs" | cut -d: -f1 | awk '!seen[$0]++'); do
  mruns=$(tr ',' '\n' <<< "$runs" | awk -F: -v m="$m" '$1 == m' | paste -sd, -)
  echo "== PyTorch: $mruns" | tee -a "$LOG"
  t0=$(date +%s.%N)
  logged python3 bench/torch_models.py --out "$W" --csv "$W/torch_models.csv" --runs "$mruns" \
    $compile_flag || status=1
  echo "   PyTorch side $(since "$t0") s" | tee -a "$LOG"
  for r in ${mruns//,/ }; do
    tessel_side "${r%%:*}" "${r##*:}" || status=1
  done
  report > /dev/null
done
echo
report || status=1
exit $status
