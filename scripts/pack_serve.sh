#!/usr/bin/env bash
# Packs what `tessel serve` needs on the GPU machine (no network there; Ubuntu 24.04, python3 3.12
# with numpy 2) into .device-serve/ (ignored by git, carried by the device tool as one path):
#   bin/tessel, lib/ (its libraries outside CUDA and glibc, as scripts/pack_device.sh packs them)
#   python/tessel/   the Python package with tessel._core built here for CPython 3.12 (pyenv's)
#                    and tessel's Triton backend (backends/tessel/libtriton_tessel.so)
#   triton.tar.xz    Triton Inference Server from the installed nvidia-pytriton, trimmed to what
#                    tritonserver, its Python backend and the 3.12 stub load (xz: the carry limit)
#   wheels/          numpy 1.26 for CPython 3.12: Triton 2.51's Python backend needs numpy < 2
#                    (PACK_NUMPY=0 leaves it out: BACKEND=python cannot run then)
# scripts/gpu_serve.sh unpacks and runs it there. Prints the size (the carry limit is 64 MiB with
# the working tree).
# Usage: scripts/pack_serve.sh [BUILD]   (BUILD: this checkout's make build, for bin/tessel)
set -euo pipefail
BUILD=${1:-build}
D=${TESSEL_SERVE_DIR:-.device-serve}
PY312=${PY312:-$(ls -d "$HOME"/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | tail -1)}
WHEELS=${TESSEL_WHEEL_CACHE:-$HOME/.cache/tessel-wheels}
[[ -x "$BUILD/src/cli/tessel" ]] || { echo "pack_serve.sh: no $BUILD/src/cli/tessel (make build)" >&2; exit 2; }
[[ -f "$BUILD/python/tessel/backends/tessel/libtriton_tessel.so" ]] ||
  { echo "pack_serve.sh: no Triton backend in $BUILD (configure it with -DTESSEL_PYTHON_MODULE=ON)" >&2; exit 2; }
[[ -n "$PY312" && -x "$PY312" ]] || { echo "pack_serve.sh: no CPython 3.12 here (set PY312)" >&2; exit 2; }
rm -rf "$D"
mkdir -p "$D"/bin "$D"/lib "$D"/python "$D"/wheels

# tessel._core for 3.12: the module target alone (its stub generation would import numpy there).
B312=${BUILD}-py312
cmake -S . -B "$B312" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSEL_PYTHON_MODULE=ON \
  -DPython_EXECUTABLE="$PY312" -Dnanobind_ROOT="$(python3 -m nanobind --cmake_dir)" > /dev/null
nice cmake --build "$B312" -j "${JOBS:-2}" --target tessel_python
mkdir -p "$D"/python/tessel
cp python/tessel/*.py python/tessel/py.typed "$D"/python/tessel/
cp "$B312"/python/tessel/_core.cpython-312-*.so "$D"/python/tessel/

# tessel's Triton backend (any Python: the server loads it itself).
mkdir -p "$D"/python/tessel/backends/tessel
cp "$BUILD"/python/tessel/backends/tessel/libtriton_tessel.so "$D"/python/tessel/backends/tessel/

cp "$BUILD"/src/cli/tessel "$D"/bin/
for f in "$D"/bin/tessel "$D"/python/tessel/_core.*.so "$D"/python/tessel/backends/tessel/*.so; do
  ldd "$f" | awk '/=> \// {print $3}'
done | sort -u | grep -E 'libprotobuf|libonnx|libfmt' | while read -r lib; do cp -L "$lib" "$D"/lib/; done
strip --strip-debug "$D"/bin/tessel "$D"/python/tessel/_core.*.so "$D"/python/tessel/backends/tessel/*.so

# Triton: the server, the Python backend with the 3.12 stub in its place, and the bundled
# libraries these load (the wheel's other stubs and libpython3.13 stay behind).
site=$(python3 -c "import importlib.util as u, os; print(os.path.dirname(list(u.find_spec('pytriton').submodule_search_locations)[0]))")
T=$(mktemp -d)
mkdir -p "$T"/pytriton/tritonserver/bin "$T"/pytriton/tritonserver/backends/python \
  "$T"/pytriton/tritonserver/python_backend_stubs/3.12 "$T"/nvidia_pytriton.libs
ts=$site/pytriton/tritonserver
cp "$ts"/bin/tritonserver "$T"/pytriton/tritonserver/bin/
cp "$ts"/backends/python/libtriton_python.so "$ts"/backends/python/triton_python_backend_utils.py \
  "$T"/pytriton/tritonserver/backends/python/
cp "$ts"/python_backend_stubs/3.12/triton_python_backend_stub "$T"/pytriton/tritonserver/python_backend_stubs/3.12/
for f in "$ts"/bin/tritonserver "$ts"/backends/python/libtriton_python.so \
         "$ts"/python_backend_stubs/3.12/triton_python_backend_stub; do
  ldd "$f" 2>/dev/null | awk '/nvidia_pytriton.libs/ {print $3}'
done | sort -u | while read -r lib; do cp "$lib" "$T"/nvidia_pytriton.libs/; done
tar -C "$T" -cf - . | xz -T2 -6 > "$D"/triton.tar.xz
rm -rf "$T"

if [[ ${PACK_NUMPY:-1} == 1 ]]; then  # PACK_NUMPY=0: tessel's backend only (no Python backend)
mkdir -p "$WHEELS"
ls "$WHEELS"/numpy-1.26.4-cp312-*.whl > /dev/null 2>&1 ||
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$WHEELS" numpy==1.26.4
cp "$WHEELS"/numpy-1.26.4-cp312-*.whl "$D"/wheels/
fi
du -sh "$D" "$D"/*
echo "pack_serve.sh: carry $D with the working tree ($(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1) bytes tracked); the limit is 64 MiB in all"
