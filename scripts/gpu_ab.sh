#!/usr/bin/env bash
# Two tessel binaries on the same models, on the same GPU, back to back: the A/B of a change.
# Runs after scripts/gpu_models.sh, whose ONNX exports it reuses (/tmp/tessel_models/M_bB.onnx).
# For each run, each binary compiles the model into its own empty kernel cache and `bench`es it;
# the two are timed alternately, ROUNDS times, so that a drift of the machine hits both.
#
# Usage: scripts/gpu_ab.sh BASE_TESSEL NEW_TESSEL model:batch[,model:batch...]
# Prints a table: run, base median ms, new median ms (the medians of the rounds), new / base.
# With PROFILE=N (N > 0), also `tessel profile`s both engines and lists the N kernels whose time
# changed most (kernels are matched by position: both binaries must plan the same nodes).
set -uo pipefail
base=$1 new=$2 runs=$3
W=${TESSEL_MODELS_DIR:-/tmp/tessel_models}
ROUNDS=${ROUNDS:-3}
# The median of whitespace-separated numbers.
median() { tr ' ' '\n' <<< "$1" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf "%-34s %10s %10s %8s\n" "model" "base ms" "new ms" "new/base"
for r in ${runs//,/ }; do
  m=${r%%:*} b=${r##*:}
  onnx=$W/${m}_b$b.onnx
  if [[ ! -f $onnx ]]; then
    echo "$r: no $onnx (run scripts/gpu_models.sh first)" >&2
    continue
  fi
  declare -A t=()
  for side in base new; do
    bin=${!side}
    # --batch binds a symbolic batch dimension (a dynamic-batch export); a static one keeps its own.
    TESSEL_CACHE_DIR=/tmp/ab_cache_$side "$bin" compile "$onnx" -o "/tmp/ab_${side}.tsl" --precision fp16 --batch "$b" \
      > "/tmp/ab_${side}.log" 2>&1 || { echo "$r: $side compile failed: $(tail -1 /tmp/ab_${side}.log)" >&2; continue 2; }
  done
  for ((i = 0; i < ROUNDS; ++i)); do
    for side in base new; do
      bin=${!side}
      ms=$(TESSEL_CACHE_DIR=/tmp/ab_cache_$side "$bin" bench "/tmp/ab_${side}.tsl" 2>&1 |
        sed -n 's/^latency *median \([0-9.]*\) ms.*/\1/p')
      t[$side]="${t[$side]:-} $ms"
    done
  done
  mb=$(median "${t[base]}") mn=$(median "${t[new]}")
  printf "%-34s %10s %10s %8s\n" "$m b$b" "$mb" "$mn" "$(awk -v a="$mb" -v b="$mn" 'BEGIN { if (a > 0) printf "%.3f", b / a }')"
  unset t
  if [[ ${PROFILE:-0} -gt 0 ]]; then
    for side in base new; do
      bin=${!side}
      TESSEL_CACHE_DIR=/tmp/ab_cache_$side "$bin" profile "/tmp/ab_${side}.tsl" > "/tmp/ab_${side}.profile" 2>&1
    done
    # Rows of the per-kernel table: "#  node  op  time_us  pred_us ... instruction".
    paste <(awk '$1 ~ /^[0-9]+$/ && NF > 10 {print $2, $4, $NF}' /tmp/ab_base.profile) \
          <(awk '$1 ~ /^[0-9]+$/ && NF > 10 {print $4, $NF}' /tmp/ab_new.profile) |
      awk '{d = $4 - $2; printf "  %-28s %9.2f -> %9.2f us (%+8.2f)  %s -> %s\n", $1, $2, $4, d, $3, $5}' |
      sort -t'(' -k2 -g | awk -v n="$PROFILE" '{a[NR] = $0} END {
        for (i = 1; i <= NR && i <= n; ++i) print a[i];              # the largest gains
        for (i = NR; i > n && i > NR - n; --i) print a[i] }'        # the largest losses
  fi
done
