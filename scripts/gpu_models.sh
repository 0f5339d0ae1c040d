#!/usr/bin/env bash
# Whole models on the GPU machine: torchvision models exported by PyTorch
# (bench/torch_models.py, which also times PyTorch eager + CUDA graph), run by tessel's
# engine on the same input; prints latency of both and tessel's error against PyTorch's
# fp32 output. Layout of scripts/pack_device.sh.
set -uo pipefail
ROOT=$(pwd)
OUT=${OUT:-/tmp/tessel_out}
W=/tmp/tessel_models
mkdir -p "$OUT" "$W"
export LD_LIBRARY_PATH="$ROOT/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export TESSEL_CACHE_DIR=/tmp/tessel_cache
models=${1:-resnet50,mobilenet_v2}
batch=${2:-1}
python3 bench/torch_models.py "$W" "$models" "$batch" > "$OUT/torch_models.csv" 2> "$OUT/torch_models.err" \
  || tail -5 "$OUT/torch_models.err"
for m in ${models//,/ }; do
  echo "== $m batch $batch"
  "$ROOT/.device/bin/tessel" run "$W/$m.onnx" --device cuda --repeat 50 \
    --input "input=$W/$m.input.npy" --output-dir "$W/$m.out" 2>&1 | grep -E "engine|device|error"
  python3 - "$W/$m.ref.npy" "$W/$m.out/output.npy" "$m" "$OUT/torch_models.csv" <<'PY'
import sys, numpy as np
ref, got, name = np.load(sys.argv[1]), np.load(sys.argv[2]), sys.argv[3]
pt = dict(l.strip().split(",") for l in open(sys.argv[4]) if "," in l)
err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
same = int((got.argmax(-1) == ref.argmax(-1)).sum())
print(f"  rel L2 vs PyTorch fp32 {err:.2e}; same top-1 on {same}/{ref.shape[0]} images; "
      f"PyTorch eager+graph fp16 {float(pt.get(name, 'nan')):.3f} ms")
PY
done
