#!/usr/bin/env python3
"""bench/rank_fit.py: the learned order of tune's candidates, on synthetic logs whose classes
are misjudged by known factors, and the committed header against the committed logs."""
import glob
import gzip
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_check import ARGS, check, finish  # noqa: E402
import rank_fit as R  # noqa: E402

check(R.schedule_class("tma_128x128x64_s4_r1_c132") == "tma_128x128x64_s4", "class of a TMA name")
check(R.schedule_class("tc_128x64x32_s3_w32x64_sk1_r8") == "tc_128x64x32_s3", "class of an mma.sync name")

# Synthetic logs: 12 contractions, 3 classes; the estimate says "slow" is 1.5x faster than
# "fast" and "mid" in between, but "fast" measures 2x under its estimate and "slow" 1.5x over.
# Each contraction's candidates are ranked by the estimate, the default (rank 0) a "mid" one.
rng = random.Random(3)
TRUE = {"tc_64x64x32_s3": 1.0, "tma_128x128x64_s4": 0.5, "wgmma_128x256x64_s4": 1.5}
SCALE = {"tc_64x64x32_s3": 1.2, "tma_128x128x64_s4": 1.5, "wgmma_128x256x64_s4": 1.0}
rows = []
for key in range(12):
    base = rng.uniform(5, 50)
    cands = []
    for cls in TRUE:
        for variant in range(8):
            est = base * SCALE[cls] * (1 + 0.02 * variant)
            cands.append((cls + "_r%d_v%d" % (variant % 2, variant), est, est * TRUE[cls] * rng.uniform(0.97, 1.03)))
    default = [c for c in cands if c[0].startswith("tc_")][0]
    others = sorted([c for c in cands if c is not default], key=lambda c: c[1])
    for rank, (name, est, us) in enumerate([default] + others):
        rows.append({"key": "k%d" % key, "node": "n%d" % key, "schedule": name, "rank": rank,
                     "microseconds": us, "estimate_us": est})
factors, counts = R.fit(rows)
check(set(factors) == set(TRUE), "one factor per class: %s" % sorted(factors))
check(factors["tma_128x128x64_s4"] < factors["tc_64x64x32_s3"] < factors["wgmma_128x256x64_s4"],
      "factors in the order of the true misjudgements: %s" % factors)
# Centred on the median over all measurements (tc's), shrunk by k / (k + 3): 96 measurements each.
want = 96 / (96 + R.SHRINK) * math.log(0.5 / 1.0)
check(abs(factors["tma_128x128x64_s4"] - want) < 0.05, "tma factor %.3f, want about %.3f"
      % (factors["tma_128x128x64_s4"], want))
loo = R.leave_one_out(rows)
check(len(loo) == 12, "every contraction left out once")
check(all(x["position_after"] < x["position_before"] for x in loo),
      "the fastest measured ranks earlier with the fit")
check(all(x["first_round_after"] <= x["first_round_before"] for x in loo), "the first round gets closer")

with tempfile.TemporaryDirectory() as tmp:
    log = os.path.join(tmp, "synthetic.jsonl.gz")
    with gzip.open(log, "wt") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    script = os.path.join(ARGS.source, "bench", "rank_fit.py")
    header = os.path.join(tmp, "rank_fit.h")
    p = subprocess.run([sys.executable, script, log, "--out", header], capture_output=True, text=True)
    check(p.returncode == 0, "fit on synthetic logs: %s" % p.stderr)
    text = open(header).read() if os.path.exists(header) else ""
    check('{"tma_128x128x64_s4", ' in text and "constexpr int kCcMajor = 9;" in text,
          "the header names the classes and the architecture")

    # The committed header is this script's output on the committed logs.
    logs = sorted(glob.glob(os.path.join(ARGS.source, "bench", "tune_data", "*.jsonl.gz")))
    check(logs, "committed tune logs in bench/tune_data")
    header = os.path.join(tmp, "committed.h")
    p = subprocess.run([sys.executable, script, *logs, "--out", header], capture_output=True, text=True)
    check(p.returncode == 0, "fit on the committed logs: %s" % p.stderr)

    def classes(path):
        return re.findall(r'^    \{"[^"]+", [^}]+\},$', open(path).read(), re.M) if os.path.exists(path) else []

    committed = os.path.join(ARGS.source, "src", "kernels", "rank_fit.h")
    check(classes(header) and classes(header) == classes(committed),
          "src/kernels/rank_fit.h is bench/rank_fit.py's fit of bench/tune_data (re-run it)")
    check("first round" in p.stdout, "the leave-one-out report is printed")

    # Logs without estimates: one clear line, exit 1.
    empty = os.path.join(tmp, "none.jsonl")
    with open(empty, "w") as f:
        f.write(json.dumps({"key": "k", "schedule": "tc_1_2_3", "rank": 0, "microseconds": 1.0}) + "\n")
    p = subprocess.run([sys.executable, script, empty], capture_output=True, text=True)
    check(p.returncode == 1 and "no measurements with an estimate" in p.stderr, "a log without estimates")

finish("rank_fit")
