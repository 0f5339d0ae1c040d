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
    echo "$tool: exit $rc, $(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer_$tool.log") clean summaries"
    [[ $rc -ne 0 ]] && status=1
  done
fi

if [[ $what == all || $what == bench ]]; then
  echo "== bench-op"
  "$BIN/tessel" bench-op --conv2d "$W/conv2d.csv" --gemm "$W/gemm.csv" --filter "$filter" \
    --json "$OUT/bench_op.json" > "$OUT/bench_op.txt" 2> "$OUT/bench_op.err" || status=1
  cat "$OUT/bench_op.txt"
  tail -3 "$OUT/bench_op.err"
fi
exit $status
