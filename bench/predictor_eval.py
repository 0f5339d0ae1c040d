#!/usr/bin/env python3
"""The predictor's error on the held-out models (issue 13), from `tessel profile` outputs.

`tessel profile` prints each kernel's measured time beside the compiler's prediction (the
`pred us` column: compiler/predict.h) and the replay time of the whole CUDA graph. This reads
such outputs and reports, per model and over all of them:
  - per kernel: |predicted - measured| / measured, median (kernels with a prediction);
  - per model: |predicted replay - one graph replay| / one graph replay, the predicted replay
    being the profile's "predicted replay" line (the launches plus the predictor's gap per
    launch) where it has one, else the sum of the kernels' predictions (older profiles).
Which models are held out, and why, is bench/predictor_split.json; scripts/gpu_predict.sh
profiles them on the GPU machine and runs this.

  predictor_eval.py NAME=PROFILE.txt [NAME=PROFILE.txt ...] [--json OUT.json]
Exit status 1 where a file has no kernel rows or no replay time (a profile that failed).
"""
import argparse
import json
import re
import statistics
import sys

_ROW = re.compile(r"^(\d+)\s+(\S+)\s+(\S+)\s+([0-9.]+)\s+(\S+)\s")
_REPLAY = re.compile(r"one replay of the whole CUDA graph ([0-9.]+) us")
_PREDICTED_REPLAY = re.compile(r"^predicted replay \(tessel predict\): ([0-9.]+) us")


def parse_profile(text):
    """Kernel rows (index, node, op, measured us, predicted us or None) and the replay time."""
    rows, replay = [], None
    for line in text.splitlines():
        m = _ROW.match(line)
        if m:
            try:
                predicted = float(m.group(5))
            except ValueError:
                predicted = None  # no prediction for this kernel ("-")
            rows.append({"index": int(m.group(1)), "node": m.group(2), "op": m.group(3),
                         "measured_us": float(m.group(4)),
                         "predicted_us": predicted if predicted and predicted > 0 else None})
            continue
        m = _REPLAY.search(line)
        if m:
            replay = float(m.group(1))
    return rows, replay


def predicted_replay(text):
    """The profile's predicted replay of the whole graph (us), or None where it prints none."""
    for line in text.splitlines():
        m = _PREDICTED_REPLAY.match(line)
        if m:
            return float(m.group(1))
    return None


def model_errors(rows, replay, predicted=None):
    """Per-kernel relative errors, their median, and the whole model's relative error against
    `predicted` (the predicted replay; default: the sum of the kernels' predictions)."""
    errors = [abs(r["predicted_us"] - r["measured_us"]) / r["measured_us"]
              for r in rows if r["predicted_us"] is not None and r["measured_us"] > 0]
    if predicted is None:
        predicted = sum(r["predicted_us"] or 0.0 for r in rows)
    return {
        "kernels": len(rows),
        "predicted_kernels": len(errors),
        "kernel_errors": errors,
        "median_kernel_error": statistics.median(errors) if errors else None,
        "predicted_us": predicted,
        "replay_us": replay,
        "model_error": abs(predicted - replay) / replay if replay else None,
    }


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profiles", nargs="+", help="NAME=PROFILE.txt")
    ap.add_argument("--json", help="write every number here")
    args = ap.parse_args(argv)
    results, status, all_errors = {}, 0, []
    for spec in args.profiles:
        name, sep, path = spec.partition("=")
        if not sep:
            ap.error("%r: expected NAME=PROFILE.txt" % spec)
        with open(path) as f:
            text = f.read()
        rows, replay = parse_profile(text)
        if not rows or replay is None:
            print("%s: %s has no kernel rows or no replay time" % (name, path), file=sys.stderr)
            status = 1
            continue
        results[name] = model_errors(rows, replay, predicted_replay(text))
        all_errors += results[name]["kernel_errors"]
    print("| model | kernels | median kernel error | predicted us | replay us | model error |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        median = r["median_kernel_error"]
        print("| %s | %d | %s | %.1f | %.1f | %.1f%% |" % (
            name, r["kernels"], "%.1f%%" % (100 * median) if median is not None else "-",
            r["predicted_us"], r["replay_us"], 100 * r["model_error"]))
    if results:
        model_median = statistics.median(r["model_error"] for r in results.values())
        kernel_median = statistics.median(all_errors) if all_errors else float("nan")
        print("\nover %d profiles: median kernel error %.1f%% (%d kernels), median model error "
              "%.1f%% (the bars: 10%% and 5%%)" % (len(results), 100 * kernel_median, len(all_errors),
                                                    100 * model_median))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
