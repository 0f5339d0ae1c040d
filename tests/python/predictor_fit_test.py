#!/usr/bin/env python3
"""bench/predictor_fit.py: the learned correction's fit, on synthetic kernels whose times follow
known weights, and the committed header against the committed measurements."""
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
import predictor_fit as P  # noqa: E402

# Synthetic kernels (all above MIN_KERNEL_US): four models of 60 kernels each, contractions of two families and op kernels
# of two kinds, each time exp(w . x) with the weights below (ln A's weight 1), replays of their
# sum plus 0.5 us per launch of 3 us or more and 0.1 us per smaller one.
rng = random.Random(7)
TRUE = {"shared": [0.2, 1.0, -0.1, 0.05, 0.1, -0.05, 0.02], "mma": [0.1, 0, 0.02, 0, -0.05, 0, 0],
        "op": [-0.2, 0, 0.1, 0, 0.05, 0, 0], "op:pool": [0.3, 0, 0, 0, 0, 0, 0]}
SCHEDULES = ["tc_128x128x32_s3_w64x64_sk1_r8", "tma_128x64x64_s7_r8_c132", ""]
rows = []
for model in ["net_a", "net_b", "net_c", "net_d"]:
    run = model + "_b8"
    for i in range(60):
        schedule = SCHEDULES[i % 3]
        entry = "tessel_op_%s_%016x" % (["pool", "copy"][i % 2], i) if not schedule else "tessel_contraction"
        r = {"run": run, "model": model, "node": "n%d" % i, "op": "x", "entry": entry, "schedule": schedule,
             "grid": [rng.randint(8, 2000), 1, 1], "block": [rng.choice([128, 256, 288]), 1, 1],
             "smem_bytes": rng.choice([0, 49152, 98304]), "flops": rng.randint(10**5, 10**10),
             "bytes": rng.randint(10**5, 10**8), "analytical_us": rng.choice([rng.uniform(1.0, 2.5),
                                                                            rng.uniform(5.0, 200.0)])}
        w = [a + b + c for a, b, c in zip(TRUE["shared"], TRUE.get(P.group(r), [0] * 7),
                                         TRUE.get(P.op_kind(r), [0] * 7))]
        r["time_us"] = math.exp(sum(a * b for a, b in zip(w, P.features(r))))
        if r["time_us"] < P.MIN_KERNEL_US:
            continue
        r["predicted_us"] = r["time_us"]
        rows.append(r)
    kernels = [r for r in rows if r["run"] == run]
    replay = sum(r["time_us"] + (0.5 if r["time_us"] >= P.SMALL_KERNEL_US else 0.1) for r in kernels)
    for r in kernels:
        r["replay"] = replay

check(sum(r["time_us"] < P.SMALL_KERNEL_US for r in rows) > 20, "small kernels among them")
check(P.group(rows[0]) == "mma" and P.group(rows[1]) == "tma" and P.group(rows[2]) == "op",
      "groups from the schedules: %r" % [P.group(r) for r in rows[:3]])
check(P.op_kind(rows[2]) == "op:pool" and P.op_kind(rows[5]) == "op:copy" and P.op_kind(rows[0]) is None,
      "kinds from the entry points: %r" % [P.op_kind(r) for r in rows[:6]])
check(P.op_kind(dict(rows[0], schedule="halo_8x16_n32_w32x16_c1056_g2")) == "grouped", "a grouped schedule")
# int8 contractions (trace arg operand_dtype "i8", engine format 7) are kinds of their own, and
# their flops are timed at the int8 mma.sync rate (twice the 16-bit one); rows without the field
# (older traces and files) are 16-bit.
mma8 = dict(rows[0], operand_dtype="i8")
tma8 = dict(rows[1], operand_dtype="i8")
check(P.op_kind(mma8) == "mma_i8" and P.op_kind(tma8) == "tma_i8" and P.group(mma8) == "mma",
      "int8 kinds: %r" % [P.op_kind(mma8), P.op_kind(tma8)])
check(P.op_kind(dict(rows[0], operand_dtype="f16")) is None and "operand_dtype" not in rows[0] and
      not P.int8(rows[0]) and not P.int8(dict(rows[2], operand_dtype="i8")), "16-bit and op rows")
big = dict(rows[0], flops=10**11)
x16, x8 = P.features(big), P.features(dict(big, operand_dtype="i8"))
check(abs(x16[3] - x8[3] - math.log(2)) < 1e-12 and x16[:3] + x16[4:] == x8[:3] + x8[4:],
      "the int8 rate in the flops term only: %r %r" % (x16, x8))
check([P._RUN.match(r).group(1) for r in ["resnet50_b32", "resnet50_b32_int8", "sr_net_b1"]] ==
      ["resnet50", "resnet50", "sr_net"], "a run's model, int8 runs with their fp16 ones")

model = P.fit(rows, 1e-6)
shared, offsets = model
check(shared[1] == 1.0 and all(offsets[g][1] == 0.0 for g in offsets), "ln A's weight is 1 in every group")
predicted = P.predict(model, rows)
worst = max(abs(p - r["time_us"]) / r["time_us"] for p, r in zip(predicted, rows))
check(worst < 1e-6, "noise-free times are fitted exactly, worst %.2e" % worst)
gap = P.launch_gap(rows, model)
check(abs(gap[0] - 0.5) < 1e-6 and abs(gap[1] - 0.1) < 1e-6, "the launch gaps (0.5, 0.1): %r" % (gap,))
kernel, per_model = P.leave_one_model_out(rows, 1e-6)
check(len(kernel) == len(rows) and sorted(per_model) == ["net_a_b8", "net_b_b8", "net_c_b8", "net_d_b8"],
      "each model left out once: %r" % sorted(per_model))
check(max(kernel) < 1e-3 and max(abs(e) for e in per_model.values()) < 1e-3,
      "a model left out is predicted from the others (same weights)")
# A kind the fit never saw uses its group's weights and the shared ones.
unseen = dict(rows[2], entry="tessel_op_layer_norm_%016x" % 1)
w = P.weights(model, unseen)
check(all(abs(a - b - c) < 1e-9 for a, b, c in zip(w, shared, offsets["op"])), "an unseen kind")
# Tiny launches: floors instead of extrapolated logs, and never below the least kernel time.
tiny = dict(rows[2], bytes=1, flops=0, grid=[1, 1, 1], analytical_us=0.01)
x = P.features(tiny)
check(x[1] == math.log(0.5) and x[2] == math.log(P.FLOOR_US) and x[4] == math.log(P.MIN_WAVE),
      "floors of a tiny launch: %r" % x)
check(P.predict(model, [tiny])[0] >= P.MIN_KERNEL_US, "the least kernel time")

with tempfile.TemporaryDirectory() as tmp:
    # save / load keep the rows.
    path = os.path.join(tmp, "rows.jsonl.gz")
    P.save(path, rows)
    check(P.load(path) == rows and len(P.load(path, {"net_b_b8"})) == 60, "save and load")

    # The committed header is this script's output on the committed measurements: the fp16 runs
    # and the int8 ones.
    script = os.path.join(ARGS.source, "bench", "predictor_fit.py")
    data = os.path.join(ARGS.source, "bench", "predictor_data", "h200_2026-11-28.jsonl.gz")
    data8 = os.path.join(ARGS.source, "bench", "predictor_data", "h200_2026-11-29_int8.jsonl.gz")
    header = os.path.join(tmp, "predict_fit.h")
    p = subprocess.run([sys.executable, script, data, data8, "--out", header], capture_output=True,
                       text=True)
    check(p.returncode == 0, "fit on the committed data: %s" % p.stderr)

    # Its code lines, numbers aside, and its numbers (to 1e-4: another machine's BLAS may round
    # the solve's last digits differently).
    def code(path):
        with open(path) as f:
            lines = [line for line in f if not line.startswith("//")]
        number = r"-?\d+(?:\.\d+)?(?:e-?\d+)?"
        return ([re.sub(number, "#", line) for line in lines],
                [float(v) for line in lines for v in re.findall(number, line)])
    committed = os.path.join(ARGS.source, "src", "compiler", "predict_fit.h")
    if p.returncode == 0:
        (text, numbers), (want_text, want_numbers) = code(header), code(committed)
        check(text == want_text and len(numbers) == len(want_numbers) and
              all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(numbers, want_numbers)),
              "src/compiler/predict_fit.h is predictor_fit.py's output on bench/predictor_data")
    m = re.search(r"left out in turn: median kernel error ([0-9.]+)%", p.stdout)
    check(m is not None and float(m.group(1)) < 15.0, "leave-one-model-out error: %r" % p.stdout[:300])
    m = re.search(r"int8 runs: median kernel error ([0-9.]+)%", p.stdout)
    check(m is not None and float(m.group(1)) < 15.0, "int8 runs left out: %r" % p.stdout[:600])
    # Every int8 fit row is an int8 QDQ model's run and says its contractions' operand dtype;
    # their int8 contractions got their kinds' offsets.
    rows8 = P.load(data8)
    check(rows8 and all(r["run"].endswith("_int8") and ("operand_dtype" in r) for r in rows8) and
          {P.op_kind(r) for r in rows8} >= {"mma_i8", "tma_i8"}, "the int8 rows")
    with open(committed) as f:
        text = f.read()
    check('{"mma_i8", ' in text and '{"tma_i8", ' in text, "the header's int8 offsets")

    # The int8 held-out run is scored beside the fp16 ones, each precision on its own line.
    held8 = os.path.join(ARGS.source, "bench", "predictor_data", "h200_2026-11-29_int8.held_out.jsonl.gz")
    held_data = os.path.join(ARGS.source, "bench", "predictor_data", "h200_2026-11-28.held_out.jsonl.gz")
    p = subprocess.run([sys.executable, script, data, data8, "--held-out", held_data, held8],
                       capture_output=True, text=True)
    check(p.returncode == 0 and "resnext50_32x4d_b32_int8" in p.stdout and
          re.search(r"held out \(13 profiles.*\n  fp16 runs: .*\n  int8 runs: ", p.stdout),
          "int8 held out: %r" % (p.stdout[-800:] + p.stderr))

    # A split that fits on a held-out model is refused in one line.
    split = json.load(open(os.path.join(ARGS.source, "bench", "predictor_split.json")))
    split["fit"]["models"].append("densenet121")
    split["fit"]["batches"]["densenet121"] = [32]
    bad = os.path.join(tmp, "split.json")
    with open(bad, "w") as f:
        json.dump(split, f)
    p = subprocess.run([sys.executable, script, data, "--split", bad], capture_output=True, text=True)
    check(p.returncode != 0 and "fits on held-out models: densenet121" in p.stderr, "bad split: %r" % p.stderr)
    # And one that fits on a test model (the runs scored once, after predictor changes).
    split = json.load(open(os.path.join(ARGS.source, "bench", "predictor_split.json")))
    split["fit"]["models"].append("convnext_base")
    split["fit"]["batches"]["convnext_base"] = [32]
    with open(bad, "w") as f:
        json.dump(split, f)
    p = subprocess.run([sys.executable, script, data, "--split", bad], capture_output=True, text=True)
    check(p.returncode != 0 and "fits on held-out models: convnext_base" in p.stderr,
          "split fitting on a test model: %r" % p.stderr)
    # And one that fits int8 runs of an int8 held-out model.
    split = json.load(open(os.path.join(ARGS.source, "bench", "predictor_split.json")))
    split["int8"]["fit"].append("resnext50_32x4d:1")
    with open(bad, "w") as f:
        json.dump(split, f)
    p = subprocess.run([sys.executable, script, data, "--split", bad], capture_output=True, text=True)
    check(p.returncode != 0 and "fits on held-out models: resnext50_32x4d" in p.stderr,
          "split fitting int8 on a held-out model: %r" % p.stderr)
    # The held-out runs' file holds no test run: scoring the test set on it says so.
    p = subprocess.run([sys.executable, script, data, "--held-out", held_data, "--held-out-set", "test"],
                       capture_output=True, text=True)
    check(p.returncode != 0 and "no test traces in" in p.stderr, "test set: %r" % p.stderr[-300:])
    p = subprocess.run([sys.executable, script, os.path.join(tmp, "nothing")], capture_output=True, text=True)
    check(p.returncode != 0 and "no fit traces" in p.stderr, "no traces: %r" % p.stderr)

finish("predictor_fit")
