#!/usr/bin/env bash
# Untuned against tuned, for several models (issue 13: "untuned speed is at least 0.9x tuned for
# every model of the model table"), on the GPU machine (layout of scripts/pack_device.sh; python3
# with torch, torchvision, onnx). For each MODEL:BATCH: the model exported by
# bench/torch_models.py; its untuned engine; `tessel tune --budget B` into a cold database of its
# own ($OUT/tuning_MODEL_bBATCH.json, every measurement logged to tune_MODEL_bBATCH.jsonl); the
# engine compiled with it; then both engines benchmarked alternately, ROUNDS times each (median
# latency of `tessel bench`), and one table line: untuned ms, tuned ms, untuned speed / tuned.
# The exports run $JOBS at a time, the untuned engines compile $JOBS at a time, and the tunes and
# benchmarks one after another, so that nothing else runs on the GPU while one measures.
#
# Usage: scripts/gpu_tune_table.sh RUNS [BUDGET]   (RUNS: model:batch,...; BUDGET as tessel tune
#   takes it, default 60s; JOBS default 4, ROUNDS default 3)
set -uo pipefail
ROOT=$(pwd)
OUT=${OUT:-/tmp/tessel_out}
W=${TESSEL_MODELS_DIR:-/tmp/tessel_models}
JOBS=${JOBS:-4}
ROUNDS=${ROUNDS:-3}
runs=${1:?usage: gpu_tune_table.sh model:batch,... [BUDGET]}
budget=${2:-60s}
for r in ${runs//,/ }; do
  [[ $r =~ ^[a-z0-9_]+:[0-9]+$ ]] || { echo "gpu_tune_table.sh: '$r' is not model:batch" >&2; exit 2; }
done
source "$ROOT/scripts/gpu_env.sh"
tessel_device "$ROOT"
export TESSEL_CACHE_DIR=${TESSEL_CACHE_DIR:-$W/cache}
mkdir -p "$OUT" "$W"
for r in ${runs//,/ }; do
  m=${r%%:*} b=${r#*:}
  while (( $(jobs -rp | wc -l) >= JOBS )); do wait -n; done
  tessel_export "$r" "$W" "$W/export_${m}_b$b.log" &
done
wait
for r in ${runs//,/ }; do
  n=${r%%:*}_b${r#*:}
  [[ -f $W/$n.onnx ]] || continue
  while (( $(jobs -rp | wc -l) >= JOBS )); do wait -n; done
  "$TESSEL" compile "$W/$n.onnx" -o "$W/$n.tsl" > "$W/compile_$n.log" 2>&1 &
done
wait
status=0
lines=()
for r in ${runs//,/ }; do
  n=${r%%:*}_b${r#*:}
  if [[ ! -f $W/$n.tsl ]]; then
    echo "$r: no untuned engine (export or compile failed: $W/export_$n.log, $W/compile_$n.log)"
    status=1
    continue
  fi
  rm -f "$OUT/tuning_$n.json"
  start=$SECONDS
  "$TESSEL" tune "$W/$n.onnx" --db "$OUT/tuning_$n.json" --budget "$budget" --log "$OUT/tune_$n.jsonl" \
    > "$OUT/tune_$n.log" 2>&1 || { echo "$r: tune failed ($OUT/tune_$n.log)"; status=1; continue; }
  "$TESSEL" compile "$W/$n.onnx" -o "$W/$n.tuned.tsl" --db "$OUT/tuning_$n.json" > /dev/null 2>&1 ||
    { echo "$r: compile with the database failed"; status=1; continue; }
  untuned=() tuned=()
  for ((i = 0; i < ROUNDS; ++i)); do
    untuned+=("$(tessel_bench_ms "$W/$n.tsl")")
    tuned+=("$(tessel_bench_ms "$W/$n.tuned.tsl")")
  done
  u=$(tessel_median "${untuned[@]}") t=$(tessel_median "${tuned[@]}")
  line=$(awk -v r="$r" -v u="$u" -v t="$t" -v s=$((SECONDS - start)) -v k="$(tail -1 "$OUT/tune_$n.log")" \
    'BEGIN { printf "| %s | %.4f | %.4f | %.3f | %d s | %s |", r, u, t, t / u, s, k }')
  echo "$line"
  lines+=("$line")
done
echo
echo "| run | untuned ms | tuned ms | untuned speed / tuned | tune + compile + bench | tune's last line |"
echo "|---|---:|---:|---:|---:|---|"
printf '%s\n' "${lines[@]}"
exit $status
