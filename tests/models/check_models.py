#!/usr/bin/env python3
"""Runs every generated model (small-input variants) through `tessel run --device cpu` and
through ONNX Runtime's CPU execution on the same seeded input, and compares the outputs.

ONNX Runtime is the independent oracle here: it is used only by this test. Graph
optimisations are disabled so that it evaluates the model as written (QDQ pairs stay
quantize/dequantize steps instead of being fused into integer kernels).

Exit code 0 when every model matches; prints one line per model and a closing count line.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

# fp32 tolerance on the relative L2 error of each output. The int8 QDQ model rounds to a
# quantisation grid between layers: a last-bit difference in fp32 accumulation order can
# move a value across a rounding boundary, so it gets a tolerance of a few quanta.
TOLERANCE = {"default": 1e-4, "resnet18_int8_qdq": 2e-2}


def rel_l2(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    denom = np.linalg.norm(b)
    return np.linalg.norm(a - b) / (denom if denom > 0 else 1.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessel", required=True, help="path of the tessel binary")
    ap.add_argument("--source", required=True, help="repository root")
    ap.add_argument("--models", default="", help="comma-separated subset")
    args = ap.parse_args()

    # The generated models, inputs and outputs (about 0.3 GB) go when the check ends: each run
    # left its folder behind, some 40 GB over a few days of test runs.
    with tempfile.TemporaryDirectory(prefix="tessel_models_") as work:
        return check(args, work)


def check(args, work):
    gen = [sys.executable, os.path.join(args.source, "tools/models/gen_models.py"),
           "--out", work, "--small", "--seed", "7"]
    if args.models:
        gen += ["--models", args.models]
    subprocess.run(gen, check=True, stdout=subprocess.DEVNULL)
    names = sorted(f[:-5] for f in os.listdir(work) if f.endswith(".onnx"))
    if args.models:
        names = [n for n in names if n in args.models.split(",")]

    passed = failed = 0
    rng = np.random.default_rng(11)
    for name in names:
        path = os.path.join(work, name + ".onnx")
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        feeds, flags = {}, []
        for i in sess.get_inputs():
            shape = [d if isinstance(d, int) else 1 for d in i.shape]
            x = rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
            feeds[i.name] = x
            npy = os.path.join(work, f"{name}.{i.name}.npy")
            np.save(npy, x)
            flags += ["--input", f"{i.name}={npy}"]
        expected = sess.run(None, feeds)
        out_dir = os.path.join(work, name + ".out")
        t0 = time.time()
        r = subprocess.run([args.tessel, "run", path, "--device", "cpu", "--output-dir", out_dir] + flags,
                           capture_output=True, text=True)
        secs = time.time() - t0
        if r.returncode != 0:
            print(f"FAIL {name}: tessel exited {r.returncode}: {r.stderr.strip()}")
            failed += 1
            continue
        ok = True
        worst = 0.0
        for o, exp in zip(sess.get_outputs(), expected):
            safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in o.name)
            got = np.load(os.path.join(out_dir, safe + ".npy"))
            if got.shape != exp.shape:
                print(f"FAIL {name}: output {o.name} shape {got.shape}, expected {exp.shape}")
                ok = False
                continue
            err = rel_l2(got, exp)
            worst = max(worst, err)
            if not np.isfinite(got).all() or err > TOLERANCE.get(name, TOLERANCE["default"]):
                ok = False
        top1 = ""
        if expected[0].ndim == 2 and expected[0].shape[1] > 1:
            top1 = f" top1 {int(np.argmax(expected[0]))}"
        status = "ok  " if ok else "FAIL"
        print(f"{status} {name}: rel L2 {worst:.2e}{top1} ({secs:.1f} s in tessel)")
        passed += ok
        failed += not ok
    print(f"models: {passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
