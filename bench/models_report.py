#!/usr/bin/env python3
"""The table of scripts/gpu_models.sh, from its work directory:

    DIR/torch_models.csv    name,batch,eager_graph_ms,compile_ms      (bench/torch_models.py)
    DIR/tessel.csv          name,batch,compile_cold_s,compile_warm_s,status   (the script)
    DIR/<name>_b<batch>.bench.json      `tessel bench --json`: median_ms, p90_ms,
                                        throughput_per_s, peak_device_bytes
    DIR/<name>_b<batch>.ref.npy, DIR/<name>_b<batch>.out/output.npy   PyTorch fp32, tessel
    DIR/<name>_b<batch>.torch16.npy     PyTorch's own fp16 output (for comparison)

One row per line of tessel.csv. Writes the markdown table (printed too) and every number as
JSON; exits 1 when a run failed or missed the accuracy bar (bench/accuracy.py).

    models_report.py --work DIR --md FILE --json FILE [--device TEXT]
    models_report.py --merge A.json B.json ... --md FILE --json FILE   (a zoo run's parts)

Under the table, per batch size: runs completed and passing the bar, the geometric mean
speed-up over torch.compile and eager, and the runs below torch.compile.
"""
import argparse
import csv
import json
import math
import os
import sys

import numpy as np

import accuracy

BENCH_KEYS = ("median_ms", "p90_ms", "throughput_per_s", "peak_device_bytes")


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [r for r in csv.reader(f) if r]


def number(text):
    try:
        return float(text)
    except ValueError:
        return math.nan


def collect(work):
    """One dict per run, in the order tessel.csv lists them."""
    torch_ms = {(r[0], int(r[1])): (number(r[2]), number(r[3]))
                for r in read_csv(os.path.join(work, "torch_models.csv")) if len(r) == 4}
    runs = []
    for name, batch, cold, warm, status in read_csv(os.path.join(work, "tessel.csv")):
        batch = int(batch)
        base = os.path.join(work, "%s_b%d" % (name, batch))
        eager, compiled = torch_ms.get((name, batch), (math.nan, math.nan))
        r = {"model": name, "batch": batch, "status": status,
             "compile_cold_s": number(cold), "compile_warm_s": number(warm),
             "torch_eager_graph_ms": eager, "torch_compile_ms": compiled}
        bench = {}
        if os.path.exists(base + ".bench.json"):
            with open(base + ".bench.json") as f:
                bench = json.load(f)
        for k in BENCH_KEYS:
            r[k] = float(bench[k]) if k in bench else math.nan
        out, ref = os.path.join(base + ".out", "output.npy"), base + ".ref.npy"
        if os.path.exists(ref):
            torch16 = base + ".torch16.npy"
            torch16 = np.load(torch16) if os.path.exists(torch16) else None
            if os.path.exists(out):
                r["accuracy"] = accuracy.check(np.load(out), np.load(ref), torch16)
            if torch16 is not None:
                r["torch_fp16_accuracy"] = accuracy.check(torch16, np.load(ref))
        runs.append(r)
    return runs


def fmt(v, spec):
    return "—" if v is None or math.isnan(v) else format(v, spec)


def speedup(peer_ms, tessel_ms):
    return "—" if math.isnan(peer_ms) or math.isnan(tessel_ms) else "%.2fx" % (peer_ms / tessel_ms)


def table(runs, device):
    lines = [
        "Device: %s. tessel: fp16 (`tessel bench` on the compiled .tsl); PyTorch: fp16, "
        "channels_last, cudnn.benchmark, eager replayed as a CUDA graph and "
        "torch.compile(mode=\"reduce-overhead\") (CUDA events around each call, so its "
        "Python-side dispatch counts); medians. Accuracy: tessel against PyTorch's fp32 output "
        "on the same input. Speed-up: PyTorch ms / tessel ms." % (device or "?"),
        "",
        "| model | batch | tessel median ms | p90 ms | PyTorch eager+graph ms | torch.compile ms "
        "| speed-up vs eager / compile | rel L2 | same top-1 | compile cold s | compile warm s "
        "| peak MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    notes = []
    for r in runs:
        acc = r.get("accuracy", {})
        top1 = ("%d/%d" % (acc["top1_same"], acc["top1_of"])) if "top1_same" in acc else "—"
        if acc.get("top1_near_ties"):
            top1 += " + %d tie%s" % (acc["top1_near_ties"], "s" if acc["top1_near_ties"] > 1 else "")
        lines.append("| %s | %d | %s | %s | %s | %s | %s / %s | %s | %s | %s | %s | %s |" % (
            r["model"], r["batch"], fmt(r["median_ms"], ".3f"), fmt(r["p90_ms"], ".3f"),
            fmt(r["torch_eager_graph_ms"], ".3f"), fmt(r["torch_compile_ms"], ".3f"),
            speedup(r["torch_eager_graph_ms"], r["median_ms"]),
            speedup(r["torch_compile_ms"], r["median_ms"]),
            fmt(acc.get("rel_l2", math.nan), ".1e"), top1,
            fmt(r["compile_cold_s"], ".2f"), fmt(r["compile_warm_s"], ".2f"),
            fmt(r["peak_device_bytes"] / 2**20, ".0f")))
        what = "%s b%d" % (r["model"], r["batch"])
        if r["status"] != "ok":
            notes.append("%s: %s (see models.log)" % (what, r["status"]))
        elif not acc:
            notes.append("%s: no tessel output to compare" % what)
        else:
            note = "%s: tessel %s%s" % (what, accuracy.summary(acc),
                                        "" if acc["ok"] else ": FAILS the bar")
            if "torch_fp16_accuracy" in r:
                note += "; PyTorch's own fp16: " + accuracy.summary(r["torch_fp16_accuracy"])
            notes.append(note)
    summary_lines = summary(runs)
    bar = ("Accuracy bar: rel L2 <= %.0e or <= %.1fx PyTorch's own fp16 rel L2, same top-1 on "
           ">= %d of 32 images, where an image whose top-1 moves to a class within %.1fx "
           "PyTorch fp16's own logit error of the fp32 top-1 (a near tie, \"+ n ties\") counts "
           "for neither side." % (accuracy.MAX_REL_L2, accuracy.TORCH_FP16_FACTOR,
                                 accuracy.top1_needed(32), accuracy.TORCH_FP16_FACTOR))
    return "\n".join(lines + [""] + summary_lines + ["", bar] + ["- " + n for n in notes]) + "\n"


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def summary(runs):
    """Per batch size: the runs that completed, how many pass the accuracy bar, the geometric
    mean speed-up over torch.compile and over eager, and the runs below torch.compile (issue
    10's bars: every model at least as fast, geomean >= 1.5x at batch 1 and >= 1.2x at 32)."""
    out = []
    for batch in sorted({r["batch"] for r in runs}):
        rs = [r for r in runs if r["batch"] == batch]
        ok = [r for r in rs if r["status"] == "ok" and not math.isnan(r.get("median_ms", math.nan))]
        passing = [r for r in ok if r.get("accuracy", {}).get("ok")]
        vs = lambda key: [r[key] / r["median_ms"] for r in ok  # noqa: E731
                          if not math.isnan(r.get(key, math.nan))]
        compile_x, eager_x = vs("torch_compile_ms"), vs("torch_eager_graph_ms")
        below = ["%s %.2fx" % (r["model"], r["torch_compile_ms"] / r["median_ms"]) for r in ok
                 if not math.isnan(r.get("torch_compile_ms", math.nan)) and
                 r["torch_compile_ms"] < r["median_ms"]]
        out.append("Batch %d: %d of %d runs completed, %d pass the accuracy bar; geomean speed-up "
                   "%s over torch.compile (%d models), %s over eager + graph; below "
                   "torch.compile: %s." % (
                       batch, len(ok), len(rs), len(passing),
                       fmt(geomean(compile_x), ".2f") + "x" if compile_x else "—", len(compile_x),
                       fmt(geomean(eager_x), ".2f") + "x" if eager_x else "—",
                       ", ".join(below) if below else "none"))
    return out


def from_json(v):
    """A run read back from models.json: null -> NaN where a number is expected."""
    return {k: (math.nan if x is None and k != "accuracy" else x) for k, x in v.items()}


def merge(paths):
    """The runs of several models.json files (the parts of a zoo run), in order, and their
    devices; a run (model, batch) that several files hold keeps the last one's."""
    runs, devices = {}, []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        if data.get("device") and data["device"] not in devices:
            devices.append(data["device"])
        for r in data["runs"]:
            runs[(r["model"], r["batch"])] = from_json(r)
    return list(runs.values()), devices


def no_nan(v):
    """JSON without NaN (not valid JSON): null instead."""
    if isinstance(v, dict):
        return {k: no_nan(x) for k, x in v.items()}
    return None if isinstance(v, float) and math.isnan(v) else v


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = ap.add_mutually_exclusive_group(required=True)
    source.add_argument("--work", help="gpu_models.sh's work directory")
    source.add_argument("--merge", nargs="+", metavar="JSON",
                        help="models.json files of several runs (a zoo's parts): one table")
    ap.add_argument("--md", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--device", default="")
    args = ap.parse_args(argv)
    if args.merge:
        runs, devices = merge(args.merge)
        device = args.device or "; ".join(devices)
        if len(devices) > 1:
            sys.stderr.write("models_report.py: the runs come from %d devices: %s\n"
                             % (len(devices), "; ".join(devices)))
    else:
        runs = collect(args.work)
        device = args.device
    args.device = device
    md = table(runs, args.device)
    with open(args.md, "w") as f:
        f.write(md)
    with open(args.json, "w") as f:
        json.dump({"device": args.device, "runs": [no_nan(r) for r in runs]}, f, indent=1)
    sys.stdout.write(md)
    bad = [r for r in runs if r["status"] != "ok" or not r.get("accuracy", {}).get("ok")]
    return 1 if bad or not runs else 0


if __name__ == "__main__":
    sys.exit(main())
