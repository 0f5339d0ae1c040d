#!/usr/bin/env bash
# Packs what the GPU machine needs into .device/ (ignored by git, carried by the device tool):
# the GPU-facing binaries built here, the shared libraries they need that a stock CUDA image
# lacks (protobuf, onnx, fmt: Debian's builds run on Ubuntu 24.04's newer glibc), and the
# public workloads. Run scripts/gpu_suite.sh there.
set -euo pipefail
BUILD=${1:-build}
# TESSEL_DEVICE_DIR packs elsewhere (a second checkout's binaries beside this one's); the GPU
# scripts read the same variable.
D=${TESSEL_DEVICE_DIR:-.device}
rm -rf "$D"
mkdir -p "$D"/bin $D/lib $D/workloads
for b in src/cli/tessel tests/gpu_tests tests/kernels_tests tests/device_tests tests/bench_tests; do
  [[ -x "$BUILD/$b" ]] && cp "$BUILD/$b" $D/bin/
done
# Libraries outside the CUDA toolkit and glibc/libstdc++ that the binaries link.
for bin in $D/bin/*; do
  ldd "$bin" | awk '/=> \// {print $3}'
done | sort -u | grep -E 'libprotobuf|libonnx|libfmt|libgtest|libgmock' | while read -r lib; do
  cp -L "$lib" $D/lib/
done
cp ../shared/workloads/*.csv $D/workloads/
# onnxruntime for bench/quantize_ort.py (scripts/gpu_int8.sh): the GPU machine has no network.
# Python 3.12 wheels (Ubuntu 24.04's); kept in a cache here between packs.
WHEELS=${TESSEL_WHEEL_CACHE:-$HOME/.cache/tessel-wheels}
if [[ ${PACK_ORT:-1} == 1 ]]; then
  mkdir -p "$WHEELS" $D/wheels
  ls "$WHEELS"/onnxruntime-*.whl > /dev/null 2>&1 ||
    pip download --quiet onnxruntime==1.20.1 coloredlogs humanfriendly flatbuffers --no-deps \
      --only-binary=:all: --python-version 3.12 --platform manylinux_2_27_x86_64 \
      --platform manylinux_2_28_x86_64 -d "$WHEELS" ||
    echo "pack_device.sh: no onnxruntime wheel (scripts/gpu_int8.sh needs one)" >&2
  cp "$WHEELS"/*.whl $D/wheels/ 2> /dev/null || true
fi
strip --strip-debug $D/bin/* 2>/dev/null || true
du -sh "$D"
