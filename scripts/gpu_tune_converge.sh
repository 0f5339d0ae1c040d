#!/usr/bin/env bash
# A short tune against a long one (issue 13: "tuning ResNet-50 within 5 minutes (cold database)
# reaches within 3% of the best schedule found with an unlimited budget"), on the GPU machine
# (layout of scripts/pack_device.sh; python3 with torch, torchvision, onnx). A call is limited to
# 10 minutes, so the long tune is resumed over several calls (`tessel tune` goes on where a
# database's records stopped: TuningRecord::candidates), its state carried between them:
#
#   first BUDGET   the model exported, a cold tune of BUDGET (default 5m) into db_first.json, copied
#                  to db_long.json;
#   more BUDGET    db_long.json tuned on for BUDGET (default 8m), resuming every contraction; its
#                  summary says how much this call gained (run it until a call gains ~nothing);
#   explore N [BUDGET]  db_long.json tuned on with `tessel tune --explore N` for BUDGET (default
#                  3m): N candidates per contraction drawn at random from beyond the ranked depth,
#                  so that the long tune is not only the cost model's order taken further;
#   compare        both databases' layers (the sum over their contractions of the fastest time each
#                  found, and the contraction where the short tune is furthest behind), then the
#                  engines compiled with each and benchmarked alternately (ROUNDS, default 3).
#
# State: $STATE (default .device-proto/tune-state, an ignored folder to carry), also copied to
# $OUT at the end of each call: bring it back there before the next call. Every measurement is
# appended to $STATE/tune.jsonl (gzipped in $OUT) for bench/rank_fit.py.
#
# Usage: scripts/gpu_tune_converge.sh MODEL:BATCH first|more|compare [BUDGET]
#        scripts/gpu_tune_converge.sh MODEL:BATCH explore N [BUDGET]
set -uo pipefail
ROOT=$(pwd)
OUT=${OUT:-/tmp/tessel_out}
W=${TESSEL_MODELS_DIR:-/tmp/tessel_models}
STATE=${STATE:-$ROOT/.device-proto/tune-state}
ROUNDS=${ROUNDS:-3}
run=${1:?usage: gpu_tune_converge.sh MODEL:BATCH first|more|compare [BUDGET]}
step=${2:?usage: gpu_tune_converge.sh MODEL:BATCH first|more|compare [BUDGET]}
[[ $run =~ ^([a-z0-9_]+):([0-9]+)$ ]] || { echo "gpu_tune_converge.sh: '$run' is not model:batch" >&2; exit 2; }
n=${BASH_REMATCH[1]}_b${BASH_REMATCH[2]}
source "$ROOT/scripts/gpu_env.sh"
tessel_device "$ROOT"
export TESSEL_CACHE_DIR=${TESSEL_CACHE_DIR:-$W/cache}
mkdir -p "$OUT" "$W" "$STATE"
# State brought back from an earlier call's $OUT has the log gzipped.
[[ -f $STATE/tune.jsonl.gz && ! -f $STATE/tune.jsonl ]] && gunzip -c "$STATE/tune.jsonl.gz" > "$STATE/tune.jsonl"
tessel_export "$run" "$W" "$W/export_$n.log" || { echo "export failed"; tail -5 "$W/export_$n.log"; exit 1; }
status=0
case $step in
  first)
    rm -f "$STATE/db_first.json" "$STATE/db_long.json" "$STATE/tune.jsonl"
    "$TESSEL" tune "$W/$n.onnx" --db "$STATE/db_first.json" --budget "${3:-5m}" --log "$STATE/tune.jsonl" \
      > "$STATE/tune_first.log" 2>&1 || status=1
    tail -1 "$STATE/tune_first.log"
    cp "$STATE/db_first.json" "$STATE/db_long.json" || status=1
    ;;
  more)
    [[ -f $STATE/db_long.json ]] || { echo "no $STATE/db_long.json: run 'first' (or bring the state back)"; exit 1; }
    "$TESSEL" tune "$W/$n.onnx" --db "$STATE/db_long.json" --budget "${3:-8m}" --log "$STATE/tune.jsonl" \
      > "$STATE/tune_more.log" 2>&1 || status=1
    tail -1 "$STATE/tune_more.log"
    ;;
  explore)
    [[ -f $STATE/db_long.json ]] || { echo "no $STATE/db_long.json: run 'first' (or bring the state back)"; exit 1; }
    [[ ${3:-} =~ ^[0-9]+$ ]] || { echo "gpu_tune_converge.sh: explore N [BUDGET]: N candidates per contraction" >&2; exit 2; }
    "$TESSEL" tune "$W/$n.onnx" --db "$STATE/db_long.json" --explore "$3" --budget "${4:-3m}" \
      --log "$STATE/tune.jsonl" > "$STATE/tune_explore.log" 2>&1 || status=1
    tail -1 "$STATE/tune_explore.log"
    ;;
  compare)
    for d in first long; do
      [[ -f $STATE/db_$d.json ]] || { echo "no $STATE/db_$d.json"; exit 1; }
      "$TESSEL" compile "$W/$n.onnx" -o "$W/$n.$d.tsl" --db "$STATE/db_$d.json" > /dev/null 2>&1 ||
        { echo "compile with db_$d failed"; exit 1; }
    done
    python3 - "$STATE/db_first.json" "$STATE/db_long.json" <<'PY'
import json, sys
first, long = ({(r["key"], r["device"]): r for r in json.load(open(p))["records"]} for p in sys.argv[1:])
keys = sorted(first.keys() & long.keys())
a = sum(first[k]["microseconds"] for k in keys)
b = sum(long[k]["microseconds"] for k in keys)
worst = max(keys, key=lambda k: first[k]["microseconds"] / long[k]["microseconds"])
print(f"layers: {len(keys)} contractions, short tune {a:.1f} us, long tune {b:.1f} us: short / long "
      f"{a / b:.4f}; candidates reached, summed over them: short {sum(first[k]['candidates'] for k in keys)}, "
      f"long {sum(long[k]['candidates'] for k in keys)}")
print(f"furthest behind: {first[worst]['schedule']} {first[worst]['microseconds']:.1f} us against "
      f"{long[worst]['schedule']} {long[worst]['microseconds']:.1f} us")
PY
    short=() long=()
    for ((i = 0; i < ROUNDS; ++i)); do
      short+=("$(tessel_bench_ms "$W/$n.first.tsl")")
      long+=("$(tessel_bench_ms "$W/$n.long.tsl")")
    done
    echo "engine with the short tune: ${short[*]} ms; with the long tune: ${long[*]} ms"
    awk -v ms="$(tessel_median "${short[@]}")" -v ml="$(tessel_median "${long[@]}")" 'BEGIN {
      printf "medians: short %.4f ms, long %.4f ms: the short tune is %.1f%% slower\n", ms, ml, 100 * (ms / ml - 1) }' 
    ;;
  *)
    echo "gpu_tune_converge.sh: step '$step' is not first, more, explore or compare" >&2
    exit 2
    ;;
esac
cp "$STATE"/db_*.json "$STATE"/tune_*.log "$OUT"/ 2> /dev/null
gzip -c "$STATE/tune.jsonl" > "$OUT/tune.jsonl.gz" 2> /dev/null
exit $status
