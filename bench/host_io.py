#!/usr/bin/env python3
"""What a run on host arrays costs beyond the GPU's own time: a tessel session on CUDA fed numpy
arrays (InferenceSession.run) and a batch gathered from one-row pieces, as a server's batcher
forms it (InferenceSession.run_gathered), each timed on the wall clock (median of REPS after
warm-up, outputs back in numpy), next to the engine's device time for the batch (the CUDA
graph's replay, `tessel bench --batch B` on the same model).

    host_io.py MODEL.onnx [--batches 1,32] [--reps 30]   (PYTHONPATH: the tessel package;
                                                           TESSEL_BIN: the tessel binary)
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import tessel


def median_ms(fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def device_ms(model, batch):
    """tessel bench's median replay time of `batch`, or None without TESSEL_BIN."""
    binary = os.environ.get("TESSEL_BIN")
    if not binary:
        return None
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "bench.json")
        subprocess.run([binary, "bench", model, "--batch", str(batch), "--json", out],
                       check=True, capture_output=True)
        return json.load(open(out))["median_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    sess = tessel.InferenceSession(args.model, device="cuda", batch=(1, max(batches)))
    (inp,) = sess.get_inputs()
    rng = np.random.default_rng(0)
    print("%-6s %10s %10s %12s %14s" % ("batch", "MB in", "device ms", "run() ms",
                                        "gathered ms"))
    for b in batches:
        x = rng.uniform(-1, 1, size=[b] + list(inp.shape[1:])).astype(np.float32)
        pieces = [x[k:k + 1].copy() for k in range(b)]
        run = median_ms(lambda: sess.run(None, {inp.name: x}), args.reps)
        gathered = median_ms(lambda: sess.run_gathered(None, {inp.name: pieces}), args.reps)
        same = np.array_equal(sess.run(None, {inp.name: x})[0],
                              sess.run_gathered(None, {inp.name: pieces})[0])
        dev = device_ms(args.model, b)
        print("%-6d %10.1f %10s %12.3f %14.3f%s" % (
            b, x.nbytes / 1e6, "%.3f" % dev if dev else "-", run, gathered,
            "" if same else "  (outputs differ!)"))
        if not same:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
