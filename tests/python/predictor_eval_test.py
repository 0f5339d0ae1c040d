#!/usr/bin/env python3
"""bench/predictor_eval.py: it reads `tessel profile` outputs and computes the predictor's
errors. The profile is an excerpt of a real one (ResNet-50 at batch 32 on an H100, 11 of its 59
kernel rows), its total lines restated for the rows kept and the replay time set to 330 us; the
expected numbers below are worked out by hand from those rows."""
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_check import ARGS, check, finish  # noqa: E402
import predictor_eval  # noqa: E402

SAMPLE = os.path.join(ARGS.source, "tests", "python", "data", "profile_resnet50_b32.txt")
with open(SAMPLE) as f:
    rows, replay = predictor_eval.parse_profile(f.read())
check(len(rows) == 11, "11 kernel rows, got %d" % len(rows))
check(replay == 330.0, "the replay time 330.0, got %r" % replay)
check(rows[3]["node"] == "node_Conv_753" and rows[3]["measured_us"] == 100.90 and
      rows[3]["predicted_us"] == 86.71, "row 3: %r" % (rows[3],))
check(rows[-1]["index"] == 58 and rows[-1]["op"] == "tessel.Gemm", "the last row: %r" % (rows[-1],))

r = predictor_eval.model_errors(rows, replay)
# |pred - meas| / meas of the 11 rows, by hand.
by_hand = [4.35 / 4.99, 5.96 / 12.46, 1.54 / 9.69, 14.19 / 100.90, 9.77 / 29.50, 4.26 / 9.72,
           6.78 / 23.14, 3.46 / 37.70, 46.76 / 81.00, 0.11 / 2.65, 0.99 / 4.86]
check(abs(r["median_kernel_error"] - statistics.median(by_hand)) < 1e-9,
      "median kernel error %r, by hand %r" % (r["median_kernel_error"], statistics.median(by_hand)))
check(abs(r["predicted_us"] - 252.52) < 1e-6, "predicted sum %r (252.52)" % r["predicted_us"])
check(abs(r["model_error"] - (330.0 - 252.52) / 330.0) < 1e-9, "model error %r" % r["model_error"])

# A profile with a "predicted replay" line is scored by it (the launches + the gap per launch).
with open(SAMPLE) as f:
    text = f.read()
check(predictor_eval.predicted_replay(text) is None, "the sample has no predicted replay line")
line = "predicted replay (tessel predict): 300.00 us, the launches and their gaps; -9.1% of the replay\n"
check(predictor_eval.predicted_replay(text + line) == 300.0, "the predicted replay line")
check(abs(predictor_eval.model_errors(rows, replay, 300.0)["model_error"] - 30.0 / 330.0) < 1e-9,
      "model error against the predicted replay")

# A row without a prediction counts in neither error, and the CLI reports a failed profile.
no_pred = rows[:1] + [dict(rows[1], predicted_us=None)]
check(predictor_eval.model_errors(no_pred, 20.0)["predicted_kernels"] == 1, "a row without a prediction")
with tempfile.TemporaryDirectory() as tmp:
    empty = os.path.join(tmp, "failed.txt")
    with open(empty, "w") as f:
        f.write("error: model.onnx: no CUDA device\n")
    p = subprocess.run([sys.executable, os.path.join(ARGS.source, "bench", "predictor_eval.py"),
                        "good=" + SAMPLE, "bad=" + empty], capture_output=True, text=True)
    check(p.returncode == 1, "a profile without rows exits 1, got %d" % p.returncode)
    check("bad: " in p.stderr and "no kernel rows" in p.stderr, "its line: %r" % p.stderr)
    check("| good | 11 |" in p.stdout, "the good model's row: %r" % p.stdout)

finish("predictor_eval")
