#!/usr/bin/env bash
# The demo: generate a ResNet-50 with random weights, inspect it, run it on the best device
# present and print its outputs and time.
set -euo pipefail
BUILD=${1:-build}
TESSEL="$BUILD/src/cli/tessel"
MODELS="$BUILD/models"
mkdir -p "$MODELS"
python3 tools/models/gen_models.py --out "$MODELS" --models resnet50 --seed 0 > /dev/null
echo "== tessel inspect (summary)"
"$TESSEL" inspect "$MODELS/resnet50.onnx" | tail -n 12
# On the GPU when one is present (the engine: fp16, one CUDA graph), else on the CPU
# reference executor.
err=$(mktemp)
echo "== tessel run --device cuda"
if ! "$TESSEL" run "$MODELS/resnet50.onnx" --device cuda --seed 1 --repeat 20 2> "$err"; then
  if grep -q "no CUDA device" "$err"; then
    cat "$err"
    echo "== no GPU here: tessel run --device cpu"
    "$TESSEL" run "$MODELS/resnet50.onnx" --device cpu --seed 1 --repeat 3
  else
    cat "$err"
    exit 1
  fi
fi
rm -f "$err"
