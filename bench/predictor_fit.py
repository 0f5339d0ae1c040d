#!/usr/bin/env python3
"""Fits the predictor's learned correction (issue 13) to measured kernels, and writes it as C++.

`tessel predict` first times each launch analytically: the contraction cost model
(kernels/estimate.h) or a roofline (op kernels, the halo kernel). That time is off by a factor
that depends on the kind of kernel and its size (median 25% on the fit models, some kernel
families 1.8x). The learned correction maps the analytical time and the launch's shape to the
measured time, in logs, linearly:

    ln t = w_g . x,   x = [1, ln A, ln(bytes / BW), ln(flops / TC), ln(CTAs / SMs),
                           ln(threads per CTA / 128), shared memory per CTA / 64 KiB]

with ln A's weight 1: a factor on the analytical time, learned from the launch's shape.

A: the analytical time (us, at least 0.5); BW and TC: the target's DRAM bytes and mma.sync
flops per us of the architecture table (kernels/arch.cc), TC at the int8 rate for an int8
contraction; the byte and flop terms floored at 0.1 us and CTAs / SMs at 1/32 (FLOOR_US,
MIN_WAVE). w_g = w + d_g + d_k: weights shared by every kernel plus ridge-shrunk offsets per
group (the contraction's kernel family, mma / wgmma / tma / halo / simt, or "op" for every op
kernel) and per kind within it (op_kind: an op kernel's kind, a grouped contraction, an int8
one), so a group with little data stays near the shared weights and one with none (an op or
family the fit never saw) uses them alone. A whole model's replay is the sum of its kernels
plus a gap per launch, one for launches predicted at 3 us or more and one for smaller ones
(launch_gap).

Input: `tessel profile --trace` outputs of the fit models (scripts/gpu_predict.sh fit writes
trace_<model>_b<batch>.json and profile_<model>_b<batch>.txt; an int8 QDQ model's are
trace_<model>_b<batch>_int8.json and profile_<model>_b<batch>_int8.txt), or files --save
wrote; several may be given. Which runs are fit and which held out is
bench/predictor_split.json (its "int8" entry: the int8 runs). Before writing, the fit is
checked by leaving each fit model out in turn (all its batches, fp16 and int8) and
predicting it from the others.

  predictor_fit.py SOURCE... [--lambda 1.0] [--out src/compiler/predict_fit.h] [--source TEXT]
"""
import argparse
import collections
import glob
import gzip
import json
import math
import os
import re
import statistics
import sys
import textwrap

import numpy as np

# The fit device's facts, from the sm_90 row of kernels/arch.cc (the features' units): SMs,
# DRAM bytes and mma.sync flops per SM per clock (16-bit, and int8's m16n8k32), boost clock in
# MHz.
SMS, DRAM_PER_CLK, MMA_PER_CLK, MMA_S8_PER_CLK, CLOCK_MHZ = 132, 13, 2048, 4096, 1980
FEATURES = ["1", "ln A", "ln(bytes/BW)", "ln(flops/TC)", "ln(CTAs/SMs)", "ln(threads/128)",
            "smem/64KiB"]
GROUPS = ["halo", "mma", "op", "simt", "tma", "wgmma"]
# Floors of the byte and flop times (us) and of CTAs / SMs: about the smallest kernels of the
# fit models (the smallest moves 0.03 us of DRAM traffic, the fewest CTAs is 5), so that a
# smaller launch is predicted like those, not by extrapolating the logs.
FLOOR_US, MIN_WAVE = 0.1, 1 / 32
# No kernel is predicted faster than this (us): about the fastest the fit measured (1.30 us on
# the H200; a launch with nothing to do takes that long in a graph).
MIN_KERNEL_US = 1.3
# Launches predicted below this (us) add their own gap to a replay (launch_gap).
SMALL_KERNEL_US = 3.0
_FAMILY = re.compile(r"^(halo|tma|tc|wgmma|simt)_")
_OP_ENTRY = re.compile(r"^tessel_op_([a-z0-9_]+)_[0-9a-f]{16}$")
_GROUPED = re.compile(r"_g\d+$")
# A run's model: its name without the batch, and without "_int8" for an int8 QDQ model's run
# ("resnet50_b32_int8"), which is left out with the same model's fp16 runs.
_RUN = re.compile(r"^(.*)_b\d+(?:_int8)?$")


def group(row):
    """The kernel group of a trace row: its contraction family from the schedule, else "op"."""
    m = _FAMILY.match(row["schedule"])
    if not m:
        return "op"
    return {"tc": "mma"}.get(m.group(1), m.group(1))


def int8(row):
    """Whether the row is an int8 contraction: its operand dtype (engine format 7 on, trace arg
    "operand_dtype") is i8. Rows without one (older traces and files) are 16-bit."""
    return group(row) != "op" and row.get("operand_dtype") in ("i8", "u8")


def op_kind(row):
    """The kernel's kind within its group: an op kernel's from its entry point
    (tessel_op_<kind>_<hash>: "op:pool", "op:depthwise_conv", ...), "grouped" for a grouped
    contraction (a schedule with groups per tile, "_g<n>"; 16-bit only), "<group>_i8" for an
    int8 one ("mma_i8", "tma_i8"), else None."""
    if group(row) != "op":
        if _GROUPED.search(row["schedule"]):
            return "grouped"
        return group(row) + "_i8" if int8(row) else None
    m = _OP_ENTRY.match(row["entry"])
    return "op:" + m.group(1) if m else None


def analytical(row):
    """The launch's analytical time ("analytical_us" of engines with the learned correction,
    format 5; load() takes "predicted_us" of older ones, whose prediction was the analytical)."""
    return row["analytical_us"]


def features(row):
    bw = DRAM_PER_CLK * SMS * CLOCK_MHZ  # bytes per us
    tc = (MMA_S8_PER_CLK if int8(row) else MMA_PER_CLK) * SMS * CLOCK_MHZ  # flops per us
    ctas = row["grid"][0] * row["grid"][1] * row["grid"][2]
    threads = row["block"][0] * row["block"][1] * row["block"][2]
    return [1.0, math.log(max(analytical(row), 0.5)), math.log(max(row["bytes"] / bw, FLOOR_US)),
            math.log(max(row["flops"] / tc, FLOOR_US)), math.log(max(ctas / SMS, MIN_WAVE)),
            math.log(threads / 128), row["smem_bytes"] / 65536]


# The fields of a kernel row that the fit reads (what --save keeps).
# "epilogue": a contraction's fused work (engine format 6 on; "" in older traces, absent in
# older files); "operand_dtype": a contraction's (format 7 on; likewise).
FIELDS = ["run", "model", "node", "op", "entry", "schedule", "epilogue", "operand_dtype", "grid",
          "block", "smem_bytes", "flops", "bytes", "analytical_us", "predicted_us", "time_us",
          "replay"]


def load(source, runs=None):
    """Kernel rows of every trace in the directory `source`, or of a file --save wrote (JSON
    lines, gzipped); of `runs` (model_bBATCH names) when given."""
    if os.path.isfile(source):
        with gzip.open(source, "rt") as f:
            rows = [json.loads(line) for line in f]
        return [r for r in rows if runs is None or r["run"] in runs]
    rows = []
    directory = source
    for path in sorted(glob.glob(os.path.join(directory, "trace_*.json"))):
        run = os.path.basename(path)[len("trace_"):-len(".json")]
        if runs is not None and run not in runs:
            continue
        text = open(path.replace("trace_", "profile_").replace(".json", ".txt")).read()
        m = re.search(r"one replay of the whole CUDA graph ([0-9.]+) us", text)
        for e in json.load(open(path))["traceEvents"]:
            a = dict(e["args"])
            a.update(run=run, model=_RUN.match(run).group(1), node=e["name"],
                     replay=float(m.group(1)) if m else None)
            a.setdefault("analytical_us", a["predicted_us"])
            a.setdefault("epilogue", "")
            a.setdefault("operand_dtype", "")
            rows.append({k: a[k] for k in FIELDS})
    return rows


def save(path, rows):
    with gzip.open(path, "wt") as f:
        for r in rows:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")


def design(rows, kinds):
    x = np.array([features(r) for r in rows])
    blocks = [x] + [x * np.array([[group(r) == g] for r in rows], dtype=float) for g in GROUPS]
    blocks += [x * np.array([[op_kind(r) == k] for r in rows], dtype=float) for k in kinds]
    return np.hstack(blocks)


def fit(rows, lam):
    """Ridge least squares of ln(t / A) on the other features: ln A's weight is 1 in every
    group, so the correction is a factor on the analytical time, and a slower target (a larger
    A) is never predicted faster."""
    kinds = sorted({op_kind(r) for r in rows} - {None})
    x = design(rows, kinds)
    k = len(FEATURES)
    free = [i for i in range(x.shape[1]) if i % k != 1]
    y = np.log([r["time_us"] for r in rows]) - x[:, 1]
    penalty = np.diag([1e-6 if i < k else lam for i in free])
    w = np.zeros(x.shape[1])
    w[free] = np.linalg.solve(x[:, free].T @ x[:, free] + penalty, x[:, free].T @ y)
    w[1] = 1.0
    return w[:k], {g: w[k * (i + 1):k * (i + 2)] for i, g in enumerate(GROUPS + kinds)}


def weights(model, row):
    """The shared weights plus the offsets of the row's group and op kind (zero where the fit
    had none)."""
    shared, offsets = model
    zero = np.zeros(len(FEATURES))
    return shared + offsets.get(group(row), zero) + offsets.get(op_kind(row), zero)


def predict(model, rows):
    """Each row's predicted time, at least MIN_KERNEL_US."""
    return [max(MIN_KERNEL_US, math.exp(float(np.dot(weights(model, r), features(r))))) for r in rows]


def gap_us(gap, predicted_us):
    """What a launch predicted to take `predicted_us` adds to a replay beyond its own time."""
    large, small = gap
    return large if predicted_us >= SMALL_KERNEL_US else small


def launch_gap(rows, model):
    """The per-launch gaps (large, small kernels): least squares over the runs of (replay - the
    kernels' measured sum) = large * (launches predicted at SMALL_KERNEL_US or more) + small *
    (the others). A small kernel timed alone includes a launch latency that, in a graph, hides
    under its predecessor's tail: its gap is about 0; a large one's is about half a us."""
    by = collections.defaultdict(list)
    for r, p in zip(rows, predict(model, rows)):
        by[r["run"]].append((r, p))
    a, y = [], []
    for v in by.values():
        if v[0][0]["replay"]:
            small = sum(p < SMALL_KERNEL_US for _, p in v)
            a.append([len(v) - small, small])
            y.append(v[0][0]["replay"] - sum(r["time_us"] for r, _ in v))
    return tuple(float(g) for g in np.linalg.lstsq(np.array(a, float), np.array(y), rcond=None)[0])


def errors(rows, predicted, gap):
    kernel = [abs(p - r["time_us"]) / r["time_us"] for p, r in zip(predicted, rows)]
    by = collections.defaultdict(lambda: [0.0, 0, None])
    for p, r in zip(predicted, rows):
        b = by[r["run"]]
        b[0] += p + gap_us(gap, p)
        b[1] += 1
        b[2] = r["replay"]
    model = {run: (s - replay) / replay for run, (s, n, replay) in by.items()}
    return kernel, model


def leave_one_model_out(rows, lam):
    """Each row's kernel error and each run's model error, predicted by a fit on the other
    models' rows (a model's fp16 and int8 runs are left out together)."""
    kernel, model = [None] * len(rows), {}
    for m in sorted({r["model"] for r in rows}):
        index = [i for i, r in enumerate(rows) if r["model"] == m]
        train = [r for r in rows if r["model"] != m]
        test = [rows[i] for i in index]
        model_m = fit(train, lam)
        k, mm = errors(test, predict(model_m, test), launch_gap(train, model_m))
        for i, e in zip(index, k):
            kernel[i] = e
        model.update(mm)
    return kernel, model


def int8_run(run):
    """An int8 QDQ model's run ("resnet50_b32_int8")."""
    return run.endswith("_int8")


def report(what, rows, kernel, model):
    """Prints the median kernel and model errors, then per precision where there are both, then
    each run's model error."""
    def line(label, keep):
        k = [e for r, e in zip(rows, kernel) if keep(r["run"])]
        m = [abs(e) for run, e in model.items() if keep(run)]
        print(f"{label}: median kernel error {statistics.median(k):.1%}, median model error "
              f"{statistics.median(m):.1%}")
    line(what, lambda run: True)
    if len({int8_run(r["run"]) for r in rows}) == 2:
        line("  fp16 runs", lambda run: not int8_run(run))
        line("  int8 runs", int8_run)
    for run, e in sorted(model.items()):
        print(f"  {run:24} {e:+.1%}")


def write_header(path, model, gap, source, n_rows, runs):
    shared, offsets = model
    def arr(w):
        return "{" + ", ".join(f"{v:.6g}" for v in w) + "}"
    about = (f"The predictor's learned correction (compiler/predict.h), written by bench/predictor_fit.py: "
             f"do not edit. Fitted to {n_rows} kernels of {len(runs)} profiles ({', '.join(runs)}), "
             f"{source}. ln t = (kShared + the offsets of the kernel's group and kind) . x, x as "
             f"predict.cc's learned_us.")
    lines = ["// " + line for line in textwrap.wrap(about, 96)] + [
        "#pragma once",
        "",
        "namespace tessel::compiler::fit {",
        "",
        f"constexpr int kFeatures = {len(FEATURES)};  // " + ", ".join(FEATURES),
        f"constexpr double kShared[kFeatures] = {arr(shared)};",
        f"constexpr double kFloorUs = {FLOOR_US}, kMinWave = {MIN_WAVE};  // floors of x[2], x[3] and x[4]'s ratio",
        f"constexpr double kMinKernelUs = {MIN_KERNEL_US};  // the least time predicted for a launch",
        "struct GroupOffset {",
        "  const char* group;",
        "  double w[kFeatures];",
        "};",
        "constexpr GroupOffset kGroups[] = {",
    ]
    lines += [f"    {{\"{g}\", {arr(w)}}}," for g, w in offsets.items()]
    lines += [
        "};",
        "// A CUDA graph replay's time beyond its kernels' (each timed alone), per launch: of a",
        f"// launch predicted at kSmallKernelUs or more, and of a smaller one.",
        f"constexpr double kSmallKernelUs = {SMALL_KERNEL_US};",
        f"constexpr double kLaunchGapUs = {gap[0]:.4f}, kSmallLaunchGapUs = {gap[1]:.4f};",
        "",
        "}  // namespace tessel::compiler::fit",
        "",
    ]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sources", nargs="+", metavar="SOURCE",
                    help="directory of trace_*.json and profile_*.txt of the fit models, or a file "
                    "--save wrote")
    ap.add_argument("--lambda", dest="lam", type=float, default=1.0, help="ridge weight of the group offsets")
    ap.add_argument("--out", help="write the C++ header here (src/compiler/predict_fit.h)")
    ap.add_argument("--source", default="measured on the GPU", help="device, date and commit, for the header")
    ap.add_argument("--split", default=os.path.join(os.path.dirname(__file__), "predictor_split.json"))
    ap.add_argument("--held-out", metavar="SOURCE", nargs="+",
                    help="also score the fit on the held-out runs' traces in these directories, or "
                    "files --save wrote (never fitted on)")
    ap.add_argument("--held-out-set", choices=("held_out", "test"), default="held_out",
                    help="which runs of the split --held-out scores: held_out (default; the "
                    "validation set of predictor changes, and the int8 held-out runs) or test "
                    "(scored once, after them: the split's test_rule)")
    ap.add_argument("--save", metavar="FILE.jsonl.gz",
                    help="write the fit rows (and the held-out ones, to FILE with .held_out before "
                    ".jsonl.gz) in the compact form load() reads")
    args = ap.parse_args()
    split = json.load(open(args.split))
    int8 = split.get("int8", {"fit": [], "held_out": []})
    runs = {f"{m}_b{b}" for m in split["fit"]["models"] for b in split["fit"]["batches"][m]}
    runs |= {r.replace(":", "_b") + "_int8" for r in int8["fit"]}
    held = {r.replace(":", "_b") for r in split[args.held_out_set]}
    if args.held_out_set == "held_out":
        held |= {r.replace(":", "_b") + "_int8" for r in int8["held_out"]}
    never_fit = split["held_out"] + split.get("test", []) + int8["held_out"]
    fit_models = set(split["fit"]["models"]) | {r.split(":")[0] for r in int8["fit"]}
    mixed = sorted(fit_models & {h.split(":")[0] for h in never_fit})
    if mixed:
        sys.exit(f"predictor_fit.py: {args.split} fits on held-out models: {', '.join(mixed)}")
    rows = [r for s in args.sources for r in load(s, runs)]
    if not rows:
        sys.exit(f"predictor_fit.py: no fit traces in {', '.join(args.sources)}")
    before = [abs(analytical(r) - r["time_us"]) / r["time_us"] for r in rows]
    kernel, model = leave_one_model_out(rows, args.lam)
    print(f"{len(rows)} kernels of {len({r['run'] for r in rows})} profiles")
    print(f"analytical alone: median kernel error {statistics.median(before):.1%}")
    report("learned, each model left out in turn", rows, kernel, model)
    if args.save:
        save(args.save, rows)
        print(f"wrote {args.save}")
    final = fit(rows, args.lam)
    gap = launch_gap(rows, final)
    if args.held_out:
        what = "held-out" if args.held_out_set == "held_out" else "test"
        test = [r for s in args.held_out for r in load(s, held)]
        if not test:
            sys.exit(f"predictor_fit.py: no {what} traces in {', '.join(args.held_out)}")
        if args.save:
            save(args.save.replace(".jsonl.gz", f".{args.held_out_set}.jsonl.gz"), test)
        seen = {(r["op"], r["flops"], r["bytes"]) for r in rows}
        shared = sum((r["op"], r["flops"], r["bytes"]) in seen for r in test)
        print(f"{what} kernels with the op, FLOPs and bytes of a fit kernel: {shared} of {len(test)}")
        kernel, model = errors(test, predict(final, test), gap)
        report(f"{what.replace('-', ' ')} ({len({r['run'] for r in test})} profiles, {len(test)} "
               f"kernels)", test, kernel, model)
    if args.out:
        write_header(args.out, final, gap, args.source, len(rows), sorted({r["run"] for r in rows}))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
