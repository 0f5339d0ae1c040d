# Sourced by the GPU scripts: the library path of tessel's binaries on the GPU machine.
# $1: the packed folder whose lib/ holds what scripts/pack_device.sh copied. The CUDA toolkit's
# libraries come next; where the machine's image has no system cuDNN, cuBLAS or NVRTC of the
# major version tessel links (libcudnn.so.9, libcublasLt.so.13, libnvrtc.so.13), the copies in
# python3's NVIDIA wheels (PyTorch's, under site-packages/nvidia/*/lib) are searched last.
tessel_lib_path() {
  local path="$1/lib:/usr/local/cuda/lib64" lib dir
  for lib in libcudnn.so.9 libcublasLt.so.13 libnvrtc.so.13; do
    ldconfig -p 2> /dev/null | grep -q "$lib" && continue
    [[ -e /usr/local/cuda/lib64/$lib ]] && continue
    dir=$(python3 - "$lib" 2> /dev/null <<'PY'
import glob, site, sys, os
for root in site.getsitepackages():
    for hit in sorted(glob.glob(os.path.join(root, "nvidia", "*", "lib", sys.argv[1]))):
        print(os.path.dirname(hit))
        raise SystemExit
PY
)
    [[ -n $dir && :$path: != *:$dir:* ]] && path="$path:$dir"
  done
  echo "$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# Makes onnxruntime importable (bench/quantize_ort.py needs it): the machine has no network, so
# its wheels come from the packed folder $1/wheels (scripts/pack_device.sh), installed under $2.
tessel_onnxruntime() {
  python3 -c "import onnxruntime" 2> /dev/null && return 0
  pip install --quiet --no-index --target "$2/py" "$1"/wheels/*.whl || return 1
  export PYTHONPATH="$2/py:${PYTHONPATH:-}"
}

# The binaries scripts/pack_device.sh packed under the checkout $1 (folder $TESSEL_DEVICE_DIR,
# default .device): sets DEV and TESSEL, and the library path they need.
tessel_device() {
  DEV=$1/${TESSEL_DEVICE_DIR:-.device}
  TESSEL=$DEV/bin/tessel
  export LD_LIBRARY_PATH=$(tessel_lib_path "$DEV")
}

# MODEL:BATCH ($1) exported by bench/torch_models.py into $2 (MODEL_bBATCH.onnx, its input and
# fp32 output), unless it is there already; the exporter's output goes to $3. Non-zero where
# the export fails.
tessel_export() {
  [[ -f $2/${1%%:*}_b${1##*:}.onnx ]] && return 0
  python3 bench/torch_models.py --out "$2" --csv "$2/torch_tune.csv" --runs "$1" --no-compile --reps 1 \
    > "$3" 2>&1
}

# The median latency (ms) of `tessel bench` of engine $1 (with $TESSEL; its JSON next to it).
tessel_bench_ms() {
  "$TESSEL" bench "$1" --json "$1.bench.json" > /dev/null 2>&1 &&
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['median_ms'])" "$1.bench.json"
}

# The median of its arguments (numbers; of an even count, the mean of the middle two).
tessel_median() {
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
