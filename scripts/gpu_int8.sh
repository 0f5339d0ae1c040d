#!/usr/bin/env bash
# int8 whole models on the GPU machine (layout of scripts/pack_device.sh, plus onnxruntime's
# wheel in .device/wheels: the machine has no network; bench/quantize_ort.py needs it).
#
# Per model:batch: bench/torch_models.py builds the torchvision model with usable random
# weights, exports it (opset 18), saves its input and fp32 output, and times PyTorch fp16
# (eager as a CUDA graph); bench/quantize_ort.py writes the QDQ int8 model with onnxruntime's
# quantizer (symmetric int8, per-channel weights, calibrated on that input); then tessel
# compiles both (fp16 and int8), `tessel bench`es both, runs both on the input, and compares
# with PyTorch's fp32 output: top-1 agreement and relative L2 (sr_net: PSNR against fp32). At
# batch 1 the classifiers' int8 engine is also checked against the QDQ model run as written on
# tessel's CPU reference (the oracle: what the model says, quantization error included), which
# separates the quantizer's error from tessel's execution.
# Ends with a table; every number in $OUT/int8_models.json, the log in $OUT/int8_models.log.
#
# Usage: scripts/gpu_int8.sh [RUNS]   (default resnet50:1,resnet50:32,mobilenet_v2:32,sr_net:1)
set -uo pipefail
ROOT=$(pwd)
OUT=${OUT:-/tmp/tessel_out}
W=/tmp/tessel_int8
TESSEL=$ROOT/${TESSEL_DEVICE_DIR:-.device}/bin/tessel
runs=${1:-resnet50:1,resnet50:32,mobilenet_v2:32,sr_net:1}
source "$ROOT/scripts/gpu_env.sh"
export LD_LIBRARY_PATH=$(tessel_lib_path "$ROOT/${TESSEL_DEVICE_DIR:-.device}")
export TESSEL_CACHE_DIR=/tmp/tessel_cache
mkdir -p "$OUT" "$W"
LOG=$OUT/int8_models.log
: > "$LOG"
status=0
tessel_onnxruntime "$ROOT/${TESSEL_DEVICE_DIR:-.device}" "$W" >> "$LOG" 2>&1
logged() {
  echo "\$ $*" >> "$LOG"
  "$@" >> "$LOG" 2>&1
}
for m in $(tr ',' '\n' <<< "$runs" | cut -d: -f1 | awk '!seen[$0]++'); do
  mruns=$(tr ',' '\n' <<< "$runs" | awk -F: -v m="$m" '$1 == m' | paste -sd, -)
  echo "== $m: PyTorch ($mruns)"
  logged python3 bench/torch_models.py --out "$W" --csv "$W/torch.csv" --runs "$mruns" --no-compile \
    || status=1
  for r in ${mruns//,/ }; do
    b=${r##*:}
    base=$W/${m}_b$b
    echo "== $m batch $b: quantize, compile, bench, run"
    logged python3 bench/quantize_ort.py "$base.onnx" "$base.int8.onnx" --calib "$base.input.npy" \
      || { status=1; continue; }
    for v in fp16 int8; do
      model=$base.onnx
      [[ $v == int8 ]] && model=$base.int8.onnx
      logged "$TESSEL" compile "$model" -o "$base.$v.tsl" --precision fp16 || { status=1; continue; }
      "$TESSEL" explain "$model" > "$base.$v.explain.txt" 2>&1
      logged "$TESSEL" bench "$base.$v.tsl" --json "$base.$v.bench.json" || status=1
      logged "$TESSEL" run "$base.$v.tsl" --device cuda --input "input=$base.input.npy" \
        --output-dir "$base.$v.out" || status=1
    done
    if [[ $b == 1 && $m != sr_net ]]; then
      logged "$TESSEL" run "$base.int8.onnx" --input "input=$base.input.npy" \
        --output-dir "$base.qdq_cpu.out" || status=1
    fi
  done
done
python3 - "$W" "$runs" "$OUT/int8_models.json" <<'PY' || status=1
import json, math, os, re, sys
import numpy as np
w, runs, out = sys.argv[1], sys.argv[2], sys.argv[3]
torch_ms = {}
if os.path.exists(os.path.join(w, "torch.csv")):
    for line in open(os.path.join(w, "torch.csv")):
        n, b, e, _ = line.strip().split(",")
        torch_ms[(n, int(b))] = float(e)
rows = []
for r in runs.split(","):
    m, b = r.split(":")
    b = int(b)
    base = os.path.join(w, "%s_b%d" % (m, b))
    row = {"model": m, "batch": b, "torch_fp16_ms": torch_ms.get((m, b), math.nan)}
    ref = np.load(base + ".ref.npy").astype(np.float64) if os.path.exists(base + ".ref.npy") else None
    for v in ("fp16", "int8"):
        j = base + ".%s.bench.json" % v
        row[v + "_ms"] = json.load(open(j))["median_ms"] if os.path.exists(j) else math.nan
        o = os.path.join(base + ".%s.out" % v, "output.npy")
        if ref is None or not os.path.exists(o):
            continue
        y = np.load(o).astype(np.float64)
        row[v + "_rel_l2"] = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
        if ref.ndim == 2:
            row[v + "_top1"] = float(np.mean(y.argmax(1) == ref.argmax(1)))
        else:
            peak = np.abs(ref).max()
            row[v + "_psnr_db"] = float(10 * np.log10(peak ** 2 / np.mean((y - ref) ** 2)))
        q = os.path.join(base + ".qdq_cpu.out", "output.npy")
        if v == "int8" and os.path.exists(q):
            c = np.load(q).astype(np.float64)
            row["int8_vs_cpu_rel_l2"] = float(np.linalg.norm(y - c) / np.linalg.norm(c))
            row["int8_vs_cpu_top1"] = float(np.mean(y.argmax(1) == c.argmax(1)))
        e = base + ".%s.explain.txt" % v
        if os.path.exists(e):
            text = open(e).read()
            row[v + "_int8_convs"] = len(re.findall(r"mma.sync int8|wgmma int8", text))
            row[v + "_float_convs"] = len(re.findall(r"tessel\.(?:Conv|Gemm) .*(?:Tensor Cores \((?:mma.sync|wgmma)\) |SIMT|CUDA kernel)", text))
    rows.append(row)
json.dump(rows, open(out, "w"), indent=1)
def f(x, spec):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)
print("\n| model | batch | PyTorch fp16 ms | tessel fp16 ms | tessel int8 ms | int8 vs fp16 | int8 vs PyTorch | int8 contractions (float) | accuracy int8 (fp16) vs fp32 |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    acc = ("top-1 %s (%s), rel L2 %s" % (f(r.get("int8_top1"), ".3f"), f(r.get("fp16_top1"), ".3f"), f(r.get("int8_rel_l2"), ".2e"))
           if "int8_top1" in r else "PSNR %s dB (%s dB)" % (f(r.get("int8_psnr_db"), ".1f"), f(r.get("fp16_psnr_db"), ".1f")))
    print("| %s | %d | %s | %s | %s | %sx | %sx | %s (%s) | %s |" % (
        r["model"], r["batch"], f(r["torch_fp16_ms"], ".3f"), f(r["fp16_ms"], ".3f"), f(r["int8_ms"], ".3f"),
        f(r["fp16_ms"] / r["int8_ms"], ".2f"), f(r["torch_fp16_ms"] / r["int8_ms"], ".2f"),
        r.get("int8_int8_convs", "-"), r.get("int8_float_convs", "-"), acc))
for r in rows:
    if "int8_vs_cpu_rel_l2" in r:
        print("%s b%d: tessel int8 on the GPU against the QDQ model on the CPU reference: rel L2 %.2e, "
              "top-1 %.3f" % (r["model"], r["batch"], r["int8_vs_cpu_rel_l2"], r["int8_vs_cpu_top1"]))
PY
exit $status
