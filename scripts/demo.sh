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
# Whole-model GPU execution is not built yet: the CPU reference executor runs the model.
echo "== tessel run --device cpu"
"$TESSEL" run "$MODELS/resnet50.onnx" --device cpu --seed 1 --repeat 3
