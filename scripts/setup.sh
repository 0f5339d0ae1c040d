#!/usr/bin/env bash
# Installs everything tessel needs on a fresh Debian 12 machine: the C++ toolchain's
# libraries from Debian, and the Python packages the tests and model generators use.
# Idempotent: a second run installs nothing new.
set -euo pipefail

debs=(cmake ninja-build g++ ccache pkg-config
      protobuf-compiler libprotobuf-dev libonnx-dev libonnx-testdata
      libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev libfmt-dev
      clang-14 libclang-rt-14-dev python3-numpy)

missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python: onnx builds the models, onnxruntime is the independent oracle in tests; nanobind
# builds the Python module (tessel._core), scikit-build-core is `pip install .`'s backend.
# nvidia-pytriton carries Triton Inference Server (tritonserver and its Python backend, built for
# glibc 2.35+) for `tessel serve` and its test; only those binaries are used, not pytriton's own
# Python API, so its Python dependencies are left out. Triton 2.51's Python backend reads numpy
# 1's C structures (with numpy 2 its output tensors come out wrong), hence numpy < 2.
py=${PYTHON:-python3}
if ! $py -c "import onnx, onnxruntime, numpy, nanobind, scikit_build_core, importlib.util, sys
sys.exit(int(numpy.__version__.split('.')[0]) >= 2 or importlib.util.find_spec('pytriton') is None)" \
    2>/dev/null; then
  $py -m pip install -q --disable-pip-version-check "numpy<2" "onnx==1.17.0" "onnxruntime==1.20.1" \
    "nanobind==3.1.0" "scikit-build-core==1.1.2"
  $py -m pip install -q --disable-pip-version-check --no-deps "nvidia-pytriton==0.7.0"
fi
echo "setup: dependencies present"
