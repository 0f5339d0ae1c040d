#!/usr/bin/env python3
"""bench/rank_fit.py: the cost model's learned correction, on synthetic logs whose kernel families
are misjudged by known functions of the shape, and the committed header against the committed
logs."""
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
check(R.schedule_class("tma_128x256x64_s3_r8_c132_w64x256") == "tma_128x256x64_s3_w64x256",
      "class of a cooperative TMA name")
check(R.schedule_class("tc_128x64x32_s3_w32x64_sk1_r8") == "tc_128x64x32_s3", "class of an mma.sync name")

# Synthetic logs: 24 GEMM contractions with K from 64 to 4096, three kernel families whose
# measured / estimated time follows known functions: mma.sync ("tc") 1.2 everywhere, the cp.async
# wgmma kernel 1.5, the TMA kernel exp(0.6 - 0.3 ln k_steps), times 1.5 more with a
# transcendental activation in the epilogue (the key's ":math1", every third contraction).
# Each contraction's candidates are ranked by the estimate, the default (rank 0) an mma.sync one.
rng = random.Random(3)
CANDIDATES = {"tc": ["tc_128x128x32_s3_w64x64_sk1_r8", "tc_128x64x32_s3_w32x64_sk1_r8"],
              "wgmma": ["wgmma_128x256x64_s4_w64x256_sk1_r8", "wgmma_128x128x64_s4_w64x128_sk1_r8"],
              "tma": ["tma_128x128x64_s4_r1_c132", "tma_64x128x64_s7_r1_c132"]}


def true_ln(family, k, math_ops):
    if family == "tc":
        return math.log(1.2)
    if family == "wgmma":
        return math.log(1.5)
    return 0.6 - 0.3 * math.log(k / 64) + math.log(1.5) * math_ops


rows = []
for key in range(24):
    m, n, k = 4096 * (1 + key % 3), 256 * (1 + key % 4), 64 * 2 ** (key % 7)
    math_ops = 1 if key % 3 == 0 else 0
    name = ("f16*f16->f16/f32:b1:m%d:n%d:k%d:b()m(%d)n(%d)k(%d):A[%d,%d](m0,k0):B[%d,%d](n0,k0):"
            "C[%d,%d](m0,n0)|read0:plain:f16%s" % (m, n, k, m, n, k, m, k, n, k, m, n,
                                                  ":math1" if math_ops else ""))
    base = m * n * k / 2e8
    cands = []
    for family, schedules in CANDIDATES.items():
        for schedule in schedules:
            est = base * rng.uniform(0.8, 1.25)
            us = est * math.exp(true_ln(family, k, math_ops)) * rng.uniform(0.98, 1.02)
            cands.append((schedule, est, us))
    default = cands[0]
    others = sorted(cands[1:], key=lambda c: c[1])
    for rank, (schedule, est, us) in enumerate([default] + others):
        rows.append({"key": name, "node": "n%d" % key, "schedule": schedule, "rank": rank,
                     "microseconds": us, "estimate_us": est})

# int8 logs: 12 contractions (1x1 convs) whose mma.sync (m16n8k32) and TMA candidates are misjudged
# otherwise than the 16-bit ones: mma.sync 1.1 everywhere, the TMA kernel exp(0.5 - 0.2 ln k_steps),
# its k-steps of 128 channels. Their class names ("tc_64x64x64_s3") are also 16-bit classes' names.
I8_CANDIDATES = {"tc": ["tc_128x128x64_s3_w64x64_sk1_r8", "tc_64x64x64_s3_w32x32_sk1_r8"],
                 "tma": ["tma_64x64x128_s8_r1_c132", "tma_128x64x128_s7_r1_c132"]}


def int8_rows(source, seed, images):
    """One int8 model's log: 12 contractions of `images` images, candidates timed with noise `seed`."""
    rng8 = random.Random(seed)
    out = []
    for key in range(12):
        m, n, k = 784 * images * (1 + key % 2), 128 * (1 + key % 4), 128 * 2 ** (key % 6)
        name = ("i8*i8->f32/i32:b1:m%d:n%d:k%d:b()m(%d,%d)n(%d)k(%d):A[%d,%d,%d](m0,m1,k0):"
                "B[%d,1,1,%d](n0,0,0,k0):C[%d,%d,%d](m0,m1,n0)|read0:plain:i8"
                % (m, n, k, images, m // images, n, k, images, m // images, k, n, k, images, m // images, n))
        base = m * n * k / 4e8
        cands = []
        for family, schedules in I8_CANDIDATES.items():
            for schedule in schedules:
                est = base * rng8.uniform(0.8, 1.25)
                ln = math.log(1.1) if family == "tc" else 0.5 - 0.2 * math.log(-(-k // 128))
                cands.append((schedule, est, est * math.exp(ln) * rng8.uniform(0.98, 1.02)))
        for rank, (schedule, est, us) in enumerate([cands[0]] + sorted(cands[1:], key=lambda c: c[1])):
            out.append({"key": name, "node": "%s%d" % (source, key), "schedule": schedule, "rank": rank,
                        "microseconds": us, "estimate_us": est})
    return out


# A 16-bit line in an int8 model's log (the RGB stem fold-qdq leaves float): left to the 16-bit logs.
stem_row = {"key": "f16*f16->f16/f32:b1:m401408:n64:k147:b()m(32,112,112)n(64)k(3,7,7):"
                   "A[32,3,224,224](m0,k0,2*m1+k1-3,2*m2+k2-3):B[64,7,7,3](n0,k1,k2,k0):"
                   "C[32,112,112,64](m0,m1,m2,n0)|read0:plain:f16",
            "node": "stem", "schedule": "tc_128x64x32_s3_w32x32_sk1_r8_v1x1", "rank": 1,
            "microseconds": 180.9, "estimate_us": 151.4}

with tempfile.TemporaryDirectory() as tmp:
    log = os.path.join(tmp, "synthetic.jsonl.gz")
    with gzip.open(log, "wt") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    int8_logs = [os.path.join(tmp, "synthetic_int8_%s.jsonl.gz" % s) for s in ("a", "b")]
    for path, source, seed, images in zip(int8_logs, ("a", "b"), (5, 7), (32, 8)):
        with gzip.open(path, "wt") as f:
            for r in int8_rows(source, seed, images) + ([stem_row] if source == "a" else []):
                f.write(json.dumps(r) + "\n")
    parsed = R.read_logs([log], 132)
    check(len(parsed) == len(rows) and all(r["family"] for r in parsed), "every synthetic 16-bit line read")
    parsed8 = R.read_logs(int8_logs, 132)
    check(len(parsed8) == 2 * 12 * 4 and all(R.is_int8(r["key"]) for r in parsed8),
          "the int8 logs' int8 lines read, the 16-bit stem line of an int8 log left out")
    check({r["family"] for r in parsed8} == {"i8_tc", "i8_tma"} and
          {r["class"] for r in parsed8 if r["schedule"].startswith("tc_64x64x64")} == {"i8_tc_64x64x64_s3"},
          "int8 lines in int8 families and classes (i8_)")
    tma8 = [r for r in parsed8 if r["family"] == "i8_tma" and ":k512:" in r["key"]][0]
    check(tma8["x"][1] == math.log(4), "the int8 TMA kernel's k-steps are 128-channel chunks: %s" % tma8["x"])
    tma_row = [r for r in parsed if r["schedule"].startswith("tma_64x128") and ":math1" in r["key"]][0]
    k = int(re.search(r":k(\d+):", tma_row["key"]).group(1))
    m, n = (int(x) for x in re.search(r":m(\d+):n(\d+):", tma_row["key"]).groups())
    check(tma_row["x"] == [1.0, math.log(k // 64), math.log(-(-m // 64) * -(-n // 128) / 132), 0.0, 1.0],
          "the TMA kernel's features: k-steps of 64 channels, tiles per SM, the activation: %s"
          % tma_row["x"])
    families, offsets, counts = R.fit(parsed)
    check(set(families) == {"tc", "wgmma", "tma"}, "one coefficient row per family")
    both = R.fit(parsed + parsed8)
    check(all(both[0][f] == families[f] for f in families) and
          all(both[1][c] == offsets[c] for c in offsets),
          "the int8 lines leave the 16-bit fit exactly as it was (apart: no shared column)")
    check(set(both[0]) == {"tc", "wgmma", "tma", "i8_tc", "i8_tma"} and
          set(both[1]) - set(offsets) == {"i8_" + R.schedule_class(s) for v in I8_CANDIDATES.values() for s in v},
          "int8 families and classes of their own")
    check(both[0]["i8_tc"][0] == 0 and all(both[0][f][i] == 0 for f in ("i8_tc", "i8_tma") for i in (2, 3, 4)),
          "int8 mma.sync's intercept stays 0; int8's tiles-per-SM, residual and transcendental terms too "
          "(INT8_FEATURES): %s" % {f: both[0][f] for f in ("i8_tc", "i8_tma")})
    slope8 = both[0]["i8_tma"][1] - both[0]["i8_tc"][1]
    check(abs(slope8 + 0.2) < 0.05, "int8 TMA's k-step slope against int8 mma.sync's %.3f, want -0.2" % slope8)
    loo8 = [x for x in R.leave_one_out(parsed8) if x["int8"]]
    check(len(loo8) == 24 and all(x["position_after"] <= x["position_before"] for x in loo8),
          "int8 contractions left out in turn: the fastest ranks no later with the fit")
    by_source8 = R.leave_one_source_out(parsed8)
    check(len(by_source8) == 2 and all(x["contractions"] == 12 and x["fit"] <= x["default"] for x in by_source8),
          "each int8 log judged by the fit of the other: %s" % by_source8)
    check(families["tc"][0] == 0 and families["tc"][3] == 0 and families["tc"][4] == 0,
          "mma.sync's intercept and per-contraction terms stay 0 (the contraction's own level)")
    slope = families["tma"][1] - families["tc"][1]
    check(abs(slope + 0.3) < 0.05, "TMA's k-step slope against mma.sync's %.3f, want -0.3" % slope)
    check(abs(families["tma"][4] - math.log(1.5)) < 0.08,
          "TMA's transcendental term %.3f, want ln 1.5" % families["tma"][4])
    check(set(offsets) == {R.schedule_class(s) for v in CANDIDATES.values() for s in v} and
          all(counts[c] == 24 for c in offsets), "an offset per class, with its measurements")
    loo = R.leave_one_out(parsed)
    check(len(loo) == 24, "every contraction left out once")
    # (The default stays first: the fastest of the others can rise to position 1.)
    positions = [(x["position_before"], x["position_after"]) for x in loo]
    check(all(a <= b for b, a in positions) and sum(a < b for b, a in positions) >= 10,
          "the fastest measured ranks no later with the fit, earlier for most: %s" % positions)
    by_source = R.leave_one_source_out(parsed)
    check(len(by_source) == 1 and by_source[0]["contractions"] == 24, "one log, 24 contractions")

    # The defaults' table, parsed from default_schedule.cc: 25 mma.sync, 7 wgmma and 5 TMA kernels,
    # and int8's 25 mma.sync (block_k doubled) and 5 TMA (block_k 128) kernels.
    table = R.default_table(os.path.join(ARGS.source, "src", "kernels", "default_schedule.cc"))
    check(len(table) == 67 and "tc_128x128x32_s4_w64x64" in table and "tma_128x128x64_s4" in table and
          "wgmma_128x256x64_s4_w64x256" in table and "i8_tc_128x128x64_s4_w64x64" in table and
          "i8_tma_128x128x128_s4" in table and not any(x.startswith("i8_wgmma") for x in table),
          "the default table: %d kernels" % len(table))
    check(R.in_table("i8_tc_128x128x64_s4_w64x64_sk2_r8_v16x16", table) and
          not R.in_table("tc_128x128x64_s4_w64x64_sk1_r8", table) and
          not R.in_table("i8_tc_128x128x32_s4_w64x64_sk1_r8", table) and
          R.in_table("i8_tma_64x64x128_s8_r1_c132", table) and not R.in_table("i8_tma_64x64x64_s8_r1_c132", table),
          "which logged int8 schedules the defaults rank (as the fit names them)")
    check(R.in_table("tc_128x128x32_s4_w64x64_sk2_r8", table) and
          not R.in_table("tc_128x128x32_s4_w64x64_sk1_r1", table) and
          R.in_table("tma_128x128x64_s4_r1_c132", table) and not R.in_table("tma_128x128x64_s4_r8_c132", table) and
          not R.in_table("tc_64x128x32_s3_w32x64_sk1_r8", table) and
          R.in_table("tc_64x128x32_s3_w32x64_sk1_r8", table | {"tc_64x128x32_s3_w32x64"}),
          "which logged schedules the defaults rank (raster 8; the TMA kernel's raster 1)")
    synthetic_table = {"tc_128x128x32_s3_w64x64", "tc_128x64x32_s3_w32x64", "tma_128x128x64_s4"}
    restricted = R.leave_one_source_out(parsed, synthetic_table)
    check(len(restricted) == 1 and restricted[0]["fit"] <= restricted[0]["default"] and
          restricted[0]["fastest"] <= restricted[0]["fit"],
          "the table-restricted picks: fastest <= fit <= default: %s" % restricted)

    script = os.path.join(ARGS.source, "bench", "rank_fit.py")
    header = os.path.join(tmp, "rank_fit.h")
    p = subprocess.run([sys.executable, script, log, *int8_logs, "--out", header], capture_output=True, text=True)
    check(p.returncode == 0, "fit on synthetic logs: %s" % p.stderr)
    text = open(header).read() if os.path.exists(header) else ""
    check('{"tma_128x128x64_s4", ' in text and '{"tma", ' in text and "constexpr int kCcMajor = 9;" in text,
          "the header names the families, the classes and the architecture")
    check('{"i8_tma", ' in text and '{"i8_tc_64x64x64_s3", ' in text and '{"i8_wgmma"' not in text,
          "the header names the int8 families and classes")
    check("int8 left out in turn" in p.stdout, "the int8 leave-one-out summary is printed: %s" % p.stdout[-400:])

    # The committed header is this script's output on the committed logs.
    logs = sorted(glob.glob(os.path.join(ARGS.source, "bench", "tune_data", "*.jsonl.gz")))
    check(logs, "committed tune logs in bench/tune_data")
    header = os.path.join(tmp, "committed.h")
    p = subprocess.run([sys.executable, script, *logs, "--out", header], capture_output=True, text=True)
    check(p.returncode == 0, "fit on the committed logs: %s" % p.stderr)

    def table(path):
        """{name: numbers} of the header's rows (families and classes); numbers compared to
        1e-4, so that another numpy's last digits do not fail the check."""
        rows = re.findall(r'^    \{"([^"]+)", ([^}]+)\},$', open(path).read(), re.M) if os.path.exists(path) else []
        return {name: [float(x) for x in values.split(",")] for name, values in rows}

    committed = os.path.join(ARGS.source, "src", "kernels", "rank_fit.h")
    fitted, have = table(header), table(committed)
    check(fitted and set(fitted) == set(have) and
          all(abs(a - b) <= 1e-4 for name in fitted for a, b in zip(fitted[name], have[name])),
          "src/kernels/rank_fit.h is bench/rank_fit.py's fit of bench/tune_data (re-run it)")
    check("first round" in p.stdout and "defaults' table" in p.stdout, "the leave-one-out reports are printed")

    # Logs without estimates: one clear line, exit 1.
    empty = os.path.join(tmp, "none.jsonl")
    with open(empty, "w") as f:
        f.write(json.dumps({"key": "k", "schedule": "tc_1_2_3", "rank": 0, "microseconds": 1.0}) + "\n")
    p = subprocess.run([sys.executable, script, empty], capture_output=True, text=True)
    check(p.returncode == 1 and "no measurements with an estimate" in p.stderr, "a log without estimates")

finish("rank_fit")
