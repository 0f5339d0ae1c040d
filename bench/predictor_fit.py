#!/usr/bin/env python3
"""Fits the predictor's learned correction (issue 13) to measured kernels, and writes it as C++.

`tessel predict` first times each launch analytically: the contraction cost model
(kernels/estimate.h) or a roofline (op kernels, the halo kernel). That time is off by a factor
that depends on the kind of kernel and its shape (median 36% on the fit models, some kernel
families 1.8x). The learned correction maps the analytical time A and the launch's record to the
measured time t: ln(t / A) is a sum of regression trees (gradient boosting on squared error),
each of depth DEPTH, on the features of `features`:

  * the launch's size in the target's units: ln A, ln(bytes / BW), ln(flops / TC),
    ln(CTAs / SMs), ln(threads per CTA / 128), shared memory per CTA / 64 KiB;
  * what runs: the kernel group (the contraction's family, mma / wgmma / tma / halo / simt, or
    "op" for every op kernel) and kind (an op kernel's kind, a grouped or an int8 contraction),
    one indicator each; the schedule's tile (ln of its M, N and K extents, its stages, ln of
    split-K, ln(1 + groups per tile)); the fused work (an A prologue, a residual, a
    transcendental step, a channel-slice or depth-to-space store, an f32 output).

A: the analytical time (us, at least 0.5); BW and TC: the target's DRAM bytes and mma.sync
flops per us of the architecture table (kernels/arch.cc), TC at the int8 rate for an int8
contraction; the byte and flop terms floored at 0.1 us and CTAs / SMs at 1/32 (FLOOR_US,
MIN_WAVE). Trees predict within what they were fitted on: a launch larger than any the fit saw
takes the correction of the largest ones, not an extrapolation of a slope. A whole model's
replay is the sum of its kernels plus a gap per launch, one for launches predicted at 3 us or
more and one for smaller ones, and one per contraction launch where the model's constants exceed
half of the L2 cache (its weights are then read from DRAM in each replay, while a kernel timed
alone re-reads them from L2) (launch_gap).

Input: `tessel profile --trace` outputs of the fit models (scripts/gpu_predict.sh fit writes
trace_<model>_b<batch>.json and profile_<model>_b<batch>.txt; an int8 QDQ model's are
trace_<model>_b<batch>_int8.json and profile_<model>_b<batch>_int8.txt), or files --save
wrote; several may be given. Which runs are fit and which held out is
bench/predictor_split.json (its "int8" entry: the int8 runs). Before writing, the fit is
checked by leaving each fit model out in turn (all its batches, fp16 and int8) and
predicting it from the others.

  predictor_fit.py SOURCE... [--out src/compiler/predict_fit.h] [--source TEXT]
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
# Its L2 cache (bytes; what the driver reports for the H100 and H200, device::DeviceInfo's
# l2_bytes).
L2_BYTES = 50 << 20
GROUPS = ["halo", "mma", "op", "simt", "tma", "wgmma"]
# The trees: DEPTH levels of splits, ROUNDS of them, each scaled by RATE; a split leaves at
# least MIN_LEAF kernels on each side, and a leaf's value is shrunk by LEAF_L2 kernels' worth
# of zero residual. Chosen on the validation runs (2026-11-29; median kernel / model error:
# depth 2 9.5% / 7.3%, 3 9.5% / 7.3%, 4 8.3% / 6.6%, 500 rounds of depth 3 8.8% / 6.8%) and
# by leaving each model of the fit and validation runs out in turn (depth 3 7.9% / 6.8%, depth
# 4 7.1% / 6.8%).
DEPTH, ROUNDS, RATE, MIN_LEAF, LEAF_L2 = 4, 300, 0.1, 8, 1.0
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
# A schedule's name (kernels::Schedule::name): "tc_128x128x32_s3_w64x64_sk1_r8[_v4x8][_g4]",
# "tma_128x64x64_s7_r1_c132", "halo_16x16_n64_w64x32_c264[_g2]": its tile's extents (a halo
# kernel's: the output tile's height and width), stages, split-K and groups per tile.
_TILE = re.compile(r"^[a-z]+_(\d+)x(\d+)(?:x(\d+))?(?:_s(\d+))?")
_SPLIT_K = re.compile(r"_sk(\d+)")
_GROUPS_PER_TILE = re.compile(r"_g(\d+)$")
# Epilogue steps (contraction::Epilogue::str) computed with a transcendental function
# (contraction::transcendentals_per_output).
_TRANSCENDENTAL = {"sigmoid", "silu", "silu_qgate", "gelu", "gelu_tanh", "tanh", "mish", "elu"}
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


def epilogue_flags(row):
    """The fused work of a contraction from its epilogue's text (contraction::Epilogue::str(),
    "A prologue affine(#1) -> relu | bias(#0) -> silu -> store f16 channel_slice(...)"): an A
    prologue, a residual, a transcendental step, a channel-slice or depth-to-space store, an f32
    output. All 0 for an op kernel (no epilogue)."""
    e = row["epilogue"]
    body = e.split(" | ", 1)[1] if e.startswith("A prologue") else e
    steps = [re.match(r"[a-z_0-9]*", t).group(0) for t in body.split(" -> ")[:-1]]
    store = body.split(" -> ")[-1].split(" ")
    return [float(e.startswith("A prologue")), float("residual_add" in steps),
            float(any(t in _TRANSCENDENTAL for t in steps)),
            float(len(store) > 2 and store[2].startswith("channel_slice")),
            float(len(store) > 2 and store[2].startswith("depth_to_space")),
            float(len(store) > 1 and store[1] == "f32")]


def schedule_shape(row):
    """ln of the tile's M, N and K extents, its stages, ln split-K, ln(1 + groups per tile);
    all 0 for an op kernel (no schedule)."""
    m = _TILE.match(row["schedule"])
    if not m:
        return [0.0] * 6
    sk = _SPLIT_K.search(row["schedule"])
    g = _GROUPS_PER_TILE.search(row["schedule"])
    return [math.log(int(m.group(1))), math.log(int(m.group(2))), math.log(int(m.group(3) or 1)),
            float(m.group(4) or 0), math.log(int(sk.group(1)) if sk else 1),
            math.log(1 + (int(g.group(1)) if g else 0))]


def features(row, kinds):
    """The trees' inputs for a kernel row (the module's docstring); `kinds`: the op kinds of the
    fit, one indicator each. predict.cc's learned_features computes the same."""
    bw = DRAM_PER_CLK * SMS * CLOCK_MHZ  # bytes per us
    tc = (MMA_S8_PER_CLK if int8(row) else MMA_PER_CLK) * SMS * CLOCK_MHZ  # flops per us
    ctas = row["grid"][0] * row["grid"][1] * row["grid"][2]
    threads = row["block"][0] * row["block"][1] * row["block"][2]
    k = op_kind(row)
    return ([math.log(max(analytical(row), 0.5)), math.log(max(row["bytes"] / bw, FLOOR_US)),
             math.log(max(row["flops"] / tc, FLOOR_US)), math.log(max(ctas / SMS, MIN_WAVE)),
             math.log(threads / 128), row["smem_bytes"] / 65536]
            + [float(group(row) == g) for g in GROUPS] + [float(k == x) for x in kinds]
            + [float(int8(row))] + epilogue_flags(row) + schedule_shape(row))


def feature_names(kinds):
    return (["ln A", "ln(bytes/BW)", "ln(flops/TC)", "ln(CTAs/SMs)", "ln(threads/128)", "smem/64KiB"]
            + [f"group {g}" for g in GROUPS] + [f"kind {k}" for k in kinds]
            + ["int8", "A prologue", "residual", "transcendental", "channel slice", "depth to space",
               "f32 out", "ln tile M", "ln tile N", "ln tile K", "stages", "ln split-K",
               "ln(1 + groups per tile)"])


# The fields of a kernel row that the fit reads (what --save keeps).
# "epilogue": a contraction's fused work (engine format 6 on; "" in older traces, absent in
# older files); "operand_dtype": a contraction's (format 7 on; likewise); "constant_bytes": the
# engine's constants (the profile's first line, to 0.1 MiB; absent in files before 2026-11-29b).
FIELDS = ["run", "model", "node", "op", "entry", "schedule", "epilogue", "operand_dtype", "grid",
          "block", "smem_bytes", "flops", "bytes", "analytical_us", "predicted_us", "time_us",
          "replay", "constant_bytes"]
_CONSTANTS = re.compile(r", constants ([0-9.]+) (B|KiB|MiB|GiB),")
_UNIT = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


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
        c = _CONSTANTS.search(text)
        constant_bytes = round(float(c.group(1)) * _UNIT[c.group(2)]) if c else 0
        for e in json.load(open(path))["traceEvents"]:
            a = dict(e["args"])
            a.update(run=run, model=_RUN.match(run).group(1), node=e["name"],
                     replay=float(m.group(1)) if m else None, constant_bytes=constant_bytes)
            a.setdefault("analytical_us", a["predicted_us"])
            a.setdefault("epilogue", "")
            a.setdefault("operand_dtype", "")
            rows.append({k: a[k] for k in FIELDS})
    return rows


def save(path, rows):
    with gzip.open(path, "wt") as f:
        for r in rows:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")


class Trees:
    """Regression trees, each complete to DEPTH levels in heap order (node i's children 2i+1 and
    2i+2): feature[t][i] and threshold[t][i] for the 2^DEPTH - 1 splits (feature -1: go left),
    leaf[t][j] for the 2^DEPTH leaves; a row goes left where its feature is <= the threshold."""

    def __init__(self, kinds):
        self.kinds, self.feature, self.threshold, self.leaf = kinds, [], [], []

    def add(self, x, residual, order):
        """Grows one tree on the rows' residuals by exact greedy splits, and adds it."""
        n_split = 2 ** DEPTH - 1
        feature, threshold = [-1] * n_split, [0.0] * n_split
        leaf = [0.0] * (2 ** DEPTH)
        order = np.asarray(order)  # [feature, row]: the rows in each feature's sorted order
        features_index = np.arange(len(order))[:, None]
        def grow(node, mask, level):
            # A sequential sum (cumsum's), as the split gains below: numpy's pairwise sum takes
            # another order on another CPU's vector units.
            n = int(mask.sum())
            total = float(np.cumsum(residual[mask])[-1]) if n else 0.0
            value = total / (n + LEAF_L2)
            best = (0.0, -1, 0.0)
            if level < DEPTH and n >= 2 * MIN_LEAF:
                parent = total * total / (n + LEAF_L2)
                # Every feature at once: each row of `o` the node's rows in that feature's order
                # (each holds n of them), the cumulative sums along it; the first feature and
                # the first split of the largest positive gain win, as one feature at a time.
                o = order[mask[order]].reshape(len(order), n)
                v, left = x[o, features_index], np.cumsum(residual[o], axis=1)[:, :-1]
                count = np.arange(1, n)
                ok = (v[:, :-1] < v[:, 1:]) & (count >= MIN_LEAF) & (count <= n - MIN_LEAF)
                gain = np.where(ok, left * left / (count + LEAF_L2) + (total - left) ** 2 / (n - count + LEAF_L2)
                                - parent, -1.0)
                at = np.argmax(gain, axis=1)
                for f in range(len(order)):
                    i = int(at[f])
                    if ok[f, i] and gain[f, i] > best[0]:
                        best = (float(gain[f, i]), f, float(0.5 * (v[f, i] + v[f, i + 1])))
            if best[1] < 0:  # a leaf: every leaf below this node takes its value
                first = node
                while first < n_split:
                    first = 2 * first + 1
                span = 2 ** (DEPTH - level)
                for j in range(first - n_split, first - n_split + span):
                    leaf[j] = RATE * value
                return
            feature[node], threshold[node] = best[1], best[2]
            grow(2 * node + 1, mask & (x[:, best[1]] <= best[2]), level + 1)
            grow(2 * node + 2, mask & (x[:, best[1]] > best[2]), level + 1)
        grow(0, np.ones(len(x), bool), 0)
        self.feature.append(feature)
        self.threshold.append(threshold)
        self.leaf.append(leaf)

    def tree_value(self, t, x):
        node, n_split = np.zeros(len(x), int), 2 ** DEPTH - 1
        f, thr = np.array(self.feature[t]), np.array(self.threshold[t])
        for _ in range(DEPTH):
            fi = f[node]
            right = (fi >= 0) & (x[np.arange(len(x)), np.maximum(fi, 0)] > thr[node])
            node = 2 * node + 1 + right
        return np.array(self.leaf[t])[node - n_split]

    def value(self, x):
        return sum((self.tree_value(t, x) for t in range(len(self.leaf))), np.zeros(len(x)))


def fit(rows):
    """ROUNDS trees boosted on ln(t / A)."""
    kinds = sorted({op_kind(r) for r in rows} - {None})
    x = np.array([features(r, kinds) for r in rows])
    # math.log and math.exp (the C library's, as predict.cc's std::log and std::exp), not numpy's:
    # numpy's vector log and exp differ in their last bits between CPUs (an AVX-512 machine's
    # from an AVX2 one's), and near-equal splits then go the other way: the trees, and so the
    # committed header, depended on the machine that fitted them.
    y = np.array([math.log(r["time_us"] / max(analytical(r), 0.5)) for r in rows])
    order = [np.argsort(x[:, f], kind="stable") for f in range(x.shape[1])]
    trees, f = Trees(kinds), np.zeros(len(rows))
    for _ in range(ROUNDS):
        trees.add(x, y - f, order)
        f += trees.tree_value(len(trees.leaf) - 1, x)
    return trees


def predict(trees, rows):
    """Each row's predicted time, at least MIN_KERNEL_US."""
    x = np.array([features(r, trees.kinds) for r in rows])
    a = np.array([max(analytical(r), 0.5) for r in rows])
    return [max(MIN_KERNEL_US, float(ai) * math.exp(float(v))) for ai, v in zip(a, trees.value(x))]


def cold_weights(row):
    """Whether the row's model reads its weights from DRAM in each replay: its constants exceed
    half of the L2 cache (L2_BYTES)."""
    return row["constant_bytes"] > L2_BYTES / 2


def gap_us(gap, predicted_us, row):
    """What a launch predicted to take `predicted_us` adds to a replay beyond its own time."""
    large, large_op, small, small_op, cold = gap
    contraction = bool(row["schedule"])
    extra = cold if contraction and cold_weights(row) else 0.0
    if predicted_us >= SMALL_KERNEL_US:
        return (large if contraction else large_op) + extra
    return (small if contraction else small_op) + extra


def launch_gap(rows, model):
    """The per-launch gaps (large contractions, large op kernels, small contractions, small op
    kernels, contractions of a model whose weights are cold): least squares over the runs of
    (replay - the kernels' measured sum) = the count of each kind of launch (large: predicted at
    SMALL_KERNEL_US or more) times its gap, + cold * (contraction launches, where cold_weights).
    A small kernel timed alone includes a launch latency that, in a graph, hides under its
    predecessor's tail: its gap is about 0 or below; a large one's is about half a us. A kernel
    timed alone reads its weights from L2 (every copy reads the same); in a replay of a model
    whose weights do not fit, from DRAM. (Contractions and op kernels apart: over the 62 runs of
    2026-11-29, each model left out in turn, the median model error 5.3% -> 5.1%.)"""
    by = collections.defaultdict(list)
    for r, p in zip(rows, predict(model, rows)):
        by[r["run"]].append((r, p))
    a, y = [], []
    for v in by.values():
        if v[0][0]["replay"]:
            kind = collections.Counter((p >= SMALL_KERNEL_US, bool(r["schedule"])) for r, p in v)
            cold = sum(bool(r["schedule"]) and cold_weights(r) for r, _ in v)
            a.append([kind[True, True], kind[True, False], kind[False, True], kind[False, False], cold])
            y.append(v[0][0]["replay"] - sum(r["time_us"] for r, _ in v))
    return tuple(float(g) for g in np.linalg.lstsq(np.array(a, float), np.array(y), rcond=None)[0])


def errors(rows, predicted, gap):
    kernel = [abs(p - r["time_us"]) / r["time_us"] for p, r in zip(predicted, rows)]
    by = collections.defaultdict(lambda: [0.0, 0, None])
    for p, r in zip(predicted, rows):
        b = by[r["run"]]
        b[0] += p + gap_us(gap, p, r)
        b[1] += 1
        b[2] = r["replay"]
    model = {run: (s - replay) / replay for run, (s, n, replay) in by.items()}
    return kernel, model


def leave_one_model_out(rows):
    """Each row's kernel error and each run's model error, predicted by a fit on the other
    models' rows (a model's fp16 and int8 runs are left out together)."""
    kernel, model = [None] * len(rows), {}
    for m in sorted({r["model"] for r in rows}):
        index = [i for i, r in enumerate(rows) if r["model"] == m]
        train = [r for r in rows if r["model"] != m]
        test = [rows[i] for i in index]
        model_m = fit(train)
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


def write_header(path, trees, gap, source, n_rows, runs):
    def arr(w, fmt):
        return "{" + ", ".join(fmt(v) for v in w) + "}"
    names = feature_names(trees.kinds)
    about = (f"The predictor's learned correction (compiler/predict.h), written by bench/predictor_fit.py: "
             f"do not edit. Fitted to {n_rows} kernels of {len(runs)} profiles ({', '.join(runs)}), "
             f"{source}. ln(t / A) is the sum over kTrees of the leaf each tree takes the launch's "
             f"features to, x as predict.cc's learned_features: " + "; ".join(f"x[{i}] {n}" for i, n in enumerate(names)) + ".")
    lines = ["// " + line for line in textwrap.wrap(about, 96)] + [
        "#pragma once",
        "",
        "namespace tessel::compiler::fit {",
        "",
        f"constexpr int kFeatures = {len(names)};",
        "// The op kinds with an indicator each, from x[12] on.",
        "constexpr const char* kKinds[] = {" + ", ".join(f'"{k}"' for k in trees.kinds) + "};",
        f"constexpr double kFloorUs = {FLOOR_US}, kMinWave = {MIN_WAVE};  // floors of x[1], x[2] and x[3]'s ratio",
        f"constexpr double kMinKernelUs = {MIN_KERNEL_US};  // the least time predicted for a launch",
        "// A complete tree of kDepth levels in heap order (node i's children 2i+1 and 2i+2): a launch",
        "// goes left where x[feature] <= threshold, or where feature is -1.",
        f"constexpr int kDepth = {DEPTH};",
        "struct Tree {",
        f"  int feature[{2 ** DEPTH - 1}];",
        f"  double threshold[{2 ** DEPTH - 1}];",
        f"  double leaf[{2 ** DEPTH}];",
        "};",
        "constexpr Tree kTrees[] = {",
    ]
    for f, t, v in zip(trees.feature, trees.threshold, trees.leaf):
        lines.append(f"    {{{arr(f, str)}, {arr(t, lambda x: f'{x:.17g}')}, {arr(v, lambda x: f'{x:.9g}')}}},")
    lines += [
        "};",
        "// A CUDA graph replay's time beyond its kernels' (each timed alone), per launch: of a",
        "// contraction and of an op kernel predicted at kSmallKernelUs or more, of smaller ones, and",
        "// in addition of a contraction of a model whose constants exceed half of the L2 cache.",
        f"constexpr double kSmallKernelUs = {SMALL_KERNEL_US};",
        f"constexpr double kLaunchGapUs = {gap[0]:.9g}, kOpLaunchGapUs = {gap[1]:.9g};",
        f"constexpr double kSmallLaunchGapUs = {gap[2]:.9g}, kSmallOpLaunchGapUs = {gap[3]:.9g};",
        f"constexpr double kColdWeightsGapUs = {gap[4]:.9g};",
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
    ap.add_argument("--out", help="write the C++ header here (src/compiler/predict_fit.h)")
    ap.add_argument("--source", default="measured on the GPU", help="device, date and commit, for the header")
    ap.add_argument("--split", default=os.path.join(os.path.dirname(__file__), "predictor_split.json"))
    ap.add_argument("--held-out", metavar="SOURCE", nargs="+",
                    help="also score the fit on the held-out runs' traces in these directories, or "
                    "files --save wrote (never fitted on)")
    ap.add_argument("--held-out-set", choices=("held_out", "test", "test2", "next_test"), default="held_out",
                    help="which runs of the split --held-out scores: held_out (default; the "
                    "validation set of predictor changes, and the int8 held-out runs, against a "
                    "fit on the fit runs), test (scored once, after them, against a fit on the "
                    "fit and validation runs together: the split's test_rule), test2 (against a "
                    "fit on fit, validation, test and unseen: its test2_rule) or next_test "
                    "(against a fit on every run scored before, test2's too: its "
                    "next_test_rule)")
    ap.add_argument("--no-check", action="store_true",
                    help="skip the leave-one-model-out check (the fit and the header alone)")
    ap.add_argument("--save", metavar="FILE.jsonl.gz",
                    help="write the fit rows (and the held-out ones, to FILE with .held_out before "
                    ".jsonl.gz) in the compact form load() reads")
    args = ap.parse_args()
    split = json.load(open(args.split))
    int8 = split.get("int8", {"fit": [], "held_out": []})
    runs = {f"{m}_b{b}" for m in split["fit"]["models"] for b in split["fit"]["batches"][m]}
    runs |= {r.replace(":", "_b") + "_int8" for r in int8["fit"]}
    validation = {r.replace(":", "_b") for r in split["held_out"]}
    validation |= {r.replace(":", "_b") + "_int8" for r in int8["held_out"]}
    def named(which):
        return {r.replace(":", "_b") for r in split.get(which, [])}

    # Each test set is fitted on only by the changes after the one it scored; the next change's
    # test runs (predictor_split.json's next_test_rule) by none.
    later = split.get("test2", []) + split.get("next_test", [])
    if args.held_out_set == "held_out":
        held = validation
        never_fit = split["held_out"] + split.get("test", []) + int8["held_out"] + later
    elif args.held_out_set == "test":
        held = named("test")
        runs |= validation
        never_fit = split["test"] + later
    elif args.held_out_set == "test2":
        held = named("test2")
        runs |= validation | named("test") | named("unseen")
        never_fit = list(later)
    else:
        held = named("next_test")
        runs |= validation | named("test") | named("unseen") | named("test2")
        never_fit = list(split["next_test"])
    fit_models = {_RUN.match(r).group(1) for r in runs}
    mixed = sorted(fit_models & {h.split(":")[0] for h in never_fit})
    if mixed:
        sys.exit(f"predictor_fit.py: {args.split} fits on held-out models: {', '.join(mixed)}")
    rows = [r for s in args.sources for r in load(s, runs)]
    if not rows:
        sys.exit(f"predictor_fit.py: no fit traces in {', '.join(args.sources)}")
    before = [abs(analytical(r) - r["time_us"]) / r["time_us"] for r in rows]
    print(f"{len(rows)} kernels of {len({r['run'] for r in rows})} profiles")
    print(f"analytical alone: median kernel error {statistics.median(before):.1%}")
    if not args.no_check:
        kernel, model = leave_one_model_out(rows)
        report("learned, each model left out in turn", rows, kernel, model)
    if args.save:
        save(args.save, rows)
        print(f"wrote {args.save}")
    final = fit(rows)
    gap = launch_gap(rows, final)
    if args.held_out:
        what = {"held_out": "held-out", "test": "test", "test2": "second test",
                "next_test": "next test"}[args.held_out_set]
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
