#!/usr/bin/env bash
# Dynamic batch against static engines, on the GPU machine (layout of scripts/pack_device.sh:
# tessel in .device/bin, its libraries in .device/lib; python3 with torch, torchvision, onnx).
#
# The model (default resnet50) is built as bench/torch_models.py builds it and exported once
# with a symbolic batch. From that one ONNX file: a dynamic engine `--batch 1:64 --opt-batch 32`
# (profiles 1, 2, 4, ..., 64) and a static engine for each measured profile batch, each compiled
# into an empty kernel cache (cold) and timed; then `tessel bench` of the dynamic engine at each
# batch (--batch N) and of the static engine of that batch, and the ratio. Batches between
# profiles (3, 24, 48) are benched on the dynamic engine only, beside the static engines of the
# profiles around them. The bar (issue 14): dynamic at most 10% slower than static at 1, 8, 32, 64.
# Under $OUT: dynbatch.md (the table), dynbatch.json (every number), dynbatch.log.
#
# Usage: scripts/gpu_dynbatch.sh [MODEL]
# Exit status 1 when a step failed or a profile batch missed the 10% bar.
set -uo pipefail
ROOT=$(pwd)
OUT=${OUT:-/tmp/tessel_out}
W=/tmp/tessel_dynbatch
TESSEL=$ROOT/${TESSEL_DEVICE_DIR:-.device}/bin/tessel
MODEL=${1:-resnet50}
RANGE=1:64
OPT=32
STATIC="1 8 32 64"
BETWEEN="3 24 48"
source "$ROOT/scripts/gpu_env.sh"
export LD_LIBRARY_PATH=$(tessel_lib_path "$ROOT/${TESSEL_DEVICE_DIR:-.device}")
rm -rf "$W"
mkdir -p "$OUT" "$W"
LOG=$OUT/dynbatch.log
: > "$LOG"
device=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
echo "device: $device; model $MODEL; dynamic $RANGE opt $OPT; static $STATIC" | tee -a "$LOG"
status=0

logged() {
  echo "\$ $*" >> "$LOG"
  "$@" >> "$LOG" 2>&1
}
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

echo "== export $MODEL with a symbolic batch" | tee -a "$LOG"
logged python3 - "$MODEL" "$W/$MODEL.onnx" <<'PY' || { echo "export failed (see $LOG)"; exit 1; }
import contextlib, sys
sys.path.insert(0, "bench")
import torch
import torch_models as tm
name, path = sys.argv[1], sys.argv[2]
model = tm.build_model(name)
x = tm.make_input(name, 1).cuda()
with contextlib.redirect_stdout(sys.stderr):
    torch.onnx.export(model, (x,), path, opset_version=tm.OPSET, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "N"}, "output": {0: "N"}})
PY

# compile NAME ARGS...: cold compile into an empty cache; the seconds into $W/NAME.compile_s.
compile() {
  local name=$1
  shift
  local t0
  t0=$(date +%s.%N)
  if logged env TESSEL_CACHE_DIR="$W/cache_$name" CUDA_CACHE_DISABLE=1 \
      "$TESSEL" compile "$W/$MODEL.onnx" -o "$W/$name.tsl" --precision fp16 "$@"; then
    since "$t0" > "$W/$name.compile_s"
    echo "compiled $name in $(cat "$W/$name.compile_s") s" | tee -a "$LOG"
  else
    echo "FAIL compile $name (see $LOG)"
    status=1
  fi
}

echo "== compile" | tee -a "$LOG"
compile dynamic --batch "$RANGE" --opt-batch "$OPT"
grep -h "^compiled .*profiles" "$LOG" | tail -1
for b in $STATIC; do compile "static_b$b" --batch "$b"; done

echo "== bench" | tee -a "$LOG"
for b in $STATIC $BETWEEN; do
  logged "$TESSEL" bench "$W/dynamic.tsl" --batch "$b" --json "$W/dynamic_b$b.bench.json" \
    || { echo "FAIL bench dynamic batch $b"; status=1; }
done
for b in $STATIC; do
  logged "$TESSEL" bench "$W/static_b$b.tsl" --json "$W/static_b$b.bench.json" \
    || { echo "FAIL bench static batch $b"; status=1; }
done
grep -h "^model .*dynamic engine" "$LOG" >> "$W/notes.txt" 2>/dev/null

python3 - "$W" "$OUT" "$device" "$MODEL" "$STATIC" "$BETWEEN" <<'PY' || status=1
import json, os, sys
w, out, device, model = sys.argv[1:5]
static = [int(b) for b in sys.argv[5].split()]
between = [int(b) for b in sys.argv[6].split()]
def load(name):
    p = os.path.join(w, name)
    return json.load(open(p)) if os.path.exists(p) else None
def secs(name):
    p = os.path.join(w, name + ".compile_s")
    return float(open(p).read()) if os.path.exists(p) else float("nan")
rows, ok = [], True
lines = ["# Dynamic batch vs static engines: %s, %s" % (model, device), "",
         "dynamic engine `--batch 1:64 --opt-batch 32` compiled cold in %.1f s; static engines "
         "cold: %s" % (secs("dynamic"), ", ".join("b%d %.1f s" % (b, secs("static_b%d" % b))
                                                for b in static)), "",
         "| batch | dynamic ms | static ms | dynamic/static | bar (<= 1.10) |",
         "|---:|---:|---:|---:|:---|"]
for b in sorted(static + between):
    d, s = load("dynamic_b%d.bench.json" % b), load("static_b%d.bench.json" % b)
    dm = d["median_ms"] if d else float("nan")
    if s:
        ratio = dm / s["median_ms"]
        passed = ratio <= 1.10
        ok = ok and passed
        lines.append("| %d | %.3f | %.3f | %.3f | %s |" % (b, dm, s["median_ms"], ratio,
                                                          "pass" if passed else "FAIL"))
    else:
        lines.append("| %d | %.3f | — | — | (between profiles) |" % (b, dm))
    rows.append({"batch": b, "dynamic": d, "static": s})
text = "\n".join(lines) + "\n"
print(text)
open(os.path.join(out, "dynbatch.md"), "w").write(text)
json.dump({"device": device, "model": model, "rows": rows,
           "compile_s": {"dynamic": secs("dynamic"),
                         **{"static_b%d" % b: secs("static_b%d" % b) for b in static}}},
          open(os.path.join(out, "dynbatch.json"), "w"), indent=1)
sys.exit(0 if ok else 1)
PY
[[ -s $W/notes.txt ]] && cat "$W/notes.txt"
exit $status
