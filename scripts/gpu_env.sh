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
