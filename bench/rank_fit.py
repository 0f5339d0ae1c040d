#!/usr/bin/env python3
"""Fits the order in which `tessel tune` measures candidates (issue 13) to its own measurements,
and writes it as C++ (src/kernels/rank_fit.h).

`tessel tune` ranks a contraction's schedule space by the cost model's estimate
(kernels/estimate.h) and measures the best-ranked first. The estimate misjudges whole classes
of kernels: on ResNet-50 at batch 32 (H200) tune's best was at rank 16-61 for 10 of 25
contractions, behind dozens of schedules of the classes the estimate favours. The learned part
is one factor per schedule class, the schedule's name up to its third field (the kernel family,
the CTA tile and its stages or warp tile: "tma_128x128x64_s4", "tc_128x64x32_s3"):

    rank = estimate * f(class),  ln f(class) = shrunk median over the class's measurements of
                                 ln(measured / estimate), less the median over all of them

shrunk toward 0 as a class has fewer measurements (k / (k + SHRINK)), so a rare class moves
little and an unseen one keeps the estimate's order. The default schedule stays first, and the
defaults themselves do not change (a whole-model A/B decides those, docs/performance.md): only
what tune measures first.

Input: `tessel tune --log` files (JSON lines: key, node, schedule, rank, microseconds,
estimate_us), gzipped or not. Before writing, the fit is checked by leaving each contraction out
in turn: with the factors of the others, where its fastest measured schedule ranks among its
measured ones, and how close the first round (ROUND candidates) gets to that fastest.

  rank_fit.py LOG [LOG ...] [--out src/kernels/rank_fit.h] [--source TEXT] [--cc-major 9]
"""
import argparse
import collections
import gzip
import json
import math
import statistics
import sys
import textwrap

SHRINK = 3.0  # measurements worth as much as the prior (no correction)
ROUND = 16    # candidates of tune's first round, the default included


def schedule_class(schedule):
    """The class of a schedule name: its first three fields (kernels::rank_class)."""
    return "_".join(schedule.split("_")[:3])


def read_logs(paths):
    rows = []
    for path in paths:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            for line in f:
                r = json.loads(line)
                if r.get("estimate_us", 0) > 0 and r["microseconds"] > 0:
                    rows.append(r)
    return rows


def centre(rows):
    """The median over all measurements of ln(measured / estimate): the level the class factors
    are centred on."""
    return statistics.median(math.log(r["microseconds"] / r["estimate_us"]) for r in rows) if rows else 0.0


def fit(rows):
    """{class: ln factor} and the number of measurements per class."""
    logs = collections.defaultdict(list)
    for r in rows:
        logs[schedule_class(r["schedule"])].append(math.log(r["microseconds"] / r["estimate_us"]))
    if not logs:
        return {}, {}
    center = centre(rows)
    factors, counts = {}, {}
    for c, v in sorted(logs.items()):
        k = len(v)
        factors[c] = k / (k + SHRINK) * (statistics.median(v) - center)
        counts[c] = k
    return factors, counts


def ranked(rows, factors):
    """rows of one contraction in tune's order under `factors`: the default (rank 0) first."""
    return sorted(rows, key=lambda r: (r["rank"] != 0, r["estimate_us"] *
                                       math.exp(factors.get(schedule_class(r["schedule"]), 0.0))))


def leave_one_out(rows):
    """Per contraction (key) with its fastest measured schedule: that schedule's position among
    the measured ones by the estimate's order and by the fit's (the others' factors), and the
    fastest of the first ROUND over the fastest, by each."""
    by_key = collections.defaultdict(list)
    for r in rows:
        by_key[r["key"]].append(r)
    out = []
    for key, mine in sorted(by_key.items()):
        if len(mine) < 2 or not any(r["rank"] == 0 for r in mine):
            continue
        factors, _ = fit([r for r in rows if r["key"] != key])
        best = min(mine, key=lambda r: r["microseconds"])
        before = sorted(mine, key=lambda r: r["rank"])
        after = ranked(mine, factors)
        out.append({
            "node": mine[0].get("node", key[:40]),
            "position_before": before.index(best), "position_after": after.index(best),
            "first_round_before": min(r["microseconds"] for r in before[:ROUND]) / best["microseconds"],
            "first_round_after": min(r["microseconds"] for r in after[:ROUND]) / best["microseconds"],
        })
    return out


def header(factors, counts, rows, source, cc_major):
    keys = {r["key"] for r in rows}
    lines = [
        "// The order in which `tessel tune` measures candidates (kernels::rank_factor), written by",
        "// bench/rank_fit.py: do not edit. ln(measured / estimate) per schedule class, shrunk by",
        f"// k / (k + {SHRINK:g}) and centred, fitted to {len(rows)} measurements of {len(keys)} contractions.",
    ]
    lines += ["// " + l for l in textwrap.wrap(source, 96)]
    lines += [
        "#pragma once",
        "",
        "namespace tessel::kernels::rank_fit {",
        "",
        f"constexpr int kCcMajor = {cc_major};  // the measured GPU's: other architectures keep the estimate's order",
        "struct ClassFactor {",
        "  const char* schedule_class;  // kernels::rank_class",
        "  double ln_factor;",
        "  int measurements;",
        "};",
        "constexpr ClassFactor kClasses[] = {",
    ]
    for c in sorted(factors):
        lines.append(f'    {{"{c}", {factors[c]:.6g}, {counts[c]}}},')
    lines += ["};", "", "}  // namespace tessel::kernels::rank_fit", ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="+", help="tessel tune --log files (.jsonl or .jsonl.gz)")
    ap.add_argument("--out", help="write the C++ header here")
    ap.add_argument("--source", default="", help="where the logs were measured, for the header")
    ap.add_argument("--cc-major", type=int, default=9,
                    help="the measured GPU's compute capability major (9: Hopper)")
    args = ap.parse_args()
    rows = read_logs(args.logs)
    if not rows:
        print("rank_fit.py: no measurements with an estimate in " + " ".join(args.logs), file=sys.stderr)
        return 1
    factors, counts = fit(rows)
    loo = leave_one_out(rows)
    print(f"{len(rows)} measurements, {len({r['key'] for r in rows})} contractions, "
          f"{len(factors)} schedule classes")
    print(f"{'contraction':24s} {'best at':>8s} {'->':>4s}  first round / best: estimate -> fit")
    for x in loo:
        print(f"{x['node'][:24]:24s} {x['position_before']:8d} {x['position_after']:4d}  "
              f"{x['first_round_before']:.3f} -> {x['first_round_after']:.3f}")
    if loo:
        mb = statistics.mean(x["first_round_before"] for x in loo)
        ma = statistics.mean(x["first_round_after"] for x in loo)
        found_b = sum(x["position_before"] < ROUND for x in loo)
        found_a = sum(x["position_after"] < ROUND for x in loo)
        print(f"left out in turn: the fastest in the first round for {found_b} -> {found_a} of "
              f"{len(loo)}; first round's best / the fastest, mean {mb:.3f} -> {ma:.3f}")
    if args.out:
        with open(args.out, "w") as f:
            f.write(header(factors, counts, rows, args.source, args.cc_major))
        print("wrote " + args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
