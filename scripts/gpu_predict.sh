#!/usr/bin/env bash
# The predictor on the held-out models (issue 13), on the GPU machine (layout of
# scripts/pack_device.sh; python3 with torch, torchvision, onnx). bench/predictor_split.json
# says which models are held out and why. Each is built and exported as bench/torch_models.py
# does for scripts/gpu_models.sh (usable random weights, opset 18), then `tessel profile` times
# every kernel beside its prediction, untuned (no --db); bench/predictor_eval.py reports the
# median per-kernel error and the per-model error against one graph replay.
# Under $OUT: predict.md (the table), predict.json, and each model's profile as text and as a
# Chrome trace (trace_*.json: every launch's kernel, grid, block, shared memory, work, measured
# and predicted time: what bench/predictor_fit.py fits the learned correction on).
#
# Usage: scripts/gpu_predict.sh [held_out|test|fit|RUNS]   (default held_out: the held-out runs
#   of predictor_split.json, the validation set of predictor changes; test: its test runs, scored
#   once after such changes (its "test_rule"); fit: its fit models at the batches of "fit")
set -uo pipefail
ROOT=$(pwd)
OUT=${OUT:-/tmp/tessel_out}
W=/tmp/tessel_predict
TESSEL=$ROOT/${TESSEL_DEVICE_DIR:-.device}/bin/tessel
runs=${1:-held_out}
if [[ $runs == held_out || $runs == test || $runs == fit ]]; then
  runs=$(python3 -c "import json, sys
s = json.load(open('bench/predictor_split.json'))
print(','.join(s[sys.argv[1]]) if sys.argv[1] != 'fit' else
      ','.join(f'{m}:{b}' for m in s['fit']['models'] for b in s['fit']['batches'][m]))" "$runs")
fi
for r in ${runs//,/ }; do
  [[ $r =~ ^[a-z0-9_]+:[0-9]+$ ]] || { echo "gpu_predict.sh: '$r' is not model:batch" >&2; exit 2; }
done
source "$ROOT/scripts/gpu_env.sh"
export LD_LIBRARY_PATH=$(tessel_lib_path "$ROOT/${TESSEL_DEVICE_DIR:-.device}")
rm -rf "$W"
mkdir -p "$OUT" "$W"
status=0
profiles=()
for r in ${runs//,/ }; do
  m=${r%%:*} b=${r##*:}
  python3 bench/torch_models.py --out "$W" --csv "$W/torch_models.csv" --runs "$r" --no-compile --reps 5 \
    >> "$OUT/predict.log" 2>&1 || { echo "$r: export failed (predict.log)"; status=1; continue; }
  "$TESSEL" profile "$W/${m}_b${b}.onnx" --trace "$OUT/trace_${m}_b${b}.json" > "$OUT/profile_${m}_b${b}.txt" 2>> "$OUT/predict.log" ||
    { echo "$r: profile failed (predict.log)"; status=1; continue; }
  profiles+=("${m}:${b}=$OUT/profile_${m}_b${b}.txt")
done
python3 bench/predictor_eval.py "${profiles[@]}" --json "$OUT/predict.json" | tee "$OUT/predict.md" || status=1
exit $status
