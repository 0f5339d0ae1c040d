#!/usr/bin/env python3
"""bench/predictor_fit.py: the learned correction's features and trees, on synthetic kernels
whose times follow known rules; the committed header against a fit of the committed
measurements; and `tessel predict` (compiler/predict.cc) against this script's prediction of the
same launches, so that the two read a launch the same way."""
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

# --- What a launch's record says, read as the features read it.
check(P.epilogue_flags({"epilogue": "A prologue affine(#1) -> relu | bias(#0) -> store f16 plain(ld=n)"})
      == [1, 0, 0, 0, 0, 0], "a prologue")
check(P.epilogue_flags({"epilogue": "bias(#0) -> residual_add(#1) -> relu -> store f16 plain(ld=n)"})
      == [0, 1, 0, 0, 0, 0], "a residual")
check(P.epilogue_flags({"epilogue": "bias(#0) -> relu -> store f16 plain(ld=n)"}) == [0] * 6,
      "relu is not a transcendental (nor elu's suffix)")
check(P.epilogue_flags({"epilogue": "bias(#0) -> silu_qgate(0.01, 0.02) -> store i8 plain(ld=n)"})
      == [0, 0, 1, 0, 0, 0], "a quantized SiLU gate")
check(P.epilogue_flags({"epilogue": "store f16 channel_slice(offset=64, ld=256)"}) == [0, 0, 0, 1, 0, 0],
      "a channel slice")
check(P.epilogue_flags({"epilogue": "bias(#0) -> store f16 depth_to_space_nchw(block=2, DCR, out=8x8)"})
      == [0, 0, 0, 0, 1, 0], "a depth-to-space store")
check(P.epilogue_flags({"epilogue": "bias(#0) -> store f32 plain(ld=n)"}) == [0, 0, 0, 0, 0, 1], "f32 out")
check(P.epilogue_flags({"epilogue": ""}) == [0] * 6, "an op kernel")
log = math.log
check(P.schedule_shape({"schedule": "tc_128x64x32_s3_w64x64_sk4_r8_g4"}) ==
      [log(128), log(64), log(32), 3.0, log(4), log(5)], "an mma.sync schedule")
check(P.schedule_shape({"schedule": "tma_128x64x64_s7_r1_c132"}) ==
      [log(128), log(64), log(64), 7.0, 0.0, 0.0], "a TMA schedule")
check(P.schedule_shape({"schedule": "halo_14x16_n32_w32x16_c1055_g2"}) ==
      [log(14), log(16), 0.0, 0.0, 0.0, log(3)], "a halo schedule")
check(P.schedule_shape({"schedule": ""}) == [0.0] * 6, "no schedule")
check([P._RUN.match(r).group(1) for r in ["resnet50_b32", "resnet50_b32_int8", "efficientnet_b4_b1"]] ==
      ["resnet50", "resnet50", "efficientnet_b4"], "a run's model, int8 runs with their fp16 ones")

# --- Synthetic kernels: seven models of 80 launches each (contractions of two families, op
# kernels of two kinds), timed as A * a factor that steps on their size, family, residual and
# tile; replays of their sum plus, per launch of 3 us or more, 0.5 us (a contraction) or 0.4 (an
# op kernel), per smaller one 0.1 or -0.2, and 0.3 us per contraction of the two models whose
# constants exceed half of the L2 cache.
rng = random.Random(7)
SCHEDULES = ["tc_128x128x32_s3_w64x64_sk1_r8", "tma_128x64x64_s7_r1_c132", ""]


def factor(r):
    f = 1.6 if P.group(r) == "tma" else 1.0
    f *= 0.7 if r["analytical_us"] > 20 else 1.0
    f *= 1.4 if "residual_add" in r["epilogue"] else 1.0
    return f * (1.3 if P.op_kind(r) == "op:pool" else 1.0)


rows = []
MODELS = ["net_" + c for c in "abcdefg"]
for k, model in enumerate(MODELS):
    run = model + "_b8"
    for i in range(80):
        # Op kernels make up a share of each model of its own (a third of net_a's launches, fewer
        # of the others'), so that the gaps of contractions and op kernels can be told apart.
        schedule = SCHEDULES[i % 3] if i < 80 - 6 * k else SCHEDULES[1]
        entry = "tessel_op_%s_%016x" % (["pool", "copy"][i % 2], i) if not schedule else "tessel_contraction"
        epilogue = ["bias(#0) -> relu -> store f16 plain(ld=n)",
                    "bias(#0) -> residual_add(#1) -> store f16 plain(ld=n)"][i % 4 // 2] if schedule else ""
        r = {"run": run, "model": model, "node": "n%d" % i, "op": "x", "entry": entry, "schedule": schedule,
             "epilogue": epilogue, "operand_dtype": "f16" if schedule else "",
             "grid": [rng.randint(8, 2000), 1, 1], "block": [rng.choice([128, 256, 288]), 1, 1],
             "smem_bytes": rng.choice([0, 49152, 98304]), "flops": rng.randint(10**5, 10**10),
             "bytes": rng.randint(10**5, 10**8), "analytical_us": rng.choice([rng.uniform(2.0, 2.5),
                                                                            rng.uniform(5.0, 200.0)]),
             "constant_bytes": (40 << 20) if k < 2 else (8 << 20)}
        r["time_us"] = r["analytical_us"] * factor(r)
        r["predicted_us"] = r["time_us"]
        rows.append(r)
    kernels = [r for r in rows if r["run"] == run]
    gaps = {(True, True): 0.5, (True, False): 0.4, (False, True): 0.1, (False, False): -0.2}
    replay = sum(r["time_us"] + gaps[r["time_us"] >= P.SMALL_KERNEL_US, bool(r["schedule"])] +
                 (0.3 if r["schedule"] and P.cold_weights(r) else 0.0) for r in kernels)
    for r in kernels:
        r["replay"] = replay

check(sum(r["time_us"] < P.SMALL_KERNEL_US for r in rows) > 20, "small kernels among them")
check(P.group(rows[0]) == "mma" and P.group(rows[1]) == "tma" and P.group(rows[2]) == "op",
      "groups from the schedules: %r" % [P.group(r) for r in rows[:3]])
check(P.op_kind(rows[2]) == "op:pool" and P.op_kind(rows[5]) == "op:copy" and P.op_kind(rows[0]) is None,
      "kinds from the entry points: %r" % [P.op_kind(r) for r in rows[:6]])
check(P.op_kind(dict(rows[0], schedule="halo_8x16_n32_w32x16_c1056_g2")) == "grouped", "a grouped schedule")
# int8 contractions (trace arg operand_dtype "i8", engine format 7) are kinds of their own, and
# their flops are timed at the int8 mma.sync rate (twice the 16-bit one).
mma8, tma8 = dict(rows[0], operand_dtype="i8"), dict(rows[1], operand_dtype="i8")
check(P.op_kind(mma8) == "mma_i8" and P.op_kind(tma8) == "tma_i8" and P.group(mma8) == "mma",
      "int8 kinds: %r" % [P.op_kind(mma8), P.op_kind(tma8)])
check(P.op_kind(dict(rows[0], operand_dtype="f16")) is None and not P.int8(rows[0]) and
      not P.int8(dict(rows[2], operand_dtype="i8")), "16-bit and op rows")
big = dict(rows[0], flops=10**11)
x16, x8 = P.features(big, []), P.features(dict(big, operand_dtype="i8"), [])
check(abs(x16[2] - x8[2] - math.log(2)) < 1e-12 and x16[:2] + x16[3:12] == x8[:2] + x8[3:12] and
      x16[12] == 0 and x8[12] == 1, "the int8 rate in the flops term, and the int8 indicator")
check(len(x16) == len(P.feature_names([])) and len(P.features(big, ["op:pool"])) == len(x16) + 1,
      "one feature per name, one indicator per kind")
# Tiny launches: floors instead of extrapolated logs.
tiny = dict(rows[2], bytes=1, flops=0, grid=[1, 1, 1], analytical_us=0.01)
x = P.features(tiny, [])
check(x[0] == math.log(0.5) and x[1] == math.log(P.FLOOR_US) and x[3] == math.log(P.MIN_WAVE),
      "floors of a tiny launch: %r" % x[:4])

trees = P.fit(rows)
check(trees.kinds == ["op:copy", "op:pool"], "the fit's kinds: %r" % trees.kinds)
predicted = P.predict(trees, rows)
worst = max(abs(p - r["time_us"]) / r["time_us"] for p, r in zip(predicted, rows))
check(worst < 0.02, "times of a step rule are fitted within 2%%, worst %.2e" % worst)
check(P.predict(trees, [tiny])[0] >= P.MIN_KERNEL_US, "the least kernel time")
gap = P.launch_gap(rows, trees)
check(all(abs(g - want) < 0.01 for g, want in zip(gap, (0.5, 0.4, 0.1, -0.2, 0.3))) and len(gap) == 5,
      "the launch gaps (contraction 0.5, op 0.4, small 0.1 and -0.2, cold 0.3): %r" % (gap,))
kernel, per_model = P.leave_one_model_out(rows)
check(len(kernel) == len(rows) and sorted(per_model) == [m + "_b8" for m in MODELS],
      "each model left out once: %r" % sorted(per_model))
# (A launch whose size falls between two of the others' can take the wrong side of a step.)
within = sum(e < 0.05 for e in kernel) / len(kernel)
check(within > 0.98 and max(abs(e) for e in per_model.values()) < 0.02,
      "a model left out is predicted from the others (the same rule): %.1f%% within 5%%, models %.3f"
      % (100 * within, max(abs(e) for e in per_model.values())))
# A launch larger than any of the fit takes the factor of the largest, not an extrapolation.
huge = dict(rows[1], analytical_us=1e5, flops=10**14, bytes=10**11, grid=[100000, 1, 1])
check(abs(P.predict(trees, [huge])[0] / 1e5 - 1.6 * 0.7) < 0.03, "a huge TMA launch: %r" % P.predict(trees, [huge]))

with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "rows.jsonl.gz")
    P.save(path, rows)
    check(P.load(path) == rows and len(P.load(path, {"net_b_b8"})) == 80, "save and load")

    # The committed header is this script's output on the committed measurements: a fit on the
    # fit, validation, test and unseen runs (--held-out-set test2), as predictor_split.json's
    # test2_rule says.
    script = os.path.join(ARGS.source, "bench", "predictor_fit.py")
    data_dir = os.path.join(ARGS.source, "bench", "predictor_data")
    data = os.path.join(data_dir, "h200_2026-11-29b.jsonl.gz")
    validation = os.path.join(data_dir, "h200_2026-11-29b.held_out.jsonl.gz")
    test = os.path.join(data_dir, "h200_2026-11-29b.test.jsonl.gz")
    unseen = os.path.join(data_dir, "h200_2026-11-29b.unseen.jsonl.gz")
    scored = [data, validation, test, unseen]
    header = os.path.join(tmp, "predict_fit.h")
    p = subprocess.run([sys.executable, script] + scored + ["--held-out-set", "test2", "--no-check",
                        "--out", header], capture_output=True, text=True)
    check(p.returncode == 0, "fit on the committed data: %s" % p.stderr)
    # ... and its one score on the next test runs, as predictor_split.json and
    # docs/performance.md record it.
    test2 = os.path.join(data_dir, "h200_2026-11-29c.test2.jsonl.gz")
    scored_next = subprocess.run([sys.executable, script] + scored + ["--held-out-set", "test2", "--no-check",
                                  "--held-out", test2], capture_output=True, text=True)
    check(scored_next.returncode == 0 and "second test (13 profiles, 1494 kernels): median kernel error 4.7%, "
          "median model error 3.5%" in scored_next.stdout, "the next test runs' score: %r"
          % (scored_next.stdout[-600:] + scored_next.stderr))

    # Its code lines, numbers aside, and its numbers (to 1e-9 relative).
    def code(path):
        with open(path) as f:
            lines = [line for line in f if not line.startswith("//")]
        number = r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
        return ([re.sub(number, "#", line) for line in lines],
                [float(v) for line in lines for v in re.findall(number, line)])
    committed = os.path.join(ARGS.source, "src", "compiler", "predict_fit.h")
    if p.returncode == 0:
        (text, numbers), (want_text, want_numbers) = code(header), code(committed)
        check(text == want_text and len(numbers) == len(want_numbers) and
              all(abs(a - b) <= 1e-9 * max(1.0, abs(b)) for a, b in zip(numbers, want_numbers)),
              "src/compiler/predict_fit.h is predictor_fit.py's output on bench/predictor_data")
    with open(committed) as f:
        text = f.read()
    check('"mma_i8"' in text and '"tma_i8"' in text and '"op:layer_norm"' in text,
          "the header's kinds: int8 contractions, and LayerNorm from the validation runs")

    # The validation runs are scored against a fit on the fit runs alone; the leave-one-model-out
    # check runs by default.
    p = subprocess.run([sys.executable, script, data, "--held-out", validation], capture_output=True, text=True)
    check(p.returncode == 0 and "resnext50_32x4d_b32_int8" in p.stdout and
          re.search(r"held out \(13 profiles.*\n  fp16 runs: .*\n  int8 runs: ", p.stdout) and
          "left out in turn" in p.stdout, "validation: %r" % (p.stdout[-800:] + p.stderr))
    m = re.search(r"left out in turn: median kernel error ([0-9.]+)%", p.stdout)
    check(m is not None and float(m.group(1)) < 10.0, "leave-one-model-out error: %r" % p.stdout[:300])

    # A split that fits on a model it keeps from the fit is refused in one line, whichever set
    # is scored (the validation runs, or the test runs with the validation runs in the fit).
    def refused(what, change, model, sets=("held_out", "test")):
        split = json.load(open(os.path.join(ARGS.source, "bench", "predictor_split.json")))
        change(split)
        bad = os.path.join(tmp, "split.json")
        with open(bad, "w") as f:
            json.dump(split, f)
        for held_out_set in sets:
            p = subprocess.run([sys.executable, script, data, "--split", bad, "--no-check",
                                "--held-out-set", held_out_set], capture_output=True, text=True)
            check(p.returncode != 0 and "fits on held-out models: " + model in p.stderr,
                  "%s, scoring %s: %r" % (what, held_out_set, p.stderr))

    def fit_on(model):
        def change(split):
            split["fit"]["models"].append(model)
            split["fit"]["batches"][model] = [32]
        return change
    refused("a split fitting on a validation model", fit_on("densenet121"), "densenet121", ("held_out",))
    refused("a split fitting on a test model", fit_on("convnext_base"), "convnext_base")
    refused("a split fitting on a second test model", fit_on("alexnet"), "alexnet",
            ("held_out", "test", "test2"))
    refused("a split fitting on a next test model", fit_on("fcn_resnet50"), "fcn_resnet50",
            ("held_out", "test", "test2", "next_test"))
    refused("a split fitting int8 runs of an int8 validation model",
            lambda split: split["int8"]["fit"].append("resnext50_32x4d:1"), "resnext50_32x4d", ("held_out",))
    # The validation runs' file holds no test run: scoring the test set on it says so.
    p = subprocess.run([sys.executable, script, data, "--no-check", "--held-out", validation,
                        "--held-out-set", "test"], capture_output=True, text=True)
    check(p.returncode != 0 and "no test traces in" in p.stderr, "test set: %r" % p.stderr[-300:])
    p = subprocess.run([sys.executable, script, os.path.join(tmp, "nothing")], capture_output=True, text=True)
    check(p.returncode != 0 and "no fit traces" in p.stderr, "no traces: %r" % p.stderr)
    check(os.path.exists(test) and len(P.load(test)) > 0, "the test runs' measurements are committed")

    # `tessel predict --json` and this script predict the same launches alike: every launch of
    # the generated small models (mma.sync, TMA, halo and op kernels; a dense block's prologues;
    # an int8 QDQ model; weights over half of the L2 cache or not), from the committed trees.
    if ARGS.tessel:
        every = [r for path in scored for r in P.load(path)]
        final = P.fit(every)
        final_gap = P.launch_gap(every, final)
        models = "resnet50,mobilenet_v2,densenet121,sr_net,resnet18_int8_qdq"
        subprocess.run([sys.executable, os.path.join(ARGS.source, "tools", "models", "gen_models.py"),
                        "--out", tmp, "--small", "--models", models], check=True, stdout=subprocess.DEVNULL)
        launches, worst, cold = 0, 0.0, set()
        for name in models.split(","):
            out = os.path.join(tmp, name + ".json")
            subprocess.run([ARGS.tessel, "predict", os.path.join(tmp, name + ".onnx"), "--target", "sm_90a",
                            "--json", out, "--total-only"], check=True, stdout=subprocess.DEVNULL)
            with open(out) as f:
                j = json.load(f)
            rows = [{"schedule": n["schedule"], "epilogue": n["epilogue"], "entry": n["entry"],
                     "operand_dtype": n["operand_dtype"], "grid": [n["ctas"], 1, 1],
                     "block": [n["threads"], 1, 1], "smem_bytes": n["smem_bytes"], "flops": n["flops"],
                     "bytes": n["bytes"], "analytical_us": n["analytical_us"],
                     "constant_bytes": j["constant_bytes"]} for n in j["nodes"]]
            for n, r, p in zip(j["nodes"], rows, P.predict(final, rows)):
                worst = max(worst, abs(p - n["microseconds"]) / p,
                            abs(P.gap_us(final_gap, p, r) - n["gap_us"]))
            launches += len(rows)
            if P.cold_weights(rows[0]):
                cold.add(name)
            check(any(r["epilogue"].startswith("A prologue") for r in rows) == (name == "densenet121"),
                  name + ": prologues where the dense block has them")
        check(launches > 200 and worst < 1e-9, "tessel predict against predictor_fit.py on %d launches: "
              "worst relative difference %.2e" % (launches, worst))
        check(cold == {"resnet50"}, "models whose weights exceed half of the L2 cache: %r" % cold)

finish("predictor_fit")
