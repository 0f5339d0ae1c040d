#!/usr/bin/env bash
# `tessel serve` under load on the GPU machine: ResNet-50 (tools/models/gen_models.py, random
# weights, symbolic batch) served through Triton on one GPU, then on GPUs 0,1 where there are
# two; bench/serve_load.py drives it at 1 to 256 concurrent clients (batch-1 requests, tensors
# through $TRANSPORT); `tessel bench` at batch 32 is the ceiling. Expects scripts/pack_serve.sh's
# .device-serve (tessel, its Python module for 3.12 with tessel's Triton backend, Triton, and
# numpy 1.26 for BACKEND=python).
# Under $OUT: serve.md (the table, of every serve_gpus_*.json there: several calls with other
# TRANSPORT, INSTANCES or PIPELINE add to it), serve_gpus_<GPUs>_<transport>_i<instances>_p<depth>.json
# (every row)
# and .log (the server's log with Triton's: tessel's backend logs where its instances' time goes
# every 5 s).
#
# Usage: scripts/gpu_serve.sh [MODEL] [MAX_BATCH] [CONCURRENCY]
#   defaults: resnet50 64 1,2,4,8,16,32,64,128,256; env: SECONDS_PER_LEVEL (8), INSTANCES (1,
#   instances per GPU), DELAY_US (100, the batcher's queue delay), GPU_SETS ("0 0,1"), BACKEND
#   (tessel: the C++ backend in Triton's process; python: Triton's Python backend),
#   PROFILE_EVERY (8; the max batch compiles powers-of-two profiles only), PREFERRED (the batcher's
#   preferred batch sizes, as 32 or 16,32; default none), TAG (a name for the run's files and its
#   table rows, to tell runs of other DELAY_US or PREFERRED apart), TRANSPORT (shm: Triton's
#   system shared memory, the default; cuda: its CUDA shared memory, the tensors in GPU memory on
#   the set's first GPU; binary: in the request bodies), PIPELINE (2: tessel's backend overlaps
#   batches, the default; 1: one batch at a time)
set -uo pipefail
ROOT=$(pwd)
D=$ROOT/${TESSEL_SERVE_DIR:-.device-serve}
OUT=${OUT:-/tmp/tessel_out}
W=/tmp/tessel_serve_work
MODEL=${1:-resnet50}
MAX_BATCH=${2:-64}
LEVELS=${3:-1,2,4,8,16,32,64,128,256}
source "$ROOT/scripts/gpu_env.sh"
export LD_LIBRARY_PATH=$(tessel_lib_path "$D")
export TESSEL_CACHE_DIR=/tmp/tessel_cache
mkdir -p "$W" "$OUT"
status=0
ngpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
device=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
echo "device: $ngpu x $device"

# Triton, unpacked once.
TRITON=$W/triton/pytriton/tritonserver
if [[ ! -x $TRITON/bin/tritonserver ]]; then
  mkdir -p "$W"/triton && tar -C "$W"/triton -xJf "$D"/triton.tar.xz || exit 1
fi
# The Python backend's stub embeds the serving Python: for it, python3's interpreter in a venv of
# its own with numpy 1.26 (the image's numpy 2 would garble Triton 2.51's output tensors).
# tessel's backend runs in Triton's process and needs neither: the image's python3 serves.
VENV=$W/venv
if [[ ${BACKEND:-tessel} == python && ! -x $VENV/bin/python3 ]]; then
  python3 -m venv --without-pip "$VENV" || exit 1
  site=$("$VENV"/bin/python3 -c 'import site; print(site.getsitepackages()[0])')
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$D"/wheels/numpy-*.whl || exit 1
fi
if [[ ${BACKEND:-tessel} == python ]]; then TESSEL_PYTHON=$VENV/bin/python3; else TESSEL_PYTHON=$(command -v python3); fi
export TESSEL_PYTHON PYTHONPATH=$D/python
"$TESSEL_PYTHON" -c "import tessel, numpy; print('python', __import__('sys').version.split()[0], 'numpy', numpy.__version__, 'tessel', tessel.__version__, 'cuda', tessel.cuda_available())" || exit 1

if [[ ! -f $W/$MODEL.onnx ]]; then
  python3 tools/models/gen_models.py --out "$W" --models "$MODEL" --dynamic-batch || exit 1
fi
echo "== tessel bench $MODEL batch 32 (the ceiling)"
"$D"/bin/tessel bench "$W/$MODEL.onnx" --batch 32 --json "$OUT/serve_bench32.json" | tail -3 || status=1

# Serves $MODEL on GPU set $1, loads it, stops it.
serve_and_load() {
  local gpus=$1 tag=gpus_${1//,/_}_${TRANSPORT:-shm}_i${INSTANCES:-1}_p${PIPELINE:-2}${TAG:+_$TAG} log pid
  log=$OUT/serve_$tag.log
  echo "== tessel serve $MODEL --gpus $gpus --max-batch $MAX_BATCH --instances ${INSTANCES:-1} --backend ${BACKEND:-tessel} (${TRANSPORT:-shm} transport)"
  # `python -m tessel serve` is what `tessel serve` execs; called directly, since the packed
  # binary would put its build tree's module (built for this machine's Python) first.
  "$TESSEL_PYTHON" -m tessel serve "$W/$MODEL.onnx" --device cuda --gpus "$gpus" --host 127.0.0.1 \
    --max-batch "$MAX_BATCH" --max-queue-delay-us "${DELAY_US:-100}" --instances "${INSTANCES:-1}" \
    --backend "${BACKEND:-tessel}" --profile-every "${PROFILE_EVERY:-8}" --pipeline "${PIPELINE:-2}" --verbose \
    ${PREFERRED:+--preferred-batch "$PREFERRED"} \
    --triton-dir "$TRITON" > "$log" 2>&1 &
  pid=$!
  for _ in $(seq 900); do
    grep -q "^tessel serve: '" "$log" && break
    kill -0 $pid 2>/dev/null || break
    sleep 1
  done
  if ! grep -q "^tessel serve: '" "$log"; then
    echo "server did not start:"; tail -5 "$log"; kill $pid 2>/dev/null; wait $pid; status=1; return
  fi
  head -1 "$log"
  local server
  server=$(pgrep -f -- "tritonserver.*--http-port=8000" | head -1)
  "$TESSEL_PYTHON" bench/serve_load.py --url http://127.0.0.1:8000 --model "$MODEL" \
    --concurrency "$LEVELS" --seconds "${SECONDS_PER_LEVEL:-8}" --warmup 2 \
    --transport "${TRANSPORT:-shm}" --cuda-device "${gpus%%,*}" \
    ${server:+--server-pid "$server"} --json "$OUT/serve_$tag.json" || status=1
  kill -TERM $pid
  wait $pid || status=1
  tail -1 "$log"
}

for gpus in ${GPU_SETS:-0 0,1}; do
  n=$(( $(tr -cd ',' <<< "$gpus" | wc -c) + 1 ))
  (( n <= ngpu )) && serve_and_load "$gpus"
done

"$TESSEL_PYTHON" - "$OUT" "$device" "$MODEL" <<'PY' | tee "$OUT/serve.md"
import glob, json, os, re, sys
out, device, model = sys.argv[1:4]
bench = json.load(open(os.path.join(out, "serve_bench32.json")))
ceiling = bench["throughput_per_s"]
runs = []  # (GPUs, instances per GPU, pipeline depth, TAG, the json) of each serve_gpus_*.json
for f in sorted(glob.glob(os.path.join(out, "serve_gpus_*.json"))):
    m = re.search(r"serve_gpus_([0-9_]+)_[a-z]+_i([0-9]+)_p([0-9]+)(?:_([A-Za-z0-9_]+))?\.json$", f)
    if m:
        runs.append((m.group(1).replace("_", ","), int(m.group(2)), int(m.group(3)),
                     m.group(4) or "", json.load(open(f))))
transports = sorted({run.get("transport", "?") for *_, run in runs})
print("%s served by tessel through Triton (%s backend, a profile every %s), batch-1 requests "
      "over %s transport (%s); ceiling: tessel bench at batch 32, %.0f images/s (%.3f ms)\n"
      % (model, os.environ.get("BACKEND", "tessel"), os.environ.get("PROFILE_EVERY", "8"),
         ", ".join(transports) or "no", device, ceiling, bench["median_ms"]))
print("| GPUs | transport | instances | pipeline | run | clients | images/s | of ceiling | p50 ms | p99 ms "
      "| errors | server batch | server cores | client cores | machine busy cores | server RSS MiB |")
print("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for gpus, instances, depth, tag, run in runs:
    for r in run["rows"]:
        rss = ("%.0f -> %.0f" % (r["rss_mib_before"], r["rss_mib_after"])
               if r.get("rss_mib_after") is not None else "")
        cores = lambda k: "%.1f" % r[k] if k in r else ""  # noqa: E731
        machine = ("%.1f of %d" % (r["cpu_cores_machine"], r["cores"])
                   if "cpu_cores_machine" in r else "")
        print("| %s | %s | %d | %d | %s | %d | %.0f | %.0f%% | %.2f | %.2f | %d | %.1f | %s | %s | %s | %s |" % (
            gpus, run.get("transport", "?"), instances, depth, tag, r["concurrency"], r["images_per_s"],
            100 * r["images_per_s"] / ceiling, r["p50_ms"], r["p99_ms"], r["errors"],
            r.get("server_batch", 0), cores("cpu_cores_server"), cores("cpu_cores_clients"),
            machine, rss))
PY
exit $status
