#!/usr/bin/env bash
# Packs what the GPU machine needs into .device/ (ignored by git, carried by the device tool):
# the GPU-facing binaries built here, the shared libraries they need that a stock CUDA image
# lacks (protobuf, onnx, fmt: Debian's builds run on Ubuntu 24.04's newer glibc), and the
# public workloads. Run scripts/gpu_suite.sh there.
set -euo pipefail
BUILD=${1:-build}
rm -rf .device
mkdir -p .device/bin .device/lib .device/workloads
for b in src/cli/tessel tests/gpu_tests tests/kernels_tests tests/device_tests tests/bench_tests; do
  [[ -x "$BUILD/$b" ]] && cp "$BUILD/$b" .device/bin/
done
# Libraries outside the CUDA toolkit and glibc/libstdc++ that the binaries link.
for bin in .device/bin/*; do
  ldd "$bin" | awk '/=> \// {print $3}'
done | sort -u | grep -E 'libprotobuf|libonnx|libfmt|libgtest|libgmock' | while read -r lib; do
  cp -L "$lib" .device/lib/
done
cp ../shared/workloads/*.csv .device/workloads/
strip --strip-debug .device/bin/* 2>/dev/null || true
du -sh .device
