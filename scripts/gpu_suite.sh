#!/usr/bin/env bash
# The GPU run, on a machine with a CUDA device: GPU tests, compute-sanitizer on new kernels,
# and the op benchmarks against cuDNN / cuBLASLt (the shared workloads, then the depthwise and
# grouped layers of bench/workloads/conv2d_grouped.csv with their DRAM bandwidth, then the
# shared workloads in int8); ends with short tables.
# Expects the layout of scripts/pack_device.sh (.device/bin, .device/lib, .device/workloads).
# Usage: scripts/gpu_suite.sh [tests|sanitize|bench|grouped|all] [bench filter]
#   grouped: only the depthwise and grouped bench-op rows.
set -uo pipefail
what=${1:-all}
filter=${2:-}
ROOT=$(pwd)
OUT=${OUT:-/tmp/tessel_out}
mkdir -p "$OUT"
source "$ROOT/scripts/gpu_env.sh"
export LD_LIBRARY_PATH=$(tessel_lib_path "$ROOT/${TESSEL_DEVICE_DIR:-.device}")
export TESSEL_CACHE_DIR=/tmp/tessel_cache
export TESSEL_WORKLOADS_DIR="$ROOT/${TESSEL_DEVICE_DIR:-.device}/workloads"  # for the largest-workload GPU test
export TESSEL_BIN="$ROOT/${TESSEL_DEVICE_DIR:-.device}/bin/tessel"               # for the tests that run the CLI
BIN=$ROOT/${TESSEL_DEVICE_DIR:-.device}/bin
W=$ROOT/${TESSEL_DEVICE_DIR:-.device}/workloads
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
status=0

if [[ $what == all || $what == tests ]]; then
  echo "== gpu_tests"
  "$BIN/gpu_tests" --gtest_brief=1 > "$OUT/gpu_tests.log" 2>&1 || status=1
  grep -E "FAILED|PASSED|SKIPPED \]|tests ran" "$OUT/gpu_tests.log" | tail -25
  echo "== bench_tests (GPU part)"
  "$BIN/bench_tests" --gtest_brief=1 > "$OUT/bench_tests.log" 2>&1 || status=1
  grep -E "FAILED|PASSED|tests ran" "$OUT/bench_tests.log" | tail -10
fi

if [[ $what == all || $what == sanitize ]]; then
  echo "== compute-sanitizer (memcheck, racecheck) on a representative subset"
  for tool in memcheck racecheck; do
    compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/gpu_tests" \
      --gtest_filter='*Sanitize*' > "$OUT/sanitizer_$tool.log" 2>&1
    rc=$?
    echo "$tool: exit $rc; $(grep -E 'SUMMARY' "$OUT/sanitizer_$tool.log" | tail -1)"
    [[ $rc -ne 0 ]] && status=1
  done
fi

if [[ $what == all || $what == bench ]]; then
  echo "== bench-op"
  "$BIN/tessel" bench-op --conv2d "$W/conv2d.csv" --gemm "$W/gemm.csv" --filter "$filter" \
    --json "$OUT/bench_op.json" > "$OUT/bench_op.txt" 2> "$OUT/bench_op.err" || status=1
  cat "$OUT/bench_op.txt"
  tail -3 "$OUT/bench_op.err"
  echo "== PyTorch on the same workloads (bench/pytorch_ops.py), for reference"
  python3 bench/pytorch_ops.py "$W/conv2d.csv" "$W/gemm.csv" "$filter" > "$OUT/pytorch.csv" 2> "$OUT/pytorch.err"
  python3 - "$OUT/bench_op.json" "$OUT/pytorch.csv" <<'PY'
import csv, json, math, sys
bench = json.load(open(sys.argv[1]))["workloads"]
torch_us = {r[0]: float(r[1]) for r in csv.reader(open(sys.argv[2])) if len(r) == 2}
def geo(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))
for op in ("conv2d", "gemm"):
    ok = [w for w in bench if w["op"] == op and w["tessel"]["correct"] and w["library"]["ran"]]
    lib = [w["library"]["median_us"] / w["tessel"]["median_us"] for w in ok]
    pt = [torch_us[w["name"]] / w["tessel"]["median_us"] for w in ok if w["name"] in torch_us]
    if lib:
        print(f"{op}: library/tessel geomean {geo(lib):.3f} (min {min(lib):.2f}) over {len(lib)}; "
              f"PyTorch/tessel geomean {geo(pt) if pt else 0:.3f} (min {min(pt) if pt else 0:.2f})")
PY
fi

if [[ $what == all || $what == bench || $what == grouped ]]; then
  echo "== bench-op, depthwise and grouped convolutions (bench/workloads/conv2d_grouped.csv)"
  "$BIN/tessel" bench-op --conv2d "$ROOT/bench/workloads/conv2d_grouped.csv" --filter "$filter" --no-peak \
    --json "$OUT/bench_grouped.json" > "$OUT/bench_grouped.txt" 2> "$OUT/bench_grouped.err" || status=1
  tail -3 "$OUT/bench_grouped.err"
  # Each row's DRAM traffic at its minimum (x, w and y once each, f16) over tessel's time, as
  # a share of the GPU's DRAM bandwidth (DRAM_PEAK_GBS overrides the table).
  python3 - "$OUT/bench_grouped.json" <<'PY'
import json, os, re, sys
j = json.load(open(sys.argv[1]))
peaks = {"H100 SXM": 3352, "H100 80GB HBM3": 3352, "H100 PCIe": 2039, "H200": 4800, "A100-SXM4-80GB": 2039,
         "A100-SXM4-40GB": 1555}
name = j["device"]["name"]
peak = float(os.environ.get("DRAM_PEAK_GBS") or next((v for k, v in peaks.items() if k in name), 3352))
print(f"{'workload':44} {'tessel us':>9} {'library us':>10} {'ratio':>6} {'GB/s':>6} {'%DRAM':>6}  ({name}, {peak:.0f} GB/s)")
for w in j["workloads"]:
    m = re.match(r"n(\d+) (\d+)x(\d+)x(\d+) -> (\d+) k(\d+)x(\d+) s(\d+) p(\d+) d(\d+) g(\d+)", w["shape"])
    t, lib = w["tessel"], w["library"]
    if not m or not t["ran"]:
        print(f"{w['name']:44} {'-':>9}  {t['description'][:60]}")
        continue
    n, h, wd, ci, co, kh, kw, s, p, d, g = map(int, m.groups())
    oh, ow = (h + 2 * p - d * (kh - 1) - 1) // s + 1, (wd + 2 * p - d * (kw - 1) - 1) // s + 1
    gbs = 2 * (n * h * wd * ci + n * oh * ow * co + co * kh * kw * ci // g) / t["median_us"] / 1e3
    lib_us = f"{lib['median_us']:10.1f}" if lib["ran"] else f"{'-':>10}"
    ok = "" if t["correct"] else "  WRONG"
    print(f"{w['name']:44} {t['median_us']:9.1f} {lib_us} {w['ratio']:6.2f} {gbs:6.0f} {100 * gbs / peak:6.1f}{ok}")
PY
  grep "^geomean" "$OUT/bench_grouped.txt"
fi

if [[ $what == all || $what == bench ]]; then
  echo "== bench-op --int8 (the same shared workloads; cuDNN int8 through its graph API, cuBLASLt int8)"
  "$BIN/tessel" bench-op --int8 --conv2d "$W/conv2d.csv" --gemm "$W/gemm.csv" --filter "$filter" \
    --json "$OUT/bench_int8.json" > "$OUT/bench_int8.txt" 2> "$OUT/bench_int8.err" || status=1
  tail -2 "$OUT/bench_int8.err"
  grep "^geomean" "$OUT/bench_int8.txt"
fi
exit $status
