#!/usr/bin/env python3
"""The GPU pass pipeline end to end on small model-zoo networks, on the CPU.

For each model: generate it (tools/models/gen_models.py --small), run it with `tessel run`,
rewrite it with `tessel opt --passes=<GPU pipeline>` for fp16 and fp32, run the resulting
textual IR on the same seeded input, and check
  * the outputs agree: max |out - ref| <= tol * max |ref|, tol 2e-2 (fp16) / 1e-4 (fp32);
  * the form the lowering expects: every conv a tessel.Conv with its BN, activation, residual
    and depth_to_space fused (no such op left standalone), and only the two edge Transposes
    (none carries a layout_reason).

    python3 tests/passes/gpu_pipeline_models.py --tessel build/src/cli/tessel --source .

Exits non-zero with a message per failure. (sr_net and mobilenet_v2 keep it to ~10 s: depthwise
convs, ReLU6 clips, residual adds, global pool + dense, subpixel stores, a 3-channel tail.)
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

MODELS = ["sr_net", "mobilenet_v2"]
# passes::gpu_pipeline(options) in src/passes/pipeline.cc, for each precision.
PIPELINES = {
    "fp16": "canonicalize,fold-constants,fuse-norm-gelu,fold-batch-norm,lower-batch-norm,"
            "convert-layout,fold-transposes,choose-precision-fp16,"
            "fuse,depth-to-space-dcr,dce,split-wide-concats,concat-into-slices",
    "fp32": "canonicalize,fold-constants,fuse-norm-gelu,fold-batch-norm,lower-batch-norm,"
            "convert-layout,fold-transposes,fuse,depth-to-space-dcr,"
            "dce,split-wide-concats,concat-into-slices",
}
TOLERANCE = {"fp16": 2e-2, "fp32": 1e-4}
# In these models every one of these ops follows a conv and must be fused into it (or folded).
UNFUSED = ("Conv", "BatchNormalization", "Relu", "LeakyRelu", "Clip", "Add", "DepthToSpace",
           "tessel.DepthToSpace")


def run_model(tessel, model, out_dir):
    subprocess.run([tessel, "run", model, "--seed", "7", "--output-dir", out_dir], check=True,
                   stdout=subprocess.DEVNULL)
    return np.load(os.path.join(out_dir, "output.npy")).astype(np.float64)


def check_form(tir):
    """Problems with the rewritten graph's form, as messages."""
    ops = re.findall(r"= ([A-Za-z.]+)\(", tir)
    problems = []
    for op in UNFUSED:
        if op in ops:
            problems.append("%d %s left" % (ops.count(op), op))
    if ops.count("Transpose") > 2 or "layout_reason" in tir:
        problems.append("%d Transposes (interior ones: %s)" % (
            ops.count("Transpose"), re.findall(r'layout_reason = "([^"]*)"', tir)))
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tessel", required=True, help="the tessel executable")
    ap.add_argument("--source", required=True, help="the tessel source tree")
    args = ap.parse_args()
    failures = []
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, os.path.join(args.source, "tools/models/gen_models.py"),
                        "--out", d, "--small", "--models", ",".join(MODELS)], check=True,
                       stdout=subprocess.DEVNULL)
        for m in MODELS:
            onnx_path = os.path.join(d, m + ".onnx")
            ref = run_model(args.tessel, onnx_path, os.path.join(d, m + ".ref"))
            for precision, passes in PIPELINES.items():
                tir = os.path.join(d, "%s.%s.tir" % (m, precision))
                subprocess.run([args.tessel, "opt", "--passes=" + passes, onnx_path, "-o", tir],
                               check=True)
                with open(tir) as f:
                    failures += ["%s %s: %s" % (m, precision, p) for p in check_form(f.read())]
                out = run_model(args.tessel, tir, os.path.join(d, "%s.%s" % (m, precision)))
                err = np.abs(out - ref).max() / np.abs(ref).max()
                print("%-14s %s  max error / max |ref| = %.2e" % (m, precision, err))
                if not err <= TOLERANCE[precision]:
                    failures.append("%s %s: relative error %.3g > %g" % (
                        m, precision, err, TOLERANCE[precision]))
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
