#!/usr/bin/env bash
# Times given schedules on the op workloads whose name contains FILTER, against the default
# pick and the library (cuDNN / cuBLASLt), on the GPU machine (layout of scripts/pack_device.sh):
#   scripts/sweep_schedules.sh FILTER [SCHEDULE ...]
# A schedule is a Schedule::name() ("tc_128x64x32_s3_w32x64_sk1_r8", "halo_8x16_n64_w64x32_c132");
# one that cannot implement a workload is listed with the reason. Ends with a table:
#   workload, schedule, tessel µs, library µs, library/tessel, correct.
set -uo pipefail
filter=$1
shift
ROOT=$(pwd)
OUT=${OUT:-/tmp/tessel_out}
mkdir -p "$OUT/sweep"
source "$ROOT/scripts/gpu_env.sh"
export LD_LIBRARY_PATH=$(tessel_lib_path "$ROOT/${TESSEL_DEVICE_DIR:-.device}")
export TESSEL_CACHE_DIR=${TESSEL_CACHE_DIR:-/tmp/tessel_cache}
W=$ROOT/${TESSEL_DEVICE_DIR:-.device}/workloads
i=0
for s in default "$@"; do
  opt=()
  [[ $s != default ]] && opt=(--schedule "$s")
  "$ROOT/${TESSEL_DEVICE_DIR:-.device}/bin/tessel" bench-op --conv2d "$W/conv2d.csv" --gemm "$W/gemm.csv" --filter "$filter" \
    --no-peak --reps 50 "${opt[@]}" --json "$OUT/sweep/$i.json" > /dev/null 2> "$OUT/sweep/$i.err" ||
    grep -E "error" "$OUT/sweep/$i.err" | head -3
  i=$((i + 1))
done
python3 - "$OUT/sweep" "$i" "default" "$@" <<'PY'
import json, os, sys
d, n, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print(f"{'workload':34} {'schedule':40} {'tessel us':>10} {'library us':>10} {'ratio':>6} ok")
for i in range(n):
    path = os.path.join(d, f"{i}.json")
    if not os.path.exists(path):
        continue
    for w in json.load(open(path))["workloads"]:
        t, lib = w["tessel"], w["library"]
        sched = t.get("description", names[i])[:40]
        if not t.get("ran"):
            print(f"{w['name']:34} {sched:40} {'-':>10} {lib.get('median_us', 0):10.1f} {'-':>6} -")
            continue
        r = lib["median_us"] / t["median_us"] if lib.get("ran") else 0
        print(f"{w['name']:34} {sched:40} {t['median_us']:10.1f} {lib.get('median_us', 0):10.1f} {r:6.2f} {t['correct']}")
PY
