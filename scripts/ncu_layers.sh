#!/usr/bin/env bash
# Tensor-pipe utilisation of tessel's kernel and cuDNN's on representative conv layers, read
# with Nsight Compute, on the GPU machine (layout of scripts/pack_device.sh). Prints, per
# layer and kernel: duration and the tensor pipe's active cycles as % of peak.
set -uo pipefail
ROOT=$(pwd)
OUT=${OUT:-/tmp/tessel_out}
mkdir -p "$OUT"
source "$ROOT/scripts/gpu_env.sh"
export LD_LIBRARY_PATH=$(tessel_lib_path "$ROOT/${TESSEL_DEVICE_DIR:-.device}")
export TESSEL_CACHE_DIR=/tmp/tessel_cache
BIN=$ROOT/${TESSEL_DEVICE_DIR:-.device}/bin
W=$ROOT/${TESSEL_DEVICE_DIR:-.device}/workloads
layers=${*:-resnet50_l3_3x3_256_256_b32 resnet50_l2_1x1_128_512_b32 seed_edsr_body_720p}
for layer in $layers; do
  ncu --metrics 'regex:sm__pipe_tensor_op_(hmma|gmma)_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum' \
      --csv --launch-count 60 \
      "$BIN/tessel" bench-op --conv2d "$W/conv2d.csv" --filter "$layer" --reps 1 --warmup 0 --no-peak --timing events \
      > "$OUT/ncu_$layer.csv" 2> "$OUT/ncu_$layer.err"
  echo "== $layer"
  python3 - "$OUT/ncu_$layer.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    print("  no ncu rows (see .err)"); sys.exit(0)
head = rows[0]; rows = rows[1:]
ki, mi, vi = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value")
per = collections.OrderedDict()
for r in rows:
    per.setdefault(r[ki][:60], {})[r[mi]] = r[vi]
for k, m in per.items():
    if k.startswith(("naive", "fill", "spin", "compare")): continue
    tc = [v for n, v in m.items() if "pipe_tensor" in n and v not in ("", "0")]
    print(f"  {k:60s} time {m.get('gpu__time_duration.sum','?'):>10s}  tensor pipe % " + " / ".join(tc or ["0"]))
PY
done
