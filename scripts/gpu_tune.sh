#!/usr/bin/env bash
# Tuning and prediction on the GPU machine (layout of scripts/pack_device.sh), for one model:
#   1. the ONNX model from bench/torch_models.py (reused if scripts/gpu_models.sh left it);
#   2. `tessel predict` for it, and `tessel profile` of the untuned engine: predicted against
#      measured per kernel;
#   3. `tessel tune --budget B` into $OUT/tuning.json (a cold database unless one is there),
#      every measurement logged to $OUT/tune_MODEL_bBATCH.jsonl (bench/rank_fit.py reads it);
#   4. the engine compiled with the database: its compile time (warm), `predict --db` against
#      its profile, and both engines benchmarked alternately twice (median latency each).
# MODEL:BATCH:int8 tunes the model quantized by onnxruntime's quantizer (bench/quantize_ort.py,
# calibrated on the exported input, as scripts/gpu_int8.sh does; onnxruntime from the packed
# wheels), its files named MODEL_int8_bBATCH.
# Usage: scripts/gpu_tune.sh MODEL:BATCH[:int8] [BUDGET]   (BUDGET as tessel tune takes it; 3m)
set -uo pipefail
ROOT=$(pwd)
OUT=${OUT:-/tmp/tessel_out}
W=${TESSEL_MODELS_DIR:-/tmp/tessel_models}
source "$ROOT/scripts/gpu_env.sh"
tessel_device "$ROOT"
run=${1:?usage: gpu_tune.sh MODEL:BATCH[:int8] [BUDGET]}
budget=${2:-3m}
[[ $run =~ ^([a-z0-9_]+):([0-9]+)(:int8)?$ ]] ||
  { echo "gpu_tune.sh: '$run' is not model:batch[:int8]" >&2; exit 2; }
m=${BASH_REMATCH[1]} b=${BASH_REMATCH[2]} int8=${BASH_REMATCH[3]}
mkdir -p "$OUT" "$W"
exported=$W/${m}_b$b
tessel_export "$m:$b" "$W" "$OUT/tune_export.log" ||
  { echo "export failed"; tail -5 "$OUT/tune_export.log"; exit 1; }
# $tag names the model's files here and in $OUT; $base.onnx is the model tuned.
tag=${m}_b$b
if [[ -n $int8 ]]; then
  tag=${m}_int8_b$b
  tessel_onnxruntime "$DEV" "$W" > "$OUT/tune_quantize.log" 2>&1 &&
    python3 bench/quantize_ort.py "$exported.onnx" "$W/$tag.onnx" --calib "$exported.input.npy" \
      >> "$OUT/tune_quantize.log" 2>&1 || { echo "quantize failed"; tail -5 "$OUT/tune_quantize.log"; exit 1; }
fi
base=$W/$tag
export TESSEL_CACHE_DIR=$W/cache_$tag
status=0
echo "== predict $tag"
"$TESSEL" predict "$base.onnx" --json "$OUT/predict_$tag.json" --total-only || status=1
echo "== untuned engine: profile (predicted against measured)"
"$TESSEL" compile "$base.onnx" -o "$base.tsl" > /dev/null || status=1
"$TESSEL" profile "$base.tsl" > "$OUT/profile_$tag.txt" 2>&1 || status=1
tail -3 "$OUT/profile_$tag.txt"
echo "== tune $tag, budget $budget"
"$TESSEL" tune "$base.onnx" --db "$OUT/tuning.json" --budget "$budget" --log "$OUT/tune_$tag.jsonl" > "$OUT/tune_$tag.log" 2>&1 || status=1
tail -2 "$OUT/tune_$tag.log"
t0=$(date +%s.%N)
"$TESSEL" compile "$base.onnx" -o "$base.tuned.tsl" --db "$OUT/tuning.json" > /dev/null || status=1
echo "compile with the warm database and kernel cache: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s"
echo "== the tuned engine: predict --db against profile"
"$TESSEL" predict "$base.onnx" --db "$OUT/tuning.json" --total-only || status=1
"$TESSEL" profile "$base.tuned.tsl" > "$OUT/profile_$tag.tuned.txt" 2>&1 || status=1
tail -2 "$OUT/profile_$tag.tuned.txt"
echo "== bench untuned / tuned, alternately"
for round in 1 2; do
  for e in tsl tuned.tsl; do
    ms=$("$TESSEL" bench "$base.$e" --json "$OUT/bench_${e}_$round.json" > /dev/null 2>&1 &&
         python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['median_ms'])" "$OUT/bench_${e}_$round.json")
    echo "round $round $e: median ${ms:-failed} ms"
  done
done
exit $status
