#!/usr/bin/env bash
# The GPU run, on a machine with a CUDA device: GPU tests, compute-sanitizer on new kernels,
# and the op benchmarks against cuDNN / cuBLASLt; ends with a short table.
# Expects the layout of scripts/pack_device.sh (.device/bin, .device/lib, .device/workloads).
# Usage: scripts/gpu_suite.sh [tests|sanitize|bench|all] [bench filter]
set -uo pipefail
what=${1:-all}
filter=${2:-}
ROOT=$(pwd)
OUT=${OUT:-/tmp/tessel_out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$ROOT/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export TESSEL_CACHE_DIR=/tmp/tessel_cache
export TESSEL_WORKLOADS_DIR="$ROOT/.device/workloads"  # for the largest-workload GPU test
export TESSEL_BIN="$ROOT/.device/bin/tessel"               # for the tests that run the CLI
BIN=$ROOT/.device/bin
W=$ROOT/.device/workloads
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
exit $status
