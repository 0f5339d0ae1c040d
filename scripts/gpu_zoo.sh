#!/usr/bin/env bash
# Issue 10's zoo on a machine of several GPUs: parts of `scripts/gpu_models.sh zoo:K/N` run side
# by side, one per GPU (CUDA_VISIBLE_DEVICES), each with its own work directory, kernel caches
# and torch.compile cache, so that a zoo longer than one call of the GPU machine fits in a few.
# Each part's table is under $OUT/part_K; the parts found there (this call's and any earlier
# call's, when $OUT is kept) are joined into $OUT/models.md and $OUT/models.json
# (bench/models_report.py --merge), whose summary lines are issue 10's bars.
#
# Usage: scripts/gpu_zoo.sh N [FIRST]
#   N: the zoo's parts; FIRST: the first part of this call (default 1). With G GPUs the call
#   runs parts FIRST .. FIRST+G-1 (those up to N).
# ZOO_PART_TIMEOUT=S stops each part after S seconds (inside the GPU machine's per-call limit);
# the models it finished keep their rows, and the merge still runs.
# Exit status 1 when a part failed or missed the accuracy bar.
set -uo pipefail
parts=${1:?usage: scripts/gpu_zoo.sh N [FIRST]}
first=${2:-1}
[[ $parts =~ ^[0-9]+$ && $first =~ ^[0-9]+$ && $parts -ge 1 && $first -ge 1 ]] ||
  { echo "gpu_zoo.sh: N and FIRST must be positive integers" >&2; exit 2; }
OUT=${OUT:-/tmp/tessel_out}
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
[[ $gpus -ge 1 ]] || { echo "gpu_zoo.sh: no GPU" >&2; exit 2; }
status=0
pids=()
for ((g = 0; g < gpus; ++g)); do
  k=$((first + g))
  [[ $k -le $parts ]] || break
  mkdir -p "$OUT/part_$k"
  echo "part $k/$parts on GPU $g"
  CUDA_VISIBLE_DEVICES=$g OUT=$OUT/part_$k TESSEL_MODELS_DIR=/tmp/tessel_models_$k \
    TORCHINDUCTOR_CACHE_DIR=/tmp/torchinductor_$k \
    timeout --kill-after=10 "${ZOO_PART_TIMEOUT:-0}" bash scripts/gpu_models.sh "zoo:$k/$parts" > "$OUT/part_$k/console.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
shopt -s nullglob
jsons=("$OUT"/part_*/models.json)
if [[ ${#jsons[@]} -gt 0 ]]; then
  python3 bench/models_report.py --merge "${jsons[@]}" --md "$OUT/models.md" \
    --json "$OUT/models.json" > /dev/null || status=1
  grep -E "^Batch" "$OUT/models.md"
fi
exit $status
