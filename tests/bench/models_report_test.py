#!/usr/bin/env python3
"""bench/models_report.py and bench/zoo.py without a GPU: a made-up work directory of
scripts/gpu_models.sh (three runs: one faster than torch.compile, one slower, one whose compile
failed) gives the table, the per-batch summary (geomean speed-ups, the runs below
torch.compile) and the accuracy verdicts; two models.json files merge into one table, the later
file's run replacing the earlier's; the zoo's parts cover every run once."""
import contextlib
import io
import json
import math
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import models_report  # noqa: E402
import zoo  # noqa: E402

failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)


def write_run(work, name, batch, median_ms, logits_noise):
    base = os.path.join(work, "%s_b%d" % (name, batch))
    rng = np.random.default_rng(batch)
    ref = rng.standard_normal((batch, 10))
    ref[np.arange(batch), np.arange(batch) % 10] += 20
    np.save(base + ".ref.npy", ref.astype(np.float32))
    np.save(base + ".torch16.npy", (ref + 1e-3 * rng.standard_normal(ref.shape)).astype(np.float32))
    os.makedirs(base + ".out", exist_ok=True)
    np.save(os.path.join(base + ".out", "output.npy"),
            (ref + logits_noise * rng.standard_normal(ref.shape)).astype(np.float32))
    with open(base + ".bench.json", "w") as f:
        json.dump({"median_ms": median_ms, "p90_ms": median_ms * 1.01, "throughput_per_s": 1.0,
                   "peak_device_bytes": 2**20}, f)


def main():
    with tempfile.TemporaryDirectory() as work:
        with open(os.path.join(work, "torch_models.csv"), "w") as f:
            f.write("fast,1,2.0,1.0\nslow,32,4.0,3.0\nbroken,1,1.0,1.0\n")
        with open(os.path.join(work, "tessel.csv"), "w") as f:
            f.write("fast,1,3.0,1.0,ok\nslow,32,3.0,1.0,ok\nbroken,1,nan,nan,compile-failed\n")
        write_run(work, "fast", 1, 0.5, 1e-3)    # 2x torch.compile
        write_run(work, "slow", 32, 3.75, 1e-3)  # 0.8x torch.compile
        runs = models_report.collect(work)
        md = models_report.table(runs, "Test GPU")
        expect("| fast | 1 | 0.500 |" in md, "the fast row:\n" + md)
        expect("Batch 1: 1 of 2 runs completed, 1 pass the accuracy bar; geomean speed-up 2.00x "
               "over torch.compile (1 models), 4.00x over eager + graph; below torch.compile: "
               "none." in md, "the batch-1 summary:\n" + md)
        expect("Batch 32: 1 of 1 runs completed, 1 pass the accuracy bar; geomean speed-up 0.80x "
               "over torch.compile (1 models), 1.07x over eager + graph; below torch.compile: "
               "slow 0.80x." in md, "the batch-32 summary:\n" + md)
        expect("broken b1: compile-failed" in md, "the failed run's note:\n" + md)
        # Two runs' JSON: the second's row of `slow` replaces the first's.
        a, b = os.path.join(work, "a.json"), os.path.join(work, "b.json")
        with open(a, "w") as f:
            json.dump({"device": "Test GPU", "runs": [models_report.no_nan(r) for r in runs]}, f)
        slow = dict(runs[1], median_ms=2.5)
        with open(b, "w") as f:
            json.dump({"device": "Test GPU", "runs": [models_report.no_nan(slow)]}, f)
        merged, devices = models_report.merge([a, b])
        expect(devices == ["Test GPU"], "devices %s" % devices)
        expect([(r["model"], r["batch"]) for r in merged] == [("fast", 1), ("slow", 32), ("broken", 1)],
               "merged runs %s" % [(r["model"], r["batch"]) for r in merged])
        expect(merged[1]["median_ms"] == 2.5, "the later file's run wins")
        expect(math.isnan(merged[2]["median_ms"]), "null reads back as NaN")
        md = models_report.table(merged, "Test GPU")
        expect("geomean speed-up 1.20x over torch.compile" in md, "merged batch-32 summary:\n" + md)
        out_md, out_json = os.path.join(work, "m.md"), os.path.join(work, "m.json")
        with contextlib.redirect_stdout(io.StringIO()):
            code = models_report.main(["--merge", a, b, "--md", out_md, "--json", out_json])
        expect(code == 1, "a failed run makes the merge exit 1 (got %d)" % code)
        expect(os.path.exists(out_md) and "| slow | 32 | 2.500 |" in open(out_md).read(), "m.md")
    # The zoo's parts: every (model, batch) once, both batches of a model in one part.
    whole = zoo.zoo_runs()
    parts = [zoo.zoo_runs(k, 5) for k in range(1, 6)]
    expect(sorted(whole) == sorted(r for p in parts for r in p), "the parts cover the zoo")
    expect(len(whole) == 2 * len(zoo.ZOO_MODELS) and len(set(whole)) == len(whole), "zoo runs")
    for p in parts:
        models = [m for m, _ in p]
        expect(all(models.count(m) == 2 for m in models), "a model's two batches in one part")
    expect("sr_net" not in {m for m, _ in whole}, "the zoo is torchvision's")
    for f in failures:
        print("FAIL " + f)
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
