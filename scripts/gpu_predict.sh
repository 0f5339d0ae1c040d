#!/usr/bin/env bash
# The predictor's measurements (issue 13), on the GPU machine (layout of scripts/pack_device.sh;
# python3 with torch, torchvision, onnx). bench/predictor_split.json says which models are fit,
# held out and test, and why. Each run is built and exported as bench/torch_models.py does for
# scripts/gpu_models.sh (usable random weights, opset 18); an int8 run's export is then quantized
# by bench/quantize_ort.py (onnxruntime's QDQ, calibrated on the exported batch; onnxruntime comes
# from the packed wheels). `tessel profile` times every kernel beside its prediction, untuned (no
# --db); bench/predictor_eval.py reports the median per-kernel error and the per-model error
# against one graph replay.
# Under $OUT: predict.md (the table), predict.json, and each run's profile as text and as a
# Chrome trace (trace_<model>_b<batch>[_int8].json: every launch's kernel, grid, block, shared
# memory, work, measured and predicted time: what bench/predictor_fit.py fits the learned
# correction on).
#
# Three stages, so that nothing else runs on the GPU while a kernel is timed: the exports (and
# quantizations) in $JOBS parallel workers, then the engines compiled $JOBS at a time (CPU), then
# the profiles one after another. A run whose stage fails is reported and skipped. $JOBS
# (default 4) and $DEADLINE (seconds; no profile starts after it) bound the time it takes.
#
# Usage: scripts/gpu_predict.sh [held_out|test|test2|next_test|fit|RUNS]   (default held_out: the
#   held-out runs of predictor_split.json with its int8 held-out runs, the validation set of
#   predictor changes; test: its test runs, scored once after such changes (its "test_rule");
#   test2: its second test runs, scored; next_test: the next change's test runs
#   ("next_test_rule"); fit: its fit models at the
#   batches of "fit", and its int8 fit runs; RUNS: model:batch[:int8],...)
set -uo pipefail
ROOT=$(pwd)
OUT=${OUT:-/tmp/tessel_out}
W=/tmp/tessel_predict
JOBS=${JOBS:-4}
DEADLINE=${DEADLINE:-0}  # seconds after which no further profile starts (0: none)
runs=${1:-held_out}
if [[ $runs == held_out || $runs == test || $runs == test2 || $runs == next_test || $runs == fit ]]; then
  runs=$(python3 - "$runs" <<'PY'
import json, sys
s = json.load(open("bench/predictor_split.json"))
int8 = s.get("int8", {"fit": [], "held_out": []})
which = sys.argv[1]
if which == "fit":
    r = [f"{m}:{b}" for m in s["fit"]["models"] for b in s["fit"]["batches"][m]]
    r += [x + ":int8" for x in int8["fit"]]
else:
    r = list(s[which]) + ([x + ":int8" for x in int8["held_out"]] if which == "held_out" else [])
print(",".join(r))
PY
)
fi
for r in ${runs//,/ }; do
  [[ $r =~ ^[a-z0-9_]+:[0-9]+(:int8)?$ ]] || { echo "gpu_predict.sh: '$r' is not model:batch[:int8]" >&2; exit 2; }
done
source "$ROOT/scripts/gpu_env.sh"
tessel_device "$ROOT"
export TESSEL_CACHE_DIR=${TESSEL_CACHE_DIR:-$W/cache}
rm -rf "$W"
mkdir -p "$OUT" "$W/log"
if [[ $runs == *:int8* ]]; then
  tessel_onnxruntime "$DEV" "$W" >> "$OUT/predict.log" 2>&1 || echo "onnxruntime: not installed (predict.log)"
fi

name() {  # model:batch[:int8] -> model_bBATCH[_int8]
  local m=${1%%:*} rest=${1#*:}
  local b=${rest%%:*}
  [[ $rest == *:int8 ]] && echo "${m}_b${b}_int8" || echo "${m}_b${b}"
}

# Stage 1: export (and quantize) in $JOBS workers. A model at a batch is exported once, by one
# worker, which then quantizes it where an int8 run of it is asked for.
keys=$(for r in ${runs//,/ }; do m=${r%%:*} rest=${r#*:}; echo "$m:${rest%%:*}"; done | awk '!seen[$0]++')
export_worker() {
  local k=$1 i=0 key m b
  for key in $keys; do
    (( i++ % JOBS == k )) || continue
    m=${key%%:*} b=${key#*:}
    python3 bench/torch_models.py --out "$W" --csv "$W/torch_models.csv" --runs "$key" --no-compile \
      --reps 1 >> "$W/log/export_$k.log" 2>&1 || { echo "$key: export failed" >> "$W/log/failed"; continue; }
    if [[ ,$runs, == *,$key:int8,* ]]; then
      python3 bench/quantize_ort.py "$W/${m}_b$b.onnx" "$W/${m}_b${b}_int8.onnx" \
        --calib "$W/${m}_b$b.input.npy" >> "$W/log/export_$k.log" 2>&1 ||
        echo "$key:int8: quantize failed" >> "$W/log/failed"
    fi
  done
}
for ((k = 0; k < JOBS; ++k)); do export_worker "$k" & done
wait
cat "$W"/log/export_*.log >> "$OUT/predict.log" 2> /dev/null
echo "exported in $SECONDS s"

# Stage 2: the engines, $JOBS at a time.
compiled=()
for r in ${runs//,/ }; do
  n=$(name "$r")
  [[ -f $W/$n.onnx ]] || { echo "$r: no model (predict.log)"; continue; }
  while (( $(jobs -rp | wc -l) >= JOBS )); do wait -n; done
  "$TESSEL" compile "$W/$n.onnx" -o "$W/$n.tsl" > "$W/log/compile_$n.log" 2>&1 &
done
wait
for r in ${runs//,/ }; do
  n=$(name "$r")
  [[ -f $W/$n.onnx ]] || continue
  if [[ -f $W/$n.tsl ]]; then compiled+=("$n"); else
    echo "$r: compile failed (predict.log)"; cat "$W/log/compile_$n.log" >> "$OUT/predict.log"; fi
done

echo "compiled ${#compiled[@]} engines at $SECONDS s"

# Stage 3: the profiles, one at a time.
status=0
profiles=()
for n in "${compiled[@]}"; do
  if (( DEADLINE > 0 && SECONDS > DEADLINE )); then echo "$n: not profiled (past ${DEADLINE} s)"; status=1; continue; fi
  "$TESSEL" profile "$W/$n.tsl" --trace "$OUT/trace_$n.json" > "$OUT/profile_$n.txt" 2>> "$OUT/predict.log" ||
    { echo "$n: profile failed (predict.log)"; status=1; continue; }
  profiles+=("$n=$OUT/profile_$n.txt")
done
echo "profiled ${#profiles[@]} runs at $SECONDS s"
[[ -s $W/log/failed ]] && { cat "$W/log/failed"; status=1; }
python3 bench/predictor_eval.py "${profiles[@]}" --json "$OUT/predict.json" | tee "$OUT/predict.md" || status=1
exit $status
